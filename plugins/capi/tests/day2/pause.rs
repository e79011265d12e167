//! `pause`, `resume` and `restart`.

use crate::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_resume_and_restart() {
    let _turn = TURN.lock().await;
    // The same testbed as the other tests of this binary (one testbed per binary); no host
    // matches this cluster's selectors, so the real BYOH controller attaches nothing.
    let tb = testbed::shared_real();
    let (client, ns) = tb.namespace("pause").await;
    let kcp = tokio::spawn(play_kcp(client.clone(), ns.clone()));
    make_cluster(&client, &ns, "p1", 1, &tb.kubeconfig).await;
    let clusters = api(&client, &ns, &cluster_ar());

    let o = ok(tb, &ns, &["pause", "p1"]);
    assert_eq!(out(&o), "cluster.cluster.x-k8s.io/p1 paused\n");
    assert_eq!(
        clusters.get("p1").await.unwrap().data["spec"]["paused"],
        true
    );
    let o = run(&tb.kubeconfig, &ns, &["pause", "p1"]);
    assert_eq!(out(&o), "cluster.cluster.x-k8s.io/p1 is already paused\n");
    let o = run(&tb.kubeconfig, &ns, &["resume", "p1", "--dry-run=server"]);
    assert_contains(&out(&o), "resumed (server dry run)");
    assert_eq!(
        clusters.get("p1").await.unwrap().data["spec"]["paused"],
        true
    );
    let o = ok(tb, &ns, &["resume", "p1"]);
    assert_eq!(out(&o), "cluster.cluster.x-k8s.io/p1 resumed\n");
    assert_eq!(
        clusters.get("p1").await.unwrap().data["spec"]["paused"],
        false
    );

    // restart: the rollout time is set, and the real MachineDeployment controller rolls a new
    // MachineSet.
    eventually("the first MachineSet", Duration::from_secs(60), || {
        let (c, n) = (client.clone(), ns.clone());
        async move {
            api(&c, &n, &ms_ar())
                .list(&ListParams::default().labels("cluster.x-k8s.io/cluster-name=p1"))
                .await
                .unwrap()
                .items
                .len()
                == 1
        }
    })
    .await;
    let o = ok(tb, &ns, &["restart", "p1", "--deployment", "p1-md-0"]);
    assert_eq!(
        out(&o),
        "machinedeployment.cluster.x-k8s.io/p1-md-0 restarted\n"
    );
    let md = api(&client, &ns, &md_ar()).get("p1-md-0").await.unwrap();
    assert!(
        md.data["spec"]["rollout"]["after"].is_string(),
        "{}",
        md.data
    );
    eventually(
        "a second MachineSet from the rollout",
        Duration::from_secs(60),
        || {
            let (c, n) = (client.clone(), ns.clone());
            async move {
                api(&c, &n, &ms_ar())
                    .list(&ListParams::default().labels("cluster.x-k8s.io/cluster-name=p1"))
                    .await
                    .unwrap()
                    .items
                    .len()
                    == 2
            }
        },
    )
    .await;
    // Without --deployment: the KubeadmControlPlane too (spec.rollout.after).
    let o = ok(tb, &ns, &["restart", "p1"]);
    assert!(
        out(&o).contains(
            "kubeadmcontrolplane.controlplane.cluster.x-k8s.io/p1-control-plane restarted"
        ),
        "{}",
        out(&o)
    );
    let k = api(&client, &ns, &kcp_ar())
        .get("p1-control-plane")
        .await
        .unwrap();
    assert!(k.data["spec"]["rollout"]["after"].is_string(), "{}", k.data);
    let o = run(
        &tb.kubeconfig,
        &ns,
        &["restart", "p1", "--deployment", "p1-md-9"],
    );
    assert_eq!(o.status.code(), Some(1));
    assert_contains(&err(&o), "did you mean \"p1-md-0\"?");
    kcp.abort();
}
