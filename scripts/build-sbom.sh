#!/usr/bin/env bash
# Builds the SBOM generator that scripts/release.sh runs, CycloneDX's
# cyclonedx-gomod, at the version pinned in the module of its own in
# tools/sbom, so its dependencies never enter the exporter's go.mod. The
# result is cached: a second call returns at once. Prints the binary's path
# on its last line of stdout.
set -euo pipefail
cd "$(dirname "$0")/.."

version=$(awk '$1 == "github.com/CycloneDX/cyclonedx-gomod" {print $2}' tools/sbom/go.mod)
[ -n "$version" ] || { echo "tools/sbom/go.mod: no requirement of github.com/CycloneDX/cyclonedx-gomod" >&2; exit 1; }
# A changed requirement rebuilds; a reworded comment does not.
sum=$( (grep -v '^[[:space:]]*//' tools/sbom/go.mod; cat tools/sbom/go.sum) | sha256sum | cut -c1-12)
cache="${GPUSCOPE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuscope}/cyclonedx-gomod-$version-$sum"
bin="$cache/cyclonedx-gomod"
if [ -x "$bin" ]; then
	echo "$bin"; exit 0
fi

mkdir -p "$cache"
echo "Building cyclonedx-gomod $version into $cache (downloads ~50 modules the first time;" \
	"about 7 minutes on 2 busy cores; cached afterwards)..." >&2
start=$(date +%s)
(cd tools/sbom && CGO_ENABLED=0 go build -mod=readonly -trimpath -o "$bin.tmp" github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod)
mv "$bin.tmp" "$bin"
echo "Built cyclonedx-gomod $version in $(( $(date +%s) - start ))s: $bin" >&2
echo "$bin"
