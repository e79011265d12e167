#!/usr/bin/env bash
# Builds the pinned upstream binaries the testbed runs, from the Go module proxy, into a
# version-keyed cache outside the repository. Skips a build whose outputs are already there.
#
#   testbed/build-bins.sh k8s     kube-apiserver, kube-controller-manager, kube-scheduler, kubelet,
#                                 kube-proxy and etcd (Kubernetes' pin)
#   testbed/build-bins.sh pause   the pod sandbox image's program (testbed/pause), static
#   testbed/build-bins.sh coredns CoreDNS, the real node's cluster DNS
#   testbed/build-bins.sh node-packages  what a real kubelet needs from Debian's packages: containerd,
#                                 runc, the CNI plugins, iptables, busybox-static (apt-get, as root)
#   testbed/build-bins.sh capi    the Cluster API core, kubeadm bootstrap and KubeadmControlPlane managers,
#                                 and clusterctl
#   testbed/build-bins.sh capi-v1beta1  the Cluster API v1.10 core manager and its webhook configuration
#                                 (the v1beta1 profile's real controllers)
#   testbed/build-bins.sh kamaji  the Kamaji operator (github.com/clastix/kamaji)
#   testbed/build-bins.sh k8s-prev  an older kube-apiserver, -controller-manager, -scheduler for tenants
#   testbed/build-bins.sh k8s-kamaji  the same at v1.30.2, the newest Kamaji v1.0.0 admits (day-0 tenants)
#   testbed/build-bins.sh k8s-next  the same at v1.37.2, the newer minor of a two-minor tenant upgrade
#   testbed/build-bins.sh byoh    the BYOH controller manager (cluster-api-provider-bringyourownhost)
#   testbed/build-bins.sh cacppk  CACPPK's manager (cluster-api-control-plane-provider-kamaji v0.11.0) and
#                                 its own CRDs, for make bench only (not part of `all`)
#   testbed/build-bins.sh cert-manager     cert-manager's controller, cainjector and webhook (our mains in
#                                  testbed/cert-manager around cert-manager's packages)
#   testbed/build-bins.sh kube-rbac-proxy  kube-rbac-proxy, the sidecar of BYOH's manager
#   testbed/build-bins.sh helm    Helm, which renders cert-manager's release manifest for init-sources
#   testbed/build-bins.sh init-sources     the release assets kubectl capi init installs, one file each
#   testbed/build-bins.sh clusterctl-repo  kustomize, and a clusterctl local repository of CAPI's core
#                                  and kubeadm bootstrap providers plus cert-manager's CRDs
#   testbed/build-bins.sh crane   go-containerregistry's crane: the local OCI registry, pushes and pulls
#   testbed/build-bins.sh krew    krew (as kubectl-krew), validate-krew-manifest and actionlint
#   testbed/build-bins.sh monitoring  promtool, and the Prometheus operator's CRDs (crds/)
#   testbed/build-bins.sh s3      s3s-fs, a local S3-compatible server from crates.io (bin/s3s-fs)
#   testbed/build-bins.sh etcdctl  etcdctl of the testbed's etcd, for make bench only (not part of `all`)
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

# Moves the finished "$1.tmp" into place as "$1", writable (files copied from the Go module
# cache are read-only), and prints "$1".
publish() {
  chmod -R u+w "$1.tmp"
  rm -rf "$1" && mv "$1.tmp" "$1"
  echo "$1"
}

# `go install`s the packages "${@:2}" (module@version) into the folder $1.
go_install() {
  local dir=$1; shift
  (cd "$dir" && GOBIN="$dir" GOFLAGS='' go install -trimpath -ldflags "-s -w" "$@")
}

# Stops unless every module directory given was downloaded.
need_dirs() {
  for d in "$@"; do [ -d "$d" ] || { echo "module download failed" >&2; exit 1; }; done
}

