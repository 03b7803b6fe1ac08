#!/usr/bin/env bash
# Installs the helm CLI used by the chart tests into $(go env GOPATH)/bin.
# Idempotent: does nothing when the pinned version is already there.
set -euo pipefail

HELM_VERSION="${HELM_VERSION:-v3.22.0}"
bin="$(go env GOPATH)/bin/helm"

# go install leaves helm's own version string short ("v3.22"); the module
# version recorded in the binary is exact.
if [[ -x "$bin" ]] && go version -m "$bin" 2>/dev/null | awk '$1 == "mod" { print $3 }' | grep -qx "${HELM_VERSION}"; then
  echo "helm ${HELM_VERSION} already installed at ${bin}"
  exit 0
fi

echo "installing helm ${HELM_VERSION} into $(dirname "$bin")"
# go install with a version does not read or change any go.mod.
GOFLAGS=-mod=mod go install "helm.sh/helm/v3/cmd/helm@${HELM_VERSION}"
"$bin" version --short
