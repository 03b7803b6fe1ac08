#!/usr/bin/env bash
# Renders the plain manifests, for clusters without Helm, from the Helm chart
# with its default values. `make release` ships them as
# gpuscope-VERSION-kubernetes.yaml; they are not kept in git.
#   scripts/render-manifests.sh OUTPUT
set -euo pipefail

[[ $# -eq 1 ]] || { echo "usage: scripts/render-manifests.sh OUTPUT" >&2; exit 2; }
root="$(cd "$(dirname "$0")/.." && pwd)"
out="$1"
helm="$(command -v helm || echo "$(go env GOPATH)/bin/helm")"
[[ -x "$helm" ]] || { echo "render-manifests: no helm: run scripts/install-helm.sh" >&2; exit 1; }

{
  echo "# gpuscope's plain manifests, rendered from deploy/helm/gpuscope with its defaults by scripts/render-manifests.sh."
  echo "# kubectl create namespace gpuscope && kubectl apply -f THIS_FILE"
  # No ServiceMonitor: plain manifests must apply on clusters without the
  # Prometheus Operator's CRDs. helm warns on stderr of each link under the
  # chart's files/ (the rules, dashboards and counters files, kept once
  # outside the chart); the links are followed as intended.
  "$helm" template gpuscope "$root/deploy/helm/gpuscope" --namespace gpuscope --set serviceMonitor.enabled=false 2> >(grep -v 'found symbolic link in path' >&2)
} > "$out.tmp"
mv "$out.tmp" "$out"
