#!/usr/bin/env bash
# make demo: the whole story on a laptop. Builds the plugins, starts the sandbox (real etcd,
# kube-apiserver, kube-controller-manager, CAPI v1.14 core and kubeadm bootstrap managers), the
# SIMULATED parts (Kamaji, 8 BYOH host agents, the BYOH controller) and our reconciler, then runs
# a narrated tour through the real kubectl binary. Stops everything at the end or on Ctrl-C;
# KEEP=1 leaves the sandbox up.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
dir=${DEMO_DIR:-$root/.demo}
keep=${KEEP:-0}
bin=$root/target/debug

bold() { if [ -t 1 ]; then printf '\033[1m%s\033[0m\n' "$*"; else printf '%s\n' "$*"; fi; }
say() { printf '\n'; bold "## $*"; }
run() { printf '$ %s\n' "$*"; "$@"; }

reconciler_pid=
cleanup() {
  status=$?
  if [ "$keep" = 1 ] && [ "$status" = 0 ]; then
    say "The sandbox is still running (KEEP=1)"
    echo "  export KUBECONFIG=$dir/kubeconfig PATH=$bin:\$PATH"
    echo "  kubectl capi hosts; kubectl kamaji list; ..."
    echo "  stop it with: $bin/capi-testbed down --dir $dir; kill $reconciler_pid"
    return
  fi
  if [ -n "$reconciler_pid" ]; then
    kill "$reconciler_pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$reconciler_pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$reconciler_pid" 2>/dev/null || true
  fi
  "$bin/capi-testbed" down --dir "$dir" >/dev/null 2>&1 || true
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say "Building the plugins, the reconciler and the sandbox runner"
bash testbed/build-bins.sh all >/dev/null
cargo build -q --workspace --bins

say "Starting the sandbox: real kube-apiserver, etcd, kube-controller-manager, CAPI v1.14 core and kubeadm bootstrap managers"
"$bin/capi-testbed" down --dir "$dir" >/dev/null 2>&1 || true
rm -rf "$dir"; mkdir -p "$dir"
nohup "$bin/capi-testbed" up --dir "$dir" --capi --simulate --hosts 8 --host-label role=worker \
  --delay-ms "${DEMO_DELAY_MS:-1500}" >"$dir/sandbox.log" 2>&1 </dev/null &
for _ in $(seq 1 900); do
  [ -f "$dir/ready" ] && break
  [ -f "$dir/failed" ] && { cat "$dir/sandbox.log" >&2; exit 1; }
  sleep 0.2
done
[ -f "$dir/ready" ] || { echo "the sandbox did not start; see $dir/sandbox.log" >&2; exit 1; }
grep -h "SIMULATED" "$dir/sandbox.log" || true
export KUBECONFIG=$dir/kubeconfig PATH=$bin:$PATH

say "Installing our KamajiControlPlane CRDs and running the reconciler (out of cluster)"
"$bin/kamaji-reconciler" --print-crds | kubectl apply --server-side -f - >/dev/null
kubectl wait --for condition=established --timeout 60s \
  crd/kamajicontrolplanes.controlplane.cluster.x-k8s.io crd/kamajicontrolplanetemplates.controlplane.cluster.x-k8s.io >/dev/null
for _ in $(seq 1 50); do kubectl api-resources --api-group controlplane.cluster.x-k8s.io 2>/dev/null | grep -q kamajicontrolplanes && break; sleep 0.2; done
"$bin/kamaji-reconciler" --kubeconfig "$KUBECONFIG" --metrics-bind-address 0 -v >"$dir/reconciler.log" 2>&1 &
reconciler_pid=$!

say "1. The host pool: 8 bare-metal hosts (SIMULATED agents), all free"
run kubectl capi hosts

say "2. One command creates a cluster: a Kamaji control plane and 2 BYOH workers"
run kubectl kamaji create demo --infrastructure byoh --workers 2 --kubernetes-version v1.33.4 \
  --host-selector role=worker --wait --timeout 5m

say "3. The object tree, as clusterctl describe would draw it"
run kubectl capi describe demo

say "4. Which host serves which cluster"
run kubectl capi hosts

say "5. Scale the workers to 3 (preflight: free hosts matching the selector)"
run kubectl capi scale demo --workers 3 --wait

say "6. Plan an upgrade to the next minor, then apply it"
run kubectl capi upgrade demo --to v1.34.1 --plan
run kubectl capi upgrade demo --to v1.34.1 --yes

say "7. The control plane, in sections"
run kubectl kamaji status demo

say "8. Tear it down: CAPI cascades, hosts are released"
run kubectl capi delete demo --yes --wait

say "9. Every host is free again"
run kubectl capi hosts
