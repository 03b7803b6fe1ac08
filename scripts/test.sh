#!/usr/bin/env bash
# The whole test suite: formatting, vet, unit and end-to-end tests (a real
# Prometheus scraping the real binary), alert-rule tests, dashboard and Helm
# chart checks, the Go tests under the race detector where their process runs
# gpuscope's goroutines (norace below lists the others). Installs what it needs
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

# The race detector checks the goroutines of the test process itself, and
# makes its code 2 to 20 times slower. The packages below run without it:
# no goroutine of gpuscope's code runs in their test processes. Their
# concurrency is that of child processes (gpuscope, Prometheus, promtool,
# helm, kube-apiserver and etcd, qemu), which -race does not see into, or
# of the test harness alone (a scraper beside a reload, parallel subtests
# that share no state), or they have none. Every other package, and so any new one, runs under
# -race. A package moves here only with its reason; the engine, server,
# sources and enrichers, whose goroutines are the point, never do.
norace=(
	test/e2e              # the binary, its client and Prometheus as children; harness goroutines
	test/scenarios        # the binary on a manual clock and promtool, as children; parallel subtests
	test/kubechart        # helm, kube-apiserver and etcd, as children
	test/rulevocab        # promtool, as a child
	test/release          # make release, and the binaries under qemu, as children
	test/nvgecompat       # the binary, as a child
	test/budget           # the binary, as a child; the engine's series arithmetic read in-process
	test/fieldspage       # the binary, as a child; the sim's field table read in-process
	test/image            # the Dockerfile's commands, as children
	test/layout           # reads the source tree
	cmd/gpuscope-cudaload # the binary and the loader, as children
	internal/engine/window  # one goroutine; the engine's tests use it concurrently, under -race
	internal/client/report  # one goroutine: the report queries a fake Prometheus in turn
	grafana/dash          # builds the dashboards on one goroutine
	grafana/verify        # the binary and both Prometheus servers, as children; harness goroutines
	grafana/gen           # writes the dashboards
	deploy/helm/test      # helm, as a child
)

# The packages with the most to do start first, in this order, in either
# set: a long one started late is left running alone at the end while the
# other core idles. From the ten slowest of warm runs' summaries.
first=(
	test/scenarios
	test/e2e
	test/rulevocab
	cmd/gpuscope
	test/kubewatch
	test/kubechart
	test/release
	grafana/verify
)

# gotest DIR EVENTS [go test flags]: every package of the Go module in DIR,
# those of norace without the race detector and the others with it, the two
# sets at once, their events appended to EVENTS. The race set runs at most
# `-p` packages at once; the norace set three, since test/e2e and
# grafana/verify spend minutes waiting on their children and would
# otherwise hold a slot each while the cores have work. Each set starts the
# packages of first before the others. The tests that read ../shared fail
# instead of skipping when CI=true. go test's own vet pass is off (-vet=off): the "go vet" checks
# below run every analyzer, a superset of its, on every package of the
# three modules, test files included.
gotest() {
	local dir="$1" ev="$2" pkg rel n
	shift 2
	local race=() plain=()
	while read -r pkg rel; do
		if printf '%s\n' "${norace[@]}" | grep -qx "$rel"; then plain+=("$pkg"); else race+=("$pkg"); fi
	done < <(packages "$dir")
	echo "== go test ($dir): ${#race[@]} packages under -race, ${#plain[@]} without"
	if [ "${#plain[@]}" -gt 0 ]; then
		(cd "$dir" && go test -vet=off -count=1 "$@" -p 3 -json "${plain[@]}" 2>&1) | "$summary" -stream -events "$ev.plain" &
		n=$!
	fi
	if [ "${#race[@]}" -gt 0 ]; then
		(cd "$dir" && go test -race -vet=off -count=1 "$@" -json "${race[@]}" 2>&1) | "$summary" -stream -events "$ev"
	fi
	[ -z "${n:-}" ] || wait "$n"
	cat "$ev.plain" >>"$ev" 2>/dev/null
	rm -f "$ev.plain"
}

# packages DIR: the packages of the module in DIR, one "import-path dir"
# line each, dir from the repository root as norace and first name it, the
# packages of first first.
packages() {
	local root="$PWD"
	(cd "$1" && go list -f '{{.ImportPath}} {{.Dir}}' ./...) | sed "s| $root/| |" |
		awk -v first="${first[*]}" 'BEGIN { n = split(first, f, " "); for (i = 1; i <= n; i++) rank[f[i]] = i }
			{ print ($2 in rank ? rank[$2] : n + 1), NR, $0 }' | sort -n -k1,1 -k2,2 | cut -d" " -f3-
}

