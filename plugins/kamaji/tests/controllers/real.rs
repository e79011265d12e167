//! kubectl-kamaji end to end on the real controllers: the Kamaji v1.0.0 operator (tenant control
//! planes run real kube-apiserver, kube-controller-manager and kube-scheduler processes under the
//! testbed's SIMULATED kubelet), the BYOH v0.5.0 controller manager with its webhooks, the CAPI
//! v1.14 core and kubeadm bootstrap managers, and our reconciler. Only the BYOH host agents'
//! OS work is SIMULATED; their kubelets join the live tenant through the bootstrap token.

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;
use kube::Client;
use kube::api::ListParams;
use serde_json::{Value, json};
use testbed::Testbed;
use testbed::fixtures::reconciler::assert_ran;
use testbed::fixtures::run::{self, Background, plugin_in, words};

/// `kubectl capi delete NAME --yes --wait`, which must succeed.
fn capi_delete(tb: &Testbed, ns: &str, name: &str) {
    let args = ["delete", name, "--yes", "--wait", "--timeout", "180s"];
    let out = plugin_in(capi_binary().to_str().unwrap(), &tb.kubeconfig, ns, &args);
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
}

async fn hosts(client: &Client, ns: &str) -> Vec<Value> {
    list(&api(client, ns, &byoh_ar("ByoHost")), &Default::default()).await
}

/// `kubectl capi ARGS -n NS`.
fn capi(tb: &Testbed, ns: &str, args: &[&str]) -> std::process::Output {
    plugin_in(capi_binary().to_str().unwrap(), &tb.kubeconfig, ns, args)
}

/// `kubectl kamaji doctor -n NS -o json --only workers`: its exit and report.
fn doctor(tb: &Testbed, ns: &str) -> (std::process::Output, Value) {
    let o = kamaji(tb, ns, &words("doctor -o json --only workers"));
    let report = serde_json::from_str(&stdout(&o))
        .unwrap_or_else(|e| panic!("doctor -o json: {e}\n{}\n{}", stdout(&o), stderr(&o)));
    (o, report)
}

