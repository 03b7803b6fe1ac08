#!/usr/bin/env bash
# Captures what nvidia-smi shows on this machine, in the format of
# ../shared/compat/nvidia-smi-captures (see SOURCE.md there), so that
# scripts/check-capture.sh can check gpuscope's NVML source against it:
# `nvidia-smi -q`, `--query-gpu`, `--query-compute-apps` and `nvlink -s`,
# taken once idle (or as the machine is now) and, with -load CMD, once
# more while CMD runs.
#
#   scripts/take-capture.sh > my-node.txt
#   scripts/take-capture.sh -load './my-benchmark' > my-node.txt
#
# It only reads: nvidia-smi changes nothing on the GPU. A load command is
# started in its own process group, and only that group is ended.
set -euo pipefail

load=""
if [ "${1:-}" = "-load" ]; then
  load="${2:?-load needs a command}"
  shift 2
fi
if [ "$#" -gt 0 ]; then
  echo "usage: take-capture.sh [-load CMD] > FILE" >&2
  exit 2
fi
command -v nvidia-smi >/dev/null 2>&1 || { echo "take-capture: nvidia-smi not found" >&2; exit 2; }

banner() { printf '%s\n' "################################################################################"; }
section() { # PHASE TITLE ARGS...
  local phase="$1" title="$2"
  shift 2
  banner
  printf '# %s :: %s\n# $ nvidia-smi %s\n' "$phase" "$title" "$*"
  banner
  nvidia-smi "$@" 2>&1 || true
  echo
}
# The --query-gpu fields: every one this driver knows (nvidia-smi
# --help-query-gpu lists them, each as a quoted name).
fields="$(nvidia-smi --help-query-gpu | sed -n 's/^"\([a-z_.A-Z0-9]*\)".*/\1/p' | paste -sd, -)"
apps="timestamp,gpu_name,gpu_bus_id,gpu_serial,gpu_uuid,pid,process_name,used_gpu_memory"
snapshot() { # PHASE
  section "$1" "query (-q)" -q
  section "$1" "query-gpu (csv)" "--query-gpu=$fields" --format=csv
  section "$1" "query-compute-apps (per-process)" "--query-compute-apps=$apps" --format=csv
}

banner
echo "# gpuscope nvidia-smi capture (scripts/take-capture.sh)"
banner
echo "collected_at:   $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "masked:         no"
echo "kernel:         $(uname -r)"
echo "arch:           $(uname -m)"
echo "load:           ${load:-none}"
echo
section capabilities "nvlink -s" nvlink -s
snapshot idle
if [ -n "$load" ]; then
  setsid bash -c "$load" >/dev/null 2>&1 &
  pid=$!
  trap 'kill -- -"$pid" 2>/dev/null || true' EXIT
  sleep "${CAPTURE_LOAD_WAIT:-15}"
  snapshot load
fi
