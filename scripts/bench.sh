#!/usr/bin/env bash
# gpuscope's benchmarks (docs/performance.md): go test -bench for the scrape
# and sampling cost, then load runs of the real binary on the sim source for
# process CPU, memory under reloads and scrape latency. Prints one table.
#
# Settings (environment):
#   BENCH_COUNT  go test -count; the table shows medians          (5)
#   BENCH_TIME   go test -benchtime                             (1s)
#   BENCH_CPU    length of the process CPU run                    (60s)
#   BENCH_SOAK   length of the memory run: 50 scrapers, SIGHUP
#                every minute; the issue's full run is 20m        (2m)
#   BENCH_LOAD   length of each latency run (1, 10, 100 scrapers) (10s)
#   BENCH_RSS    length of the resident-set run: 8 GPUs, the
#                profiling set, one scrape every second           (60s)
#   BENCH_RSS_RUNS  resident-set runs; the table shows medians       (3)
#   BENCH_ONLY   subset of: go cpu rss mem lat render ingest scrape
#                (default: go cpu rss mem lat)
#   BENCH_PORT   first loopback port the binary listens on        (19400)
#   BENCH_OUT    folder for raw results and logs                  (bin/bench)
#
# Side by side, alternating rounds (render, ingest, scrape) or one after
# the other (mem), against older trees of this repository and the peer:
#   BENCH_ROUNDS   rounds of the side-by-side parts                 (5)
#   BENCH_OLD      the "before" commit of render, scrape and mem    (a5abed8)
#   BENCH_BASE     the commit ingest compares with                  (379a6ec)
#   BENCH_SCRAPE   length of each scrape run of scrape               (40s)
#   BENCH_IDLE     length of each idle run of scrape                 (20s)
#   BENCH_PEER_REPO, BENCH_PEER_REV
#                  nvidia_gpu_exporter's source and commit for scrape
#                  (the local mirror or GitHub; e656cd8)
set -euo pipefail
cd "$(dirname "$0")/.."
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}"

COUNT=${BENCH_COUNT:-5}
BTIME=${BENCH_TIME:-1s}
CPU=${BENCH_CPU:-60s}
SOAK=${BENCH_SOAK:-2m}
LOAD=${BENCH_LOAD:-10s}
RSS=${BENCH_RSS:-60s}
RSS_RUNS=${BENCH_RSS_RUNS:-3}
ONLY=${BENCH_ONLY:-go cpu rss mem lat}
PORT=${BENCH_PORT:-19400}
OUT=${BENCH_OUT:-bin/bench}
ROUNDS=${BENCH_ROUNDS:-5}
OLD=${BENCH_OLD:-a5abed8}
BASE=${BENCH_BASE:-379a6ec}
SCRAPE=${BENCH_SCRAPE:-40s}
IDLE=${BENCH_IDLE:-20s}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
# shellcheck source=lib/sidebyside.sh
. scripts/lib/sidebyside.sh

for w in $ONLY; do
  case $w in go | cpu | rss | mem | lat | render | ingest | scrape) ;;
  *) echo "BENCH_ONLY: unknown part '$w' (use go cpu rss mem lat render ingest scrape)" >&2; exit 2 ;;
  esac
done
want() { [[ " $ONLY " == *" $1 "* ]]; }

PID=
cleanup() {
  if [ -n "$PID" ]; then kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; fi
}
trap cleanup EXIT

# rows collects the table: measurement | configuration | result | target.
ROWS=()
row() { ROWS+=("$1|$2|$3|$4"); }

# field KEY LINE prints the value of KEY=... in a gpuscope-load result line.
field() { tr ' ' '\n' <<<"$2" | sed -n "s/^$1=//p"; }

# per_link_csv writes etc/dcp-metrics.csv plus the per-link NVLink fields
# of the 8gpu_mig_nvlink size, the file the Go benchmarks append too.
per_link_csv() {
  cat etc/dcp-metrics.csv
  echo
  cat internal/engine/testdata/per-link-nvlink.csv
}

