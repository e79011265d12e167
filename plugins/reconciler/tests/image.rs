//! The reconciler as users run it: from its image, installed by `kubectl kamaji install --image`.
//!
//! `make image` (run by `make test` first) writes the OCI image to `target/image/`; the test
//! pushes it with crane to the testbed's local registry, `kubectl kamaji install` deploys it,
//! and the testbed's SIMULATED kubelet of image pods (`testbed::pods::image`) pulls it and runs
//! its entrypoint chrooted into the image, as uid 65532, with the ServiceAccount token of the
//! Deployment's ServiceAccount at the standard path and nothing else to authenticate with. So
//! every request the reconciler makes is checked against the ClusterRole `install` wrote.
//! Then two replicas: one leads, the other stands by (and is Ready, or a rolling update would
//! never finish), killing the leader's process hands the work over within the lease duration,
//! and a rolling update of both replicas completes.
//!
//! Kamaji and Cluster API are played here (the test is about the pod: its user, token, read-only
//! root, Lease and rollout, on a testbed without tenants); `image_real.rs` runs the image with the
//! real ones.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::image::{self, *};
use common::*;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, ListParams};
use serde_json::{Value, json};
use testbed::fixtures::reconciler::push_image;

fn tb() -> &'static testbed::Testbed {
    testbed::shared_images()
}

fn kamaji(kubeconfig: &Path, args: &[&str]) -> String {
    plugin("kamaji", kubeconfig, args)
}

async fn wait<T, F, Fut>(secs: u64, what: &str, f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    wait_image(tb(), secs, what, f).await
}

async fn rolled_out(c: &Client, replicas: i32, what: &str) {
    image::rolled_out(tb(), c, replicas, what).await
}

