//! Checks of the fleet verbs (`hosts`, `hosts describe`, `machines`, `list`, `describe`,
//! `kubeconfig`) shared by the v1beta2 (full) and v1beta1 test binaries. Each check seeds its
//! own namespace with `testbed::fixtures::fleet` and runs the real binary.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Output;

use serde_json::Value;
use testbed::Testbed;
use testbed::fixtures::run::assert_contains;
use testbed::fixtures::{Fleet, FleetSpec, HostState};

pub use crate::objects::assert_fails;

pub const BIN: &str = env!("CARGO_BIN_EXE_kubectl-capi");

pub fn run_env(tb: &Testbed, args: &[&str], env: &[(&str, &str)]) -> Output {
    testbed::fixtures::run::command(BIN, &tb.kubeconfig, args)
        .env_remove("KUBECTL_CAPI_TEST_FAIL_BEFORE_RENAME")
        .envs(env.iter().copied())
        .output()
        .expect("run kubectl-capi")
}

pub fn run(tb: &Testbed, args: &[&str]) -> Output {
    run_env(tb, args, &[])
}

pub use testbed::fixtures::run::{stderr as err, stdout as out};

/// Runs and insists on success; returns stdout.
#[track_caller]
pub fn ok(tb: &Testbed, args: &[&str]) -> String {
    testbed::fixtures::run::assert_ok(&run(tb, args), &format!("kubectl-capi {}", args.join(" ")))
}

pub fn json(tb: &Testbed, args: &[&str]) -> Value {
    let mut a = args.to_vec();
    a.extend(["-o", "json"]);
    let s = ok(tb, &a);
    serde_json::from_str(&s).unwrap_or_else(|e| panic!("{args:?} -o json: {e}\n{s}"))
}

pub fn yaml(tb: &Testbed, args: &[&str]) -> Value {
    let mut a = args.to_vec();
    a.extend(["-o", "yaml"]);
    let s = ok(tb, &a);
    serde_saphyr::from_str(&s).unwrap_or_else(|e| panic!("{args:?} -o yaml: {e}\n{s}"))
}

/// One test per line `name("namespace prefix"): check, …;`: each seeds the fleet on `$tb` in
/// a namespace of its own, checks its CAPI API version is `$version` and runs the checks on it.
macro_rules! fleet_tests {
    ($tb:expr, $version:literal; $($name:ident($prefix:literal): $($check:ident),+;)+) => {$(
        #[tokio::test]
        async fn $name() {
            let tb: &'static testbed::Testbed = $tb;
            let fleet = $crate::fleet_common::seed(tb, $prefix).await;
            assert_eq!(fleet.capi_version, $version);
            $($crate::fleet_common::$check(tb, &fleet).await;)+
        }
    )+};
}
pub(crate) use fleet_tests;

/// Seeds the acceptance fleet (3 clusters, one Kamaji; 2 MachineDeployments; 20 Machines;
/// 30 ByoHosts in every state) into a fresh namespace.
pub async fn seed(tb: &Testbed, prefix: &str) -> Fleet {
    let (client, ns) = tb.namespace(prefix).await;
    let fleet = testbed::fixtures::fleet(&client, &ns, &FleetSpec::small())
        .await
        .unwrap_or_else(|e| panic!("seeding the fleet: {e}"));
    assert_eq!(fleet.hosts.len(), 30);
    assert_eq!(fleet.machines.len(), 20);
    fleet
}

/// Data rows of a table (header and summary removed), split on runs of spaces.
pub fn rows(table: &str) -> Vec<Vec<String>> {
    table
        .lines()
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect()
}

/// The `name` of every entry of a JSON list (`items`, a kubeconfig's `contexts`).
pub fn names(list: &Value) -> Vec<&str> {
    list.as_array()
        .unwrap_or_else(|| panic!("not a list: {list}"))
        .iter()
        .map(|i| i["name"].as_str().unwrap())
        .collect()
}

/// The entry named `name` of a JSON list.
#[track_caller]
pub fn item<'a>(list: &'a Value, name: &str) -> &'a Value {
    list.as_array()
        .and_then(|a| a.iter().find(|i| i["name"] == name))
        .unwrap_or_else(|| panic!("no {name:?} in {list}"))
}

