//! `kubectl kamaji install` next to another KamajiControlPlane provider (CACPPK): refused in
//! one line unless `--take-over`; and `--dry-run=client` without any kubeconfig. A testbed of
//! its own: the tests replace the cluster-wide KamajiControlPlane CRDs.

mod common;

use std::process::{Command, Stdio};

use common::*;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kcore::install::{DEFAULT_IMAGE, DEFAULT_NAMESPACE};
use kcore::labels::OWNER_LABEL;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;
use testbed::fixtures::run::assert_contains;

const KCP_CRD: &str = "kamajicontrolplanes.controlplane.cluster.x-k8s.io";

#[test]
fn client_dry_run_needs_no_kubeconfig() {
    let home = tempfile::tempdir().unwrap();
    let missing = home.path().join("no-such-kubeconfig");
    // No kubeconfig at all: none where KUBECONFIG points, none at home, not in a pod.
    let install = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_kubectl-kamaji"))
            .arg("install")
            .args(args)
            .env("KUBECONFIG", &missing)
            .env("HOME", home.path())
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let yaml = ok(&install(&["--dry-run=client", "-o", "yaml"]));
    assert!(
        yaml.contains(&format!("image: {DEFAULT_IMAGE}"))
            && yaml.contains(&format!("namespace: {DEFAULT_NAMESPACE}"))
            && yaml.contains("kind: CustomResourceDefinition"),
        "{yaml}"
    );
    assert!(!DEFAULT_IMAGE.ends_with(":latest"));
    // A server dry run does need the cluster, and says so in one line.
    fails(&install(&["--dry-run=server"]), 1);
}

#[tokio::test]
async fn install_refuses_another_provider_unless_told_to_take_over() {
    let tb = testbed::shared();
    let (client, ns) = tb.namespace("kamaji-provider").await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let ours: Api<Deployment> = Api::namespaced(client.clone(), &ns);

    // CACPPK v0.20.0's own CRDs, as its release installs them.
    testbed::install_crds(&client, &tb.assets.crds.join("extra"))
        .await
        .unwrap();
    // `install ARGS` is refused in one line saying `says`; the output.
    let refused = |args: &[&str], says: &str, what: &str| {
        let out = kamaji(tb, &ns, args);
        testbed::expect::one_line_refusal(&out, 1, says, what).unwrap();
        out
    };
    let says = format!("CRD {KCP_CRD} belongs to another KamajiControlPlane provider");
    let out = refused(&["install"], &says, "kamaji install over CACPPK's CRDs");
    assert_contains(&stderr(&out), "--take-over");
    assert!(
        ours.get_opt("kamaji-reconciler").await.unwrap().is_none(),
        "a refused install created its Deployment"
    );
    // A server dry run is refused the same way.
    let says = "another KamajiControlPlane provider";
    refused(&["install", "--dry-run=server"], says, "dry run");

    // --take-over replaces them, and the CRDs are ours from then on.
    let out = kamaji(tb, &ns, &["install", "--take-over"]);
    let text = ok(&out);
    assert_contains(
        &text,
        "deployment.apps/kamaji-reconciler serverside-applied",
    );
    assert_contains(&stderr(&out), "taking over");
    let crd = crds.get(KCP_CRD).await.unwrap();
    assert_eq!(
        crd.metadata.labels.unwrap_or_default().get(OWNER_LABEL.0),
        Some(&OWNER_LABEL.1.to_string())
    );
    assert!(
        crd.spec
            .versions
            .iter()
            .any(|v| v.name == "v1alpha1" && v.served),
        "our CRD (both versions) replaced CACPPK's"
    );
    ok(&kamaji(tb, &ns, &["install"]));

    // CACPPK's controller Deployment, as its kustomization labels it, is refused too.
    let (_, other) = tb.namespace("cacppk-system").await;
    let theirs: Api<Deployment> = Api::namespaced(client.clone(), &other);
    let dep: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "capi-kamaji-controller-manager", "labels": {"cluster.x-k8s.io/provider": "kamaji", "control-plane": "controller-manager"}},
        "spec": {
            "selector": {"matchLabels": {"control-plane": "controller-manager"}},
            "template": {
                "metadata": {"labels": {"control-plane": "controller-manager"}},
                "spec": {"containers": [{"name": "manager", "image": "docker.io/clastix/cluster-api-control-plane-provider-kamaji:v0.20.0"}]}
            }
        }
    }))
    .unwrap();
    theirs.create(&PostParams::default(), &dep).await.unwrap();
    let says = format!("Deployment {other}/capi-kamaji-controller-manager");
    refused(
        &["install"],
        &says,
        "kamaji install next to CACPPK's Deployment",
    );
    ok(&kamaji(tb, &ns, &["install", "--take-over"]));
    theirs
        .delete("capi-kamaji-controller-manager", &DeleteParams::default())
        .await
        .unwrap();
    ok(&kamaji(tb, &ns, &["install"]));
}
