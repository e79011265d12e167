//! kubectl-kamaji end to end on the real controllers: the Kamaji v1.0.0 operator (tenant control
//! planes run real kube-apiserver, kube-controller-manager and kube-scheduler processes under the
//! testbed's SIMULATED kubelet), the BYOH v0.5.0 controller manager with its webhooks, the CAPI
//! v1.14 core and kubeadm bootstrap managers, and our reconciler. Only the BYOH host agents'
//! OS work is SIMULATED; their kubelets join the live tenant through the bootstrap token.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;
use kube::Client;
use serde_json::{Value, json};
use testbed::Testbed;
use testbed::fixtures::reconciler::assert_ran;
use testbed::fixtures::run::{plugin_in, words};

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
