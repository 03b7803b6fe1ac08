#!/usr/bin/env bash
# Renders the plain manifests of deploy/kubernetes from the Helm chart with
# its default values, for clusters without Helm. The chart tests fail when
# the file is stale.
#   scripts/render-manifests.sh [OUTPUT]   (default deploy/kubernetes/gpuscope.yaml)
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-$root/deploy/kubernetes/gpuscope.yaml}"
helm="$(command -v helm || echo "$(go env GOPATH)/bin/helm")"

{
  echo "# Rendered from deploy/helm/gpuscope by scripts/render-manifests.sh; do not edit."
  echo "# kubectl create namespace gpuscope && kubectl apply -f gpuscope.yaml"
  # No ServiceMonitor: plain manifests must apply on clusters without the
  # Prometheus Operator's CRDs.
  "$helm" template gpuscope "$root/deploy/helm/gpuscope" --namespace gpuscope --set serviceMonitor.enabled=false
} > "$out.tmp"
mv "$out.tmp" "$out"
