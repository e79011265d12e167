//! `certificates rotate --verify` on the real Kamaji v1.0.0, where a path breaks: the tenant's
//! CA rotated while kamaji-reconciler is stopped, so Cluster API's `<cluster>-kubeconfig` still
//! holds the old CA (as any copy of a kubeconfig made before a CA rotation does). `--verify`
//! names that path, its cause and the fix, and exits 1; with the reconciler back, the next
//! rotation verifies every path. The passing run after `--all` is in `lifecycle`.

use crate::common::*;
use testbed::fixtures::run::assert_contains;

#[tokio::test]
async fn a_ca_rotation_that_leaves_a_stale_copy_is_named_by_verify() {
    let (tb, _client, ns, rec) = live_namespace("certpaths").await;
    let name = "cp";
    live_tenant(tb, &ns, name);
    drop(rec);
    let broken = kamaji(
        tb,
        &ns,
        &[
            "certificates",
            "rotate",
            name,
            "--certificates=CA",
            "--verify",
            "--timeout",
            "90s",
        ],
    );
    // Not bad input: the paths tried are reported before the error and its fix.
    assert_eq!(broken.status.code(), Some(1), "{}", stderr(&broken));
    let err = stderr(&broken);
    for want in [
        "error: cp: after the rotation, the Cluster API's kubeconfig fails: Secret ",
        // The old CA's copy: same subject as the new CA, another key.
        "invalid peer certificate: ",
        "(with the CA it holds)",
        "hint: kamaji-reconciler copies Kamaji's admin kubeconfig and CA for Cluster API",
    ] {
        assert_contains(&err, want);
    }
    // The paths before it work: Kamaji re-issued everything from the new CA.
    assert_contains(&err, "API server serving certificate: ok");
    assert_contains(&err, "admin kubeconfig: ok");

    // A log of its own: the stopped one's names an address nothing serves any more.
    let rec = testbed::fixtures::reconciler::Reconciler::start(
        &testbed::fixtures::reconciler::binary_next_to(env!("CARGO_BIN_EXE_kubectl-kamaji")),
        &tb.kubeconfig,
        &ns,
        tb.dir.join(format!("reconciler-{ns}-again.log")),
        &["-v"],
        &[],
    );
    let fixed = ok(&kamaji(
        tb,
        &ns,
        &[
            "certificates",
            "rotate",
            name,
            "--certificates=APIServer",
            "--verify",
            "--timeout",
            "180s",
        ],
    ));
    assert_contains(&fixed, "Cluster API's kubeconfig: ok");
    assert_contains(&fixed, "Cluster API's CA: ok");
    assert_contains(&fixed, "cp: every path that uses its certificates works");
    metrics_pass_promtool(&rec, &ns, name).await;
    ok(&delete_wait(tb, &ns, name, "180s"));
}

/// The reconciler's /metrics, once its certificate scan saw this tenant, pass Prometheus's own
/// exposition lint (`promtool check metrics`): what the PrometheusRule `kamaji install` ships
/// alerts on is well-formed where a Prometheus scrapes it.
async fn metrics_pass_promtool(
    rec: &testbed::fixtures::reconciler::Reconciler,
    ns: &str,
    name: &str,
) {
    let series = format!(
        "kamaji_reconciler_tenant_certificate_expiry_timestamp_seconds{{namespace=\"{ns}\",tenant_control_plane=\"{name}\"}} "
    );
    let body = wait_until(
        "the tenant's series on /metrics",
        std::time::Duration::from_secs(90),
        || async {
            let raw = rec.http_get("/metrics").ok_or("no answer")?;
            let body = raw
                .split_once("\r\n\r\n")
                .map(|(_, b)| b.to_string())
                .ok_or("no body")?;
            if body.contains(&series) {
                Ok(body)
            } else {
                Err(body)
            }
        },
    )
    .await;
    let bins = testbed::build_bins("monitoring").expect("testbed/build-bins.sh monitoring");
    let mut child = std::process::Command::new(bins.join("promtool"))
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(body.as_bytes())
            .unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics:\n{}{}\n{body}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
