//! Faults: a `--wait` verb rides out an API server restart. This binary has a testbed
//! of its own, since restarting its API server would disturb every other test sharing one.

mod common;

use common::*;
use std::time::{Duration, Instant};

use testbed::fixtures::poll::eventually_or;
use testbed::fixtures::run::assert_contains;
use testbed::fixtures::run::{self, Background, words};

/// The tests of this binary restart its API server one at a time: a restart in the middle of
/// another test's own requests (not the CLI's, which ride it out) would fail that test.
static RESTARTS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Starts `kubectl kamaji ARGS` on the testbed in the background.
fn spawn_kamaji(tb: &testbed::Testbed, ns: &str, args: &[&str]) -> Background {
    Background::plugin_in(
        env!("CARGO_BIN_EXE_kubectl-kamaji"),
        &tb.kubeconfig,
        ns,
        args,
    )
}

#[tokio::test]
async fn delete_wait_survives_an_api_server_restart() {
    let _turn = RESTARTS.lock().await;
    let tb = testbed().await;
    let (c, ns) = tb.namespace("kamaji-restart").await;
    // A finalizer holds the Cluster until the test lets go, after the restart.
    held_cluster(&c, &ns, "held").await;
    let args = ["delete", "held", "--yes", "--wait", "--timeout", "120s"];
    let mut cli = spawn_kamaji(tb, &ns, &args);
    // The command is in its wait once it says what it waits for.
    let err = cli.stderr_fn();
    eventually_or(
        "delete to reach its wait",
        Duration::from_secs(60),
        &err,
        || {
            let waiting = err().contains("waiting for held to be gone");
            assert!(waiting || cli.running(), "delete ended: {}", err());
            async move { waiting }
        },
    )
    .await;
    tb.restart_apiserver_under(cli.child.id(), &err)
        .await
        .unwrap();
    assert!(
        cli.running(),
        "the wait ended with the API server's restart: {}",
        cli.stderr()
    );
    // The restarted server is a new connection for this client too.
    let c = tb.client().await;
    drop_finalizers(&api(&c, &ns, &cluster_ar()), "held").await;
    let status = cli.exit(Duration::from_secs(120)).await;
    let (out, err) = (cli.stdout(), cli.stderr());
    assert!(status.success(), "{out}\n{err}");
    run::assert_one_outage_reported(&err);
    assert_contains(&out, "held is gone");
}

/// `create --wait` exited 1 while the API server was down. The server is stopped
/// (SIGSTOP) until a request of the waiting command hangs on it, then restarted (the kill
/// resets that request), so the wait cannot fall between two polls. No reconciler runs here,
/// so the wait stays at its first phase: it says once that the server is unreachable and once
/// that it is back, and ends only at its own deadline, naming what it waited for and the last
/// status it saw.
#[tokio::test]
async fn create_wait_survives_an_api_server_restart() {
    let _turn = RESTARTS.lock().await;
    let tb = testbed().await;
    let (_, ns) = tb.namespace("kamaji-restart-create").await;
    let started = Instant::now();
    let mut cli = spawn_kamaji(
        tb,
        &ns,
        &words("create rc --infrastructure none --kubernetes-version v1.35.0 --wait --timeout 40s"),
    );
    // The command is in its wait once it says what it waits for. (Its KamajiControlPlane
    // existing is not enough: the objects after it may still be being applied, and a restart
    // then fails that apply, not the wait. CI saw this once.)
    let err = cli.stderr_fn();
    eventually_or(
        "create to reach its wait",
        Duration::from_secs(30),
        &err,
        || {
            let waiting = err().contains("waiting for cluster rc");
            assert!(waiting || cli.running(), "create ended: {}", err());
            async move { waiting }
        },
    )
    .await;
    tb.restart_apiserver_under(cli.child.id(), cli.stderr_fn())
        .await
        .unwrap();
    let status = cli.exit(Duration::from_secs(60)).await;
    let err = cli.stderr();
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(
        started.elapsed() >= Duration::from_secs(40),
        "ended before its deadline: {err}"
    );
    run::assert_one_outage_reported(&err);
    let line = err
        .lines()
        .find(|l| l.starts_with("error: "))
        .unwrap_or_default();
    assert!(
        line.starts_with(
            "error: timed out after 40s while waiting for cluster rc (last seen: 1/4 control plane provisioning"
        ),
        "{err}"
    );
}
