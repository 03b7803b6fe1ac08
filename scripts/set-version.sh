#!/usr/bin/env bash
# Sets the Helm chart's version and appVersion to a release's version, so
# that the chart and the image it pulls (ghcr.io/gpuscope/gpuscope:<appVersion>
# unless image.tag is set) follow the release. Step 2 of docs/releasing.md.
#
#   scripts/set-version.sh 0.2.0
#   CHART_YAML=path/to/Chart.yaml scripts/set-version.sh 0.2.0
set -euo pipefail
cd "$(dirname "$0")/.."

chart="${CHART_YAML:-deploy/helm/gpuscope/Chart.yaml}"
[ $# -eq 1 ] || { echo "usage: scripts/set-version.sh X.Y.Z" >&2; exit 2; }
version="${1#v}"
[[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+(-(alpha|beta|rc)\.[0-9]+)?$ ]] ||
	{ echo "set-version: '$1' is not a release version X.Y.Z (or X.Y.Z-rc.N, -alpha.N, -beta.N)" >&2; exit 2; }
for key in version appVersion; do
	grep -q "^$key:" "$chart" || { echo "set-version: $chart has no '$key:' line" >&2; exit 1; }
done

sed -i -e "s/^version:.*/version: $version/" -e "s/^appVersion:.*/appVersion: \"$version\"/" "$chart"
echo "set-version: $chart: version $version, appVersion \"$version\""
grep -q "^## \[$version\]" CHANGELOG.md 2>/dev/null || echo "set-version: CHANGELOG.md has no section '## [$version]' yet; make release needs one" >&2
