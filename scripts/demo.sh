#!/usr/bin/env bash
# make demo: the whole story on a laptop. Day 0 first: on a bare sandbox, `kubectl capi init`
# installs cert-manager, CAPI, BYOH, Kamaji and our reconciler from an air-gapped bundle, every
# controller then running from its image in the sandbox's registry. Then builds the plugins, starts the sandbox (real etcd,
# kube-apiserver, kube-controller-manager, CAPI v1.14 core and kubeadm bootstrap managers, the
# Kamaji v1.0.0 operator and the BYOH v0.5.0 controller manager), 8 hosts onboarded with
# `kubectl capi hosts add` and the real BYOH v0.5.0 agent (each host a SIMULATED machine: a network
# namespace, hostname and /etc of its own; its kubeadm and kubelet SIMULATED) and
# our reconciler (from its image, `make image`, installed by `kubectl kamaji install`), then runs a narrated tour through the real kubectl binary. Tenant control
# planes run real kube-apiserver, kube-controller-manager and kube-scheduler processes (under a
# SIMULATED kubelet: no container runtime here). Stops everything at the end or on Ctrl-C;
# KEEP=1 leaves the sandbox up. Needs root (Kamaji runs in a network namespace of its own).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
dir=${DEMO_DIR:-$root/.demo}
keep=${KEEP:-0}
bin=$root/target/debug

bold() { if [ -t 1 ]; then printf '\033[1m%s\033[0m\n' "$*"; else printf '%s\n' "$*"; fi; }
say() { printf '\n'; bold "## $*"; }
run() { printf '$ %s\n' "$*"; "$@"; }