/// The hosts the report finds unreachable.
fn unreachable_hosts(report: &Value) -> Vec<String> {
    report["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| f["check"] == "HostUnreachable")
        .filter_map(|f| f["object"]["name"].as_str().map(str::to_string))
        .collect()
}

/// The serial number of the certificate the tenant API server presents right now.
fn served_serial(port: u16) -> String {
    let mut s_client = Command::new("openssl")
        .args(["s_client", "-connect", &format!("127.0.0.1:{port}")])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pem = s_client.stdout.take().unwrap();
    let out = Command::new("openssl")
        .args(["x509", "-noout", "-serial"])
        .stdin(pem)
        .output()
        .unwrap();
    let _ = s_client.kill();
    let _ = s_client.wait();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// One cluster through its life on the real controllers: BYOH attaches the hosts the selector
/// picks, the workers join the live tenant, the tenant answers with the requested version, a
/// join token exists there, a certificate rotation re-issues the serving certificate while the
/// tenant keeps answering, and `kubectl capi delete` releases the hosts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn byoh_cluster_on_the_real_controllers() {
    let (tb, client, ns, rec) = live_namespace("real-byoh").await;
    let role = format!("w-{ns}");
    let agents_a = host_agents(tb, &client, &ns, "a", 2, ("role", &role), false).await;
    let _agents_b = host_agents(tb, &client, &ns, "b", 1, ("role", "elsewhere"), false).await;
    let port = free_port();
    let selector = format!("role={role}");
    let out = create_byoh_tenant(tb, &ns, "c1", "2", &selector, &port.to_string());
    assert_ran(&out, "create", &rec);

    // The live tenant API server, with the requested version, lists the joined workers.
    let kc = tenant_kubeconfig(tb, &ns, "c1");
    let version: Value =
        serde_json::from_slice(&kubectl(&kc, &["get", "--raw", "/version"]).stdout).unwrap();
    assert_eq!(version["gitVersion"], "v1.35.4", "{version}");
    let nodes =
        String::from_utf8_lossy(&kubectl(&kc, &["get", "nodes", "-o", "name"]).stdout).to_string();
    let mut want: Vec<String> = (1..=2).map(|i| format!("node/{ns}-a{i:02}")).collect();
    want.sort();
    let mut got: Vec<String> = nodes.lines().map(str::to_string).collect();
    got.sort();
    assert_eq!(got, want, "the selector's hosts joined, and only they");

    // The real BYOH controller attached exactly the selected hosts.
    for h in hosts(&client, &ns).await {
        let name = h["metadata"]["name"].as_str().unwrap().to_string();
        let attached = h["status"]["machineRef"]["name"].is_string();
        assert_eq!(
            attached,
            name.starts_with(&format!("{ns}-a")),
            "{name}: {h}"
        );
        if attached {
            assert_eq!(
                h["metadata"]["labels"]["cluster.x-k8s.io/cluster-name"],
                "c1"
            );
        }
    }

    // kubectl capi describe draws what the real controllers wrote.
    assert_describe_matches_the_api(tb, &client, &ns, "c1").await;

    // A spare for the retire below, registered after the cluster took its two.
    let _spare = host_agents(tb, &client, &ns, "s", 1, ("role", &role), false).await;
    let spare = format!("{ns}-s01");

    // A host that loses power (fault injection: its SIMULATED agent and kubelet stop): the
    // tenant's node lifecycle controller marks its Node's Ready Unknown after its grace period,
    // Cluster API mirrors that on the Machine, and the doctor names the host while the steps
    // below run.
    let silent = format!("{ns}-a02");
    agents_a
        .iter()
        .find(|a| a.host == silent)
        .expect("the agent of the host to power off")
        .power(false);

    // token join prints a bootstrap token that exists in the tenant's kube-system.
    let join = ok(&kamaji(tb, &ns, &["token", "join", "c1"]));
    let token = join
        .split_whitespace()
        .skip_while(|w| *w != "--token")
        .nth(1)
        .unwrap_or_else(|| panic!("no --token in {join}"))
        .to_string();
    // Kamaji v1.0.0 leaves kubeadm's well-known placeholder token (abcdef.0123456789abcdef,
    // from kubeadm's defaults) in every tenant; handing it out would let anyone who read
    // kubeadm's docs join a node.
    assert_ne!(token, "abcdef.0123456789abcdef", "{join}");
    let id = token.split('.').next().unwrap();
    let secret = bootstrap_token_secret(&kc, id, "json");
    assert!(
        secret.status.success(),
        "{}",
        String::from_utf8_lossy(&secret.stderr)
    );

    // certificates rotate: Kamaji issues a new serving certificate; the tenant keeps answering.
    let before = served_serial(port);
    assert!(before.starts_with("serial="), "{before}");
    ok(&kamaji(
        tb,
        &ns,
        &words("certificates rotate c1 --certificates api-server"),
    ));
    let deadline = Instant::now() + Duration::from_secs(180);
    let mut failures = Vec::new();
    loop {
        let r = kubectl(&kc, &["get", "--raw", "/readyz"]);
        if !r.status.success() {
            failures.push(String::from_utf8_lossy(&r.stderr).to_string());
        }
        let now = served_serial(port);
        if now.starts_with("serial=") && now != before {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the serving certificate is still {before}"
        );
        tokio::time::sleep(Duration::from_millis(1000)).await;
    }
    assert!(
        failures.is_empty(),
        "the tenant stopped answering: {failures:?}"
    );

    let report = wait_until(
        "the doctor to find the powered-off host",
        Duration::from_secs(180),
        || async {
            let (o, report) = doctor(tb, &ns);
            let found = unreachable_hosts(&report);
            (found == [silent.clone()] && o.status.code() == Some(1))
                .then_some(report.clone())
                .ok_or(format!("exit {:?}: {report:#}", o.status.code()))
        },
    )
    .await;
    let f = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["check"] == "HostUnreachable")
        .unwrap();
    assert_eq!(
        (&f["severity"], &f["section"], &f["object"]["kind"]),
        (&json!("Error"), &json!("workers"), &json!("ByoHost")),
        "{f}"
    );
    let cause = f["cause"].as_str().unwrap();
    assert!(
        cause.contains("(cluster c1) stopped reporting")
            && cause.contains("Kubelet stopped posting node status"),
        "{cause}"
    );
    assert!(
        f["fix"]
            .as_str()
            .unwrap()
            .ends_with(&format!("kubectl capi hosts retire {silent} -n {ns}")),
        "{f}"
    );
    // kubectl capi hosts shows it Unreachable; retire refuses a host that still reports.
    let listed = capi(tb, &ns, &["hosts", "-o", "json"]);
    let listed: Value = serde_json::from_str(&stdout(&listed)).unwrap();
    let state_of = |h: &str| {
        listed["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == h)
            .map(|r| r["state"].clone())
    };
    assert_eq!(state_of(&silent), Some(json!("Unreachable")), "{listed:#}");
    // The table reads it from the silent Machines alone.
    let table = stdout(&capi(tb, &ns, &["hosts"]));
    let row = table
        .lines()
        .find(|l| l.starts_with(&silent))
        .unwrap_or_else(|| panic!("{table}"));
    assert!(row.contains("Unreachable"), "{table}");
    assert_eq!(state_of(&format!("{ns}-a01")), Some(json!("Running")));
    let refused = capi(tb, &ns, &["hosts", "retire", &format!("{ns}-a01"), "--yes"]);
    assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains(&format!("kubectl capi hosts drain {ns}-a01")),
        "{}",
        stderr(&refused)
    );
    // machines --watch, started before the retire, streams what the real controllers do.
    let machines_before = machine_hosts(&client, &ns, "c1").await;
    let mut watch = Background::plugin_in(
        capi_binary().to_str().unwrap(),
        &tb.kubeconfig,
        &ns,
        &["machines", "c1", "--watch", "-o", "json"],
    );
    // Its listing first: one line per Machine, on the host BYOH attached.
    let listed = wait_until(
        "machines --watch to list",
        Duration::from_secs(30),
        || async {
            let rows = watch_lines(&watch.stdout());
            (rows.len() >= machines_before.len())
                .then(|| rows.clone())
                .ok_or(watch.output())
        },
    )
    .await;
    let listed: BTreeMap<String, Option<String>> = listed
        .iter()
        .map(|r| (str_of(&r["name"]), r["host"].as_str().map(str::to_string)))
        .collect();
    assert_eq!(listed, machines_before, "{}", watch.output());
    let (gone, _) = machines_before
        .iter()
        .find(|(_, h)| h.as_deref() == Some(silent.as_str()))
        .unwrap_or_else(|| panic!("no Machine on {silent}: {machines_before:?}"));
    // retire: the Machine is replaced on the spare, the dead host released and cordoned, and
    // the real BYOH controller does not pick it again.
    let retired = capi(
        tb,
        &ns,
        &["hosts", "retire", &silent, "--yes", "--timeout", "5m"],
    );
    assert!(
        retired.status.success(),
        "{}\n{}\n{}",
        stdout(&retired),
        stderr(&retired),
        rec.log_tail()
    );
    assert!(stdout(&retired).contains("retired"), "{}", stdout(&retired));
    assert!(
        stdout(&retired).contains(&format!("machine.cluster.x-k8s.io/{gone} deleted")),
        "{}",
        stdout(&retired)
    );
    let all = hosts(&client, &ns).await;
    let host = |n: &str| all.iter().find(|h| h["metadata"]["name"] == n).unwrap();
    let dead = host(&silent);
    assert!(dead["status"]["machineRef"].is_null(), "{dead}");
    assert_eq!(
        dead["metadata"]["labels"]["cluster.x-k8s.io/cluster-name"], "",
        "cordoned: {dead}"
    );
    assert!(
        dead["metadata"]["annotations"]["capi-kamaji.io/cordoned"].is_string(),
        "{dead}"
    );
    let took = host(&spare);
    assert_eq!(
        took["metadata"]["labels"]["cluster.x-k8s.io/cluster-name"], "c1",
        "the replacement went to the spare: {took}"
    );
    let (_, report) = doctor(tb, &ns);
    assert!(unreachable_hosts(&report).is_empty(), "{report:#}");
    assert_watch_saw_the_retire(&client, &ns, &mut watch, &machines_before, gone, &spare).await;
    drop(watch);

    // kubectl capi delete releases the hosts (the real BYOH controller marks them for cleanup).
    capi_delete(tb, &ns, "c1");
    wait_until("the hosts released", Duration::from_secs(60), || async {
        let all = hosts(&client, &ns).await;
        // The retired host stays cordoned until someone resets it.
        let released = all
            .iter()
            .filter(|h| h["metadata"]["name"] != silent)
            .all(|h| {
                h["status"]["machineRef"].is_null()
                    && h["metadata"]["labels"]
                        .get("cluster.x-k8s.io/cluster-name")
                        .is_none()
            });
        released.then_some(()).ok_or(format!("{all:?}"))
    })
    .await;
}

