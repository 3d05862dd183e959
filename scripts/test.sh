#!/usr/bin/env bash
# The whole test suite from a fresh clone: installs what is missing, starts a
# real redis-server on a free loopback port, runs gofmt, go vet and
# go test -race over every package, and stops the server again, also when
# something fails. CI runs exactly this (.ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf 'test.sh: %s\n' "$*"; }

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
  log "installing redis-server from Debian's packages"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq redis-server redis-tools >/dev/null
fi

log "downloading Go modules"
go mod download

work=$(mktemp -d)
redis_pid=""
cleanup() {
  status=$?
  if [ -n "$redis_pid" ]; then
    kill "$redis_pid" 2>/dev/null || true
    wait "$redis_pid" 2>/dev/null || true
  fi
  if [ "$status" -ne 0 ] && [ -s "$work/redis.log" ]; then
    log "redis-server log (last 20 lines):"
    tail -n 20 "$work/redis.log" >&2 || true
  fi
  rm -rf "$work"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A random port that turns out to be taken makes redis-server exit at once;
# then the next candidate is tried.
start_redis() {
  for _ in $(seq 1 20); do
    port=$((20000 + RANDOM % 40000))
    redis-server --bind 127.0.0.1 --port "$port" --save '' --appendonly no \
      --dir "$work" --logfile "$work/redis.log" &
    redis_pid=$!
    for _ in $(seq 1 50); do
      if ! kill -0 "$redis_pid" 2>/dev/null; then
        break
      fi
      if [ "$(redis-cli -p "$port" ping 2>/dev/null)" = "PONG" ]; then
        REDIS_ADDR="127.0.0.1:$port"
        return 0
      fi
      sleep 0.1
    done
    kill "$redis_pid" 2>/dev/null || true
    wait "$redis_pid" 2>/dev/null || true
    redis_pid=""
  done
  log "could not start redis-server"
  return 1
}
start_redis
export FRAUDWATCH_TEST_REDIS_ADDR="$REDIS_ADDR"
log "redis-server $(redis-server --version | awk '{print $3}') on $REDIS_ADDR"

unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
  log "gofmt would change:"
  echo "$unformatted" >&2
  exit 1
fi
go vet ./...
go test -race -count=1 ./...
