#!/usr/bin/env bash
# Installs what the test suite needs on a fresh Debian machine, and nothing
# when it is already there: Prometheus and promtool (Debian's prometheus
# package) and Helm (built from the Go module proxy).
set -euo pipefail

need_root() {
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null; then sudo "$@"; else echo "install-test-deps: run as root or install $*" >&2; exit 1; fi
  else
    "$@"
  fi
}

if ! command -v prometheus >/dev/null || ! command -v promtool >/dev/null; then
  echo "install-test-deps: installing Debian's prometheus package (prometheus, promtool)"
  need_root apt-get update -qq
  need_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
  # The package starts a system service; the tests run their own servers.
  if command -v systemctl >/dev/null; then need_root systemctl stop prometheus >/dev/null 2>&1 || true; fi
  need_root pkill -x prometheus >/dev/null 2>&1 || true
fi

"$(dirname "$0")/install-helm.sh"
