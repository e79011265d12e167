//! The BYOH simulators do what the real agent and controller do: attach the first free matching
//! host, bootstrap it, register its Node with the BYOH provider ID, and release it on delete.

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use kube::discovery::ApiResource;
use serde_json::json;
use testbed::sim::{SimOptions, byoh};

fn ar(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: format!("{group}/{version}"),
        kind: kind.into(),
        plural: plural.into(),
    }
}

async fn eventually<F, Fut>(what: &str, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !f().await {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn byoh_simulators_attach_bootstrap_and_release_a_host() {
    let tb = testbed::shared();
    let (client, ns) = tb.namespace("sim-byoh").await;
    let opts = SimOptions {
        delay: Duration::from_millis(300),
        failure_rate: 0.0,
        tick: Duration::from_millis(100),
        ..SimOptions::default()
    };
    let pool = byoh::Pool {
        namespace: ns.clone(),
        count: 3,
        labels: vec![("role".into(), "worker".into())],
        name_prefix: format!("{ns}-h"),
    };
    let agents = tokio::spawn(byoh::run_agents(client.clone(), pool, opts.clone()));
    let controller = tokio::spawn(byoh::run_controller(client.clone(), opts));
    let hosts: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &ns,
        &ar(
            "infrastructure.cluster.x-k8s.io",
            "v1beta1",
            "ByoHost",
            "byohosts",
        ),
    );
    eventually("3 registered hosts", || {
        let hosts = hosts.clone();
        async move { hosts.list(&Default::default()).await.unwrap().items.len() == 3 }
    })
    .await;

    // A CAPI Machine (bootstrap data ready) owning a ByoMachine that selects workers.
    let machines: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &ns,
        &ar("cluster.x-k8s.io", "v1beta2", "Machine", "machines"),
    );
    let machine = machines
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
                "metadata": {"name": "w-1"},
                "spec": {"clusterName": "c1", "version": "v1.34.2",
                         "bootstrap": {"dataSecretName": "w-1-bootstrap"},
                         "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "ByoMachine", "name": "w-1"}}
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    let byomachines: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &ns,
        &ar(
            "infrastructure.cluster.x-k8s.io",
            "v1beta1",
            "ByoMachine",
            "byomachines",
        ),
    );
    byomachines
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "ByoMachine",
                "metadata": {"name": "w-1", "labels": {"cluster.x-k8s.io/cluster-name": "c1"},
                             "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
                                                  "name": "w-1", "uid": machine.metadata.uid}]},
                "spec": {"selector": {"matchLabels": {"role": "worker"}}}
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    eventually("the ByoMachine to be ready", || {
        let b = byomachines.clone();
        async move { b.get("w-1").await.unwrap().data["status"]["ready"] == json!(true) }
    })
    .await;
    let bm = byomachines.get("w-1").await.unwrap();
    let provider_id = bm.data["spec"]["providerID"].as_str().unwrap().to_string();
    let host_name = format!("{ns}-h01");
    assert!(
        provider_id.starts_with(&format!("byoh://{host_name}/")),
        "{provider_id}"
    );
    let host = hosts.get(&host_name).await.unwrap();
    let labels = host.metadata.labels.clone().unwrap();
    assert_eq!(
        labels
            .get("cluster.x-k8s.io/cluster-name")
            .map(String::as_str),
        Some("c1")
    );
    assert_eq!(host.data["status"]["machineRef"]["name"], "w-1");
    let node = Api::<Node>::all(client.clone())
        .get(&host_name)
        .await
        .unwrap();
    assert_eq!(
        node.spec.unwrap().provider_id.as_deref(),
        Some(provider_id.as_str())
    );

    // Release: the ByoMachine's finalizer waits for the agent's cleanup.
    byomachines
        .delete("w-1", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the ByoMachine to be gone", || {
        let b = byomachines.clone();
        async move { b.get_opt("w-1").await.unwrap().is_none() }
    })
    .await;
    let host = hosts.get(&host_name).await.unwrap();
    assert!(
        host.data["status"]
            .get("machineRef")
            .is_none_or(|m| m.is_null())
    );
    assert!(
        !host
            .metadata
            .labels
            .unwrap_or_default()
            .contains_key("cluster.x-k8s.io/cluster-name")
    );
    assert!(
        Api::<Node>::all(client.clone())
            .get_opt(&host_name)
            .await
            .unwrap()
            .is_none()
    );
    agents.abort();
    controller.abort();
}
