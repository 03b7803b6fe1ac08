#!/usr/bin/env bash
# The whole test suite: formatting, vet, unit and end-to-end tests (a real
# Prometheus scraping the real binary), alert-rule tests, dashboard and Helm
# chart checks, every Go test under the race detector. Installs what it needs
# first (scripts/install-test-deps.sh).
#
# Every step runs even when an earlier one failed, and the run ends with a
# summary (scripts/testsummary): the failed tests, the skipped tests with the
# reason each gave, and as the last line "N passed, N failed, N skipped".
# The checks that are not Go tests (gofmt, vet, promtool) count as tests of
# scripts/test.sh. The exit status is 1 when anything failed.
set -uo pipefail
cd "$(dirname "$0")/.."
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}"
export PATH="$(go env GOPATH)/bin:$PATH"

scripts/install-test-deps.sh || { echo "test: installing the test dependencies failed" >&2; exit 1; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
events="$work/events.jsonl"
summary="$work/testsummary"
go build -o "$summary" ./scripts/testsummary || { echo "test: building scripts/testsummary failed" >&2; exit 1; }

# check NAME CMD...: a check that is not a Go test, counted as one.
check() {
	local name="$1"
	shift
	echo "== $name"
	"$summary" -events "$events" -check "$name" -- "$@"
}

# gotest DIR: every package of the Go module in DIR, with the race detector.
# The tests that read ../shared fail instead of skipping when CI=true.
gotest() {
	echo "== go test -race ($1)"
	(cd "$1" && go test -race -count=1 -timeout 10m -json ./... 2>&1) | "$summary" -stream -events "$events"
}

check gofmt bash -c 'out=$(gofmt -l $(git ls-files "*.go")); [ -z "$out" ] || { echo "gofmt would change:"; echo "$out"; exit 1; }'
check "go vet" go vet ./...
check "go vet (grafana)" bash -c 'cd grafana && go vet ./...'
check "go vet (deploy/helm/test)" bash -c 'cd deploy/helm/test && go vet ./...'

# Unit, integration and end-to-end tests of the exporter's module.
gotest .

# Alert and recording rules, then the grafana module: generated dashboards
# equal the checked-in JSON, every alert is documented and tested, and every
# dashboard query and recording rule returns data live (see
# scripts/verify-dashboards.sh, which runs the same on its own).
check "promtool check rules" promtool check rules deploy/prometheus/gpuscope-alerts.yml deploy/prometheus/gpuscope-recording.yml
check "promtool test rules" bash -c 'promtool test rules deploy/prometheus/tests/*.yml'
(export CI="${CI:-true}"; gotest grafana)

# The Helm chart: helm lint, strict decoding, schema, drift.
gotest deploy/helm/test

"$summary" -events "$events"
