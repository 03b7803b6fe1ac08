#!/usr/bin/env bash
# Builds the etcd that the Kubernetes tests' API server stores its objects
# in (internal/testkit/kubetest), from the module of its own in tools/etcd,
# so that etcd's dependencies never touch the exporter's go.mod. The result
# is cached by version: a second call returns at once. Prints the binary's
# path on its last line of stdout.
#
#   scripts/build-etcd.sh              # build or reuse
#   ETCD_BIN=/path/to/etcd ...         # use a binary built elsewhere
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/lib/gotool.sh
gotool_override ETCD_BIN && exit 0

version=$(awk '($1 == "require" && $2 == "go.etcd.io/etcd/server/v3") {print $3} ($1 == "go.etcd.io/etcd/server/v3") {print $2}' tools/etcd/go.mod)
[ -n "$version" ] || { echo "tools/etcd/go.mod: no requirement of go.etcd.io/etcd/server/v3" >&2; exit 1; }
ldflags="-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=$version"
# Test-only: built without optimization (GOTOOL_TEST_GCFLAGS).
gotool_build etcd tools/etcd github.com/gpuscope/gpuscope/tools/etcd "$version" \
	"etcd $version; downloads ~70 modules the first time; about 1.1 CPU-minutes: about a minute on 2 idle cores" \
	"$ldflags $GOTOOL_TEST_GCFLAGS" -ldflags "$ldflags" -gcflags "$GOTOOL_TEST_GCFLAGS"
