//! A Kamaji-hosted cluster on a CAPI 1.10 management cluster run by its own controllers: the
//! v1beta1 contract as CAPI v1.10's core manager reads it from our KamajiControlPlane, not as
//! the objects planted on the v1beta1 CRDs (`tests/apiserver/v1beta1.rs`) assume it.
//!
//! Real: the API server with CAPI v1.10.10's CRDs (v1beta1 only) and the CAPI v1.10.10 core
//! manager with its webhooks, the Kamaji v1.0.0 operator (the tenant runs real kube-apiserver,
//! kube-controller-manager and kube-scheduler processes under the testbed's SIMULATED kubelet),
//! and the kamaji-reconciler process. `--infrastructure none` and no workers: no BYOH, no
//! bootstrap provider.
//!
//! What the planted objects assumed and these controllers showed otherwise: the
//! KamajiControlPlane's `Ready` condition, which CAPI v1.10 mirrors into the Cluster (the
//! reconciler wrote none on this contract), and the severity of its False conditions (pruned
//! by the storage version's schema until it held the field).
//!
//! Its own testbed (`testbed::shared_v1beta1_real`), started by this one test.

use std::time::Duration;

use crate::common::*;
use kube::Client;
use kube::api::ApiResource;
use serde_json::Value;
use testbed::fixtures::reconciler::assert_ran;
use testbed::fixtures::run::{assert_contains, plugin_in};

fn v1beta1_cluster_ar() -> ApiResource {
    ar("cluster.x-k8s.io", "v1beta1", "Cluster")
}

/// The KamajiControlPlane at the version the v1beta1 contract names (the CRD's
/// `cluster.x-k8s.io/v1beta1` label), which CAPI v1.10 reads.
fn v1alpha1_kcp_ar() -> ApiResource {
    ar(
        "controlplane.cluster.x-k8s.io",
        "v1alpha1",
        "KamajiControlPlane",
    )
}

