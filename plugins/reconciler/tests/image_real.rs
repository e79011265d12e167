//! The reconciler from its image with the real controllers around it: `kubectl kamaji install
//! --image` on a testbed running the real Cluster API v1.14 core and kubeadm bootstrap managers
//! and the Kamaji v1.0.0 operator (each tenant a real kube-apiserver, kube-controller-manager
//! and kube-scheduler under the testbed's SIMULATED kubelet of tenant pods). Nothing here is
//! played: `kubectl kamaji create` makes a v1.35.4 tenant that the image's reconciler and the
//! real Kamaji and CAPI bring to Ready; `kubectl capi upgrade --to v1.37.2` hands a two-minor
//! upgrade to the reconciler (a ClusterUpgrade: v1.36.3, then v1.37.2, each minor a real
//! release); the leader is killed while the first step rolls, and the standby, which takes the
//! Lease, finishes the upgrade once: no step started again, one rollout per minor.

mod common;

use common::image::*;
use common::*;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use kcore::ops::{ClusterUpgrade, phase};
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};
use testbed::fixtures::reconciler::push_image;

async fn upgrade_of(c: &Client, ns: &str, name: &str) -> Option<ClusterUpgrade> {
    Api::<ClusterUpgrade>::namespaced(c.clone(), ns)
        .get_opt(name)
        .await
        .ok()
        .flatten()
}