/// Without --preinstalled-hosts, the installer path with the real agent: create renders the
/// installer pieces (the real BYOH webhooks admit them, the ByoMachineTemplate carries an
/// installerRef); the real BYOH controller derives a K8sInstallerConfig for the machine it
/// attaches and writes the installation secret for the host's OS; the real agent runs that
/// install script (its package and service commands SIMULATED). Then what BYOH v0.5.0 does on
/// Cluster API v1.14, which `create` warns of: the installation Secret has the machine's name,
/// as the bootstrap data Secret does, and replaces its data, so the agent runs an empty
/// bootstrap script, reports the node bootstrapped and no `kubeadm join` runs. Deleting the
/// cluster releases the host: the agent runs `kubeadm reset` and the uninstall script.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn byoh_installer_path_with_the_real_agent() {
    let (tb, client, ns, _rec) = live_namespace("real-installer").await;
    let role = format!("i-{ns}");
    let agents = host_agents(tb, &client, &ns, "h", 1, ("role", &role), true).await;
    let host = &agents[0];
    assert!(host.commands().is_empty(), "{:?}", host.commands());
    let port = free_port().to_string();
    let selector = format!("role={role}");
    let extra = ["--workers", "1", "--host-selector", &selector];
    let mut args = create_args("c2", "byoh", "v1.35.4", &extra);
    args.extend(tenant_flags(&port));
    let out = kamaji(tb, &ns, &args);
    assert!(
        stderr(&out).contains("never join; prefer --preinstalled-hosts"),
        "create warns of the installer path: {}",
        stderr(&out)
    );
    ok(&out);
    let tmpl = get(&client, &ns, &byoh_ar("ByoMachineTemplate"), "c2-md-0")
        .await
        .expect("ByoMachineTemplate c2-md-0");
    let iref = &tmpl["spec"]["template"]["spec"]["installerRef"];
    assert_eq!(iref["kind"], "K8sInstallerConfigTemplate", "{tmpl}");
    let name = iref["name"].as_str().unwrap();
    let ict = byoh_ar("K8sInstallerConfigTemplate");
    assert!(get(&client, &ns, &ict, name).await.is_some());
    // The real controller made a K8sInstallerConfig, and the agent ran the script it wrote:
    // the bundle pulled, the packages installed, containerd started; the host says installed
    // and bootstrapped.
    let h = wait_until(
        "the agent to install and bootstrap",
        Duration::from_secs(180),
        || async {
            let h = get(&client, &ns, &byoh_ar("ByoHost"), &host.host).await;
            let done = h.as_ref().is_some_and(|h| {
                condition(h, "K8sComponentsInstallationSucceeded") == "True"
                    && condition(h, "K8sNodeBootstrapSucceeded") == "True"
            });
            match h {
                Some(h) if done => Ok(h),
                h => Err(format!("{h:?}\n{}", host.log_tail())),
            }
        },
    )
    .await;
    let configs = list(
        &api(&client, &ns, &byoh_ar("K8sInstallerConfig")),
        &Default::default(),
    )
    .await;
    assert_eq!(configs.len(), 1, "{configs:?}");
    assert_eq!(
        h["status"]["hostinfo"]["osimage"], "Ubuntu 20.04.6 LTS",
        "{h}"
    );
    let ran = host.commands();
    let at = |prefix: &str| {
        ran.iter()
            .position(|c| c.starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix:?} in {ran:?}\n{}", host.log_tail()))
    };
    assert!(at("imgpkg pull -i ") < at("dpkg --install "), "{ran:?}");
    assert!(
        at("dpkg --install ") < at("systemctl start containerd"),
        "{ran:?}"
    );
    // The bootstrap data Secret is the installation Secret (one name, the machine's): no
    // `value`, so no kubeadm join ran.
    let secret = h["spec"]["bootstrapSecret"]["name"].as_str().unwrap();
    assert_eq!(secret, configs[0]["metadata"]["name"], "{h}");
    let data = kube::Api::<k8s_openapi::api::core::v1::Secret>::namespaced(client.clone(), &ns)
        .get(secret)
        .await
        .unwrap()
        .data
        .unwrap_or_default();
    assert!(
        !data.contains_key("value") && data.contains_key("install"),
        "{:?}",
        data.keys()
    );
    assert!(!ran.iter().any(|c| c.starts_with("kubeadm")), "{ran:?}");

    // Released on delete: kubeadm reset and the uninstall script ran on the host.
    capi_delete(tb, &ns, "c2");
    wait_until(
        "the host released, reset and uninstalled",
        Duration::from_secs(120),
        || async {
            let h = get(&client, &ns, &byoh_ar("ByoHost"), &host.host).await;
            let ran = host.commands();
            let reset = ran.iter().any(|c| c == "kubeadm reset --force");
            let uninstalled = ran.iter().any(|c| c == "systemctl stop containerd");
            let released = h.as_ref().is_some_and(|h| {
                h["status"]["machineRef"].is_null()
                    && condition(h, "K8sComponentsInstallationSucceeded") == "False"
            });
            (reset && uninstalled && released)
                .then_some(())
                .ok_or(format!("{ran:?}\n{h:?}\n{}", host.log_tail()))
        },
    )
    .await;
}

