#!/usr/bin/env bash
# Builds staticcheck (honnef.co/go/tools), the linter that scripts/test.sh
# runs on the three modules, at the version pinned in the module of its own
# in tools/staticcheck, so its dependencies never enter the exporter's
# go.mod. The result is cached: a second call returns at once. Prints the
# binary's path on its last line of stdout. Its checks and the ones turned
# off, each with its reason, are in staticcheck.conf at the root.
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/lib/gotool.sh

version=$(awk '$1 == "honnef.co/go/tools" {print $2}' tools/staticcheck/go.mod)
[ -n "$version" ] || { echo "tools/staticcheck/go.mod: no requirement of honnef.co/go/tools" >&2; exit 1; }
gotool_build staticcheck tools/staticcheck honnef.co/go/tools/cmd/staticcheck "$version" \
	"about a minute on 2 busy cores" ""