pub fn header(table: &str) -> String {
    table.lines().next().unwrap_or_default().to_string()
}

/// The table's header has these columns (`|`-separated, as some names have spaces), in this
/// order.
pub fn assert_columns(table: &str, columns: &str) {
    let head = header(table);
    let mut at = 0;
    for col in columns.split('|').map(str::trim) {
        match head[at..].find(col) {
            Some(i) => at += i + col.len(),
            None => panic!("no column {col:?} (in this order: {columns}) in:\n{table}"),
        }
    }
}

/// The table `args` prints, its header checked with [`assert_columns`].
#[track_caller]
fn table(tb: &Testbed, args: &[&str], columns: &str) -> String {
    let t = ok(tb, args);
    assert_columns(&t, columns);
    t
}

/// `verb name -n ns` fails with exit 1 saying `kind "name"` is not found.
#[track_caller]
fn assert_not_found(tb: &Testbed, verb: &[&str], name: &str, ns: &str, kind: &str) {
    let o = run(tb, &[verb, &[name, "-n", ns]].concat());
    assert_fails(&o, 1, &format!("{kind} \"{name}\" not found"));
}

fn state_counts(fleet: &Fleet) -> BTreeMap<&'static str, usize> {
    let mut m = BTreeMap::new();
    for h in &fleet.hosts {
        *m.entry(h.state.as_str()).or_default() += 1;
    }
    m
}

// ------------------------------------------------------------------------------------ hosts

pub async fn hosts_in_every_format(tb: &Testbed, fleet: &Fleet) {
    let ns = fleet.namespace.as_str();
    // Table.
    let t = ok(tb, &["hosts", "-n", ns]);
    assert!(
        header(&t).starts_with("NAME")
            && [
                "STATE", "CLUSTER", "MACHINE", "VERSION", "OS", "ARCH", "IP", "AGE"
            ]
            .iter()
            .all(|h| header(&t).contains(h)),
        "{t}"
    );
    let r = rows(&t);
    assert_eq!(r.len(), 30, "{t}");
    for h in &fleet.hosts {
        let row = r
            .iter()
            .find(|row| row[0] == h.name)
            .unwrap_or_else(|| panic!("{} missing:\n{t}", h.name));
        assert_eq!(row[1], h.state.as_str(), "{t}");
        match (&h.machine, h.state) {
            (Some(m), _) => {
                assert_eq!(row[2], h.cluster.clone().unwrap(), "{t}");
                assert_eq!(row[3], *m, "{t}");
                assert_eq!(row[4], "v1.33.1");
            }
            (None, HostState::Available) => {
                assert_eq!(&row[2..5], ["<none>", "<none>", "<none>"], "{t}")
            }
            (None, _) => assert!(row[3].starts_with("byomachine/"), "{t}"),
        }
        assert_eq!(row[5], "linux");
        assert!(row[7].starts_with("10.20."), "{t}");
    }
    let c = state_counts(fleet);
    let summary = format!(
        "30 hosts: {} available, {} reserved, {} provisioning, {} running, {} releasing, {} failed, {} paused",
        c["Available"],
        c["Reserved"],
        c["Provisioning"],
        c["Running"],
        c["Releasing"],
        c["Failed"],
        c["Paused"]
    );
    assert!(t.trim_end().ends_with(&summary), "{t}\nwanted: {summary}");
    assert_eq!(c.len(), 7, "every state is seeded");

    // Wide.
    let w = ok(tb, &["hosts", "-n", ns, "-o", "wide"]);
    for h in ["OS-IMAGE", "PROVIDER-ID", "REASON", "LABELS", "NAMESPACE"] {
        assert!(header(&w).contains(h), "{w}");
    }
    let running = fleet.hosts_in(HostState::Running)[0];
    let line = w.lines().find(|l| l.starts_with(&running.name)).unwrap();
    assert_contains(line, "Ubuntu 22.04.4 LTS");
    assert_contains(line, &format!("byoh://{}/", running.name));
    assert_contains(line, "site=rack-1");
    assert!(line.trim_end().ends_with(ns), "{line}");
    let failed = fleet.hosts_in(HostState::Failed)[0];
    let line = w.lines().find(|l| l.starts_with(&failed.name)).unwrap();
    assert_contains(line, "K8sComponentsInstallationFailed");

    // JSON and YAML carry the same rows and the summary.
    for v in [
        json(tb, &["hosts", "-n", ns]),
        yaml(tb, &["hosts", "-n", ns]),
    ] {
        assert_eq!(v["summary"]["total"], 30);
        assert_eq!(v["summary"]["available"], c["Available"]);
        assert_eq!(v["summary"]["failed"], c["Failed"]);
        assert_eq!(v["items"].as_array().unwrap().len(), 30);
        for h in &fleet.hosts {
            let i = item(&v["items"], &h.name);
            assert_eq!(i["state"], h.state.as_str());
            assert_eq!(i["namespace"], ns);
            if let Some(m) = &h.machine {
                assert_eq!(i["machine"], m.as_str());
                assert_eq!(i["cluster"], h.cluster.clone().unwrap().as_str());
            }
            assert_eq!(i["os"], "linux");
        }
    }

    // Names.
    let n = ok(tb, &["hosts", "-n", ns, "-o", "name", "--available"]);
    let want: Vec<String> = fleet
        .hosts_in(HostState::Available)
        .iter()
        .map(|h| format!("byohost.infrastructure.cluster.x-k8s.io/{}", h.name))
        .collect();
    assert_eq!(n.lines().collect::<Vec<_>>(), want);

    // --no-headers: rows only, no summary.
    let nh = ok(tb, &["hosts", "-n", ns, "--no-headers"]);
    assert_eq!(nh.lines().count(), 30, "{nh}");
    assert!(!nh.contains("NAME") && !nh.contains("hosts:"), "{nh}");
}

