#!/usr/bin/env bash
# Builds Prometheus 3 and its promtool, at the version pinned in the module of
# their own in tools/prometheus (so their dependencies never touch the
# exporter's go.mod), in one go build, so that the packages both link
# (PromQL, the TSDB, the rules engine) compile once. The server runs the
# rules' end-to-end tests beside Debian's Prometheus 2.42; promtool runs the
# rule unit tests with native-histogram input series, which Debian's promtool
# 2.42 cannot read. The result is cached by version and build flags: a second
# call returns at once. Prints the path of the binary asked for (prometheus
# by default) on its last line of stdout.
#
#   scripts/build-prometheus.sh [prometheus|promtool]   # build or reuse
#   PROMETHEUS3_BIN=/path/to/prometheus ...              # a server built elsewhere
#   PROMTOOL_BIN=/path/to/promtool ...                   # a promtool built elsewhere
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/lib/gotool.sh
want=${1:-prometheus}
case "$want" in
prometheus) gotool_override PROMETHEUS3_BIN && exit 0 ;;
promtool) gotool_override PROMTOOL_BIN && exit 0 ;;
*) echo "build-prometheus: unknown binary $want (prometheus or promtool)" >&2; exit 2 ;;
esac

version=$(awk '$1 == "github.com/prometheus/prometheus" {print $2}' tools/prometheus/go.mod)
[ -n "$version" ] || { echo "tools/prometheus/go.mod: no requirement of github.com/prometheus/prometheus" >&2; exit 1; }
# Prometheus tags 3.x.y as module version v0.3xx.y (v0.310.0 is 3.10.0).
release=$(echo "$version" | sed -E 's/^v0\.([0-9])([0-9]{2})\.([0-9]+)$/\1.\2.\3/; s/\.0([0-9])\./.\1./')
# remove_all_sd leaves out the service-discovery plugins (AWS, Azure, GCE
# and 20 more SDKs: half the build), which the tests never use; both keep
# file and HTTP discovery, and promtool Kubernetes discovery for
# `check config`. Without the builtinassets tag the server serves its API and
# no web UI, which the tests do not open.
tags=remove_all_sd
ldflags="-s -w -X github.com/prometheus/common/version.Version=$release -X github.com/prometheus/common/version.BuildUser=gpuscope"
bin=$(gotool_build prometheus tools/prometheus \
	"github.com/prometheus/prometheus/cmd/prometheus github.com/prometheus/prometheus/cmd/promtool" "$version" \
	"Prometheus $release and promtool; downloads ~180 modules, 1 GB unpacked, the first time; 13 CPU-minutes, 22 minutes on 2 cores shared with other builds" \
	"$tags $ldflags" -tags "$tags" -ldflags "$ldflags" | tail -n1)
echo "$(dirname "$bin")/$want"