/// The status of condition `t` of an object, or "".
fn condition(o: &Value, t: &str) -> String {
    o["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == t))
        .and_then(|c| c["status"].as_str())
        .unwrap_or("")
        .to_string()
}

/// The text of a JSON string, or "".
fn str_of(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_string()
}

/// The objects of `list` owned by the `kind` named `owner`, by name.
fn owned<'a>(list: &'a [Value], kind: &str, owner: &Value) -> Vec<&'a Value> {
    let mut out: Vec<&Value> = list
        .iter()
        .filter(|o| {
            o["metadata"]["ownerReferences"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|r| r["kind"] == kind && r["name"] == owner["metadata"]["name"])
        })
        .collect();
    out.sort_by_key(|o| str_of(&o["metadata"]["name"]));
    out
}

/// The condition a describe row shows, as the object holds it: the first of `types` among its
/// current-style conditions (`status.v1beta2.conditions` on an object served at v1beta1, else
/// `status.conditions`), as `[type, status, reason]`.
fn row_condition(o: &Value, types: &[&str]) -> Value {
    let conditions = o["status"]["v1beta2"]["conditions"]
        .as_array()
        .or(o["status"]["conditions"].as_array());
    types
        .iter()
        .find_map(|t| conditions?.iter().find(|c| c["type"] == *t))
        .map_or(Value::Null, |c| {
            let reason = c["reason"].as_str().filter(|r| !r.is_empty());
            json!([c["type"], c["status"], reason])
        })
}

