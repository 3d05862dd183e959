#!/usr/bin/env bash
# The bench (bench/, docs/performance.md): starts a redis-server and a real
# Apache Kafka broker on free loopback ports, as scripts/test.sh does, runs
# `go run ./bench` against them with the arguments given, and stops both
# again, also when something fails.
#
#   scripts/bench.sh                      the whole bench (make bench)
#   scripts/bench.sh -events 20000 ...    any of bench's flags (make bench-smoke)
#   scripts/bench.sh -kafka fake ...      the bench on an in-process kfake: no broker is started
#
# FRAUDWATCH_KAFKA_VERSION picks the broker (default: the newest). A second
# server, Redis 8.2.3 (scripts/redis8.sh, from a PyPI wheel), is started
# beside the first for bench's -second-redis rows;
# FRAUDWATCH_BENCH_SECOND_REDIS=0 starts none (nor do -second-redis "" runs
# need one).
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf 'bench.sh: %s\n' "$*" >&2; }

# shellcheck source=scripts/servers.sh
. scripts/servers.sh
install_redis

work=$(mktemp -d)
second_pid=""
kafka_state="$work/kafka"
cleanup() {
  status=$?
  if [ "$status" -ne 0 ] && [ -s "$kafka_state/kafka.log" ]; then
    log "Kafka broker log (last 40 lines):"
    tail -n 40 "$kafka_state/kafka.log" >&2 || true
  fi
  stop_kafka "$kafka_state"
  stop_redis
  if [ -n "$second_pid" ]; then
    kill "$second_pid" 2>/dev/null || true
    wait "$second_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The bench's -kafka flag, its last value as Go's flag package reads it:
# with -kafka fake the bench starts an in-process kfake, and no broker (nor
# Java, nor its jars) is needed.
kafka=real
prev=""
for a in "$@"; do
  case "$prev" in -kafka | --kafka) kafka=$a ;; esac
  case "$a" in -kafka=* | --kafka=*) kafka=${a#*=} ;; esac
  prev=$a
done

# The second server first, with start_redis's variables put back after: its
# pid stays in second_pid, for cleanup.
if [ "${FRAUDWATCH_BENCH_SECOND_REDIS:-1}" = 0 ]; then
  :
elif ! second=$(scripts/redis8.sh fetch); then
  log "no Redis 8 (scripts/redis8.sh fetch failed): no second server's rows"
else
  mkdir -p "$work/second"
  redis_server="$second/redis-server" start_redis "$work/second"
  second_pid=$redis_pid redis_pid=""
  export FRAUDWATCH_BENCH_SECOND_REDIS_ADDR="$REDIS_ADDR"
  log "second server: $("$second/redis-server" --version | awk '{print $3}') on $REDIS_ADDR"
fi
start_redis "$work"
export FRAUDWATCH_BENCH_REDIS_ADDR="$REDIS_ADDR"
if [ "$kafka" = fake ]; then
  log "$(redis_server_version) on $REDIS_ADDR; no Kafka broker (-kafka fake)"
else
  want=${FRAUDWATCH_KAFKA_VERSION:-$(scripts/kafka.sh default-version)}
  start_kafka "$want" "$kafka_state"
  export FRAUDWATCH_BENCH_KAFKA_BROKERS="$KAFKA_ADDR"
  export FRAUDWATCH_BENCH_KAFKA_VERSION FRAUDWATCH_BENCH_KAFKA_PID
  FRAUDWATCH_BENCH_KAFKA_PID=$(cat "$kafka_state/kafka.pid" 2>/dev/null || true)
  FRAUDWATCH_BENCH_KAFKA_VERSION=$(cat "$kafka_state/version")
  log "$(redis_server_version) on $REDIS_ADDR, Kafka $FRAUDWATCH_BENCH_KAFKA_VERSION on $KAFKA_ADDR"
fi
go run ./bench "$@"
