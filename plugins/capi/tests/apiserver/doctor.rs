//! `kubectl capi doctor` (and `kubectl kamaji doctor`) on the shared testbed. Each test
//! plants problems in a namespace of its own, as the controllers or a user would leave them,
//! and reads the report with `-n` so that other tests' namespaces do not count.

use std::collections::BTreeSet;
use std::process::Output;
use std::time::Duration;

use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use testbed::Testbed;
use testbed::fixtures::poll::wait_for;
use testbed::fixtures::run::{plugin, stderr, stdout};
use testbed::fixtures::{FleetSpec, HostState};

const BIN: &str = env!("CARGO_BIN_EXE_kubectl-capi");

/// `kubectl-kamaji`, whose `doctor` is the same report.
fn kamaji_bin() -> String {
    testbed::workspace_binary(BIN, "kubectl-kamaji", "kubectl-kamaji")
        .display()
        .to_string()
}

fn doctor(tb: &Testbed, ns: &str, extra: &[&str]) -> (Output, Value) {
    let mut args = vec!["doctor", "-n", ns, "-o", "json"];
    args.extend(extra);
    let o = plugin(BIN, &tb.kubeconfig, &args);
    let v = serde_json::from_str(&stdout(&o))
        .unwrap_or_else(|e| panic!("doctor -o json: {e}\n{}\n{}", stdout(&o), stderr(&o)));
    (o, v)
}

/// The object names of the findings of `check`.
fn named(report: &Value, check: &str) -> BTreeSet<String> {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["check"] == check)
        .map(|f| f["object"]["name"].as_str().unwrap().to_string())
        .collect()
}

fn the(report: &Value, check: &str) -> Value {
    let all: Vec<&Value> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["check"] == check)
        .collect();
    assert_eq!(all.len(), 1, "one {check} finding expected:\n{report:#}");
    all[0].clone()
}

/// The one finding of `check`, asserting its severity and fix line.
fn the_one(report: &Value, check: &str, severity: &str, fix: &str) -> Value {
    let f = the(report, check);
    assert_eq!(
        (f["severity"].as_str(), f["fix"].as_str()),
        (Some(severity), Some(fix)),
        "{f}"
    );
    f
}

fn code(o: &Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

/// Creates an object and sets its status (as a controller would) through the subresource.
/// Held while a test plants a cluster-wide fact the doctor reads in every namespace (the
/// reconciler's Lease), and by a test whose exit code needs the cluster without it: tests of this
/// binary run in parallel on one testbed, and the read-only test once saw the other's stale
/// Lease as `ReconcilerStopped` (exit 1 where it wants 0).
static CLUSTER_WIDE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn put(client: &Client, ns: &str, group: &str, version: &str, kind: &str, mut obj: Value) {
    let plural = format!("{}s", kind.to_lowercase());
    let api_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    let ar = ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: api_version.clone(),
        kind: kind.into(),
        plural,
    };
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &ar);
    let status = obj.as_object_mut().and_then(|o| o.remove("status"));
    obj["apiVersion"] = json!(api_version);
    obj["kind"] = json!(kind);
    let name = obj["metadata"]["name"].as_str().unwrap().to_string();
    let body: DynamicObject = serde_json::from_value(obj).unwrap();
    api.create(&PostParams::default(), &body)
        .await
        .unwrap_or_else(|e| panic!("create {kind} {name}: {e}"));
    if let Some(status) = status {
        api.patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": status })),
        )
        .await
        .unwrap_or_else(|e| panic!("status of {kind} {name}: {e}"));
    }
}

/// A BYOH object (`infrastructure.cluster.x-k8s.io/v1beta1`).
async fn put_byoh(client: &Client, ns: &str, kind: &str, obj: Value) {
    put(
        client,
        ns,
        "infrastructure.cluster.x-k8s.io",
        "v1beta1",
        kind,
        obj,
    )
    .await
}

async fn put_secret(client: &Client, ns: &str, obj: Value) {
    put(client, ns, "", "v1", "Secret", obj).await
}

