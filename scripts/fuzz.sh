#!/usr/bin/env bash
# Runs every fuzz target for FUZZTIME each (default 30s; about 2 minutes in
# all). The seed corpora already run in every `go test` (make test); this
# explores beyond them. A failing input is written under the package's
# testdata/fuzz/ and from then on runs as a seed: commit it with the fix.
set -euo pipefail
cd "$(dirname "$0")/.."
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}"
FUZZTIME="${FUZZTIME:-30s}"

targets=(
  "./counters FuzzParse"
  "./internal/podattr FuzzDeviceKey"
  "./internal/hpcjob FuzzReadJobs"
  "./internal/server FuzzEndpointQueries"
)
for t in "${targets[@]}"; do
  read -r pkg name <<<"$t"
  echo "== fuzz $name ($pkg) for $FUZZTIME"
  go test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" "$pkg"
done
echo "== all fuzz targets ran $FUZZTIME without a failure"