pub async fn hosts_filters(tb: &Testbed, fleet: &Fleet) {
    let ns = fleet.namespace.as_str();
    let names = |args: &[&str]| -> Vec<String> {
        let v = json(tb, &[&["hosts", "-n", ns], args].concat());
        names(&v["items"]).into_iter().map(str::to_string).collect()
    };
    let want = |pred: &dyn Fn(&testbed::fixtures::FixtureHost) -> bool| -> Vec<String> {
        fleet
            .hosts
            .iter()
            .filter(|h| pred(h))
            .map(|h| h.name.clone())
            .collect()
    };
    assert_eq!(
        names(&["--available"]),
        want(&|h| h.state == HostState::Available)
    );
    assert_eq!(
        names(&["--state", "failed,Releasing"]),
        want(&|h| matches!(h.state, HostState::Failed | HostState::Releasing))
    );
    assert_eq!(
        names(&["--state", "paused", "--state", "reserved"]),
        want(&|h| matches!(h.state, HostState::Paused | HostState::Reserved))
    );
    assert_eq!(
        names(&["--cluster-name", "cluster-0"]),
        want(&|h| h.cluster.as_deref() == Some("cluster-0"))
    );
    assert_eq!(
        names(&["--cluster-name", "cluster-1", "--state", "running"]),
        want(&|h| h.cluster.as_deref() == Some("cluster-1") && h.state == HostState::Running)
    );
    assert_eq!(names(&["-l", "site=rack-1"]).len(), 30);
    assert_eq!(names(&["-l", "fork.example.com/rack-slot=3"]).len(), 1);
    assert_eq!(
        names(&["-l", "!cluster.x-k8s.io/cluster-name"]),
        want(&|h| h.state == HostState::Available)
    );
    // Bad input: one line, exit 2.
    let o = run(tb, &["hosts", "--state", "bogus"]);
    assert_fails(&o, 2, "unknown host state \"bogus\"");
    assert_fails(&run(tb, &["hosts", "-l", "a in (b"]), 2, "");
    // All namespaces by default: ours are among them.
    let all = json(tb, &["hosts"]);
    let items = all["items"].as_array().unwrap();
    for h in &fleet.hosts {
        assert!(
            items
                .iter()
                .any(|i| i["name"] == h.name.as_str() && i["namespace"] == ns),
            "{} missing from the all-namespaces view",
            h.name
        );
    }
    assert!(all["summary"]["total"].as_u64().unwrap() >= 30);
}

