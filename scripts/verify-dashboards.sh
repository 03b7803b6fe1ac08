#!/usr/bin/env bash
# Checks the alert and recording rules with promtool, runs their unit tests
# (with Debian's promtool 2.42 and with promtool 3.10, which alone reads the
# native-histogram tests), and runs the grafana/ module's tests: generated
# dashboards equal the checked-in JSON and pass the SDK's strict unmarshal, every alert is
# documented and unit-tested, and (live) every dashboard query and recording
# rule returns data from the real gpuscope on its sim source, scraped by a
# real Prometheus with all rules healthy.
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
# The native-histogram rule tests need promtool 3 (scripts/build-promtool.sh:
# cached; about 6 minutes the first time).
"$(scripts/build-promtool.sh | tail -n 1)" test rules deploy/prometheus/tests/*.yml deploy/prometheus/tests/native-histograms/*.yml

export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}"
cd grafana
test -z "$(gofmt -l .)" || { echo "verify-dashboards: gofmt needed in grafana/: $(gofmt -l .)" >&2; exit 1; }
go vet ./...
CI="${CI:-true}" go test -count=1 -timeout 5m ./...
