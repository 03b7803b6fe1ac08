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

. scripts/lib/gotool.sh
gotool_override THANOS_BIN && exit 0

version=$(awk '$1 == "require" && $2 == "github.com/thanos-io/thanos" {print $3}' tools/thanos/go.mod)
[ -n "$version" ] || { echo "tools/thanos/go.mod: no 'require github.com/thanos-io/thanos' line" >&2; exit 1; }
# Thanos' own build tag (.promu.yml): without slicelabels, Prometheus'
# labels are strings and Thanos' cast of them to its protobuf labels reads
# garbage, so every StoreAPI answer panics ("makeslice: len out of range").
# Its other tag, netgo, is what CGO_ENABLED=0 does already.
tags=slicelabels
ldflags="-X github.com/prometheus/common/version.Version=${version#v} -X github.com/prometheus/common/version.BuildUser=gpuscope"
# The toolchain is set for this build only, never for the exporter's.
export GOTOOLCHAIN=go1.27.3
gotool_build thanos tools/thanos github.com/thanos-io/thanos/cmd/thanos "$version" \
	"with $GOTOOLCHAIN; downloads the toolchain and ~280 modules the first time; 33 minutes on 2 busy shared cores, 7 of them CPU" \
	"$tags $ldflags" -tags "$tags" -ldflags "$ldflags"
