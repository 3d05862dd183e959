# Sourced by scripts/test.sh and scripts/bench.sh: the servers both need, on
# free loopback ports, started and stopped the same way.
#
#   install_redis              redis-server and redis-cli from Debian's packages, when missing
#   redis_server_version       the server's name and version, "Redis 7.0.15" or "Valkey 8.1.8"
#   start_redis DIR            a redis-server with its files in DIR; sets REDIS_ADDR and redis_pid
#   stop_redis                 stops it; safe to repeat
#   start_kafka VERSION DIR    a real Kafka broker (scripts/kafka.sh) with its state in DIR; sets KAFKA_ADDR
#   stop_kafka DIR             stops it; safe to repeat, and after a failed start
#
# FRAUDWATCH_TEST_REDIS_SERVER and FRAUDWATCH_TEST_REDIS_CLI name other
# programs to run instead of redis-server and redis-cli (make test-valkey:
# valkey-server and valkey-cli, from scripts/valkey.sh; make test-redis8:
# Redis 8's redis-server, from scripts/redis8.sh); the tests' own
# servers (lua/redistest) follow the same variables.
#
# The caller defines log() and sets `set -euo pipefail`.

redis_server=${FRAUDWATCH_TEST_REDIS_SERVER:-redis-server}
redis_cli=${FRAUDWATCH_TEST_REDIS_CLI:-redis-cli}

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