pub async fn hosts_describe(tb: &Testbed, fleet: &Fleet) {
    let ns = fleet.namespace.as_str();
    let failed = &fleet.hosts_in(HostState::Failed)[0].name;
    let d = ok(tb, &["hosts", "describe", failed]);
    assert_contains(&d, &format!("Name:         {failed}"));
    assert_contains(&d, "State:        Failed");
    assert!(
        d.contains(
            "Diagnosis:    failed: install script error: apt-get install kubelet=1.33.1-1.1 exited with status 100"
        ),
        "{d}"
    );
    assert_contains(&d, "K8sComponentsInstallationFailed");
    assert!(d.contains("InstallScriptExecutionFailed"), "events: {d}");
    assert!(d.contains("eno1        yes"), "network: {d}");

    let releasing = &fleet.hosts_in(HostState::Releasing)[0].name;
    let d = ok(tb, &["hosts", "describe", releasing, "-n", ns]);
    assert_contains(
        &d,
        "released but the agent has not cleaned up: is the host agent running?",
    );
    assert!(d.contains("(gone)"), "the ByoMachine is gone: {d}");
    assert_contains(&d, "ByoHostReleaseSucceeded");

    let running = fleet.hosts_in(HostState::Running)[0];
    let d = ok(tb, &["hosts", "describe", &running.name]);
    let m = running.machine.clone().unwrap();
    assert_contains(&d, &format!("Machine:      {m} (Running)"));
    assert_contains(&d, &format!("Node:         {}", running.name));
    assert!(
        d.contains(&format!(
            "running: node {} of cluster {}",
            running.name,
            running.cluster.clone().unwrap()
        )),
        "{d}"
    );

    let paused = &fleet.hosts_in(HostState::Paused)[0].name;
    let v = json(tb, &["hosts", "describe", paused]);
    assert_eq!(v["state"], "Paused");
    let summary = |v: &Value| v["diagnosis"]["summary"].as_str().unwrap().to_string();
    assert!(summary(&v).starts_with("paused:"), "{v}");
    assert!(v["chain"]["machine"].is_string());
    assert_eq!(v["chain"]["byoMachineExists"], true);
    assert_eq!(v["interfaces"].as_array().unwrap().len(), 2);

    let reserved = &fleet.hosts_in(HostState::Reserved)[0].name;
    let v = yaml(tb, &["hosts", "describe", reserved]);
    assert_eq!(v["state"], "Reserved");
    assert_contains(&summary(&v), "waiting for the machine's bootstrap data");
    let n = ok(tb, &["hosts", "describe", reserved, "-o", "name"]);
    assert_eq!(
        n.trim(),
        format!("byohost.infrastructure.cluster.x-k8s.io/{reserved}")
    );

    assert_not_found(tb, &["hosts", "describe"], "no-such-host", ns, "ByoHost");
}

// ------------------------------------------------------------------------------------ machines

