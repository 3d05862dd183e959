#!/usr/bin/env bash
# The whole test suite from a fresh clone: installs what is missing, starts a
# real redis-server and a real Apache Kafka broker (scripts/kafka.sh) on free
# loopback ports, runs gofmt, go vet and go test -race over every package, and
# stops both again, also when something fails. CI runs exactly this (.ci/run).
#
#   scripts/test.sh              the whole suite
#   scripts/test.sh PACKAGE...   only go test -race -count=1 PACKAGE..., with the
#                                same servers (what make test-compat runs);
#                                FRAUDWATCH_TEST_SKIP, when set, is its -skip
#                                pattern (.ci/run's runs after the README's
#                                suite leave out tests that use no server of
#                                theirs)
#
# FRAUDWATCH_KAFKA_VERSION picks the broker (default: the newest,
# scripts/kafka.sh default-version). A broker that does not start fails the
# run. FRAUDWATCH_TEST_KAFKA=fake is the developer's quick run: Kafka tests
# then use the in-process kfake broker, and no real Kafka is tested.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf 'test.sh: %s\n' "$*"; }

# shellcheck source=scripts/servers.sh
. scripts/servers.sh
install_redis

# The status page is tested in a real headless browser: Debian's chromium.
if ! command -v chromium >/dev/null 2>&1; then
  log "installing chromium from Debian's packages (the status page's browser test)"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends chromium >/dev/null
fi
export FRAUDWATCH_TEST_CHROMIUM="$(command -v chromium)"
# The Prometheus alert rules are unit-tested with promtool: Debian's
# prometheus package has it.
if ! command -v promtool >/dev/null 2>&1; then
  log "installing promtool (Debian's prometheus package; its server is not started)"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends prometheus >/dev/null
fi
export FRAUDWATCH_TEST_PROMTOOL="$(command -v promtool)"
# Events as other clients write them are tested with Python's
# confluent-kafka (librdkafka), from PyPI, pinned by hash, and Java's
# kafka-clients, from Maven Central.
if [ -z "${FRAUDWATCH_TEST_PYTHON:-}" ]; then
  FRAUDWATCH_TEST_PYTHON=$(scripts/pyclient.sh)
fi
export FRAUDWATCH_TEST_PYTHON
if [ -z "${FRAUDWATCH_TEST_JAVA_PRODUCER:-}" ]; then
  FRAUDWATCH_TEST_JAVA_PRODUCER=$(scripts/javaclient.sh)
fi
export FRAUDWATCH_TEST_JAVA_PRODUCER
# What tests keep for people to look at (the status page's screenshot).
export FRAUDWATCH_TEST_ARTIFACTS="${FRAUDWATCH_TEST_ARTIFACTS:-$PWD/artifacts}"

kafka_mode=${FRAUDWATCH_TEST_KAFKA:-real}
case "$kafka_mode" in
  real | fake) ;;
  *)
    log "FRAUDWATCH_TEST_KAFKA is '$kafka_mode'; it must be 'real' (the default) or 'fake'"
    exit 2
    ;;
esac

not_real_kafka() {
  log "*************************************************************************"
  log "FRAUDWATCH_TEST_KAFKA=fake: Kafka tests use the in-process kfake broker,"
  log "NOT a real Apache Kafka. Run without it before you push."
  log "*************************************************************************"
}

log "downloading Go modules"
go mod download

work=$(mktemp -d)
kafka_state="$work/kafka"
kafka_version=""
server=""
cleanup() {
  status=$?
  # The broker's log first, before stopping it adds its shutdown to the end.
  if [ "$status" -ne 0 ] && [ -s "$kafka_state/kafka.log" ]; then
    log "Kafka broker log (last 40 lines; all of it in $kafka_state/kafka.log, kept):"
    tail -n 40 "$kafka_state/kafka.log" >&2 || true
  fi
  stop_kafka "$kafka_state"
  stop_redis
  stop_redis_cluster
  if [ "$status" -ne 0 ] && [ -s "$work/redis.log" ]; then
    log "$redis_server's log (last 20 lines):"
    tail -n 20 "$work/redis.log" >&2 || true
  fi
  if [ "$status" -ne 0 ] && [ -s "$kafka_state/kafka.log" ]; then
    rm -rf "$kafka_state/data"
  else
    rm -rf "$work"
  fi
  if [ "$kafka_mode" = fake ]; then
    not_real_kafka
  elif [ -n "$kafka_version" ]; then
    if [ "$status" -eq 0 ]; then
      log "passed against Kafka $kafka_version and $server"
    else
      log "FAILED (exit $status) against Kafka $kafka_version and $server"
    fi
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

start_redis "$work"
export FRAUDWATCH_TEST_REDIS_ADDR="$REDIS_ADDR"
server=$(redis_server_version)
log "$server on $REDIS_ADDR"
# FRAUDWATCH_TEST_REDIS=cluster (make test-cluster): the tests that use the
# shared Redis use a Redis Cluster of 3 masters and 3 replicas instead.
# FRAUDWATCH_TEST_REDIS_SERVER and FRAUDWATCH_TEST_REDIS_CLI run other
# programs, for both (make test-valkey; scripts/servers.sh).
if [ "${FRAUDWATCH_TEST_REDIS:-single}" = cluster ]; then
  start_redis_cluster "$work"
  export FRAUDWATCH_TEST_REDIS_CLUSTER="$REDIS_CLUSTER_ADDRS"
  log "$server cluster of 3 masters and 3 replicas on $REDIS_CLUSTER_ADDRS"
fi

if [ "$kafka_mode" = real ]; then
  if [ -n "${FRAUDWATCH_TEST_KAFKA_BROKERS:-}" ]; then
    log "ignoring FRAUDWATCH_TEST_KAFKA_BROKERS=$FRAUDWATCH_TEST_KAFKA_BROKERS: this script tests against a broker it starts (run go test directly to use yours)"
  fi
  want=${FRAUDWATCH_KAFKA_VERSION:-$(scripts/kafka.sh default-version)}
  if ! start_kafka "$want" "$kafka_state"; then
    log "Kafka $want did not start, so the run fails (FRAUDWATCH_TEST_KAFKA=fake tests against the in-process fake instead)"
    exit 1
  fi
  kafka_version=$(cat "$kafka_state/version")
  export FRAUDWATCH_TEST_KAFKA_BROKERS="$KAFKA_ADDR"
  log "Kafka $kafka_version on $KAFKA_ADDR"
else
  unset FRAUDWATCH_TEST_KAFKA_BROKERS
  not_real_kafka
fi

if [ $# -gt 0 ]; then
  go test -race -count=1 ${FRAUDWATCH_TEST_SKIP:+-skip "$FRAUDWATCH_TEST_SKIP"} "$@"
  exit 0
fi

unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
  log "gofmt would change:"
  echo "$unformatted" >&2
  exit 1
fi
go vet ./...
go test -race -count=1 ./...
