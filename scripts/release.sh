#!/usr/bin/env bash
# Builds a release into DIST (dist/ by default), as `make release` does:
#
#   gpuscope-VERSION-linux-amd64.tar.gz    gpuscope and gpuscope-client (top, capture), etc/,
#   gpuscope-VERSION-linux-arm64.tar.gz    LICENSE, README.md, CHANGELOG.md
#   gpuscope-VERSION-linux-ARCH.sbom.cdx.json
#                                          CycloneDX SBOM of the Go modules
#                                          linked into gpuscope
#   gpuscope-VERSION-linux-ARCH.gpuscope-client.sbom.cdx.json
#                                          the same of gpuscope-client
#   gpuscope-VERSION-kubernetes.yaml       the plain manifests: the Helm chart
#                                          rendered with its defaults
#                                          (scripts/render-manifests.sh)
#   gpuscope-VERSION-dashboards-configmap.yaml
#                                          the Grafana dashboards as a ConfigMap
#                                          for Grafana's dashboard sidecar
#   SHA256SUMS                             checksums of all of the above
#
# VERSION (scripts/version.sh by default) is X.Y.Z for a release: then the
# chart's version and appVersion must be X.Y.Z (scripts/set-version.sh) and
# CHANGELOG.md must have its section, or nothing is built. Any other version
# (X.Y.Z-N-gHASH, -dirty) builds archives for testing. RELEASE_ARCHES
# ("amd64 arm64") picks the architectures. The archives are the same bytes
# on every run for one commit and version: file times are the commit's.
set -euo pipefail
cd "$(dirname "$0")/.."
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}"

version="${VERSION:-$(scripts/version.sh)}"
dist="${DIST:-dist}"
arches="${RELEASE_ARCHES:-amd64 arm64}"
chart=deploy/helm/gpuscope/Chart.yaml
start=$(date +%s)

semver='^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$'
[[ "$version" =~ $semver ]] || { echo "release: VERSION=$version is not a semantic version X.Y.Z[-suffix] (no leading v)" >&2; exit 1; }
if [[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+(-(alpha|beta|rc)\.[0-9]+)?$ ]]; then
	# A release: what ships with it has to say the same version.
	for key in version appVersion; do
		got=$(awk -v k="$key:" '$1 == k {gsub(/"/, "", $2); print $2}' "$chart")
		[ "$got" = "$version" ] || { echo "release: $chart has $key: ${got:-nothing}, not $version; run scripts/set-version.sh $version" >&2; exit 1; }
	done
	grep -qE "^## \[${version//./\\.}\] - [0-9]{4}-[0-9]{2}-[0-9]{2}\$" CHANGELOG.md ||
		{ echo "release: CHANGELOG.md has no section '## [$version] - YYYY-MM-DD' (the release's date)" >&2; exit 1; }
else
	echo "release: $version is not a release version (no tag vX.Y.Z at a clean HEAD): building archives for testing" >&2
fi
for f in LICENSE README.md CHANGELOG.md; do
	[ -f "$f" ] || { echo "release: $f is missing" >&2; exit 1; }
done

sbomtool=$(scripts/build-sbom.sh | tail -n1)
# The commit's time, so that the build date and the archives' file times
# do not change from one build of the same commit to the next.
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}"

mkdir -p "$dist"
dist=$(cd "$dist" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
files=()
sboms=()
for arch in $arches; do
	name="gpuscope-$version-linux-$arch"
	dir="$work/$name"
	mkdir -p "$dir"
	t=$(date +%s)
	echo "release: building $name" >&2
	make --no-print-directory build GOARCH="$arch" BIN="$dir/gpuscope" VERSION="$version" >&2
	echo "release: built $name/gpuscope in $(( $(date +%s) - t ))s" >&2
	# The counters files (gpuscope's and the dcgm-exporter ones it ships,
	# with their notices) and the web config example; not etc's Go code.
	cp -R etc "$dir/etc"
	find "$dir/etc" -name '*.go' -delete
	cp LICENSE README.md CHANGELOG.md "$dir/"
	find "$dir" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
	tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$SOURCE_DATE_EPOCH" \
		-C "$work" -cf - "$name" | gzip -n -9 >"$dist/$name.tar.gz"
	files+=("$name.tar.gz")

	# The SBOM is read from the binary's own build information, so it lists
	# exactly the modules linked into it. Every module is in the module
	# cache after the build, so no network is needed (GOPROXY=off); the
	# licence of gpuscope's own module, which is not in that cache, is in
	# LICENSE. Licence detection takes half a minute and needs no compiler,
	# so it runs while the next architecture builds.
	# gpuscope-client (top, capture) links other modules (the terminal UI,
	# the chart renderer), so it has an SBOM of its own.
	for bin in gpuscope gpuscope-client; do
		sbom="$name.sbom.cdx.json"
		[ "$bin" = gpuscope ] || sbom="$name.$bin.sbom.cdx.json"
		GOPROXY=off GONOSUMDB=github.com/NVIDIA/go-dcgm "$sbomtool" bin -json -licenses -noserial -notimestamp \
			-version "v$version" -output "$dist/$sbom" "$dir/$bin" >"$work/sbom-$arch-$bin.log" 2>&1 &
		sboms+=("$!:$arch-$bin")
		files+=("$sbom")
	done
done
for job in "${sboms[@]}"; do
	if ! wait "${job%%:*}"; then
		cat "$work/sbom-${job#*:}.log" >&2
		echo "release: cyclonedx-gomod failed for ${job#*:}" >&2
		exit 1
	fi
done

# The files for clusters without Helm, made here rather than kept in git:
# the chart and grafana/dashboards are their one source.
scripts/install-helm.sh >&2
scripts/render-manifests.sh "$dist/gpuscope-$version-kubernetes.yaml"
files+=("gpuscope-$version-kubernetes.yaml")
buildflags=$(make --no-print-directory -s buildflags)
# shellcheck disable=SC2086 # a list of flags
(cd grafana && go run $buildflags ./gen -configmap "$dist/gpuscope-$version-dashboards-configmap.yaml") >&2
files+=("gpuscope-$version-dashboards-configmap.yaml")

(cd "$dist" && sha256sum "${files[@]}" >SHA256SUMS)
echo "release: $version in $dist ($(( $(date +%s) - start ))s):" >&2
(cd "$dist" && ls -l "${files[@]}" SHA256SUMS) >&2
