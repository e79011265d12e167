//! The CAPI v1beta1 contract (a CAPI 1.10-shaped management cluster): the reconciler discovers
//! that only v1beta1 is served and writes the v1alpha1 status shape.

use crate::common::*;
use serde_json::json;

const V: &str = "v1alpha1";

#[tokio::test(flavor = "multi_thread")]
async fn v1beta1_contract_create_ready_and_secrets() {
    let tb = testbed::shared_v1beta1();
    let (c, ns) = namespace(tb, "kr-v1beta1").await;
    byo_cluster(&c, &ns, "old").await;
    cluster_with_kcp(&c, &ns, "v1beta1", "old", "old-cp",
        Some(("infrastructure.cluster.x-k8s.io", "v1beta1", "ByoCluster")),
        json!({"services": {"cidrBlocks": ["10.96.0.0/12"]}, "pods": {"cidrBlocks": ["192.168.0.0/16"]}, "serviceDomain": "cluster.local"}),
        json!({"version": "1.32.4", "replicas": 1})).await;
    let r = start_reconciler(&tb.kubeconfig, &ns, &[]);
    let tcp = wait_tcp(&c, &ns, "old-cp", &r).await;
    assert_eq!(tcp["spec"]["kubernetes"]["version"], "v1.32.4");
    assert_eq!(tcp["spec"]["networkProfile"]["podCidr"], "192.168.0.0/16");
    kamaji_publish(&c, &ns, "old-cp", "10.1.0.5:6443", "v1.32.4", "Ready", 1).await;

    // Read through the v1alpha1 view, as CAPI 1.10 does (contract label cluster.x-k8s.io/v1beta1).
    let k = wait_kcp(&c, &ns, V, "old-cp", "ready (v1alpha1 view)", &r, ready).await;
    assert_eq!(k["apiVersion"], "controlplane.cluster.x-k8s.io/v1alpha1");
    assert_eq!(k["status"]["initialized"], true);
    assert_eq!(k["status"]["replicas"], 2);
    assert_eq!(k["status"]["readyReplicas"], 1);
    assert_eq!(k["status"]["updatedReplicas"], 2);
    assert_eq!(k["status"]["unavailableReplicas"], 0);
    assert_eq!(k["status"]["version"], "v1.32.4");
    assert_eq!(k["status"]["selector"], "kamaji.clastix.io/name=old-cp");
    assert_eq!(k["status"]["externalManagedControlPlane"], true);
    assert!(
        k["status"].get("initialization").is_none(),
        "{:?}",
        k["status"]
    );
    assert_eq!(
        k["spec"]["controlPlaneEndpoint"],
        json!({"host": "10.1.0.5", "port": 6443})
    );
    assert_eq!(
        condition(&k, "KamajiControlPlaneIsReady").unwrap().0,
        "True"
    );
    // The v1beta1 contract's Ready, which CAPI v1.10 mirrors into the Cluster; and every False
    // condition keeps its severity through the v1alpha2 storage version.
    assert_eq!(condition(&k, "Ready").unwrap().0, "True");
    let paused = k["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Paused")
        .unwrap();
    assert_eq!(
        (&paused["status"], &paused["severity"]),
        (&json!("False"), &json!("Info"))
    );
    let byo = ar("infrastructure.cluster.x-k8s.io", "v1beta1", "ByoCluster");
    let b = get(&c, &ns, &byo, "old").await.unwrap();
    assert_eq!(
        b["spec"]["controlPlaneEndpoint"],
        json!({"host": "10.1.0.5", "port": 6443})
    );
    let kc = wait_for(60, "old-kubeconfig", Some(&r), || {
        secret(&c, &ns, "old-kubeconfig")
    })
    .await;
    assert_eq!(kc.type_.as_deref(), Some("cluster.x-k8s.io/secret"));
    assert!(
        data(&kc, "value")
            .unwrap()
            .contains("https://10.1.0.5:6443")
    );
    let ca = wait_for(60, "old-ca", Some(&r), || secret(&c, &ns, "old-ca")).await;
    assert_eq!(data(&ca, "tls.key").as_deref(), Some("KEY"));
}
