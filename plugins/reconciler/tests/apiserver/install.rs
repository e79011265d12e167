//! The install manifests apply, and their ClusterRole is enough: the reconciler runs as the
//! ServiceAccount they create (with leader election) and takes a KamajiControlPlane to ready.

use crate::common::*;
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, ApiResource, Patch, PatchParams, PostParams};
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn installed_rbac_is_sufficient_and_manifests_apply() {
    let tb = testbed::shared();
    let (c, ns) = tb.namespace("kr-install").await;
    let objs = kamaji_reconciler::install_manifests("example.com/kamaji-reconciler:test", &ns, 1);
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

    plain_cluster(
        &c,
        &ns,
        "sa",
        json!({"services": {"cidrBlocks": ["10.96.0.0/16"]}}),
        json!({"version": "1.33.0"}),
    )
    .await;
    let r = start_reconciler(
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
    assert_log_lacks(
        &r,
        &["forbidden"],
        "the API server refused the reconciler something",
    );
}

/// Every CRD we ship (what `kamaji-reconciler manifests` writes: the
/// KamajiControlPlane and KamajiControlPlaneTemplate CRDs with both versions, ClusterUpgrade,
/// FleetUpgrade) is created by `kubectl apply --server-side` without a `Warning:` from the API
/// server (it warned `unrecognized format "uint32"`). The API server warns about formats only
/// when a CRD is created or a format is new to it, so each CRD is created afresh under a group
/// of this test's own, with the very schema we ship.
#[tokio::test(flavor = "multi_thread")]
async fn every_crd_we_ship_applies_without_a_warning() {
    let tb = testbed::shared();
    let (_c, ns) = tb.namespace("kr-crd-warn").await;
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kamaji-reconciler"))
        .arg("manifests")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let docs: Vec<serde_json::Value> =
        serde_saphyr::from_multiple(&String::from_utf8_lossy(&out.stdout)).unwrap();
    let mut crds: Vec<serde_json::Value> = docs
        .into_iter()
        .filter(|d| d["kind"] == "CustomResourceDefinition")
        .collect();
    let mut kinds: Vec<String> = crds
        .iter()
        .map(|c| c["spec"]["names"]["kind"].as_str().unwrap().to_string())
        .collect();
    kinds.sort();
    assert_eq!(
        kinds,
        [
            "ClusterUpgrade",
            "FleetUpgrade",
            "KamajiControlPlane",
            "KamajiControlPlaneTemplate",
            "TenantBackup"
        ]
    );
    for c in &mut crds {
        let group = format!("{ns}.{}", c["spec"]["group"].as_str().unwrap());
        let plural = c["spec"]["names"]["plural"].as_str().unwrap().to_string();
        c["metadata"]["name"] = json!(format!("{plural}.{group}"));
        c["spec"]["group"] = json!(group);
    }
    let file = std::env::temp_dir().join(format!("{ns}-crds.json"));
    let list = json!({"apiVersion": "v1", "kind": "List", "items": crds});
    std::fs::write(&file, serde_json::to_vec(&list).unwrap()).unwrap();
    let kubectl = |args: &[&str]| {
        std::process::Command::new("kubectl")
            .args(args)
            .arg("-f")
            .arg(&file)
            .arg("--kubeconfig")
            .arg(&tb.kubeconfig)
            .env_remove("KUBECONFIG")
            .output()
            .unwrap()
    };
    let o = kubectl(&["apply", "--server-side", "--field-manager", "kr-crd-warn"]);
    let stderr = String::from_utf8_lossy(&o.stderr).to_string();
    let _ = kubectl(&["delete", "--wait=false"]);
    assert!(o.status.success(), "{stderr}");
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).lines().count(),
        crds.len(),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    assert!(
        !stderr.contains("Warning"),
        "the API server warned:\n{stderr}"
    );
}
