//! Leader election on a Lease, and the external cluster reference behind its flag.

mod common;

use std::time::Duration;

use common::*;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::json;
use testbed::fixtures::run::assert_contains;

fn ready(r: &Reconciler) -> bool {
    r.http_get("/readyz")
        .is_some_and(|s| s.starts_with("HTTP/1.1 200"))
}

/// Holds the Lease (the `kamaji_reconciler_leader` gauge).
fn leads(r: &Reconciler) -> bool {
    r.counter("kamaji_reconciler_leader") == Some(1)
}

#[tokio::test(flavor = "multi_thread")]
async fn one_leader_at_a_time_and_failover() {
    let tb = testbed::shared();
    let (c, ns) = namespace(tb, "kr-leader").await;
    let args = ["--leader-elect", "--leader-election-namespace", ns.as_str()];
    let mut a = start_reconciler(&tb.kubeconfig, &ns, &args);
    wait_for(30, "A leads and is ready", Some(&a), || async {
        (leads(&a) && ready(&a)).then_some(())
    })
    .await;
    let mut b = start_reconciler(&tb.kubeconfig, &ns, &args);
    wait_for(30, "B serves HTTP", Some(&b), || async {
        b.http_get("/healthz").map(|_| ())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!leads(&b), "B must wait for the Lease");
    // Standing by is ready: a Deployment's rolling update needs the new pod Ready while the
    // old one still leads.
    assert!(ready(&b), "a standby replica is ready");
    let lease = Api::<Lease>::namespaced(c.clone(), &ns)
        .get(kamaji_reconciler::leader::LEASE_NAME)
        .await
        .unwrap();
    let holder = lease.spec.unwrap().holder_identity.unwrap();
    assert!(holder.ends_with(&a.child.id().to_string()), "{holder}");
    a.kill();
    wait_for(
        40,
        "B takes over after the Lease expires",
        Some(&b),
        || async { (leads(&b) && ready(&b)).then_some(()) },
    )
    .await;
    // A graceful stop (SIGTERM, as a rolling update's old pod gets) gives the Lease up, so the
    // standby takes over at its next try (every 2 s), not after the 15 s lease duration.
    let mut c3 = start_reconciler(&tb.kubeconfig, &ns, &args);
    wait_for(30, "C serves HTTP", Some(&c3), || async {
        c3.http_get("/healthz").map(|_| ())
    })
    .await;
    let term = std::process::Command::new("kill")
        .args(["-TERM", &b.child.id().to_string()])
        .status()
        .unwrap();
    assert!(term.success());
    let t0 = std::time::Instant::now();
    let status = b.child.wait().unwrap();
    assert!(status.success(), "B exits cleanly on SIGTERM: {status}");
    wait_for(12, "C takes over the released Lease", Some(&c3), || async {
        leads(&c3).then_some(())
    })
    .await;
    let took = t0.elapsed();
    assert!(
        took < Duration::from_secs(12),
        "hand-over after a graceful stop took {took:?}, not under the 15 s lease"
    );
    let lease = Api::<Lease>::namespaced(c.clone(), &ns)
        .get(kamaji_reconciler::leader::LEASE_NAME)
        .await
        .unwrap();
    let holder = lease.spec.unwrap().holder_identity.unwrap();
    assert!(holder.ends_with(&c3.child.id().to_string()), "{holder}");
    c3.kill();
}

#[tokio::test(flavor = "multi_thread")]
async fn external_cluster_reference_needs_its_flag_and_cleans_up() {
    let tb = testbed::shared();
    let (c, ns) = tb.namespace("kr-ecr").await;
    let (_, remote_ns) = tb.namespace("kr-ecr-remote").await;
    install_our_crds(&c).await;
    // The "remote" cluster is the testbed itself, reached through a kubeconfig Secret.
    let kubeconfig = std::fs::read_to_string(&tb.kubeconfig).unwrap();
    let s: Secret = serde_json::from_value(
        json!({"metadata": {"name": "remote"}, "stringData": {"kubeconfig": kubeconfig}}),
    )
    .unwrap();
    Api::<Secret>::namespaced(c.clone(), &ns)
        .patch(
            "remote",
            &PatchParams::apply(FIXTURE),
            &Patch::Apply(&{
                let mut v = serde_json::to_value(&s).unwrap();
                v["apiVersion"] = json!("v1");
                v["kind"] = json!("Secret");
                v
            }),
        )
        .await
        .unwrap();
    cluster_with_kcp(&c, &ns, "v1beta2", "far", "far-cp", None,
        json!({"services": {"cidrBlocks": ["10.96.0.0/16"]}}),
        json!({"version": "1.33.0", "deployment": {"externalClusterReference": {
            "kubeconfigSecretName": "remote", "kubeconfigSecretKey": "kubeconfig", "deploymentNamespace": remote_ns}}})).await;

    // Without the flag: a condition says why nothing happens.
    let mut r = start_reconciler(&tb.kubeconfig, &ns, &[]);
    let m = wait_condition(
        &c,
        &ns,
        "v1alpha2",
        "far-cp",
        "FoundExternalReferenceClient=False/FeatureDisabled",
        &r,
    )
    .await;
    assert_contains(&m, "--external-cluster-reference");
    r.kill();

    // With it: the TCP lives in the remote namespace as kcp-<uid>, with the finalizer.
    let r = start_reconciler(&tb.kubeconfig, &ns, &["--external-cluster-reference"]);
    let kcp = get(&c, &ns, &kcp_ar("v1alpha2"), "far-cp").await.unwrap();
    let tcp_name = format!("kcp-{}", kcp["metadata"]["uid"].as_str().unwrap());
    wait_for(60, "the remote TCP", Some(&r), || {
        get_tcp(&c, &remote_ns, &tcp_name)
    })
    .await;
    wait_for(30, "the finalizer", Some(&r), || async {
        let k = get(&c, &ns, &kcp_ar("v1alpha2"), "far-cp").await?;
        (k["metadata"]["finalizers"] == json!(["ecr.kamaji.clastix.io/finalizer"])).then_some(())
    })
    .await;
    kamaji_publish(
        &c,
        &remote_ns,
        &tcp_name,
        "10.2.0.1:6443",
        "v1.33.0",
        "Ready",
        1,
    )
    .await;
    wait_for(60, "ready through the remote cluster", Some(&r), || async {
        let k = get(&c, &ns, &kcp_ar("v1alpha2"), "far-cp").await?;
        let kc = secret(&c, &ns, "far-kubeconfig").await?;
        (k["status"]["ready"] == json!(true) && data(&kc, "value")?.contains("10.2.0.1"))
            .then_some(())
    })
    .await;

    // Deletion removes the remote TCP and releases the finalizer.
    dyn_api(&c, &ns, &kcp_ar("v1alpha2"))
        .delete("far-cp", &DeleteParams::default())
        .await
        .unwrap();
    wait_for(60, "KCP and remote TCP gone", Some(&r), || async {
        let k = get(&c, &ns, &kcp_ar("v1alpha2"), "far-cp").await;
        let t = get_tcp(&c, &remote_ns, &tcp_name).await;
        (k.is_none() && t.is_none()).then_some(())
    })
    .await;
}

/// The TenantControlPlane of an external cluster reference is watched in that cluster, a second
/// API server of its own: its changes reach the KamajiControlPlane within seconds (the
/// KamajiControlPlane's own resync is 5 minutes), and still do after that API server restarts.
/// No Kamaji runs on the second API server: the test writes what Kamaji would (`kamaji_publish`).
#[tokio::test(flavor = "multi_thread")]
async fn external_cluster_reference_is_watched_across_a_remote_restart() {
    let tb = testbed::shared();
    let remote = testbed::Testbed::start(testbed::Options {
        controller_manager: false,
        ..Default::default()
    })
    .await
    .unwrap();
    let rc = remote.client().await;
    let (c, ns) = namespace(tb, "kr-ecr-watch").await;
    install_our_crds(&c).await;
    let remote_ns = "tenants";
    Api::<k8s_openapi::api::core::v1::Namespace>::all(rc.clone())
        .patch(
            remote_ns,
            &PatchParams::apply(FIXTURE),
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "Namespace",
                                 "metadata": {"name": remote_ns}})),
        )
        .await
        .unwrap();
    let kubeconfig = std::fs::read_to_string(&remote.kubeconfig).unwrap();
    Api::<Secret>::namespaced(c.clone(), &ns)
        .patch(
            "remote",
            &PatchParams::apply(FIXTURE),
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "Secret",
                                 "metadata": {"name": "remote"},
                                 "stringData": {"kubeconfig": kubeconfig}})),
        )
        .await
        .unwrap();
    cluster_with_kcp(
        &c,
        &ns,
        "v1beta2",
        "far",
        "far-cp",
        None,
        json!({"services": {"cidrBlocks": ["10.96.0.0/16"]}}),
        json!({"version": "1.33.0", "deployment": {"externalClusterReference": {
            "kubeconfigSecretName": "remote", "kubeconfigSecretKey": "kubeconfig",
            "deploymentNamespace": remote_ns}}}),
    )
    .await;
    let r = start_reconciler(&tb.kubeconfig, &ns, &["--external-cluster-reference"]);
    let kcp = get(&c, &ns, &kcp_ar("v1alpha2"), "far-cp").await.unwrap();
    let tcp = format!("kcp-{}", kcp["metadata"]["uid"].as_str().unwrap());
    wait_for(60, "the TCP on the second API server", Some(&r), || {
        get_tcp(&rc, remote_ns, &tcp)
    })
    .await;

    // Kamaji's answer there reaches the KamajiControlPlane through the watch.
    let endpoint_seen = |server: &'static str| {
        let (c, ns) = (c.clone(), ns.clone());
        move || {
            let (c, ns) = (c.clone(), ns.clone());
            async move {
                let k = get(&c, &ns, &kcp_ar("v1alpha2"), "far-cp").await?;
                let kc = secret(&c, &ns, "far-kubeconfig").await?;
                (k["status"]["ready"] == json!(true) && data(&kc, "value")?.contains(server))
                    .then_some(())
            }
        }
    };
    kamaji_publish(&rc, remote_ns, &tcp, "10.3.0.1:6443", "v1.33.0", "Ready", 1).await;
    wait_for(
        20,
        "the remote TCP's endpoint, watched",
        Some(&r),
        endpoint_seen("10.3.0.1"),
    )
    .await;

    // The second API server restarts: the watch comes back by itself.
    remote.restart_process("kube-apiserver").await.unwrap();
    kamaji_publish(&rc, remote_ns, &tcp, "10.3.0.2:6443", "v1.33.0", "Ready", 1).await;
    wait_for(
        60,
        "the remote TCP's new endpoint, watched after the restart",
        Some(&r),
        endpoint_seen("10.3.0.2"),
    )
    .await;
}