pub async fn machines_in_every_format(tb: &Testbed, fleet: &Fleet) {
    let ns = fleet.namespace.as_str();
    let t = table(
        tb,
        &["machines", "-n", ns],
        "NAME | CLUSTER | ROLE | PHASE | READY | AVAILABLE | UP-TO-DATE | VERSION | NODE | HOST | AGE",
    );
    let r = rows(&t);
    assert_eq!(r.len(), 20, "{t}");
    for m in &fleet.machines {
        let row = r.iter().find(|row| row[0] == m.name).unwrap();
        assert_eq!(row[1], m.cluster);
        assert_eq!(
            row[2],
            if m.control_plane {
                "control-plane"
            } else {
                "worker"
            }
        );
        assert_eq!(row[3], m.phase, "{t}");
        let running = m.phase == "Running";
        assert_eq!(row[4], if running { "True" } else { "False" }, "{t}");
        assert_eq!(row[9], m.host.clone().unwrap_or("<none>".into()), "{t}");
        if running {
            assert_eq!(row[8], m.host.clone().unwrap(), "node: {t}");
        } else {
            assert_eq!(row[8], "<none>", "{t}");
        }
    }
    // Outdated machines show UP-TO-DATE False and their older version.
    assert!(
        r.iter().any(|row| row[6] == "False" && row[7] == "v1.32.4"),
        "{t}"
    );

    let c0 = ok(tb, &["machines", "cluster-0", "-n", ns]);
    assert_eq!(
        rows(&c0).len(),
        fleet.machines_of("cluster-0").len(),
        "{c0}"
    );
    assert!(rows(&c0).iter().all(|r| r[1] == "cluster-0"));

    let w = ok(tb, &["machines", "-n", ns, "-o", "wide"]);
    for col in ["NAMESPACE", "DEPLOYMENT", "PROVIDER-ID", "REASON"] {
        assert!(header(&w).contains(col), "{w}");
    }
    assert_contains(&w, "byoh://");
    assert_contains(&w, "cluster-1-md-0");

    for v in [
        json(tb, &["machines", "cluster-1", "-n", ns]),
        yaml(tb, &["machines", "cluster-1", "-n", ns]),
    ] {
        let items = v["items"].as_array().unwrap();
        assert_eq!(items.len(), fleet.machines_of("cluster-1").len());
        let cp = item(&v["items"], "cluster-1-cp-0");
        assert_eq!(cp["role"], "control-plane");
        assert_eq!(cp["ready"], "True");
        assert_eq!(cp["available"], "True");
        assert_eq!(cp["upToDate"], "True");
        let pending = items.iter().find(|i| i["phase"] == "Pending").unwrap();
        assert_eq!(pending["ready"], "False");
        assert!(
            pending["host"].is_string(),
            "host of a Pending machine comes from its ByoHost"
        );
        assert!(pending["node"].is_null());
    }
    let n = ok(tb, &["machines", "cluster-0", "-n", ns, "-o", "name"]);
    assert_eq!(n.lines().count(), fleet.machines_of("cluster-0").len());
    assert!(
        n.lines()
            .all(|l| l.starts_with("machine.cluster.x-k8s.io/cluster-0-"))
    );

    assert_not_found(tb, &["machines"], "no-such-cluster", ns, "Cluster");
}

// ------------------------------------------------------------------------------------ list

