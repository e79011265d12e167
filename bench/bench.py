#!/usr/bin/env python3
"""make bench: every benchmark the issues ask for, side by side with what a user would run otherwise.

Each figure is the median of several runs (wall time) and the peak RSS of the measured process
(GNU time's maximum resident set size). Our plugins run as their own binaries (kubectl-capi ...), so
the peak RSS is theirs and not kubectl's, which execs them. Every ratio is measured in the same run,
on the same sandbox. It starts its own sandbox (release binaries, audit log on), seeds it, measures,
and stops everything it started, even on Ctrl-C.

Sizes: BENCH_HOSTS and BENCH_MACHINES (the fleet, 10,000 each), BENCH_INIT_RUNS (5 bare sandboxes a side for init), BENCH_DESCRIBE_MACHINES (the
described clusters, "1000,5000"), BENCH_KCPS (1,000), BENCH_RUNS (5), BENCH_IDLE_SECONDS (60),
BENCH_LATENCY_SAMPLES (100 ready latencies), BENCH_UPGRADES (100 ClusterUpgrades). BENCH_QUICK=1 shrinks them all (a run of a few
minutes, for development). `bench.py providers` runs only kamaji-reconciler against CACPPK v0.11.0
and then alone at BENCH_KCPS_LARGE (10,000); `bench.py reconciler` only kamaji-reconciler alone at
BENCH_KCPS and BENCH_KCPS_LARGE (with where its requests go, by verb and resource, on stderr);
`bench.py fleet` only the fleet verbs' rows (hosts, machines) over the seeded fleet; `bench.py doctor` only the doctor row (the fleet seeded, the reconciler's rows over BENCH_KCPS
clusters, then doctor); `bench.py describe` only the described clusters' rows, alone (describe
against clusterctl and the floor, and the per-cluster plans); `bench.py init` only day 0 (`kubectl
capi init` on a bare sandbox against clusterctl init and kubectl apply of the same set).
"""
import json
import os
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REL = os.path.join(ROOT, "target", "release")
QUICK = os.environ.get("BENCH_QUICK", "") not in ("", "0")


def env_int(name, full, quick):
    return int(os.environ.get(name, str(quick if QUICK else full)))


RUNS = env_int("BENCH_RUNS", 5, 3)
HOSTS = env_int("BENCH_HOSTS", 10000, 1000)
MACHINES = env_int("BENCH_MACHINES", 10000, 1000)
DESCRIBE_SIZES = [int(x) for x in os.environ.get(
    "BENCH_DESCRIBE_MACHINES", "100,500" if QUICK else "1000,5000").split(",")]
KCPS = env_int("BENCH_KCPS", 1000, 100)
# Day 0: runs of `capi init` and of the same by hand, each on a fresh bare sandbox.
INIT_RUNS = env_int("BENCH_INIT_RUNS", 5, 3)
# The reconciler at ten times the fleet: alone on a v1beta1 sandbox, as the CACPPK rows.
KCPS_LARGE = env_int("BENCH_KCPS_LARGE", 10000, 1000)
IDLE_SECONDS = env_int("BENCH_IDLE_SECONDS", 60, 10)
LATENCY_SAMPLES = env_int("BENCH_LATENCY_SAMPLES", 100, 20)
UPGRADES = env_int("BENCH_UPGRADES", 100, 20)
# One live tenant's objects for kubectl kamaji backup and restore.
BACKUP_OBJECTS = env_int("BENCH_BACKUP_OBJECTS", 10000, 1000)
FLEET_NS = "bench"

# (benchmark, ours, reference, ratio, target, our peak RSS, reference peak RSS)
rows = []
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


class Failed(Exception):
    pass