# start_gpuscope LOG ARGS... starts the binary on the next port and waits
# until /ready answers 200.
start_gpuscope() {
  local log=$1; shift
  PORT=$((PORT + 1))
  ADDR="127.0.0.1:$PORT"
  "${OUTBIN:-$OUT/gpuscope}" --source=sim --sim-event-rate 0 --address "$ADDR" --log-level warn "$@" >"$log" 2>&1 &
  PID=$!
  for _ in $(seq 1 100); do
    if curl -fsS -o /dev/null "http://$ADDR/ready" 2>/dev/null; then return 0; fi
    if ! kill -0 "$PID" 2>/dev/null; then echo "gpuscope exited; log $log:" >&2; cat "$log" >&2; exit 1; fi
    sleep 0.2
  done
  echo "gpuscope on $ADDR was not ready after 20s; log $log" >&2
  exit 1
}

stop_gpuscope() { cleanup; PID=; }

# from_disk SRC DST copies a binary to DST with its cached pages dropped,
# the state of the rss part's "from disk" runs: every binary of a
# comparison starts with the same share of its file pages mapped.
from_disk() {
  rm -f "$2"
  cp "$1" "$2"
  sync "$2"
  dd if="$2" iflag=nocache count=0 status=none
  echo "$2"
}


load() { "$OUT/gpuscope-load" "$@"; }

if want go; then
  echo "== go test -bench (count $COUNT): scrape and sampling cost" >&2
  go test -run '^$' -bench 'Render|Floor|Collect|Insight' -benchmem -benchtime "$BTIME" -count "$COUNT" ./internal/engine/ | tee "$OUT/go-bench.txt" >&2
  # Median of each reported unit per benchmark: "name unit value" lines.
  awk '/^Benchmark/ { n=$1; sub(/-[0-9]+$/, "", n); for (i = 3; i < NF; i += 2) print n, $(i+1), $i }' "$OUT/go-bench.txt" |
    sort -k1,1 -k2,2 -k3,3g |
    awk '{ k=$1" "$2; v[k, ++c[k]]=$3 } END { for (k in c) { n=c[k]; m=(n%2 ? v[k,(n+1)/2] : (v[k,n/2]+v[k,n/2+1])/2); print k, m } }' |
    sort >"$OUT/go-medians.txt"
  num() { awk -v v="$1" 'BEGIN { printf "%.0f", v }'; }
  med() { awk -v k="$1 $2" '$1" "$2 == k { print $3 }' "$OUT/go-medians.txt"; }
  for sz in 8gpu 8gpu_mig 8gpu_mig_nvlink; do
    r=$(med "BenchmarkRender/$sz" ns/op); f=$(med "BenchmarkFloor/$sz" ns/op)
    row "scrape cost ($sz)" "$(num "$(med "BenchmarkRender/$sz" series)") series" \
      "$(awk -v r="$r" -v f="$f" -v a="$(med "BenchmarkRender/$sz" allocs/op)" -v s="$(med "BenchmarkRender/$sz" ns/series)" \
        'BEGIN { printf "render %.2f ms (%.0f ns/series, %d allocs), floor %.2f ms: %.2fx", r/1e6, s, a, f/1e6, r/f }')" "<= 1.5x floor"
  done
  scaling=""
  for n in 1 2 4 8 16; do
    scaling+="${scaling:+, }$n: $(awk -v v="$(med "BenchmarkRenderScaling/gpus=$n" ns/series)" 'BEGIN { printf "%.0f", v }')"
  done
  row "scrape cost vs size" "largest shape on 1..16 GPUs ($(num "$(med "BenchmarkRenderScaling/gpus=1" series)")..$(num "$(med "BenchmarkRenderScaling/gpus=16" series)") series)" \
    "ns/series by GPUs: $scaling" "linear (flat ns/series)"
  for sz in 8gpu 8gpu_mig_nvlink; do
    row "sampling cost ($sz)" "$(num "$(med "BenchmarkCollect/$sz" samples/op)") samples per simulated second" \
      "$(awk -v n="$(med "BenchmarkCollect/$sz" ns/sample)" -v a="$(med "BenchmarkCollect/$sz" allocs/sample)" \
        -v sn="$(med "BenchmarkSimCollect/$sz" ns/sample)" -v c="$(med "BenchmarkCollect/$sz" core%)" -v sc="$(med "BenchmarkSimCollect/$sz" core%)" \
        'BEGIN { printf "%.0f ns/sample (sim alone %.0f), %g allocs/sample; %.3f%% core (sim alone %.3f%%)", n, sn, a, c, sc }')" "0 allocs/sample"
  done
  row "insight cost (8gpu, mixed workloads)" "30s windows of 10 fields at 100ms, every 3s" \
    "$(awk -v g="$(med BenchmarkInsight ns/gpu-window)" -v o="$(med BenchmarkInsight ns/op)" -v a="$(med BenchmarkInsight allocs/op)" -v c="$(med BenchmarkInsight core%)" \
      'BEGIN { printf "%.0f us per GPU per window (%.2f ms per node), %d allocs; %.3f%% core", g/1e3, o/1e6, a, c }')" "bounded, reported"
