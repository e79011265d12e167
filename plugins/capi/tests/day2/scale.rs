//! `scale`: workers and control plane, with the free-host preflight.

use crate::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scale_workers_and_control_plane_with_a_host_preflight() {
    let _turn = TURN.lock().await;
    let tb = testbed::shared_real();
    let (client, ns) = tb.namespace("scale").await;
    let workers = pool(&ns, "w", 3, "worker");
    let cps = pool(&ns, "c", 2, "control-plane");
    register_then_stop(tb, &client, cps).await;
    let _players = play(tb, &client, &ns, workers);
    make_cluster(&client, &ns, "c1", 1, &tb.kubeconfig).await;
    eventually("one worker host claimed", Duration::from_secs(90), || {
        let (c, n) = (client.clone(), ns.clone());
        async move { claimed_hosts(&c, &n).await.len() == 1 }
    })
    .await;

    // Up: 1 -> 3 workers, waiting until they are ready.
    let o = ok(
        tb,
        &ns,
        &words("scale c1 --workers 3 --wait --timeout 150s"),
    );
    assert_contains(
        &out(&o),
        "machinedeployment.cluster.x-k8s.io/c1-md-0 scaled from 1 to 3",
    );
    assert_eq!(count_machines(&client, &ns, "c1").await, 3);
    assert_eq!(claimed_hosts(&client, &ns).await.len(), 3);
    let md = api(&client, &ns, &md_ar()).get("c1-md-0").await.unwrap();
    assert_eq!(md.data["spec"]["replicas"], 3);
    // The field manager is ours.
    let managers: Vec<String> = md
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .filter_map(|m| m.manager)
        .collect();
    assert!(managers.iter().any(|m| m == "kubectl-capi"), "{managers:?}");

    // No free worker host left: refused, nothing changes.
    let o = run(&tb.kubeconfig, &ns, &["scale", "c1", "--workers", "5"]);
    assert_eq!(o.status.code(), Some(1), "stderr: {}", err(&o));
    let first = err(&o).lines().next().unwrap_or("").to_string();
    assert!(
        first.contains(&format!(
            "needs 2 free hosts matching {{pool={ns},role=worker}}; 0 available"
        )),
        "{first}"
    );
    assert!(
        first.starts_with("error: MachineDeployment/c1-md-0 needs 2 free hosts"),
        "{first}"
    );
    let md = api(&client, &ns, &md_ar()).get("c1-md-0").await.unwrap();
    assert_eq!(md.data["spec"]["replicas"], 3);

    // Choose what goes (issue 17): --remove-host removes exactly the machine on that host.
    let mut hosts = claimed_hosts(&client, &ns).await;
    hosts.sort();
    let victim = hosts[1].clone();
    let victim_bm = api(&client, &ns, &host_ar())
        .get(&victim)
        .await
        .unwrap()
        .data["status"]["machineRef"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    // Bad input first, each one line, nothing changed: a missing host, a free host.
    let o = run(
        &tb.kubeconfig,
        &ns,
        &["scale", "c1", "--remove-host", "no-such-host"],
    );
    assert_eq!(o.status.code(), Some(1), "{}", err(&o));
    assert_eq!(
        err(&o).lines().next().unwrap(),
        "error: ByoHost \"no-such-host\" not found"
    );
    let free = format!("{ns}-c01");
    let o = run(
        &tb.kubeconfig,
        &ns,
        &["scale", "c1", "--remove-host", &free],
    );
    assert_eq!(o.status.code(), Some(1), "{}", err(&o));
    assert_contains(&err(&o), &format!("ByoHost {free} serves no machine"));
    let o = run(
        &tb.kubeconfig,
        &ns,
        &["scale", "c1", "--remove-host", &victim, "--workers", "3"],
    );
    assert_eq!(o.status.code(), Some(1), "{}", err(&o));
    assert_contains(&err(&o), "pass --workers 2 or less");
    let md = api(&client, &ns, &md_ar()).get("c1-md-0").await.unwrap();
    assert_eq!(md.data["spec"]["replicas"], 3, "refusals change nothing");
    let o = ok(
        tb,
        &ns,
        &[
            "scale",
            "c1",
            "--remove-host",
            &victim,
            "--wait",
            "--timeout",
            "120s",
        ],
    );
    assert_contains(&out(&o), "marked for deletion");
    assert_contains(
        &out(&o),
        "machinedeployment.cluster.x-k8s.io/c1-md-0 scaled from 3 to 2",
    );
    eventually("the chosen host released", Duration::from_secs(60), || {
        let (c, n, v) = (client.clone(), ns.clone(), victim.clone());
        async move {
            let claimed = claimed_hosts(&c, &n).await;
            claimed.len() == 2 && !claimed.contains(&v)
        }
    })
    .await;
    assert_eq!(count_machines(&client, &ns, "c1").await, 2);
    let left: Vec<String> = api(&client, &ns, &machine_ar())
        .list(
            &ListParams::default()
                .labels("cluster.x-k8s.io/cluster-name=c1,!cluster.x-k8s.io/control-plane"),
        )
        .await
        .unwrap()
        .items
        .iter()
        .filter_map(|m| {
            m.data["spec"]["infrastructureRef"]["name"]
                .as_str()
                .map(str::to_string)
        })
        .collect();
    assert!(
        !left.contains(&victim_bm),
        "the machine on {victim} ({victim_bm}) is the one removed: {left:?}"
    );

    // Down: 2 -> 1; the agents release the hosts.
    ok(
        tb,
        &ns,
        &words("scale c1 --workers 1 --wait --timeout 120s"),
    );
    eventually("a host released", Duration::from_secs(60), || {
        let (c, n) = (client.clone(), ns.clone());
        async move { claimed_hosts(&c, &n).await.len() == 1 }
    })
    .await;
    assert_eq!(count_machines(&client, &ns, "c1").await, 1);

    // Control plane: even counts refused with stacked etcd; 1 -> 3 with 2 free hosts.
    let o = run(
        &tb.kubeconfig,
        &ns,
        &["scale", "c1", "--control-plane", "2"],
    );
    assert_eq!(o.status.code(), Some(1));
    assert_contains(&err(&o), "replicas must be odd");
    let o = run(
        &tb.kubeconfig,
        &ns,
        &["scale", "c1", "--control-plane", "3", "--dry-run=server"],
    );
    assert!(o.status.success(), "stderr: {}", err(&o));
    assert_contains(&out(&o), "scaled from 1 to 3 (server dry run)");
    let kcp_obj = api(&client, &ns, &kcp_ar())
        .get("c1-control-plane")
        .await
        .unwrap();
    assert_eq!(
        kcp_obj.data["spec"]["replicas"], 1,
        "a dry run changes nothing"
    );
    let o = ok(
        tb,
        &ns,
        &words("scale c1 --control-plane 3 --wait --timeout 60s"),
    );
    assert!(
        out(&o).contains(
            "kubeadmcontrolplane.controlplane.cluster.x-k8s.io/c1-control-plane scaled from 1 to 3"
        ),
        "{}",
        out(&o)
    );
    let kcp_obj = api(&client, &ns, &kcp_ar())
        .get("c1-control-plane")
        .await
        .unwrap();
    assert_eq!(kcp_obj.data["spec"]["replicas"], 3);
    // 3 -> 7 needs 4 control-plane hosts; only 2 are registered (the played control plane
    // claims none), so it is refused unless forced.
    let o = run(
        &tb.kubeconfig,
        &ns,
        &["scale", "c1", "--control-plane", "7"],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(
        err(&o).contains(&format!(
            "KubeadmControlPlane c1-control-plane needs 4 free hosts matching {{pool={ns},role=control-plane}}; 2 available"
        )),
        "{}",
        err(&o)
    );
    let o = run(
        &tb.kubeconfig,
        &ns,
        &words("scale c1 --control-plane 7 --force --dry-run=server"),
    );
    assert!(o.status.success(), "stderr: {}", err(&o));
    assert_contains(&err(&o), "Warning: --force:");

    // Bad input: an unknown cluster gets the closest names; no flag is a usage error.
    let o = run(&tb.kubeconfig, &ns, &["scale", "c2", "--workers", "1"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        err(&o).lines().next().unwrap(),
        format!("error: Cluster \"c2\" not found in namespace \"{ns}\"; did you mean \"c1\"?")
    );
    let o = run(&tb.kubeconfig, &ns, &["scale", "c1"]);
    assert_eq!(o.status.code(), Some(2));
}