/// The condition a tree node of `describe -o json` shows, as [`row_condition`].
fn shown_condition(n: &Value) -> Value {
    let c = &n["status"];
    match c.is_null() {
        true => Value::Null,
        false => json!([c["type"], c["status"], c["reason"]]),
    }
}

/// A JSON object without its null members (the tree leaves out what it does not know).
fn without_nulls(v: Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(m.into_iter().filter(|(_, v)| !v.is_null()).collect()),
        v => v,
    }
}

/// The replica counters of a MachineDeployment or MachineSet, as the object holds them.
fn replicas(o: &Value) -> Value {
    let s = &o["status"];
    without_nulls(json!({
        "current": s["replicas"].as_i64().unwrap_or(0),
        "desired": o["spec"]["replicas"],
        "available": s["availableReplicas"],
        "ready": s["readyReplicas"],
        "upToDate": s["upToDateReplicas"],
    }))
}

/// What the real controllers wrote for one cluster, read straight from the API.
struct ApiObjects {
    cluster: Value,
    infra: Value,
    control_plane: Value,
    deployments: Vec<Value>,
    sets: Vec<Value>,
    machines: Vec<Value>,
    byo_machines: Vec<Value>,
    configs: Vec<Value>,
    hosts: Vec<Value>,
}

impl ApiObjects {
    async fn read(client: &Client, ns: &str, cluster: &str) -> ApiObjects {
        let lp = ListParams::default().labels(&format!("cluster.x-k8s.io/cluster-name={cluster}"));
        let capi = |kind| api(client, ns, &ar("cluster.x-k8s.io", "v1beta2", kind));
        let c = get(client, ns, &cluster_ar(), cluster)
            .await
            .unwrap_or_else(|| panic!("Cluster {cluster}"));
        let (cp, infra) = (
            &c["spec"]["controlPlaneRef"],
            &c["spec"]["infrastructureRef"],
        );
        assert_eq!(
            (&cp["kind"], &infra["kind"]),
            (&json!("KamajiControlPlane"), &json!("ByoCluster")),
            "{c}"
        );
        let control_plane = object(
            client,
            ns,
            "controlplane.cluster.x-k8s.io/v1alpha2",
            "KamajiControlPlane",
            &str_of(&cp["name"]),
        )
        .await;
        let infra = object(
            client,
            ns,
            "infrastructure.cluster.x-k8s.io/v1beta1",
            "ByoCluster",
            &str_of(&infra["name"]),
        )
        .await;
        let all = ListParams::default();
        let configs = ar("bootstrap.cluster.x-k8s.io", "v1beta2", "KubeadmConfig");
        ApiObjects {
            cluster: c,
            infra,
            control_plane,
            deployments: list(&capi("MachineDeployment"), &lp).await,
            sets: list(&capi("MachineSet"), &lp).await,
            machines: list(&capi("Machine"), &lp).await,
            byo_machines: list(&api(client, ns, &byoh_ar("ByoMachine")), &all).await,
            configs: list(&api(client, ns, &configs), &all).await,
            hosts: list(&api(client, ns, &byoh_ar("ByoHost")), &all).await,
        }
    }

