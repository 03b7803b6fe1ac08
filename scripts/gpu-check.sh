#!/usr/bin/env bash
# gpu-check.sh: check gpuscope's NVML path on a real GPU machine, and fail when
# something is wrong. In about two minutes it builds gpuscope and its checker,
# then runs gpuscope three times, each for GPU_CHECK_RUN_S seconds (default
# 20): with the default counters, with every field the source can serve, and
# with the profiling set (100 ms, window statistics). The checker
# (cmd/gpuscope-gpucheck) then asserts, for each run:
#   - every GPU the driver lists is exported, and none is lost;
#   - every field of the counters file is there on every GPU, or the GPU
#     reports it unsupported (never for the core fields, nor for profiling
#     fields on Hopper and later, where GPM serves them); an unsupported field
#     is a warning, except one a class of GPU lacks in hardware (the fan speed
#     of a passively cooled H100 or A100), which is one note for the node;
#   - every value is finite and plausible for its unit (GPM ratios in [0,1],
#     percentages in [0,100], W, C, MHz, MiB in sane spans), window
#     statistics are ordered, FB used + free <= total, power near its limit;
#   - MIG series appear exactly when MIG is enabled, and the log has no error,
#     no panic and no warning from the XID or MIG paths.
# It prints a table and exits 1 when any run fails. Files land in $OUT
# (./gpu-check-out when unset). No CUDA is needed: the GPUs are read idle.
#
# GPU_CHECK_SOURCE=sim runs the same pipeline on simulated GPUs where there is
# no GPU; the test suite does so to keep this script working.
set -euo pipefail

cd "$(dirname "$0")/.."
out="${OUT:-./gpu-check-out}"
source="${GPU_CHECK_SOURCE:-nvml}"
run_s="${GPU_CHECK_RUN_S:-20}"
port="${GPU_CHECK_PORT:-19400}"
mkdir -p "$out"
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}"

pid=""
cleanup() {
	if [ -n "$pid" ]; then
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
}
trap cleanup EXIT

gpus=0 expect_gpm=false expect_mig=false
case "$source" in
nvml)
	if ! command -v nvidia-smi >/dev/null; then
		echo "gpu-check: nvidia-smi not found: this script needs a GPU machine (GPU_CHECK_SOURCE=sim runs it on simulated GPUs)" >&2
		exit 2
	fi
	echo "== nvidia-smi"
	nvidia-smi -L | tee "$out/nvidia-smi-L.txt"
	nvidia-smi --query-gpu=index,name,compute_cap,mig.mode.current,driver_version --format=csv | tee "$out/nvidia-smi-query.txt"
	gpus=$(grep -c '^GPU ' "$out/nvidia-smi-L.txt" || true)
	# GPM (the profiling fields through NVML) needs compute capability 9.0 or later.
	cc_major=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | sort -n | head -n 1 | cut -d. -f1)
	[ "${cc_major:-0}" -ge 9 ] && expect_gpm=true
	nvidia-smi --query-gpu=mig.mode.current --format=csv,noheader | grep -qi enabled && expect_mig=true
	;;
sim)
	gpus=8 expect_gpm=true
	;;
*)
	echo "gpu-check: GPU_CHECK_SOURCE must be nvml or sim, not $source" >&2
	exit 2
	;;
esac
echo "gpu-check: source=$source gpus=$gpus expect_gpm=$expect_gpm expect_mig=$expect_mig run=${run_s}s"

echo "== build"
timeout 300 go build -o "$out/bin/gpuscope" ./cmd/gpuscope
timeout 300 go build -o "$out/bin/gpuscope-gpucheck" ./cmd/gpuscope-gpucheck

# Every field the source can serve: the catalog's CSV for it, all lines enabled.
"$out/bin/gpuscope" counters list --source "$source" --format csv | sed 's/^# DCGM_/DCGM_/' >"$out/all-fields.csv"
"$out/bin/gpuscope" counters check "$out/all-fields.csv" etc/default-counters.csv etc/dcp-metrics.csv

results=()
failed=0

# run NAME CSV: serve with the counters file, scrape after run_s seconds, and
# judge the scrape and the log.
run() {
	local name=$1 csv=$2 up=0
	echo "== run $name ($csv) for ${run_s}s"
	"$out/bin/gpuscope" --source="$source" --collectors "$csv" --address "127.0.0.1:$port" >"$out/$name.log" 2>&1 &
	pid=$!
	for _ in $(seq 1 150); do
		if curl -fsS "http://127.0.0.1:$port/metrics" -o /dev/null 2>/dev/null; then up=1; break; fi
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.2
	done
	if [ "$up" = 1 ]; then
		sleep "$run_s"
		curl -fsS "http://127.0.0.1:$port/metrics" -o "$out/$name-metrics.txt" || up=0
	fi
	cleanup
	pid=""
	if [ "$up" != 1 ]; then
		echo "gpuscope did not serve /metrics; its log:"
		tail -n 40 "$out/$name.log"
		results+=("$name|did not serve|-")
		failed=1
		return
	fi
	local args=(--metrics "$out/$name-metrics.txt" --collectors "$csv" --log "$out/$name.log" --gpus "$gpus")
	[ "$expect_gpm" = true ] && args+=(--expect-gpm)
	[ "$expect_mig" = true ] && args+=(--expect-mig)
	if "$out/bin/gpuscope-gpucheck" "${args[@]}" | tee "$out/$name-check.txt"; then
		results+=("$name|ok|$(tail -n 1 "$out/$name-check.txt")")
	else
		results+=("$name|FAILED|$(tail -n 1 "$out/$name-check.txt")")
		failed=1
	fi
}

run default etc/default-counters.csv
run all-fields "$out/all-fields.csv"
run profiling etc/dcp-metrics.csv

echo "== gpu-check ($source): files in $out"
printf '%-12s %-14s %s\n' RUN RESULT CHECKS
for r in "${results[@]}"; do
	IFS='|' read -r n res sum <<<"$r"
	printf '%-12s %-14s %s\n' "$n" "$res" "$sum"
done
exit "$failed"