fi

if want cpu || want rss || want mem || want lat || want scrape; then
  # Binaries of their own, so that a long run is not disturbed by a rebuild.
  echo "== make build BIN=$OUT/gpuscope" >&2
  make -s build BIN="$OUT/gpuscope" >&2
  go build -o "$OUT/gpuscope-load" ./cmd/gpuscope-load
fi

if want cpu; then
  echo "== process CPU over $CPU: 8 GPUs, etc/dcp-metrics.csv (100ms + 1s), one scraper every 15s" >&2
  start_gpuscope "$OUT/cpu.log" --collectors=etc/dcp-metrics.csv
  sleep 5 # first windows and the Go runtime settle
  res=$(load -url "http://$ADDR/metrics" -pid "$PID" -c 1 -pause 15s -d "$CPU" -sample 1s)
  echo "$res" | tee "$OUT/cpu.txt" >&2
  stop_gpuscope
  row "process CPU" "8 GPUs, 100ms profiling + 1s rest, $CPU" "$(field cpu_pct "$res")% of one core, RSS $(field rss_max_mib "$res") MiB" "< 1% of a core"
  echo "== process CPU over $CPU with --insight: the same, plus the insight computation" >&2
  start_gpuscope "$OUT/cpu-insight.log" --collectors=etc/dcp-metrics.csv --insight
  sleep 5
  res=$(load -url "http://$ADDR/metrics" -pid "$PID" -c 1 -pause 15s -d "$CPU" -sample 1s)
  echo "$res" | tee "$OUT/cpu-insight.txt" >&2
  stop_gpuscope
  row "process CPU, --insight" "8 GPUs, mixed workloads, 100ms profiling + 1s rest, $CPU" "$(field cpu_pct "$res")% of one core, RSS $(field rss_max_mib "$res") MiB" "< 1% of a core"
fi

if want rss; then
  # The serving process only: top and capture live in gpuscope-client.
  # On Linux most of the resident set is the binary's own file pages, and
  # how many of them a start maps depends on the page cache: pages a write
  # left cached (a fresh build or copy) are mapped 64 KB or a whole folio
  # around each touched one, while pages read from disk come in by
  # readahead as they are touched. Each run therefore starts from a fresh
  # copy of the binary in one of two states, alternately: "from disk" (its
  # cached pages dropped, as on a node whose page cache has let it go) and
  # "just written" (as right after an image is unpacked).
  echo "== resident set over $RSS: 8 GPUs, etc/dcp-metrics.csv, one scraper every 1s" >&2
  : >"$OUT/rss-disk.txt"
  : >"$OUT/rss-written.txt"
  built="$OUT/gpuscope"
  for _ in $(seq 1 "$RSS_RUNS"); do
    for state in disk written; do
      rm -f "$OUT/gpuscope-rss"
      cp "$built" "$OUT/gpuscope-rss"
      sync "$OUT/gpuscope-rss"
      if [ "$state" = disk ]; then dd if="$OUT/gpuscope-rss" iflag=nocache count=0 status=none; fi
      OUTBIN="$OUT/gpuscope-rss" start_gpuscope "$OUT/rss.log" --collectors=etc/dcp-metrics.csv
      sleep 5
      load -url "http://$ADDR/metrics" -pid "$PID" -c 1 -pause 1s -d "$RSS" -sample 1s | tee -a "$OUT/rss-$state.txt" >&2
      stop_gpuscope
    done
  done
  # median FILE KEY: the median of KEY=... over the runs in FILE.
  median() { sed -n "s/.* $2=\([^ ]*\).*/\1/p" "$1" | sort -g | awk '{ a[NR] = $1 } END { print (NR % 2 ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2) }'; }
  for state in disk written; do
    f="$OUT/rss-$state.txt"
    case $state in disk) what="binary read from disk" ;; written) what="binary just written" ;; esac
    row "process RSS, $what" "8 GPUs, 100ms profiling + 1s rest, scraped every 1s, $RSS, median of $RSS_RUNS; binary $(stat -c %s "$built") bytes" \
      "RSS max $(median "$f" rss_max_mib) MiB (RssAnon $(median "$f" rss_anon_max_mib))" "<= 22 MiB"
  done
