#!/usr/bin/env bash
# Installs what the test suite needs on a fresh Debian machine, and nothing
# when it is already there: Prometheus and promtool (Debian's prometheus
# package), tmux and chromium (Debian's packages), Helm, staticcheck and
# Prometheus 3 with its promtool (built from the Go module proxy), and
# for the linux/arm64 build and its test under emulation Debian's C cross
# compiler (gcc-aarch64-linux-gnu), qemu-user-static and the arm64 C library
# (libc6-arm64-cross) that qemu runs the binary against; NVIDIA's NVML
# library (libnvidia-ml1, unpacked into the tool cache); etcd and
# kube-apiserver for the Kubernetes tests (built from the Go module proxy).
set -euo pipefail

need_root() {
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null; then sudo "$@"; else echo "install-test-deps: run as root or install $*" >&2; exit 1; fi
  else
    "$@"
  fi
}

# The tools built from the Go module proxy (Prometheus 3 and promtool, etcd,
# kube-apiserver, helm: scripts/build-test-tools.sh) are most of a fresh
# machine's install time, and all of its CPU time; they build in the
# background while apt-get below waits on the network and the disk, which
# leave the cores idle. In a session of their own (setsid), so that a
# failure below ends the builds too, by their process group.
setsid "$(dirname "$0")/build-test-tools.sh" &
tools=$!
policy=
cleanup() {
  [ -z "$tools" ] || kill -- "-$tools" 2>/dev/null || true
  [ -z "$policy" ] || need_root rm -f "$policy"
}
trap cleanup EXIT

if ! command -v prometheus >/dev/null || ! command -v promtool >/dev/null; then
  echo "install-test-deps: installing Debian's prometheus package (prometheus, promtool; about a minute)"
  # The package would start a system service; the tests run their own
  # servers. Debian's policy-rc.d hook (exit 101: "action forbidden") keeps
  # the package from starting it, so there is nothing to stop afterwards and
  # no other Prometheus on the machine is touched. An existing hook is left
  # as it is.
  hook="${POLICY_RC_D:-/usr/sbin/policy-rc.d}"
  if [ ! -e "$hook" ]; then
    need_root sh -c "printf '#!/bin/sh\nexit 101\n' > '$hook' && chmod 755 '$hook'"
    policy=$hook
  fi
  need_root apt-get update -qq
  need_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
fi

if ! command -v tmux >/dev/null; then
  # The end-to-end test of `gpuscope top` runs it in a real terminal.
  echo "install-test-deps: installing Debian's tmux package (a few seconds)"
  need_root apt-get update -qq
  need_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends tmux >/dev/null
fi

if ! command -v chromium >/dev/null; then
  # The /fields page test drives it headless (test/fieldspage). Where it
  # cannot be installed that test skips, saying so, and fails under CI=true.
  echo "install-test-deps: installing Debian's chromium package (headless browser for the /fields test; about a minute)"
  if ! { need_root apt-get update -qq &&
    need_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null; }; then
    echo "install-test-deps: chromium could not be installed; the /fields browser test will skip" >&2
  fi
fi

# The arm64 cross build and its test (test/release). Where they cannot be
# installed (no apt-get, or the install fails) that test skips, saying so,
# and fails under CI=true.
if [ "$(uname -m)" = x86_64 ]; then
  missing=()
  command -v aarch64-linux-gnu-gcc >/dev/null || missing+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross)
  command -v qemu-aarch64-static >/dev/null || command -v qemu-aarch64 >/dev/null || missing+=(qemu-user-static)
  [ -e /usr/aarch64-linux-gnu/lib/ld-linux-aarch64.so.1 ] || missing+=(libc6-arm64-cross)
  if [ ${#missing[@]} -gt 0 ]; then
    echo "install-test-deps: installing Debian's ${missing[*]} for the linux/arm64 build and its test under qemu (about 30 seconds; ~550 MB installed)"
    if ! { command -v apt-get >/dev/null && need_root apt-get update -qq &&
      need_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; }; then
      echo "install-test-deps: ${missing[*]} could not be installed; the linux/arm64 release test will skip" >&2
    fi
  fi
fi

# NVIDIA's own NVML library (Debian non-free's libnvidia-ml1), for the
# test that runs gpuscope against the real library on a machine without the
# driver (test/e2e, TestRealNVMLLibraryWithoutTheDriver). It is unpacked
# into the tool cache, not installed: a private copy of the machine's apt
# sources with the non-free component alone, private package lists,
# apt-get download and dpkg -x. The machine's own sources, lists and
# packages are not touched. Where it cannot be fetched that test skips,
# saying so, and fails under CI=true.
"$(dirname "$0")/fetch-libnvidia-ml.sh" >/dev/null || echo "install-test-deps: libnvidia-ml1 could not be fetched; the real NVML library test will skip" >&2

# The Go tools, built in the background since the start (above).
if ! wait "$tools"; then
  echo "install-test-deps: building the Go tools failed (scripts/build-test-tools.sh, its messages above)" >&2
  exit 1
fi
tools=
