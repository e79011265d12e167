//! The infrastructure-cluster patch table, on the full-profile testbed.
//!
//! AWSCluster is the real upstream CRD (CAPA v2.13.0, from the Go module proxy). The Go proxy
//! refuses CAPO, CAPK and CAPM3 (403), so OpenStackCluster, KubevirtCluster and Metal3Cluster
//! get minimal CRDs generated here, holding the fields the provider touches.

use crate::common::*;
use serde_json::{Value, json};
use testbed::fixtures::run::assert_contains;

const V: &str = "v1alpha2";
const G: &str = "infrastructure.cluster.x-k8s.io";

fn minimal_crd(kind: &str, version: &str, spec: Value, status_subresource: bool) -> Value {
    let plural = format!("{}s", kind.to_lowercase());
    let mut v = json!({
        "name": version, "served": true, "storage": true,
        "schema": {"openAPIV3Schema": {"type": "object", "properties": {
            "spec": {"type": "object", "properties": spec, "x-kubernetes-preserve-unknown-fields": true},
            "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}, "x-kubernetes-preserve-unknown-fields": true}
        }}}
    });
    if status_subresource {
        v["subresources"] = json!({"status": {}});
    }
    json!({
        "metadata": {"name": format!("{plural}.{G}"), "labels": {"cluster.x-k8s.io/v1beta1": version}},
        "spec": {"group": G, "scope": "Namespaced",
                 "names": {"kind": kind, "plural": plural, "singular": kind.to_lowercase(), "listKind": format!("{kind}List")},
                 "versions": [v]}
    })
}

fn endpoint_schema() -> Value {
    json!({"controlPlaneEndpoint": {"type": "object", "properties": {"host": {"type": "string"}, "port": {"type": "integer", "format": "int32"}}}})
}

async fn infra_crds(c: &kube::Client) {
    let mut crds = vec![
        minimal_crd(
            "OpenStackCluster",
            "v1beta1",
            json!({"apiServerFixedIP": {"type": "string"}, "apiServerPort": {"type": "integer"}}),
            true,
        ),
        minimal_crd("KubevirtCluster", "v1alpha1", endpoint_schema(), true),
        minimal_crd("Metal3Cluster", "v1beta1", endpoint_schema(), true),
    ];
    let aws = go_mod_dir("sigs.k8s.io/cluster-api-provider-aws/v2@v2.13.0")
        .expect("CAPA v2.13.0 from the Go module proxy")
        .join("config/crd/bases/infrastructure.cluster.x-k8s.io_awsclusters.yaml");
    crds.extend(read_yaml_docs(&aws));
    install_crds(c, &crds).await;
}

/// Waits for `InfrastructureClusterPatched=<want>` (`Status/Reason`) on the KamajiControlPlane
/// `kcp`, and returns its message.
async fn patched(c: &kube::Client, ns: &str, kcp: &str, want: &str, r: &Reconciler) -> String {
    let want = format!("InfrastructureClusterPatched={want}");
    wait_condition(c, ns, V, kcp, &want, r).await
}

fn net() -> Value {
    json!({"services": {"cidrBlocks": ["10.96.0.0/16"]}, "pods": {"cidrBlocks": ["10.244.0.0/16"]}})
}

