//! The reconciler counts the fleet doctor's findings at each certificate scan and shows
//! them on `/metrics` by check and severity, so that alerts need no one to run the CLI; a finding
//! that goes away reads 0 for one scan (the alert resolves), then its series goes.

use crate::common::*;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::json;

/// `kamaji_reconciler_findings{check="<check>",severity="<severity>"}` on `/metrics`: its value,
/// `Some(None)` when the reconciler answers without that series, `None` when it does not answer.
fn findings(r: &Reconciler, check: &str, severity: &str) -> Option<Option<i64>> {
    let body = r.http_get("/metrics")?;
    let series =
        format!("kamaji_reconciler_findings{{check=\"{check}\",severity=\"{severity}\"}} ");
    Some(
        body.lines()
            .find_map(|l| l.strip_prefix(&series))
            .and_then(|v| v.trim().parse().ok()),
    )
}

const ORPHANS: [&str; 2] = ["gone-kubeconfig", "gone-ca"];

#[tokio::test(flavor = "multi_thread")]
async fn findings_by_check_and_severity_show_on_metrics() {
    let tb = testbed::shared();
    let (c, ns) = namespace(tb, "kr-findings").await;
    // Leftovers of a cluster deleted by hand: two Secrets labelled for a Cluster that does not
    // exist (one OrphanSecrets warning, for the cluster), and a paused Cluster (ClusterPaused).
    let secrets: Api<Secret> = Api::namespaced(c.clone(), &ns);
    for name in ORPHANS {
        let body = json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": name, "labels": {"cluster.x-k8s.io/cluster-name": "gone"}},
            "data": {"value": base64("x")}});
        secrets
            .patch(
                name,
                &PatchParams::apply(FIXTURE).force(),
                &Patch::Apply(&body),
            )
            .await
            .unwrap();
    }
    let mut held = cluster_body("v1beta2", "held", "held-cp", None, small_net());
    held["spec"]["paused"] = json!(true);
    apply(&c, &ns, &cluster_ar("v1beta2"), held).await;

    let r = start_reconciler(
        &tb.kubeconfig,
        &ns,
        &["--cert-scan-interval", "10s", "--findings-scan"],
    );
    wait_for(60, "both findings on /metrics", Some(&r), || async {
        (findings(&r, "OrphanSecrets", "Warning")? == Some(1)
            && findings(&r, "ClusterPaused", "Info")? == Some(1))
        .then_some(())
    })
    .await;
    let body = r.http_get("/metrics").unwrap();
    for want in [
        "# TYPE kamaji_reconciler_findings gauge\n",
        "# TYPE kamaji_reconciler_findings_scan_timestamp_seconds gauge\n",
    ] {
        assert!(body.contains(want), "{want:?} in:\n{body}");
    }
    let scanned = |body: &str| -> Option<i64> {
        body.lines()
            .find_map(|l| l.strip_prefix("kamaji_reconciler_findings_scan_timestamp_seconds "))
            .and_then(|v| v.trim().parse().ok())
    };
    let first = scanned(&body).unwrap_or_else(|| panic!("no scan timestamp in:\n{body}"));
    assert!(
        (jiff::Timestamp::now().as_second() - first).abs() < 120,
        "scan timestamp {first} is not now"
    );

    // The Secrets cleaned up: the next scan shows the warning at 0 (an alert on it resolves),
    // the paused Cluster still counted; the scan after drops the series.
    for name in ORPHANS {
        secrets
            .delete(name, &DeleteParams::default())
            .await
            .unwrap();
    }
    wait_for(60, "OrphanSecrets at 0", Some(&r), || async {
        (findings(&r, "OrphanSecrets", "Warning")? == Some(0)
            && findings(&r, "ClusterPaused", "Info")? == Some(1))
        .then_some(())
    })
    .await;
    let later = scanned(&r.http_get("/metrics").unwrap()).unwrap();
    assert!(
        later > first,
        "the scan timestamp moved: {first} then {later}"
    );
    wait_for(60, "OrphanSecrets gone from /metrics", Some(&r), || async {
        (findings(&r, "OrphanSecrets", "Warning")?.is_none()
            && findings(&r, "ClusterPaused", "Info")? == Some(1))
        .then_some(())
    })
    .await;
}

#[test]
fn stuck_after_is_bounded() {
    for (value, want) in [
        ("30s", "out of range (1m to 24h)"),
        ("25h", "out of range (1m to 24h)"),
        ("soon", "invalid duration"),
    ] {
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_kamaji-reconciler"))
            .args(["--stuck-after", value])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "--stuck-after {value}: {err}");
        assert!(err.contains(want), "--stuck-after {value}: {err}");
    }
}