    /// The ByoHost a Machine runs on: the one whose `status.machineRef` names the Machine's
    /// ByoMachine (its `spec.infrastructureRef`), the link BYOH v0.5.0 writes (a ByoMachine
    /// names no host but in its providerID).
    fn host_of(&self, m: &Value) -> Option<String> {
        let bm = &m["spec"]["infrastructureRef"];
        assert_eq!(bm["kind"], "ByoMachine", "{m}");
        self.hosts
            .iter()
            .find(|h| {
                let r = &h["status"]["machineRef"];
                r["kind"] == "ByoMachine"
                    && r["name"] == bm["name"]
                    && r["namespace"] == m["metadata"]["namespace"]
            })
            .map(|h| str_of(&h["metadata"]["name"]))
    }

    /// Each Machine with the host it runs on ([`ApiObjects::host_of`]).
    fn machine_hosts(&self) -> BTreeMap<String, Option<String>> {
        self.machines
            .iter()
            .map(|m| (str_of(&m["metadata"]["name"]), self.host_of(m)))
            .collect()
    }

    /// A Machine as its describe node should read: its ByoMachine, bootstrap config and host.
    fn machine(&self, m: &Value) -> Value {
        let (infra, boot) = (
            &m["spec"]["infrastructureRef"],
            &m["spec"]["bootstrap"]["configRef"],
        );
        let named = |list: &[Value], r: &Value| {
            list.iter()
                .find(|o| o["metadata"]["name"] == r["name"])
                .map_or(Value::Null, |o| row_condition(o, &["Ready"]))
        };
        json!({
            "name": m["metadata"]["name"],
            "version": m["spec"]["version"],
            "deleting": m["metadata"]["deletionTimestamp"].is_string(),
            "status": row_condition(m, &["Ready"]),
            "host": self.host_of(m),
            "infrastructure": [infra["kind"], infra["name"], named(&self.byo_machines, infra)],
            "bootstrap": [boot["kind"], boot["name"], named(&self.configs, boot)],
        })
    }

    /// The tree `describe --show-machinesets --grouping=false --echo -o json` should draw, in
    /// the shape [`tree_of`] reads it.
    fn want(&self) -> Value {
        let (c, cp) = (&self.cluster, &self.control_plane);
        let sum = |f: &str| {
            let part = |p: &str| c["status"][p][f].as_i64();
            match (part("controlPlane"), part("workers")) {
                (None, None) => Value::Null,
                (a, b) => json!(a.unwrap_or(0) + b.unwrap_or(0)),
            }
        };
        let counters = without_nulls(json!({
            "current": sum("replicas"),
            "desired": sum("desiredReplicas"),
            "available": sum("availableReplicas"),
            "ready": sum("readyReplicas"),
            "upToDate": sum("upToDateReplicas"),
        }));
        let mut mds: Vec<&Value> = self.deployments.iter().collect();
        mds.sort_by_key(|o| str_of(&o["metadata"]["name"]));
        let deployments: Vec<Value> = mds
            .into_iter()
            .map(|md| {
                let sets: Vec<Value> = owned(&self.sets, "MachineDeployment", md)
                    .into_iter()
                    .map(|ms| {
                        let machines: Vec<Value> = owned(&self.machines, "MachineSet", ms)
                            .into_iter()
                            .map(|m| self.machine(m))
                            .collect();
                        json!({"name": ms["metadata"]["name"], "replicas": replicas(ms),
                               "machines": machines})
                    })
                    .collect();
                json!({
                    "name": md["metadata"]["name"],
                    "version": md["spec"]["template"]["spec"]["version"],
                    "status": row_condition(md, &["Available"]),
                    "replicas": replicas(md),
                    "sets": sets,
                })
            })
            .collect();
        json!({
            "cluster": [c["metadata"]["name"], row_condition(c, &["Available"]), counters],
            "infrastructure": [self.infra["kind"], self.infra["metadata"]["name"]],
            "controlPlane": {
                "kind": cp["kind"], "name": cp["metadata"]["name"], "version": cp["spec"]["version"],
                "status": row_condition(cp, &["Available", "Ready"]),
                "pods": [cp["spec"]["replicas"], cp["status"]["readyReplicas"]],
            },
            "deployments": deployments,
        })
    }
}

