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
# make build's compile flags: the vet runs, this build and the binaries the
# tests build (internal/testkit/e2etest, grafana/verify) use them too, so
# that a cold Go build cache compiles each package once for all of them and
# for test/release's `make release`.
buildflags=$(make --no-print-directory -s buildflags) || { echo "test: make buildflags failed" >&2; exit 1; }
# shellcheck disable=SC2086 # a list of flags
go build $buildflags -o "$summary" ./scripts/testsummary || { echo "test: building scripts/testsummary failed" >&2; exit 1; }

# check NAME CMD...: a check that is not a Go test, counted as one.
check() {
	local name="$1"
	shift
	echo "== $name"
	"$summary" -events "$events" -check "$name" -- "$@"
}

# gotest DIR EVENTS [go test flags]: every package of the Go module in DIR,
# with the race detector, its events appended to EVENTS. The tests that read
# ../shared fail instead of skipping when CI=true. go test's own vet pass is
# off (-vet=off): the "go vet" checks below run every analyzer, a superset of
# its, on every package of the three modules, test files included.
gotest() {
	local dir="$1" ev="$2"
	shift 2
	echo "== go test -race ($dir)"
	(cd "$dir" && go test -race -vet=off -count=1 "$@" -json ./... 2>&1) | "$summary" -stream -events "$ev"
}

check gofmt bash -c 'out=$(gofmt -l $(git ls-files "*.go")); [ -z "$out" ] || { echo "gofmt would change:"; echo "$out"; exit 1; }'
# shellcheck disable=SC2086 # a list of flags
check "go vet" go vet $buildflags ./...
check "go vet (grafana)" bash -c "cd grafana && go vet $buildflags ./..."
check "go vet (deploy/helm/test)" bash -c "cd deploy/helm/test && go vet $buildflags ./..."
# staticcheck on the three modules, with the checks of staticcheck.conf (all
# of them; the one turned off, and where, is named there with its reason).
# install-test-deps.sh built it into the tool cache (tools/staticcheck).
tags=${buildflags##*-tags }
tags=${tags%% *}
staticcheck=$(scripts/build-staticcheck.sh | tail -n1) || staticcheck=
check staticcheck bash -c '[ -x "$1" ] || { echo "no staticcheck: scripts/build-staticcheck.sh failed"; exit 1; }
	rc=0; for m in . grafana deploy/helm/test; do (cd "$m" && "$1" -tags "$2" ./...) || rc=1; done; exit $rc' staticcheck "$staticcheck" "$tags"
check "promtool check rules" promtool check rules deploy/prometheus/gpuscope-alerts.yml deploy/prometheus/gpuscope-recording.yml
check "promtool test rules" bash -c 'promtool test rules deploy/prometheus/tests/*.yml'
# Debian's promtool 2.42 cannot read native-histogram input series. The
# promtool 3.x that install-test-deps.sh built with the Prometheus 3 server
# (scripts/build-prometheus.sh, cached) runs those tests, and the others
# again, so that the rules are checked under both PromQL generations that
# users run. The same promtool has Kubernetes service discovery, which
# Debian's lacks: the chart module checks the Kubernetes scrape example with
# it. The server runs the rules' end-to-end tests (grafana/verify, test/e2e)
# beside Debian's Prometheus 2.42.
GPUSCOPE_PROMTOOL3=$(scripts/build-prometheus.sh promtool | tail -n1) || GPUSCOPE_PROMTOOL3=
GPUSCOPE_PROMETHEUS3=$(scripts/build-prometheus.sh prometheus | tail -n1) || GPUSCOPE_PROMETHEUS3=
export GPUSCOPE_PROMTOOL3 GPUSCOPE_PROMETHEUS3
# The Kubernetes tests (test/kubechart, test/kubewatch) run a real etcd and
# kube-apiserver with the Prometheus Operator's CRDs, and test/e2e runs the
# exporter against NVIDIA's own NVML library: install-test-deps.sh built
# and fetched them into the tool cache, so these answer at once. A tool
# that is missing leaves its variable empty; its tests then say so (and
# fail under CI=true).
GPUSCOPE_ETCD=$(scripts/build-etcd.sh | tail -n1) || GPUSCOPE_ETCD=
GPUSCOPE_KUBE_APISERVER=$(scripts/build-kube-apiserver.sh | tail -n1) || GPUSCOPE_KUBE_APISERVER=
GPUSCOPE_PROMETHEUS_OPERATOR_CRDS=$(scripts/fetch-prometheus-operator-crds.sh | tail -n1) || GPUSCOPE_PROMETHEUS_OPERATOR_CRDS=
GPUSCOPE_LIBNVIDIA_ML_DIR=$(scripts/fetch-libnvidia-ml.sh | tail -n1) || GPUSCOPE_LIBNVIDIA_ML_DIR=
export GPUSCOPE_ETCD GPUSCOPE_KUBE_APISERVER GPUSCOPE_PROMETHEUS_OPERATOR_CRDS GPUSCOPE_LIBNVIDIA_ML_DIR
check "promtool 3 test rules" bash -c '[ -x "$GPUSCOPE_PROMTOOL3" ] || { echo "no promtool 3: scripts/build-prometheus.sh failed"; exit 1; }; "$GPUSCOPE_PROMTOOL3" test rules deploy/prometheus/tests/*.yml deploy/prometheus/tests/native-histograms/*.yml'

# The grafana module (generated dashboards equal the checked-in JSON, every
# alert is documented and tested, each rule group's minimum Prometheus
# release is documented, and live on both Prometheus servers every
# dashboard query and recording rule returns data, for the chart's default
# install too; scripts/verify-dashboards.sh runs the same on its own) and the
# Helm chart module (helm lint, strict decoding, schema, drift) mostly wait
# on Prometheus and helm, so they run beside the exporter's module; their
# output follows it.
(
	export CI="${CI:-true}"
	gotest grafana "$work/grafana.jsonl"
	gotest deploy/helm/test "$work/helm.jsonl"
) >"$work/modules.log" 2>&1 &
modules=$!

# Unit, integration and end-to-end tests of the exporter's module. Several
# packages run real binaries and wait on them, so more run at once than
# there are cores. test/release builds both release binaries and the SBOM
# tool: the amd64 build finds its packages compiled by go vet above (the same
# flags), but on a machine whose Go build cache is cold the arm64 cross build
# and the SBOM tool can still take longer than go test's default 10-minute
# limit per package on 2 busy cores (a minute or two once cached).
gotest . "$events" -p 4 -timeout 45m

wait "$modules"
cat "$work/modules.log"
cat "$work/grafana.jsonl" "$work/helm.jsonl" >>"$events" 2>/dev/null

"$summary" -events "$events"
