#!/usr/bin/env bash
# Prints gpuscope's version, from the newest git tag vX.Y.Z reachable from
# HEAD, without the v: "0.2.0" at the tag itself, "0.2.0-3-g1a2b3c4" three
# commits after it, "0.0.0-163-g1a2b3c4" before the first tag, with
# "-dirty" appended when the work tree has uncommitted changes, and
# "0.0.0-unknown" outside a git checkout. Only the first form is a release
# (scripts/release.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! git rev-parse --git-dir >/dev/null 2>&1; then
	echo "0.0.0-unknown"; exit 0
fi
if v=$(git describe --tags --match 'v[0-9]*.[0-9]*.[0-9]*' --dirty 2>/dev/null); then
	echo "${v#v}"; exit 0
fi
dirty=""
git diff --quiet HEAD -- 2>/dev/null || dirty="-dirty"
echo "0.0.0-$(git rev-list --count HEAD)-g$(git rev-parse --short HEAD)${dirty}"
