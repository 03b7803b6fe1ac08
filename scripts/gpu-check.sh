#!/usr/bin/env bash
# gpu-check.sh: the first test of gpuscope on a real GPU machine. It fails
# when something is wrong, finishes within GPU_CHECK_CAP_S seconds (default
# 480) and writes one report, $OUT/gpu-check-report.txt, beside the scrapes
# and logs it judged. Phases:
#   preflight  which glibc the binaries need, against the host's;
#   runs       gpuscope with the default counters, with every field the
#              source can serve, and with the profiling set, each as the
#              calling user and again as a non-root user (uid 65534 through
#              setpriv, as the images run), each scrape judged by
#              gpuscope-gpucheck: every GPU exported and none lost, every
#              field present or reported unsupported, values plausible, and
#              each field equal to `nvidia-smi --query-gpu` taken just before
#              and just after the scrape, in dcgm-exporter's units (MiB, MHz,
#              W, C, %); in MIG mode GPU_UTIL is expected unsupported;
#   soak       scrapes every GPU_CHECK_SOAK_EVERY_S seconds for
#              GPU_CHECK_SOAK_S: gpuscope_sample_errors_total stays 0, no GPU
#              is lost, the resident set stays flat;
#   load       gpuscope-cudaload (libcuda.so.1 and embedded PTX; no CUDA
#              toolkit) holds GPU_CHECK_LOAD_GIB GiB on the first GPU without
#              MIG for GPU_CHECK_LOAD_S seconds (0 skips it), runs an FMA loop
#              and host-to-device copies: SM activity above 0.5, the
#              framebuffer grown by the allocation, PCIe traffic near the
#              copy rate, the process listed with PID, name and memory.
#
# Binaries: GPU_CHECK_BIN names a folder holding gpuscope, gpuscope-gpucheck
# and gpuscope-cudaload. Unset, a bundle (`make gpu-check-bundle`, unpacked:
# no go.mod beside bin/) uses its own bin/; a checkout builds them with Go,
# or uses bin/ when Go is absent. The GPU machine needs neither Go nor a
# network.
#
# Settings (environment): OUT (./gpu-check-out), GPU_CHECK_CAP_S (480),
# GPU_CHECK_RUN_S (20), GPU_CHECK_SOAK_S (60), GPU_CHECK_SOAK_EVERY_S (5),
# GPU_CHECK_LOAD_S (45), GPU_CHECK_LOAD_GIB (8), GPU_CHECK_PORT (19400),
# GPU_CHECK_NONROOT_UID (65534), GPU_CHECK_STAGE_DIR (/tmp: where the
# binaries are copied for the non-root user; it must allow executables).
#
# GPU_CHECK_SOURCE=sim runs the same pipeline on simulated GPUs where there
# is no GPU (no nvidia-smi cross-check and no load there). The test suite
# runs the bundle that way, and through the NVML source against a fake
# libnvidia-ml.so.1, libcuda.so.1 and nvidia-smi that answer from a real
# capture (test/e2e/gpucheck_test.go), to keep this script working.
set -euo pipefail

cd "$(dirname "$0")/.."
root=$(pwd)
out="${OUT:-./gpu-check-out}"
source="${GPU_CHECK_SOURCE:-nvml}"
run_s="${GPU_CHECK_RUN_S:-20}"
soak_s="${GPU_CHECK_SOAK_S:-60}"
soak_every="${GPU_CHECK_SOAK_EVERY_S:-5}"
load_s="${GPU_CHECK_LOAD_S:-45}"
load_gib="${GPU_CHECK_LOAD_GIB:-8}"
cap_s="${GPU_CHECK_CAP_S:-480}"
port="${GPU_CHECK_PORT:-19400}"
nonroot_uid="${GPU_CHECK_NONROOT_UID:-65534}"
mkdir -p "$out"
out=$(cd "$out" && pwd)
report="$out/gpu-check-report.txt"
: >"$report"
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}"
started=$SECONDS

# Everything printed goes to the terminal and to the report.
say() { printf '%s\n' "$*" | tee -a "$report"; }
results=()
failed=0
result() { # PHASE USER RESULT DETAIL
	results+=("$1|$2|$3|$4")
	[ "$3" = ok ] || [ "$3" = skipped ] || failed=1
}
left() { echo $((cap_s - (SECONDS - started))); }

# finish: the table of every phase, in the report too; exit 1 when any
# failed.
finish() {
	local took=$((SECONDS - started))
	if [ "$took" -gt "$cap_s" ]; then
		result cap - FAILED "took ${took}s, over the ${cap_s}s cap"
	fi
	say "== gpu-check ($source) in ${took}s: report $report"
	say "$(printf '%-18s %-8s %-8s %s' PHASE USER RESULT DETAIL)"
	for r in "${results[@]}"; do
		IFS='|' read -r phase u res detail <<<"$r"
		say "$(printf '%-18s %-8s %-8s %s' "$phase" "$u" "$res" "$detail")"
	done
	exit "$failed"
}

