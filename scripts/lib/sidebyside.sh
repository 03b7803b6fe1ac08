# Sourced by scripts/bench.sh: what its side-by-side parts need to build an
# older tree of gpuscope and the peer exporter, and to read rounds of
# benchmarks run alternately.
#
# Raw results are lines "ROUND BINARY BENCHMARK UNIT VALUE".

# tree_at REV [SUFFIX] extracts commit REV of this repository into
# $OUT/src-REV[SUFFIX], once, and prints the folder.
tree_at() {
	local rev=$1 dir="$OUT/src-$1${2:-}"
	if [ ! -f "$dir/go.mod" ]; then
		rm -rf "$dir"
		mkdir -p "$dir"
		git archive "$rev" | tar -x -C "$dir"
	fi
	echo "$dir"
}

# engine_test_at REV BIN builds the engine's test binary of REV into BIN;
# with --harness, REV runs the sampling benchmark of this tree
# (internal/engine/collect_bench_test.go) in place of its own, so that both
# sides measure the same loop.
engine_test_at() {
	local rev=$1 bin=$2 harness=${3:-} dir f
	dir=$(tree_at "$rev" "${harness:+-harness}")
	if [ -n "$harness" ]; then
		f="$dir/internal/engine/bench_test.go"
		# The functions the shared file defines leave the old one.
		awk '/^func (BenchmarkCollect|BenchmarkSimCollect|benchSecond|perSample|mallocs)\(/ { skip = 1 }
			skip { if ($0 ~ /^}/) skip = 0; next } { print }' "$f" >"$f.new"
		mv "$f.new" "$f"
		for p in runtime context time; do
			grep -q "[^a-z]$p\." "$f" || sed -i "/^\t\"$p\"$/d" "$f"
		done
		cp internal/engine/collect_bench_test.go "$dir/internal/engine/"
	fi
	(cd "$dir" && go test -c -o "$bin" ./internal/engine/)
}

# gpuscope_at REV BIN builds the gpuscope binary of REV as make build does.
gpuscope_at() {
	local dir
	[ -x "$2" ] && return 0
	dir=$(tree_at "$1")
	(cd "$dir" && make -s build BIN="$2" >&2)
}

# peer_build prints the path of nvidia_gpu_exporter built from
# $BENCH_PEER_REPO at $BENCH_PEER_REV with its release flags (-s -w,
# CGO_ENABLED=0), cloned and built once into the tool cache; its code
# never enters this repository.
peer_build() {
	local repo=${BENCH_PEER_REPO:-} rev=${BENCH_PEER_REV:-e656cd8} cache src bin
	if [ -z "$repo" ]; then
		repo=https://github.com/utkuozdemir/nvidia_gpu_exporter
		[ -d /work/.mirror/utkuozdemir+nvidia_gpu_exporter/repo ] && repo=/work/.mirror/utkuozdemir+nvidia_gpu_exporter/repo
	fi
	cache="${GPUSCOPE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuscope}/nvidia_gpu_exporter-$rev"
	bin="$cache/nvidia_gpu_exporter"
	if [ ! -x "$bin" ]; then
		echo "Building nvidia_gpu_exporter $rev from $repo into $cache (about a minute; cached afterwards)..." >&2
		src="$cache/src"
		rm -rf "$src"
		mkdir -p "$cache"
		git clone -q "$repo" "$src"
		git -C "$src" checkout -q "$rev"
		(cd "$src" && CGO_ENABLED=0 go build -mod=readonly -trimpath -ldflags '-s -w' -o "$bin.tmp" ./cmd/nvidia_gpu_exporter)
		mv "$bin.tmp" "$bin"
	fi
	echo "$bin"
}

# bench_rows ROUND BINARY prints go test -bench output on stdin as raw
# result lines.
bench_rows() {
	awk -v r="$1" -v b="$2" '/^Benchmark/ { n = $1; sub(/-[0-9]+$/, "", n); for (i = 3; i < NF; i += 2) print r, b, n, $(i+1), $i }'
}

# med FILE BINARY BENCHMARK UNIT prints the median over the rounds.
med() {
	awk -v b="$2" -v n="$3" -v u="$4" '$2 == b && $3 == n && $4 == u { print $5 }' "$1" | sort -g |
		awk '{ a[NR] = $1 } END { if (NR == 0) { print "NaN"; exit } print (NR % 2 ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2) }'
}

# ratios FILE B1 N1 B2 N2 UNIT prints "median min max" of the per-round
# ratios of B1's N1 to B2's N2.
ratios() {
	awk -v b1="$2" -v n1="$3" -v b2="$4" -v n2="$5" -v u="$6" \
		'$4 == u && $2 == b1 && $3 == n1 { x[$1] = $5 } $4 == u && $2 == b2 && $3 == n2 { y[$1] = $5 }
		END { for (r in x) if ((r in y) && y[r] > 0) print x[r] / y[r] }' "$1" | sort -g |
		awk '{ a[NR] = $1 } END { if (NR == 0) { print "NaN NaN NaN"; exit }
			printf "%.3f %.3f %.3f\n", (NR % 2 ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2), a[1], a[NR] }'
}

# ratio_text "MEDIAN MIN MAX" formats ratios as "1.23x (rounds 1.10-1.40x)".
ratio_text() {
	set -- $1
	printf '%sx (rounds %s-%sx)' "$1" "$2" "$3"
}
