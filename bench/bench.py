#!/usr/bin/env python3
"""make bench: every benchmark the issues ask for, side by side with what a user would run otherwise.

Each figure is the median of several runs (wall time) and the peak RSS of the measured process
(GNU time's maximum resident set size). It starts its own sandbox (release binaries, audit log on),
seeds it, measures, and stops everything it started, even on Ctrl-C.
"""
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REL = os.path.join(ROOT, "target", "release")
RUNS = int(os.environ.get("BENCH_RUNS", "5"))
HOSTS = int(os.environ.get("BENCH_HOSTS", "5000"))
MACHINES = int(os.environ.get("BENCH_MACHINES", "5000"))
DESCRIBE_MACHINES = int(os.environ.get("BENCH_DESCRIBE_MACHINES", "1000"))
KCPS = int(os.environ.get("BENCH_KCPS", "500"))
IDLE_SECONDS = int(os.environ.get("BENCH_IDLE_SECONDS", "60"))

rows = []  # (benchmark, ours, reference, ratio, our peak RSS, reference peak RSS)
procs = []


def log(msg):
    print(f"bench: {msg}", file=sys.stderr, flush=True)


def cleanup(*_):
    for p in procs:
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
    procs.clear()


def measure(cmd, env, runs=RUNS):
    """Median wall seconds and median peak RSS (KiB) of `cmd` over `runs` runs."""
    walls, rss = [], []
    for _ in range(runs):
        t0 = time.monotonic()
        r = subprocess.run(["/usr/bin/time", "-f", "%M"] + cmd, env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        walls.append(time.monotonic() - t0)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed: {r.stderr.strip()[-400:]}")
        rss.append(int(r.stderr.strip().splitlines()[-1]))
    return statistics.median(walls), statistics.median(rss)


def fmt_s(s):
    return f"{s * 1000:.0f} ms" if s < 10 else f"{s:.1f} s"


def fmt_kib(k):
    return f"{k / 1024:.1f} MiB"


def add(name, ours, ref, ours_rss=None, ref_rss=None, unit="s"):
    if unit == "s":
        o, r = fmt_s(ours), (fmt_s(ref) if ref is not None else "-")
    else:
        o, r = f"{ours}{unit}", (f"{ref}{unit}" if ref is not None else "-")
    ratio = f"{ours / ref:.2f}x" if ref else "-"
    rows.append((name, o, r, ratio,
                 fmt_kib(ours_rss) if ours_rss else "-", fmt_kib(ref_rss) if ref_rss else "-"))


def print_table():
    head = ("BENCHMARK", "OURS", "REFERENCE", "RATIO", "OUR PEAK RSS", "REF PEAK RSS")
    widths = [max(len(str(r[i])) for r in rows + [head]) for i in range(len(head))]
    for r in [head] + rows:
        print("   ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip())


def main():
    signal.signal(signal.SIGINT, lambda *a: (cleanup(), sys.exit(130)))
    signal.signal(signal.SIGTERM, lambda *a: (cleanup(), sys.exit(143)))
    log("building release binaries")
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "kubectl-capi", "-p", "kubectl-kamaji",
                    "-p", "kamaji-reconciler", "-p", "capi-kamaji-testbed"], cwd=ROOT, check=True)
    capi_dir = subprocess.run(["bash", os.path.join(ROOT, "testbed", "build-bins.sh"), "capi"],
                              check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
    clusterctl = os.path.join(capi_dir, "clusterctl")
    kubectl = shutil.which("kubectl")
    work = tempfile.mkdtemp(prefix="capi-bench-")
    sandbox = os.path.join(work, "sandbox")
    env = dict(os.environ)
    env["PATH"] = REL + os.pathsep + env["PATH"]
    env["KUBECONFIG"] = os.path.join(sandbox, "kubeconfig")
    env.pop("NO_COLOR", None)
    try:
        # Start-up time of --help (no sandbox needed).
        for plugin in ("capi", "kamaji"):
            ours, ours_rss = measure([os.path.join(REL, f"kubectl-{plugin}"), "--help"], env, runs=21)
            ref, ref_rss = measure([clusterctl, "--help"], env, runs=21)
            add(f"kubectl-{plugin} --help start-up (vs clusterctl --help)", ours, ref, ours_rss, ref_rss)

        log("starting the sandbox")
        sbx = subprocess.Popen([os.path.join(REL, "capi-testbed"), "up", "--dir", sandbox, "--audit"],
                               stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "sandbox.log"), "w"))
        procs.append(sbx)
        while not os.path.exists(os.path.join(sandbox, "ready")):
            if sbx.poll() is not None:
                raise RuntimeError("sandbox failed; see " + os.path.join(work, "sandbox.log"))
            time.sleep(0.2)

        log(f"seeding {HOSTS} ByoHosts and {MACHINES} Machines")
        subprocess.run([os.path.join(REL, "capi-testbed"), "seed", "--kubeconfig", env["KUBECONFIG"],
                        "--namespace", "bench", "--hosts", str(HOSTS), "--machines", str(MACHINES)],
                       check=True, env=env)
        ours, ours_rss = measure([kubectl, "capi", "hosts"], env)
        ref, ref_rss = measure([kubectl, "get", "byohosts", "-A"], env)
        add(f"kubectl capi hosts, {HOSTS} hosts (vs kubectl get byohosts -A)", ours, ref, ours_rss, ref_rss)
        ref_json, ref_json_rss = measure([kubectl, "get", "byohosts", "-A", "-o", "json"], env)
        add(f"kubectl capi hosts, {HOSTS} hosts (vs kubectl get byohosts -A -o json; target <= 1.5x)",
            ours, ref_json, ours_rss, ref_json_rss)

        log(f"seeding a cluster with {DESCRIBE_MACHINES} machines")
        subprocess.run([os.path.join(REL, "capi-testbed"), "seed", "--kubeconfig", env["KUBECONFIG"],
                        "--namespace", "bench-describe", "--clusters", "1",
                        "--machines", str(DESCRIBE_MACHINES), "--hosts", "0"], check=True, env=env)
        ours, ours_rss = measure([kubectl, "capi", "describe", "cluster-0", "-n", "bench-describe"], env)
        ref, ref_rss = measure([clusterctl, "describe", "cluster", "cluster-0", "-n", "bench-describe"], env)
        add(f"kubectl capi describe, {DESCRIBE_MACHINES} machines (vs clusterctl describe cluster)",
            ours, ref, ours_rss, ref_rss)

        reconciler_bench(env, sandbox, work)
    finally:
        cleanup()
        print_table()
        shutil.rmtree(work, ignore_errors=True)