/// Plays Cluster API (a Cluster owning a KamajiControlPlane) and Kamaji (the TCP's Secrets and
/// status once the reconciler made it), and waits for the reconciler to call the KCP ready.
async fn reconciled(c: &Client, ns: &str, cluster: &str, secs: u64) -> Value {
    let kcp = format!("{cluster}-cp");
    plain_cluster(c, ns, cluster, small_net(), json!({"version": "1.35.0"})).await;
    wait(secs, &format!("the reconciler makes {kcp}'s TCP"), || {
        get_tcp(c, ns, &kcp)
    })
    .await;
    kamaji_publish(c, ns, &kcp, "10.0.0.40:6443", "v1.35.0", "Ready", 2).await;
    wait(60, &format!("{kcp} ready"), || async {
        get(c, ns, &kcp_ar("v1alpha2"), &kcp).await.filter(ready)
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn the_image_runs_in_cluster_as_its_service_account_and_hands_over_leadership() {
    let tb = tb();
    let registry = tb.registry.clone().expect("the testbed's registry");
    let (image, digest) = push_image(tb, "test");
    let out = kamaji(&tb.kubeconfig, &["install", "--image", &image]);
    assert!(out.contains("kamaji-reconciler"), "{out}");
    let c = tb.client().await;
    rolled_out(
        &c,
        1,
        "the reconciler's Deployment available from its image",
    )
    .await;
    let pods: Api<Pod> = Api::namespaced(c.clone(), INSTALL_NS);
    let list = pods.list(&ListParams::default()).await.unwrap();
    let status = &list.items[0]
        .status
        .clone()
        .unwrap()
        .container_statuses
        .unwrap()[0];
    assert!(
        status.image_id.ends_with(&digest),
        "the kubelet ran the pushed digest: {}",
        status.image_id
    );
    // The process: the image's binary, as uid 65532, with the ServiceAccount token and the
    // in-cluster address only (no kubeconfig of the testbed's).
    let procs = reconciler_processes(&c).await;
    assert_eq!(procs.len(), 1, "{procs:?}");
    let (pid, _) = &procs[0];
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let uid = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
    assert!(
        uid.split_whitespace().skip(1).all(|u| u == "65532"),
        "{uid}"
    );
    let env = proc_env(*pid);
    assert!(
        env.iter()
            .any(|e| e.starts_with("KUBERNETES_SERVICE_HOST=")),
        "{env:?}"
    );
    assert!(!env.iter().any(|e| e.starts_with("KUBECONFIG")), "{env:?}");
    let token = std::fs::read_to_string(format!(
        "/proc/{pid}/root/var/run/secrets/kubernetes.io/serviceaccount/token"
    ))
    .unwrap();
    assert!(token.starts_with("ey"), "a JWT at the standard path");
    // readOnlyRootFilesystem: the container's root is a read-only mount.
    let write = std::fs::write(format!("/proc/{pid}/root/tmp/x"), "x");
    assert_eq!(
        write.as_ref().map_err(|e| e.raw_os_error()),
        Err(Some(libc_erofs())),
        "{write:?}"
    );

    // It reconciles as its ServiceAccount: a Cluster and KamajiControlPlane made ready.
    let (_, ns) = tb.namespace("kr-image").await;
    reconciled(&c, &ns, "one", 60).await;

    // Two replicas: the standby is Ready too, one holds the Lease.
    kamaji(
        &tb.kubeconfig,
        &["install", "--image", &image, "--replicas", "2"],
    );
    rolled_out(&c, 2, "two replicas Ready (the standby too)").await;
    let leader = wait(30, "a Lease holder", || lease_holder(&c)).await;
    let procs = reconciler_processes(&c).await;
    assert_eq!(procs.len(), 2, "{procs:?}");
    let (leader_pid, _) = procs
        .iter()
        .find(|(_, pod)| *pod == leader)
        .unwrap_or_else(|| panic!("no process of the leader {leader}: {procs:?}"));

    // Kill the leader's process (a crash): the work goes on within the lease duration. A
    // Cluster created meanwhile is reconciled, once.
    kill(*leader_pid);
    let t0 = Instant::now();
    let lease0 = Api::<Lease>::namespaced(c.clone(), INSTALL_NS)
        .get(kamaji_reconciler::leader::LEASE_NAME)
        .await
        .unwrap();
    let kcp = reconciled(&c, &ns, "two", 40).await;
    let took = t0.elapsed();
    assert!(
        took < Duration::from_secs(25),
        "the new leader finished the work {took:?} after the crash"
    );
    let tcps = dyn_api(&c, &ns, &tcp_ar())
        .list(&ListParams::default())
        .await
        .unwrap();
    let names: Vec<String> = tcps
        .items
        .iter()
        .map(|t| t.metadata.name.clone().unwrap_or_default())
        .collect();
    assert_eq!(
        names,
        ["one-cp", "two-cp"],
        "one TCP per KamajiControlPlane"
    );
    assert!(kcp["status"]["ready"] == json!(true));
    let lease = Api::<Lease>::namespaced(c.clone(), INSTALL_NS)
        .get(kamaji_reconciler::leader::LEASE_NAME)
        .await
        .unwrap();
    let (s0, s1) = (lease0.spec.unwrap(), lease.spec.unwrap());
    let holder = s1.holder_identity.clone().unwrap_or_default();
    assert!(
        s1.lease_transitions.unwrap_or(0) <= s0.lease_transitions.unwrap_or(0) + 1,
        "one hand-over, not a flapping Lease: {s0:?} -> {s1:?}"
    );
    assert!(
        reconciler_processes(&c)
            .await
            .iter()
            .any(|(_, p)| *p == holder),
        "the holder {holder} runs"
    );
    eprintln!("work resumed {took:?} after the leader was killed; Lease now held by {holder}");

    // A rolling update of both replicas finishes (the standby pods are Ready while the old
    // leader still runs), and the Lease passes to a new pod. `install --wait` returns only
    // once the rollout is done: the Deployment is rolled out when it does, not later.
    let image2 = format!("{registry}/kamaji-reconciler:test2");
    assert_eq!(push_image(tb, "test2").0, image2);
    let out = kamaji(
        &tb.kubeconfig,
        &[
            "install",
            "--image",
            &image2,
            "--replicas",
            "2",
            "--wait",
            "--timeout",
            "2m",
        ],
    );
    assert!(
        out.contains("deployment/kamaji-reconciler rolled out"),
        "{out}"
    );
    assert!(
        is_rolled_out(&c, 2).await,
        "install --wait returned before the rollout to :test2 was done: {:?}",
        deployment(&c).await.status
    );
    let pods_now: Vec<String> = pods
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| p.metadata.name.unwrap_or_default())
        .collect();
    let new_holder = wait(30, "a new pod holds the Lease", || async {
        lease_holder(&c).await.filter(|h| pods_now.contains(h))
    })
    .await;
    reconciled(&c, &ns, "three", 40).await;
    eprintln!("after the rolling update the Lease is held by {new_holder}");
}

/// EROFS on Linux.
fn libc_erofs() -> i32 {
    30
}
