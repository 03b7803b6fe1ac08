#!/usr/bin/env bash
# A simulated GPU fleet on this machine (docs/scale.md): N gpuscope processes
# on the sim source, each its own node (--hostname, --sim-seed; some with
# MIG, some with pods, some with HPC jobs), on loopback ports, scraped by one
# real Prometheus that loads the shipped recording and alert rules, for a
# bounded time. Prometheus remote-writes into Thanos Receive, read by Thanos
# Query. Then it prints one table: Prometheus' own figures, each query of the
# cluster dashboard timed against Prometheus (beside its raw-series version)
# and Thanos Query with their answers compared, the same queries on a tenth
# of the fleet, and the gpuscope processes' CPU and RSS, summed.
#
# Everything it starts it stops, by PID, on every exit path.
#
# Settings (environment):
#   FLEET_NODES     simulated nodes (gpuscope processes)          (100)
#   FLEET_GPUS      GPUs per node                                 (8)
#   FLEET_DURATION  how long the fleet runs before the queries,
#                   seconds, at least 120                          (600)
#   FLEET_SCRAPE    scrape and rule evaluation interval           (15s)
#   FLEET_COUNTERS  counters file of every node       (etc/dcp-metrics.csv)
#   FLEET_THANOS    1: also Thanos Receive and Query; 0: Prometheus only (1)
#   FLEET_PORT      first loopback port; the fleet uses the N+10 after it (21000)
#   FLEET_OUT       folder for the configuration, data, logs and table (bin/fleet)
#   THANOS_BIN      a Thanos binary to use instead of building one
set -euo pipefail
cd "$(dirname "$0")/.."
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}"

NODES=${FLEET_NODES:-100}
GPUS=${FLEET_GPUS:-8}
DURATION=${FLEET_DURATION:-600}
SCRAPE=${FLEET_SCRAPE:-15s}
COUNTERS=${FLEET_COUNTERS:-etc/dcp-metrics.csv}
THANOS=${FLEET_THANOS:-1}
PORT=${FLEET_PORT:-21000}
OUT=${FLEET_OUT:-bin/fleet}

die() { echo "fleet: $*" >&2; exit 1; }
[[ "$NODES" =~ ^[0-9]+$ && "$NODES" -ge 2 ]] || die "FLEET_NODES=$NODES: want a whole number, at least 2"
[[ "$GPUS" =~ ^[0-9]+$ && "$GPUS" -ge 1 ]] || die "FLEET_GPUS=$GPUS: want a whole number, at least 1"
[[ "$DURATION" =~ ^[0-9]+$ && "$DURATION" -ge 120 ]] || die "FLEET_DURATION=$DURATION: want seconds, at least 120"
[[ "$THANOS" == 0 || "$THANOS" == 1 ]] || die "FLEET_THANOS=$THANOS: want 0 or 1"
[ -f "$COUNTERS" ] || die "FLEET_COUNTERS=$COUNTERS: no such file"
if ! command -v prometheus >/dev/null || ! command -v promtool >/dev/null; then
	scripts/install-test-deps.sh
fi

