#!/usr/bin/env bash
# A real Java Kafka client for the tests that feed fraudwatch what other
# clients write (cmd/fraudwatch/app/clients_test.go): Apache Kafka's own
# kafka-clients (testdata/clients/java), built once with Maven from Maven
# Central into a cache.
#
#   scripts/javaclient.sh     build it once; print its launcher, which takes
#                             testdata/clients/produce.py's arguments
#
# Cached in ${XDG_CACHE_HOME:-~/.cache}/fraudwatch/javaclient/HASH, HASH of
# the project's files (FRAUDWATCH_JAVACLIENT_CACHE moves the javaclient/
# part): an edit builds anew. A directory without its stamp is built anew.
# Java and Maven come from Debian's packages when missing. Progress goes to
# stderr.
set -euo pipefail

here=$(cd -P "$(dirname "$0")" && pwd)
# shellcheck source=scripts/lib.sh
. "$here/lib.sh"

project="$here/../testdata/clients/java"
project=$(cd -P "$project" && pwd)
cache="${FRAUDWATCH_JAVACLIENT_CACHE:-${XDG_CACHE_HOME:-${HOME:-$(cd ~ && pwd)}/.cache}/fraudwatch/javaclient}"
hash=$(cd "$project" && find pom.xml src -type f | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-16)
dir="$cache/$hash"
if [ -x "$dir/produce" ] && [ "$(cat "$dir/stamp" 2>/dev/null)" = "$hash" ]; then
  echo "$dir/produce"
  exit 0
fi
command -v javac >/dev/null 2>&1 || apt_install openjdk-17-jdk-headless
command -v mvn >/dev/null 2>&1 || apt_install maven
rm -rf "$dir"
mkdir -p "$dir"
log "building the Java producer (kafka-clients from Maven Central) into $dir"
# Maven's -q still prints colour codes; its output is shown only when it
# failed.
if ! out=$(mvn -q -B -f "$project/pom.xml" package -DskipTests -Dproduce.out="$dir/build" 2>&1 </dev/null); then
  printf '%s\n' "$out" | sed 's/\x1b\[[0-9;]*m//g' >&2
  die "Maven could not build testdata/clients/java"
fi
jar="$dir/build/fraudwatch-test-produce.jar"
[ -f "$jar" ] || die "Maven ran, but $jar is missing"
printf '#!/usr/bin/env bash\nexec java -jar %q "$@"\n' "$jar" >"$dir/produce"
chmod +x "$dir/produce"
# The stamp, written last, says the build is whole.
echo "$hash" >"$dir/stamp"
echo "$dir/produce"
