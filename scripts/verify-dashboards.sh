#!/usr/bin/env bash
# Checks the alert and recording rules with promtool, runs their unit tests
# (with Debian's promtool 2.42 and with promtool 3.10, which alone reads the
# native-histogram tests), and runs the grafana/ module's tests: generated
# dashboards equal the checked-in JSON and pass the SDK's strict unmarshal, every alert is
# documented and unit-tested, each rule group's minimum Prometheus release
# is documented, and (live) every dashboard query and recording rule returns
# data from the real gpuscope on its sim source, scraped by Debian's
# Prometheus 2.42 and by Prometheus 3 with all rules healthy, for the chart's
# default install too (helm: scripts/install-helm.sh).
#
# Needs promtool and prometheus (Debian: apt-get install -y prometheus).
# GPUSCOPE_BIN may name a prebuilt gpuscope binary; otherwise the live test
# builds one.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

for tool in promtool prometheus; do
	if ! command -v "$tool" >/dev/null; then
		echo "verify-dashboards: $tool not found; install Debian's prometheus package" >&2
		exit 1
	fi
done

promtool check rules deploy/prometheus/gpuscope-alerts.yml deploy/prometheus/gpuscope-recording.yml
promtool test rules deploy/prometheus/tests/*.yml
# The native-histogram rule tests need promtool 3, and the live checks run
# on Prometheus 3 as well (scripts/build-prometheus.sh builds both: cached;
# 13 CPU-minutes the first time).
"$(scripts/build-prometheus.sh promtool | tail -n 1)" test rules deploy/prometheus/tests/*.yml deploy/prometheus/tests/native-histograms/*.yml
GPUSCOPE_PROMETHEUS3="${GPUSCOPE_PROMETHEUS3:-$(scripts/build-prometheus.sh prometheus | tail -n 1)}"
export GPUSCOPE_PROMETHEUS3

export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}"
cd grafana
test -z "$(gofmt -l .)" || { echo "verify-dashboards: gofmt needed in grafana/: $(gofmt -l .)" >&2; exit 1; }
go vet ./...
CI="${CI:-true}" go test -count=1 -timeout 5m ./...
