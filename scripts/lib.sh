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
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    if ! command -v sudo >/dev/null 2>&1; then
      # Not root and no sudo: say what is missing and the root command,
      # and stop here rather than die on "sudo: command not found".
      echo "missing Debian packages: ${missing[*]}; you are not root and there is no sudo to install them with." >&2
      echo "As root (su -, or a root shell), run:" >&2
      echo "  apt-get update && apt-get install -y ${missing[*]}" >&2
      echo "then run this again as yourself." >&2
      exit 1
    fi
    sudo="sudo"
  fi
  echo "installing: ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
}
