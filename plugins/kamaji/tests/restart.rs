//! Faults (issue 13): a `--wait` verb rides out an API server restart. This binary has a testbed
//! of its own, since restarting its API server would disturb every other test sharing one.

mod common;

use common::*;
use kube::api::{Api, DynamicObject, Patch, PatchParams};

#[tokio::test]
async fn delete_wait_survives_an_api_server_restart() {
    let tb = testbed().await;
    let (c, ns) = tb.namespace("kamaji-restart").await;
    let clusters = Api::<DynamicObject>::namespaced_with(
        c.clone(),
        &ns,
        &ar("cluster.x-k8s.io", "v1beta2", "Cluster"),
    );
    // A finalizer holds the Cluster until the test lets go, after the restart.
    let cluster = serde_json::json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
        "metadata": {"name": "held", "finalizers": ["test.example.com/hold"]},
        "spec": {"clusterNetwork": {"apiServerPort": 6443}}});
    clusters
        .patch(
            "held",
            &PatchParams::apply("test").force(),
            &Patch::Apply(&cluster),
        )
        .await
        .unwrap();
    let ns2 = ns.clone();
    let waiting = tokio::task::spawn_blocking(move || {
        kamaji(
            tb,
            &ns2,
            &["delete", "held", "--yes", "--wait", "--timeout", "120s"],
        )
    });
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    tb.restart_process("kube-apiserver").await.unwrap();
    // The restarted server is a new connection for this client too.
    let c = tb.client().await;
    let clusters = Api::<DynamicObject>::namespaced_with(
        c.clone(),
        &ns,
        &ar("cluster.x-k8s.io", "v1beta2", "Cluster"),
    );
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    drop_finalizers(&clusters, "held").await;
    let out = ok(&waiting.await.unwrap());
    assert!(out.contains("held is gone"), "{out}");
}