pid=""
loadpid=""
stage=""
smi_failed=0
cleanup() {
	for p in $loadpid $pid; do
		kill "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	pid="" loadpid=""
	if [ -n "$stage" ]; then rm -rf "$stage"; fi
}
trap cleanup EXIT

case "$source" in
nvml | sim) ;;
*)
	echo "gpu-check: GPU_CHECK_SOURCE must be nvml or sim, not $source" >&2
	exit 2
	;;
esac

# ---- binaries
bindir="${GPU_CHECK_BIN:-}"
if [ -z "$bindir" ]; then
	if [ ! -f go.mod ]; then
		bindir="$root/bin"
	elif command -v go >/dev/null; then
		say "== build (go $(go env GOVERSION))"
		bindir="$out/bin"
		for cmd in gpuscope gpuscope-gpucheck gpuscope-cudaload; do
			timeout 300 go build -trimpath -tags urfave_cli_no_docs,testify_yaml_fail -o "$bindir/$cmd" "./cmd/$cmd"
		done
	else
		bindir="$root/bin"
	fi
fi
for cmd in gpuscope gpuscope-gpucheck gpuscope-cudaload; do
	if [ ! -x "$bindir/$cmd" ]; then
		echo "gpu-check: $bindir/$cmd is missing: run this from a checkout with Go, or from the bundle of \`make gpu-check-bundle\` (GPU_CHECK_BIN names another folder)" >&2
		exit 2
	fi
done

# ---- preflight: glibc
# glibc_needed BIN: the newest GLIBC_x.y symbol version the binary asks for.
glibc_needed() {
	{ objdump -T "$1" 2>/dev/null || readelf -W --dyn-syms "$1" 2>/dev/null || true; } |
		grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -Vu | tail -n 1
}
host_glibc=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}' || true)
[ -n "$host_glibc" ] || host_glibc=$(ldd --version 2>/dev/null | head -n 1 | grep -o '[0-9][0-9.]*$' || true)
say "== preflight: source=$source binaries=$bindir host glibc=${host_glibc:-unknown} cap=${cap_s}s"
glibc_ok=1
for cmd in gpuscope gpuscope-gpucheck gpuscope-cudaload; do
	need=$(glibc_needed "$bindir/$cmd")
	verdict=ok
	if [ -n "$need" ] && [ -n "$host_glibc" ] && [ "$(printf '%s\n%s\n' "$need" "$host_glibc" | sort -V | tail -n 1)" != "$host_glibc" ]; then
		verdict="TOO OLD: build the bundle on a machine with glibc <= $host_glibc"
		glibc_ok=0
	fi
	say "$(printf '%-20s needs glibc %-6s host %-6s %s' "$cmd" "${need:-none}" "${host_glibc:-?}" "$verdict")"
done
if [ "$glibc_ok" != 1 ]; then
	# Nothing else can start: the dynamic loader refuses the binaries.
	result preflight - FAILED "the binaries need a newer glibc than the host's"
	finish
else
	result preflight - ok "glibc ${host_glibc:-?}"
fi

# ---- the machine
gpus=0 expect_gpm=false expect_mig=false load_gpu="" load_uuid=""
smi_query=$("$bindir/gpuscope-gpucheck" smi-query)
if [ "$source" = nvml ]; then
	if ! command -v nvidia-smi >/dev/null; then
		echo "gpu-check: nvidia-smi not found: this script needs a GPU machine (GPU_CHECK_SOURCE=sim runs it on simulated GPUs)" >&2
		exit 2
	fi
	say "== nvidia-smi"
	nvidia-smi -L | tee "$out/nvidia-smi-L.txt" | tee -a "$report"
	nvidia-smi --query-gpu=index,name,compute_cap,mig.mode.current,driver_version --format=csv | tee -a "$report" >"$out/nvidia-smi-query.txt"
	gpus=$(grep -c '^GPU ' "$out/nvidia-smi-L.txt" || true)
	# GPM (the profiling fields through NVML) needs compute capability 9.0 or later.
	cc_major=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | sort -n | head -n 1 | cut -d. -f1)
	[ "${cc_major:-0}" -ge 9 ] && expect_gpm=true
	nvidia-smi --query-gpu=mig.mode.current --format=csv,noheader | grep -qi enabled && expect_mig=true
	read -r load_gpu load_uuid < <(nvidia-smi --query-gpu=index,uuid,mig.mode.current --format=csv,noheader |
		awk -F', *' '$3 != "Enabled" {print $1, $2; exit}') || true
