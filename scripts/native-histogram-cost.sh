#!/usr/bin/env bash
# What the native histograms cost a metrics store (docs/scale.md): runs the
# binary on 8 simulated GPUs with etc/dcp-metrics.csv, and prints
#   - the native histogram series per GPU,
#   - bytes per scrape: text, and protobuf with the histograms, plain and gzip,
#   - TSDB bytes per sample of a native histogram series and, for comparison,
#     of a float series (the window statistics), from a TSDB snapshot of a
#     real Prometheus (--enable-feature=native-histograms) that scraped every
#     second for NH_RUN seconds and kept only those series.
# Takes NH_RUN plus about 20 s. Needs prometheus, curl, python3.
#
# Settings (environment):
#   NH_RUN   seconds of scraping before the snapshot        (300)
#   NH_PORT  first loopback port used                       (19600)
#   NH_OUT   folder for the data and logs                   (bin/nhcost)
set -euo pipefail
cd "$(dirname "$0")/.."
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}"
RUN=${NH_RUN:-300}
PORT=${NH_PORT:-19600}
OUT=${NH_OUT:-bin/nhcost}
rm -rf "$OUT" && mkdir -p "$OUT"

PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT

wait_http() {
  for _ in $(seq 1 300); do
    curl -fsS -o /dev/null "$1" 2>/dev/null && return 0
    sleep 0.2
  done
  echo "$1 did not answer" >&2
  exit 1
}

echo "building bin/gpuscope" >&2
go build -o bin/gpuscope ./cmd/gpuscope
GS=127.0.0.1:$PORT
bin/gpuscope --source sim --collectors etc/dcp-metrics.csv --sim-seed 7 --sim-workload data-parallel \
  --sim-event-rate 0 --address "$GS" --hostname node-1 >"$OUT/gpuscope.log" 2>&1 &
PIDS+=($!)
wait_http "http://$GS/ready"
sleep 3

PROTO='application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited'
size() { curl -fsS "$@" "http://$GS/metrics" | wc -c; }
text=$(size)
textgz=$(size -H 'Accept-Encoding: gzip')
proto=$(size -H "Accept: $PROTO")
protogz=$(size -H "Accept: $PROTO" -H 'Accept-Encoding: gzip')

# prom NAME KEEP starts a Prometheus that keeps the series matching KEEP.
prom() {
  local dir=$OUT/$1 addr=127.0.0.1:$2
  mkdir -p "$dir"
  cat >"$dir/prometheus.yml" <<YML
global:
  scrape_interval: 1s
scrape_configs:
  - job_name: gpuscope
    static_configs: [{targets: ["$GS"]}]
    metric_relabel_configs:
      - {source_labels: [__name__], regex: '$3', action: keep}
YML
  prometheus --config.file="$dir/prometheus.yml" --storage.tsdb.path="$dir/data" --web.listen-address="$addr" \
    --web.enable-admin-api --enable-feature=native-histograms --log.level=warn >"$dir/log" 2>&1 &
  PIDS+=($!)
  wait_http "http://$addr/-/ready"
}
prom hist $((PORT + 1)) '.+_distribution'
prom float $((PORT + 2)) '.+_window'
echo "scraping for ${RUN}s" >&2
sleep "$RUN"

series() { curl -fsS "http://127.0.0.1:$1/api/v1/query" --data-urlencode "query=count({__name__=~\"$2\"})" |
  python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else 0)'; }
hseries=$(series $((PORT + 1)) '.+_distribution')
fseries=$(series $((PORT + 2)) '.+_window')

# per_sample PORT DIR prints bytes per sample of the snapshot's chunks.
per_sample() {
  local name
  name=$(curl -fsS -XPOST "http://127.0.0.1:$1/api/v1/admin/tsdb/snapshot" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["data"]["name"])')
  python3 - "$OUT/$2/data/snapshots/$name" <<'PY'
import json, os, sys
root = sys.argv[1]
samples = size = 0
for b in os.listdir(root):
    meta = os.path.join(root, b, "meta.json")
    if not os.path.exists(meta):
        continue
    samples += json.load(open(meta))["stats"]["numSamples"]
    cdir = os.path.join(root, b, "chunks")
    size += sum(os.path.getsize(os.path.join(cdir, f)) for f in os.listdir(cdir))
print(f"{size / max(samples, 1):.2f} {samples}")
PY
}
read -r hbps hsamples < <(per_sample $((PORT + 1)) hist)
read -r fbps fsamples < <(per_sample $((PORT + 2)) float)

echo "| measurement | value |"
echo "| --- | ---: |"
echo "| native histogram series per GPU | $(python3 -c "print($hseries/8)") |"
echo "| bytes per scrape, text (no histograms) | $text |"
echo "| bytes per scrape, text, gzip | $textgz |"
echo "| bytes per scrape, protobuf with histograms | $proto |"
echo "| bytes per scrape, protobuf with histograms, gzip | $protogz |"
echo "| TSDB bytes per sample, native histogram ($hsamples samples) | $hbps |"
echo "| TSDB bytes per sample, float window statistic ($fsamples samples) | $fbps |"
