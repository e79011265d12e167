//! On a CAPI 1.10-shaped management cluster (v1beta1 only), `create` writes v1beta1 Clusters
//! and MachineDeployments with versioned references and a v1alpha1 KamajiControlPlane, as the
//! CRDs' contract labels say, and the API server accepts them.

mod common;

use common::*;

#[tokio::test]
async fn create_writes_v1beta1_shapes_on_a_capi_1_10_cluster() {
    let tb = prepare_v1beta1().await;
    let (c, ns) = tb.namespace("kamaji-v1b1").await;
    let dir = tempfile::tempdir().unwrap();
    let cni = dir.path().join("cni.yaml");
    std::fs::write(
        &cni,
        "apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: my-cni\n  namespace: kube-system\n",
    )
    .unwrap();
    let args = [
        "create",
        "old",
        "--infrastructure",
        "byoh",
        "--kubernetes-version",
        "v1.33.0",
        "--workers",
        "2",
        "--cni-manifest",
        cni.to_str().unwrap(),
    ];
    let yaml = ok(&kamaji(
        tb,
        &ns,
        &[&args[..], &["--dry-run=client", "-o", "yaml"]].concat(),
    ));
    assert!(
        yaml.contains("apiVersion: cluster.x-k8s.io/v1beta1"),
        "{yaml}"
    );
    assert!(
        yaml.contains("apiVersion: controlplane.cluster.x-k8s.io/v1alpha1"),
        "{yaml}"
    );
    assert!(
        !yaml.contains("apiGroup:"),
        "v1beta2 references in a v1beta1 stream:\n{yaml}"
    );
    // CAPI 1.10 serves ClusterResourceSet v1beta1 only; BYOH's installer template is there too.
    assert!(
        yaml.contains("apiVersion: addons.cluster.x-k8s.io/v1beta1\nkind: ClusterResourceSet"),
        "{yaml}"
    );
    assert!(yaml.contains("kind: K8sInstallerConfigTemplate"), "{yaml}");
    let out = kubectl_apply_server_dry_run(tb, &ns, &yaml);
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    ok(&kamaji(tb, &ns, &args));
    let cl = get(
        &c,
        &ns,
        &ar("cluster.x-k8s.io", "v1beta1", "Cluster"),
        "old",
    )
    .await
    .unwrap();
    assert_eq!(
        cl["spec"]["controlPlaneRef"]["apiVersion"],
        "controlplane.cluster.x-k8s.io/v1alpha1"
    );
    assert_eq!(
        cl["spec"]["infrastructureRef"]["apiVersion"],
        "infrastructure.cluster.x-k8s.io/v1beta1"
    );
    let md = get(
        &c,
        &ns,
        &ar("cluster.x-k8s.io", "v1beta1", "MachineDeployment"),
        "old-md-0",
    )
    .await
    .unwrap();
    assert_eq!(
        md["spec"]["template"]["spec"]["bootstrap"]["configRef"]["apiVersion"],
        "bootstrap.cluster.x-k8s.io/v1beta1"
    );
    assert_eq!(md["spec"]["replicas"], 2);
    let crs = get(
        &c,
        &ns,
        &ar("addons.cluster.x-k8s.io", "v1beta1", "ClusterResourceSet"),
        "old-cni",
    )
    .await
    .unwrap();
    assert_eq!(
        crs["spec"]["clusterSelector"]["matchLabels"]["cluster.x-k8s.io/cluster-name"],
        "old"
    );
    assert_eq!(cl["metadata"]["labels"]["cni"], "custom");
}