def run_once(cmd, env):
    """Wall seconds and peak RSS (KiB) of one run of `cmd`."""
    t0 = time.monotonic()
    r = subprocess.run(["/usr/bin/time", "-f", "%M"] + cmd, env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.monotonic() - t0
    if r.returncode != 0:
        raise Failed(f"{' '.join(cmd)} failed: {r.stderr.strip()[-400:]}")
    return wall, int(r.stderr.strip().splitlines()[-1])


def measure_all(cmds, env, runs=None):
    """Median wall seconds and median peak RSS of each command, the commands taking turns run by
    run, so that a burst of load on the machine hits all of them alike."""
    samples = [[] for _ in cmds]
    for _ in range(runs or RUNS):
        for i, cmd in enumerate(cmds):
            samples[i].append(run_once(cmd, env))
    return [(statistics.median(w for w, _ in s), statistics.median(m for _, m in s)) for s in samples]


def measure(cmd, env, runs=None):
    """Median wall seconds and median peak RSS (KiB) of `cmd` over `runs` runs."""
    return measure_all([cmd], env, runs)[0]


def try_measure(name, cmd, env, runs=None):
    try:
        return measure(cmd, env, runs)
    except Failed as e:
        log(str(e))
        rows.append((name, "failed", "-", "-", "-", "-", "-"))
        return None


def fmt_s(s):
    return f"{s * 1000:.0f} ms" if s < 10 else f"{s:.1f} s"


def fmt_kib(k):
    return f"{k / 1024:.1f} MiB"


def verdict(ratio, max_ratio):
    if max_ratio is None:
        return "-"
    return f"<= {max_ratio:g}x: " + ("met" if ratio <= max_ratio else "MISSED")


def add(name, ours, ref, ours_rss=None, ref_rss=None, target=None, rss_target=None, unit="s"):
    """A row; `target` is the highest ratio allowed, `rss_target` the highest RSS ratio (or, as
    a string ending in MiB, the highest peak RSS)."""
    if unit == "s":
        o, r = fmt_s(ours), (fmt_s(ref) if ref is not None else "-")
    else:
        o, r = f"{ours}{unit}", (f"{ref}{unit}" if ref is not None else "-")
    ratio = ours / ref if ref else None
    goal = verdict(ratio, target) if ratio is not None else "-"
    if rss_target is not None and ours_rss:
        if isinstance(rss_target, str):
            limit = float(rss_target.split()[0])
            ok = ours_rss / 1024 <= limit
            goal += f"; RSS <= {rss_target}: " + ("met" if ok else "MISSED")
        elif ref_rss:
            ok = ours_rss / ref_rss <= rss_target
            goal += f"; RSS <= {rss_target:g}x: " + ("met" if ok else "MISSED")
    rows.append((name, o, r, f"{ratio:.2f}x" if ratio is not None else "-", goal,
                 fmt_kib(ours_rss) if ours_rss else "-", fmt_kib(ref_rss) if ref_rss else "-"))


def compare(name, ours_cmd, ref_cmd, env, target=None, rss_target=None, runs=None):
    """Measures both commands, taking turns run by run; adds the row."""
    try:
        ours, ref = measure_all([ours_cmd, ref_cmd], env, runs)
    except Failed as e:
        log(str(e))
        rows.append((name, "failed", "-", "-", "-", "-", "-"))
        return None, None
    add(name, ours[0], ref[0], ours[1], ref[1], target, rss_target)
    return ours, ref


def print_table():
    head = ("BENCHMARK", "OURS", "REFERENCE", "RATIO", "TARGET", "OUR PEAK RSS", "REF PEAK RSS")
    widths = [max(len(str(r[i])) for r in rows + [head]) for i in range(len(head))]
    for r in [head] + rows:
        print("   ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip())


def seed(env, namespace, clusters, machines, hosts):
    log(f"seeding {namespace}: {clusters} clusters, {machines} Machines, {hosts} ByoHosts")
    subprocess.run([os.path.join(REL, "capi-testbed"), "seed", "--kubeconfig", env["KUBECONFIG"],
                    "--namespace", namespace, "--clusters", str(clusters),
                    "--machines", str(machines), "--hosts", str(hosts)],
                   check=True, env=env, stdout=subprocess.DEVNULL)


def server_idle(sandbox, limit=600, window=2.0, busy=0.1, calm=3):
    """Until the sandbox's API server has used under `busy` of a core for `calm` windows of
    `window` seconds in a row (at most `limit` seconds): after a seed of thousands of objects it
    and the controller-manager's garbage collector digest them for minutes, and a verb measured
    meanwhile measures that (a scale-down that reads nothing fleet-sized took 1.7x its
    empty-fleet time right after the fleet's seed). Returns the seconds waited."""
    audit = os.path.join(sandbox, "audit.log")
    pids = [p for p in os.listdir("/proc") if p.isdigit()]
    server = None
    for p in pids:
        try:
            with open(f"/proc/{p}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"kube-apiserver") and f"--audit-log-path={audit}".encode() in argv:
            server = p
            break
    if server is None:
        log(f"no API server found for {sandbox}; not waiting for it to settle")
        return 0.0
    tick = os.sysconf("SC_CLK_TCK")

    def cpu():
        with open(f"/proc/{server}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / tick  # utime + stime

    started = time.monotonic()
    quiet = 0
    while quiet < calm and time.monotonic() - started < limit:
        before = cpu()
        time.sleep(window)
        quiet = quiet + 1 if (cpu() - before) / window < busy else 0
    waited = time.monotonic() - started
    log(f"API server settled after {waited:.0f} s" if quiet >= calm else
        f"API server still busy after {limit} s; measuring anyway")
    return waited


def byoh_templates(env, ns):
    """The ByoMachineTemplates the seeded cluster-0's MachineDeployments name (the seed leaves
    them out), so that scale and upgrade plans count free hosts as on a real BYOH cluster."""
    kubectl_apply_list(env, [{
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "ByoMachineTemplate",
        "metadata": {"name": f"cluster-0-md-{i}", "namespace": ns},
        "spec": {"template": {"spec": {"selector": {"matchLabels": {"site": "rack-1"}}}}},
    } for i in range(2)])


def raw(kubectl, path):
    return [kubectl, "get", "--raw", path]


def raw_all(kubectl, paths):
    """The raw LISTs of `paths` at once, one kubectl each, as one command that fails when any
    does (its peak RSS is the largest of theirs)."""
    starts = "; ".join(f"{shlex.quote(kubectl)} get --raw {shlex.quote(p)} >/dev/null & p{i}=$!"
                       for i, p in enumerate(paths))
    waits = " && ".join(f"wait $p{i}" for i in range(len(paths)))
    return ["sh", "-c", f"{starts}; {waits}"]


def main():
    signal.signal(signal.SIGINT, lambda *a: (cleanup(), sys.exit(130)))
    signal.signal(signal.SIGTERM, lambda *a: (cleanup(), sys.exit(143)))
    started = time.monotonic()
    log("building release binaries" + (" (BENCH_QUICK)" if QUICK else ""))
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "kubectl-capi", "-p", "kubectl-kamaji",
                    "-p", "kamaji-reconciler", "-p", "capi-kamaji-testbed"], cwd=ROOT, check=True)
    capi_dir = subprocess.run(["bash", os.path.join(ROOT, "testbed", "build-bins.sh"), "capi"],
                              check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
    clusterctl = os.path.join(capi_dir, "clusterctl")
    kubectl = shutil.which("kubectl")
    capi = os.path.join(REL, "kubectl-capi")
    work = tempfile.mkdtemp(prefix="capi-bench-")
    sandbox = os.path.join(work, "sandbox")
    env = dict(os.environ)
    env["PATH"] = REL + os.pathsep + env["PATH"]
    env["KUBECONFIG"] = os.path.join(sandbox, "kubeconfig")
    env.pop("NO_COLOR", None)
    try:
        if sys.argv[1:] == ["providers"]:
            reconciler_scale_bench(work, cacppk_bench(work))
            return
        if sys.argv[1:] == ["reconciler"]:
            reconciler_scale_bench(work, None)
            return
        if sys.argv[1:] == ["fleet"]:
            start_sandbox(work, "sandbox", "full")
            seed(env, FLEET_NS, 3, MACHINES, HOSTS)
            server_idle(sandbox)
            fleet_verbs(env, kubectl, capi)
            return
        if sys.argv[1:] == ["doctor"]:
            start_sandbox(work, "sandbox", "full")
            seed(env, FLEET_NS, 3, MACHINES, HOSTS)
            # The reconciler makes the KamajiControlPlanes' TenantControlPlanes, as in the full run.
            reconciler_bench(env, sandbox, work)
            server_idle(sandbox)
            doctor_bench(env, kubectl, capi)
            return
        if sys.argv[1:] == ["init"]:
            init_bench(work, clusterctl, kubectl, capi)
            return
        if sys.argv[1:] == ["backup"]:
            backup_bench(work, kubectl)
            return
        if sys.argv[1:] == ["describe"]:
            start_sandbox(work, "sandbox", "full")
            for n in DESCRIBE_SIZES:
                seed(env, f"bench-d{n}", 1, n, n)
                byoh_templates(env, f"bench-d{n}")
            server_idle(sandbox)
            per_cluster(env, kubectl, capi, clusterctl, "alone", {})
            return
        startup_and_sizes(env, clusterctl)
        init_bench(work, clusterctl, kubectl, capi)
        backup_bench(work, kubectl)

        sbx, _, _ = start_sandbox(work, "sandbox", "full")

        # The described clusters first, each with a host per machine, in namespaces of their own.
        for n in DESCRIBE_SIZES:
            seed(env, f"bench-d{n}", 1, n, n)
            byoh_templates(env, f"bench-d{n}")
        server_idle(sandbox)
        alone = per_cluster(env, kubectl, capi, clusterctl, "alone", {})
        # Then the fleet elsewhere: every figure above again, with it.
        seed(env, FLEET_NS, 3, MACHINES, HOSTS)
        server_idle(sandbox)
        per_cluster(env, kubectl, capi, clusterctl, f"{HOSTS} hosts and {MACHINES} machines elsewhere", alone)
        fleet_verbs(env, kubectl, capi)
        reconciler_bench(env, sandbox, work)
        server_idle(sandbox)
        doctor_bench(env, kubectl, capi)
        upgrades_bench(env, sandbox, work)
        stop(sbx)
        # Each controller alone on a fresh v1beta1 sandbox of its own. It takes about 6 minutes even
        # at 100 KCPs (two sandboxes, CACPPK's 20 requests/s), so BENCH_QUICK skips it.
        if QUICK:
            rows.append(("kamaji-reconciler vs CACPPK v0.11.0", "-", "skipped", "-",
                         "BENCH_QUICK: run python3 bench/bench.py providers", "-", "-"))
            reconciler_scale_bench(work, None)
        else:
            reconciler_scale_bench(work, cacppk_bench(work))
    finally:
        cleanup()
        print_table()
        log(f"done in {time.monotonic() - started:.0f} s")
        shutil.rmtree(work, ignore_errors=True)


def startup_and_sizes(env, clusterctl):
    # Start-up time of --help (no sandbox needed).
    for plugin in ("capi", "kamaji"):
        compare(f"kubectl-{plugin} --help start-up (vs clusterctl --help)",
                [os.path.join(REL, f"kubectl-{plugin}"), "--help"], [clusterctl, "--help"], env, runs=21)
    # Release binaries are stripped (Cargo.toml's release profile); clusterctl as built here.
    mib = lambda p: round(os.path.getsize(p) / 1048576, 1)
    for binary in ("kubectl-capi", "kubectl-kamaji", "kamaji-reconciler"):
        add(f"{binary} stripped binary size (vs clusterctl)", mib(os.path.join(REL, binary)), mib(clusterctl),
            unit=" MiB")


def admin_requests(sandbox):
    """Requests the sandbox's admin user (kubectl, clusterctl and our plugins here) made so far."""
    with open(os.path.join(sandbox, "audit.log")) as f:
        return sum(1 for line in f if '"username":"admin"' in line)


def init_bench(work, clusterctl, kubectl, capi):
    """Day 0 on a bare sandbox: `kubectl capi init --from BUNDLE` against the same set installed
    the way a user does it today: cert-manager's manifest with kubectl, `clusterctl init` from a
    local repository for CAPI's core, kubeadm bootstrap and control plane, BYOH's components
    through `clusterctl generate yaml` (clusterctl v1.14 installs no provider of the v1beta1
    contract, which BYOH v0.5.0 is), Kamaji's install.yaml with kubectl, then `kubectl kamaji
    install`. Wall time and the admin's API requests, each on a fresh day-0 sandbox (`capi-testbed
    up --day0`: every controller's image in its registry, the site's mirror), one run each (a
    sandbox per run costs more than the runs). The sources are the testbed's (`build-bins.sh
    init-sources`). Both sides take the images from the mirror (init's --registry; clusterctl's
    images: override and the manifests' images rewritten for kubectl) and both wait for
    cert-manager's controllers before the components whose Certificates its webhook admits (init
    always does; by hand, kubectl wait, as cert-manager's install guide says); neither waits for
    the providers' controllers."""
    sources = subprocess.run(["bash", os.path.join(ROOT, "testbed", "build-bins.sh"), "init-sources"],
                             check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
    repo_src = subprocess.run(["bash", os.path.join(ROOT, "testbed", "build-bins.sh"), "clusterctl-repo"],
                              check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
    src = lambda f: os.path.join(sources, f)
    home = os.path.join(work, "init-home")
    os.makedirs(home, exist_ok=True)
    # Our bundle, as a connected machine writes it.
    cfg = os.path.join(work, "init-clusterctl.yaml")
    with open(cfg, "w") as f:
        f.write(f"cert-manager:\n  url: file://{src('cert-manager.yaml')}\nproviders:\n"
                f"- {{name: cluster-api, type: CoreProvider, url: 'file://{src('cluster-api.yaml')}'}}\n"
                f"- {{name: kubeadm, type: BootstrapProvider, url: 'file://{src('bootstrap-kubeadm.yaml')}'}}\n"
                f"- {{name: kubeadm, type: ControlPlaneProvider, url: 'file://{src('control-plane-kubeadm.yaml')}'}}\n"
                f"- {{name: byoh, type: InfrastructureProvider, url: 'file://{src('infrastructure-byoh.yaml')}'}}\n"
                f"- {{name: kamaji, type: Other, url: 'file://{src('kamaji.yaml')}'}}\n")
    bundle = os.path.join(work, "init-bundle")
    subprocess.run([capi, "init", "bundle", bundle, "--config", cfg], check=True, stdout=subprocess.DEVNULL)
    # clusterctl's local repository ({provider-label}/{version}/{file}) for the same assets.
    repo = os.path.join(work, "init-repo")
    capi_version = sorted(os.listdir(os.path.join(repo_src, "cluster-api")))[0]
    meta = os.path.join(repo_src, "cluster-api", capi_version, "metadata.yaml")
    for label, asset, name in (("cluster-api", "cluster-api.yaml", "core-components.yaml"),
                               ("bootstrap-kubeadm", "bootstrap-kubeadm.yaml", "bootstrap-components.yaml"),
                               ("control-plane-kubeadm", "control-plane-kubeadm.yaml", "control-plane-components.yaml")):
        d = os.path.join(repo, label, capi_version)
        os.makedirs(d, exist_ok=True)
        shutil.copy(src(asset), os.path.join(d, name))
        shutil.copy(meta, os.path.join(d, "metadata.yaml"))
    ref_cfg = os.path.join(work, "init-clusterctl-ref.yaml")

    def write_ref_cfg(mirror):
        """clusterctl's config for the reference: the local repository, images from `mirror`."""
        with open(ref_cfg, "w") as f:
            f.write("cert-manager:\n  externallyProvisioned: \"true\"\nimages:\n  all:\n    repository: " + mirror + "\n"
                    "providers:\n" + "".join(
                f"- {{name: {n}, type: {t}, url: 'file://{os.path.join(repo, label, capi_version, name)}'}}\n"
                for n, t, label, name in (("cluster-api", "CoreProvider", "cluster-api", "core-components.yaml"),
                                          ("kubeadm", "BootstrapProvider", "bootstrap-kubeadm", "bootstrap-components.yaml"),
                                          ("kubeadm", "ControlPlaneProvider", "control-plane-kubeadm",
                                           "control-plane-components.yaml"))))
    # Kamaji's install.yaml as kubectl can apply it here: without its ServiceMonitor (no
    # Prometheus operator) and its DataStore (its etcd is another chart), as init leaves them.
    with open(src("kamaji.yaml")) as f:
        docs = [d for d in f.read().split("\n---\n")
                if "kind: ServiceMonitor" not in d and "kind: DataStore\n" not in d]
    kamaji_yaml = os.path.join(work, "init-kamaji.yaml")
    with open(kamaji_yaml, "w") as f:
        f.write("\n---\n".join(docs))
    kamaji_plugin = os.path.join(REL, "kubectl-kamaji")
    q = shlex.quote
    # The manifests kubectl applies, their images rewritten to the mirror ($MIRROR, the
    # sandbox's registry; clusterctl reads it from its config's images: override).
    # (cert-manager's Helm-rendered manifest quotes its images.)
    mirror = lambda path: f"sed -E 's#image: \"?([^\" ]+/)?([^/\" ]+)\"?$#image: '\"$MIRROR\"'/\\2#' {q(path)}"
    reference = " && ".join([
        f"{mirror(src('cert-manager.yaml'))} | {q(kubectl)} apply --server-side -f -",
        f"{q(kubectl)} -n cert-manager wait --for=condition=Available deployment --all --timeout=300s",
        f"{q(clusterctl)} init --config {q(ref_cfg)} --core cluster-api --bootstrap kubeadm --control-plane kubeadm",
        f"{q(clusterctl)} generate yaml --config {q(ref_cfg)} --from {q(src('infrastructure-byoh.yaml'))}"
        f" | {q(kubectl)} apply --server-side -f -",
        f"{mirror(kamaji_yaml)} | {q(kubectl)} apply --server-side -f -",
        f"{q(kamaji_plugin)} install",
    ])
    # Each run on a fresh bare sandbox (a second run on the same one would measure a re-run),
    # the two sides taking turns; medians of INIT_RUNS.
    samples = {"ours": [], "ref": []}
    for i in range(INIT_RUNS):
        for who in ("ours", "ref"):
            sbx, sandbox, env = start_sandbox(work, f"init-{who}-{i}", "bare", day0=True)
            with open(os.path.join(sandbox, "registry")) as f:
                env["MIRROR"] = f.read().strip()
            write_ref_cfg(env["MIRROR"])
            cmd = ([capi, "init", "--from", bundle, "--registry", env["MIRROR"]] if who == "ours"
                   else ["bash", "-c", reference])
            env["HOME"] = home
            env["CLUSTERCTL_DISABLE_VERSIONCHECK"] = "true"
            before = admin_requests(sandbox)
            try:
                samples[who].append(run_once(cmd, env) + (admin_requests(sandbox) - before,))
            except Failed as e:
                log(str(e))
            stop(sbx)
    if len(samples["ours"]) < INIT_RUNS or len(samples["ref"]) < INIT_RUNS:
        rows.append(("capi init on a bare cluster (vs clusterctl init + kubectl apply)", "failed", "-", "-", "-", "-", "-"))
        return
    med = lambda who, i: statistics.median(x[i] for x in samples[who])
    add(f"capi init of the whole set on a bare cluster (vs clusterctl init + kubectl apply, median of {INIT_RUNS})",
        med("ours", 0), med("ref", 0), med("ours", 1), med("ref", 1))
    oreq, rreq = med("ours", 2), med("ref", 2)
    rows.append(("capi init: API requests (vs the same by hand)", f"{oreq:.0f}", f"{rreq:.0f}",
                 f"{oreq / rreq:.2f}x" if rreq else "-", "-", "-", "-"))


def backup_bench(work, kubectl):
    """`kubectl kamaji backup` and `restore` of one live tenant (a TenantControlPlane of the real
    Kamaji on a `capi-testbed up --real` sandbox) holding BACKUP_OBJECTS ConfigMaps, against
    `etcdctl snapshot save` of its whole DataStore: etcd's own backup, which cannot take one
    tenant (clastix/kamaji#278). Sizes: the backup file against the snapshot."""
    import socket
    sbx, sandbox, env = start_sandbox(work, "backup", "full", real=True)
    kamaji = os.path.join(REL, "kubectl-kamaji")
    etcdctl = os.path.join(subprocess.run(
        ["bash", os.path.join(ROOT, "testbed", "build-bins.sh"), "etcdctl"],
        check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1], "etcdctl")
    ns, name = "bench-backup", "bk"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    subprocess.run([kubectl, "create", "namespace", ns], env=env, check=True, capture_output=True)
    tcp = {"apiVersion": "kamaji.clastix.io/v1alpha1", "kind": "TenantControlPlane",
           "metadata": {"name": name, "namespace": ns},
           "spec": {"dataStore": "default",
                    "controlPlane": {"deployment": {"replicas": 1}, "service": {"serviceType": "ClusterIP"}},
                    "kubernetes": {"version": "v1.35.4", "kubelet": {"cgroupfs": "systemd"}},
                    "networkProfile": {"address": "127.0.0.1", "port": port}}}
    subprocess.run([kubectl, "apply", "-f", "-"], input=json.dumps(tcp), text=True, env=env,
                   check=True, capture_output=True)
    deadline = time.monotonic() + 300
    while True:
        phase = subprocess.run([kubectl, "get", "tcp", name, "-n", ns, "-o",
                                "jsonpath={.status.kubernetesResources.version.status}"],
                               env=env, capture_output=True, text=True).stdout
        if phase == "Ready":
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"the tenant did not become Ready (last: {phase!r})")
        time.sleep(1)
    tkc = os.path.join(work, "tenant.kubeconfig")
    with open(tkc, "w") as f:
        subprocess.run([kamaji, "kubeconfig", "get", name, "-n", ns], env=env, stdout=f, check=True)
    # The objects, 500 a file, four kubectl creates at a time; the admin kubeconfig's RBAC
    # binding lands with Kamaji's kubeadm phases, shortly after Ready: the first file retries.
    log(f"backup: seeding {BACKUP_OBJECTS} ConfigMaps into the tenant")
    files = []
    for start in range(0, BACKUP_OBJECTS, 500):
        items = [{"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": {"name": f"cm-{i}", "namespace": "default"},
                  "data": {"k": "v" * 100}} for i in range(start, min(start + 500, BACKUP_OBJECTS))]
        path = os.path.join(work, f"cms-{start}.json")
        with open(path, "w") as f:
            json.dump({"apiVersion": "v1", "kind": "List", "items": items}, f)
        files.append(path)
    first_deadline = time.monotonic() + 120
    while subprocess.run([kubectl, "--kubeconfig", tkc, "create", "-f", files[0]],
                         capture_output=True).returncode != 0:
        if time.monotonic() > first_deadline:
            raise RuntimeError("the tenant refused the first ConfigMaps for 120 s")
        time.sleep(2)
    parallel(lambda p: subprocess.run([kubectl, "--kubeconfig", tkc, "create", "-f", p],
                                      check=True, capture_output=True), files[1:], workers=4)
    ds = json.loads(subprocess.run([kubectl, "get", "datastore", "default", "-o", "json"], env=env,
                                   check=True, capture_output=True, text=True).stdout)
    pki = os.path.join(sandbox, "datastore-pki")
    backup = os.path.join(work, "bk.kamaji-backup")
    snapshot = os.path.join(work, "datastore.db")
    label = f"a tenant with {BACKUP_OBJECTS // 1000}k objects"
    compare(f"kamaji backup of {label} (vs etcdctl snapshot save of its whole DataStore)",
            [kamaji, "backup", name, "-n", ns, "-o", backup],
            [etcdctl, "snapshot", "save", snapshot, "--endpoints", ds["spec"]["endpoints"][0],
             "--cacert", os.path.join(pki, "ca.crt"), "--cert", os.path.join(pki, "client.crt"),
             "--key", os.path.join(pki, "client.key")], env)
    if os.path.exists(backup) and os.path.exists(snapshot):
        add(f"backup file of {label} (vs the DataStore's snapshot)",
            os.path.getsize(backup) // 1024, os.path.getsize(snapshot) // 1024, unit=" KiB")
    # Restore: the tenant deleted with its keys, then brought back and answering (Kamaji's
    # provisioning included). etcd has no per-tenant restore to set beside it.
    subprocess.run([kamaji, "delete", name, "-n", ns, "--yes", "--wait", "--timeout", "300s"],
                   env=env, check=True, capture_output=True)
    try:
        wall, rss = run_once([kamaji, "restore", backup, "-n", ns, "--timeout", "300s"], env)
        add(f"kamaji restore of {label}, until it answers", wall, None, rss)
    except Failed as e:
        log(str(e))
        rows.append((f"kamaji restore of {label}", "failed", "-", "-", "-", "-", "-"))
    stop(sbx)


def per_cluster(env, kubectl, capi, clusterctl, where, alone):
    """describe against clusterctl and against the raw LISTs it needs, and the per-cluster plans;
    with `alone` (this function's result without the fleet), each against its empty-fleet
    cost."""
    out = {}
    for n in DESCRIBE_SIZES:
        ns = f"bench-d{n}"
        name = f"kubectl-capi describe, {n} machines, {where}"
        ours, ref = compare(f"{name} (vs clusterctl describe cluster)",
                            [capi, "describe", "cluster-0", "-n", ns],
                            [clusterctl, "describe", "cluster", "cluster-0", "-n", ns],
                            env, target=0.5, rss_target=0.5)
        out[("describe", n)] = ours
        # The floor: the raw LIST describe cannot do without, the cluster's Machines by label,
        # as kubectl get --raw. (It reads a Machine's ByoMachine and KubeadmConfig only when the
        # tree shows that Machine, as clusterctl does; grouped, these clusters show none.)
        sel = "labelSelector=cluster.x-k8s.io%2Fcluster-name%3Dcluster-0"
        floor = [try_measure(f"{name} floor", raw(kubectl, p), env) for p in (
            f"/apis/cluster.x-k8s.io/v1beta2/namespaces/{ns}/machines?{sel}",)]
        if ours and all(floor):
            add(f"{name} (vs the raw LIST of its Machines, the floor)", ours[0], sum(f[0] for f in floor),
                ours[1], max(f[1] for f in floor), target=1.5)
        if alone.get(("describe", n)) and ours:
            a = alone[("describe", n)]
            add(f"{name} (vs the same alone)", ours[0], a[0], ours[1], a[1], target=1.1)
    # The plans of one cluster: they read the cluster and, on BYOH, the free hosts.
    ns = f"bench-d{DESCRIBE_SIZES[0]}"
    for verb, cmd in (("upgrade --plan", [capi, "upgrade", "cluster-0", "--to", "v1.34.0", "--plan", "-n", ns]),
                      ("scale --dry-run=client", [capi, "scale", "cluster-0", "--workers", "3", "--deployment", "cluster-0-md-0", "--force",
                                                  "--dry-run=client", "-n", ns]),
                      # A pure scale-down needs no spare host: it reads no host pool.
                      ("scale-down --dry-run=client", [capi, "scale", "cluster-0", "--workers", "1", "--deployment", "cluster-0-md-0",
                                                       "--dry-run=client", "-n", ns])):
        name = f"kubectl-capi {verb}, {DESCRIBE_SIZES[0]} machines, {where}"
        m = try_measure(name, cmd, env)
        out[verb] = m
        if m and alone.get(verb):
            a = alone[verb]
            add(f"{name} (vs the same alone)", m[0], a[0], m[1], a[1], target=1.1)
    return out


def fleet_verbs(env, kubectl, capi):
    """hosts and machines over the fleet's namespace, against the raw LIST and kubectl get."""
    ns = FLEET_NS
    hosts_path = f"/apis/infrastructure.cluster.x-k8s.io/v1beta1/namespaces/{ns}/byohosts"
    # Every format reads, besides the namespace's ByoHosts, the ByoMachines and Machines of all
    # namespaces (who claims a host, and whose Node stopped reporting), at once: its fair floor
    # is those three raw LISTs at once. The single-kind floor stays for the table.
    joined = [hosts_path, "/apis/infrastructure.cluster.x-k8s.io/v1beta1/byomachines",
              "/apis/cluster.x-k8s.io/v1beta2/machines"]
    formats = ("table", "wide", "json")
    names = [f"kubectl-capi hosts -o {fmt}, {HOSTS} hosts, {MACHINES} machines" for fmt in formats]
    # All taking turns run by run (measure_all): with 10,000 hosts the API server's own pauses
    # make one command's runs 3 s one minute and 6 s the next, so formats and floors measured
    # one after another compare different minutes of the server. Even taking turns, one run of
    # the same command took 1.5 s and the next 4.6 s, the floor's as much as ours (eight rounds
    # on a fleet-only sandbox, 2026-12-06): a median of 5 moved a format from 0.63x to 1.93x of
    # its floor between two runs of the bench, so these rows take the median of more runs.
    try:
        floor, floor_all, get, *ours = measure_all(
            [raw(kubectl, hosts_path), raw_all(kubectl, joined), [kubectl, "get", "byohosts", "-n", ns]]
            + [[capi, "hosts", "-n", ns, "-o", fmt] for fmt in formats], env, runs=2 * RUNS + 1)
    except Failed as e:
        log(str(e))
        rows.extend((name, "failed", "-", "-", "-", "-", "-") for name in names)
        ours = []
    for fmt, name, m in zip(formats, names, ours):
        add(f"{name} (vs the raw LISTs of the three kinds it reads at once, the floor)", m[0],
            floor_all[0], m[1], floor_all[1], target=1.3, rss_target="100 MiB")
        if fmt == "table":
            # No target since the table shows an Unreachable host (a Running host whose
            # Machine's Node stopped reporting), which needs the Machines: the table reads the
            # three kinds as the other formats do, and the three LISTs are its floor too.
            add(f"{name} (vs kubectl get --raw of the ByoHosts alone)", m[0], floor[0], m[1],
                floor[1], rss_target="100 MiB")
        add(f"{name} (vs kubectl get byohosts)", m[0], get[0], m[1], get[1])
    compare(f"kubectl-capi machines, {MACHINES} machines (vs kubectl get machines)",
            [capi, "machines", "-n", ns], [kubectl, "get", "machines.cluster.x-k8s.io", "-n", ns], env,
            target=0.5)


def doctor_bench(env, kubectl, capi):
    """doctor over everything seeded so far (the fleet, the described clusters, the reconciler's
    KamajiControlPlanes and their Clusters), against the raw LISTs it reads, one after another."""
    paths = [
        "/apis/cluster.x-k8s.io/v1beta2/clusters",
        "/apis/cluster.x-k8s.io/v1beta2/machines",
        "/apis/infrastructure.cluster.x-k8s.io/v1beta1/byohosts",
        "/apis/infrastructure.cluster.x-k8s.io/v1beta1/byomachines",
        "/apis/kamaji.clastix.io/v1alpha1/tenantcontrolplanes",
        "/apis/controlplane.cluster.x-k8s.io/v1alpha2/kamajicontrolplanes",
        "/api/v1/secrets?labelSelector=cluster.x-k8s.io%2Fcluster-name",
        "/api/v1/secrets?labelSelector=kamaji.clastix.io%2Fproject%3Dkamaji",
        "/apis/coordination.k8s.io/v1/leases?fieldSelector=metadata.name%3Dkamaji-reconciler.controlplane.cluster.x-k8s.io",
        "/apis/coordination.k8s.io/v1/leases?fieldSelector=metadata.name%3Dkamaji.controlplane.cluster.x-k8s.io",
        "/apis/infrastructure.cluster.x-k8s.io/v1beta1/byomachinetemplates",
        "/apis/infrastructure.cluster.x-k8s.io/v1beta1/k8sinstallerconfigtemplates",
        "/apis/infrastructure.cluster.x-k8s.io/v1beta1/bootstrapkubeconfigs",
        "/apis/ops.capi-kamaji.io/v1alpha1/clusterupgrades",
        "/apis/ops.capi-kamaji.io/v1alpha1/fleetupgrades",
        "/apis/kamaji.clastix.io/v1alpha1/datastores",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
    ]
    lists = "; ".join(f"{kubectl} get --raw '{p}' >/dev/null" for p in paths)
    clusters = len(json.loads(subprocess.run(raw(kubectl, paths[0]), env=env, check=True,
                                             capture_output=True, text=True).stdout)["items"])
    # doctor exits 1 when it finds an error (the fixture fleet has failed hosts): that is a result.
    ours = ["sh", "-c", f"{capi} doctor -o json >/dev/null; [ $? -le 1 ]"]
    compare(f"kubectl-capi doctor, {HOSTS} hosts, {MACHINES} machines, {clusters} clusters "
            "(vs the raw LISTs it reads, one after another)",
            ours, ["sh", "-c", lists], env, target=1.5, rss_target="150 MiB")


def seed_kcps(env):
    """Our CRDs, then KCPS Clusters, each owning a KamajiControlPlane (as CAPI would set it)."""
    crds = subprocess.run([os.path.join(REL, "kamaji-reconciler"), "--print-crds"], check=True,
                          capture_output=True, text=True).stdout
    subprocess.run([shutil.which("kubectl"), "apply", "--server-side", "--force-conflicts", "-f", "-"],
                   input=crds, text=True, check=True, env=env, stdout=subprocess.DEVNULL)
    subprocess.run([shutil.which("kubectl"), "create", "namespace", "bench-kcp"], env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    kubectl_apply_list(env, [{
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
        "metadata": {"name": f"k{i:04d}", "namespace": "bench-kcp"},
        "spec": {"controlPlaneRef": {"apiGroup": "controlplane.cluster.x-k8s.io",
                                     "kind": "KamajiControlPlane", "name": f"k{i:04d}"},
                 "clusterNetwork": {"pods": {"cidrBlocks": ["10.244.0.0/16"]},
                                    "services": {"cidrBlocks": ["10.96.0.0/16"]}}},
    } for i in range(KCPS)])
    uids = {c["metadata"]["name"]: c["metadata"]["uid"] for c in json.loads(subprocess.run(
        [shutil.which("kubectl"), "get", "clusters.cluster.x-k8s.io", "-n", "bench-kcp", "-o", "json"],
        env=env, check=True, capture_output=True, text=True).stdout)["items"]}
    kubectl_apply_list(env, [{
        "apiVersion": "controlplane.cluster.x-k8s.io/v1alpha2", "kind": "KamajiControlPlane",
        "metadata": {"name": f"k{i:04d}", "namespace": "bench-kcp", "ownerReferences": [{
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "name": f"k{i:04d}",
            "uid": uids[f"k{i:04d}"], "controller": True, "blockOwnerDeletion": True}]},
        "spec": {"version": "v1.34.2", "replicas": 2, "dataStoreName": "default",
                 "network": {"serviceType": "ClusterIP"}},
    } for i in range(KCPS)])


def reconciler_bench(env, sandbox, work):
    log(f"reconciler: {KCPS} KamajiControlPlanes")
    token_kc = os.path.join(work, "reconciler.kubeconfig")
    token_kubeconfig(env, sandbox, token_kc)
    seed_kcps(env)
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
    add(f"kamaji-reconciler peak RSS, {KCPS} KamajiControlPlanes (vs the 30 MiB target)", round(hwm / 1024, 1),
        30, hwm, None, target=1.0, unit=" MiB")
    rows.append((f"kamaji-reconciler API requests to settle {KCPS} KamajiControlPlanes", str(before), "-",
                 "-", "-", "-", "-"))
    rows.append((f"kamaji-reconciler API requests in {IDLE_SECONDS} idle s", str(idle), "0", "-",
                 "= 0: " + ("met" if idle == 0 else "MISSED"), "-", "-"))


def upgrades_bench(env, sandbox, work):
    """kamaji-reconciler carrying out BENCH_UPGRADES ClusterUpgrades, each two minors
    of a Cluster whose KubeadmControlPlane is PLAYED (status mirrors spec, as the
    KubeadmControlPlane provider reports a finished rollout; no machines), next to the
    KamajiControlPlanes of reconciler_bench: a fresh reconciler, all upgrades created at once, then
    its peak RSS and its requests in BENCH_IDLE_SECONDS idle seconds once every one succeeded."""
    import threading
    log(f"reconciler: {UPGRADES} ClusterUpgrades")
    for p in list(procs):
        if p.args and str(p.args[0]).endswith("kamaji-reconciler") and p.poll() is None:
            stop(p)
    kubectl = shutil.which("kubectl")
    subprocess.run([kubectl, "wait", "--for=condition=Established", "--timeout=60s",
                    "crd/clusterupgrades.ops.capi-kamaji.io"], env=env, check=True, stdout=subprocess.DEVNULL)
    ns = "bench-cu"
    subprocess.run([kubectl, "create", "namespace", ns], env=env, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    api = Api(env, work, "upgrades")
    names = [f"u{i:03d}" for i in range(UPGRADES)]
    kubectl_apply_list(env, [{
        "apiVersion": "controlplane.cluster.x-k8s.io/v1beta2", "kind": "KubeadmControlPlane",
        "metadata": {"name": n, "namespace": ns, "labels": {"cluster.x-k8s.io/cluster-name": n}},
        "spec": {"replicas": 1, "version": "v1.33.4",
                 "machineTemplate": {"spec": {"infrastructureRef": {
                     "apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "ByoMachineTemplate", "name": n}}},
                 "kubeadmConfigSpec": {"clusterConfiguration": {"etcd": {"local": {"dataDir": "/var/lib/etcd"}}}}},
    } for n in names])
    kubectl_apply_list(env, [{
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
        "metadata": {"name": n, "namespace": ns},
        "spec": {"controlPlaneRef": {"apiGroup": "controlplane.cluster.x-k8s.io",
                                     "kind": "KubeadmControlPlane", "name": n}},
    } for n in names])
    kcp_path = f"/apis/controlplane.cluster.x-k8s.io/v1beta2/namespaces/{ns}/kubeadmcontrolplanes"
    stop_play = threading.Event()

    def play():
        # PLAYED KubeadmControlPlane provider: a rollout finishes as soon as it is asked for.
        while not stop_play.is_set():
            try:
                items = api.req("GET", kcp_path)["items"]
            except Failed:
                items = []
            todo = [k for k in items if k.get("status", {}).get("version") != k["spec"]["version"]]
            parallel(lambda k: api.merge_status(f"{kcp_path}/{k['metadata']['name']}", {
                "version": k["spec"]["version"], "replicas": 1, "readyReplicas": 1, "upToDateReplicas": 1,
                "availableReplicas": 1, "observedGeneration": k["metadata"]["generation"]}), todo)
            time.sleep(0.2)

    player = threading.Thread(target=play, daemon=True)
    player.start()
    token_kc = os.path.join(work, "reconciler.kubeconfig")
    rec = subprocess.Popen([os.path.join(REL, "kamaji-reconciler"), "--kubeconfig", token_kc,
                            "--metrics-bind-address", "0"],
                           stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "upgrades.log"), "w"))
    procs.append(rec)
    time.sleep(2)
    started = time.monotonic()
    kubectl_apply_list(env, [{
        "apiVersion": "ops.capi-kamaji.io/v1alpha1", "kind": "ClusterUpgrade",
        "metadata": {"name": n, "namespace": ns},
        "spec": {"clusterName": n, "version": "v1.35.2"},
    } for n in names])
    cu_path = f"/apis/ops.capi-kamaji.io/v1alpha1/namespaces/{ns}/clusterupgrades"
    deadline = time.monotonic() + 900
    done = 0
    while time.monotonic() < deadline and rec.poll() is None:
        items = api.req("GET", cu_path)["items"]
        done = sum(1 for c in items if c.get("status", {}).get("phase") == "Succeeded")
        if done == len(names):
            break
        time.sleep(1)
    took = time.monotonic() - started
    stop_play.set()
    player.join()
    if done != len(names):
        rows.append((f"kamaji-reconciler, {UPGRADES} ClusterUpgrades", "-", f"{done} done", "-",
                     "MISSED: not all succeeded (see upgrades.log)", "-", "-"))
        stop(rec)
        return
    wait_quiet(sandbox, limit=300)
    before = audit_count(sandbox)
    time.sleep(IDLE_SECONDS)
    idle = audit_count(sandbox) - before
    with open(f"/proc/{rec.pid}/status") as f:
        hwm = [int(l.split()[1]) for l in f if l.startswith("VmHWM:")][0]
    stop(rec)
    rows.append((f"kamaji-reconciler, {UPGRADES} two-minor ClusterUpgrades completed ({KCPS} KCPs too): peak RSS",
                 f"{hwm / 1024:.1f} MiB", "-", "-", "-", fmt_kib(hwm), "-"))
    rows.append((f"kamaji-reconciler, {UPGRADES} ClusterUpgrades: time to complete all", fmt_s(took), "-", "-",
                 "-", "-", "-"))
    rows.append((f"kamaji-reconciler, {UPGRADES} ClusterUpgrades done: requests in {IDLE_SECONDS} idle s",
                 str(idle), "0", "-", "= 0: " + ("met" if idle == 0 else "MISSED"), "-", "-"))


# ---- kamaji-reconciler against CACPPK v0.11.0 on a CAPI v1beta1 (1.10-shaped) management cluster ----

VSPHERE_CRD = {
    # PLAYED: the infrastructure provider's CRD, reduced to what both controllers read and write
    # (spec.controlPlaneEndpoint). VSphereCluster is a kind both know (CACPPK v0.11.0's
    # patchCluster, kcore::kamaji::infra): each checks its endpoint and sets it when empty.
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "vsphereclusters.infrastructure.cluster.x-k8s.io",
                 "labels": {"cluster.x-k8s.io/v1beta1": "v1beta1"}},
    "spec": {"group": "infrastructure.cluster.x-k8s.io", "scope": "Namespaced",
             "names": {"kind": "VSphereCluster", "listKind": "VSphereClusterList", "plural": "vsphereclusters",
                       "singular": "vspherecluster"},
             "versions": [{"name": "v1beta1", "served": True, "storage": True, "subresources": {"status": {}},
                           "schema": {"openAPIV3Schema": {"type": "object",
                                                          "x-kubernetes-preserve-unknown-fields": True}}}]},
}


def token_kubeconfig(env, sandbox, path):
    """A kubeconfig for the sandbox's user `reconciler` (a cluster admin of its own), so that the
    audit log singles out the controller's requests."""
    with open(env["KUBECONFIG"]) as f:
        admin = f.read()
    server = open(os.path.join(sandbox, "ready")).read().strip()
    ca = [l.split(":", 1)[1].strip() for l in admin.splitlines() if "certificate-authority-data" in l][0]
    with open(path, "w") as f:
        f.write(f"""apiVersion: v1
kind: Config
clusters: [{{name: s, cluster: {{server: "{server}", certificate-authority-data: {ca}}}}}]
users: [{{name: reconciler, user: {{token: testbed-reconciler-token}}}}]
contexts: [{{name: s, context: {{cluster: s, user: reconciler}}}}]
current-context: s
""")


def start_sandbox(work, name, profile, day0=False, real=False):
    """A sandbox of its own (audit log on); returns its directory and an env pointing at it. With
    `day0`, a bare one whose registry holds every controller's image (`capi-testbed up --day0`);
    with `real`, the real Kamaji and its DataStore (`--real`)."""
    sandbox = os.path.join(work, name)
    extra = ["--day0"] if day0 else ["--profile", profile]
    if real:
        extra.append("--real")
    sbx = subprocess.Popen([os.path.join(REL, "capi-testbed"), "up", "--dir", sandbox, "--audit"] + extra,
                           stdout=subprocess.DEVNULL,
                           stderr=open(os.path.join(work, f"{name}.log"), "w"))
    procs.append(sbx)
    while not os.path.exists(os.path.join(sandbox, "ready")):
        if sbx.poll() is not None:
            raise RuntimeError("sandbox failed; see " + os.path.join(work, f"{name}.log"))
        time.sleep(0.2)
    env = dict(os.environ)
    env["PATH"] = REL + os.pathsep + env["PATH"]
    env["KUBECONFIG"] = os.path.join(sandbox, "kubeconfig")
    return sbx, sandbox, env


def stop(p):
    if p.poll() is None:
        p.terminate()
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    if p in procs:
        procs.remove(p)


class Api:
    """The sandbox's API server through `kubectl proxy`, one keep-alive connection per thread, to
    play CAPI and Kamaji for many objects quickly (as admin, not as the measured controller)."""

    def __init__(self, env, work, name):
        import threading
        self.proc = subprocess.Popen([shutil.which("kubectl"), "proxy", "--port", "0"], env=env,
                                     stdout=subprocess.PIPE, stderr=open(os.path.join(work, f"{name}-proxy.log"), "w"),
                                     text=True)
        procs.append(self.proc)
        line = self.proc.stdout.readline()  # "Starting to serve on 127.0.0.1:PORT"
        self.port = int(line.strip().rsplit(":", 1)[1])
        self.local = threading.local()

    def conn(self):
        import http.client
        if not hasattr(self.local, "c"):
            self.local.c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        return self.local.c

    def req(self, method, path, body=None, ctype="application/json", accept=None):
        headers = {"Content-Type": ctype} if body is not None else {}
        if accept:
            headers["Accept"] = accept
        for attempt in range(3):
            c = self.conn()
            try:
                c.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
                r = c.getresponse()
                data = r.read()
            except (OSError, Exception) as e:  # a dropped keep-alive connection: reconnect once more
                c.close()
                del self.local.c
                if attempt == 2:
                    raise Failed(f"{method} {path}: {e}")
                continue
            if r.status >= 300:
                raise Failed(f"{method} {path}: {r.status} {data[:300]!r}")
            return json.loads(data) if data else None

    def count(self, path):
        """How many objects a collection holds, without reading them (one item and the rest counted)."""
        r = self.req("GET", path + "?limit=1")
        return len(r["items"]) + (r["metadata"].get("remainingItemCount") or 0)

    def uids(self, path):
        """name -> uid of a collection's objects, read as metadata only."""
        r = self.req("GET", path, accept="application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1")
        return {o["metadata"]["name"]: o["metadata"]["uid"] for o in r["items"]}

    def merge_status(self, path, status):
        return self.req("PATCH", path + "/status", {"status": status}, "application/merge-patch+json")

    def close(self):
        stop(self.proc)


def parallel(fn, items, workers=8):
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(workers) as ex:
        return list(ex.map(fn, items))


def audit_count(sandbox):
    n = 0
    with open(os.path.join(sandbox, "audit.log")) as f:
        for line in f:
            if '"username":"reconciler"' in line:
                n += 1
    return n


def audit_breakdown(sandbox, user="reconciler"):
    """The controller's requests by verb and resource (subresource), most first."""
    counts = {}
    with open(os.path.join(sandbox, "audit.log")) as f:
        for line in f:
            if f'"username":"{user}"' not in line:
                continue
            e = json.loads(line)
            ref = e.get("objectRef") or {}
            key = f'{e.get("verb")} {ref.get("resource", e.get("requestURI", "?"))}'
            if ref.get("subresource"):
                key += "/" + ref["subresource"]
            counts[key] = counts.get(key, 0) + 1
    return sorted(counts.items(), key=lambda kv: -kv[1])


def wait_quiet(sandbox, limit=1200, quiet=10):
    """Until the controller's requests stop for `quiet` seconds (CACPPK v0.11.0 reconciles one KCP
    at a time under client-go's default 20 requests/s, so 1,000 KCPs take minutes)."""
    deadline = time.monotonic() + limit
    last, since = -1, time.monotonic()
    while time.monotonic() < deadline:
        n = audit_count(sandbox)
        if n != last:
            last, since = n, time.monotonic()
        elif time.monotonic() - since > quiet:
            break
        time.sleep(1)
    return last


def provider_run(work, label, crds, start_controller, kcps, samples):
    """One controller alone on a fresh v1beta1 sandbox: `kcps` Clusters (played as CAPI 1.10 would
    leave them: infrastructure ready, endpoint set) each owning a KamajiControlPlane v1alpha1 and
    naming a VSphereCluster; the controller creates the TenantControlPlanes, Kamaji is played for
    all but `samples` of them, and then for those one at a time, each timed from its TCP turning
    Ready to its KCP's status.ready. Returns (peak RSS KiB, requests to settle, idle requests,
    latencies in seconds)."""
    import threading
    sbx, sandbox, env = start_sandbox(work, f"sandbox-{label}", "v1beta1")
    api = None
    try:
        kubectl = shutil.which("kubectl")
        subprocess.run([kubectl, "apply", "--server-side", "--force-conflicts", "-f", "-"], input=crds, text=True,
                       check=True, env=env, stdout=subprocess.DEVNULL)
        kubectl_apply_list(env, [VSPHERE_CRD])
        subprocess.run([kubectl, "wait", "--for=condition=Established", "--timeout=60s",
                        "crd/vsphereclusters.infrastructure.cluster.x-k8s.io",
                        "crd/kamajicontrolplanes.controlplane.cluster.x-k8s.io"], env=env, check=True,
                       stdout=subprocess.DEVNULL)
        ns = "bench-kcp"
        subprocess.run([kubectl, "create", "namespace", ns], env=env, check=True, stdout=subprocess.DEVNULL)
        api = Api(env, work, label)
        names = [f"k{i:04d}" for i in range(kcps)]
        ep = {n: (f"10.{1 + i // 250}.{i % 250}.1", 6443) for i, n in enumerate(names)}
        log(f"{label}: seeding {kcps} VSphereClusters, Clusters and KamajiControlPlanes")
        vs = f"/apis/infrastructure.cluster.x-k8s.io/v1beta1/namespaces/{ns}/vsphereclusters"
        parallel(lambda o: api.req("POST", vs, o), [{
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "VSphereCluster",
            "metadata": {"name": n, "namespace": ns}, "spec": {"server": "vcenter.example"},
        } for n in names])
        cl = f"/apis/cluster.x-k8s.io/v1beta1/namespaces/{ns}/clusters"
        parallel(lambda o: api.req("POST", cl, o), [{
            "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster",
            "metadata": {"name": n, "namespace": ns},
            "spec": {"controlPlaneRef": {"apiVersion": "controlplane.cluster.x-k8s.io/v1alpha1",
                                         "kind": "KamajiControlPlane", "name": n, "namespace": ns},
                     "infrastructureRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                                           "kind": "VSphereCluster", "name": n, "namespace": ns},
                     "controlPlaneEndpoint": {"host": ep[n][0], "port": ep[n][1]},
                     "clusterNetwork": {"pods": {"cidrBlocks": ["10.244.0.0/16"]},
                                        "services": {"cidrBlocks": ["10.96.0.0/16"]}}},
        } for n in names])
        parallel(lambda n: api.merge_status(f"{cl}/{n}", {"infrastructureReady": True, "phase": "Provisioned"}), names)
        uids = api.uids(cl)
        kcp_path = f"/apis/controlplane.cluster.x-k8s.io/v1alpha1/namespaces/{ns}/kamajicontrolplanes"
        parallel(lambda o: api.req("POST", kcp_path, o), [{
            "apiVersion": "controlplane.cluster.x-k8s.io/v1alpha1", "kind": "KamajiControlPlane",
            "metadata": {"name": n, "namespace": ns, "ownerReferences": [{
                "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster", "name": n, "uid": uids[n],
                "controller": True, "blockOwnerDeletion": True}]},
            "spec": {"version": "v1.32.4", "replicas": 2, "dataStoreName": "default",
                     "network": {"serviceType": "ClusterIP"}},
        } for n in names])

        kc = os.path.join(work, f"{label}.kubeconfig")
        token_kubeconfig(env, sandbox, kc)
        ctl = start_controller(kc, os.path.join(work, f"{label}.log"))
        procs.append(ctl)

        # The controller creates a TenantControlPlane per KCP.
        tcps_path = f"/apis/kamaji.clastix.io/v1alpha1/namespaces/{ns}/tenantcontrolplanes"
        deadline = time.monotonic() + 600
        while True:
            n = api.count(tcps_path)
            if n >= kcps:
                break
            if ctl.poll() is not None or time.monotonic() > deadline:
                raise Failed(f"{label}: {n} of {kcps} TenantControlPlanes created")
            time.sleep(1)
        tcps = api.uids(tcps_path)

        # The KCPs' status.ready, as it changes (one watch, read by a thread).
        ready_at = {}
        rv = api.req("GET", kcp_path + "?limit=1")["metadata"]["resourceVersion"]

        def watch():
            import http.client
            c = http.client.HTTPConnection("127.0.0.1", api.port, timeout=3600)
            c.request("GET", f"{kcp_path}?watch=1&allowWatchBookmarks=false&resourceVersion={rv}")
            r = c.getresponse()
            while True:
                line = r.readline()
                if not line:
                    return
                obj = json.loads(line).get("object", {})
                name = obj.get("metadata", {}).get("name")
                if name and (obj.get("status") or {}).get("ready") is True and name not in ready_at:
                    ready_at[name] = time.monotonic()

        threading.Thread(target=watch, daemon=True).start()

        def play(n):
            """PLAYED: Kamaji publishing a TCP's Secrets and turning it Ready (as kamaji_publish
            in plugins/reconciler/tests/common does); returns when the TCP is Ready."""
            owner = [{"apiVersion": "kamaji.clastix.io/v1alpha1", "kind": "TenantControlPlane", "name": n,
                      "uid": tcps[n], "controller": True}]
            host, port = ep[n]
            conf = (f"apiVersion: v1\nkind: Config\nclusters:\n- name: {n}\n  cluster:\n    server: https://{host}:{port}\n"
                    f"contexts:\n- name: admin\n  context: {{cluster: {n}, user: admin}}\ncurrent-context: admin\n"
                    f"users:\n- name: admin\n  user: {{token: x}}\n")
            for name, data in ((f"{n}-admin-kubeconfig", {"admin.conf": conf, "super-admin.conf": conf}),
                               (f"{n}-ca", {"ca.crt": "CERT", "ca.key": "KEY", "tls.crt": "CERT", "tls.key": "KEY"})):
                api.req("POST", f"/api/v1/namespaces/{ns}/secrets", {
                    "apiVersion": "v1", "kind": "Secret",
                    "metadata": {"name": name, "labels": {"kamaji.clastix.io/name": n}, "ownerReferences": owner},
                    "stringData": data})
            api.merge_status(f"{tcps_path}/{n}", {
                "controlPlaneEndpoint": f"{host}:{port}",
                "kubernetesResources": {
                    "version": {"version": "v1.32.4", "status": "Ready"},
                    "deployment": {"replicas": 2, "readyReplicas": 2, "availableReplicas": 2, "updatedReplicas": 2,
                                   "selector": f"kamaji.clastix.io/name={n}", "name": n, "namespace": ns}},
                "kubeconfig": {"admin": {"secretName": f"{n}-admin-kubeconfig"}},
                "certificates": {"ca": {"secretName": f"{n}-ca"}}})
            return time.monotonic()

        sampled = names[:samples]
        parallel(play, names[samples:])
        wait_quiet(sandbox)
        latencies = []
        for n in sampled:
            t = play(n)
            limit = time.monotonic() + 30
            while n not in ready_at and time.monotonic() < limit:
                time.sleep(0.005)
            if n in ready_at:
                latencies.append(max(0.0, ready_at[n] - t))
        missing = [n for n in names if n not in ready_at]
        if missing:
            log(f"{label}: {len(missing)} KamajiControlPlanes never reported ready (first: {missing[0]})")
        settle = wait_quiet(sandbox)
        log(f"{label} settled after {settle} requests; idle for {IDLE_SECONDS} s; by verb and resource: "
            + ", ".join(f"{k} {v}" for k, v in audit_breakdown(sandbox)))
        time.sleep(IDLE_SECONDS)
        idle = audit_count(sandbox) - settle
        if ctl.poll() is not None:
            raise Failed(f"{label} exited with {ctl.returncode}")
        with open(f"/proc/{ctl.pid}/status") as f:
            hwm = [int(l.split()[1]) for l in f if l.startswith("VmHWM:")][0]
        stop(ctl)
        return hwm, settle, idle, latencies, len(missing)
    finally:
        if api:
            api.close()
        stop(sbx)


def percentile(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))] if xs else None


def cacppk_bench(work):
    """kamaji-reconciler against CACPPK v0.11.0, each alone on a fresh v1beta1 sandbox with its own
    CRDs, on the same objects."""
    name = f"kamaji-reconciler vs CACPPK v0.11.0, {KCPS} KamajiControlPlanes (v1beta1)"
    try:
        cacppk_dir = subprocess.run(["bash", os.path.join(ROOT, "testbed", "build-bins.sh"), "cacppk"],
                                    check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
    except subprocess.CalledProcessError as e:
        log(f"building CACPPK failed: {e.stderr.strip()[-400:]}")
        rows.append((name, "-", "failed", "-", "testbed/build-bins.sh cacppk failed", "-", "-"))
        return
    cacppk_crds = "".join("---\n" + open(os.path.join(cacppk_dir, "crds", f)).read()
                          for f in sorted(os.listdir(os.path.join(cacppk_dir, "crds"))))
    our_crds = subprocess.run([os.path.join(REL, "kamaji-reconciler"), "--print-crds"], check=True,
                              capture_output=True, text=True).stdout
    samples = min(LATENCY_SAMPLES, KCPS)

    def ours(kc, logf):
        return subprocess.Popen([os.path.join(REL, "kamaji-reconciler"), "--kubeconfig", kc,
                                 "--metrics-bind-address", "0"], stdout=subprocess.DEVNULL, stderr=open(logf, "w"))

    def theirs(kc, logf):
        # CACPPK parses its own flag set (no --kubeconfig): controller-runtime reads KUBECONFIG.
        e = dict(os.environ, KUBECONFIG=kc)
        return subprocess.Popen([os.path.join(cacppk_dir, "cacppk-manager"), "--metrics-bind-address", "0",
                                 "--health-probe-bind-address", "0"], env=e, stdout=subprocess.DEVNULL,
                                stderr=open(logf, "w"))

    results = {}
    for label, crds, start in (("kamaji-reconciler", our_crds, ours), ("cacppk", cacppk_crds, theirs)):
        log(f"{label}: {KCPS} KamajiControlPlanes on a v1beta1 sandbox")
        try:
            results[label] = provider_run(work, label, crds, start, KCPS, samples)
        except (Failed, subprocess.CalledProcessError, RuntimeError) as e:
            log(f"{label}: {e}")
            results[label] = None
    o, t = results.get("kamaji-reconciler"), results.get("cacppk")
    if not o or not t:
        rows.append((name, "failed" if not o else "-", "failed" if not t else "-", "-", "-", "-", "-"))
        return o
    (o_rss, o_settle, o_idle, o_lat, o_miss), (t_rss, t_settle, t_idle, t_lat, t_miss) = o, t
    add(f"{name}: peak RSS", round(o_rss / 1024, 1), round(t_rss / 1024, 1), o_rss, t_rss, target=0.333,
        rss_target="30 MiB", unit=" MiB")
    add(f"{name}: API requests to settle", o_settle, t_settle, target=0.5, unit="")
    rows.append((f"{name}: API requests in {IDLE_SECONDS} idle s", str(o_idle), str(t_idle), "-",
                 "= 0: " + ("met" if o_idle == 0 else "MISSED"), "-", "-"))
    for p, target in ((50, 0.2), (99, None)):
        a, b = percentile(o_lat, p), percentile(t_lat, p)
        if a is None or b is None:
            rows.append((f"{name}: ready latency p{p}", "-", "-", "-", "no KCP became ready", "-", "-"))
            continue
        goal = None
        add(f"{name}: ready latency p{p} over {len(o_lat)}/{len(t_lat)} (TCP Ready -> KCP ready)", a, b,
            target=goal)
        if target is not None:
            r = rows[-1]
            rows[-1] = r[:4] + (f"<= {target * 1000:.0f} ms and < CACPPK: "
                                + ("met" if a <= target and a < b else "MISSED"),) + r[5:]
    if o_miss or t_miss:
        rows.append((f"{name}: KCPs never ready", str(o_miss), str(t_miss), "-", "= 0", "-", "-"))
    return o


def reconciler_scale_bench(work, small):
    """kamaji-reconciler alone at KCPS_LARGE KamajiControlPlanes against itself at KCPS (`small`,
    from the CACPPK comparison when it ran), on fresh v1beta1 sandboxes as there: how its memory,
    requests and latency grow with the fleet."""
    our_crds = subprocess.run([os.path.join(REL, "kamaji-reconciler"), "--print-crds"], check=True,
                              capture_output=True, text=True).stdout

    # BENCH_RECONCILER_WRAP: a command to run it under, to profile it (e.g. "heaptrack -o /tmp/r").
    wrap = shlex.split(os.environ.get("BENCH_RECONCILER_WRAP", ""))

    def ours(kc, logf):
        return subprocess.Popen(wrap + [os.path.join(REL, "kamaji-reconciler"), "--kubeconfig", kc,
                                        "--metrics-bind-address", "0"], stdout=subprocess.DEVNULL,
                                stderr=open(logf, "w"))

    def run(n):
        log(f"kamaji-reconciler alone: {n} KamajiControlPlanes on a v1beta1 sandbox")
        t0 = time.monotonic()
        try:
            r = provider_run(work, f"reconciler-{n}", our_crds, ours, n, min(LATENCY_SAMPLES, n))
        except (Failed, subprocess.CalledProcessError, RuntimeError) as e:
            log(f"kamaji-reconciler at {n}: {e}")
            return None
        log(f"kamaji-reconciler at {n} KCPs: {time.monotonic() - t0:.0f} s with seeding, peak RSS "
            f"{r[0] / 1024:.1f} MiB, {r[1]} requests to settle")
        return r

    small = small or run(KCPS)
    if KCPS_LARGE <= 0:  # BENCH_KCPS_LARGE=0: only the KCPS run (when profiling it)
        return
    large = run(KCPS_LARGE)
    name = f"kamaji-reconciler, {KCPS_LARGE} KamajiControlPlanes (v1beta1), vs itself at {KCPS}"
    if not small or not large:
        rows.append((name, "failed" if not large else "-", "failed" if not small else "-", "-", "-", "-", "-"))
        return
    (s_rss, s_settle, _, s_lat, _), (l_rss, l_settle, l_idle, l_lat, l_miss) = small, large
    growth = KCPS_LARGE / KCPS
    add(f"{name}: peak RSS", round(l_rss / 1024, 1), round(s_rss / 1024, 1), l_rss, s_rss,
        target=round(0.8 * growth, 2), rss_target="100 MiB", unit=" MiB")
    add(f"{name}: API requests to settle", l_settle, s_settle, target=round(1.05 * growth, 2), unit="")
    rows.append((f"{name}: API requests in {IDLE_SECONDS} idle s", str(l_idle), "0", "-",
                 "= 0: " + ("met" if l_idle == 0 else "MISSED"), "-", "-"))
    for p in (50, 99):
        a, b = percentile(l_lat, p), percentile(s_lat, p)
        if a is None or b is None:
            rows.append((f"{name}: ready latency p{p}", "-", "-", "-", "no KCP became ready", "-", "-"))
            continue
        add(f"{name}: ready latency p{p} over {len(l_lat)}/{len(s_lat)} (TCP Ready -> KCP ready)", a, b)
        if p == 99:
            r = rows[-1]
            rows[-1] = r[:4] + ("<= 100 ms: " + ("met" if a <= 0.1 else "MISSED"),) + r[5:]
    if l_miss:
        rows.append((f"{name}: KCPs never ready", str(l_miss), "-", "-", "= 0", "-", "-"))


def kubectl_apply_list(env, items):
    body = json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
    subprocess.run([shutil.which("kubectl"), "apply", "--server-side", "--field-manager", "bench", "-f", "-"],
                   input=body, text=True, check=True, env=env, stdout=subprocess.DEVNULL)


if __name__ == "__main__":
    main()
