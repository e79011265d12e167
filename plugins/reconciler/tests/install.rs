//! The install manifests apply, and their ClusterRole is enough: the reconciler runs as the
//! ServiceAccount they create (with leader election) and takes a KamajiControlPlane to ready.

mod common;

use common::*;
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, ApiResource, Patch, PatchParams, PostParams};
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn installed_rbac_is_sufficient_and_manifests_apply() {
    let tb = testbed::shared();
    let (c, ns) = tb.namespace("kr-install").await;
    let objs = kamaji_reconciler::install_manifests("example.com/kamaji-reconciler:test", &ns);
    let (crds, rest): (Vec<_>, Vec<_>) = objs
        .into_iter()
        .partition(|o| o["kind"] == "CustomResourceDefinition");
    install_crds(&c, &crds).await;
    for o in &rest {
        let (group, version) = match o["apiVersion"].as_str().unwrap().split_once('/') {
            Some((g, v)) => (g.to_string(), v.to_string()),
            None => (String::new(), o["apiVersion"].as_str().unwrap().to_string()),
        };
        let kind = o["kind"].as_str().unwrap();
        let r = ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(&group, &version, kind));
        let name = o["metadata"]["name"].as_str().unwrap();
        let api: Api<kube::api::DynamicObject> = if o["metadata"]["namespace"].is_string() {
            Api::namespaced_with(c.clone(), &ns, &r)
        } else {
            Api::all_with(c.clone(), &r)
        };
        api.patch(name, &PatchParams::apply(FIXTURE).force(), &Patch::Apply(o))
            .await
            .unwrap_or_else(|e| panic!("applying {kind} {name}: {e}"));
    }
    // A token of the ServiceAccount the manifests create.
    let tr: TokenRequest =
        serde_json::from_value(json!({"spec": {"audiences": [], "expirationSeconds": 3600}}))
            .unwrap();
    let tok = Api::<ServiceAccount>::namespaced(c.clone(), &ns)
        .create_token_request("kamaji-reconciler", &PostParams::default(), &tr)
        .await
        .unwrap()
        .status
        .unwrap()
        .token;
    let kubeconfig = tb.kubeconfig_with_token(&format!("sa-{ns}"), &tok).unwrap();

    cluster_with_kcp(
        &c,
        &ns,
        "v1beta2",
        "sa",
        "sa-cp",
        None,
        json!({"services": {"cidrBlocks": ["10.96.0.0/16"]}}),
        json!({"version": "1.33.0"}),
    )
    .await;
    let r = Reconciler::start(
        &kubeconfig,
        &ns,
        &["--leader-elect", "--leader-election-namespace", &ns],
    );
    wait_for(60, "the TCP (as the ServiceAccount)", Some(&r), || {
        get_tcp(&c, &ns, "sa-cp")
    })
    .await;
    kamaji_publish(&c, &ns, "sa-cp", "10.3.0.1:6443", "v1.33.0", "Ready", 1).await;
    wait_for(60, "ready with the installed RBAC", Some(&r), || async {
        let k = get(&c, &ns, &kcp_ar("v1alpha2"), "sa-cp").await?;
        secret(&c, &ns, "sa-kubeconfig").await?;
        secret(&c, &ns, "sa-ca").await?;
        (k["status"]["ready"] == json!(true)).then_some(())
    })
    .await;
    let log = std::fs::read_to_string(&r.log).unwrap_or_default();
    assert!(!log.contains("forbidden"), "{}", r.log_tail());
}
