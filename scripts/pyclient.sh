#!/usr/bin/env bash
# A real Kafka client for the tests that feed fraudwatch what other
# clients write (cmd/fraudwatch/app/clients_test.go): Python's
# confluent-kafka, whose wheel on PyPI carries librdkafka (idempotence,
# transactions, every codec), installed into a virtual environment of its
# own, pinned by version and by hash (pip refuses any other file).
#
#   scripts/pyclient.sh     make it once; print the python that has it
#
# Cached in ${XDG_CACHE_HOME:-~/.cache}/fraudwatch/pyclient/VERSION
# (FRAUDWATCH_PYCLIENT_CACHE moves the pyclient/ part); a directory
# without its stamp is made anew. python3 and its venv module come from
# Debian's packages when missing. Progress goes to stderr.
set -euo pipefail

VERSION="2.6.1"
# The wheel for CPython 3.11 on Linux x86_64 (Debian 12's python3).
SHA256="15af5ae70c9376aba62462f20dbc846364a41f6ae4071baac36a3adb44ec29bb"

here=$(cd -P "$(dirname "$0")" && pwd)
# shellcheck source=scripts/lib.sh
. "$here/lib.sh"

cache="${FRAUDWATCH_PYCLIENT_CACHE:-${XDG_CACHE_HOME:-${HOME:-$(cd ~ && pwd)}/.cache}/fraudwatch/pyclient}"
dir="$cache/$VERSION"
stamp="confluent-kafka $VERSION $SHA256"
if [ -x "$dir/bin/python" ] && [ "$(cat "$dir/stamp" 2>/dev/null)" = "$stamp" ]; then
  echo "$dir/bin/python"
  exit 0
fi
command -v python3 >/dev/null 2>&1 || apt_install python3
python3 -c 'import venv, ensurepip' 2>/dev/null || apt_install python3-venv
# Made in place (a venv's scripts name its path); the stamp, written
# last, says it is whole.
rm -rf "$dir"
mkdir -p "$cache"
log "installing confluent-kafka $VERSION from PyPI into $dir"
python3 -m venv "$dir" >&2
"$dir/bin/pip" install -q --disable-pip-version-check --no-deps --only-binary :all: --require-hashes \
  -r <(printf 'confluent-kafka==%s --hash=sha256:%s\n' "$VERSION" "$SHA256") >&2 ||
  die "pip could not install confluent-kafka $VERSION"
"$dir/bin/python" -c 'import confluent_kafka' >&2 || die "confluent-kafka $VERSION installed, but it does not import"
echo "$stamp" >"$dir/stamp"
echo "$dir/bin/python"
