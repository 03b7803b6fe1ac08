#!/usr/bin/env bash
# Checks gpuscope's NVML source against nvidia-smi captures: for each FILE
# (made by scripts/take-capture.sh, or one of ../shared/compat/nvidia-smi-captures)
# it builds an NVML that answers what the capture shows, runs the NVML
# source on it, and compares every exported field with the capture in
# dcgm-exporter's units. Prints a field-by-field table, then one line per
# field that differs ("MISMATCH file phase entity field: capture ..., gpuscope ...").
# Exit 0 when every field agrees, 1 when one differs, 2 on bad input.
#
#   scripts/check-capture.sh my-node.txt
#   scripts/check-capture.sh -quiet my-node.txt   # only the lines that differ
#   scripts/check-capture.sh               # every capture in $GPUSCOPE_CAPTURES_DIR
#                                          # (default ../shared/compat/nvidia-smi-captures)
#
# It runs from a prebuilt bin/gpuscope-capturecheck where Go is absent.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}"

flags=()
files=()
for a in "$@"; do
  case "$a" in
    -*) flags+=("$a") ;;
    *) files+=("$a") ;;
  esac
done
if [ "${#files[@]}" -eq 0 ]; then
  dir="${GPUSCOPE_CAPTURES_DIR:-$repo/../shared/compat/nvidia-smi-captures}"
  shopt -s nullglob
  files=("$dir"/*.txt)
  if [ "${#files[@]}" -eq 0 ]; then
    echo "check-capture: no FILE given and no capture (*.txt) in $dir (set GPUSCOPE_CAPTURES_DIR)" >&2
    exit 2
  fi
fi
for f in "${files[@]}"; do
  if [ ! -r "$f" ]; then
    echo "check-capture: $f: not a readable file" >&2
    exit 2
  fi
done

bin="$repo/bin/gpuscope-capturecheck"
if command -v go >/dev/null 2>&1; then
  mkdir -p "$repo/bin"
  (cd "$repo" && go build -trimpath -tags urfave_cli_no_docs,testify_yaml_fail -o "$bin" ./cmd/gpuscope-capturecheck)
elif [ ! -x "$bin" ]; then
  echo "check-capture: no Go toolchain and no prebuilt $bin" >&2
  exit 2
fi
exec "$bin" ${flags[@]+"${flags[@]}"} "${files[@]}"
