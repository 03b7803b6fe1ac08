#!/usr/bin/env bash
# Builds the SBOM generator that scripts/release.sh runs, CycloneDX's
# cyclonedx-gomod, at the version pinned in the module of its own in
# tools/sbom, so its dependencies never enter the exporter's go.mod. The
# result is cached: a second call returns at once. Prints the binary's path
# on its last line of stdout.
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/lib/gotool.sh

version=$(awk '$1 == "github.com/CycloneDX/cyclonedx-gomod" {print $2}' tools/sbom/go.mod)
[ -n "$version" ] || { echo "tools/sbom/go.mod: no requirement of github.com/CycloneDX/cyclonedx-gomod" >&2; exit 1; }
gotool_build cyclonedx-gomod tools/sbom github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod "$version" \
	"downloads ~50 modules the first time; about 7 minutes on 2 busy cores" ""
