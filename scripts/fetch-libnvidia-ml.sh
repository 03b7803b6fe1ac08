#!/usr/bin/env bash
# Unpacks NVIDIA's NVML library (Debian non-free's libnvidia-ml1) into the
# tool cache, for the test that runs gpuscope against the real library on a
# machine without the NVIDIA driver (test/e2e,
# TestRealNVMLLibraryWithoutTheDriver). Nothing is installed and the
# machine's apt configuration is not changed: apt reads a private copy
# of the machine's sources with the non-free component alone and keeps its
# package lists in the cache folder; apt-get download fetches the package
# and dpkg -x unpacks it. A second call returns at once. Prints the folder
# holding libnvidia-ml.so.1 on its last line of stdout (for LD_LIBRARY_PATH).
#
#   scripts/fetch-libnvidia-ml.sh
#   GPUSCOPE_LIBNVIDIA_ML_DIR=/path/to/folder ...   # use another copy
set -euo pipefail

if [ -n "${GPUSCOPE_LIBNVIDIA_ML_DIR:-}" ]; then
	echo "$GPUSCOPE_LIBNVIDIA_ML_DIR"
	exit 0
fi
# The R535 build of Debian 12's non-free component; a newer one from the
# security suite is taken only when this one is gone from the mirrors.
version=535.261.03-1
cache="${GPUSCOPE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuscope}/libnvidia-ml1-$version"
libdir="$cache/root/usr/lib/$(uname -m)-linux-gnu/nvidia/current"
if [ -e "$libdir/libnvidia-ml.so.1" ]; then
	echo "libnvidia-ml1 $version already unpacked: $libdir" >&2
	echo "$libdir"
	exit 0
fi
command -v apt-get >/dev/null || { echo "fetch-libnvidia-ml: no apt-get on this machine" >&2; exit 1; }
echo "Fetching Debian non-free's libnvidia-ml1 $version into $cache (private apt lists of the non-free component; about 10 seconds; cached afterwards)..." >&2
apt="$cache/apt"
rm -rf "$apt" "$cache/root"
mkdir -p "$apt/sources.list.d" "$apt/lists/partial" "$apt/archives/partial" "$cache/root"
# The machine's own sources (their mirrors and signing keys), with the
# non-free component in place of theirs.
for f in /etc/apt/sources.list.d/*.sources; do
	[ -e "$f" ] && sed -E 's/^Components:.*/Components: non-free/' "$f" >"$apt/sources.list.d/$(basename "$f")"
done
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
	[ -e "$f" ] && sed -nE 's/^(deb[[:space:]]+(\[[^]]*\][[:space:]]+)?[^[:space:]]+[[:space:]]+[^[:space:]]+)[[:space:]].*/\1 non-free/p' "$f"
done >"$apt/sources.list"
opts=(-o "Dir::Etc::sourcelist=$apt/sources.list" -o "Dir::Etc::sourceparts=$apt/sources.list.d"
	-o "Dir::State::Lists=$apt/lists" -o "Dir::Cache::Archives=$apt/archives"
	-o "Dir::Cache::pkgcache=" -o "Dir::Cache::srcpkgcache=" -o "APT::Sandbox::User=root")
apt-get "${opts[@]}" update -qq
cd "$apt/archives"
if ! apt-get "${opts[@]}" download -qq "libnvidia-ml1=$version" 2>/dev/null; then
	echo "fetch-libnvidia-ml: libnvidia-ml1 $version is not served; taking the candidate: $(apt-cache "${opts[@]}" policy libnvidia-ml1 | awk '/Candidate/ {print $2}')" >&2
	apt-get "${opts[@]}" download -qq libnvidia-ml1
fi
dpkg -x libnvidia-ml1_*.deb "$cache/root"
rm -rf "$apt"
[ -e "$libdir/libnvidia-ml.so.1" ] || { echo "fetch-libnvidia-ml: the package has no $libdir/libnvidia-ml.so.1" >&2; exit 1; }
echo "Unpacked libnvidia-ml1 into $cache" >&2
echo "$libdir"
