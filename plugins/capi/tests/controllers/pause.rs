//! `pause`, `resume` and `restart`.

use crate::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_resume_and_restart() {
    // The same testbed as the other tests of this binary (one testbed per binary); no host
    // matches this cluster's selectors, so the real BYOH controller attaches nothing.
    let s = Story::start("pause").await;
    let _kcp = tasks(vec![tokio::spawn(play_kcp(s.client.clone(), s.ns.clone()))]);
    make_cluster(&s.client, &s.ns, "p1", 1, &s.tb.kubeconfig).await;
    let paused = async || s.get(&cluster_ar(), "p1").await.data["spec"]["paused"].clone();

    let o = s.ok(&["pause", "p1"]);
    assert_eq!(out(&o), "cluster.cluster.x-k8s.io/p1 paused\n");
    assert_eq!(paused().await, true);
    let o = s.run(&["pause", "p1"]);
    assert_eq!(out(&o), "cluster.cluster.x-k8s.io/p1 is already paused\n");
    let o = s.run(&["resume", "p1", "--dry-run=server"]);
    assert_contains(&out(&o), "resumed (server dry run)");
    assert_eq!(paused().await, true);
    let o = s.ok(&["resume", "p1"]);
    assert_eq!(out(&o), "cluster.cluster.x-k8s.io/p1 resumed\n");
    assert_eq!(paused().await, false);

    // restart: the rollout time is set, and the real MachineDeployment controller rolls a new
    // MachineSet.
    let machine_sets = async |n| s.of_cluster(&ms_ar(), "p1").await.len() == n;
    eventually(
        "the first MachineSet",
        Duration::from_secs(60),
        async || machine_sets(1).await,
    )
    .await;
    let o = s.ok(&["restart", "p1", "--deployment", "p1-md-0"]);
    assert_eq!(
        out(&o),
        "machinedeployment.cluster.x-k8s.io/p1-md-0 restarted\n"
    );
    let md = s.get(&md_ar(), "p1-md-0").await;
    assert!(
        md.data["spec"]["rollout"]["after"].is_string(),
        "{}",
        md.data
    );
    eventually(
        "a second MachineSet from the rollout",
        Duration::from_secs(60),
        async || machine_sets(2).await,
    )
    .await;
    // Without --deployment: the KubeadmControlPlane too (spec.rollout.after).
    let o = s.ok(&["restart", "p1"]);
    assert_contains(
        &out(&o),
        "kubeadmcontrolplane.controlplane.cluster.x-k8s.io/p1-control-plane restarted",
    );
    let k = s.get(&kcp_ar(), "p1-control-plane").await;
    assert!(k.data["spec"]["rollout"]["after"].is_string(), "{}", k.data);
    let o = s.fails(1, &["restart", "p1", "--deployment", "p1-md-9"]);
    assert_contains(&err(&o), "did you mean \"p1-md-0\"?");
}