/// `(phase, message)` of the upgrade and of each step, for failure messages.
fn upgrade_story(u: &ClusterUpgrade) -> String {
    let s = u.status.clone().unwrap_or_default();
    let steps: Vec<String> = s
        .steps
        .iter()
        .map(|p| format!("{}:{}:{}", p.number, p.phase, p.reason))
        .collect();
    format!(
        "phase {:?} ({:?}), steps {steps:?}",
        s.phase,
        s.message.unwrap_or_default()
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn from_its_image_on_real_kamaji_and_capi_a_two_minor_upgrade_outlives_its_leader() {
    let tb = testbed::shared_real_images();
    let kc = &tb.kubeconfig;
    let (image, _) = push_image(tb, "real");
    let out = plugin(
        "kamaji",
        kc,
        &[
            "install",
            "--image",
            &image,
            "--replicas",
            "2",
            "--wait",
            "--timeout",
            "3m",
        ],
    );
    assert!(
        out.contains("deployment/kamaji-reconciler rolled out"),
        "{out}"
    );
    let c = tb.client().await;
    let (_, ns) = tb.namespace("kr-real").await;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();
    let name = "up";

    // create --wait: the image's reconciler, the real Kamaji and the real CAPI core manager.
    let mut args = vec![
        "create",
        name,
        "--infrastructure",
        "none",
        "--kubernetes-version",
        "v1.35.4",
        "--datastore",
        "default",
        "--wait",
        "--timeout",
        "300s",
        "-n",
        &ns,
    ];
    args.extend(testbed::fixtures::tenant_flags(&port));
    let out = plugin("kamaji", kc, &args);
    assert!(
        out.contains(&format!("cluster {name} is ready: control plane v1.35.4")),
        "{out}"
    );

    // The two-minor upgrade, handed to the reconciler: one step for a Kamaji control plane
    // (its workers, none here, would follow), which the KamajiControlPlane controller walks a
    // minor at a time on the TenantControlPlane, since Kamaji refuses to skip one.
    let out = plugin(
        "capi",
        kc,
        &["upgrade", name, "--to", "v1.37.2", "--yes", "-n", &ns],
    );
    assert!(out.contains("to v1.37.2 in 1 step(s)"), "{out}");

    // While the tenant rolls to the intermediate minor, kill the leader.
    wait_image(tb, 120, "the tenant on its way to v1.36.3", || async {
        let tcp = get_tcp(&c, &ns, name).await?;
        (tcp["spec"]["kubernetes"]["version"] == "v1.36.3").then_some(())
    })
    .await;
    let first = upgrade_of(&c, &ns, name).await.unwrap();
    let status0 = first.status.clone().unwrap_or_default();
    assert_eq!(
        (
            status0.phase.as_deref(),
            status0.steps.first().map(|s| s.phase.as_str())
        ),
        (Some(phase::RUNNING), Some(phase::RUNNING)),
        "{}",
        upgrade_story(&first)
    );
    assert_eq!(
        status0.path,
        ["v1.36.3", "v1.37.2"],
        "{}",
        upgrade_story(&first)
    );
    let lease0 = lease(&c).await.and_then(|l| l.spec).unwrap_or_default();
    // The leader's node lost: its process stops answering (SIGSTOP) until the standby holds
    // the Lease, then dies. (A process killed outright comes back in the same pod, whose
    // identity still holds the Lease, and simply resumes.)
    let (leader_pid, leader) = leader_process(tb, &c).await;
    signal(leader_pid, "STOP");
    // Stopped mid-walk: the intermediate minor still rolling, the last one not yet asked for.
    let tcp = get_tcp(&c, &ns, name).await.unwrap();
    assert_eq!(tcp["spec"]["kubernetes"]["version"], "v1.36.3");
    let took = std::time::Instant::now();
    let holder = wait_image(tb, 60, "the standby to take the Lease", || async {
        lease_holder(&c).await.filter(|h| *h != leader)
    })
    .await;
    kill(leader_pid);
    eprintln!(
        "the leader {leader} stopped during the upgrade; {holder} leads {:?} later",
        took.elapsed()
    );

    let done = wait_image(
        tb,
        480,
        "the upgrade to succeed after the leader was killed",
        || async {
            let u = upgrade_of(&c, &ns, name).await?;
            let p = u.status.as_ref()?.phase.clone()?;
            assert_ne!(p, phase::FAILED, "{}", upgrade_story(&u));
            (p == phase::SUCCEEDED).then_some(u)
        },
    )
    .await;
    let status = done.status.clone().unwrap_or_default();

    // Once: the same run (its start and its first step's start kept), every step succeeded,
    // nothing in the history (a second run would have pushed the first there).
    assert_eq!(
        status.started_at,
        status0.started_at,
        "{}",
        upgrade_story(&done)
    );
    assert_eq!(
        status.steps.first().and_then(|s| s.started_at.clone()),
        status0.steps.first().and_then(|s| s.started_at.clone()),
        "step 1 was started again by the new leader"
    );
    assert!(
        status.steps.iter().all(|s| s.phase == phase::SUCCEEDED) && status.steps.len() == 1,
        "{}",
        upgrade_story(&done)
    );
    assert!(status.history.is_empty(), "{:?}", status.history);
    assert_eq!(status.progress.as_deref(), Some("1/1"));

    // The new leader is the other pod, and the Lease changed hands once.
    let lease1 = lease(&c).await.and_then(|l| l.spec).unwrap_or_default();
    assert_eq!(
        lease1.holder_identity.as_deref(),
        Some(holder.as_str()),
        "the Lease went back to the killed leader's pod"
    );
    assert_eq!(
        lease1.lease_transitions.unwrap_or(0),
        lease0.lease_transitions.unwrap_or(0) + 1,
        "one hand-over: {lease0:?} -> {lease1:?}"
    );

    // What the real controllers show: Kamaji's TenantControlPlane and the KamajiControlPlane at
    // v1.37.2, the tenant's Deployment rolled once per minor (three ReplicaSets, revision 3),
    // and the tenant API server answering as v1.37.2.
    let kcp = get(&c, &ns, &kcp_ar("v1alpha2"), name).await.unwrap();
    assert_eq!(kcp["spec"]["version"], "v1.37.2");
    assert_eq!(kcp["status"]["version"], "v1.37.2", "{}", kcp["status"]);
    let tcp = get_tcp(&c, &ns, name).await.unwrap();
    assert_eq!(
        tcp["status"]["kubernetesResources"]["version"]["version"],
        "v1.37.2"
    );
    let deploy: Deployment = Api::namespaced(c.clone(), &ns).get(name).await.unwrap();
    let revision = deploy
        .annotations()
        .get("deployment.kubernetes.io/revision")
        .cloned();
    let sets: Vec<String> = Api::<ReplicaSet>::namespaced(c.clone(), &ns)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .filter(|r| {
            r.owner_references()
                .iter()
                .any(|o| o.kind == "Deployment" && o.name == name)
        })
        .map(|r| r.name_any())
        .collect();
    assert_eq!(
        (revision.as_deref(), sets.len()),
        (Some("3"), 3),
        "one rollout per minor: {sets:?}"
    );
    let tenant = tb.dir.join(format!("{ns}-{name}.kubeconfig"));
    std::fs::write(
        &tenant,
        plugin_output("kamaji", kc, &["kubeconfig", "get", name, "-n", &ns]).stdout,
    )
    .unwrap();
    wait_image(tb, 60, "the tenant to answer as v1.37.2", || async {
        let o = std::process::Command::new("/usr/bin/kubectl")
            .arg("--kubeconfig")
            .arg(&tenant)
            .args(["get", "--raw", "/version"])
            .output()
            .ok()?;
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).ok()?;
        (v["gitVersion"] == "v1.37.2").then_some(())
    })
    .await;
}
