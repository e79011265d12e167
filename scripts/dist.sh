#!/usr/bin/env bash
# `make dist`: the release archives krew installs, their sha256 files, and the krew manifests
# filled from them, in dist/.
#
#   scripts/dist.sh                  build the host platform's binaries (release profile) and package them
#   scripts/dist.sh package OS ARCH BIN_DIR
#                                    package binaries built elsewhere (the release workflow builds each
#                                    platform on its own runner and packages them all on one)
#   scripts/dist.sh manifests [--only-available]
#                                    fill dist/<plugin>.yaml from krew/plugins/ and the archives in dist/
#
# Environment:
#   VERSION   the release tag (default: v<workspace version in Cargo.toml>); semver with a leading v
#   DIST_DIR  where the output goes (default: dist)
#   BASE_URL  where the manifests say the archives are downloaded from (see krew/fill-manifests.sh)
#   TARGET    a Rust target triple to build for instead of the host's
#
# An archive is kubectl-<plugin>_<VERSION>_<os>_<arch>.tar.gz (os and arch as krew names them:
# linux|darwin|windows, amd64|arm64) holding, at its root, the plugin binary (.exe on Windows), the
# kubectl completion shim (not on Windows), LICENSE and README.md. Archives are reproducible: sorted
# entries, fixed owner and modification time (SOURCE_DATE_EPOCH, default the last commit's time).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
plugins=(capi kamaji)
cargo=${CARGO:-cargo}
dist=${DIST_DIR:-dist}
case "$dist" in /*) ;; *) dist=$root/$dist ;; esac

die() { echo "error: $*" >&2; exit 1; }

workspace_version() {
    sed -n '/^\[workspace.package\]/,/^\[/s/^version *= *"\(.*\)"/\1/p' Cargo.toml | head -n1
}
version=${VERSION:-v$(workspace_version)}
printf '%s\n' "$version" | grep -Eq '^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$' \
    || { echo "error: VERSION $version is not semver with a leading v (e.g. v0.2.0)" >&2; exit 2; }

# krew's os and arch names for a Rust target triple.
krew_platform() {
    local os arch
    case "$1" in
        *-linux-*) os=linux ;;
        *-apple-darwin) os=darwin ;;
        *-windows-*) os=windows ;;
        *) die "no krew platform for target $1" ;;
    esac
    case "$1" in
        x86_64-*) arch=amd64 ;;
        aarch64-*) arch=arm64 ;;
        *) die "no krew platform for target $1" ;;
    esac
    echo "$os $arch"
}

if command -v sha256sum >/dev/null 2>&1; then
    sha() { sha256sum "$1" | cut -d' ' -f1; }
else
    sha() { shasum -a 256 "$1" | cut -d' ' -f1; }
fi

# package OS ARCH BIN_DIR: one archive per plugin from BIN_DIR's kubectl-<plugin>[.exe].
package() {
    local os=$1 arch=$2 bin_dir=$3 exe=""
    [ "$os" = windows ] && exe=.exe
    mkdir -p "$dist"
    local epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
    for p in "${plugins[@]}"; do
        local name=kubectl-${p}_${version}_${os}_${arch}
        local bin=$bin_dir/kubectl-$p$exe
        [ -f "$bin" ] || die "missing $bin (build it first)"
        local stage
        stage=$(mktemp -d)
        install -m 0755 "$bin" "$stage/kubectl-$p$exe"
        if [ "$os" != windows ]; then
            install -m 0755 "completions/kubectl_complete-$p" "$stage/kubectl_complete-$p"
        fi
        install -m 0644 LICENSE README.md "$stage/"
        # Written beside the final name, then renamed: a failed run never leaves a truncated
        # archive that a later manifest fill would hash.
        local tmp=$dist/.$name.tar.gz.tmp
        (cd "$stage" && LC_ALL=C tar --sort=name --mtime="@$epoch" --owner=0 --group=0 --numeric-owner \
            --format=ustar -cf - .) | gzip -n -9 > "$tmp"
        rm -rf "$stage"
        mv "$tmp" "$dist/$name.tar.gz"
        printf '%s  %s\n' "$(sha "$dist/$name.tar.gz")" "$name.tar.gz" > "$dist/$name.tar.gz.sha256"
        echo "packaged $dist/$name.tar.gz ($(wc -c < "$dist/$name.tar.gz" | tr -d ' ') bytes)"
    done
}

# manifests [--only-available]: dist/<plugin>.yaml, filled for the archives in dist/.
manifests() {
    mkdir -p "$dist"
    local tmp
    tmp=$(mktemp -d)
    cp krew/plugins/*.yaml "$tmp/"
    sh krew/fill-manifests.sh "$@" "$version" "$dist" "$tmp" >/dev/null
    for p in "${plugins[@]}"; do
        mv "$tmp/$p.yaml" "$dist/$p.yaml"
        echo "wrote $dist/$p.yaml"
    done
    rm -rf "$tmp"
}

case "${1:-host}" in
    host)
        triple=${TARGET:-$(rustc -vV | sed -n 's/^host: //p')}
        read -r os arch < <(krew_platform "$triple")
        target_args=()
        out=target/release
        if [ -n "${TARGET:-}" ]; then
            target_args=(--target "$TARGET")
            out=target/$TARGET/release
        fi
        "$cargo" build --release --locked "${target_args[@]}" -p kubectl-capi -p kubectl-kamaji
        package "$os" "$arch" "${CARGO_TARGET_DIR:-$root/target}/${out#target/}"
        # Here only this platform has archives; the release workflow fills every platform.
        manifests --only-available
        ;;
    package)
        [ $# -eq 4 ] || { echo "usage: $0 package OS ARCH BIN_DIR" >&2; exit 2; }
        package "$2" "$3" "$4"
        ;;
    manifests)
        shift
        manifests "$@"
        ;;
    *)
        echo "usage: $0 [host | package OS ARCH BIN_DIR | manifests [--only-available]]" >&2
        exit 2
        ;;
esac
