//! Faults (issue 13): a `--wait` verb rides out an API server restart. This binary has a testbed
//! of its own, since restarting its API server would disturb every other test sharing one.

mod common;

use common::*;
use kube::api::{Api, DynamicObject, Patch, PatchParams};

/// The tests of this binary restart its API server one at a time: a restart in the middle of
/// another test's own requests (not the CLI's, which ride it out) would fail that test.
static RESTARTS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

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
    let ns2 = ns.clone();
    let waiting = tokio::task::spawn_blocking(move || {
        kamaji(
            tb,
            &ns2,
            &["delete", "held", "--yes", "--wait", "--timeout", "120s"],
        )
    });
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    tb.restart_process("kube-apiserver").await.unwrap();
    // The restarted server is a new connection for this client too.
    let c = tb.client().await;
    let clusters = Api::<DynamicObject>::namespaced_with(
        c.clone(),
        &ns,
        &ar("cluster.x-k8s.io", "v1beta2", "Cluster"),
    );
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    drop_finalizers(&clusters, "held").await;
    let out = ok(&waiting.await.unwrap());
    assert!(out.contains("held is gone"), "{out}");
}

/// Whether a request of process `pid` to `port` waits unanswered: the server's end of one of its
/// connections holds bytes it has not read. From `/proc/net/tcp*` (hex `addr:port` columns,
/// `tx_queue:rx_queue`, the socket inode) and the inodes of `/proc/<pid>/fd`.
fn request_in_flight(pid: u32, port: u16) -> bool {
    let inodes: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .filter_map(|l| {
            let l = l.to_string_lossy().to_string();
            Some(l.strip_prefix("socket:[")?.strip_suffix(']')?.to_string())
        })
        .collect();
    let rows: Vec<Vec<String>> = ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .flat_map(|f| {
            std::fs::read_to_string(f)
                .unwrap_or_default()
                .lines()
                .skip(1)
                .map(|l| l.split_whitespace().map(str::to_string).collect())
                .collect::<Vec<Vec<String>>>()
        })
        .filter(|cols: &Vec<String>| cols.len() > 9)
        .collect();
    let port_of = |addr: &str| u16::from_str_radix(addr.rsplit(':').next().unwrap_or(""), 16).ok();
    let mine: Vec<u16> = rows
        .iter()
        .filter(|c| inodes.contains(&c[9]) && port_of(&c[2]) == Some(port))
        .filter_map(|c| port_of(&c[1]))
        .collect();
    rows.iter().any(|c| {
        let unread = c[4]
            .split(':')
            .nth(1)
            .and_then(|q| u64::from_str_radix(q, 16).ok())
            .unwrap_or(0);
        port_of(&c[1]) == Some(port)
            && port_of(&c[2]).is_some_and(|p| mine.contains(&p))
            && unread > 0
    })
}

/// Issue 24: `create --wait` exited 1 while the API server was down. The server is stopped
/// (SIGSTOP) until a request of the waiting command hangs on it, then restarted (the kill
/// resets that request), so the wait cannot fall between two polls. No reconciler runs here,
/// so the wait stays at its first phase: it says once that the server is unreachable and once
/// that it is back, and ends only at its own deadline, naming what it waited for and the last
/// status it saw.
#[tokio::test]
async fn create_wait_survives_an_api_server_restart() {
    use std::time::{Duration, Instant};
    let _turn = RESTARTS.lock().await;
    let tb = testbed().await;
    let (c, ns) = tb.namespace("kamaji-restart-create").await;
    let dir = tempfile::tempdir().unwrap();
    let err_path = dir.path().join("stderr");
    let started = Instant::now();
    let mut cli = std::process::Command::new(env!("CARGO_BIN_EXE_kubectl-kamaji"))
        .args(["create", "rc", "--infrastructure", "none"])
        .args([
            "--kubernetes-version",
            "v1.35.0",
            "--wait",
            "--timeout",
            "40s",
        ])
        .arg("--kubeconfig")
        .arg(&tb.kubeconfig)
        .args(["-n", &ns])
        .env_remove("KUBECONFIG")
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .unwrap();
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
    let (_, api) = tb
        .pids()
        .into_iter()
        .find(|(n, _)| n == "kube-apiserver")
        .unwrap();
    let port = tb.api_port().unwrap();
    let stop = std::process::Command::new("kill")
        .args(["-STOP", &api.to_string()])
        .status()
        .unwrap();
    assert!(stop.success());
    let deadline = Instant::now() + Duration::from_secs(30);
    while !request_in_flight(cli.id(), port) {
        assert!(
            Instant::now() < deadline && cli.try_wait().unwrap().is_none(),
            "no request of the command waits on the stopped API server: {}",
            err()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tb.restart_process("kube-apiserver").await.unwrap();
    let status = tokio::task::spawn_blocking(move || cli.wait().unwrap())
        .await
        .unwrap();
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