fi

# mem_run BIN LABEL soaks BIN in the largest configuration and adds a row.
mem_run() {
  local bin=$1 label=$2 res reloads
  echo "== memory over $SOAK ($label): 8 GPUs, MIG 7x1g.10gb, per-link NVLink CSV, 15s windows; 50 scrapers every 1s, SIGHUP every minute" >&2
  OUTBIN=$(from_disk "$bin" "$OUT/run-mem") start_gpuscope "$OUT/mem-${label// /-}.log" --collectors="$OUT/dcp-metrics-nvlink.csv" --sim-mig 7x1g.10gb --window 15s
  res=$(load -url "http://$ADDR/metrics" -pid "$PID" -c 50 -pause 1s -hup 1m -d "$SOAK" -sample 1s -warmup 30s)
  echo "$res" | tee "$OUT/mem-${label// /-}.txt" >&2
  # The reloads the exporter itself counts, so a SIGHUP that did nothing
  # does not pass for one.
  reloads=$(curl -fsS "http://$ADDR/metrics" | sed -n 's/^gpuscope_config_reloads_total{result="success"} //p')
  stop_gpuscope
  row "memory ($label)" "largest (MIG + NVLinks), $SOAK, $(field hups "$res") SIGHUPs (${reloads:-0} reloads), 50 scrapers" \
    "RSS max $(field rss_max_mib "$res") MiB (RssAnon $(field rss_anon_max_mib "$res")); median $(field rss_early_mib "$res") -> $(field rss_late_mib "$res") MiB ($(field rss_drift_pct "$res")%); $(field scrapes "$res") scrapes, $(field errors "$res") errors; $(field cpu_pct "$res")% of a core" \
    "< 40 MiB, flat within 5%"
}

if want mem; then
  per_link_csv >"$OUT/dcp-metrics-nvlink.csv"
  # Before and after in the same run, one after the other.
  echo "== make build of $OLD into $OUT/old/gpuscope" >&2
  gpuscope_at "$OLD" "$OUT/old/gpuscope"
  mem_run "$OUT/old/gpuscope" "$OLD"
  mem_run "$OUT/gpuscope" "this tree"
fi

if want lat; then
  echo "== scrape latency, $LOAD per level: 8 GPUs, etc/dcp-metrics.csv" >&2
  start_gpuscope "$OUT/lat.log" --collectors=etc/dcp-metrics.csv
  sleep 16 # full 15s windows, so every scrape computes the statistics
  for c in 1 10 100; do
    res=$(load -url "http://$ADDR/metrics" -c "$c" -d "$LOAD")
    echo "$res" | tee -a "$OUT/lat.txt" >&2
    row "scrape latency" "$c concurrent scrapers, $LOAD" \
      "p50 $(field p50_ms "$res") ms, p99 $(field p99_ms "$res") ms; $(field rate_per_s "$res")/s, $(field errors "$res") errors" "reported"
  done
  # Prometheus asks for gzip: the same with a compressed body.
  for c in 1 10; do
    res=$(load -url "http://$ADDR/metrics" -c "$c" -d "$LOAD" -gzip)
    echo "$res" | tee -a "$OUT/lat.txt" >&2
    row "scrape latency, gzip" "$c concurrent scrapers, $LOAD" \
      "p50 $(field p50_ms "$res") ms, p99 $(field p99_ms "$res") ms; $(field rate_per_s "$res")/s, $(field errors "$res") errors" "reported"
  done
  stop_gpuscope