/// Our ClusterUpgrade API, as `kubectl kamaji install` applies it, once per test binary.
async fn serve_cluster_upgrades(client: &Client) {
    static READY: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();
    READY
        .get_or_init(|| async {
            let crds = kcore::ops::crds();
            testbed::fixtures::crds::apply_and_wait(client, &crds, "fleet-test").await;
        })
        .await;
}

fn kamaji_secret(name: &str, tenant: &str, days: i64) -> Value {
    use base64::Engine;
    let pem =
        base64::engine::general_purpose::STANDARD.encode(testbed::expiring_certificate(days).0);
    json!({"metadata": {"name": name, "labels": {
            "kamaji.clastix.io/project": "kamaji", "kamaji.clastix.io/name": tenant}},
           "data": {"apiserver.crt": pem}})
}

#[tokio::test]
async fn doctor_finds_each_planted_problem_with_its_severity_fix_and_exit_code() {
    let tb = testbed::shared();
    let (client, ns) = tb.namespace("doctor").await;
    let capi = testbed::fixtures::capi_version(&client).await.unwrap();

    // A clean namespace: nothing to report, exit 0, in both plugins.
    // One info finding is true of the whole testbed: BYOH v0.5.0 implements only Cluster API's
    // v1beta1 contract (its CRDs' labels), which a release that stops serving v1beta1 breaks.
    let (o, clean) = doctor(tb, &ns, &[]);
    assert_eq!(code(&o), 0, "{}\n{}", stderr(&o), stdout(&o));
    assert_eq!(
        clean["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| (
                f["check"].clone(),
                f["severity"].clone(),
                f["object"]["name"].clone()
            ))
            .collect::<Vec<_>>(),
        vec![(
            json!("ProviderContractV1beta1Only"),
            json!("Info"),
            json!("infrastructure-byoh")
        )],
        "{clean:#}"
    );
    let (_, rest) = doctor(
        tb,
        &ns,
        &["--only", "control-planes,workers,leftovers,operations"],
    );
    assert_eq!(rest["findings"], json!([]), "{rest:#}");
    let human = plugin(
        &kamaji_bin(),
        &tb.kubeconfig,
        &[
            "doctor",
            "-n",
            &ns,
            "--only",
            "control-planes,workers,leftovers,operations",
        ],
    );
    assert_eq!(code(&human), 0, "{}", stderr(&human));
    assert!(
        stdout(&human).starts_with("No problems found"),
        "{}",
        stdout(&human)
    );

    // Leftovers: Secrets of a cluster that does not exist (a warning: exit 0).
    for n in ["gone-kubeconfig", "gone-ca"] {
        put_secret(
            &client,
            &ns,
            json!({"metadata": {"name": n,
            "labels": {"cluster.x-k8s.io/cluster-name": "gone"}}, "type": "Opaque"}),
        )
        .await;
    }
    let (o, r) = doctor(tb, &ns, &[]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let f = the(&r, "OrphanSecrets");
    assert_eq!(f["severity"], "Warning");
    assert_eq!(f["section"], "leftovers");
    assert_eq!(f["object"]["name"], "gone");
    assert!(
        f["cause"].as_str().unwrap().starts_with("2 Secret(s)"),
        "{f}"
    );
    assert_eq!(
        f["fix"],
        format!("kubectl delete secret -n {ns} -l cluster.x-k8s.io/cluster-name=gone")
    );

    // Leftovers: an installer template no ByoMachineTemplate names (info), once older than
    // --stuck-after.
    put_byoh(
        &client,
        &ns,
        "K8sInstallerConfigTemplate",
        json!({"metadata": {"name": "gone-md-0"}, "spec": {"template": {"spec": {
            "bundleRepo": "projects.registry.vmware.com/cluster_api_provider_bringyourownhost",
            "bundleType": "k8s"}}}}),
    )
    .await;
    let mut last = Value::Null;
    testbed::fixtures::poll::eventually(
        "the unused installer template",
        Duration::from_secs(30),
        || {
            let (o, r) = doctor(tb, &ns, &["--only", "leftovers", "--stuck-after", "1s"]);
            assert_eq!(code(&o), 0, "{}", stderr(&o));
            let found = named(&r, "UnusedInstallerTemplate").contains("gone-md-0");
            last = r;
            async move { found }
        },
    )
    .await;
    the_one(
        &last,
        "UnusedInstallerTemplate",
        "Info",
        &format!("kubectl delete k8sinstallerconfigtemplate gone-md-0 -n {ns}"),
    );

    // Leftovers: a BootstrapKubeconfig whose host has registered (info).
    put_byoh(
        &client,
        &ns,
        "ByoHost",
        json!({"metadata": {"name": format!("{ns}-h1")}}),
    )
    .await;
    put_byoh(
        &client,
        &ns,
        "BootstrapKubeconfig",
        json!({"metadata": {"name": format!("bootstrap-kubeconfig-{ns}-h1")},
            "spec": {"apiserver": "https://127.0.0.1:6443", "certificate-authority-data": ""}}),
    )
    .await;
    let (o, r) = doctor(tb, &ns, &["--only", "leftovers"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    the_one(
        &r,
        "UnusedBootstrapKubeconfig",
        "Info",
        &format!("kubectl delete bootstrapkubeconfig bootstrap-kubeconfig-{ns}-h1 -n {ns}"),
    );

    // Certificates issued short: one expiring within --cert-warn, one expired (an error: exit 1).
    put_secret(
        &client,
        &ns,
        kamaji_secret("t1-api-server-certificate", "t1", 5),
    )
    .await;
    let (o, r) = doctor(tb, &ns, &["--only", "control-planes"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let f = the(&r, "CertificateExpiring");
    assert_eq!(
        (f["severity"].as_str(), f["object"]["name"].as_str()),
        (Some("Warning"), Some("t1"))
    );
    assert!(
        f["cause"]
            .as_str()
            .unwrap()
            .contains("apiserver.crt of Secret t1-api-server-certificate"),
        "{f}"
    );
    assert_eq!(
        f["fix"],
        format!("kubectl kamaji certificates rotate t1 -n {ns} --all=true")
    );
    // Below the threshold, it is no finding.
    let (_, r) = doctor(tb, &ns, &["--only", "control-planes", "--cert-warn", "2d"]);
    assert_eq!(r["findings"], json!([]), "{r:#}");
    put_secret(
        &client,
        &ns,
        kamaji_secret("t2-api-server-certificate", "t2", -2),
    )
    .await;
    let (o, r) = doctor(tb, &ns, &["--only", "control-planes"]);
    assert_eq!(code(&o), 1, "an expired certificate is an error");
    assert_eq!(the(&r, "CertificateExpired")["object"]["name"], "t2");
    assert!(
        stderr(&o).contains("doctor found 1 error(s)"),
        "{}",
        stderr(&o)
    );

    // A DataStore naming a Secret that does not exist (cluster-scoped: removed right after, so
    // that no other doctor run sees it).
    let ds_name = format!("doctor-{ns}");
    let stores: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource {
            group: "kamaji.clastix.io".into(),
            version: "v1alpha1".into(),
            api_version: "kamaji.clastix.io/v1alpha1".into(),
            kind: "DataStore".into(),
            plural: "datastores".into(),
        },
    );
    let ds: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "kamaji.clastix.io/v1alpha1", "kind": "DataStore",
        "metadata": {"name": ds_name},
        "spec": {"driver": "etcd", "endpoints": ["etcd.example:2379"], "tlsConfig": {
            "certificateAuthority": {"certificate": {"secretReference":
                {"name": "ds-missing", "namespace": ns, "keyPath": "ca.crt"}}}}}}))
    .unwrap();
    stores.create(&PostParams::default(), &ds).await.unwrap();
    let (o, r) = doctor(tb, &ns, &["--only", "control-planes"]);
    stores.delete(&ds_name, &Default::default()).await.unwrap();
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    let f = the(&r, "DataStoreUnusable");
    assert_eq!(f["object"]["name"], ds_name.as_str());
    assert!(
        f["cause"]
            .as_str()
            .unwrap()
            .starts_with(&format!("Secret {ns}/ds-missing does not exist")),
        "{f}"
    );
    // It has a tlsConfig and no clientCertificate: Kamaji v1.0.0 would stop on it.
    let g = the(&r, "DataStoreStopsKamaji");
    assert_eq!(g["object"]["name"], ds_name.as_str());
    assert_eq!(g["severity"], "Error");

    // Operations: a paused cluster (info), a failed ClusterUpgrade (error).
    serve_cluster_upgrades(&client).await;
    put(
        &client,
        &ns,
        "cluster.x-k8s.io",
        &capi,
        "Cluster",
        json!({"metadata": {"name": "c1"}, "spec": {"paused": true}}),
    )
    .await;
    put(
        &client,
        &ns,
        "ops.capi-kamaji.io",
        "v1alpha1",
        "ClusterUpgrade",
        json!({
        "metadata": {"name": "c1"}, "spec": {"clusterName": "c1", "version": "v1.33.2"},
        "status": {"phase": "Failed", "message": "step 2 did not finish in 30m"}}),
    )
    .await;
    // A ClusterUpgrade whose running step started an hour ago (a warning).
    let hour_ago = (jiff::Timestamp::now() - jiff::SignedDuration::from_hours(1)).to_string();
    put(
        &client,
        &ns,
        "ops.capi-kamaji.io",
        "v1alpha1",
        "ClusterUpgrade",
        json!({
        "metadata": {"name": "c2"}, "spec": {"clusterName": "c2", "version": "v1.33.2"},
        "status": {"phase": "Running", "steps": [{"number": 1, "phase": "Running",
            "startedAt": hour_ago, "message": "KamajiControlPlane c2: rolling out"}]}}),
    )
    .await;
    let (o, r) = doctor(tb, &ns, &["--only", "operations"]);
    assert_eq!(code(&o), 1);
    let f = the(&r, "UpgradeStalled");
    assert_eq!(f["severity"], "Warning");
    assert!(
        f["cause"]
            .as_str()
            .unwrap()
            .starts_with("step 1 has been running for"),
        "{f}"
    );
    assert_eq!(f["fix"], format!("kubectl capi upgrade status c2 -n {ns}"));
    let f = the(&r, "UpgradeFailed");
    assert_eq!(f["severity"], "Error");
    assert!(
        f["cause"]
            .as_str()
            .unwrap()
            .contains("step 2 did not finish"),
        "{f}"
    );
    assert_eq!(f["fix"], format!("kubectl capi upgrade status c1 -n {ns}"));
    let f = the(&r, "ClusterPaused");
    assert_eq!(
        (f["severity"].as_str(), f["fix"].as_str()),
        (
            Some("Info"),
            Some(format!("kubectl capi resume c1 -n {ns}").as_str())
        )
    );
    // --only kept the other sections out.
    assert!(
        r["findings"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["section"] == "operations"),
        "{r:#}"
    );

    // Management: kamaji-reconciler's Lease, last renewed ten minutes ago (a stopped reconciler).
    let cluster_wide = CLUSTER_WIDE.lock().await;
    let renewed = (jiff::Timestamp::now() - jiff::SignedDuration::from_mins(10))
        .strftime("%Y-%m-%dT%H:%M:%S%.6fZ")
        .to_string();
    put(
        &client,
        &ns,
        "coordination.k8s.io",
        "v1",
        "Lease",
        json!({
        "metadata": {"name": "kamaji-reconciler.controlplane.cluster.x-k8s.io"},
        "spec": {"holderIdentity": "gone", "leaseDurationSeconds": 15, "renewTime": renewed}}),
    )
    .await;
    let (o, r) = doctor(tb, &ns, &["--only", "management"]);
    assert_eq!(code(&o), 1);
    let f = the(&r, "ReconcilerStopped");
    assert!(f["cause"].as_str().unwrap().contains("ago"), "{f}");
    assert!(
        f["fix"]
            .as_str()
            .unwrap()
            .contains("rollout restart deployment/kamaji-reconciler"),
        "{f}"
    );
    // The same report through kubectl kamaji.
    let k = plugin(
        &kamaji_bin(),
        &tb.kubeconfig,
        &["doctor", "-n", &ns, "-o", "json"],
    );
    let kr: Value = serde_json::from_str(&stdout(&k)).unwrap();
    let all = doctor(tb, &ns, &[]).1;
    assert_eq!(kr["findings"], all["findings"]);
    assert_eq!(code(&k), 1);
    // The Lease is read in every namespace: remove it so that no other doctor run sees it.
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(client.clone(), &ns);
    leases
        .delete(
            "kamaji-reconciler.controlplane.cluster.x-k8s.io",
            &Default::default(),
        )
        .await
        .unwrap();
    drop(cluster_wide);

    // Management: a CRD of a Cluster API group converted by a webhook nothing serves, with an
    // object, and an old version left in its stored versions (cluster-scoped: removed right
    // after, as the DataStore).
    crd_conversion_and_stored_versions(tb, &client, &ns).await;
    tb.delete_namespace(&client, &ns).await;
}

