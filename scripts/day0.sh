#!/usr/bin/env bash
# Day 0 on a bare sandbox (`capi-testbed up --day0 --dir DIR`, running): what an air-gapped site
# does with `kubectl capi init`. Pushes our reconciler's image (target/image, `make image`) to the
# sandbox's registry (the site's mirror), writes a clusterctl config that points init at the
# release assets built from the pinned modules (this machine cannot reach the release URLs), makes
# a bundle and installs from it: cert-manager, Cluster API's core and kubeadm providers, BYOH,
# Kamaji and our reconciler, every controller then running from its image.
# Shared by `make demo` and `make sandbox REAL=1`; prints each kubectl command before running it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:?usage: scripts/day0.sh DIR (a running capi-testbed up --day0 --dir DIR)}
bin=$root/target/debug
[ -f "$dir/registry" ] || { echo "$dir is not a running day-0 sandbox (no $dir/registry): start capi-testbed up --day0 --dir $dir" >&2; exit 1; }

run() { printf '$ %s\n' "$*"; "$@"; }

registry=$(cat "$dir/registry")
version=$("$bin/kubectl-capi" init --list | awk '$1 == "control-plane-kamaji" {print $2}')
"$(bash "$root/testbed/build-bins.sh" crane)/crane" push --insecure "$root/target/image/kamaji-reconciler" \
  "$registry/kamaji-reconciler:$version" >/dev/null 2>&1
sources=$(bash "$root/testbed/build-bins.sh" init-sources)
{
  echo "cert-manager:"
  echo "  url: file://$sources/cert-manager.yaml"
  echo "providers:"
  echo "- {name: cluster-api, type: CoreProvider, url: \"file://$sources/cluster-api.yaml\"}"
  echo "- {name: kubeadm, type: BootstrapProvider, url: \"file://$sources/bootstrap-kubeadm.yaml\"}"
  echo "- {name: kubeadm, type: ControlPlaneProvider, url: \"file://$sources/control-plane-kubeadm.yaml\"}"
  echo "- {name: byoh, type: InfrastructureProvider, url: \"file://$sources/infrastructure-byoh.yaml\"}"
  echo "- {name: kamaji, type: Other, url: \"file://$sources/kamaji.yaml\"}"
} >"$dir/clusterctl.yaml"
export KUBECONFIG=$dir/kubeconfig PATH=$bin:$PATH
rm -rf "$dir/bundle"
run kubectl capi init bundle "$dir/bundle" --config "$dir/clusterctl.yaml"
run kubectl capi init --from "$dir/bundle" --registry "$registry" --datastore "$dir/datastores.yaml" --wait-providers