fi

if want render; then
  # Old and new test binaries alternating: the text render, the protobuf
  # render and client_golang's encoders on the same families.
  echo "== render, $ROUNDS alternating rounds: $OLD against this tree" >&2
  engine_test_at "$OLD" "$OUT/render-old.test"
  go test -c -o "$OUT/render-new.test" ./internal/engine/
  raw="$OUT/render-raw.txt"
  : >"$raw"
  for r in $(seq 1 "$ROUNDS"); do
    for b in old new; do
      (cd internal/engine && "$OUT/render-$b.test" -test.run '^$' -test.bench '^Benchmark(Render|ProtobufScrape|Floor|FloorProto)$' \
        -test.benchmem -test.benchtime "$BTIME" -test.count 1) | tee -a "$OUT/render-$b.txt" | bench_rows "$r" "$b" >>"$raw"
    done
    echo "round $r of $ROUNDS done; load $(cut -d' ' -f1 /proc/loadavg)" >&2
  done
  ms() { awk -v v="$1" 'BEGIN { printf "%.3f ms", v / 1e6 }'; }
  for sz in 8gpu 8gpu_mig 8gpu_mig_nvlink; do
    u=cpu-ns/op
    row "protobuf render vs text ($sz)" "$(med "$raw" new "BenchmarkRender/$sz" series | cut -d. -f1) series; CPU per render, medians of $ROUNDS" \
      "text $(ms "$(med "$raw" new "BenchmarkRender/$sz" $u)"), protobuf $(ms "$(med "$raw" new "BenchmarkProtobufScrape/$sz" $u)"): $(ratio_text "$(ratios "$raw" new "BenchmarkProtobufScrape/$sz" new "BenchmarkRender/$sz" $u)")" \
      "<= 1.5x"
    row "protobuf render vs client_golang ($sz)" "the same families, decoded once, encoded by expfmt" \
      "encoder $(ms "$(med "$raw" new "BenchmarkFloorProto/$sz" $u)"): $(ratio_text "$(ratios "$raw" new "BenchmarkProtobufScrape/$sz" new "BenchmarkFloorProto/$sz" $u)")" \
      "<= 0.25x"
    row "text render vs client_golang ($sz)" "the same families, text encoder" \
      "encoder $(ms "$(med "$raw" new "BenchmarkFloor/$sz" $u)"): $(ratio_text "$(ratios "$raw" new "BenchmarkRender/$sz" new "BenchmarkFloor/$sz" $u)")" "reported"
    row "protobuf render, $OLD -> this tree ($sz)" "CPU per render" \
      "$(ms "$(med "$raw" old "BenchmarkProtobufScrape/$sz" $u)") -> $(ms "$(med "$raw" new "BenchmarkProtobufScrape/$sz" $u)"): $(ratio_text "$(ratios "$raw" new "BenchmarkProtobufScrape/$sz" old "BenchmarkProtobufScrape/$sz" $u)")" "reported"
    row "text render, $OLD -> this tree ($sz)" "CPU per render" \
      "$(ms "$(med "$raw" old "BenchmarkRender/$sz" $u)") -> $(ms "$(med "$raw" new "BenchmarkRender/$sz" $u)"): $(ratio_text "$(ratios "$raw" new "BenchmarkRender/$sz" old "BenchmarkRender/$sz" $u)")" "reported"
  done
fi

