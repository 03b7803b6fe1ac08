#!/usr/bin/env bash
# gpu-check.sh: check the NVML source on a real GPU machine, in under three
# minutes. It builds gpuscope, runs --source=nvml for about 30 s with the
# everyday counters, then again with the profiling (GPM) set, scrapes
# /metrics from each run into $OUT (./gpu-check-out when OUT is unset), and
# prints what NVML can serve. No CUDA is needed: the GPUs are read idle.
set -euo pipefail

cd "$(dirname "$0")/.."
out="${OUT:-./gpu-check-out}"
mkdir -p "$out"
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}"
port=9400
run_s="${GPU_CHECK_RUN_S:-30}"

echo "== nvidia-smi -L"
nvidia-smi -L 2>&1 | tee "$out/nvidia-smi-L.txt" || echo "nvidia-smi not available"

echo "== build"
timeout 90 go build -o bin/gpuscope ./cmd/gpuscope

echo "== bin/gpuscope counters list --source nvml"
bin/gpuscope counters list --source nvml | tee "$out/counters-list-nvml.txt"

# run NAME CSV: serve with the given counters file, scrape twice (GPM needs
# two samples), keep the last scrape and the log.
run() {
	local name=$1 csv=$2
	echo "== run $name ($csv) for ${run_s}s"
	bin/gpuscope --source=nvml --collectors "$csv" --address ":$port" >"$out/$name.log" 2>&1 &
	local pid=$!
	local up=0
	for _ in $(seq 1 20); do
		if curl -fsS "http://127.0.0.1:$port/metrics" -o /dev/null 2>/dev/null; then up=1; break; fi
		sleep 0.5
	done
	if [ "$up" = 1 ]; then
		sleep "$run_s"
		curl -fsS "http://127.0.0.1:$port/metrics" -o "$out/$name-metrics.txt" || echo "scrape failed"
	else
		echo "gpuscope did not serve /metrics; its log:"
		tail -n 40 "$out/$name.log"
	fi
	kill "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	if [ -s "$out/$name-metrics.txt" ]; then
		echo "-- $name: DCGM_* series per metric"
		grep -E '^DCGM_' "$out/$name-metrics.txt" | sed 's/[{ ].*//' | sort | uniq -c
		echo "-- $name: gpuscope_field_supported 0 and lost GPUs"
		grep -E '^gpuscope_(field_supported|gpu_lost).* (0|1)$' "$out/$name-metrics.txt" | grep -Ev 'gpu_lost.* 0$|supported.* 1$' || echo "(none)"
		echo "-- $name: first GPU's samples"
		grep -E '^DCGM_.*gpu="0"' "$out/$name-metrics.txt" | head -n 60
	fi
}

run default etc/default-counters.csv
run gpm etc/dcp-metrics.csv
echo "== done; files in $out"
