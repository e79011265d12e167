//! `kubectl kamaji uninstall --purge`: BCM's teardown of the provider and the host
//! pool (its steps 3 to 5: BootstrapKubeconfigs, the provider, ByoHosts), refused while any
//! Cluster remains. A testbed of its own: uninstall deletes the cluster-wide CRDs.

mod common;

use common::*;
use kube::api::{Api, PostParams};
use serde_json::json;

#[tokio::test]
async fn purge_waits_for_the_last_cluster_then_clears_the_pool() {
    let tb = testbed::shared();
    let (client, ns) = tb.namespace("purge").await;
    ok(&kamaji(tb, &ns, &["install"]));

    let infra = "infrastructure.cluster.x-k8s.io";
    let create = |group: &str, version: &str, kind: &str, obj: serde_json::Value| {
        let api = api(&client, &ns, &ar(group, version, kind));
        async move {
            api.create(
                &PostParams::default(),
                &serde_json::from_value(obj).unwrap(),
            )
            .await
            .unwrap();
        }
    };
    create(
        "cluster.x-k8s.io",
        "v1beta2",
        "Cluster",
        json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "metadata": {"name": "left"},
               "spec": {"clusterNetwork": {"pods": {"cidrBlocks": ["10.244.0.0/16"]}}}}),
    )
    .await;
    create(
        infra,
        "v1beta1",
        "BootstrapKubeconfig",
        json!({"apiVersion": format!("{infra}/v1beta1"), "kind": "BootstrapKubeconfig", "metadata": {"name": "node1"},
               "spec": {"apiserver": "https://192.0.2.1:6443", "certificate-authority-data": "eA=="}}),
    )
    .await;
    create(
        infra,
        "v1beta1",
        "ByoHost",
        json!({"apiVersion": format!("{infra}/v1beta1"), "kind": "ByoHost", "metadata": {"name": "node1"}, "spec": {}}),
    )
    .await;

    // A Cluster remains: one line, nothing deleted.
    let out = kamaji(tb, &ns, &["uninstall", "--purge", "--yes"]);
    testbed::expect::one_line_refusal(&out, 1, "1 Cluster(s) remain", "purge with a cluster left")
        .unwrap();
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(client.clone(), &ns);
    assert!(
        deployments
            .get_opt("kamaji-reconciler")
            .await
            .unwrap()
            .is_some()
    );

    let clusters = api(&client, &ns, &cluster_ar());
    clusters.delete("left", &Default::default()).await.unwrap();
    for _ in 0..50 {
        if clusters.get_opt("left").await.unwrap().is_none() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    let out = kamaji(tb, &ns, &["uninstall", "--purge", "--yes"]);
    let text = ok(&out);
    for line in [
        "deployment.apps/kamaji-reconciler deleted",
        "bootstrapkubeconfig.infrastructure.cluster.x-k8s.io/node1 deleted",
        "byohost.infrastructure.cluster.x-k8s.io/node1 deleted",
    ] {
        assert!(text.contains(line), "missing {line:?} in\n{text}");
    }
    assert!(stderr(&out).contains("clusterctl delete --infrastructure byoh"));
    assert!(
        get(&client, &ns, &byoh_ar("ByoHost"), "node1")
            .await
            .is_none()
    );
}
