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
    let port = free_port().to_string();
    ok(&create_tenant(
        tb,
        &ns,
        name,
        "none",
        &port,
        &["--datastore", "default"],
    ));
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

    let _rec = start_reconciler(tb, &ns);
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
    ok(&delete_wait(tb, &ns, name, "180s"));
}
