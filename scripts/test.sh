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

for mod in $(git ls-files '*/go.mod' | xargs -n1 dirname); do
  echo "== module $mod: vet and test"
  (cd "$mod" && go vet ./... && go test -count=1 ./...)
done

if ls deploy/prometheus/*.yml >/dev/null 2>&1; then
  echo "== promtool check rules / test rules"
  promtool check rules deploy/prometheus/*rules*.yml
  promtool test rules deploy/prometheus/tests/*.yml
fi
echo "== all tests passed"