async fn crd_conversion_and_stored_versions(tb: &Testbed, client: &Client, ns: &str) {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let group = format!("{ns}.cluster.x-k8s.io");
    let name = format!("widgets.{group}");
    let version = |v: &str, storage: bool| {
        json!({"name": v, "served": true, "storage": storage,
            "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}})
    };
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": name},
        "spec": {"group": group, "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [version("v1alpha1", false), version("v1beta1", true)],
            // Nothing listens on the discard port: every conversion fails.
            "conversion": {"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"],
                "clientConfig": {"url": "https://127.0.0.1:9/convert"}}}}}))
    .unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &crd).await.unwrap();
    let widget = |v: &str| ApiResource {
        group: group.clone(),
        version: v.into(),
        api_version: format!("{group}/{v}"),
        kind: "Widget".into(),
        plural: "widgets".into(),
    };
    let widgets: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &widget("v1beta1"));
    let w: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{group}/v1beta1"), "kind": "Widget", "metadata": {"name": "w1"}}))
    .unwrap();
    testbed::fixtures::poll::eventually("the Widget CRD to serve", Duration::from_secs(30), || {
        let (widgets, w) = (widgets.clone(), w.clone());
        async move { widgets.create(&PostParams::default(), &w).await.is_ok() }
    })
    .await;
    crds.patch_status(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"storedVersions": ["v1alpha1", "v1beta1"]}})),
    )
    .await
    .unwrap();
    let (o, r) = doctor(tb, ns, &["--only", "management"]);
    crds.delete(&name, &Default::default()).await.unwrap();
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    let f = the(&r, "ConversionFailing");
    assert_eq!(f["severity"], "Error");
    assert_eq!(f["object"]["name"], name.as_str());
    assert!(
        f["cause"]
            .as_str()
            .unwrap()
            .starts_with("reading it at v1alpha1 fails in its conversion webhook"),
        "{f}"
    );
    let f = the(&r, "CrdStoredVersions");
    assert_eq!(f["severity"], "Warning");
    assert_eq!(f["object"]["name"], name.as_str());
    assert!(
        f["fix"]
            .as_str()
            .unwrap()
            .contains(&format!("kubectl patch crd {name} --subresource=status")),
        "{f}"
    );
}