pub async fn list_in_every_format(tb: &Testbed, fleet: &Fleet) {
    let ns = fleet.namespace.as_str();
    let t = table(
        tb,
        &["list", "-n", ns],
        "NAME | NAMESPACE | PHASE | CONTROL PLANE | WORKERS | VERSION | ENDPOINT | INFRASTRUCTURE | AGE",
    );
    let lines: Vec<&str> = t.lines().skip(1).collect();
    assert_eq!(lines.len(), 3, "{t}");
    let k = lines.iter().find(|l| l.starts_with("cluster-0 ")).unwrap();
    assert_contains(k, "2/2 KamajiControlPlane");
    assert!(
        k.contains("10.10.0.100:6443") && k.contains("ByoCluster"),
        "{k}"
    );
    assert!(k.contains("Provisioned") && k.contains("v1.33.1"), "{k}");
    let c1 = lines.iter().find(|l| l.starts_with("cluster-1 ")).unwrap();
    assert_contains(c1, "1/1 KubeadmControlPlane");
    let workers = |c: &str| {
        let ms: Vec<_> = fleet
            .machines_of(c)
            .into_iter()
            .filter(|m| !m.control_plane)
            .collect();
        let ready = ms.iter().filter(|m| m.phase == "Running").count();
        format!("{ready}/{}", ms.len())
    };
    assert!(
        c1.contains(&workers("cluster-1")),
        "{c1} {}",
        workers("cluster-1")
    );
    assert_contains(k, &workers("cluster-0"));

    let w = ok(tb, &["list", "-n", ns, "-o", "wide"]);
    assert!(
        header(&w).contains("AVAILABLE") && header(&w).contains("MESSAGE"),
        "{w}"
    );
    assert_contains(&w, "WorkersAvailable");
    // NVIDIA BCM's KubeCluster template, set as BCM's example does (a label).
    let o = std::process::Command::new("kubectl")
        .args(["label", "cluster.cluster.x-k8s.io", "cluster-1", "-n", ns])
        .arg("infrav1.nvidia.x-k8s.io/capi-kube-template=my-capi-cluster-template")
        .arg("--kubeconfig")
        .arg(&tb.kubeconfig)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let w = ok(tb, &["list", "-n", ns, "-o", "wide"]);
    assert!(header(&w).contains("BCM TEMPLATE"), "{w}");
    assert!(
        w.lines()
            .any(|l| l.starts_with("cluster-1 ") && l.contains("my-capi-cluster-template")),
        "{w}"
    );
    let j = json(tb, &["list", "-n", ns]);
    assert_eq!(
        item(&j["items"], "cluster-1")["bcmTemplate"],
        "my-capi-cluster-template"
    );

    for v in [json(tb, &["list", "-n", ns]), yaml(tb, &["list", "-n", ns])] {
        assert_eq!(v["items"].as_array().unwrap().len(), 3);
        let k = item(&v["items"], "cluster-0");
        assert_eq!(k["controlPlaneKind"], "KamajiControlPlane");
        assert_eq!(k["controlPlane"]["ready"], 2);
        assert_eq!(k["controlPlane"]["desired"], 2);
        assert_eq!(k["endpoint"], "10.10.0.100:6443");
        assert_eq!(k["infrastructure"], "ByoCluster");
        assert_eq!(k["namespace"], ns);
    }
    let n = ok(tb, &["list", "-n", ns, "-o", "name"]);
    assert_eq!(
        n.lines().collect::<Vec<_>>(),
        [
            "cluster.cluster.x-k8s.io/cluster-0",
            "cluster.cluster.x-k8s.io/cluster-1",
            "cluster.cluster.x-k8s.io/cluster-2"
        ]
    );
    let prod = json(tb, &["list", "-n", ns, "-l", "env=prod"]);
    assert_eq!(names(&prod["items"]), ["cluster-0", "cluster-2"]);
    // All namespaces by default.
    let all = json(tb, &["list"]);
    assert!(
        all["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|i| i["namespace"] == ns)
            .count()
            == 3
    );
}

// ------------------------------------------------------------------------------------ kubeconfig

pub async fn kubeconfig_print_and_output(tb: &Testbed, fleet: &Fleet) {
    let ns = fleet.namespace.as_str();
    let s = ok(tb, &["kubeconfig", "cluster-1", "-n", ns]);
    assert_eq!(
        s,
        testbed::fixtures::workload_kubeconfig("cluster-1", "https://10.10.1.100:6443")
    );
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("sub").join("c1.kubeconfig");
    std::fs::create_dir_all(f.parent().unwrap()).unwrap();
    ok(
        tb,
        &[
            "kubeconfig",
            "cluster-1",
            "-n",
            ns,
            "--output",
            f.to_str().unwrap(),
        ],
    );
    assert_eq!(std::fs::read_to_string(&f).unwrap(), s);
    assert_eq!(mode(&f), 0o600);
}

pub fn mode(p: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

// ------------------------------------------------------------------------------------ describe

fn find_kind<'a>(n: &'a Value, kind: &str, out: &mut Vec<&'a Value>) {
    if n["kind"] == kind {
        out.push(n);
    }
    for c in n["children"].as_array().into_iter().flatten() {
        find_kind(c, kind, out);
    }
}

pub fn nodes_of<'a>(tree: &'a Value, kind: &str) -> Vec<&'a Value> {
    let mut out = Vec::new();
    find_kind(&tree["root"], kind, &mut out);
    out
}