/// The tree of `describe -o json` in the shape of [`ApiObjects::want`].
fn tree_of(d: &Value) -> Value {
    let kids = |n: &Value, kind: &str| -> Vec<Value> {
        let mut out: Vec<Value> = n["children"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|c| c["kind"] == kind || c["metaName"] == kind)
            .cloned()
            .collect();
        out.sort_by_key(|o| str_of(&o["name"]));
        out
    };
    let one = |n: &Value, kind: &str| kids(n, kind).pop().unwrap_or(Value::Null);
    let root = &d["root"];
    let (infra, cp) = (
        one(root, "ClusterInfrastructure"),
        one(root, "ControlPlane"),
    );
    let machine = |m: &Value| {
        let (infra, boot) = (one(m, "MachineInfrastructure"), one(m, "BootstrapConfig"));
        json!({
            "name": m["name"], "version": m["version"], "deleting": m["deleting"],
            "status": shown_condition(m), "host": m["host"],
            "infrastructure": [infra["kind"], infra["name"], shown_condition(&infra)],
            "bootstrap": [boot["kind"], boot["name"], shown_condition(&boot)],
        })
    };
    let deployments: Vec<Value> = kids(&one(root, "WorkerGroup"), "MachineDeployment")
        .iter()
        .map(|md| {
            let sets: Vec<Value> = kids(md, "MachineSet")
                .iter()
                .map(|ms| {
                    let machines: Vec<Value> = kids(ms, "Machine").iter().map(machine).collect();
                    json!({"name": ms["name"], "replicas": ms["counters"], "machines": machines})
                })
                .collect();
            json!({"name": md["name"], "version": md["version"], "status": shown_condition(md),
                   "replicas": md["counters"], "sets": sets})
        })
        .collect();
    json!({
        "cluster": [root["name"], shown_condition(root), root["counters"]],
        "infrastructure": [infra["kind"], infra["name"]],
        "controlPlane": {
            "kind": cp["kind"], "name": cp["name"], "version": cp["version"],
            "status": shown_condition(&cp),
            "pods": [cp["controlPlanePods"]["desired"], cp["controlPlanePods"]["ready"]],
        },
        "deployments": deployments,
    })
}

/// The hosts a describe table row names after its `@`.
fn row_hosts(row: &str) -> Vec<&str> {
    row.split_once(" @ ")
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .map(|h| h.split(',').collect())
        .unwrap_or_default()
}

/// `kubectl capi describe CLUSTER` draws the tree the real controllers wrote: `-o json` (each
/// Machine on its own row, with its MachineSet, ByoMachine and bootstrap config) against the
/// objects read from the API around it, and the table names each Machine's host on its row.
async fn assert_describe_matches_the_api(tb: &Testbed, client: &Client, ns: &str, cluster: &str) {
    let args = [
        "describe",
        cluster,
        "-o",
        "json",
        "--show-machinesets",
        "--grouping=false",
        "--echo",
    ];
    // The controllers keep writing status: compare with what they wrote once it held still
    // while describe read it.
    let (api_objects, out) = wait_until(
        "the cluster's objects to hold still around describe",
        Duration::from_secs(60),
        || async {
            let before = ApiObjects::read(client, ns, cluster).await.want();
            let out = capi(tb, ns, &args);
            let after = ApiObjects::read(client, ns, cluster).await;
            let now = after.want();
            (before == now)
                .then_some((after, out))
                .ok_or(format!("{before:#}\nthen\n{now:#}"))
        },
    )
    .await;
    let want = api_objects.want();
    // The version of the CAPI core API it read (the code prints the version alone, where
    // docs/commands/capi-describe.md shows `cluster.x-k8s.io/v1beta2`).
    let served = api_objects.cluster["apiVersion"]
        .as_str()
        .and_then(|v| v.split_once('/'))
        .map(|(_, v)| v.to_string());
    let d: Value = serde_json::from_str(&run::assert_ok(&out, "kubectl-capi describe"))
        .unwrap_or_else(|e| panic!("describe -o json: {e}\n{}", stdout(&out)));
    assert_eq!(
        (&d["cluster"], &d["namespace"], &d["apiVersion"]),
        (&json!(cluster), &json!(ns), &json!(served)),
        "{d:#}"
    );
    assert_eq!(tree_of(&d), want, "describe -o json:\n{d:#}");
    // What the tree was compared with is the cluster as created: its workers each on a host.
    let hosts = api_objects.machine_hosts();
    assert!(
        hosts.len() == 2 && hosts.values().all(Option::is_some),
        "{hosts:?}"
    );
    // The table: each Machine's row (its own, or its group's) names its host.
    for grouping in ["--grouping=false", "--grouping=true"] {
        let table = run::assert_ok(&capi(tb, ns, &["describe", cluster, grouping]), "describe");
        for (m, h) in &hosts {
            let row = table
                .lines()
                .find(|l| {
                    l.contains(&format!("Machine {ns}/{m}"))
                        || (l.contains("Machines...") && l.contains(m.as_str()))
                })
                .unwrap_or_else(|| panic!("no row for Machine {m}:\n{table}"));
            assert!(
                row_hosts(row).contains(&h.as_deref().unwrap()),
                "{m} runs on {h:?}:\n{table}"
            );
        }
    }
}

