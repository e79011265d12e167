#!/usr/bin/env bash
# make image: the reconciler's OCI image, reproducibly and without a container daemon.
#
#   scripts/image.sh            the static (musl) release binary, then target/image/: the OCI
#                               layout kamaji-reconciler/, kamaji-reconciler.oci.tar and
#                               kamaji-reconciler.digest (the digest a registry gives it)
#   scripts/image.sh binary     only the binary (the release workflow builds one per architecture
#                               this way, then writes one image index of them with oci-image)
#
# Same binary, same bytes: paths are remapped out of the binary, every timestamp in the image is
# SOURCE_DATE_EPOCH (default: the last commit's time), and oci-image writes entries and JSON in
# a fixed order. Push it with: crane push target/image/kamaji-reconciler REGISTRY/kamaji-reconciler:TAG
set -euo pipefail
cd "$(dirname "$0")/.."
CARGO=${CARGO:-cargo}
target=${IMAGE_TARGET:-x86_64-unknown-linux-musl}
out=${IMAGE_DIR:-target/image}
build_dir=target/image-build

if ! rustup target list --installed 2>/dev/null | grep -qx "$target"; then
  echo "adding the Rust target $target (first time only)" >&2
  rustup target add "$target"
fi
# ring compiles a little C: the system gcc does it here and in the release workflow alike (ring's
# C needs no libc headers beyond the compiler's own), so no musl cross compiler is needed.
cc_var="CC_${target//-/_}"
export "$cc_var=${!cc_var:-gcc}"
export RUSTFLAGS="--remap-path-prefix=$PWD=/src --remap-path-prefix=${CARGO_HOME:-$HOME/.cargo}=/cargo"
CARGO_TARGET_DIR=$build_dir $CARGO build --release --locked --target "$target" -p kamaji-reconciler
binary="$build_dir/$target/release/kamaji-reconciler"
if [ "${1:-}" = binary ]; then echo "$binary"; exit 0; fi
unset RUSTFLAGS

case "$target" in
  x86_64-*) platform=linux/amd64 ;;
  aarch64-*) platform=linux/arm64 ;;
  *) echo "no image platform for $target" >&2; exit 2 ;;
esac
$CARGO build -q --locked -p oci-image
version="v$(sed -n '/^\[workspace.package\]/,/^\[/s/^version *= *"\(.*\)"/\1/p' Cargo.toml)"
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
target/debug/oci-image --binary "$platform=$binary" --out "$out" --image-version "$version" --revision "$revision"