pub async fn describe_in_every_format(tb: &Testbed, fleet: &Fleet) {
    let ns = fleet.namespace.as_str();
    let v1beta2 = fleet.capi_version == "v1beta2";
    // Kamaji cluster: no control-plane machines, the pods on the control-plane row.
    let t = ok(tb, &["describe", "cluster-0", "-n", ns]);
    let head = header(&t);
    if v1beta2 {
        assert_columns(
            &t,
            "NAME | REPLICAS | AVAILABLE | READY | UP TO DATE | STATUS | REASON | SINCE | MESSAGE",
        );
    } else {
        for col in ["NAME", "READY", "SEVERITY", "REASON", "SINCE", "MESSAGE"] {
            assert!(head.contains(col), "{t}");
        }
        assert!(!head.contains("UP TO DATE"), "v1beta1 layout: {t}");
    }
    let lines: Vec<&str> = t.lines().collect();
    assert!(
        lines[1].starts_with(&format!("Cluster {ns}/cluster-0")),
        "{t}"
    );
    assert_contains(&t, "ByoCluster");
    let cp = lines
        .iter()
        .find(|l| l.contains("KamajiControlPlane"))
        .unwrap_or_else(|| panic!("no control plane row: {t}"));
    assert_contains(cp, "(2/2 pods ready)");
    assert_contains(&t, "Workers");
    assert_contains(&t, "MachineDeployment");
    assert!(t.contains("├─") && t.contains("└─"), "{t}");
    // Grouped: fewer machine rows than machines.
    let machine_rows = lines
        .iter()
        .filter(|l| l.contains("Machine ") || l.contains("Machines..."))
        .count();
    let n0 = fleet.machines_of("cluster-0").len();
    assert!(machine_rows < n0, "grouping merges machines: {t}");

    // --grouping=false: one row per machine, BYOH machines with their host.
    let t = ok(tb, &["describe", "cluster-0", "-n", ns, "--grouping=false"]);
    for m in fleet.machines_of("cluster-0") {
        let l = t
            .lines()
            .find(|l| {
                l.contains(&format!("Machine {ns}/{}", m.name))
                    || l.contains(&format!("Machine {}", m.name))
            })
            .unwrap_or_else(|| panic!("{} missing: {t}", m.name));
        if let Some(h) = &m.host {
            assert_contains(l, &format!("@ {h}"));
        }
    }

    // --show-conditions all: condition rows.
    let c1 = ["describe", "cluster-1", "-n", ns];
    let with = |extra: &[&'static str]| [&c1[..], extra].concat();
    let t = ok(
        tb,
        &with(&["--show-conditions", "all", "--grouping=false", "--echo"]),
    );
    assert_contains(&t, "KubeadmControlPlane");
    assert_contains(&t, "cluster-1-cp-0");
    if v1beta2 {
        assert!(
            t.contains("InfrastructureReady") && t.contains("NodeHealthy"),
            "{t}"
        );
    } else {
        assert!(
            t.contains("BootstrapReady") || t.contains("InfrastructureReady"),
            "{t}"
        );
    }
    assert!(
        t.contains("ByoMachine"),
        "--echo shows infrastructure machines: {t}"
    );
    let o = run(tb, &with(&["--show-conditions", "all, Machine"]));
    assert_fails(&o, 2, "");

    // JSON and YAML: the same tree as data.
    for v in [
        json(tb, &with(&["--grouping=false"])),
        yaml(tb, &with(&["--grouping=false"])),
    ] {
        assert_eq!(v["cluster"], "cluster-1");
        assert_eq!(v["apiVersion"], fleet.capi_version.as_str());
        assert_eq!(v["layout"], if v1beta2 { "V1Beta2" } else { "V1Beta1" });
        assert_eq!(v["root"]["kind"], "Cluster");
        assert_eq!(nodes_of(&v, "KubeadmControlPlane").len(), 1);
        assert_eq!(nodes_of(&v, "MachineDeployment").len(), 1);
        let machines = nodes_of(&v, "Machine");
        assert_eq!(machines.len(), fleet.machines_of("cluster-1").len());
        let running = fleet
            .machines_of("cluster-1")
            .into_iter()
            .find(|m| m.phase == "Running" && !m.control_plane)
            .unwrap();
        let node = machines
            .iter()
            .find(|n| n["name"] == running.name.as_str())
            .unwrap();
        assert_eq!(node["host"], running.host.clone().unwrap().as_str());
    }
    let kamaji = json(tb, &["describe", "cluster-0", "-n", ns]);
    let kcp = nodes_of(&kamaji, "KamajiControlPlane");
    assert_eq!(kcp.len(), 1);
    assert_eq!(kcp[0]["controlPlanePods"]["desired"], 2);
    let n = ok(tb, &with(&["-o", "name", "--grouping=false"]));
    assert!(
        n.lines().any(|l| l == "cluster.cluster.x-k8s.io/cluster-1"),
        "{n}"
    );
    assert!(
        n.lines()
            .any(|l| l == "machine.cluster.x-k8s.io/cluster-1-cp-0"),
        "{n}"
    );
    assert!(
        n.lines()
            .any(|l| l == "kubeadmcontrolplane.controlplane.cluster.x-k8s.io/cluster-1"),
        "{n}"
    );

    assert_not_found(tb, &["describe"], "cluster-9", ns, "Cluster");
}
