#!/usr/bin/env bash
# Fetches the Prometheus Operator's CustomResourceDefinitions (its Go
# module's example/prometheus-operator-crd folder) through the Go module
# proxy into the tool cache, for the tests that install the chart's
# ServiceMonitor, PodMonitor and PrometheusRule on a real API server
# (internal/testkit/kubetest). Nothing is committed. A second call returns
# at once. Prints the folder on its last line of stdout.
#
#   scripts/fetch-prometheus-operator-crds.sh
#   GPUSCOPE_PROMETHEUS_OPERATOR_CRDS=/path/to/folder ...   # use another copy
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -n "${GPUSCOPE_PROMETHEUS_OPERATOR_CRDS:-}" ]; then
	echo "$GPUSCOPE_PROMETHEUS_OPERATOR_CRDS"
	exit 0
fi
# The newest release of the operator's main module that the module proxy
# serves (later tags are refused there); its CRDs are the schema the API
# server checks the chart's objects against.
version=v0.85.0
module=github.com/prometheus-operator/prometheus-operator
dir="${GPUSCOPE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuscope}/prometheus-operator-crds-$version"
if [ -f "$dir/done" ]; then
	echo "Prometheus Operator CRDs $version already fetched: $dir" >&2
	echo "$dir"
	exit 0
fi
echo "Fetching the Prometheus Operator's CRDs ($module@$version, a 10 MB module) into $dir (seconds; cached afterwards)..." >&2
src=$(cd /tmp && GOFLAGS=-mod=mod go mod download -json "$module@$version" | awk -F'"' '$2 == "Dir" {print $4}')
[ -d "$src/example/prometheus-operator-crd" ] || { echo "$module@$version has no example/prometheus-operator-crd" >&2; exit 1; }
mkdir -p "$dir"
cp "$src"/example/prometheus-operator-crd/*.yaml "$dir/"
chmod u+w "$dir"/*.yaml
touch "$dir/done"
echo "$dir"