#[tokio::test(flavor = "multi_thread")]
async fn patch_table_openstack_kubevirt_aws_metal3() {
    let tb = testbed::shared();
    let (c, ns) = namespace(tb, "kr-infra").await;
    infra_crds(&c).await;
    let cases = [
        (
            "os",
            "OpenStackCluster",
            "v1beta1",
            json!({"apiServerFixedIP": ""}),
        ),
        ("kv", "KubevirtCluster", "v1alpha1", json!({})),
        (
            "aws",
            "AWSCluster",
            "v1beta2",
            json!({"region": "eu-west-1"}),
        ),
        (
            "m3",
            "Metal3Cluster",
            "v1beta1",
            json!({"controlPlaneEndpoint": {"host": "10.9.9.9", "port": 6443}}),
        ),
    ];
    for (name, kind, ver, spec) in &cases {
        apply(&c, &ns, &ar(G, ver, kind), json!({"apiVersion": format!("{G}/{ver}"), "kind": kind,
            "metadata": {"name": name, "labels": {"cluster.x-k8s.io/cluster-name": name}}, "spec": spec})).await;
        cluster_with_kcp(
            &c,
            &ns,
            "v1beta2",
            name,
            &format!("{name}-cp"),
            Some((G, ver, kind)),
            net(),
            json!({"version": "1.33.0"}),
        )
        .await;
    }
    let r = start_reconciler(&tb.kubeconfig, &ns, &[]);
    for (i, (name, ..)) in cases.iter().enumerate() {
        let tcp = format!("{name}-cp");
        wait_for(60, &format!("TCP {tcp}"), Some(&r), || {
            get_tcp(&c, &ns, &tcp)
        })
        .await;
        kamaji_publish(
            &c,
            &ns,
            &tcp,
            &format!("10.0.0.{}:6443", 10 + i),
            "v1.33.0",
            "Ready",
            1,
        )
        .await;
    }

    // OpenStack: apiServerFixedIP and apiServerPort.
    let os = wait_for(60, "OpenStackCluster patched", Some(&r), || async {
        let o = get(&c, &ns, &ar(G, "v1beta1", "OpenStackCluster"), "os").await?;
        (o["spec"]["apiServerFixedIP"] == "10.0.0.10").then_some(o)
    })
    .await;
    assert_eq!(os["spec"]["apiServerPort"], 6443);
    assert!(os["spec"].get("controlPlaneEndpoint").is_none());

    // KubeVirt: the endpoint and status.ready.
    let kv = wait_for(
        60,
        "KubevirtCluster patched and ready",
        Some(&r),
        || async {
            let o = get(&c, &ns, &ar(G, "v1alpha1", "KubevirtCluster"), "kv").await?;
            (o["status"]["ready"] == json!(true)).then_some(o)
        },
    )
    .await;
    assert_eq!(
        kv["spec"]["controlPlaneEndpoint"],
        json!({"host": "10.0.0.11", "port": 6443})
    );
    assert_eq!(
        kv["metadata"]["annotations"]["cluster.x-k8s.io/managed-by"],
        "kamaji"
    );

    // AWS (real CRD): the endpoint only.
    let aws = wait_for(60, "AWSCluster patched", Some(&r), || async {
        let o = get(&c, &ns, &ar(G, "v1beta2", "AWSCluster"), "aws").await?;
        (o["spec"]["controlPlaneEndpoint"]["host"] == "10.0.0.12").then_some(o)
    })
    .await;
    assert_eq!(aws["spec"]["controlPlaneEndpoint"]["port"], 6443);
    assert_eq!(aws["spec"]["region"], "eu-west-1");
    patched(&c, &ns, "aws-cp", "True/Succeeded", &r).await;

    // Metal3: checked only; a mismatch is reported and nothing is changed.
    let m = patched(&c, &ns, "m3-cp", "False/ControlPlaneEndpointMismatch", &r).await;
    assert!(
        m.contains("10.9.9.9:6443") && m.contains("10.0.0.13:6443") && m.contains("serviceAddress"),
        "{m}"
    );
    let m3 = get(&c, &ns, &ar(G, "v1beta1", "Metal3Cluster"), "m3")
        .await
        .unwrap();
    assert_eq!(m3["spec"]["controlPlaneEndpoint"]["host"], "10.9.9.9");
    // Fixed by the user: the watch on Metal3Cluster clears the condition.
    merge(
        &c,
        &ns,
        &ar(G, "v1beta1", "Metal3Cluster"),
        "m3",
        json!({"spec": {"controlPlaneEndpoint": {"host": "10.0.0.13"}}}),
    )
    .await;
    patched(&c, &ns, "m3-cp", "True/Succeeded", &r).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn unsupported_kind_is_reported_and_a_flag_adds_it() {
    let tb = testbed::shared();
    let (c, ns) = namespace(tb, "kr-dyn").await;
    install_crds(
        &c,
        &[minimal_crd(
            "DockerCluster",
            "v1beta1",
            endpoint_schema(),
            true,
        )],
    )
    .await;
    apply(
        &c,
        &ns,
        &ar(G, "v1beta1", "DockerCluster"),
        json!({"apiVersion": format!("{G}/v1beta1"), "kind": "DockerCluster",
        "metadata": {"name": "dk"}, "spec": {}}),
    )
    .await;
    cluster_with_kcp(
        &c,
        &ns,
        "v1beta2",
        "dk",
        "dk-cp",
        Some((G, "v1beta1", "DockerCluster")),
        net(),
        json!({"version": "1.33.0"}),
    )
    .await;
    let mut r = start_reconciler(&tb.kubeconfig, &ns, &[]);
    wait_for(60, "TCP", Some(&r), || get_tcp(&c, &ns, "dk-cp")).await;
    kamaji_publish(&c, &ns, "dk-cp", "10.0.1.1:6443", "v1.33.0", "Ready", 1).await;
    let m = patched(
        &c,
        &ns,
        "dk-cp",
        "False/UnsupportedInfrastructureProvider",
        &r,
    )
    .await;
    assert_contains(&m, "--dynamic-infrastructure-clusters DockerCluster");
    r.kill();
    let r = start_reconciler(
        &tb.kubeconfig,
        &ns,
        &["--dynamic-infrastructure-clusters", "DockerCluster"],
    );
    patched(&c, &ns, "dk-cp", "True/Succeeded", &r).await;
    let d = get(&c, &ns, &ar(G, "v1beta1", "DockerCluster"), "dk")
        .await
        .unwrap();
    assert_eq!(
        d["spec"]["controlPlaneEndpoint"],
        json!({"host": "10.0.1.1", "port": 6443})
    );
}
