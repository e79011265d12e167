//! `kubectl kamaji install` next to another KamajiControlPlane provider (CACPPK): refused in
//! one line unless `--take-over`, after which what CACPPK's CRDs stored beyond our bounds is
//! kept by the API server but not copied by the reconciler; and `--dry-run=client` without any
//! kubeconfig. A testbed of its own: the tests replace the cluster-wide KamajiControlPlane CRDs.

mod common;

use std::process::{Command, Stdio};

use common::*;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kcore::install::{DEFAULT_IMAGE, DEFAULT_NAMESPACE};
use kcore::labels::OWNER_LABEL;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use testbed::fixtures::run::assert_contains;

const KCP_CRD: &str = "kamajicontrolplanes.controlplane.cluster.x-k8s.io";

/// A version of 100,000 characters, which CACPPK's CRD stores.
fn long_version() -> String {
    format!("v1.33.0-{}", "a".repeat(99_992))
}

/// Under CACPPK's CRDs, which bound neither, a user stores a KamajiControlPlane of 100
/// replicas (`many-cp`) and one whose version is 100,000 characters (`long-cp`), each owned
/// by its Cluster.
async fn stored_under_cacppk(c: &kube::Client, ns: &str) {
    let pp = PatchParams::apply("test").force();
    for (cluster, spec) in [
        ("many", json!({"version": "v1.33.0", "replicas": 100})),
        ("long", json!({"version": long_version()})),
    ] {
        let kcp = format!("{cluster}-cp");
        let body = json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
            "metadata": {"name": cluster},
            "spec": {"clusterNetwork": {"apiServerPort": 6443, "services": {"cidrBlocks": ["10.96.0.0/16"]}},
                "controlPlaneRef": {"apiGroup": "controlplane.cluster.x-k8s.io", "kind": "KamajiControlPlane", "name": kcp}}});
        let cl = api(c, ns, &cluster_ar())
            .patch(cluster, &pp, &Patch::Apply(&body))
            .await
            .unwrap();
        let owner = json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
            "name": cluster, "uid": cl.metadata.uid});
        let body = json!({"apiVersion": "controlplane.cluster.x-k8s.io/v1alpha2", "kind": "KamajiControlPlane",
            "metadata": {"name": kcp, "ownerReferences": [owner]}, "spec": spec});
        api(c, ns, &kcp_ar())
            .patch(&kcp, &pp, &Patch::Apply(&body))
            .await
            .unwrap_or_else(|e| panic!("CACPPK's CRD refused {kcp}: {e}"));
    }
}

/// `TenantControlPlaneCreated` of a KamajiControlPlane: (status, reason, message).
fn created(kcp: &Value) -> Option<(String, String, String)> {
    let c = kcp["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "TenantControlPlaneCreated")?;
    let s = |k: &str| c[k].as_str().unwrap_or_default().to_string();
    Some((s("status"), s("reason"), s("message")))
}

/// Once our CRDs took over, the API server keeps what CACPPK's stored: it checks an object
/// against the schema only when it is written, and lets a write that leaves the field alone
/// keep it. So the reconciler checks the stored spec itself: it copies neither the count nor
/// the version into a TenantControlPlane and says why in a condition; once the count is fixed,
/// the TenantControlPlane follows.
async fn kept_but_not_copied(tb: &testbed::Testbed, c: &kube::Client, ns: &str) {
    let kcps = api(c, ns, &kcp_ar());
    let many = get(c, ns, &kcp_ar(), "many-cp").await.unwrap();
    assert_eq!(many["spec"]["replicas"], 100);
    let long = get(c, ns, &kcp_ar(), "long-cp").await.unwrap();
    assert_eq!(
        long["spec"]["version"].as_str().map(str::len),
        Some(100_000)
    );
    // A new count out of bounds is refused; a write of another field passes, the count kept.
    let merge = |body: Value| {
        let kcps = kcps.clone();
        async move {
            kcps.patch("many-cp", &PatchParams::default(), &Patch::Merge(&body))
                .await
        }
    };
    let e = merge(json!({"spec": {"replicas": 17}})).await.unwrap_err();
    assert!(matches!(&e, kube::Error::Api(a) if a.code == 422), "{e}");
    merge(json!({"spec": {"dataStoreName": "default"}}))
        .await
        .unwrap();

    let r = start_reconciler(tb, ns);
    let r = &r;
    let refused = |name: &'static str| async move {
        wait_until(
            &format!("{name} refused in a condition"),
            std::time::Duration::from_secs(60),
            || async {
                let k = get(c, ns, &kcp_ar(), name).await.ok_or("no KCP")?;
                created(&k)
                    .filter(|(s, reason, _)| s == "False" && reason == "InvalidSpec")
                    .ok_or_else(|| format!("{:?}\n{}", created(&k), r.log_tail()))
            },
        )
        .await
    };
    let (_, _, why) = refused("many-cp").await;
    assert_eq!(
        why,
        "spec.replicas 100 is out of bounds: set it between 0 and 16",
        "{}",
        r.log_tail()
    );
    let (_, _, why) = refused("long-cp").await;
    assert!(
        why.contains("is not a Kubernetes version") && why.len() < 400,
        "{why}"
    );
    for tcp in ["many-cp", "long-cp"] {
        assert!(
            get(c, ns, &tcp_ar(), tcp).await.is_none(),
            "{tcp}: a TenantControlPlane was made from a spec out of bounds"
        );
    }
    merge(json!({"spec": {"replicas": 3}})).await.unwrap();
    let tcp = wait_until(
        "the TenantControlPlane of many-cp, fixed",
        std::time::Duration::from_secs(60),
        || async {
            get(c, ns, &tcp_ar(), "many-cp")
                .await
                .ok_or_else(|| r.log_tail())
        },
    )
    .await;
    assert_eq!(tcp["spec"]["controlPlane"]["deployment"]["replicas"], 3);
}

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

    // CACPPK v0.20.0's own CRDs, as its release installs them, and what they let a user store.
    testbed::install_crds(&client, &tb.assets.crds.join("extra"))
        .await
        .unwrap();
    stored_under_cacppk(&client, &ns).await;
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
    kept_but_not_copied(tb, &client, &ns).await;

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
