#!/usr/bin/env sh
# Fills the krew manifests with a release's version, download URIs and sha256 sums.
#
#   krew/fill-manifests.sh [--only-available] VERSION DIST_DIR [MANIFEST_DIR]
#
# VERSION       the release tag, e.g. v0.2.0 (semver with a leading v, as krew requires)
# DIST_DIR      holds the release archives, named kubectl-<plugin>_<VERSION>_<os>_<arch>.tar.gz
#               (each with kubectl-<plugin>, kubectl_complete-<plugin>, LICENSE and README.md at its
#               root; on Windows kubectl-<plugin>.exe, LICENSE and README.md), as scripts/dist.sh
#               packages them
# MANIFEST_DIR  the manifests to rewrite in place (default: krew/plugins next to this script)
#
# BASE_URL (environment) overrides where the archives are downloaded from; default
# https://github.com/capi-kamaji/kubectl-plugins/releases/download/<VERSION>.
# Every platform of every manifest must have its archive: a missing one is an error, and no
# manifest is changed unless all of them can be filled. With --only-available (`make dist` on one
# machine), platforms without an archive are left out of the filled manifests instead; a manifest
# left with no platform is still an error.
set -eu

usage() {
    echo "usage: $0 [--only-available] VERSION DIST_DIR [MANIFEST_DIR]" >&2
    exit 2
}
only_available=0
if [ "${1:-}" = --only-available ]; then
    only_available=1
    shift
fi
[ $# -ge 2 ] && [ $# -le 3 ] || usage
version=$1
dist=$2
here=$(cd "$(dirname "$0")" && pwd)
manifests=${3:-$here/plugins}
base=${BASE_URL:-https://github.com/capi-kamaji/kubectl-plugins/releases/download/$version}

if ! printf '%s\n' "$version" | grep -Eq '^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$'; then
    echo "error: version $version is not semver with a leading v (e.g. v0.2.0)" >&2
    exit 2
fi
[ -d "$dist" ] || { echo "error: $dist is not a directory" >&2; exit 1; }

if command -v sha256sum >/dev/null 2>&1; then
    sha() { sha256sum "$1" | cut -d' ' -f1; }
else
    sha() { shasum -a 256 "$1" | cut -d' ' -f1; }
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

for manifest in "$manifests"/*.yaml; do
    plugin=$(basename "$manifest" .yaml)
    old=$(sed -n 's/^  version: *//p' "$manifest" | head -n1)
    [ -n "$old" ] || { echo "error: $manifest has no spec.version" >&2; exit 1; }
    # platform lines "os arch" in manifest order
    sums=$tmp/$plugin.sums
    : > "$sums"
    awk '/^ *os: /{os=$2} /^ *arch: /{print os, $2}' "$manifest" | while read -r os arch; do
        archive=$dist/kubectl-${plugin}_${version}_${os}_${arch}.tar.gz
        if [ ! -f "$archive" ]; then
            [ "$only_available" = 1 ] && continue
            echo "error: missing archive $archive" >&2
            exit 1
        fi
        echo "$os $arch $(sha "$archive")" >> "$sums"
    done
    if [ ! -s "$sums" ]; then
        echo "error: no archive in $dist for any platform of $manifest (version $version)" >&2
        exit 1
    fi
    # Replace the old version everywhere (descriptions may name it), set each platform's uri
    # and sha256, and leave out (with --only-available) the platforms that have no archive.
    # Platforms are the manifest's last key, each starting at "  - selector:".
    awk -v old="$old" -v new="$version" -v base="$base" -v plugin="$plugin" -v sums="$sums" '
        function flush() {
            if (inblock && ((os " " arch) in sum)) printf "%s", buf
            buf = ""; inblock = 0
        }
        BEGIN { while ((getline l < sums) > 0) { split(l, f, " "); sum[f[1] " " f[2]] = f[3] } }
        /^  - selector:/ { flush(); inblock = 1; os = ""; arch = "" }
        /^ *os: / { os = $2 }
        /^ *arch: / { arch = $2 }
        {
            line = $0
            if (line ~ /^    uri: /) line = "    uri: " base "/kubectl-" plugin "_" new "_" os "_" arch ".tar.gz"
            # (an "in" test first: reading sum[k] would create the key and keep the platform)
            else if (line ~ /^    sha256: /) line = "    sha256: " (((os " " arch) in sum) ? sum[os " " arch] : "")
            else gsub(old, new, line)
            if (inblock) buf = buf line "\n"; else print line
        }
        END { flush() }
    ' "$manifest" > "$tmp/$plugin.yaml"
done

for manifest in "$manifests"/*.yaml; do
    plugin=$(basename "$manifest" .yaml)
    mv "$tmp/$plugin.yaml" "$manifest"
    echo "filled $manifest for $version"
done