build_k8s() {
  local out="$cache_root/k8s-$k8s_version-etcd-$etcd_version"
  local missing=()
  for b in kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy; do
    [ -x "$out/$b" ] || missing+=("k8s.io/kubernetes/cmd/$b")
  done
  if [ ${#missing[@]} -eq 0 ] && [ -x "$out/etcd" ]; then
    echo "$out"; return
  fi
  rm -rf "$out.tmp"; mkdir -p "$out.tmp"
  # Keep what an earlier build of this version produced (kube-scheduler, kubelet and kube-proxy came
  # later).
  [ -d "$out" ] && cp -a "$out"/. "$out.tmp"/
  echo "building ${missing[*]:-} $k8s_version and etcd $etcd_version (first time only; about 10 minutes)" >&2
  if [ ${#missing[@]} -gt 0 ]; then
    (cd "$here/k8s" && go build -trimpath -ldflags "$(stamp_flags "$k8s_version")" -o "$out.tmp/" "${missing[@]}")
  fi
  [ -x "$out.tmp/etcd" ] || (cd "$here/k8s" && go build -trimpath -ldflags "-s -w" -o "$out.tmp/etcd" go.etcd.io/etcd/server/v3)
  publish "$out"
}

# A second Kubernetes release (testbed/k8s-prev) for tenant control planes: a tenant created at
# this version and upgraded to the pinned one runs real binaries of both minors.
# A tenant release from the module folder $1 (k8s-prev: the older minor of tenant upgrades;
# k8s-kamaji: v1.30.2, the newest Kamaji v1.0.0's webhook admits; k8s-next: v1.37.2, the last step
# of a two-minor upgrade from k8s-prev).
build_k8s_prev() {
  local mod=${1:-k8s-prev} v
  v=$(awk '$1=="require" && $2=="k8s.io/kubernetes"{print $3; exit}' "$here/$mod/go.mod")
  local out="$cache_root/k8s-$v"
  if [ -x "$out/kube-apiserver" ] && [ -x "$out/kube-controller-manager" ] && [ -x "$out/kube-scheduler" ]; then
    echo "$out"; return
  fi
  rm -rf "$out.tmp"; mkdir -p "$out.tmp"
  echo "building kube-apiserver, kube-controller-manager and kube-scheduler $v for tenant control planes (first time only)" >&2
  (cd "$here/$mod" && go build -trimpath -ldflags "$(stamp_flags "$v")" -o "$out.tmp/" \
      k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler)
  publish "$out"
}

# The upstream Kamaji operator and BYOH controller manager, each from its own tools module
# (testbed/kamaji, testbed/byoh) whose go.mod copies upstream's requires and replaces.
build_kamaji() {
  # shellcheck disable=SC1091
  . "$here/versions.env"
  local out="$cache_root/kamaji-$KAMAJI_VERSION"
  if [ -x "$out/kamaji" ]; then echo "$out"; return; fi
  rm -rf "$out.tmp"; mkdir -p "$out.tmp"
  echo "building the Kamaji $KAMAJI_VERSION operator (first time only; about 3 minutes)" >&2
  local ldf="-s -w -X 'github.com/clastix/kamaji/internal.GitTag=$KAMAJI_VERSION' -X 'github.com/clastix/kamaji/internal.GitRepo=github.com/clastix/kamaji' -X 'github.com/clastix/kamaji/internal.GitDirty='"
  (cd "$here/kamaji" && go build -trimpath -ldflags "$ldf" -o "$out.tmp/kamaji" github.com/clastix/kamaji)
  publish "$out"
}

# BYOH's controller manager and its host agent (`byoh-hostagent`, the `agent` package), which the
# testbed runs for real on each host it onboards with `kubectl capi hosts add`.
build_byoh() {
  # shellcheck disable=SC1091
  . "$here/versions.env"
  local out="$cache_root/byoh-$BYOH_VERSION"
  if [ -x "$out/byoh-manager" ] && [ -x "$out/byoh-hostagent" ]; then echo "$out"; return; fi
  rm -rf "$out.tmp"; mkdir -p "$out.tmp"
  # Keep what an earlier build of this version produced (the agent came later).
  [ -d "$out" ] && cp -a "$out"/. "$out.tmp"/
  echo "building the BYOH $BYOH_VERSION controller manager and host agent (first time only; about 2 minutes)" >&2
  local m=github.com/vmware-tanzu/cluster-api-provider-bringyourownhost
  [ -x "$out.tmp/byoh-manager" ] || (cd "$here/byoh" && go build -trimpath -ldflags "-s -w" -o "$out.tmp/byoh-manager" "$m")
  (cd "$here/byoh" && go build -trimpath -ldflags "-s -w" -o "$out.tmp/byoh-hostagent" "$m/agent")
  publish "$out"
}

# CACPPK v0.11.0, the Kamaji control-plane provider users run today, for make bench's comparison
# with kamaji-reconciler (testbed/cacppk pins it: its newer releases do not compile against the Kamaji
# the Go module proxy serves). Its own CRDs (KamajiControlPlane v1alpha1) are copied next to it.
build_cacppk() {
  local v
  v=$(awk '$1=="require" && $2=="github.com/clastix/cluster-api-control-plane-provider-kamaji"{print $3; exit}' "$here/cacppk/go.mod")
  local out="$cache_root/cacppk-$v"
  if [ -x "$out/cacppk-manager" ] && [ -d "$out/crds" ]; then echo "$out"; return; fi
  rm -rf "$out.tmp"; mkdir -p "$out.tmp/crds"
  echo "building the CACPPK $v manager (first time only)" >&2
  (cd "$here/cacppk" && go build -trimpath -ldflags "-s -w" -o "$out.tmp/cacppk-manager" github.com/clastix/cluster-api-control-plane-provider-kamaji)
  local src
  src=$(cd "$here/cacppk" && mod_dir "github.com/clastix/cluster-api-control-plane-provider-kamaji@$v")
  need_dirs "$src"
  cp "$src"/config/crd/bases/*.yaml "$out.tmp/crds/"
  publish "$out"
}

build_capi() {
  local capi_version
  capi_version=$(grep -oE 'sigs.k8s.io/cluster-api v[0-9.]+' "$here/capi/go.mod" | head -1 | awk '{print $2}')
  local out="$cache_root/capi-$capi_version"
  # The binaries of this set and their main packages.
  local -A pkgs=(
    [capi-manager]=sigs.k8s.io/cluster-api/core
    [clusterctl]=sigs.k8s.io/cluster-api/cmd/clusterctl
    [kubeadm-bootstrap-manager]=sigs.k8s.io/cluster-api/bootstrap/kubeadm
    [kubeadm-control-plane-manager]=sigs.k8s.io/cluster-api/controlplane/kubeadm
  )
  local missing=() b
  for b in capi-manager clusterctl kubeadm-bootstrap-manager kubeadm-control-plane-manager; do
    [ -x "$out/$b" ] || missing+=("$b")
  done
  if [ ${#missing[@]} -eq 0 ]; then echo "$out"; return; fi
  rm -rf "$out.tmp"; mkdir -p "$out.tmp"
  echo "building the Cluster API $capi_version ${missing[*]} (first time only)" >&2
  # Keep what an earlier build of this version produced.
  [ -d "$out" ] && cp -a "$out"/. "$out.tmp"/
  local ldf="-s -w -X 'sigs.k8s.io/cluster-api/version.gitVersion=$capi_version' -X 'sigs.k8s.io/cluster-api/version.gitMajor=1' -X 'sigs.k8s.io/cluster-api/version.gitTreeState=clean'"
  for b in "${missing[@]}"; do
    (cd "$here/capi" && go build -trimpath -ldflags "$ldf" -o "$out.tmp/$b" "${pkgs[$b]}")
  done
  publish "$out"
}

# The Cluster API v1.10 core manager (testbed/capi-v1beta1 pins it), for the v1beta1 profile with
# real controllers: a CAPI 1.10 management cluster, with the CRDs of CAPI_V1BETA1_VERSION (which
# must be the same release) and that release's webhook configuration, copied next to it.
build_capi_v1beta1() {
  # shellcheck disable=SC1091
  . "$here/versions.env"
  local v
  v=$(awk '$1=="require" && $2=="sigs.k8s.io/cluster-api"{print $3; exit} $1=="sigs.k8s.io/cluster-api"{print $2; exit}' "$here/capi-v1beta1/go.mod")
  if [ "$v" != "$CAPI_V1BETA1_VERSION" ]; then
    echo "testbed/capi-v1beta1/go.mod requires cluster-api $v, versions.env's CAPI_V1BETA1_VERSION is $CAPI_V1BETA1_VERSION: change both together" >&2
    exit 1
  fi
  local out="$cache_root/capi-$v"
  if [ -x "$out/capi-manager" ] && [ -f "$out/capi-webhooks.yaml" ]; then echo "$out"; return; fi
  rm -rf "$out.tmp"; mkdir -p "$out.tmp"
  echo "building the Cluster API $v core manager (first time only; about 4 minutes)" >&2
  local ldf="-s -w -X 'sigs.k8s.io/cluster-api/version.gitVersion=$v' -X 'sigs.k8s.io/cluster-api/version.gitMajor=1' -X 'sigs.k8s.io/cluster-api/version.gitTreeState=clean'"
  (cd "$here/capi-v1beta1" && go build -trimpath -ldflags "$ldf" -o "$out.tmp/capi-manager" sigs.k8s.io/cluster-api)
  local src
  src=$(cd "$here/capi-v1beta1" && mod_dir "sigs.k8s.io/cluster-api@$v")
  need_dirs "$src"
  cp "$src/config/webhook/manifests.yaml" "$out.tmp/capi-webhooks.yaml"
  publish "$out"
}

# cert-manager's controller, cainjector and webhook at CERT_MANAGER_VERSION, stamped as upstream's
# `make` stamps them. Upstream's own main packages live in nested modules the Go module proxy does
# not serve, so testbed/cert-manager holds three small mains of ours (one module, requiring the root
# module at the pinned version) that run cert-manager's own controllers, injector and webhook
# server. The folder keeps its name; a `built-from` file inside holds a hash of those sources, and
# the set is rebuilt when it differs (so binaries built from earlier sources are replaced).
build_cert_manager() {
  # shellcheck disable=SC1091
  . "$here/versions.env"
  local out="$cache_root/cert-manager-$CERT_MANAGER_VERSION" src="$here/cert-manager" key b
  if ! grep -qE "^[[:space:]]*github.com/cert-manager/cert-manager $CERT_MANAGER_VERSION\$" "$src/go.mod"; then
    echo "testbed/cert-manager/go.mod does not require cert-manager $CERT_MANAGER_VERSION: change both together" >&2
    exit 1
  fi
  key=$(cd "$src" && cat go.mod go.sum controller/*.go cainjector/*.go webhook/*.go | sha256sum | cut -c1-16)
  local ok=1
  for b in controller cainjector webhook; do [ -x "$out/$b" ] || ok=0; done
  if [ $ok = 1 ] && [ "$(cat "$out/built-from" 2>/dev/null)" = "$key" ]; then echo "$out"; return; fi
  rm -rf "$out.tmp"; mkdir -p "$out.tmp"
  echo "building cert-manager $CERT_MANAGER_VERSION's controller, cainjector and webhook (first time only; about 3 minutes)" >&2
  local ldf="-s -w -X 'github.com/cert-manager/cert-manager/pkg/util.AppVersion=$CERT_MANAGER_VERSION'"
  local m=github.com/cert-manager/cert-manager/capi-kamaji-testbed
  (cd "$src" && go build -trimpath -ldflags "$ldf" -o "$out.tmp/" "$m/controller" "$m/cainjector" "$m/webhook")
  echo "$key" > "$out.tmp/built-from"
  publish "$out"
}

# Helm, at the version cert-manager's release tooling uses (HELM_VERSION), stamped as Helm's
# Makefile stamps a tagged build: init-sources renders cert-manager's release manifest with it.
build_helm() {
  # shellcheck disable=SC1091
  . "$here/versions.env"
  local out="$cache_root/helm-$HELM_VERSION"
  if [ -x "$out/helm" ]; then echo "$out"; return; fi
  rm -rf "$out.tmp"; mkdir -p "$out.tmp"
  echo "building helm $HELM_VERSION (first time only; about 80 seconds)" >&2
  local v=helm.sh/helm/v4/internal/version
  (cd "$out.tmp" && GOBIN="$out.tmp" GOFLAGS='' go install -trimpath \
      -ldflags "-s -w -X $v.version=$HELM_VERSION -X $v.metadata= -X $v.gitTreeState=clean" \
      "helm.sh/helm/v4/cmd/helm@$HELM_VERSION")
  publish "$out"
}

# kube-rbac-proxy at the version testbed/kube-rbac-proxy/go.mod pins: BYOH's release runs it as a
# sidecar of its manager (gcr.io/kubebuilder/kube-rbac-proxy:v0.8.0).
build_kube_rbac_proxy() {
  local v
  v=$(awk '$1=="require" && $2=="github.com/brancz/kube-rbac-proxy"{print $3; exit}' "$here/kube-rbac-proxy/go.mod")
  local out="$cache_root/kube-rbac-proxy-$v"
  if [ -x "$out/kube-rbac-proxy" ]; then echo "$out"; return; fi
  rm -rf "$out.tmp"; mkdir -p "$out.tmp"
  echo "building kube-rbac-proxy $v (first time only; about 40 seconds)" >&2
  (cd "$here/kube-rbac-proxy" && go build -trimpath -ldflags "-s -w" -o "$out.tmp/kube-rbac-proxy" github.com/brancz/kube-rbac-proxy)
  publish "$out"
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
  if [ -d "$out/full" ] && [ -d "$out/v1beta1" ] && [ -f "$out/byoh-agent-rbac.yaml" ] && [ -f "$out/kcp-webhooks.yaml" ]; then echo "$out"; return; fi
  rm -rf "$out.tmp"; mkdir -p "$out.tmp/full" "$out.tmp/v1beta1" "$out.tmp/extra"
  local capi capi_old kamaji byoh cacppk
  capi=$(mod_dir "sigs.k8s.io/cluster-api@$CAPI_VERSION")
  capi_old=$(mod_dir "sigs.k8s.io/cluster-api@$CAPI_V1BETA1_VERSION")
  kamaji=$(mod_dir "github.com/clastix/kamaji@$KAMAJI_VERSION")
  byoh=$(mod_dir "github.com/vmware-tanzu/cluster-api-provider-bringyourownhost@$BYOH_VERSION")
  cacppk=$(mod_dir "github.com/clastix/cluster-api-control-plane-provider-kamaji@$CACPPK_VERSION")
  need_dirs "$capi" "$capi_old" "$kamaji" "$byoh" "$cacppk"
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
  cp "$capi"/controlplane/kubeadm/config/webhook/manifests.yaml "$out.tmp/kcp-webhooks.yaml"
  cp "$kamaji"/config/webhook/manifests.yaml "$out.tmp/kamaji-webhooks.yaml"
  cp "$byoh"/config/webhook/manifests.yaml "$out.tmp/byoh-webhooks.yaml"
  # What BYOH's release gives its host agents: CSR creation for bootstrap-token users, their
  # ByoHost, and Secrets (config/rbac, applied as clusterctl applies infrastructure-components).
  for f in byoh_csr_creator_clusterrole byoh_csr_creator_clusterrolebinding byohost_editor_role \
           byohost_editor_clusterrolebinding secret_reader_clusterrole secret_reader_clusterrolebinding; do
    cat "$byoh/config/rbac/$f.yaml"; printf '\n---\n'
  done > "$out.tmp/byoh-agent-rbac.yaml"
  publish "$out"
}

# Filters a CAPI manifest kustomize built: the staging image `$1:main` becomes the release's
# (registry.k8s.io/cluster-api/$1:$CAPI_VERSION), as CAPI's release tooling sets it.
release_image() {
  sed "s#gcr.io/k8s-staging-cluster-api/$1:main#registry.k8s.io/cluster-api/$1:$CAPI_VERSION#"
}

# A clusterctl local repository ({provider-label}/{version}/{file}, clusterctl's
# repository_local.go) holding the CAPI core and kubeadm bootstrap providers' release assets,
# built with kustomize from the pinned CAPI module as CAPI's `make release-manifests` does, and
# cert-manager's CRDs (cert-manager-crds/): clusterctl init checks cert-manager's API by creating
# an Issuer and a Certificate. kustomize itself is cached next to the other binaries.
build_clusterctl_repo() {
  # shellcheck disable=SC1091
  . "$here/versions.env"
  local kz="$cache_root/kustomize-$KUSTOMIZE_VERSION"
  if [ ! -x "$kz/kustomize" ]; then
    echo "building kustomize $KUSTOMIZE_VERSION (first time only; about 30 seconds)" >&2
    rm -rf "$kz.tmp"; mkdir -p "$kz.tmp"
    go_install "$kz.tmp" "sigs.k8s.io/kustomize/kustomize/v5@$KUSTOMIZE_VERSION"
    publish "$kz" > /dev/null
  fi
  # "-release": the images carry their release names and tags (registry.k8s.io/cluster-api/…:
  # $CAPI_VERSION), as in the assets CAPI publishes, not the staging ones kustomize writes.
  local out="$cache_root/clusterctl-repo-capi-$CAPI_VERSION-cert-manager-$CERT_MANAGER_VERSION-release"
  if [ -f "$out/cluster-api/$CAPI_VERSION/core-components.yaml" ] && [ -d "$out/cert-manager-crds" ]; then echo "$out"; return; fi
  local capi cm
  capi=$(mod_dir "sigs.k8s.io/cluster-api@$CAPI_VERSION")
  cm=$(mod_dir "github.com/cert-manager/cert-manager@$CERT_MANAGER_VERSION")
  need_dirs "$capi" "$cm"
  rm -rf "$out.tmp"; mkdir -p "$out.tmp/cluster-api/$CAPI_VERSION" "$out.tmp/bootstrap-kubeadm/$CAPI_VERSION" "$out.tmp/cert-manager-crds"
  (cd "$capi" && "$kz/kustomize" build core/config/default) | release_image cluster-api-controller \
    > "$out.tmp/cluster-api/$CAPI_VERSION/core-components.yaml"
  (cd "$capi" && "$kz/kustomize" build bootstrap/kubeadm/config/default) | release_image kubeadm-bootstrap-controller \
    > "$out.tmp/bootstrap-kubeadm/$CAPI_VERSION/bootstrap-components.yaml"
  cp "$capi/metadata.yaml" "$out.tmp/cluster-api/$CAPI_VERSION/metadata.yaml"
  cp "$capi/metadata.yaml" "$out.tmp/bootstrap-kubeadm/$CAPI_VERSION/metadata.yaml"
  cp "$cm"/deploy/crds/*.yaml "$out.tmp/cert-manager-crds/"
  publish "$out"
}

# cert-manager's release manifest (`cert-manager.yaml` of its GitHub release) into $2, made from the
# module's chart in $1 as cert-manager's make/manifests.mk makes it: the chart with its version and
# appVersion set to the release's (so the images are quay.io/jetstack/cert-manager-*:<version>),
# `helm template` with the release's values, the CRDs picked out by upstream's hack/extractcrd, and
# the license header, the namespace, the CRDs and the rest joined as hack/concat-yaml.sh joins them.
render_cert_manager() {
  local cm=$1 dst=$2 helm chart scratch
  helm="$(build_helm)/helm"
  scratch="$dst.d"; chart="$scratch/cert-manager"
  rm -rf "$scratch"; mkdir -p "$chart/templates"
  # The files upstream's make copies into the packaged chart (Chart.yaml's signing annotations,
  # which nothing renders, are left out).
  cp "$cm/deploy/charts/cert-manager/"{values.yaml,values.schema.json,.helmignore} "$chart/"
  cp "$cm/deploy/charts/cert-manager/templates/"{*.yaml,NOTES.txt,_helpers.tpl} "$chart/templates/"
  sed -e "s/^version: v0.0.0$/version: $CERT_MANAGER_VERSION/" -e "s/^appVersion: v0.0.0$/appVersion: $CERT_MANAGER_VERSION/" \
    "$cm/deploy/charts/cert-manager/Chart.yaml" > "$chart/Chart.yaml"
  grep -qx "appVersion: $CERT_MANAGER_VERSION" "$chart/Chart.yaml" || { echo "cert-manager's Chart.yaml has no v0.0.0 placeholder" >&2; exit 1; }
  chmod -R u+w "$scratch"
  local common=(--kube-version=1.29.0 --api-versions="" --namespace=cert-manager --set=creator=static --set=startupapicheck.enabled=false)
  "$helm" template "${common[@]}" cert-manager "$chart" | sed -e '1{/^---$/d;}' > "$scratch/noncrd.yaml"
  "$helm" template "${common[@]}" --set=crds.enabled=true cert-manager "$chart" | sed -e '1{/^---$/d;}' > "$scratch/all.yaml"
  (cd "$here/cert-manager" && go tool extractcrd "$scratch/all.yaml") > "$scratch/crds.yaml"
  { sed -e "s/YEAR/2022/g" "$cm/hack/boilerplate-yaml.txt"
    cat "$cm/deploy/manifests/namespace.yaml"; printf '\n---\n'
    cat "$scratch/crds.yaml"; printf '\n---\n'
    cat "$scratch/noncrd.yaml"; } > "$dst"
  rm -rf "$scratch"
}

# The release assets `kubectl capi init` installs, made from the pinned upstream modules as
# their release tooling does, one file per component named as in an init bundle
# (`<component>.yaml`): CAPI's core, kubeadm bootstrap and KubeadmControlPlane providers and
# BYOH's infrastructure-components built with kustomize, each manager's image set to its
# release name (CAPI's `make release-manifests`, BYOH's `make build-release-artifacts`);
# Kamaji's own `config/install.yaml`; cert-manager's release manifest rendered by Helm from its
# chart (render_cert_manager).
build_init_sources() {
  # shellcheck disable=SC1091
  . "$here/versions.env"
  local kz="$cache_root/kustomize-$KUSTOMIZE_VERSION/kustomize"
  [ -x "$kz" ] || build_clusterctl_repo > /dev/null
  local out="$cache_root/init-sources-capi-$CAPI_VERSION-byoh-$BYOH_VERSION-kamaji-$KAMAJI_VERSION-cert-manager-$CERT_MANAGER_VERSION-helm-$HELM_VERSION"
  if [ -f "$out/kamaji.yaml" ]; then echo "$out"; return; fi
  local capi byoh kamaji cm
  capi=$(mod_dir "sigs.k8s.io/cluster-api@$CAPI_VERSION")
  byoh=$(mod_dir "github.com/vmware-tanzu/cluster-api-provider-bringyourownhost@$BYOH_VERSION")
  kamaji=$(mod_dir "github.com/clastix/kamaji@$KAMAJI_VERSION")
  cm=$(mod_dir "github.com/cert-manager/cert-manager@$CERT_MANAGER_VERSION")
  need_dirs "$capi" "$byoh" "$kamaji" "$cm"
  rm -rf "$out.tmp"; mkdir -p "$out.tmp"
  (cd "$capi" && "$kz" build core/config/default) | release_image cluster-api-controller > "$out.tmp/cluster-api.yaml"
  (cd "$capi" && "$kz" build bootstrap/kubeadm/config/default) \
    | release_image kubeadm-bootstrap-controller > "$out.tmp/bootstrap-kubeadm.yaml"
  (cd "$capi" && "$kz" build controlplane/kubeadm/config/default) \
    | release_image kubeadm-control-plane-controller > "$out.tmp/control-plane-kubeadm.yaml"
  (cd "$byoh" && "$kz" build config/default 2>/dev/null) \
    | sed "s#gcr.io/k8s-staging-cluster-api/cluster-api-byoh-controller:dev#projects.registry.vmware.com/cluster_api_provider_bringyourownhost/cluster-api-byoh-controller:$BYOH_VERSION#" > "$out.tmp/infrastructure-byoh.yaml"
  cp "$kamaji/config/install.yaml" "$out.tmp/kamaji.yaml"
  render_cert_manager "$cm" "$out.tmp/cert-manager.yaml"
  for f in "$out.tmp"/*.yaml; do [ -s "$f" ] || { echo "empty: $f" >&2; exit 1; }; done
  chmod -R u+w "$out.tmp"
  publish "$out"
}

# The release tooling: krew as a kubectl plugin (kubectl-krew), the manifest validator the
# krew-index repository runs on every pull request, and actionlint for .github/workflows. All three
# are plain `go install`s of tagged modules.
build_krew() {
  # shellcheck disable=SC1091
  . "$here/versions.env"
  local out="$cache_root/krew-$KREW_VERSION-actionlint-$ACTIONLINT_VERSION"
  if [ -x "$out/kubectl-krew" ] && [ -x "$out/validate-krew-manifest" ] && [ -x "$out/actionlint" ]; then
    echo "$out"; return
  fi
  rm -rf "$out.tmp"; mkdir -p "$out.tmp"
  echo "building krew $KREW_VERSION and actionlint $ACTIONLINT_VERSION (first time only; about a minute)" >&2
  go_install "$out.tmp" "sigs.k8s.io/krew/cmd/krew@$KREW_VERSION" \
      "sigs.k8s.io/krew/cmd/validate-krew-manifest@$KREW_VERSION"
  go_install "$out.tmp" "github.com/rhysd/actionlint/cmd/actionlint@$ACTIONLINT_VERSION"
  mv "$out.tmp/krew" "$out.tmp/kubectl-krew"
  publish "$out"
}

# What the alerts are checked with and installed onto: Prometheus's promtool (`check rules`,
# `test rules`), and the Prometheus operator's CRDs generated from its own API types with
# controller-gen, as its release generates them (the operator's root module, which carries the
# generated YAML, is not served by the Go module proxy; its pkg/apis/monitoring module is).
build_s3() {
  # shellcheck disable=SC1091
  . "$here/versions.env"
  local out="$cache_root/s3s-fs-$S3S_FS_VERSION"
  if [ -x "$out/bin/s3s-fs" ]; then echo "$out"; return; fi
  rm -rf "$out.tmp"
  echo "building s3s-fs $S3S_FS_VERSION from crates.io (first time only; a few minutes)" >&2
  # Its own target directory, so that a workspace's CARGO_TARGET_DIR is not filled with it.
  CARGO_TARGET_DIR="$out.tmp/target" "${CARGO:-cargo}" install --locked --quiet \
    "s3s-fs@$S3S_FS_VERSION" --features binary --root "$out.tmp" >&2
  rm -rf "$out.tmp/target" "$out.tmp/.crates.toml" "$out.tmp/.crates2.json"
  publish "$out"
}

build_monitoring() {
  # shellcheck disable=SC1091
  . "$here/versions.env"
  local out="$cache_root/monitoring-prometheus-$PROMETHEUS_VERSION-operator-$PROMETHEUS_OPERATOR_VERSION"
  if [ -x "$out/promtool" ] && [ -f "$out/crds/monitoring.coreos.com_prometheusrules.yaml" ]; then
    echo "$out"; return
  fi
  rm -rf "$out.tmp"; mkdir -p "$out.tmp/crds"
  echo "building promtool $PROMETHEUS_VERSION and the Prometheus operator's CRDs (first time only; a few minutes)" >&2
  go_install "$out.tmp" "github.com/prometheus/prometheus/cmd/promtool@$PROMETHEUS_VERSION"
  go_install "$out.tmp" "sigs.k8s.io/controller-tools/cmd/controller-gen@$CONTROLLER_TOOLS_VERSION"
  local mon
  mon=$(mod_dir "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring@$PROMETHEUS_OPERATOR_VERSION")
  need_dirs "$mon"
  # controller-gen loads the packages with the go command, which may write go.sum: a copy.
  cp -r "$mon" "$out.tmp/src"; chmod -R u+w "$out.tmp/src"
  (cd "$out.tmp/src" && "$out.tmp/controller-gen" crd:crdVersions=v1,maxDescLen=0 paths=./v1/... \
      output:crd:dir="$out.tmp/crds")
  rm -rf "$out.tmp/src" "$out.tmp/controller-gen"
  publish "$out"
}

# crane (go-containerregistry): `crane registry serve` is the testbed's local OCI registry, and
# the SIMULATED kubelet pulls the images of its pods with it.
# The pod sandbox image's program: registry.k8s.io/pause cannot be reached here.
build_pause() {
  local out
  out="$cache_root/pause-$(sha256sum "$here/pause/main.go" | cut -c1-12)"
  if [ -x "$out/pause" ]; then echo "$out"; return; fi
  rm -rf "$out.tmp"; mkdir -p "$out.tmp"
  (cd "$here/pause" && go build -trimpath -ldflags "-s -w" -o "$out.tmp/pause" .)
  publish "$out"
}

# CoreDNS, as kubeadm deploys it with the pinned Kubernetes (the real node's cluster DNS).
build_coredns() {
  # shellcheck disable=SC1091
  . "$here/versions.env"
  local out="$cache_root/coredns-$COREDNS_VERSION"
  if [ -x "$out/coredns" ]; then echo "$out"; return; fi
  rm -rf "$out.tmp"; mkdir -p "$out.tmp"
  echo "building CoreDNS $COREDNS_VERSION (first time only; about 2 minutes)" >&2
  go_install "$out.tmp" "github.com/coredns/coredns@$COREDNS_VERSION"
  publish "$out"
}

# Debian's packages a real kubelet runs with (the management cluster's node, testbed::node).
# Installed once, as root; a machine that has them is left alone.
node_packages() {
  local want=() p
  for p in containerd runc containernetworking-plugins iptables busybox-static; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || want+=("$p")
  done
  if [ ${#want[@]} -gt 0 ]; then
    [ "$(id -u)" = 0 ] || { echo "the testbed's node needs Debian's ${want[*]}: run as root, or: sudo apt-get install -y ${want[*]}" >&2; exit 1; }
    echo "installing ${want[*]} from Debian's packages (first time only; about 15 seconds)" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${want[@]}" >&2 ||
      { DEBIAN_FRONTEND=noninteractive apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${want[@]}" >&2; }
  fi
  # The set's folder: where busybox, the node's test image, is (the CNI plugins are in
  # /usr/lib/cni).
  dirname "$(readlink -f /bin/busybox)"
}

build_crane() {
  # shellcheck disable=SC1091
  . "$here/versions.env"
  local out="$cache_root/crane-$CRANE_VERSION"
  if [ -x "$out/crane" ]; then echo "$out"; return; fi
  rm -rf "$out.tmp"; mkdir -p "$out.tmp"
  echo "building crane $CRANE_VERSION (first time only; about 30 seconds)" >&2
  go_install "$out.tmp" "github.com/google/go-containerregistry/cmd/crane@$CRANE_VERSION"
  publish "$out"
}

# etcdctl of the etcd the testbed runs: `make bench` compares a tenant's backup with
# `etcdctl snapshot save` of the whole DataStore (etcd's own backup). Not part of `all`.
build_etcdctl() {
  local out="$cache_root/etcdctl-$etcd_version"
  if [ -x "$out/etcdctl" ]; then echo "$out"; return; fi
  rm -rf "$out.tmp"; mkdir -p "$out.tmp"
  echo "building etcdctl $etcd_version (first time only; about a minute)" >&2
  # etcdctl's go.mod replaces its sibling modules (etcd's repository layout), which `go install
  # pkg@version` refuses: it is built as a dependency of a module of its own instead, taking the
  # siblings at the same released version.
  mkdir -p "$out.tmp/src"
  (cd "$out.tmp/src" && go mod init etcdctl-build >/dev/null 2>&1 \
    && go get "go.etcd.io/etcd/etcdctl/v3@$etcd_version" >/dev/null 2>&1 \
    && go build -trimpath -ldflags "-s -w" -o "$out.tmp/etcdctl" go.etcd.io/etcd/etcdctl/v3)
  rm -rf "$out.tmp/src"
  publish "$out"
}

case "${1:-all}" in
  k8s) build_k8s ;;
  etcdctl) build_etcdctl ;;
  capi) build_capi ;;
  capi-v1beta1) build_capi_v1beta1 ;;
  cert-manager) build_cert_manager ;;
  helm) build_helm ;;
  kube-rbac-proxy) build_kube_rbac_proxy ;;
  crds) build_crds ;;
  kamaji) build_kamaji ;;
  clusterctl-repo) build_clusterctl_repo ;;
  init-sources) build_init_sources ;;
  k8s-prev) build_k8s_prev ;;
  k8s-kamaji) build_k8s_prev k8s-kamaji ;;
  k8s-next) build_k8s_prev k8s-next ;;
  byoh) build_byoh ;;
  cacppk) build_cacppk ;;
  krew) build_krew ;;
  monitoring) build_monitoring ;;
  s3) build_s3 ;;
  crane) build_crane ;;
  pause) build_pause ;;
  coredns) build_coredns ;;
  node-packages) node_packages ;;
  all) echo "k8s=$(build_k8s)"; echo "crds=$(build_crds)"; echo "capi=$(build_capi)"; echo "capi-v1beta1=$(build_capi_v1beta1)"
       echo "kamaji=$(build_kamaji)"; echo "byoh=$(build_byoh)"; echo "k8s-prev=$(build_k8s_prev)"; echo "k8s-kamaji=$(build_k8s_prev k8s-kamaji)"; echo "k8s-next=$(build_k8s_prev k8s-next)"
       echo "cert-manager=$(build_cert_manager)"; echo "kube-rbac-proxy=$(build_kube_rbac_proxy)"; echo "helm=$(build_helm)"
       echo "clusterctl-repo=$(build_clusterctl_repo)"; echo "init-sources=$(build_init_sources)"; echo "krew=$(build_krew)"; echo "crane=$(build_crane)"
       echo "pause=$(build_pause)"; echo "coredns=$(build_coredns)"; echo "node-packages=$(node_packages)"
       echo "monitoring=$(build_monitoring)"; echo "s3=$(build_s3)" ;;
  *) echo "usage: $0 k8s|k8s-prev|k8s-kamaji|k8s-next|capi|capi-v1beta1|crds|kamaji|byoh|cacppk|cert-manager|kube-rbac-proxy|helm|clusterctl-repo|init-sources|krew|crane|pause|coredns|node-packages|monitoring|s3|etcdctl|all" >&2; exit 2 ;;
esac