/// The cluster's Machines in the API, each with the host it runs on ([`ApiObjects::host_of`]).
async fn machine_hosts(
    client: &Client,
    ns: &str,
    cluster: &str,
) -> BTreeMap<String, Option<String>> {
    ApiObjects::read(client, ns, cluster).await.machine_hosts()
}

/// The rows `machines --watch -o json` printed so far, one JSON object a line (a line still
/// being written is left for the next read).
fn watch_lines(out: &str) -> Vec<Value> {
    let whole = out.rfind('\n').map_or("", |end| &out[..end]);
    whole
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON row: {e}: {l}")))
        .collect()
}

/// `machines --watch` showed the retire as the real controllers did it: the Machine of the
/// retired host deleted, and its replacement (the Machine the API holds now that it did not
/// before) on the spare host, Running as the API says.
async fn assert_watch_saw_the_retire(
    client: &Client,
    ns: &str,
    watch: &mut Background,
    before: &BTreeMap<String, Option<String>>,
    gone: &str,
    spare: &str,
) {
    // Until the watch caught up with the API: the retired host's Machine printed deleted,
    // and the last line of its replacement says what the API says of it.
    let (after, replacement, rows) = wait_until(
        "machines --watch to show the retire",
        Duration::from_secs(60),
        || async {
            let o = ApiObjects::read(client, ns, "c1").await;
            let after = o.machine_hosts();
            let rows = watch_lines(&watch.stdout());
            let new: Vec<&Value> = o
                .machines
                .iter()
                .filter(|m| !before.contains_key(&str_of(&m["metadata"]["name"])))
                .collect();
            let deleted = rows
                .iter()
                .any(|r| r["name"] == gone && r["deleted"] == true);
            let caught_up = match new[..] {
                [m] => rows
                    .iter()
                    .rfind(|r| r["name"] == m["metadata"]["name"])
                    .is_some_and(|r| {
                        (&r["host"], &r["phase"], &r["node"], r.get("deleted"))
                            == (
                                &json!(spare),
                                &m["status"]["phase"],
                                &m["status"]["nodeRef"]["name"],
                                None,
                            )
                    }),
                _ => false,
            };
            match !after.contains_key(gone) && deleted && caught_up {
                true => Ok((after.clone(), str_of(&new[0]["metadata"]["name"]), rows)),
                false => Err(format!("the API holds {after:?}\n{}", watch.output())),
            }
        },
    )
    .await;
    let out = watch.output();
    let replacement = replacement.as_str();
    assert_eq!(after[replacement].as_deref(), Some(spare), "{after:?}");
    let of = |m: &str| -> Vec<&Value> { rows.iter().filter(|r| r["name"] == m).collect() };
    // The retired host's Machine: gone, on that host to the end.
    let last = of(gone).pop().unwrap();
    assert_eq!(
        (&last["deleted"], &last["host"]),
        (&json!(true), &json!(before[gone])),
        "{out}"
    );
    // BYOH claimed the spare for it before the node there got its providerID: the watch named
    // the host from the claim first.
    let first = of(replacement)
        .into_iter()
        .find(|r| !r["host"].is_null())
        .unwrap();
    assert_eq!(
        (&first["host"], &first["providerId"]),
        (&json!(spare), &Value::Null),
        "{out}"
    );
    // Nothing else: no other Machine deleted, none of another cluster.
    for r in &rows {
        let name = str_of(&r["name"]);
        assert!(
            before.contains_key(&name) || after.contains_key(&name),
            "{out}"
        );
        assert!(r["deleted"] != true || name == gone, "{out}");
        assert_eq!(r["cluster"], "c1", "{out}");
    }
    assert!(watch.running(), "machines --watch ended: {out}");
}
