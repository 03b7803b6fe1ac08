#!/usr/bin/env bash
# Copies the single sources of the chart's assets into deploy/helm/gpuscope/files
# (Helm cannot read files outside the chart, nor follow symlinks out of it):
#   etc/default-counters.csv, etc/dcp-metrics.csv -> files/
#   deploy/prometheus/*.yml                        -> files/prometheus/
#   grafana/dashboards/*.json                      -> files/dashboards/
# Copies whose source is gone are removed. The chart tests fail when the
# copies drift; run this script and commit the result.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
files="$root/deploy/helm/gpuscope/files"

sync_dir() { # sync_dir SRC_DIR PATTERN DEST_DIR
  local src="$1" pattern="$2" dest="$3"
  mkdir -p "$dest"
  find "$dest" -maxdepth 1 -type f -name "$pattern" | while read -r f; do
    [[ -f "$src/$(basename "$f")" ]] || { rm -f "$f"; echo "removed $f"; }
  done
  [[ -d "$src" ]] || return 0
  find "$src" -maxdepth 1 -type f -name "$pattern" | while read -r f; do
    cp "$f" "$dest/"
  done
}

mkdir -p "$files"
for f in default-counters.csv dcp-metrics.csv; do
  if [[ -f "$root/etc/$f" ]]; then
    cp "$root/etc/$f" "$files/$f"
  else
    echo "missing $root/etc/$f" >&2
    exit 1
  fi
done
sync_dir "$root/deploy/prometheus" '*.yml' "$files/prometheus"
sync_dir "$root/grafana/dashboards" '*.json' "$files/dashboards"
echo "chart assets synced into $files"