#[tokio::test]
async fn doctor_on_the_fixture_fleet_names_its_failed_and_releasing_hosts_and_stuck_machines() {
    let tb = testbed::shared();
    let (client, ns) = tb.namespace("doctor-fleet").await;
    let fleet = testbed::fixtures::fleet(&client, &ns, &FleetSpec::small())
        .await
        .unwrap();
    let names = |hs: Vec<&testbed::fixtures::FixtureHost>| -> BTreeSet<String> {
        hs.into_iter().map(|h| h.name.clone()).collect()
    };
    let stuck: BTreeSet<String> = fleet
        .machines
        .iter()
        .filter(|m| matches!(m.phase.as_str(), "Pending" | "Provisioning"))
        .map(|m| m.name.clone())
        .collect();
    assert!(!stuck.is_empty() && !fleet.hosts_in(HostState::Failed).is_empty());
    // Machines count as stuck once older than --stuck-after: wait for that, not a fixed time.
    let r = wait_for(
        "every Pending and Provisioning machine reported stuck",
        std::time::Duration::from_secs(60),
        String::new,
        || async {
            let (_, r) = doctor(tb, &ns, &["--only", "workers", "--stuck-after", "1s"]);
            (named(&r, "MachineStuck") == stuck).then_some(r)
        },
    )
    .await;
    assert_eq!(
        named(&r, "HostFailed"),
        names(fleet.hosts_in(HostState::Failed))
    );
    assert_eq!(
        named(&r, "HostReleasing"),
        names(fleet.hosts_in(HostState::Releasing))
    );
    for f in r["findings"].as_array().unwrap() {
        assert!(f["fix"].as_str().unwrap().starts_with("kubectl "), "{f}");
        assert!(!f["cause"].as_str().unwrap().contains('\n'), "{f}");
    }
    let c = &r["counts"];
    let total =
        c["error"].as_u64().unwrap() + c["warning"].as_u64().unwrap() + c["info"].as_u64().unwrap();
    assert_eq!(total as usize, r["findings"].as_array().unwrap().len());
    // A table for people: one row per finding, under its headers, and the counts.
    let o = plugin(
        BIN,
        &tb.kubeconfig,
        &[
            "doctor",
            "-n",
            &ns,
            "--only",
            "workers",
            "--stuck-after",
            "1s",
        ],
    );
    assert_eq!(code(&o), 1, "a failed host is an error");
    let out = stdout(&o);
    assert!(out.starts_with("SEVERITY"), "{out}");
    assert!(
        out.contains("error(s)")
            && out.contains("Not checked: whether the agent of a host that serves no cluster"),
        "{out}"
    );
    tb.delete_namespace(&client, &ns).await;
}

