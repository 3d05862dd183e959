#!/usr/bin/env bash
# A real Apache Kafka broker for the tests, without Docker: the broker's jars
# come from Maven Central (scripts/kafka/pom.xml), and a single-node KRaft
# broker (combined broker and controller) runs on free loopback ports.
#
#   scripts/kafka.sh fetch VERSION           download the jars once; print their directory
#   scripts/kafka.sh start VERSION STATEDIR  start a broker; print its host:port (only that)
#   scripts/kafka.sh stop STATEDIR           stop it; safe to repeat, and after a failed start
#   scripts/kafka.sh versions                the versions `make test-compat` covers
#   scripts/kafka.sh default-version         the version scripts/test.sh starts
#
# Jars are cached in ${XDG_CACHE_HOME:-~/.cache}/fraudwatch/kafka/VERSION/libs
# (FRAUDWATCH_KAFKA_CACHE moves the kafka/ part). STATEDIR gets the broker's
# configuration, its data, kafka.log (everything the JVM logs or prints),
# kafka.pid, addr and version. Progress goes to stderr.
#
# Java: FRAUDWATCH_KAFKA_JAVA, else $JAVA_HOME/bin/java, else java on PATH
# (installed from Debian's packages when there is none).
set -euo pipefail

# The newest 3.9.x and the newest 4.x that Maven Central serves; the last is
# what scripts/test.sh uses unless FRAUDWATCH_KAFKA_VERSION says otherwise.
COMPAT_VERSIONS="3.9.2 4.4.0"
DEFAULT_VERSION="4.4.0"

root=$(cd -P "$(dirname "$0")/.." && pwd)  # -P: the real repository, also through a symlink
pom="$root/scripts/kafka/pom.xml"
cache="${FRAUDWATCH_KAFKA_CACHE:-${XDG_CACHE_HOME:-${HOME:-$(cd ~ && pwd)}/.cache}/fraudwatch/kafka}"
start_timeout="${FRAUDWATCH_KAFKA_START_TIMEOUT:-120}"
stop_timeout="${FRAUDWATCH_KAFKA_STOP_TIMEOUT:-30}"

# shellcheck source=scripts/lib.sh
. "$root/scripts/lib.sh"

check_version() {
  [[ "$1" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "not a Kafka release version: '$1' (want e.g. $DEFAULT_VERSION)"
  case "${1%%.*}" in
    3 | 4) ;;
    *) die "Kafka $1: only 3.x and 4.x are supported (KRaft, and a logging backend per major version)" ;;
  esac
}

# The published pom of kafka_2.13 names no logging backend; the profile adds
# the one that release's own distribution ships.
maven_profile() { if [ "${1%%.*}" -ge 4 ]; then echo kafka4; else echo kafka3; fi; }

# Anything left by an interrupted fetch or start is cleaned up on exit.
fetch_tmp=""
starting=""
on_exit() {
  status=$?
  if [ -n "$fetch_tmp" ]; then
    rm -rf "$fetch_tmp"
    rmdir "$(dirname "$fetch_tmp")" 2>/dev/null || true
  fi
  if [ -n "$starting" ]; then stop_broker "$starting" || true; fi
  exit "$status"
}
trap on_exit EXIT
trap 'exit 130' INT TERM HUP

# fetch VERSION sets LIBS. The jars are copied into a temporary directory beside the
# final one and renamed into place only when complete, with a stamp of the
# pom that chose them; a directory without a matching stamp is fetched anew.
fetch() {
  local version=$1
  check_version "$version"
  local dir="$cache/$version" stamp
  local libs="$dir/libs"
  stamp="$(sha256sum <"$pom" | cut -d' ' -f1) $version"
  LIBS=$libs
  if [ -f "$libs/.fraudwatch-stamp" ] && [ "$(cat "$libs/.fraudwatch-stamp")" = "$stamp" ]; then
    return 0
  fi
  if ! command -v mvn >/dev/null 2>&1; then apt_install maven; fi
  mkdir -p "$dir"
  # Leftovers of fetches that were killed outright (no trap ran).
  find "$dir" -maxdepth 1 -name 'libs.tmp.*' -mmin +60 -exec rm -rf {} + 2>/dev/null || true
  fetch_tmp=$(mktemp -d "$dir/libs.tmp.XXXXXX")
  log "fetching Kafka $version and its dependencies from Maven Central into $libs"
  # Maven 3.8's -q still prints colour codes; its output is shown only when
  # it failed.
  local out
  if ! out=$(mvn -q -B -f "$pom" dependency:copy-dependencies -DoutputDirectory="$fetch_tmp" \
    -Dkafka.version="$version" -P "$(maven_profile "$version")" 2>&1 </dev/null); then
    printf '%s\n' "$out" | sed 's/\x1b\[[0-9;]*m//g' >&2
    die "Maven could not fetch org.apache.kafka:kafka_2.13:$version (is it a released version?)"
  fi
  [ -f "$fetch_tmp/kafka_2.13-$version.jar" ] || die "Maven ran, but kafka_2.13-$version.jar is missing"
  echo "$stamp" >"$fetch_tmp/.fraudwatch-stamp"
  if [ -e "$libs" ] && [ "$(cat "$libs/.fraudwatch-stamp" 2>/dev/null)" != "$stamp" ]; then
    local old="$dir/libs.tmp.old.$$"
    mv "$libs" "$old" && rm -rf "$old"
  fi
  # mv onto an existing directory fails; then a concurrent fetch won the
  # race and its (identical) copy is used.
  if mv -T "$fetch_tmp" "$libs" 2>/dev/null; then
    fetch_tmp=""
  else
    rm -rf "$fetch_tmp"
    fetch_tmp=""
    [ -f "$libs/.fraudwatch-stamp" ] || die "could not move the jars into $libs"
  fi
}