def reconciler_bench(env, sandbox, work):
    log(f"reconciler: {KCPS} KamajiControlPlanes")
    token_kc = os.path.join(work, "reconciler.kubeconfig")
    with open(env["KUBECONFIG"]) as f:
        admin = f.read()
    server = open(os.path.join(sandbox, "ready")).read().strip()
    ca = [l.split(":", 1)[1].strip() for l in admin.splitlines() if "certificate-authority-data" in l][0]
    with open(token_kc, "w") as f:
        f.write(f"""apiVersion: v1
kind: Config
clusters: [{{name: s, cluster: {{server: "{server}", certificate-authority-data: {ca}}}}}]
users: [{{name: reconciler, user: {{token: testbed-reconciler-token}}}}]
contexts: [{{name: s, context: {{cluster: s, user: reconciler}}}}]
current-context: s
""")
    # Our CRDs, then KCPS Clusters, each owning a KamajiControlPlane (as CAPI would set it).
    crds = subprocess.run([os.path.join(REL, "kamaji-reconciler"), "--print-crds"], check=True,
                          capture_output=True, text=True).stdout
    subprocess.run([shutil.which("kubectl"), "apply", "--server-side", "--force-conflicts", "-f", "-"],
                   input=crds, text=True, check=True, env=env, stdout=subprocess.DEVNULL)
    subprocess.run([shutil.which("kubectl"), "create", "namespace", "bench-kcp"], env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    kubectl_apply_list(env, [{
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
        "metadata": {"name": f"k{i:03d}", "namespace": "bench-kcp"},
        "spec": {"controlPlaneRef": {"apiGroup": "controlplane.cluster.x-k8s.io",
                                     "kind": "KamajiControlPlane", "name": f"k{i:03d}"},
                 "clusterNetwork": {"pods": {"cidrBlocks": ["10.244.0.0/16"]},
                                    "services": {"cidrBlocks": ["10.96.0.0/16"]}}},
    } for i in range(KCPS)])
    uids = {c["metadata"]["name"]: c["metadata"]["uid"] for c in json.loads(subprocess.run(
        [shutil.which("kubectl"), "get", "clusters.cluster.x-k8s.io", "-n", "bench-kcp", "-o", "json"],
        env=env, check=True, capture_output=True, text=True).stdout)["items"]}
    kubectl_apply_list(env, [{
        "apiVersion": "controlplane.cluster.x-k8s.io/v1alpha2", "kind": "KamajiControlPlane",
        "metadata": {"name": f"k{i:03d}", "namespace": "bench-kcp", "ownerReferences": [{
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "name": f"k{i:03d}",
            "uid": uids[f"k{i:03d}"], "controller": True, "blockOwnerDeletion": True}]},
        "spec": {"version": "v1.34.2", "replicas": 2, "dataStoreName": "default",
                 "network": {"serviceType": "ClusterIP"}},
    } for i in range(KCPS)])
    rec = subprocess.Popen([os.path.join(REL, "kamaji-reconciler"), "--kubeconfig", token_kc,
                            "--metrics-bind-address", "0"],
                           stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "reconciler.log"), "w"))
    procs.append(rec)
    # Settle: wait until every KCP has been seen (its TCP exists), then until the audit log is quiet.
    audit = os.path.join(sandbox, "audit.log")

    def reconciler_requests():
        n = 0
        with open(audit) as f:
            for line in f:
                if '"username":"reconciler"' in line:
                    n += 1
        return n

    deadline = time.monotonic() + 300
    last, quiet_since = -1, time.monotonic()
    while time.monotonic() < deadline:
        n = reconciler_requests()
        if n != last:
            last, quiet_since = n, time.monotonic()
        elif time.monotonic() - quiet_since > 10:
            break
        time.sleep(1)
    before = reconciler_requests()
    log(f"reconciler settled after {before} requests; idle for {IDLE_SECONDS} s")
    time.sleep(IDLE_SECONDS)
    idle = reconciler_requests() - before
    with open(f"/proc/{rec.pid}/status") as f:
        hwm = [int(l.split()[1]) for l in f if l.startswith("VmHWM:")][0]
    add(f"kamaji-reconciler peak RSS, {KCPS} KamajiControlPlanes (target <= 40 MiB)", round(hwm / 1024, 1), 40,
        hwm, None, unit=" MiB")
    rows[-1] = rows[-1][:3] + (f"{hwm / 1024 / 40:.2f}x",) + rows[-1][4:]
    rows.append((f"kamaji-reconciler API requests in {IDLE_SECONDS} idle s (target 0)", str(idle), "0",
                 "-", "-", "-"))


def kubectl_apply_list(env, items):
    body = json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
    subprocess.run([shutil.which("kubectl"), "apply", "--server-side", "--field-manager", "bench", "-f", "-"],
                   input=body, text=True, check=True, env=env, stdout=subprocess.DEVNULL)


if __name__ == "__main__":
    main()
