//! Faults (issue 13): a `--wait` verb rides out an API server restart. This binary has a testbed
//! of its own, since restarting its API server would disturb every other test sharing one.

mod common;

use common::*;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use kube::api::{Api, DynamicObject, Patch, PatchParams};

/// The tests of this binary restart its API server one at a time: a restart in the middle of
/// another test's own requests (not the CLI's, which ride it out) would fail that test.
static RESTARTS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The command under test, killed on drop if the test fails first.
struct Cli(Child);

impl Drop for Cli {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `kubectl kamaji ARGS` on the testbed, its output to files the test reads as it goes.
fn spawn_kamaji(tb: &testbed::Testbed, ns: &str, args: &[&str], out: &Path, err: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_kubectl-kamaji"))
        .args(args)
        .arg("--kubeconfig")
        .arg(&tb.kubeconfig)
        .args(["-n", ns])
        .env_remove("KUBECONFIG")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(out).unwrap())
        .stderr(std::fs::File::create(err).unwrap())
        .spawn()
        .unwrap()
}

/// The command's exit status, or a failed test (with its stderr) after `limit`.
fn wait_exit(cli: &mut Child, limit: Duration, err: impl Fn() -> String) -> ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(s) = cli.try_wait().unwrap() {
            return s;
        }
        assert!(
            Instant::now() < deadline,
            "the command did not end: {}",
            err()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[tokio::test]
async fn delete_wait_survives_an_api_server_restart() {
    let _turn = RESTARTS.lock().await;
    let tb = testbed().await;
    let (c, ns) = tb.namespace("kamaji-restart").await;
    let clusters = Api::<DynamicObject>::namespaced_with(
        c.clone(),
        &ns,
        &ar("cluster.x-k8s.io", "v1beta2", "Cluster"),
    );
    // A finalizer holds the Cluster until the test lets go, after the restart.
    let cluster = serde_json::json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
        "metadata": {"name": "held", "finalizers": ["test.example.com/hold"]},
        "spec": {"clusterNetwork": {"apiServerPort": 6443}}});
    clusters
        .patch(
            "held",
            &PatchParams::apply("test").force(),
            &Patch::Apply(&cluster),
        )
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (out_path, err_path) = (dir.path().join("stdout"), dir.path().join("stderr"));
    let mut cli = Cli(spawn_kamaji(
        tb,
        &ns,
        &["delete", "held", "--yes", "--wait", "--timeout", "120s"],
        &out_path,
        &err_path,
    ));
    let err = || std::fs::read_to_string(&err_path).unwrap_or_default();
    // The command is in its wait once it says what it waits for.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !err().contains("waiting for held to be gone") {
        assert!(
            Instant::now() < deadline && cli.0.try_wait().unwrap().is_none(),
            "delete did not reach its wait: {}",
            err()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tb.restart_apiserver_under(cli.0.id(), err).await.unwrap();
    assert!(
        cli.0.try_wait().unwrap().is_none(),
        "the wait ended with the API server's restart: {}",
        err()
    );
    // The restarted server is a new connection for this client too.
    let c = tb.client().await;
    let clusters = Api::<DynamicObject>::namespaced_with(
        c.clone(),
        &ns,
        &ar("cluster.x-k8s.io", "v1beta2", "Cluster"),
    );
    drop_finalizers(&clusters, "held").await;
    let status = wait_exit(&mut cli.0, Duration::from_secs(120), err);
    let (out, err) = (std::fs::read_to_string(&out_path).unwrap(), err());
    assert!(status.success(), "{out}\n{err}");
    assert_eq!(
        err.matches("the API server is unreachable").count()
            + err.matches("the API server is not ready").count(),
        1,
        "{err}"
    );
    assert_eq!(
        err.matches("the API server answers again").count(),
        1,
        "{err}"
    );
    assert!(out.contains("held is gone"), "{out}");
}

/// Issue 24: `create --wait` exited 1 while the API server was down. The server is stopped
/// (SIGSTOP) until a request of the waiting command hangs on it, then restarted (the kill
/// resets that request), so the wait cannot fall between two polls. No reconciler runs here,
/// so the wait stays at its first phase: it says once that the server is unreachable and once
/// that it is back, and ends only at its own deadline, naming what it waited for and the last
/// status it saw.
#[tokio::test]
async fn create_wait_survives_an_api_server_restart() {
    let _turn = RESTARTS.lock().await;
    let tb = testbed().await;
    let (c, ns) = tb.namespace("kamaji-restart-create").await;
    let dir = tempfile::tempdir().unwrap();
    let err_path = dir.path().join("stderr");
    let started = Instant::now();
    let mut cli = Cli(spawn_kamaji(
        tb,
        &ns,
        &[
            "create",
            "rc",
            "--infrastructure",
            "none",
            "--kubernetes-version",
            "v1.35.0",
            "--wait",
            "--timeout",
            "40s",
        ],
        &dir.path().join("stdout"),
        &err_path,
    ));
    let err = || std::fs::read_to_string(&err_path).unwrap_or_default();
    // The command is in its wait once its KamajiControlPlane is applied.
    let kcps = Api::<DynamicObject>::namespaced_with(
        c.clone(),
        &ns,
        &ar(
            "controlplane.cluster.x-k8s.io",
            "v1alpha2",
            "KamajiControlPlane",
        ),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while kcps.get_opt("rc").await.ok().flatten().is_none() {
        assert!(
            Instant::now() < deadline,
            "create applied nothing: {}",
            err()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tb.restart_apiserver_under(cli.0.id(), err).await.unwrap();
    let status = wait_exit(&mut cli.0, Duration::from_secs(60), err);
    let err = err();
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(
        started.elapsed() >= Duration::from_secs(40),
        "ended before its deadline: {err}"
    );
    assert_eq!(
        err.matches("the API server is unreachable").count()
            + err.matches("the API server is not ready").count(),
        1,
        "{err}"
    );
    assert_eq!(
        err.matches("the API server answers again").count(),
        1,
        "{err}"
    );
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
