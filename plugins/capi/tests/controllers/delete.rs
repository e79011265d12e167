//! `delete`: the cascade through the real CAPI manager, and a host stuck releasing named.

use crate::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_cascades_and_names_a_host_stuck_releasing() {
    let s = Story::start("delete").await;
    let (tb, ns) = (s.tb, &s.ns);
    // Pool "a" has running agents; pool "b" registered its host but its agent is down.
    let b = pool(ns, "b", 1, "worker");
    let players = s
        .cluster("doomed", 2, pool(ns, "a", 1, "worker"), Some(b.clone()))
        .await;
    s.until_claimed(2).await;
    let dir = tempfile::tempdir().unwrap();
    let kc = kubeconfig_with_merged_context(tb, dir.path(), "doomed");
    let stuck_host = format!("{ns}-b01");

    // Without a terminal and without --yes: nothing happens, exit 2.
    let o = run(&kc, ns, &["delete", "doomed"]);
    exits(&o, 2);
    assert_contains(&out(&o), "Hosts released:     2");
    assert_contains(&out(&o), &stuck_host);
    assert_contains(
        &out(&o),
        "Control plane:      KubeadmControlPlane doomed-control-plane (1 replicas)",
    );
    assert_eq!(
        first_line(&o),
        "error: refusing to delete cluster doomed without confirmation: stdin is not a terminal"
    );
    let clusters = s.api(&cluster_ar());
    assert!(clusters.get_opt("doomed").await.unwrap().is_some());

    // --yes --wait: the cascade runs; the host whose agent is down stays Releasing, by name.
    let o = run(&kc, ns, &words("delete doomed --yes --wait --timeout 40s"));
    exits(&o, 1);
    let stdout = out(&o);
    assert_contains(&stdout, "cluster.cluster.x-k8s.io/doomed deleted");
    assert!(
        stdout.contains(&format!("\n  host {stuck_host} is still Releasing: ")),
        "the host whose agent is down is named: {stdout}"
    );
    assert!(
        !stdout.contains(&format!("host {ns}-a01 is still Releasing")),
        "the host whose agent runs was released: {stdout}"
    );
    // The real BYOH controller lets a deleted ByoMachine go at once: it marks the attached host
    // for cleanup and removes the ByoMachine's finalizer without waiting for the agent (BYOH
    // v0.5.0 controllers/infrastructure/byomachine_controller.go, reconcileDelete), so the
    // Machines and the Cluster go too and no object is stuck on finalizers. (The old simulator
    // held the ByoMachine's finalizer until the agent had cleaned up.) What is left is the
    // host whose agent is down, named.
    assert!(
        !stdout.contains("is stuck on finalizers"),
        "nothing waits for the agent: {stdout}"
    );
    assert_eq!(
        error_line(&o),
        format!(
            "error: cluster doomed is not torn down after 40s: 1 host still Releasing ({stuck_host})"
        )
    );
    assert_contains(&err(&o), "start the BYOH host agent on those hosts");
    // The merged context is gone; the admin context stays.
    let after = std::fs::read_to_string(&kc).unwrap();
    assert_lacks(&after, "doomed-admin@doomed");
    assert_contains(&after, "name: testbed");
    assert_contains(&stdout, "deleted context doomed-admin@doomed");

    // The agent comes back: the teardown finishes.
    for a in &players.stopped {
        a.power(true);
    }
    let seen = std::sync::Mutex::new(String::new());
    testbed::fixtures::poll::wait_for(
        "the cluster to be gone and its hosts released",
        Duration::from_secs(90),
        || {
            let agents: Vec<String> = players
                .stopped
                .iter()
                .map(|a| format!("--- agent {} ---\n{}", a.host, a.log_tail()))
                .collect();
            format!("last seen: {}\n{}", seen.lock().unwrap(), agents.join("\n"))
        },
        || async {
            let cluster = clusters.get_opt("doomed").await.unwrap().is_some();
            let claimed = s.claimed().await;
            *seen.lock().unwrap() =
                format!("cluster present: {cluster}, hosts claimed: {claimed:?}");
            (!cluster && claimed.is_empty()).then_some(())
        },
    )
    .await;
    let o = run(&kc, ns, &["delete", "doomed", "--yes"]);
    exits(&o, 1);
    assert_contains(&err(&o), "Cluster \"doomed\" not found");
}