# Every entry of norace and of first names a package of the three modules,
# as gotest reads them: a stale one in norace would leave its successor
# under -race without a word, and one in either list could hide a typo.
known=$(for m in . grafana deploy/helm/test; do packages "$m"; done | cut -d" " -f2)
inlist='list=$1 known=$2; shift 2; for p; do grep -qx "$p" <<<"$known" || { echo "scripts/test.sh: $list names $p, which is no package"; exit 1; }; done'
check "norace list" bash -c "$inlist" norace norace "$known" "${norace[@]}"
check "first list" bash -c "$inlist" first first "$known" "${first[@]}"

check gofmt bash -c 'out=$(gofmt -l $(git ls-files "*.go")); [ -z "$out" ] || { echo "gofmt would change:"; echo "$out"; exit 1; }'
# shellcheck disable=SC2086 # a list of flags
check "go vet" go vet $buildflags ./...
check "go vet (grafana)" bash -c "cd grafana && go vet $buildflags ./..."
check "go vet (deploy/helm/test)" bash -c "cd deploy/helm/test && go vet $buildflags ./..."
# gpuscope and gpuscope-client, linked once with make build's flags for
# every test package that runs them (internal/testkit/e2etest.Binary and
# grafana/verify read GPUSCOPE_BIN) rather than once in each of the eight.
# shellcheck disable=SC2086 # a list of flags
if check "go build (the binaries the tests run)" go build $buildflags -o "$work/bin/" ./cmd/gpuscope ./cmd/gpuscope-client; then
	export GPUSCOPE_BIN="$work/bin/gpuscope"
fi
# staticcheck on the three modules, with the checks of staticcheck.conf (all
# of them; the one turned off, and where, is named there with its reason).
# install-test-deps.sh built it into the tool cache (tools/staticcheck).
tags=${buildflags##*-tags }
tags=${tags%% *}
staticcheck=$(scripts/build-staticcheck.sh | tail -n1) || staticcheck=
check staticcheck bash -c '[ -x "$1" ] || { echo "no staticcheck: scripts/build-staticcheck.sh failed"; exit 1; }
	rc=0; for m in . grafana deploy/helm/test; do (cd "$m" && "$1" -tags "$2" ./...) || rc=1; done; exit $rc' staticcheck "$staticcheck" "$tags"
check "promtool check rules" promtool check rules deploy/prometheus/gpuscope-alerts.yml deploy/prometheus/gpuscope-recording.yml
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

# The rules' unit tests under both promtools. Each promtool works on one
# core, so they run beside each other and the Go tests below; their output
# follows the Go tests'.
(
	events="$work/promtool.jsonl"
	check "promtool test rules" bash -c 'promtool test rules deploy/prometheus/tests/*.yml' >"$work/promtool2.log" 2>&1 &
	check "promtool 3 test rules" bash -c '[ -x "$GPUSCOPE_PROMTOOL3" ] || { echo "no promtool 3: scripts/build-prometheus.sh failed"; exit 1; }; "$GPUSCOPE_PROMTOOL3" test rules deploy/prometheus/tests/*.yml deploy/prometheus/tests/native-histograms/*.yml'
	wait
	cat "$work/promtool2.log"
) >"$work/promtool.log" 2>&1 &
promtools=$!

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
	# grafana/verify's live checks wait a minute or more on Prometheus each
	# and take little CPU: four at once.
	gotest grafana "$work/grafana.jsonl" -parallel 4
	gotest deploy/helm/test "$work/helm.jsonl"
) >"$work/modules.log" 2>&1 &
modules=$!

# Unit, integration and end-to-end tests of the exporter's module. Several
# packages run real binaries and wait on them, so more run at once than
# there are cores: two with -race and three without. test/release builds both
# release binaries and the SBOM tool: the amd64 build finds its packages
# compiled by go vet above (the same
# flags), but on a machine whose Go build cache is cold the arm64 cross build
# and the SBOM tool can still take longer than go test's default 10-minute
# limit per package on 2 busy cores (a minute or two once cached).
gotest . "$events" -p 2 -timeout 45m

wait "$modules"
cat "$work/modules.log"
wait "$promtools"
cat "$work/promtool.log"
cat "$work/promtool.jsonl" >>"$events" 2>/dev/null
cat "$work/grafana.jsonl" "$work/helm.jsonl" >>"$events" 2>/dev/null

# GPUSCOPE_TEST_EVENTS keeps every event of the run (go test -json, and
# the checks), for a look at where the time of a test went.
[ -z "${GPUSCOPE_TEST_EVENTS:-}" ] || cp "$events" "$GPUSCOPE_TEST_EVENTS"
"$summary" -events "$events"