/// The v1beta1 condition `type` of `obj` (`status.conditions`), if any.
fn condition<'a>(obj: &'a Value, type_: &str) -> Option<&'a Value> {
    obj["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

/// The v1beta2 condition `type` CAPI v1.10 keeps beside them (`status.v1beta2.conditions`).
fn v1beta2_condition<'a>(obj: &'a Value, type_: &str) -> Option<&'a Value> {
    obj["status"]["v1beta2"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

fn is_true(c: Option<&Value>) -> bool {
    c.is_some_and(|c| c["status"] == "True")
}

/// `kubectl capi ARGS -n NS`.
fn capi(tb: &testbed::Testbed, ns: &str, args: &[&str]) -> std::process::Output {
    plugin_in(capi_binary().to_str().unwrap(), &tb.kubeconfig, ns, args)
}

/// Waits until CAPI v1.10's Cluster controller has written the control plane's state into the
/// Cluster: `status.controlPlaneReady`, the v1beta1 conditions ControlPlaneInitialized,
/// ControlPlaneReady and Ready, and the endpoint copied from the KamajiControlPlane.
async fn cluster_ready(client: &Client, ns: &str, name: &str) -> Value {
    let clusters = v1beta1_cluster_ar();
    wait_until(
        "CAPI v1.10 to mark the Cluster ready",
        Duration::from_secs(60),
        || async {
            let c = get(client, ns, &clusters, name).await.ok_or("no Cluster")?;
            let s = &c["status"];
            let ready = s["controlPlaneReady"] == true
                && is_true(condition(&c, "ControlPlaneInitialized"))
                && is_true(condition(&c, "ControlPlaneReady"))
                && is_true(condition(&c, "Ready"))
                && c["spec"]["controlPlaneEndpoint"]["host"].is_string();
            ready.then_some(c.clone()).ok_or(format!("{c}"))
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kamaji_cluster_on_capi_1_10_controllers_is_created_upgraded_and_deleted() {
    let tb = testbed_v1beta1_real().await;
    let (client, ns) = tb.namespace("v1b1-real").await;
    let rec = start_reconciler(tb, &ns);
    let name = "old";
    let port = free_port();

    // create --wait: on this server the KamajiControlPlane is written at v1alpha1 and the
    // Cluster at v1beta1, and the reconciler writes the v1beta1 contract's status.
    let out = create_tenant(
        tb,
        &ns,
        name,
        "none",
        &port.to_string(),
        &["--datastore", "default"],
    );
    assert_ran(&out, "create", &rec);
    assert_contains(
        &stderr(&out),
        &format!("cluster {name} is ready: control plane v1.35.4"),
    );

    // What CAPI v1.10 made of it.
    let cluster = cluster_ready(&client, &ns, name).await;
    let kcp = get(&client, &ns, &v1alpha1_kcp_ar(), name).await.unwrap();
    // The Cluster controller owns and labels the control plane it references.
    let owner = &kcp["metadata"]["ownerReferences"][0];
    assert_eq!(owner["kind"], "Cluster", "{kcp}");
    assert_eq!(owner["apiVersion"], "cluster.x-k8s.io/v1beta1", "{kcp}");
    assert_eq!(owner["uid"], cluster["metadata"]["uid"], "{kcp}");
    assert_eq!(
        kcp["metadata"]["labels"]["cluster.x-k8s.io/cluster-name"],
        name
    );
    // The endpoint CAPI copied from the KamajiControlPlane's spec.controlPlaneEndpoint.
    assert_eq!(
        cluster["spec"]["controlPlaneEndpoint"], kcp["spec"]["controlPlaneEndpoint"],
        "{cluster}"
    );
    assert_eq!(cluster["spec"]["controlPlaneEndpoint"]["port"], port);
    assert_eq!(kcp["status"]["initialized"], true, "{kcp}");
    assert_eq!(kcp["status"]["ready"], true, "{kcp}");
    // The v1beta1 condition type: every False condition has its severity, as stored.
    let conds = kcp["status"]["conditions"].as_array().unwrap();
    assert!(
        conds
            .iter()
            .filter(|c| c["status"] == "False")
            .all(|c| c["severity"].is_string()),
        "{conds:?}"
    );
    // The control plane's Ready, which CAPI mirrors into the Cluster's ControlPlaneReady
    // (its own fallback from status.ready would carry no reason).
    let ready = condition(&kcp, "Ready").unwrap_or_else(|| panic!("no Ready: {kcp}"));
    assert_eq!(ready["status"], "True", "{kcp}");
    let mirrored = condition(&cluster, "ControlPlaneReady").unwrap();
    assert!(mirrored["reason"].is_string(), "{cluster}");
    assert_eq!(mirrored["reason"], ready["reason"], "{cluster}");
    // Its v1beta2 conditions (CAPI 1.10 writes both): initialized from status.initialized,
    // available mirrored from the control plane's Available condition, and the counts from
    // spec.replicas and status.replicas.
    let c = &cluster;
    assert!(
        is_true(v1beta2_condition(c, "ControlPlaneInitialized")),
        "{c}"
    );
    assert!(
        is_true(v1beta2_condition(c, "ControlPlaneAvailable")),
        "{c}"
    );
    let counts = &c["status"]["v1beta2"]["controlPlane"];
    assert_eq!(counts["desiredReplicas"], kcp["spec"]["replicas"], "{c}");
    assert_eq!(counts["replicas"], kcp["status"]["replicas"], "{c}");
    assert_eq!(c["status"]["phase"], "Provisioned", "{c}");
    // Not its v1beta2 Available: CAPI v1.10 reports InfrastructureReady Unknown
    // ("InternalError") for any Cluster without an infrastructureRef and with no topology
    // (setInfrastructureReadyCondition, cluster_controller_status.go), whoever the provider.

    // The plugins read what the controllers wrote.
    let status: Value =
        serde_json::from_str(&ok(&kamaji(tb, &ns, &["status", name, "-o", "json"]))).unwrap();
    assert_eq!(status["summary"]["cluster"], name, "{status}");
    assert_eq!(status["summary"]["ready"], true, "{status}");
    assert_eq!(status["summary"]["version"], "v1.35.4", "{status}");
    assert_eq!(
        status["summary"]["endpoint"],
        format!("127.0.0.1:{port}"),
        "{status}"
    );
    // describe's v1beta1 layout (READY, SEVERITY, REASON, ...): both rows Ready.
    let text = ok(&capi(tb, &ns, &["describe", name]));
    let row = |kind: &str| {
        text.lines()
            .find(|l| l.contains(kind))
            .unwrap_or_else(|| panic!("no {kind} row:\n{text}"))
            .split_whitespace()
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    let true_ = "True".to_string();
    assert!(
        row(&format!("Cluster {ns}/{name}")).contains(&true_),
        "{text}"
    );
    let cp = row("KamajiControlPlane");
    assert!(
        cp.contains(&"v1.35.4".into()) || cp.contains(&"v1.35.4,".into()),
        "{text}"
    );
    assert!(cp.contains(&true_), "{text}");

    // upgrade: handed to the reconciler (a ClusterUpgrade), followed to its end.
    let out = capi(
        tb,
        &ns,
        &[
            "upgrade",
            name,
            "--to",
            "v1.36.3",
            "--yes",
            "--wait",
            "--timeout",
            "300s",
        ],
    );
    assert_ran(&out, "upgrade", &rec);
    let kcp = get(&client, &ns, &v1alpha1_kcp_ar(), name).await.unwrap();
    assert_eq!(kcp["spec"]["version"], "v1.36.3", "{kcp}");
    assert_eq!(kcp["status"]["version"], "v1.36.3", "{kcp}");
    let tenant_kc = tenant_kubeconfig(tb, &ns, name);
    wait_until(
        "the tenant to answer as v1.36.3 after the upgrade",
        Duration::from_secs(60),
        || async {
            let raw = kubectl(&tenant_kc, &["get", "--raw", "/version"]);
            let version: Value = serde_json::from_slice(&raw.stdout).unwrap_or(Value::Null);
            (version["gitVersion"] == "v1.36.3")
                .then_some(())
                .ok_or(format!("{version}: {}", stderr(&raw)))
        },
    )
    .await;
    // CAPI v1.10 still finds the control plane ready at the new version, and its ClusterCache
    // reaches the tenant with the `<name>-kubeconfig` Secret the reconciler publishes (it
    // retries a failed connection every 30 s: the first try came before the Secret).
    cluster_ready(&client, &ns, name).await;
    let clusters = v1beta1_cluster_ar();
    wait_until(
        "CAPI v1.10's remote connection probe to reach the tenant",
        Duration::from_secs(90),
        || async {
            let c = get(&client, &ns, &clusters, name)
                .await
                .ok_or("no Cluster")?;
            is_true(v1beta2_condition(&c, "RemoteConnectionProbe"))
                .then_some(())
                .ok_or(format!("{}", c["status"]["v1beta2"]))
        },
    )
    .await;

    // delete --wait: the Cluster controller deletes the KamajiControlPlane and lets the
    // Cluster go.
    let out = delete_wait(tb, &ns, name, "180s");
    assert_ran(&out, "delete", &rec);
    assert!(
        get(&client, &ns, &v1beta1_cluster_ar(), name)
            .await
            .is_none()
    );
    assert!(get(&client, &ns, &v1alpha1_kcp_ar(), name).await.is_none());
    assert!(get(&client, &ns, &tcp_ar(), name).await.is_none());
    drop(rec);
}
