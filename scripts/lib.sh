# Sourced by scripts/kafka.sh, valkey.sh and redis8.sh: their messages (on
# stderr, prefixed with the script's name) and installs from Debian's
# packages. The caller sets `set -euo pipefail`.

log() { printf '%s: %s\n' "${0##*/}" "$*" >&2; }
die() {
  log "$*"
  exit 1
}

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

# apt_install PACKAGE... runs apt-get update once a run, then installs.
apt_updated=""
apt_install() {
  log "installing $* from Debian's packages"
  if [ -z "$apt_updated" ]; then
    as_root apt-get update -qq >&2
    apt_updated=1
  fi
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "$@" >&2
}