# find_java sets JAVA.
find_java() {
  local java
  if [ -n "${FRAUDWATCH_KAFKA_JAVA:-}" ]; then
    java=$FRAUDWATCH_KAFKA_JAVA
  elif [ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/java" ]; then
    java=$JAVA_HOME/bin/java
  else
    if ! command -v java >/dev/null 2>&1; then apt_install openjdk-17-jre-headless; fi
    java=$(command -v java)
  fi
  # Kafka 4 needs Java 17 on the broker; say so rather than let it crash.
  local v major
  v=$("$java" -version 2>&1 | sed -n '1s/.*version "\([^"]*\)".*/\1/p')
  major=${v%%.*}
  if [ "$major" = 1 ]; then major=$(echo "$v" | cut -d. -f2); fi
  [[ "$major" =~ ^[0-9]+$ ]] || die "cannot tell the version of $java"
  [ "$major" -ge 17 ] || die "$java is Java $v; the Kafka broker needs Java 17 or newer (set FRAUDWATCH_KAFKA_JAVA)"
  JAVA=$java
}

# Something accepts connections there: taken.
port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# Ports come from below the kernel's ephemeral range, where no outgoing
# connection can be holding one between the check and the broker's bind.
free_port() {
  local p lo=32768 min=20000 span=40000
  if [ -r /proc/sys/net/ipv4/ip_local_port_range ]; then
    read -r lo _ </proc/sys/net/ipv4/ip_local_port_range
  fi
  if [ "$lo" -gt 12000 ]; then
    min=10000
    span=$((lo - 10000))
  fi
  for _ in $(seq 1 50); do
    p=$((min + RANDOM % span))
    if [ "$p" != "${1:-}" ] && ! port_in_use "$p"; then
      echo "$p"
      return 0
    fi
  done
  return 1
}

write_config() {
  local statedir=$1 version=$2 bport=$3 cport=$4
  cat >"$statedir/server.properties" <<EOF
# Written by scripts/kafka.sh: one KRaft node, broker and controller in one
# process, on loopback, tuned for tests rather than durability.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$cport
listeners=PLAINTEXT://127.0.0.1:$bport,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://127.0.0.1:$bport
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
log.dirs=$statedir/data
num.partitions=1
default.replication.factor=1
min.insync.replicas=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=8
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=false
delete.topic.enable=true
EOF
  if [ "${version%%.*}" -ge 4 ]; then
    cat >>"$statedir/server.properties" <<EOF
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
EOF
  fi
  # Everything to stdout, which goes to kafka.log; the per-client config
  # dumps (thousands of lines) are left out: server.properties is beside it.
  cat >"$statedir/log4j.properties" <<'EOF'
log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.org.apache.kafka.common.config.AbstractConfig=WARN
log4j.logger.kafka.request.logger=WARN
EOF
  cat >"$statedir/log4j2.properties" <<'EOF'
status = warn
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.out.ref = out
logger.config.name = org.apache.kafka.common.config.AbstractConfig
logger.config.level = warn
logger.request.name = kafka.request.logger
logger.request.level = warn
EOF
}

# The java command line shared by the storage tool and the broker.
java_cmd() {
  local java=$1 version=$2 statedir=$3 libs=$4 heap=$5
  local logging
  if [ "${version%%.*}" -ge 4 ]; then
    logging="-Dlog4j2.configurationFile=$statedir/log4j2.properties"
  else
    logging="-Dlog4j.configuration=file:$statedir/log4j.properties"
  fi
  printf '%s\0' "$java" "-Xmx$heap" -XX:+UseSerialGC -XX:+ExitOnOutOfMemoryError -XX:-UsePerfData \
    -Djava.awt.headless=true "$logging" -cp "$libs/*"
}

is_our_broker() {
  local pid=$1 statedir=$2 args
  if [ -r "/proc/$pid/cmdline" ]; then
    args=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || return 1
  else
    args=$(ps -ww -o args= -p "$pid" 2>/dev/null) || return 1
  fi
  [[ "$args" == *"kafka.Kafka $statedir/server.properties"* ]]
}

start() {
  local version=$1
  check_version "$version"
  mkdir -p "$2"
  local statedir
  statedir=$(cd "$2" && pwd -P)
  local logfile="$statedir/kafka.log"
  if [ -f "$statedir/kafka.pid" ] && is_our_broker "$(cat "$statedir/kafka.pid")" "$statedir"; then
    die "a broker is already running for $statedir (scripts/kafka.sh stop $statedir)"
  fi
  : >"$logfile"
  rm -f "$statedir/addr" "$statedir/version" "$statedir/kafka.pid"
  local began=$SECONDS

  fetch "$version"
  find_java
  local libs=$LIBS java=$JAVA
  starting=$statedir

  # The readiness probe is Go, built while the first JVM starts.
  local probe="$statedir/kafkaready" probe_built=""

  local -a jcmd
  local attempt bport cport cluster_id pid from deadline
  for attempt in 1 2 3 4 5; do
    bport=$(free_port) || die "no free loopback port found"
    cport=$(free_port "$bport") || die "no free loopback port found"
    rm -rf "$statedir/data"
    write_config "$statedir" "$version" "$bport" "$cport"
    # 16 random bytes, base64url without padding: a Kafka cluster id. One
    # that starts with '-' would read as an option to the storage tool.
    cluster_id=-
    while [[ "$cluster_id" == -* ]]; do
      cluster_id=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')
    done
    from=$(($(wc -l <"$logfile") + 1))
    {
      echo "==== kafka.sh: Kafka $version, attempt $attempt, broker 127.0.0.1:$bport, controller 127.0.0.1:$cport"
      echo "==== $("$java" -version 2>&1 | head -n 1)"
    } >>"$logfile"
    mapfile -d '' jcmd < <(java_cmd "$java" "$version" "$statedir" "$libs" 256m)
    if ! "${jcmd[@]}" kafka.tools.StorageTool format -t "$cluster_id" -c "$statedir/server.properties" \
      >>"$logfile" 2>&1 </dev/null; then
      die "formatting the broker's storage failed; see $logfile"
    fi
    mapfile -d '' jcmd < <(java_cmd "$java" "$version" "$statedir" "$libs" 512m)
    "${jcmd[@]}" -Xms128m kafka.Kafka "$statedir/server.properties" >>"$logfile" 2>&1 </dev/null &
    pid=$!
    echo "$pid" >"$statedir/kafka.pid"

    if [ -z "$probe_built" ]; then
      (cd "$root" && go build -o "$probe" ./scripts/kafkaready) >&2 || die "could not build scripts/kafkaready"
      probe_built=1
    fi

    deadline=$((SECONDS + start_timeout))
    while kill -0 "$pid" 2>/dev/null; do
      if "$probe" -addr "127.0.0.1:$bport" -timeout 2s 2>/dev/null; then
        echo "127.0.0.1:$bport" >"$statedir/addr"
        echo "$version" >"$statedir/version"
        starting=""
        log "Kafka $version ready on 127.0.0.1:$bport after $((SECONDS - began))s (pid $pid, log $logfile)"
        echo "127.0.0.1:$bport"
        return 0
      fi
      if [ "$SECONDS" -ge "$deadline" ]; then
        die "Kafka $version did not answer a metadata request within ${start_timeout}s; see $logfile"
      fi
      sleep 0.2
    done
    wait "$pid" 2>/dev/null || true
    rm -f "$statedir/kafka.pid"
    # A port taken between the check and the bind: try others. Anything
    # else will not go away by retrying.
    if tail -n +"$from" "$logfile" | grep -qE 'BindException|Address already in use'; then
      log "port $bport or $cport was taken meanwhile; retrying with others"
      continue
    fi
    die "Kafka $version exited during startup; see $logfile"
  done
  die "Kafka $version: no free ports after 5 attempts"
}

stop_broker() {
  [ -d "$1" ] || return 0
  local statedir pid
  statedir=$(cd "$1" && pwd -P)
  [ -f "$statedir/kafka.pid" ] || return 0
  pid=$(cat "$statedir/kafka.pid")
  if [[ "$pid" =~ ^[0-9]+$ ]] && is_our_broker "$pid" "$statedir"; then
    kill -TERM "$pid" 2>/dev/null || true
    local deadline=$((SECONDS + stop_timeout))
    while is_our_broker "$pid" "$statedir" && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.1; done
    if is_our_broker "$pid" "$statedir"; then
      log "broker (pid $pid) still running ${stop_timeout}s after SIGTERM; killing it"
      kill -KILL "$pid" 2>/dev/null || true
      deadline=$((SECONDS + 10))
      while is_our_broker "$pid" "$statedir" && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.1; done
    fi
  fi
  rm -f "$statedir/kafka.pid" "$statedir/addr"
}

usage() {
  sed -n '/^#   scripts/p' "$0" | sed 's/^#/usage:/' >&2
  exit 2
}

case "${1:-}" in
  fetch)
    [ $# -eq 2 ] || usage
    fetch "$2"
    echo "$LIBS"
    ;;
  start)
    [ $# -eq 3 ] || usage
    start "$2" "$3"
    ;;
  stop)
    [ $# -eq 2 ] || usage
    stop_broker "$2"
    ;;
  versions)
    echo "$COMPAT_VERSIONS"
    ;;
  default-version)
    echo "$DEFAULT_VERSION"
    ;;
  *) usage ;;
esac