else
	gpus=8 expect_gpm=true
fi
say "gpu-check: gpus=$gpus expect_gpm=$expect_gpm expect_mig=$expect_mig load_gpu=${load_gpu:-none}"

# The binaries and counters files, where a non-root user can read them.
stage=$(mktemp -d "${GPU_CHECK_STAGE_DIR:-/tmp}/gpu-check.XXXXXX")
chmod 755 "$stage"
cp "$bindir"/gpuscope "$bindir"/gpuscope-gpucheck "$bindir"/gpuscope-cudaload etc/default-counters.csv etc/dcp-metrics.csv "$stage/"
"$stage/gpuscope" counters list --source "$source" --format csv | sed 's/^# DCGM_/DCGM_/' >"$stage/all-fields.csv"
"$stage/gpuscope" counters check "$stage/all-fields.csv" "$stage/default-counters.csv" "$stage/dcp-metrics.csv" >>"$report" 2>&1
chmod -R a+rX "$stage"

# as USER CMD...: run as root or as the non-root user. It execs, so that
# in a background subshell $! is the command's own PID, which stop kills.
as() {
	local user=$1
	shift
	if [ "$user" = nonroot ]; then
		exec setpriv --reuid="$nonroot_uid" --regid="$nonroot_uid" --clear-groups -- "$@"
	fi
	exec "$@"
}

users=("$(id -un)")
if [ "$(id -u)" = 0 ]; then
	if command -v setpriv >/dev/null; then
		users+=(nonroot)
	else
		result runs nonroot FAILED "setpriv (util-linux) is missing: the non-root runs cannot start"
	fi
fi

# start USER NAME CSV ARGS...: serve in the background; 1 when it never
# serves /metrics.
start() {
	local user=$1 name=$2 csv=$3
	shift 3
	(as "$user" "$stage/gpuscope" --source="$source" --collectors "$csv" --address "127.0.0.1:$port" "$@") >"$out/$name.log" 2>&1 &
	pid=$!
	for _ in $(seq 1 150); do
		if curl -fsS -m 5 "http://127.0.0.1:$port/metrics" -o /dev/null 2>/dev/null; then
			say "gpuscope ($name) pid $pid serves as uid $(awk '/^Uid:/ {print $2}' "/proc/$pid/status" 2>/dev/null)"
			return 0
		fi
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.2
	done
	say "gpuscope ($name) did not serve /metrics; its log:"
	tail -n 40 "$out/$name.log" | tee -a "$report"
	return 1
}

stop() {
	if [ -n "$pid" ]; then
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	pid=""
}

scrape() { curl -fsS -m 10 "http://127.0.0.1:$port/metrics" -o "$1"; }
# smi FILE: nvidia-smi's answer for the cross-check. A driver that cannot
# answer the query fails the run, saying why, rather than skip the check.
smi() {
	[ "$source" = nvml ] || return 1
	if ! nvidia-smi --query-gpu="$smi_query" --format=csv >"$1" 2>&1; then
		say "nvidia-smi --query-gpu failed: $(head -n 1 "$1")"
		smi_failed=1
		return 1
	fi
}

# run USER NAME CSV: serve, scrape after run_s seconds with nvidia-smi
# around the scrape, and judge the scrape, the log and the cross-check.
run() {
	local user=$1 name=$2 csv=$3
	local tag="$name-$user"
	smi_failed=0
	say "== run $tag ($csv) for ${run_s}s"
	if [ "$(left)" -lt $((run_s + 30)) ]; then
		result "run $name" "$user" FAILED "not started: the ${cap_s}s cap is near"
		return
	fi
	if ! start "$user" "$tag" "$stage/$csv" --collect-interval 1s; then
		result "run $name" "$user" FAILED "did not serve"
		stop
		return
	fi
	sleep "$run_s"
	local args=(--metrics "$out/$tag-metrics.txt" --collectors "$stage/$csv" --log "$out/$tag.log" --gpus "$gpus")
	if smi "$out/$tag-smi-before.csv"; then args+=(--nvidia-smi-before "$out/$tag-smi-before.csv"); fi
	scrape "$out/$tag-metrics.txt" || true
	if smi "$out/$tag-smi-after.csv"; then args+=(--nvidia-smi-after "$out/$tag-smi-after.csv"); fi
	stop
	[ "$expect_gpm" = true ] && args+=(--expect-gpm)
	[ "$expect_mig" = true ] && args+=(--expect-mig)
	if "$stage/gpuscope-gpucheck" "${args[@]}" >"$out/$tag-check.txt" 2>&1 && [ "$smi_failed" = 0 ]; then
		result "run $name" "$user" ok "$(tail -n 1 "$out/$tag-check.txt")"
	elif [ "$smi_failed" = 1 ]; then
		result "run $name" "$user" FAILED "nvidia-smi could not answer the cross-check's query; $(tail -n 1 "$out/$tag-check.txt")"
	else
		result "run $name" "$user" FAILED "$(tail -n 1 "$out/$tag-check.txt")"
	fi
	tee -a "$report" <"$out/$tag-check.txt" >/dev/null
}