cleanup() {
  status=$?
  if [ "$keep" = 1 ] && [ "$status" = 0 ]; then
    say "The sandbox is still running (KEEP=1)"
    echo "  export KUBECONFIG=$dir/kubeconfig PATH=$bin:\$PATH"
    echo "  kubectl capi hosts; kubectl kamaji list; ..."
    echo "  stop it with: $bin/capi-testbed down --dir $dir"
    return
  fi
  "$bin/capi-testbed" down --dir "$dir" >/dev/null 2>&1 || true
  "$bin/capi-testbed" down --dir "$dir/day0" >/dev/null 2>&1 || true
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say "Building the plugins, the reconciler's image and the sandbox runner"
bash testbed/build-bins.sh all >/dev/null
cargo build -q --workspace --bins
bash scripts/image.sh >/dev/null

# Starts `capi-testbed up --dir $1 $2...` in the background and waits until it is ready.
start_sandbox() {
  local d=$1; shift
  "$bin/capi-testbed" down --dir "$d" >/dev/null 2>&1 || true
  rm -rf "$d"; mkdir -p "$d"
  nohup "$bin/capi-testbed" up --dir "$d" "$@" >"$d/sandbox.log" 2>&1 </dev/null &
  for _ in $(seq 1 900); do
    [ -f "$d/ready" ] && break
    [ -f "$d/failed" ] && { cat "$d/sandbox.log" >&2; exit 1; }
    sleep 0.2
  done
  [ -f "$d/ready" ] || { echo "the sandbox did not start; see $d/sandbox.log" >&2; exit 1; }
}

t_day0=$(date +%s)
say "0. Day 0 on a bare cluster: kubectl capi init installs cert-manager, Cluster API, BYOH, Kamaji and our reconciler"
"$bin/capi-testbed" down --dir "$dir" >/dev/null 2>&1 || true
rm -rf "$dir"; mkdir -p "$dir"
day0=$dir/day0
start_sandbox "$day0" --day0
echo "bare sandbox up in $(( $(date +%s) - t_day0 ))s: no CRDs, no controller; every controller's image in its registry (the site's mirror)"
(
  export KUBECONFIG=$day0/kubeconfig PATH=$bin:$PATH
  run kubectl capi doctor --only management || true
  bash scripts/day0.sh "$day0"
  run kubectl get deployments -A
  run kubectl capi doctor --only management
)
"$bin/capi-testbed" down --dir "$day0" >/dev/null 2>&1 || true
echo "day 0 in $(( $(date +%s) - t_day0 ))s. The tour runs on a sandbox whose controllers run as processes: Kamaji v1.0.0's webhook, as its release manifest registers it, admits tenants up to Kubernetes v1.30.2, and the tour upgrades v1.35 to v1.36."

say "Starting the sandbox: real kube-apiserver, etcd, kube-controller-manager, CAPI v1.14 core and kubeadm bootstrap managers, Kamaji v1.0.0 and the BYOH v0.5.0 controller"
t0=$(date +%s)
start_sandbox "$dir" --real
echo "sandbox up in $(( $(date +%s) - t0 ))s"
grep -h "SIMULATED" "$dir/sandbox.log" || true
export KUBECONFIG=$dir/kubeconfig PATH=$bin:$PATH
# The sandbox's tenants run the two releases it has built (v1.35.4, v1.36.3): upgrades walk the
# patch releases of the table shipped with the plugins, not the newest ones dl.k8s.io names.
export CAPI_KAMAJI_RELEASE_MARKERS=off

say "Installing the reconciler from its image: make image, pushed to the sandbox's registry, kubectl kamaji install"
image="$(cat "$dir/registry")/kamaji-reconciler:demo"
crane=$(bash testbed/build-bins.sh crane)/crane
"$crane" push --insecure target/image/kamaji-reconciler "$image" 2>/dev/null
run kubectl kamaji install --image "$image"
run kubectl -n kamaji-reconciler-system rollout status deployment/kamaji-reconciler --timeout 120s

say "1. Onboarding 8 bare-metal hosts: kubectl capi hosts add prints a script for each (preflight, bootstrap kubeconfig, agent)"
kubectl create namespace byoh-hosts >/dev/null
echo '$ kubectl capi hosts add host-01 --label role=worker --preinstalled -n byoh-hosts > host-01.sh'
kubectl capi hosts add host-01 --label role=worker --preinstalled -n byoh-hosts >"$dir/host-01.sh" 2>"$dir/host-01.txt"
cat "$dir/host-01.txt"
for i in 02 03 04 05 06 07 08; do
  kubectl capi hosts add "host-$i" --label role=worker --preinstalled -n byoh-hosts \
    >"$dir/host-$i.sh" 2>"$dir/host-$i.txt"
done
echo "... and host-02 to host-08 alike"
say "1b. On each host, the printed script run as root: the preflight, then the real byoh-hostagent v0.5.0 (the host a SIMULATED machine)"
for i in 01 02 03 04 05 06 07 08; do
  "$bin/capi-testbed" host --dir "$dir" "host-$i" "$dir/host-$i.sh"
done
for _ in $(seq 1 600); do
  [ "$(kubectl -n byoh-hosts get byohosts --no-headers 2>/dev/null | wc -l)" -ge 8 ] && break
  sleep 0.2
done
[ "$(kubectl -n byoh-hosts get byohosts --no-headers | wc -l)" -ge 8 ] ||
  { echo "not every agent registered in 120s; see $dir/hosts/*/byoh-hostagent.log" >&2; exit 1; }
say "1c. The host pool: 8 hosts registered by their agents, all free"
run kubectl capi hosts

# The tenant API server listens on the sandbox's loopback (a pre-assigned address, as a VIP
# would be); the hosts have Kubernetes pre-installed (BYOH v0.5.0's own installer only knows
# Ubuntu 20.04 with Kubernetes v1.24-v1.26); the network add-on is a stand-in whose image
# cannot run here, applied by Cluster API's ClusterResourceSet into the live tenant.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
say "2. One command creates a cluster: a Kamaji control plane (real kube-apiserver), 2 BYOH workers, a network add-on"
run kubectl kamaji create demo --infrastructure byoh --workers 2 --kubernetes-version v1.35.4 \
  --host-selector role=worker --preinstalled-hosts --cni-manifest scripts/demo-cni.yaml \
  --replicas 1 --service-type ClusterIP --service-address 127.0.0.1 --port "$port" --addons none \
  --wait --timeout 6m

say "2b. The workload cluster answers: its own API server, its joined nodes"
run kubectl capi kubeconfig demo --write-to "$dir/demo.kubeconfig"
run kubectl --kubeconfig "$dir/demo.kubeconfig" get --raw /version
echo
run kubectl --kubeconfig "$dir/demo.kubeconfig" get nodes

say "3. The object tree, as clusterctl describe would draw it"
run kubectl capi describe demo

say "4. Which host serves which cluster"
run kubectl capi hosts

say "5. Scale the workers to 3 (preflight: free hosts matching the selector)"
run kubectl capi scale demo --workers 3 --wait

say "6. Plan an upgrade to the next minor, then hand it to the reconciler"
run kubectl capi upgrade demo --to v1.36.3 --plan
run kubectl capi upgrade demo --to v1.36.3 --yes --wait
run kubectl capi upgrade status demo
run kubectl --kubeconfig "$dir/demo.kubeconfig" get --raw /version

say "7. The control plane, in sections"
run kubectl kamaji status demo

say "7b. The fleet doctor: what is wrong across the fleet, and what to type (a paused cluster is a finding)"
run kubectl capi pause demo
run kubectl capi doctor
run kubectl capi resume demo
run kubectl capi doctor

say "8. Tear it down: CAPI cascades, hosts are released"
run kubectl capi delete demo --yes --wait

say "9. Every host is free again"
run kubectl capi hosts

say "Done in $(( $(date +%s) - t_day0 ))s (day 0 and both sandbox starts included; the tour after day 0: $(( $(date +%s) - t0 ))s)"
