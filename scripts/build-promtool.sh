#!/usr/bin/env bash
# Builds the promtool that runs the rule tests with native-histogram input
# series (deploy/prometheus/tests/native-histograms), which Debian's promtool
# 2.42 cannot read, at the Prometheus version pinned in the module of its own
# in tools/promtool, so its dependencies never touch the exporter's go.mod.
# The result is cached by version: a second call returns at once. Prints the
# binary's path on its last line of stdout.
#
#   scripts/build-promtool.sh              # build or reuse
#   PROMTOOL_BIN=/path/to/promtool ...     # use a binary built elsewhere
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -n "${PROMTOOL_BIN:-}" ]; then
	[ -x "$PROMTOOL_BIN" ] || { echo "PROMTOOL_BIN=$PROMTOOL_BIN is not an executable file" >&2; exit 1; }
	echo "$PROMTOOL_BIN"; exit 0
fi

version=$(awk '$1 == "github.com/prometheus/prometheus" {print $2}' tools/promtool/go.mod)
[ -n "$version" ] || { echo "tools/promtool/go.mod: no requirement of github.com/prometheus/prometheus" >&2; exit 1; }
# Prometheus tags 3.x.y as module version v0.3xx.y (v0.310.0 is 3.10.0).
release=$(echo "$version" | sed -E 's/^v0\.([0-9])([0-9]{2})\.([0-9]+)$/\1.\2.\3/; s/\.0([0-9])\./.\1./')
# remove_all_sd leaves out the service-discovery plugins (AWS, Azure, GCE
# and 20 more SDKs: half the build), which unit tests never use; promtool
# still links file, HTTP and Kubernetes discovery for `check config`.
tags=remove_all_sd
ldflags="-s -w -X github.com/prometheus/common/version.Version=$release -X github.com/prometheus/common/version.BuildUser=gpuscope"
# A changed requirement or flag rebuilds; a reworded comment does not.
sum=$( (grep -v '^[[:space:]]*//' tools/promtool/go.mod; cat tools/promtool/go.sum; echo "$tags $ldflags") | sha256sum | cut -c1-12)
cache="${GPUSCOPE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuscope}/promtool-$version-$sum"
bin="$cache/promtool"
if [ -x "$bin" ]; then
	echo "promtool $release already built: $bin" >&2
	echo "$bin"; exit 0
fi

mkdir -p "$cache"
echo "Building promtool $release into $cache (downloads ~135 modules, 120 MB, the first time;" \
	"6 minutes on 2 busy shared cores, 5.6 CPU-minutes; cached afterwards)..." >&2
start=$(date +%s)
(cd tools/promtool && CGO_ENABLED=0 go build -mod=readonly -trimpath -tags "$tags" -ldflags "$ldflags" \
	-o "$bin.tmp" github.com/prometheus/prometheus/cmd/promtool)
mv "$bin.tmp" "$bin"
echo "Built promtool $release in $(( $(date +%s) - start ))s: $bin" >&2
echo "$bin"
