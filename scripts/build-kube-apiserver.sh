#!/usr/bin/env bash
# Builds the kube-apiserver that the Kubernetes tests run against
# (internal/testkit/kubetest), from the module of its own in
# tools/kube-apiserver, so that Kubernetes' dependencies never touch the
# exporter's go.mod. The result is cached by version: a second call returns
# at once. Prints the binary's path on its last line of stdout.
#
#   scripts/build-kube-apiserver.sh              # build or reuse
#   KUBE_APISERVER_BIN=/path/to/kube-apiserver   # use a binary built elsewhere
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/lib/gotool.sh
gotool_override KUBE_APISERVER_BIN && exit 0

version=$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ {print $2}' tools/kube-apiserver/go.mod)
[ -n "$version" ] || { echo "tools/kube-apiserver/go.mod: no requirement of k8s.io/kubernetes" >&2; exit 1; }
# Kubernetes' release build stamps its version (hack/lib/version.sh); a
# plain go build reports v0.0.0-master, which charts that check kubeVersion
# (dcgm-exporter's among them) refuse to install on.
major=$(echo "$version" | cut -d. -f1 | tr -d v)
minor=$(echo "$version" | cut -d. -f2)
vpkg=k8s.io/component-base/version
ldflags="-s -w -X $vpkg.gitVersion=$version -X $vpkg.gitMajor=$major -X $vpkg.gitMinor=$minor -X $vpkg.gitTreeState=clean -X $vpkg.gitCommit="
# Test-only: built without optimization (GOTOOL_TEST_GCFLAGS).
gotool_build kube-apiserver tools/kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "$version" \
	"Kubernetes $version; downloads ~180 modules, 150 MB, the first time; about 13 CPU-minutes: about 7 minutes on 2 idle cores, an hour on a machine shared by many builds" \
	"$ldflags $GOTOOL_TEST_GCFLAGS" -ldflags "$ldflags" -gcflags "$GOTOOL_TEST_GCFLAGS"