#[test]
fn doctor_refuses_bad_flags_with_one_line_and_exit_2() {
    let tb = testbed::shared();
    for (args, says) in [
        (&["--only", "hosts"][..], "unknown section \"hosts\""),
        (&["--cert-warn", "4000d"][..], "at most 3650d"),
        (&["--cert-warn", "soon"][..], "invalid duration"),
        // The help speaks in days, kubectl's durations in seconds: a unit is asked for.
        (
            &["--cert-warn", "30"][..],
            "30 has no unit: write 30d for days or 30h for hours",
        ),
        (&["--stuck-after", "1000h"][..], "too long"),
        (&["-l", "a=(b"][..], "selector"),
    ] {
        let mut all = vec!["doctor"];
        all.extend(args);
        let o = plugin(BIN, &tb.kubeconfig, &all);
        assert_eq!(code(&o), 2, "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(says), "{args:?}: {}", stderr(&o));
    }
}

/// The real kubectl on the testbed, as its admin; panics unless it succeeds.
fn kubectl(tb: &Testbed, args: &[&str], stdin: Option<&str>) -> String {
    use std::io::Write;
    let mut cmd = std::process::Command::new(testbed::fixtures::run::kubectl_bin());
    cmd.args(args)
        .arg("--kubeconfig")
        .arg(&tb.kubeconfig)
        .env_remove("KUBECONFIG")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().expect("kubectl runs");
    if let Some(text) = stdin {
        child
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
    }
    drop(child.stdin.take());
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "kubectl {args:?}: {}", stderr(&o));
    stdout(&o)
}

