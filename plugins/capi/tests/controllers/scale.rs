//! `scale`: workers and control plane, with the free-host preflight.

use crate::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scale_workers_and_control_plane_with_a_host_preflight() {
    let s = Story::start("scale").await;
    let ns = &s.ns;
    // 3 worker hosts, 2 of them spare; 2 control-plane hosts.
    let _players = s.cluster_on("c1", 1, 3, 2).await;
    s.until_claimed(1).await;
    let replicas =
        async |r: &ApiResource, name: &str| s.get(r, name).await.data["spec"]["replicas"].clone();

    // Up: 1 -> 3 workers, waiting until they are ready.
    let o = s.ok(&words("scale c1 --workers 3 --wait --timeout 150s"));
    assert_contains(
        &out(&o),
        "machinedeployment.cluster.x-k8s.io/c1-md-0 scaled from 1 to 3",
    );
    assert_eq!(s.machines("c1").await, 3);
    assert_eq!(s.claimed().await.len(), 3);
    let md = s.get(&md_ar(), "c1-md-0").await;
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

    // A scale-down reads no host pool (-v=6 shows each request); a scale-up does.
    let down = s.ok(&words("scale c1 --workers 2 --dry-run=client -v=6"));
    let down_log = String::from_utf8_lossy(&down.stderr).to_string();
    assert!(
        !down_log.contains("/byohosts"),
        "a scale-down listed hosts:\n{down_log}"
    );
    assert_contains(&down_log, "/machinedeployments");
    let up = s.fails(
        1,
        &["scale", "c1", "--workers", "5", "--dry-run=client", "-v=6"],
    );
    assert_contains(&String::from_utf8_lossy(&up.stderr), "/byohosts");

    // No free worker host left: refused, nothing changes.
    let first = first_line(&s.fails(1, &["scale", "c1", "--workers", "5"]));
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
    assert_eq!(replicas(&md_ar(), "c1-md-0").await, 3);

    // A free worker host whose kubelet is v1.32 (its onboarding script labelled it) is no host
    // for a v1.33 machine: refused with the host named, and `hosts` shows what it carries.
    let old = Pool {
        count: 1,
        name_prefix: format!("{ns}-old"),
        ..pool(ns, "old", 1, "worker")
    };
    let image = testbed::agent::HostImage {
        kubelet_version: Some("v1.32.9".into()),
        ..Default::default()
    };
    let old_host = format!("{ns}-old01");
    let agent = testbed::agent::onboard_image(
        s.tb,
        Path::new(BIN),
        ns,
        &old_host,
        &old.labels,
        true,
        testbed::agent::Kubelet::Played,
        &image,
    )
    .unwrap();
    registered(&s.client, &old, std::slice::from_ref(&agent)).await;
    let first = first_line(&s.fails(1, &["scale", "c1", "--workers", "4"]));
    assert!(
        first.contains(&format!(
            "needs 1 free hosts matching {{pool={ns},role=worker}} carrying Kubernetes v1.33; 0 available (another Kubernetes on {old_host} (v1.32.9))"
        )),
        "{first}"
    );
    let table = out(&s.ok(&["hosts"]));
    assert!(
        table
            .lines()
            .any(|l| l.starts_with(&old_host) && l.contains("v1.32.9")),
        "{table}"
    );
    // BCM's control-plane address "within the internal network of the nodes", read from what
    // the real agents reported (eth0 on 192.0.2.0/24): outside it, generate refuses naming the
    // networks; inside, it renders.
    let generate = |address: &str| {
        let home = tempfile::tempdir().unwrap();
        let template = format!(
            "{}/tests/data/byoh-cluster-template.yaml",
            env!("CARGO_MANIFEST_DIR")
        );
        Command::new(BIN)
            .args(["generate", "cluster", "c9", "--from", &template])
            .args(["--kubernetes-version", "v1.33.5", "--target-namespace", ns])
            .arg("--kubeconfig")
            .arg(&s.tb.kubeconfig)
            .env_clear()
            .env("HOME", home.path())
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .envs([
                ("CONTROL_PLANE_ENDPOINT_IP", address),
                ("SERVICE_DOMAIN", "cluster.local"),
                ("CONTROL_PLANE_HOST_ROLE", "control-plane"),
                ("WORKER_HOST_ROLE", "worker"),
            ])
            .output()
            .unwrap()
    };
    let o = generate("203.0.113.9");
    exits(&o, 1);
    let refused = first_line(&o);
    assert!(
        refused.contains("CONTROL_PLANE_ENDPOINT_IP 203.0.113.9 is in no network of the")
            && refused.contains("192.0.2.0/24"),
        "{refused}"
    );
    let inside = generate("192.0.2.250");
    exits(&inside, 0);
    assert!(
        out(&inside).contains("kind: ByoCluster"),
        "{}",
        out(&inside)
    );

    // Gone for good (its agent stopped first), so BYOH cannot hand it to a later step.
    drop(agent);
    s.ok(&["hosts", "remove", &old_host, "--yes"]);

    // Choose what goes: --remove-host removes exactly the machine on that host.
    let mut hosts = s.claimed().await;
    hosts.sort();
    let victim = hosts[1].clone();
    let victim_bm = s.get(&host_ar(), &victim).await.data["status"]["machineRef"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    // Bad input first, each one line, nothing changed: a missing host, a free host.
    let o = s.fails(1, &["scale", "c1", "--remove-host", "no-such-host"]);
    assert_eq!(first_line(&o), "error: ByoHost \"no-such-host\" not found");
    let free = format!("{ns}-c01");
    let o = s.fails(1, &["scale", "c1", "--remove-host", &free]);
    assert_contains(&err(&o), &format!("ByoHost {free} serves no machine"));
    let o = s.fails(
        1,
        &["scale", "c1", "--remove-host", &victim, "--workers", "3"],
    );
    assert_contains(&err(&o), "pass --workers 2 or less");
    assert_eq!(
        replicas(&md_ar(), "c1-md-0").await,
        3,
        "refusals change nothing"
    );
    let o = s.ok(&[
        "scale",
        "c1",
        "--remove-host",
        &victim,
        "--wait",
        "--timeout",
        "120s",
    ]);
    assert_contains(&out(&o), "marked for deletion");
    assert_contains(
        &out(&o),
        "machinedeployment.cluster.x-k8s.io/c1-md-0 scaled from 3 to 2",
    );
    eventually(
        "the chosen host released",
        Duration::from_secs(60),
        async || {
            let claimed = s.claimed().await;
            claimed.len() == 2 && !claimed.contains(&victim)
        },
    )
    .await;
    assert_eq!(s.machines("c1").await, 2);
    let left: Vec<String> = s
        .api(&machine_ar())
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
    s.ok(&words("scale c1 --workers 1 --wait --timeout 120s"));
    s.until_claimed(1).await;
    assert_eq!(s.machines("c1").await, 1);

    // Control plane: even counts refused with stacked etcd; 1 -> 3 with 2 free hosts.
    let o = s.fails(1, &["scale", "c1", "--control-plane", "2"]);
    assert_contains(&err(&o), "replicas must be odd");
    let o = s.ok(&words("scale c1 --control-plane 3 --dry-run=server"));
    assert_contains(&out(&o), "scaled from 1 to 3 (server dry run)");
    assert_eq!(
        replicas(&kcp_ar(), "c1-control-plane").await,
        1,
        "a dry run changes nothing"
    );
    let o = s.ok(&words("scale c1 --control-plane 3 --wait --timeout 60s"));
    assert_contains(
        &out(&o),
        "kubeadmcontrolplane.controlplane.cluster.x-k8s.io/c1-control-plane scaled from 1 to 3",
    );
    assert_eq!(replicas(&kcp_ar(), "c1-control-plane").await, 3);
    // 3 -> 7 needs 4 control-plane hosts; only 2 are registered (the played control plane
    // claims none), so it is refused unless forced.
    let o = s.fails(1, &["scale", "c1", "--control-plane", "7"]);
    assert_contains(
        &err(&o),
        &format!(
            "KubeadmControlPlane c1-control-plane needs 4 free hosts matching {{pool={ns},role=control-plane}}; 2 available"
        ),
    );
    let o = s.ok(&words(
        "scale c1 --control-plane 7 --force --dry-run=server",
    ));
    assert_contains(&err(&o), "Warning: --force:");

    // Bad input: an unknown cluster gets the closest names; no flag is a usage error.
    let o = s.fails(1, &["scale", "c2", "--workers", "1"]);
    assert_eq!(
        first_line(&o),
        format!("error: Cluster \"c2\" not found in namespace \"{ns}\"; did you mean \"c1\"?")
    );
    s.fails(2, &["scale", "c1"]);
}
