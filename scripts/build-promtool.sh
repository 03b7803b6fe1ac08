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

. scripts/lib/gotool.sh
gotool_override PROMTOOL_BIN && exit 0

version=$(awk '$1 == "github.com/prometheus/prometheus" {print $2}' tools/promtool/go.mod)
[ -n "$version" ] || { echo "tools/promtool/go.mod: no requirement of github.com/prometheus/prometheus" >&2; exit 1; }
# Prometheus tags 3.x.y as module version v0.3xx.y (v0.310.0 is 3.10.0).
release=$(echo "$version" | sed -E 's/^v0\.([0-9])([0-9]{2})\.([0-9]+)$/\1.\2.\3/; s/\.0([0-9])\./.\1./')
# remove_all_sd leaves out the service-discovery plugins (AWS, Azure, GCE
# and 20 more SDKs: half the build), which unit tests never use; promtool
# still links file, HTTP and Kubernetes discovery for `check config`.
tags=remove_all_sd
ldflags="-s -w -X github.com/prometheus/common/version.Version=$release -X github.com/prometheus/common/version.BuildUser=gpuscope"
gotool_build promtool tools/promtool github.com/prometheus/prometheus/cmd/promtool "$version" \
	"Prometheus $release; downloads ~135 modules, 120 MB, the first time; 6 minutes on 2 busy shared cores, 5.6 CPU-minutes" \
	"$tags $ldflags" -tags "$tags" -ldflags "$ldflags"
