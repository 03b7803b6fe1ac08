#!/usr/bin/env bash
# The whole test suite: formatting, vet, unit and end-to-end tests (a real
# Prometheus scraping the real binary), alert-rule tests, dashboard and Helm
# chart checks. Installs what it needs first (scripts/install-test-deps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}"
export PATH="$(go env GOPATH)/bin:$PATH"

scripts/install-test-deps.sh

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go'))
if [ -n "$unformatted" ]; then echo "gofmt would change:"; echo "$unformatted"; exit 1; fi

echo "== go vet"
go vet ./...

echo "== go test (unit and end-to-end)"
go test -count=1 ./...

echo "== go test -race (engine, window)"
go test -count=1 -race ./internal/engine/ ./internal/window/

echo "== alert rules (promtool) and dashboards (grafana module, live against a real Prometheus)"
scripts/verify-dashboards.sh

echo "== Helm chart (deploy/helm/test module: helm lint, strict decoding, schema, drift)"
(cd deploy/helm/test && go vet ./... && go test -count=1 ./...)

echo "== all tests passed"
