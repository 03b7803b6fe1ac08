# Sourced by the scripts that build a Go tool from a module of its own under
# tools/ (build-thanos.sh, build-promtool.sh, build-sbom.sh), so that the
# tool's dependencies never enter the exporter's go.mod.
#
# gotool_build NAME DIR PACKAGE VERSION ESTIMATE KEY [go build flags...]
#   builds PACKAGE from the module in DIR into a cache folder named after
#   NAME, VERSION and a hash of DIR's go.mod (comments left out), go.sum and
#   KEY (the build flags, or "" when there are none), so that a changed
#   requirement or flag rebuilds and a reworded comment does not. A second
#   call returns at once. ESTIMATE says what the first build costs. Prints
#   the binary's path on the last line of stdout; the rest goes to stderr.
gotool_build() {
	local name=$1 dir=$2 pkg=$3 version=$4 estimate=$5 key=$6
	shift 6
	local sum cache bin start
	sum=$( (grep -v '^[[:space:]]*//' "$dir/go.mod"; cat "$dir/go.sum"; [ -z "$key" ] || echo "$key") | sha256sum | cut -c1-12)
	cache="${GPUSCOPE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuscope}/$name-$version-$sum"
	bin="$cache/$name"
	if [ -x "$bin" ]; then
		echo "$name $version already built: $bin" >&2
		echo "$bin"
		return 0
	fi
	mkdir -p "$cache"
	echo "Building $name $version into $cache ($estimate; cached afterwards)..." >&2
	start=$(date +%s)
	(cd "$dir" && CGO_ENABLED=0 go build -mod=readonly -trimpath "$@" -o "$bin.tmp" "$pkg")
	mv "$bin.tmp" "$bin"
	echo "Built $name $version in $(($(date +%s) - start))s: $bin" >&2
	echo "$bin"
}

# gotool_override VAR: when the variable named VAR is set, prints it and
# says so, after checking that it names an executable file.
gotool_override() {
	local path=${!1:-}
	[ -n "$path" ] || return 1
	[ -x "$path" ] || { echo "$1=$path is not an executable file" >&2; exit 1; }
	echo "$path"
}