/// `notCheckedSections` as section → (checks, missing permissions).
fn gaps(report: &Value) -> std::collections::BTreeMap<String, (Vec<String>, Vec<String>)> {
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap().to_string())
            .collect()
    };
    report["notCheckedSections"]
        .as_array()
        .unwrap_or_else(|| panic!("notCheckedSections:\n{report:#}"))
        .iter()
        .map(|g| {
            (
                g["section"].as_str().unwrap().to_string(),
                (strings(&g["checks"]), strings(&g["missing"])),
            )
        })
        .collect()
}

/// Users who may read but not write, nor read Secrets: under the ClusterRole `--print-role`
/// prints and under Kubernetes' own `view`, the doctor reports what it could read, and one "not
/// checked" line per section it could not with the permission lacking, instead of ending at
/// the first 403. Given Secrets in one namespace only (a RoleBinding), it reads them there.
#[tokio::test]
async fn doctor_runs_read_only_under_its_printed_role_and_under_view() {
    let _cluster_wide = CLUSTER_WIDE.lock().await;
    let tb = testbed::shared();
    let (client, ns) = tb.namespace("doctor-ro").await;
    let capi = testbed::fixtures::capi_version(&client).await.unwrap();
    // Planted: a paused Cluster (info), Secrets of a cluster that is gone (warning), an expired
    // certificate of tenant t1 (error) and t1 itself, which no KamajiControlPlane owns.
    put(
        &client,
        &ns,
        "cluster.x-k8s.io",
        &capi,
        "Cluster",
        json!({"metadata": {"name": "c1"}, "spec": {"paused": true}}),
    )
    .await;
    put_secret(
        &client,
        &ns,
        json!({"metadata": {"name": "gone-kubeconfig",
            "labels": {"cluster.x-k8s.io/cluster-name": "gone"}}, "type": "Opaque"}),
    )
    .await;
    put_secret(
        &client,
        &ns,
        kamaji_secret("t1-api-server-certificate", "t1", -2),
    )
    .await;
    put(
        &client,
        &ns,
        "kamaji.clastix.io",
        "v1alpha1",
        "TenantControlPlane",
        json!({"metadata": {"name": "t1"}, "spec": {"dataStore": "default",
            "controlPlane": {"deployment": {"replicas": 1}, "service": {"serviceType": "ClusterIP"}},
            "kubernetes": {"version": "v1.33.1", "kubelet": {"cgroupfs": "systemd"}}}}),
    )
    .await;
    let admin = {
        let (o, r) = doctor(tb, &ns, &[]);
        assert_eq!(code(&o), 1, "{}", stderr(&o));
        r
    };
    for check in [
        "CertificateExpired",
        "ClusterPaused",
        "OrphanSecrets",
        "OrphanTenantControlPlane",
    ] {
        the(&admin, check);
    }
    assert_eq!(admin["notCheckedSections"], json!([]), "{admin:#}");

    // The role, as printed, applied by kubectl; users bound to it and to `view`.
    let o = plugin(BIN, &tb.kubeconfig, &["doctor", "--print-role"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let role = stdout(&o);
    assert!(role.contains("name: capi-kamaji-doctor\n"), "{role}");
    let applied = kubectl(tb, &["apply", "-f", "-"], Some(&role));
    assert!(
        applied.contains("clusterrole.rbac.authorization.k8s.io/capi-kamaji-doctor ")
            && applied
                .contains("clusterrole.rbac.authorization.k8s.io/capi-kamaji-doctor-secrets "),
        "{applied}"
    );
    let (reader, viewer) = (format!("reader-{ns}"), format!("viewer-{ns}"));
    for (user, role) in [(&reader, "capi-kamaji-doctor"), (&viewer, "view")] {
        kubectl(
            tb,
            &[
                "create",
                "clusterrolebinding",
                user,
                &format!("--clusterrole={role}"),
                &format!("--user={user}"),
            ],
            None,
        );
    }
    let as_user = |user: &str, extra: &[&str]| {
        let mut args = vec!["--as", user];
        args.extend(extra);
        doctor(tb, &ns, &args)
    };

    // Under the printed role: everything but Secrets and the server dry run (a patch) is read.
    let (o, r) = as_user(&reader, &[]);
    assert_eq!(
        code(&o),
        0,
        "the expired certificate is not readable: {}",
        stderr(&o)
    );
    for check in ["ClusterPaused", "OrphanTenantControlPlane"] {
        the(&r, check);
    }
    let g = gaps(&r);
    let secrets = format!("list secrets -n {ns}");
    let patch = format!("patch tenantcontrolplanes.kamaji.clastix.io -n {ns}");
    let (checks, missing) = &g["control-planes"];
    assert!(
        checks.starts_with(&["CertificateExpired".into(), "CertificateExpiring".into()])
            && checks.contains(&"VersionOutsideKamajiRange".to_string())
            && missing.contains(&secrets)
            && missing.contains(&patch),
        "{g:?}"
    );
    assert_eq!(
        g["leftovers"],
        (vec!["OrphanSecrets".into()], vec![secrets.clone()])
    );
    assert!(
        !g.contains_key("workers") && !g.contains_key("operations"),
        "the role reads them: {g:?}"
    );
    // The management section is read whole, but for another test's CRD made for the moment
    // in a group of its own (the role names Cluster API's groups).
    if let Some((_, missing)) = g.get("management") {
        assert!(
            missing.iter().all(|m| m.starts_with("list widgets.")),
            "{g:?}"
        );
    }
    assert!(
        r["notChecked"].as_array().unwrap().contains(&json!(format!(
            "leftovers: OrphanSecrets (lacks {secrets})"
        ))),
        "{r:#}"
    );
    // For people: the findings, then one line per section not checked.
    let o = plugin(BIN, &tb.kubeconfig, &["doctor", "-n", &ns, "--as", &reader]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(
        stdout(&o)
            .contains("\nNot checked: control-planes: CertificateExpired, CertificateExpiring,")
            && stdout(&o).contains(&format!(
                "\nNot checked: leftovers: OrphanSecrets (lacks {secrets})\n"
            )),
        "{}",
        stdout(&o)
    );
    // In every namespace: Secrets refused everywhere are asked for where the fleet is.
    let o = plugin(
        BIN,
        &tb.kubeconfig,
        &["doctor", "-o", "json", "--as", &reader],
    );
    assert!(matches!(code(&o), 0 | 1), "{}", stderr(&o));
    let wide: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let g = gaps(&wide);
    assert!(
        g["leftovers"].1.contains(&"list secrets -A".to_string())
            && g["leftovers"].1.contains(&secrets)
            && g["control-planes"].1.contains(&secrets),
        "{g:?}"
    );

    // Secrets granted in this namespace only: read there, the certificate check runs.
    kubectl(
        tb,
        &[
            "create",
            "rolebinding",
            "doctor-secrets",
            "-n",
            &ns,
            "--clusterrole=capi-kamaji-doctor-secrets",
            &format!("--user={reader}"),
        ],
        None,
    );
    let (o, r) = as_user(&reader, &[]);
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    assert_eq!(the(&r, "CertificateExpired")["object"]["name"], "t1");
    the(&r, "OrphanSecrets");
    assert!(!gaps(&r).contains_key("leftovers"), "{r:#}");
    let o = plugin(
        BIN,
        &tb.kubeconfig,
        &[
            "doctor",
            "-o",
            "json",
            "--as",
            &reader,
            "--only",
            "control-planes",
        ],
    );
    let wide: Value =
        serde_json::from_str(&stdout(&o)).unwrap_or_else(|e| panic!("{e}: {}", stderr(&o)));
    assert!(
        wide["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["check"] == "CertificateExpired" && f["object"]["namespace"] == ns.as_str()),
        "{wide:#}"
    );

    // Under `view`, which reads none of these APIs: every section says what it lacks.
    let (o, r) = as_user(&viewer, &[]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(r["findings"], json!([]), "{r:#}");
    let g = gaps(&r);
    assert_eq!(
        g.keys().map(String::as_str).collect::<Vec<_>>(),
        [
            "control-planes",
            "leftovers",
            "management",
            "operations",
            "workers"
        ],
        "{g:?}"
    );
    assert!(
        g["operations"]
            .1
            .contains(&format!("list clusters.cluster.x-k8s.io -n {ns}")),
        "{g:?}"
    );
    let o = plugin(BIN, &tb.kubeconfig, &["doctor", "-n", &ns, "--as", &viewer]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(
        stdout(&o).starts_with("No problems found in what could be read")
            && stdout(&o).contains("\nNot checked: operations: ClusterPaused"),
        "{}",
        stdout(&o)
    );

    for user in [&reader, &viewer] {
        kubectl(tb, &["delete", "clusterrolebinding", user], None);
    }
    tb.delete_namespace(&client, &ns).await;
}

/// `-n` naming a namespace that does not exist is no clean report: one line, exit 1.
#[test]
fn doctor_in_a_namespace_that_does_not_exist_fails() {
    let tb = testbed::shared();
    let o = plugin(BIN, &tb.kubeconfig, &["doctor", "-n", "no-such-namespace"]);
    assert_eq!(code(&o), 1, "{}\n{}", stdout(&o), stderr(&o));
    assert_eq!(stdout(&o), "");
    assert!(
        stderr(&o).starts_with("error: namespace \"no-such-namespace\" not found\n"),
        "{}",
        stderr(&o)
    );
}
