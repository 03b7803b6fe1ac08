# Sourced by the scripts that build a Go tool from a module of its own under
# tools/ (build-thanos.sh, build-prometheus.sh, build-sbom.sh), so that the
# tool's dependencies never enter the exporter's go.mod.
#
# gotool_build NAME DIR PACKAGES VERSION ESTIMATE KEY [go build flags...]
#   builds PACKAGES (one import path, or several separated by spaces, built by
#   one go build so that the dependencies they share compile once) from the
#   module in DIR into a cache folder named after NAME, VERSION and a hash of
#   DIR's go.mod (comments left out), go.sum and KEY (the build flags, or ""
#   when there are none), so that a changed requirement or flag rebuilds and a
#   reworded comment does not. Each binary is named after the last element of
#   its package path. A second call returns at once. ESTIMATE says what the
#   first build costs. Prints the path of the binary named NAME on the last
#   line of stdout (the others lie beside it); the rest goes to stderr.
gotool_build() {
	local name=$1 dir=$2 pkgs=$3 version=$4 estimate=$5 key=$6
	shift 6
	local sum cache tmp start pkg bin built=1
	for pkg in $pkgs; do
		case "${pkg##*/}" in
		"" | . | ..) echo "gotool_build: $pkg: name each package by its import path, whose last element names the binary" >&2; return 2 ;;
		esac
	done
	sum=$( (grep -v '^[[:space:]]*//' "$dir/go.mod"; cat "$dir/go.sum"; [ -z "$key" ] || echo "$key") | sha256sum | cut -c1-12)
	cache="${GPUSCOPE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuscope}/$name-$version-$sum"
	for pkg in $pkgs; do
		[ -x "$cache/${pkg##*/}" ] || built=0
	done
	if [ "$built" = 1 ]; then
		echo "$name $version already built: $cache/$name" >&2
		echo "$cache/$name"
		return 0
	fi
	mkdir -p "$cache"
	echo "Building $name $version into $cache ($estimate; cached afterwards)..." >&2
	start=$(date +%s)
	# A folder of this build's own, so that a second build running at the
	# same time never moves a half-written binary into place.
	tmp=$(mktemp -d "$cache/.build.XXXXXX")
	# shellcheck disable=SC2086 # PACKAGES is a list
	if ! (cd "$dir" && CGO_ENABLED=0 go build -mod=readonly -trimpath "$@" -o "$tmp/" $pkgs); then
		rm -rf "$tmp"
		return 1
	fi
	for pkg in $pkgs; do
		bin=${pkg##*/}
		mv "$tmp/$bin" "$cache/$bin"
	done
	rmdir "$tmp"
	echo "Built $name $version in $(($(date +%s) - start))s: $cache/$name" >&2
	echo "$cache/$name"
}

# GOTOOL_TEST_GCFLAGS: compiler flags for the servers that only the tests run
# (etcd, kube-apiserver). Without optimization and inlining (-N -l) a cold
# build takes 23% less CPU (etcd 3.6: 162 s against 125 s of user+sys,
# side by side; README.md, "Test time budget"); the servers answer a few
# requests per test, where their speed does not show. Prometheus and promtool
# keep the optimizing build: promtool evaluates every rule test, and the
# server every query of the end-to-end tests, CPU that would grow.
GOTOOL_TEST_GCFLAGS='all=-N -l'

# gotool_override VAR: when the variable named VAR is set, prints it and
# says so, after checking that it names an executable file.
gotool_override() {
	local path=${!1:-}
	[ -n "$path" ] || return 1
	[ -x "$path" ] || { echo "$1=$path is not an executable file" >&2; exit 1; }
	echo "$path"
}