# Every process this script starts, by PID; stopped on every exit path.
PIDS=()
NAP=
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	if [ -n "$NAP" ]; then kill -TERM "$NAP" 2>/dev/null || true; fi
	if [ ${#PIDS[@]} -gt 0 ]; then
		echo "fleet: stopping ${#PIDS[@]} processes" >&2
		for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
		for _ in $(seq 1 50); do
			local alive=0
			for pid in "${PIDS[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1 && break; done
			[ $alive = 0 ] && break
			sleep 0.2
		done
		for pid in "${PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
		for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
	fi
	exit $rc
}
trap cleanup EXIT
# nap waits in the background, so that a signal runs the trap at once
# instead of after the sleep.
nap() {
	sleep "$1" &
	NAP=$!
	wait "$NAP" || true
	NAP=
}
trap 'exit 130' INT
trap 'exit 143' TERM

started=$(date +%s)
say() { echo "fleet [$(($(date +%s) - started))s]: $*" >&2; }

rm -rf "$OUT"
mkdir -p "$OUT/logs" "$OUT/jobs"
OUT=$(cd "$OUT" && pwd)

say "building gpuscope and the fleet report"
go build -o "$OUT/gpuscope" ./cmd/gpuscope
(cd grafana && go build -o "$OUT/fleetreport" ./fleetreport)
if [ "$THANOS" = 1 ]; then
	say "building or reusing Thanos (scripts/build-thanos.sh)"
	THANOS_PATH=$(scripts/build-thanos.sh | tail -n 1)
	say "Thanos: $THANOS_PATH"
fi

# wait_http URL PID WHAT waits until URL answers 200 while PID lives.
wait_http() {
	for _ in $(seq 1 600); do
		curl -fsS -o /dev/null "$1" 2>/dev/null && return 0
		kill -0 "$2" 2>/dev/null || die "$3 exited; see $OUT/logs"
		sleep 0.2
	done
	die "$3 did not answer $1 within 120s"
}

# The HPC job files of the nodes that run jobs: two jobs per node.
for g in $(seq 0 $((GPUS - 1))); do echo "slurm-$((g * 2 / GPUS))" >"$OUT/jobs/$g"; done

# A tenth of the nodes (at least one) form cluster "small", the rest
# cluster "large": the dashboard's queries for one cluster then read a
# tenth of the fleet's series, beside the queries for the whole fleet.
SMALL=$(((NODES + 9) / 10))
say "starting $NODES gpuscope processes of $GPUS simulated GPUs ($COUNTERS)"
targets_small=() targets_large=() GPUSCOPE_PIDS=()
for i in $(seq 1 "$NODES"); do
	port=$((PORT + 10 + i))
	args=(--source=sim --sim-gpus="$GPUS" --sim-seed="$i" --hostname="node-$(printf %03d "$i")"
		--address="127.0.0.1:$port" --collectors="$COUNTERS" --log-level=warn)
	# Every fifth node in MIG mode, every other one with pods, every third
	# one running HPC jobs, every tenth with workload insight (step periods,
	# which the energy-per-step and cross-model rules read).
	[ $((i % 5)) = 0 ] && args+=(--sim-mig=all)
	[ $((i % 2)) = 1 ] && args+=(--sim-pods)
	[ $((i % 3)) = 0 ] && args+=(--hpc-job-mapping-dir="$OUT/jobs")
	[ $((i % 10)) = 1 ] && args+=(--insight)
	"$OUT/gpuscope" "${args[@]}" >"$OUT/logs/gpuscope-$i.log" 2>&1 &
	PIDS+=($!)
	GPUSCOPE_PIDS+=($!)
	if [ "$i" -le "$SMALL" ]; then targets_small+=("\"127.0.0.1:$port\""); else targets_large+=("\"127.0.0.1:$port\""); fi
done
for i in $(seq 1 "$NODES"); do
	wait_http "http://127.0.0.1:$((PORT + 10 + i))/ready" "${GPUSCOPE_PIDS[$((i - 1))]}" "gpuscope node $i"
done
say "all $NODES nodes ready"

PROM="127.0.0.1:$((PORT + 1))"
RECV_HTTP="127.0.0.1:$((PORT + 2))" RECV_GRPC="127.0.0.1:$((PORT + 3))" RECV_WRITE="127.0.0.1:$((PORT + 4))"
QUERY_HTTP="127.0.0.1:$((PORT + 5))" QUERY_GRPC="127.0.0.1:$((PORT + 6))"
remote_write="" thanos_scrape=""
if [ "$THANOS" = 1 ]; then
	"$THANOS_PATH" receive --tsdb.path="$OUT/receive" --tsdb.retention=1d \
		--http-address="$RECV_HTTP" --grpc-address="$RECV_GRPC" --remote-write.address="$RECV_WRITE" \
		--label='receive="fleet"' --log.level=warn >"$OUT/logs/thanos-receive.log" 2>&1 &
	PIDS+=($!)
	wait_http "http://$RECV_HTTP/-/ready" $! "thanos receive"
	"$THANOS_PATH" query --http-address="$QUERY_HTTP" --grpc-address="$QUERY_GRPC" \
		--endpoint.sd-config="endpoints: [{address: \"$RECV_GRPC\", strict: true}]" --log.level=warn >"$OUT/logs/thanos-query.log" 2>&1 &
	PIDS+=($!)
	wait_http "http://$QUERY_HTTP/-/ready" $! "thanos query"
	remote_write="remote_write:
  - url: http://$RECV_WRITE/api/v1/receive
    send_native_histograms: true"
	thanos_scrape="  - job_name: thanos
    static_configs:
      - targets: [\"$RECV_HTTP\"]
        labels: {component: receive}
      - targets: [\"$QUERY_HTTP\"]
        labels: {component: query}"
fi

cat >"$OUT/prometheus.yml" <<EOF
global:
  scrape_interval: $SCRAPE
  evaluation_interval: $SCRAPE
rule_files:
  - $(pwd)/deploy/prometheus/gpuscope-recording.yml
  - $(pwd)/deploy/prometheus/gpuscope-alerts.yml
scrape_configs:
  - job_name: gpuscope
    static_configs:
      - targets: [$(
	IFS=,
	echo "${targets_small[*]}"
)]
        labels: {cluster: small}
      - targets: [$(
	IFS=,
	echo "${targets_large[*]}"
)]
        labels: {cluster: large}
  - job_name: prometheus
    static_configs:
      - targets: ["$PROM"]
$thanos_scrape
$remote_write
EOF
promtool check config "$OUT/prometheus.yml" >/dev/null
# Native histograms on: the nodes' <FIELD>_distribution families are scraped
# (protobuf) and remote-written to Thanos.
prometheus --config.file="$OUT/prometheus.yml" --storage.tsdb.path="$OUT/prometheus" \
	--web.listen-address="$PROM" --enable-feature=native-histograms --log.level=warn >"$OUT/logs/prometheus.log" 2>&1 &
PIDS+=($!)
PROM_PID=$!
wait_http "http://$PROM/-/ready" "$PROM_PID" "prometheus"

# cpu_ticks and rss_kib sum over the gpuscope processes.
cpu_ticks() {
	local sum=0 pid f
	for pid in "${GPUSCOPE_PIDS[@]}"; do
		f=$(cut -d' ' -f14,15 "/proc/$pid/stat" 2>/dev/null) || die "gpuscope PID $pid is gone; see $OUT/logs"
		sum=$((sum + ${f% *} + ${f#* }))
	done
	echo $sum
}
rss_kib() {
	local sum=0 pid
	for pid in "${GPUSCOPE_PIDS[@]}"; do
		sum=$((sum + $(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status")))
	done
	echo $sum
}

# The first minute is start-up; CPU is measured over the rest of the run.
say "running for ${DURATION}s (scrape and rules every $SCRAPE)"
prom_started=$(date +%s)
nap 60
t0=$(date +%s) c0=$(cpu_ticks)
rss_max=0
# The machine's 1-minute load average, every 30 s: the figures are only as
# good as the machine was quiet.
loads=()
while [ "$(date +%s)" -lt $((prom_started + DURATION)) ]; do
	nap 30
	kill -0 "$PROM_PID" 2>/dev/null || die "prometheus exited; see $OUT/logs/prometheus.log"
	r=$(rss_kib)
	[ "$r" -gt "$rss_max" ] && rss_max=$r
	loads+=("$(cut -d' ' -f1 /proc/loadavg)")
	say "$(($(date +%s) - prom_started))s of ${DURATION}s; gpuscope RSS sum $((r / 1024)) MiB; load ${loads[-1]}"
done
load=$(printf '%s\n' "${loads[@]}" | awk 'NR == 1 {min = max = $1} {sum += $1; if ($1 < min) min = $1; if ($1 > max) max = $1}
	END {if (NR) printf "%.1f to %.1f, mean %.1f (%d samples)", min, max, sum / NR, NR}')
t1=$(date +%s) c1=$(cpu_ticks)
hz=$(getconf CLK_TCK)
cpu_pct=$(awk -v d=$((c1 - c0)) -v hz="$hz" -v s=$((t1 - t0)) 'BEGIN { printf "%.1f", 100 * d / hz / s }')

say "querying"
report_args=(-prometheus "http://$PROM" -rules deploy/prometheus/gpuscope-recording.yml
	-dashboard grafana/dashboards/gpuscope-cluster.json -small small -nodes "$NODES" -gpus "$GPUS"
	-duration "${DURATION}s" -procs-cpu "$cpu_pct" -procs-rss-mib "$((rss_max / 1024))" -procs "$NODES" -load "$load")
[ "$THANOS" = 1 ] && report_args+=(-thanos "http://$QUERY_HTTP")
"$OUT/fleetreport" "${report_args[@]}" | tee "$OUT/table.md"

# The fleet's SM activity from the native histograms, asked of Prometheus
# and of Thanos Query at the same instant: the observation rate and sum,
# which need no interpolation, must be the same; the p99 must be a ratio in
# [0, 1] on both, within half a bucket (schema 3: 4.4%), as Thanos' newer
# query engine interpolates within a native-histogram bucket differently
# from Prometheus 2.42's.
if [ "$THANOS" = 1 ]; then
	at=$(($(date +%s) - 30))
	for what in count sum p99; do
		case $what in
			count) q='histogram_count(sum(rate(DCGM_FI_PROF_SM_ACTIVE_distribution[1m])))' ;;
			sum) q='histogram_sum(sum(rate(DCGM_FI_PROF_SM_ACTIVE_distribution[1m])))' ;;
			p99) q='histogram_quantile(0.99, sum(rate(DCGM_FI_PROF_SM_ACTIVE_distribution[1m])))' ;;
		esac
		curl -fsS "http://$PROM/api/v1/query" --data-urlencode "query=$q" --data-urlencode "time=$at" >"$OUT/nh-$what-prometheus.json"
		curl -fsS "http://$QUERY_HTTP/api/v1/query" --data-urlencode "query=$q" --data-urlencode "time=$at" >"$OUT/nh-$what-thanos.json"
	done
	python3 - "$OUT" <<'PY' | tee -a "$OUT/table.md" || die "the native-histogram answers of Prometheus and Thanos Query differ; see $OUT/nh-*.json"
import json, sys
def val(what, who):
    r = json.load(open(f"{sys.argv[1]}/nh-{what}-{who}.json"))["data"]["result"]
    return float(r[0]["value"][1]) if len(r) == 1 else None
ok = True
print()
for what, tol in (("count", 1e-9), ("sum", 1e-9), ("p99", 0.044)):
    p, t = val(what, "prometheus"), val(what, "thanos")
    same = p is not None and t is not None and abs(p - t) <= tol * max(abs(p), 1e-12)
    if what == "p99":
        same = same and 0 <= p <= 1
    ok = ok and same
    print(f"native histogram of SM activity, whole fleet, {what}: Prometheus {p}, Thanos Query {t}: {'same' if same else 'DIFFERENT'}")
sys.exit(0 if ok else 1)
PY
fi
say "done in $(($(date +%s) - started))s; table in $OUT/table.md, logs in $OUT/logs"
