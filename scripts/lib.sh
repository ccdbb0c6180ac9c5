# Shared by the scripts: Go on PATH, and idempotent installs from apt.
export PATH="/usr/local/go/bin:$HOME/go/bin:$PATH"

# need_pkgs PKG... installs the Debian packages that are not installed yet
# (apt-get update runs only when something is missing).
need_pkgs() {
  local missing=()
  for p in "$@"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "installing: ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
}
