#!/usr/bin/env bash
# Builds the pinned upstream binaries the testbed runs, from the Go module proxy, into a
# version-keyed cache outside the repository. Skips a build whose outputs are already there.
#
#   testbed/build-bins.sh k8s     kube-apiserver, kube-controller-manager, etcd (Kubernetes' pin)
#   testbed/build-bins.sh capi    the Cluster API core manager and clusterctl
#   testbed/build-bins.sh all
#
# Prints the cache directory of each set on stdout.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cache_root=${CAPI_TESTBED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubectl-capi-kamaji}

export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0

k8s_version=$(awk '$1=="k8s.io/kubernetes"{print $2; exit}' "$here/k8s/go.mod")
[ -n "$k8s_version" ] || k8s_version=$(grep -oE 'k8s.io/kubernetes v[0-9.]+' "$here/k8s/go.mod" | head -1 | awk '{print $2}')
etcd_version=$(grep -oE 'go.etcd.io/etcd/server/v3 v[0-9.]+' "$here/k8s/go.mod" | head -1 | awk '{print $2}')

stamp_flags() { # $1 = version like v1.36.3
  local v=$1 minor
  minor=$(echo "$v" | cut -d. -f2)
  local f="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    f="$f -X '$p.gitVersion=$v' -X '$p.gitMajor=1' -X '$p.gitMinor=$minor' -X '$p.gitTreeState=clean'"
  done
  echo "$f"
}

build_k8s() {
  local out="$cache_root/k8s-$k8s_version-etcd-$etcd_version"
  if [ -x "$out/kube-apiserver" ] && [ -x "$out/kube-controller-manager" ] && [ -x "$out/etcd" ]; then
    echo "$out"; return
  fi
  mkdir -p "$out.tmp"
  echo "building kube-apiserver, kube-controller-manager $k8s_version and etcd $etcd_version (first time only; about 10 minutes)" >&2
  (cd "$here/k8s" && go build -trimpath -ldflags "$(stamp_flags "$k8s_version")" -o "$out.tmp/" \
      k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager)
  (cd "$here/k8s" && go build -trimpath -ldflags "-s -w" -o "$out.tmp/etcd" go.etcd.io/etcd/server/v3)
  rm -rf "$out" && mv "$out.tmp" "$out"
  echo "$out"
}

build_capi() {
  local capi_version
  capi_version=$(grep -oE 'sigs.k8s.io/cluster-api v[0-9.]+' "$here/capi/go.mod" | head -1 | awk '{print $2}')
  local out="$cache_root/capi-$capi_version"
  if [ -x "$out/capi-manager" ] && [ -x "$out/clusterctl" ] && [ -x "$out/kubeadm-bootstrap-manager" ]; then
    echo "$out"; return
  fi
  mkdir -p "$out.tmp"
  echo "building the Cluster API $capi_version core manager, kubeadm bootstrap manager and clusterctl (first time only)" >&2
  # Keep what an earlier build of this version produced.
  [ -d "$out" ] && cp -a "$out"/. "$out.tmp"/
  local ldf="-s -w -X 'sigs.k8s.io/cluster-api/version.gitVersion=$capi_version' -X 'sigs.k8s.io/cluster-api/version.gitMajor=1' -X 'sigs.k8s.io/cluster-api/version.gitTreeState=clean'"
  (cd "$here/capi" && go build -trimpath -ldflags "$ldf" -o "$out.tmp/capi-manager" sigs.k8s.io/cluster-api/core)
  (cd "$here/capi" && go build -trimpath -ldflags "$ldf" -o "$out.tmp/clusterctl" sigs.k8s.io/cluster-api/cmd/clusterctl)
  (cd "$here/capi" && go build -trimpath -ldflags "$ldf" -o "$out.tmp/kubeadm-bootstrap-manager" sigs.k8s.io/cluster-api/bootstrap/kubeadm)
  rm -rf "$out" && mv "$out.tmp" "$out"
  echo "$out"
}

# Upstream CRDs, straight from the upstream Go modules' files at the pinned versions.
#   full/     CAPI core + kubeadm bootstrap + kubeadm control plane (v1beta1 and v1beta2 served), Kamaji, BYOH
#   v1beta1/  the same kinds from CAPI v1.10 (v1beta1 only): the shape of a CAPI 1.10 management cluster
#   extra/    upstream CRDs the suite compares against but does not install by default (CACPPK's KamajiControlPlane)
mod_dir() { go mod download -json "$1" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p'; }
build_crds() {
  # shellcheck disable=SC1091
  . "$here/versions.env"
  local out="$cache_root/crds-capi-$CAPI_VERSION-capi-$CAPI_V1BETA1_VERSION-kamaji-$KAMAJI_VERSION-byoh-$BYOH_VERSION-cacppk-$CACPPK_VERSION"
  if [ -d "$out/full" ] && [ -d "$out/v1beta1" ] && [ -f "$out/kubeadm-bootstrap-webhooks.yaml" ]; then echo "$out"; return; fi
  rm -rf "$out.tmp"; mkdir -p "$out.tmp/full" "$out.tmp/v1beta1" "$out.tmp/extra"
  local capi capi_old kamaji byoh cacppk
  capi=$(mod_dir "sigs.k8s.io/cluster-api@$CAPI_VERSION")
  capi_old=$(mod_dir "sigs.k8s.io/cluster-api@$CAPI_V1BETA1_VERSION")
  kamaji=$(mod_dir "github.com/clastix/kamaji@$KAMAJI_VERSION")
  byoh=$(mod_dir "github.com/vmware-tanzu/cluster-api-provider-bringyourownhost@$BYOH_VERSION")
  cacppk=$(mod_dir "github.com/clastix/cluster-api-control-plane-provider-kamaji@$CACPPK_VERSION")
  for d in "$capi" "$capi_old" "$kamaji" "$byoh" "$cacppk"; do [ -d "$d" ] || { echo "module download failed" >&2; exit 1; }; done
  cp "$capi"/core/config/crd/bases/*.yaml "$capi"/bootstrap/kubeadm/config/crd/bases/*.yaml \
     "$capi"/controlplane/kubeadm/config/crd/bases/*.yaml "$out.tmp/full/"
  cp "$capi_old"/config/crd/bases/*.yaml "$capi_old"/bootstrap/kubeadm/config/crd/bases/*.yaml \
     "$capi_old"/controlplane/kubeadm/config/crd/bases/*.yaml "$out.tmp/v1beta1/"
  for p in full v1beta1; do
    cp "$kamaji"/config/crd/bases/*.yaml "$byoh"/config/crd/bases/*.yaml "$out.tmp/$p/"
  done
  cp "$cacppk"/config/crd/bases/*.yaml "$out.tmp/extra/"
  cp "$capi"/core/config/webhook/manifests.yaml "$out.tmp/capi-webhooks.yaml"
  cp "$capi"/bootstrap/kubeadm/config/webhook/manifests.yaml "$out.tmp/kubeadm-bootstrap-webhooks.yaml"
  chmod -R u+w "$out.tmp"
  rm -rf "$out" && mv "$out.tmp" "$out"
  echo "$out"
}

case "${1:-all}" in
  k8s) build_k8s ;;
  capi) build_capi ;;
  crds) build_crds ;;
  all) echo "k8s=$(build_k8s)"; echo "crds=$(build_crds)"; echo "capi=$(build_capi)" ;;
  *) echo "usage: $0 k8s|capi|crds|all" >&2; exit 2 ;;
esac
