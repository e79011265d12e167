//! A Kubernetes version above the installed Kamaji's range. Kamaji v1.0.0 refuses it
//! in its validating webhook (`internal/webhook/handlers/tcp_version.go`), which the testbed
//! registers only for namespaces labelled `testbed::KAMAJI_VALIDATION_LABEL` (its tenants run
//! newer releases than Kamaji v1.0.0 knows). No reconciler runs in this namespace.

use std::time::Duration;

use crate::common::*;
use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use testbed::fixtures::poll::eventually;
use testbed::fixtures::run::assert_contains;

const ABOVE: &str = "v1.35.0";

fn tcp(ns: &str, name: &str, version: &str, datastore: &str) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "kamaji.clastix.io/v1alpha1", "kind": "TenantControlPlane",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"dataStore": datastore,
                 "kubernetes": {"version": version, "kubelet": {"cgroupfs": "systemd"}},
                 "controlPlane": {"service": {"serviceType": "ClusterIP"}}}}))
    .unwrap()
}

/// Labels `ns` for Kamaji's validating webhook and waits until the API server applies it (it
/// matches webhooks against its cached namespace labels): a dry-run probe says when.
async fn enforce_kamaji_validation(c: &Client, ns: &str) {
    let label = json!({"metadata": {"labels": {testbed::KAMAJI_VALIDATION_LABEL: "enforced"}}});
    Api::<Namespace>::all(c.clone())
        .patch(ns, &PatchParams::default(), &Patch::Merge(&label))
        .await
        .unwrap();
    let tcps: Api<DynamicObject> = Api::namespaced_with(c.clone(), ns, &tcp_ar());
    let probe = tcp(ns, "probe", ABOVE, "default");
    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };
    eventually(
        "Kamaji's webhook to judge the namespace",
        Duration::from_secs(30),
        async || {
            matches!(tcps.create(&dry, &probe).await,
                Err(kube::Error::Api(s)) if s.message.contains("greater than the supported one"))
        },
    )
    .await;
}

fn tcp_ar() -> kube::discovery::ApiResource {
    ar("kamaji.clastix.io", "v1alpha1", "TenantControlPlane")
}

/// `create` asks Kamaji itself (a server dry run of the TenantControlPlane the reconciler
/// would create) and refuses, before anything is written, a version Kamaji refuses; the
/// highest version Kamaji v1.0.0 knows passes the same check. `doctor` names a control plane
/// Kamaji now refuses every change to (it was created before the namespace was judged, as one
/// is after a Kamaji downgrade), with Kamaji's words, as an error.
#[tokio::test]
async fn a_version_above_kamajis_range_is_refused_at_create_and_found_by_doctor() {
    let tb = testbed_real().await;
    let (c, ns) = tb.namespace("kamaji-range").await;
    // Created before the namespace is judged; its DataStore does not exist, so Kamaji does not
    // start a tenant for it (the version check comes first in Kamaji's webhook).
    let tcps: Api<DynamicObject> = Api::namespaced_with(c.clone(), &ns, &tcp_ar());
    tcps.create(
        &PostParams::default(),
        &tcp(&ns, "old", ABOVE, &format!("absent-{ns}")),
    )
    .await
    .unwrap();
    enforce_kamaji_validation(&c, &ns).await;

    let o = kamaji(tb, &ns, &create_args("rng", "none", ABOVE, &[]));
    let line = fails(&o, 1);
    assert_contains(&line, "Kamaji refuses the control plane of rng");
    assert_contains(&line, "greater than the supported one, actually 1.30.2");
    assert_contains(&line, "nothing was created");
    assert_contains(&stderr(&o), "pick a --kubernetes-version");
    for r in [cluster_ar(), kcp_ar()] {
        assert!(
            list(&api(&c, &ns, &r), &Default::default())
                .await
                .is_empty(),
            "{} was created although Kamaji refused the version",
            r.kind
        );
    }
    ok(&kamaji(
        tb,
        &ns,
        &create_args("rng", "none", "v1.30.2", &[]),
    ));
    assert!(get(&c, &ns, &kcp_ar(), "rng").await.is_some());

    let o = kamaji(
        tb,
        &ns,
        &["doctor", "--only", "control-planes", "-o", "json"],
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let report: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let found: Vec<&Value> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["check"] == "VersionOutsideKamajiRange")
        .collect();
    assert_eq!(found.len(), 1, "{report:#}");
    let f = found[0];
    assert_eq!(f["object"]["name"], "old");
    assert_eq!(f["severity"], "Error");
    let cause = f["cause"].as_str().unwrap();
    assert!(
        cause.starts_with(&format!("runs Kubernetes {ABOVE}")),
        "{cause}"
    );
    assert_contains(cause, "actually 1.30.2");
    assert_contains(
        f["fix"].as_str().unwrap(),
        "install a Kamaji release that supports",
    );
}
