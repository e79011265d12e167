//! On a CAPI 1.10-shaped management cluster (v1beta1 only), `create` writes v1beta1 Clusters
//! and MachineDeployments with versioned references and a v1alpha1 KamajiControlPlane, as the
//! CRDs' contract labels say, and the API server accepts them.

use crate::common::*;
use testbed::fixtures::run::assert_contains;
use testbed::fixtures::run::words;

const V1BETA1: &str = "cluster.x-k8s.io/v1beta1";

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
    let extra = [
        "--workers",
        "2",
        "--allow-pending",
        "--cni-manifest",
        cni.to_str().unwrap(),
        "--failure-domain",
        "fd-a",
        "--cluster-dns",
        "169.254.20.10",
    ];
    let args = create_args("old", "byoh", "v1.33.0", &extra);
    let yaml = ok(&kamaji(
        tb,
        &ns,
        &[&args[..], &["--dry-run=client", "-o", "yaml"]].concat(),
    ));
    assert_contains(&yaml, "apiVersion: cluster.x-k8s.io/v1beta1");
    assert_contains(&yaml, "apiVersion: controlplane.cluster.x-k8s.io/v1alpha1");
    assert!(
        !yaml.contains("apiGroup:"),
        "v1beta2 references in a v1beta1 stream:\n{yaml}"
    );
    // CAPI 1.10 serves ClusterResourceSet v1beta1 only; BYOH's installer template is there too.
    assert_contains(
        &yaml,
        "apiVersion: addons.cluster.x-k8s.io/v1beta1\nkind: ClusterResourceSet",
    );
    assert_contains(&yaml, "kind: K8sInstallerConfigTemplate");
    let out = kubectl_apply_server_dry_run(tb, &ns, &yaml);
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    ok(&kamaji(tb, &ns, &args));
    let capi_object = |kind, name| object(&c, &ns, V1BETA1, kind, name);
    let cl = capi_object("Cluster", "old").await;
    assert_eq!(
        cl["spec"]["controlPlaneRef"]["apiVersion"],
        "controlplane.cluster.x-k8s.io/v1alpha1"
    );
    assert_eq!(
        cl["spec"]["infrastructureRef"]["apiVersion"],
        "infrastructure.cluster.x-k8s.io/v1beta1"
    );
    let md = capi_object("MachineDeployment", "old-md-0").await;
    assert_eq!(
        md["spec"]["template"]["spec"]["bootstrap"]["configRef"]["apiVersion"],
        "bootstrap.cluster.x-k8s.io/v1beta1"
    );
    assert_eq!(md["spec"]["replicas"], 2);
    // v1beta1's shapes of --failure-domain and --cluster-dns (kubeletExtraArgs a map).
    assert_eq!(md["spec"]["template"]["spec"]["failureDomain"], "fd-a");
    let bootstrap = "bootstrap.cluster.x-k8s.io/v1beta1";
    let kct = object(&c, &ns, bootstrap, "KubeadmConfigTemplate", "old-md-0").await;
    assert_eq!(
        kct["spec"]["template"]["spec"]["joinConfiguration"]["nodeRegistration"]["kubeletExtraArgs"],
        serde_json::json!({"cluster-dns": "169.254.20.10"}),
        "{kct}"
    );
    let addons = "addons.cluster.x-k8s.io/v1beta1";
    let crs = object(&c, &ns, addons, "ClusterResourceSet", "old-cni").await;
    assert_eq!(
        crs["spec"]["clusterSelector"]["matchLabels"]["cluster.x-k8s.io/cluster-name"],
        "old"
    );
    assert_eq!(cl["metadata"]["labels"]["cni"], "custom");
}

/// On CAPI 1.10's CRDs, `generate clusterclass` writes a v1beta1 ClusterClass (`ref` with
/// namespaces, `namingStrategy`, `template.bootstrap/infrastructure`) referencing a v1alpha1
/// KamajiControlPlaneTemplate, which the API server stores; `create --class` reads that shape
/// and writes a topology Cluster naming the class with `class`. No CAPI controller
/// runs on this testbed: the topology controller's side is covered by tests/controllers/clusterclass.rs.
#[tokio::test]
async fn generate_clusterclass_and_create_class_write_v1beta1_shapes_on_a_capi_1_10_cluster() {
    let tb = prepare_v1beta1().await;
    let (c, ns) = tb.namespace("kamaji-v1b1-cc").await;
    let out = ok(&kamaji(
        tb,
        &ns,
        &words("generate clusterclass old-class --infrastructure byoh --apply"),
    ));
    assert_contains(
        &out,
        "clusterclass.cluster.x-k8s.io/old-class serverside-applied",
    );
    let cc = object(&c, &ns, V1BETA1, "ClusterClass", "old-class").await;
    assert_eq!(
        cc["spec"]["controlPlane"]["ref"]["apiVersion"],
        "controlplane.cluster.x-k8s.io/v1alpha1"
    );
    assert_eq!(cc["spec"]["controlPlane"]["ref"]["namespace"], ns.as_str());
    assert_eq!(
        cc["spec"]["controlPlane"]["namingStrategy"]["template"],
        "{{ .cluster.name }}"
    );
    assert_eq!(
        cc["spec"]["workers"]["machineDeployments"][0]["template"]["infrastructure"]["ref"]["kind"],
        "ByoMachineTemplate"
    );
    let kcpt = object(
        &c,
        &ns,
        "controlplane.cluster.x-k8s.io/v1alpha1",
        "KamajiControlPlaneTemplate",
        "old-class",
    )
    .await;
    assert!(kcpt["spec"]["template"]["spec"].get("version").is_none());

    let json = ok(&kamaji(
        tb,
        &ns,
        &words(
            "create old --class old-class --kubernetes-version v1.33.0 --workers 2 --service-address 10.0.0.9 --failure-domain fd-b --dry-run=server -o json",
        ),
    ));
    let list: serde_json::Value = serde_json::from_str(&json).unwrap();
    let cluster = &list["items"][0];
    assert_eq!(cluster["apiVersion"], "cluster.x-k8s.io/v1beta1");
    let t = &cluster["spec"]["topology"];
    assert_eq!(t["class"], "old-class");
    assert_eq!(t["version"], "v1.33.0");
    assert_eq!(
        t["workers"]["machineDeployments"][0]["class"],
        "default-worker"
    );
    assert_eq!(t["workers"]["machineDeployments"][0]["replicas"], 2);
    assert_eq!(
        t["workers"]["machineDeployments"][0]["failureDomain"],
        "fd-b"
    );
    assert_eq!(t["variables"][0]["value"], "10.0.0.9");
    // A server dry run stores nothing.
    let clusters = ar("cluster.x-k8s.io", "v1beta1", "Cluster");
    assert!(get(&c, &ns, &clusters, "old").await.is_none());
}