install_redis() {
  local p
  for p in "$redis_server" "$redis_cli"; do
    if [[ "$p" == */* ]] && [ ! -x "$p" ]; then
      log "$p is not a program (FRAUDWATCH_TEST_REDIS_SERVER, FRAUDWATCH_TEST_REDIS_CLI)"
      return 1
    fi
  done
  if ! command -v "$redis_server" >/dev/null 2>&1 || ! command -v "$redis_cli" >/dev/null 2>&1; then
    log "installing redis-server from Debian's packages"
    as_root apt-get update -qq
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq redis-server redis-tools >/dev/null
  fi
}

# "Redis server v=7.0.15 sha=…" becomes "Redis 7.0.15".
redis_server_version() { "$redis_server" --version | awk '{sub(/^v=/, "", $3); print $1, $3}'; }

# A port something listens on already (another run's server: other
# people's tests and benches share this machine's loopback) is passed over: the
# ping below would reach that server and take it for ours. One taken
# between the look and the start makes redis-server exit at once, which
# the look at our process after the PONG sees; then the next candidate
# is tried.
port_taken() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
redis_pid=""
start_redis() {
  local dir=$1 port
  for _ in $(seq 1 20); do
    port=$((20000 + RANDOM % 40000))
    if port_taken "$port"; then continue; fi
    "$redis_server" --bind 127.0.0.1 --port "$port" --save '' --appendonly no \
      --dir "$dir" --logfile "$dir/redis.log" &
    redis_pid=$!
    for _ in $(seq 1 50); do
      if ! kill -0 "$redis_pid" 2>/dev/null; then
        break
      fi
      if [ "$("$redis_cli" -p "$port" ping 2>/dev/null)" = "PONG" ]; then
        sleep 0.1
        if ! kill -0 "$redis_pid" 2>/dev/null; then
          break # the PONG was another server's
        fi
        REDIS_ADDR="127.0.0.1:$port"
        return 0
      fi
      sleep 0.1
    done
    kill "$redis_pid" 2>/dev/null || true
    wait "$redis_pid" 2>/dev/null || true
    redis_pid=""
  done
  log "could not start $redis_server"
  return 1
}

stop_redis() {
  if [ -n "$redis_pid" ]; then
    kill "$redis_pid" 2>/dev/null || true
    wait "$redis_pid" 2>/dev/null || true
    redis_pid=""
  fi
}

start_kafka() {
  KAFKA_ADDR=$(scripts/kafka.sh start "$1" "$2")
}

stop_kafka() { scripts/kafka.sh stop "$1" || true; }

# A Redis Cluster of 3 masters, each with a replica, on free loopback ports
# (make test-cluster; ports taken are passed over as in start_redis). Its seeds end up in REDIS_CLUSTER_ADDRS.
redis_cluster_pids=()
start_redis_cluster() {
  local dir=$1 base port addrs=() ok why attempt
  for attempt in $(seq 1 10); do
    # Below Linux's ephemeral ports (32768-60999), node and bus (port +
    # 10000) alike: after a suite's many connections a random port there
    # was often some socket's own, and Valkey's nodes failed to listen on
    # it ("Failed listening on port 53058 (cluster)", six attempts in a
    # row in CI) where nothing listened for port_taken to see.
    base=$((10000 + RANDOM % 12700))
    redis_cluster_pids=()
    addrs=()
    ok=1
    for i in 0 1 2 3 4 5; do
      if port_taken $((base + i)); then ok=0; fi
    done
    if [ "$ok" = 0 ]; then
      log "cluster attempt $attempt: a port of $base-$((base + 5)) is taken"
      continue
    fi
    for i in 0 1 2 3 4 5; do
      port=$((base + i))
      mkdir -p "$dir/cluster-$port"
      "$redis_server" --bind 127.0.0.1 --port "$port" --cluster-enabled yes \
        --cluster-config-file "$dir/cluster-$port/nodes.conf" --cluster-node-timeout 2000 \
        --save '' --appendonly no --dir "$dir/cluster-$port" --logfile "$dir/cluster-$port/redis.log" &
      redis_cluster_pids+=($!)
      addrs+=("127.0.0.1:$port")
    done
    for i in 0 1 2 3 4 5; do
      port=$((base + i))
      for _ in $(seq 1 50); do
        [ "$("$redis_cli" -p "$port" ping 2>/dev/null)" = "PONG" ] && break
        if ! kill -0 "${redis_cluster_pids[$i]}" 2>/dev/null; then ok=0; break; fi
        sleep 0.1
      done
      [ "$("$redis_cli" -p "$port" ping 2>/dev/null)" = "PONG" ] || ok=0
    done
    # A node whose port was taken meanwhile has exited: its PONG was
    # another server's, which must not join our cluster (see start_redis).
    sleep 0.1
    why=""
    for i in 0 1 2 3 4 5; do
      port=$((base + i))
      if ! kill -0 "${redis_cluster_pids[$i]}" 2>/dev/null; then
        ok=0
        why="the node on $port exited: $(tail -n 1 "$dir/cluster-$port/redis.log" 2>/dev/null)"
      fi
    done
    if [ "$ok" = 1 ] && "$redis_cli" --cluster create "${addrs[@]}" --cluster-replicas 1 --cluster-yes >"$dir/cluster-create.log" 2>&1; then
      for _ in $(seq 1 100); do
        if "$redis_cli" -p "$base" cluster info 2>/dev/null | grep -q '^cluster_state:ok' &&
          [ "$("$redis_cli" -p "$base" cluster nodes 2>/dev/null | grep -c 'connected')" -eq 6 ]; then
          REDIS_CLUSTER_ADDRS=$(IFS=,; echo "${addrs[*]}")
          return 0
        fi
        sleep 0.1
      done
      why="the cluster was not ok 10 s after its creation"
    elif [ "$ok" = 1 ]; then
      why="$redis_cli --cluster create failed: $(tail -n 2 "$dir/cluster-create.log" 2>/dev/null | tr '\n' ' ')"
    fi
    # Why each attempt failed, so that a run that gives up says it.
    log "cluster attempt $attempt on $base-$((base + 5)): ${why:-a node never answered PING}"
    stop_redis_cluster
  done
  log "could not start a Redis Cluster"
  return 1
}

stop_redis_cluster() {
  local pid
  for pid in "${redis_cluster_pids[@]}"; do
    kill "$pid" 2>/dev/null || true
  done
  for pid in "${redis_cluster_pids[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  redis_cluster_pids=()
}