if want ingest; then
  # The sampling benchmark of this tree, built into $BASE's engine and into
  # this one, the two binaries alternating.
  echo "== ingest, $ROUNDS alternating rounds: $BASE, $OLD and this tree, the same BenchmarkCollect" >&2
  engine_test_at "$BASE" "$OUT/ingest-base.test" --harness
  engine_test_at "$OLD" "$OUT/ingest-old.test" --harness
  go test -c -o "$OUT/ingest-new.test" ./internal/engine/
  raw="$OUT/ingest-raw.txt"
  : >"$raw"
  for r in $(seq 1 "$ROUNDS"); do
    for b in base old new; do
      (cd internal/engine && "$OUT/ingest-$b.test" -test.run '^$' -test.bench '^Benchmark(Sim)?Collect$' -test.benchmem \
        -test.benchtime "$BTIME" -test.count 1) | tee -a "$OUT/ingest-$b.txt" | bench_rows "$r" "$b" >>"$raw"
    done
    echo "round $r of $ROUNDS done; load $(cut -d' ' -f1 /proc/loadavg)" >&2
  done
  for sz in 8gpu 8gpu_mig_nvlink; do
    for u in cpu-ns/sample ns/sample; do
      row "ingest per sample, $u ($sz)" "$(med "$raw" new "BenchmarkCollect/$sz" samples/op | cut -d. -f1) samples a simulated second; $ROUNDS rounds" \
        "$BASE $(med "$raw" base "BenchmarkCollect/$sz" $u), $OLD $(med "$raw" old "BenchmarkCollect/$sz" $u), this tree $(med "$raw" new "BenchmarkCollect/$sz" $u) (sim alone $(med "$raw" new "BenchmarkSimCollect/$sz" $u)); this tree / $BASE $(ratio_text "$(ratios "$raw" new "BenchmarkCollect/$sz" base "BenchmarkCollect/$sz" $u)"), $OLD / $BASE $(ratio_text "$(ratios "$raw" old "BenchmarkCollect/$sz" base "BenchmarkCollect/$sz" $u)")" \
        "<= 1.5x in every round"
    done
  done
fi

# scrape_run LABEL URL PID ROUND measures one exporter: its CPU at rest,
# then while scraped every 150 ms (past the 100 ms sampling, so that every
# scrape renders), and appends raw lines.
scrape_run() {
  local label=$1 url=$2 pid=$3 r=$4 idle busy samples
  sleep 10 # windows fill, the runtime settles
  idle=$(load -pid "$pid" -c 0 -d "$IDLE" -sample 1s)
  busy=$(load -url "$url" -pid "$pid" -c 1 -pause 150ms -d "$SCRAPE" -sample 1s)
  samples=$(curl -fsS "$url" | grep -vc '^#')
  echo "$label idle: $idle" >>"$OUT/scrape-runs.txt"
  echo "$label busy: $busy" >>"$OUT/scrape-runs.txt"
  awk -v r="$r" -v b="$label" -v ic="$(field cpu_s "$idle")" -v iw="$(field wall_s "$idle")" \
    -v bc="$(field cpu_s "$busy")" -v bw="$(field wall_s "$busy")" -v n="$(field scrapes "$busy")" \
    -v rss="$(field rss_max_mib "$busy")" -v s="$samples" -v p50="$(field p50_ms "$busy")" 'BEGIN {
      per = (bc - ic / iw * bw) / n * 1e9
      print r, b, "scrape", "cpu-ns/scrape", per
      print r, b, "scrape", "cpu-ns/sample", per / s
      print r, b, "scrape", "samples", s
      print r, b, "scrape", "rss-mib", rss
      print r, b, "scrape", "p50-ms", p50
      print r, b, "scrape", "idle-cpu-pct", ic / iw * 100
    }' >>"$OUT/scrape-raw.txt"
}

