#!/usr/bin/env bash
# Builds or fetches, once, the tools the test suite runs that come from the
# Go module proxy and the web rather than from Debian's packages, each
# cached by the script named (scripts/lib/gotool.sh): Prometheus 3 and its
# promtool, etcd, kube-apiserver, the Prometheus Operator's CRDs, helm and
# staticcheck.
# scripts/install-test-deps.sh runs it in the background while apt-get
# installs Debian's packages. A second call returns at once.
set -euo pipefail
cd "$(dirname "$0")"

# Debian's promtool 2.42 cannot read the native-histogram input series of
# deploy/prometheus/tests/native-histograms, and the rules' end-to-end tests
# run on a current Prometheus as well as on Debian's 2.42: Prometheus 3 and
# its promtool are built from the Go module proxy (tools/prometheus) in one
# step, once, and cached.
./build-prometheus.sh >/dev/null

# A real control plane for the Kubernetes tests (test/kubechart,
# test/kubewatch): etcd and kube-apiserver built from the Go module proxy
# (tools/etcd, tools/kube-apiserver) once and cached, and the Prometheus
# Operator's CRDs fetched the same way.
./build-etcd.sh >/dev/null
./build-kube-apiserver.sh >/dev/null
./fetch-prometheus-operator-crds.sh >/dev/null

./install-helm.sh

# The linter of make test (tools/staticcheck), cached the same way.
./build-staticcheck.sh >/dev/null
