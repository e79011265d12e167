//! The reconciler reads the TenantControlPlanes' certificates itself (one LIST of
//! Kamaji's certificate Secrets every `--cert-scan-interval`), shows the first to expire on
//! `/metrics`, and sets `CertificatesExpiring` on the KamajiControlPlane, so that alerts need no
//! one to run the CLI.

use std::process::Command;

use crate::common::*;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

const V: &str = "v1alpha2";

/// Plays Kamaji: the tenant's API server certificate Secret, with Kamaji's two labels, expiring
/// `days` from now; returns its notAfter in Unix seconds.
async fn plant(c: &kube::Client, ns: &str, tenant: &str, days: i64) -> i64 {
    let (pem, not_after) = testbed::expiring_certificate(days);
    let name = format!("{tenant}-api-server-certificate");
    let body = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name, "labels": {
            "kamaji.clastix.io/project": "kamaji", "kamaji.clastix.io/name": tenant}},
        "data": {"apiserver.crt": base64(&pem), "apiserver.key": base64("KEY")}});
    Api::<Secret>::namespaced(c.clone(), ns)
        .patch(
            &name,
            &PatchParams::apply(FIXTURE).force(),
            &Patch::Apply(&body),
        )
        .await
        .unwrap();
    not_after
}

/// The value of the series `metric` of `tenant` in `ns` on `/metrics`.
fn series(r: &Reconciler, metric: &str, ns: &str, tenant: &str) -> Option<i64> {
    let body = r.http_get("/metrics")?;
    let prefix = format!("{metric}{{namespace=\"{ns}\",tenant_control_plane=\"{tenant}\"}} ");
    body.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|v| v.trim().parse().ok())
}

#[tokio::test(flavor = "multi_thread")]
async fn certificates_expiring_show_on_metrics_and_as_a_condition() {
    let tb = testbed::shared();
    let (c, ns) = namespace(tb, "kr-certs").await;
    plain_cluster(&c, &ns, "certs", small_net(), json!({"version": "1.33.0"})).await;
    let kcp = "certs-cp";
    let soon = plant(&c, &ns, kcp, 5).await;
    let r = start_reconciler(&tb.kubeconfig, &ns, &["--cert-scan-interval", "10s"]);
    kamaji_ready(&c, &ns, kcp, "10.0.0.30:6443", "v1.33.0", &r).await;

    // The first scan ran before the controller started: the metrics and the condition.
    let expiry = "kamaji_reconciler_tenant_certificate_expiry_timestamp_seconds";
    let expiring = "kamaji_reconciler_tenant_certificates_expiring";
    wait_for(30, "the expiry on /metrics", Some(&r), || async {
        (series(&r, expiry, &ns, kcp)? == soon && series(&r, expiring, &ns, kcp)? == 1)
            .then_some(())
    })
    .await;
    let m = wait_condition(&c, &ns, V, kcp, "CertificatesExpiring=True/Expiring", &r).await;
    for want in [
        "1 certificate(s) expire within 30d",
        "apiserver.crt of Secret certs-cp-api-server-certificate first",
        "days left",
        &format!("kubectl kamaji certificates rotate certs-cp -n {ns} --all=true"),
    ] {
        assert!(m.contains(want), "{want:?} in {m:?}");
    }
    // The reconcile's own conditions keep it: Ready and expiring at once.
    let k = get(&c, &ns, &kcp_ar(V), kcp).await.unwrap();
    assert!(ready(&k), "{:?}", k["status"]);
    assert_eq!(
        condition(&k, "CertificatesExpiring").map(|c| c.0),
        Some("True".into())
    );

    // Renewed (as `kubectl kamaji certificates rotate` makes Kamaji do): the next scan clears
    // it, without any other change to the KamajiControlPlane.
    let later = plant(&c, &ns, kcp, 400).await;
    let m = wait_condition(
        &c,
        &ns,
        V,
        kcp,
        "CertificatesExpiring=False/NotExpiring",
        &r,
    )
    .await;
    assert!(m.starts_with("no certificate expires within 30d"), "{m}");
    wait_for(30, "the renewed expiry on /metrics", Some(&r), || async {
        (series(&r, expiry, &ns, kcp)? == later && series(&r, expiring, &ns, kcp)? == 0)
            .then_some(())
    })
    .await;
    let k = get(&c, &ns, &kcp_ar(V), kcp).await.unwrap();
    assert!(ready(&k), "{:?}", k["status"]);
    // Without --findings-scan, the fleet is not read for findings (their memory grows with it).
    let body = r.http_get("/metrics").unwrap();
    assert!(!body.contains("kamaji_reconciler_findings"), "{body}");
}

#[test]
fn scan_interval_and_threshold_are_bounded() {
    for (flag, value, want) in [
        ("--cert-scan-interval", "1s", "out of range (10s to 24h)"),
        ("--cert-scan-interval", "25h", "out of range (10s to 24h)"),
        ("--cert-warn", "4000d", "at most 3650d"),
        ("--cert-warn", "soon", "invalid duration"),
    ] {
        let o = Command::new(env!("CARGO_BIN_EXE_kamaji-reconciler"))
            .args([flag, value])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{flag} {value}: {err}");
        assert!(err.contains(want), "{flag} {value}: {err}");
    }
}