for user in "${users[@]}"; do
	run "$user" default default-counters.csv
	run "$user" all-fields all-fields.csv
	run "$user" profiling dcp-metrics.csv
done

# ---- soak, as the last user (non-root where the check runs as root)
user="${users[-1]}"
say "== soak as $user: a scrape every ${soak_every}s for ${soak_s}s"
if [ "$(left)" -lt $((soak_s + load_s + 60)) ]; then
	result soak "$user" FAILED "not started: the ${cap_s}s cap is near"
elif start "$user" soak "$stage/default-counters.csv" --collect-interval 1s; then
	files=()
	for i in $(seq -w 1 $((soak_s / soak_every))); do
		sleep "$soak_every"
		scrape "$out/soak-$i.txt" && files+=("$out/soak-$i.txt")
	done
	stop
	if "$stage/gpuscope-gpucheck" soak "${files[@]}" >"$out/soak-check.txt" 2>&1; then
		result soak "$user" ok "$(tail -n 1 "$out/soak-check.txt")"
	else
		result soak "$user" FAILED "$(tail -n 1 "$out/soak-check.txt")"
	fi
	tee -a "$report" <"$out/soak-check.txt" >/dev/null
else
	stop
	result soak "$user" FAILED "did not serve"
fi

# ---- load
say "== load: ${load_gib} GiB and an FMA loop on GPU ${load_gpu:-none} for ${load_s}s"
if [ "$source" != nvml ]; then
	result load - skipped "simulated GPUs cannot be loaded"
elif [ "$load_s" = 0 ]; then
	result load - skipped "GPU_CHECK_LOAD_S=0"
elif [ -z "$load_gpu" ]; then
	result load - skipped "every GPU has MIG enabled; the load needs a whole GPU"
elif [ "$(left)" -lt $((load_s + 30)) ]; then
	result load "$user" FAILED "not started: the ${cap_s}s cap is near"
elif start "$user" load "$stage/dcp-metrics.csv" --collect-interval 1s --processes; then
	sleep 5
	scrape "$out/load-idle.txt" || true
	# CUDA numbers devices its own way (fastest first, MIG GPUs apart);
	# naming the GPU by UUID makes it CUDA's device 0 whatever the order.
	(as "$user" env CUDA_VISIBLE_DEVICES="$load_uuid" "$stage/gpuscope-cudaload" --device 0 \
		--memory-gib "$load_gib" --duration "${load_s}s") >"$out/cudaload.txt" 2>"$out/cudaload.err" &
	loadpid=$!
	for _ in $(seq 1 300); do
		grep -q '^ready ' "$out/cudaload.txt" 2>/dev/null && break
		kill -0 "$loadpid" 2>/dev/null || break
		sleep 0.2
	done
	busy=()
	sleep 5
	n=0
	while kill -0 "$loadpid" 2>/dev/null && [ "$n" -lt 60 ]; do
		n=$((n + 1))
		scrape "$out/load-busy-$n.txt" && busy+=(--busy "$out/load-busy-$n.txt")
		sleep 3
	done
	wait "$loadpid" || true
	loadpid=""
	stop
	tee -a "$report" <"$out/cudaload.txt" >/dev/null
	tee -a "$report" <"$out/cudaload.err" >/dev/null
	args=(load --idle "$out/load-idle.txt" --summary "$out/cudaload.txt" --gpu "$load_gpu" "${busy[@]}")
	[ "$expect_gpm" = true ] && args+=(--expect-gpm)
	if [ "${#busy[@]}" -gt 0 ] && "$stage/gpuscope-gpucheck" "${args[@]}" >"$out/load-check.txt" 2>&1; then
		result load "$user" ok "$(tail -n 1 "$out/load-check.txt")"
	else
		[ -f "$out/load-check.txt" ] || echo "no scrape during the load: $(tail -n 1 "$out/cudaload.err")" >"$out/load-check.txt"
		result load "$user" FAILED "$(tail -n 1 "$out/load-check.txt")"
	fi
	tee -a "$report" <"$out/load-check.txt" >/dev/null
else
	stop
	result load "$user" FAILED "did not serve"
fi

finish
