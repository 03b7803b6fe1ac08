#!/usr/bin/env bash
# Builds the Thanos binary that scripts/fleet.sh runs, from the module of its
# own in tools/thanos (Thanos v0.42.x needs a newer Go than the exporter and
# carries replace directives). The result is cached: a second call returns at
# once. Prints the binary's path on its last line of stdout.
#
#   scripts/build-thanos.sh            # build or reuse
#   THANOS_BIN=/path/to/thanos ...     # use a binary built elsewhere
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -n "${THANOS_BIN:-}" ]; then
	[ -x "$THANOS_BIN" ] || { echo "THANOS_BIN=$THANOS_BIN is not an executable file" >&2; exit 1; }
	echo "$THANOS_BIN"; exit 0
fi

version=$(awk '$1 == "require" && $2 == "github.com/thanos-io/thanos" {print $3}' tools/thanos/go.mod)
[ -n "$version" ] || { echo "tools/thanos/go.mod: no 'require github.com/thanos-io/thanos' line" >&2; exit 1; }
# Thanos' own build tag (.promu.yml): without slicelabels, Prometheus'
# labels are strings and Thanos' cast of them to its protobuf labels reads
# garbage, so every StoreAPI answer panics ("makeslice: len out of range").
# Its other tag, netgo, is what CGO_ENABLED=0 does already.
tags=slicelabels
ldflags="-X github.com/prometheus/common/version.Version=${version#v} -X github.com/prometheus/common/version.BuildUser=gpuscope"
# The cache key holds the module files' hash, comments left out, and the
# build flags, so that a changed requirement or flag rebuilds and a reworded
# comment does not.
sum=$( (grep -v '^[[:space:]]*//' tools/thanos/go.mod; cat tools/thanos/go.sum; echo "$tags $ldflags") | sha256sum | cut -c1-12)
cache="${GPUSCOPE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuscope}/thanos-$version-$sum"
bin="$cache/thanos"
if [ -x "$bin" ]; then
	echo "$bin"; exit 0
fi

# The toolchain is set for this build only, never for the exporter's.
export GOTOOLCHAIN=go1.27.3
mkdir -p "$cache"
echo "Building Thanos $version with $GOTOOLCHAIN into $cache (downloads the toolchain and" \
	"~280 modules the first time; 33 minutes on 2 busy shared cores, 7 of them CPU; cached afterwards)..." >&2
start=$(date +%s)
(cd tools/thanos && CGO_ENABLED=0 go build -mod=readonly -trimpath -tags "$tags" -ldflags "$ldflags" \
	-o "$bin.tmp" github.com/thanos-io/thanos/cmd/thanos)
mv "$bin.tmp" "$bin"
echo "Built Thanos $version in $(( $(date +%s) - start ))s: $bin" >&2
echo "$bin"