if want scrape; then
  # The old and new binaries and nvidia_gpu_exporter on 8 GPUs, in turn,
  # each round, with the render benchmark of the same shape beside them.
  echo "== scrape, $ROUNDS rounds: gpuscope $OLD, this tree and nvidia_gpu_exporter on 8 GPUs; idle $IDLE, scraped every 150ms for $SCRAPE" >&2
  gpuscope_at "$OLD" "$OUT/old/gpuscope"
  peer=$(peer_build)
  go test -c -o "$OUT/render-new.test" ./internal/engine/
  printf 'capture: linux-x86_64__nvidia-h200__590.48.01\nstate: load\nfluctuate: true\ngpus: 8\n' >"$OUT/peer-demo.yaml"
  raw="$OUT/scrape-raw.txt"
  : >"$raw"
  : >"$OUT/scrape-runs.txt"
  for r in $(seq 1 "$ROUNDS"); do
    for b in old new; do
      bin="$OUT/gpuscope"
      [ "$b" = old ] && bin="$OUT/old/gpuscope"
      OUTBIN=$(from_disk "$bin" "$OUT/run-$b") start_gpuscope "$OUT/scrape-$b.log" --collectors=etc/dcp-metrics.csv
      scrape_run "$b" "http://$ADDR/metrics" "$PID" "$r"
      stop_gpuscope
    done
    PORT=$((PORT + 1))
    "$(from_disk "$peer" "$OUT/run-peer")" --collect.backend demo --demo-config "$OUT/peer-demo.yaml" --web.listen-address "127.0.0.1:$PORT" >"$OUT/scrape-peer.log" 2>&1 &
    PID=$!
    for _ in $(seq 1 100); do curl -fsS -o /dev/null "http://127.0.0.1:$PORT/metrics" 2>/dev/null && break; sleep 0.2; done
    scrape_run peer "http://127.0.0.1:$PORT/metrics" "$PID" "$r"
    stop_gpuscope
    (cd internal/engine && "$OUT/render-new.test" -test.run '^$' -test.bench '^BenchmarkRender$/^8gpu$' -test.benchtime "$BTIME" -test.count 1) |
      bench_rows "$r" new >>"$raw"
    echo "round $r of $ROUNDS done; load $(cut -d' ' -f1 /proc/loadavg)" >&2
  done
  us() { awk -v v="$1" 'BEGIN { printf "%.3f ms", v / 1e6 }'; }
  for b in old new peer; do
    row "server CPU per scrape ($b)" "$(med "$raw" $b scrape samples | cut -d. -f1) samples; medians of $ROUNDS rounds" \
      "$(us "$(med "$raw" $b scrape cpu-ns/scrape)") ($(med "$raw" $b scrape cpu-ns/sample | cut -d. -f1) ns/sample), RSS $(med "$raw" $b scrape rss-mib) MiB, p50 $(med "$raw" $b scrape p50-ms) ms, at rest $(med "$raw" $b scrape idle-cpu-pct | cut -c1-5)% of a core" "reported"
  done
  # The render benchmark's CPU per render against the server's per scrape.
  awk '$4 == "cpu-ns/op" { $4 = "cpu-ns/scrape" } { print }' "$raw" >"$raw.cmp"
  row "server CPU per scrape vs render" "this tree; BenchmarkRender/8gpu $(us "$(med "$raw" new BenchmarkRender/8gpu cpu-ns/op)")" \
    "$(ratio_text "$(ratios "$raw.cmp" new scrape new BenchmarkRender/8gpu cpu-ns/scrape)")" "<= 1.5x"
  row "server CPU per sample vs nvidia_gpu_exporter" "per round" \
    "this tree $(ratio_text "$(ratios "$raw" new scrape peer scrape cpu-ns/sample)"); $OLD $(ratio_text "$(ratios "$raw" old scrape peer scrape cpu-ns/sample)")" "<= 0.05x"
  row "server CPU per scrape, $OLD -> this tree" "per round" "$(ratio_text "$(ratios "$raw" new scrape old scrape cpu-ns/scrape)")" "reported"
  row "RSS vs nvidia_gpu_exporter" "per round, while scraped" \
    "this tree $(ratio_text "$(ratios "$raw" new scrape peer scrape rss-mib)"); $OLD $(ratio_text "$(ratios "$raw" old scrape peer scrape rss-mib)")" "<= 1x"
fi

{
  echo "measurement|configuration|result|target"
  echo "---|---|---|---"
  printf '%s\n' "${ROWS[@]}"
} | column -t -s '|' -o ' | '
echo "host: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); raw results in $OUT"
