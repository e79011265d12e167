//! The reconciler as users run it, from its image on the testbed's SIMULATED kubelet of image
//! pods: its processes, its Deployment and its Lease, and the plugins that install it.

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, ListParams};
use testbed::fixtures::poll;
use testbed::fixtures::reconciler::image_pod_logs;

/// Where `kubectl kamaji install` puts the reconciler.
pub const INSTALL_NS: &str = "kamaji-reconciler-system";

/// `kubectl-<plugin> ARGS --kubeconfig KC` (the workspace's binary), its output, on any exit.
pub fn plugin_output(plugin: &str, kubeconfig: &Path, args: &[&str]) -> Output {
    let name = format!("kubectl-{plugin}");
    let bin = testbed::workspace_binary(env!("CARGO_BIN_EXE_kamaji-reconciler"), &name, &name);
    testbed::fixtures::run::command(bin.to_str().unwrap(), kubeconfig, args)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap()
}

/// `kubectl-<plugin> ARGS`, which must succeed; its stdout and stderr.
pub fn plugin(plugin: &str, kubeconfig: &Path, args: &[&str]) -> String {
    let o = plugin_output(plugin, kubeconfig, args);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "kubectl {plugin} {args:?}: {text}");
    text
}

/// Polls `f` until it yields `Some`, or panics after `secs` with `what` and the image pods' logs.
pub async fn wait_image<T, F, Fut>(tb: &testbed::Testbed, secs: u64, what: &str, f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    poll::wait_for(what, Duration::from_secs(secs), || image_pod_logs(tb), f).await
}

/// The reconciler processes this testbed's kubelet runs: (pid, POD_NAME). Other test binaries
/// run the same image at the same time (each on a testbed of its own, with pods of the same
/// names but for the random suffix), so a process counts only if its POD_NAME is one of this
/// testbed's pods.
pub async fn reconciler_processes(c: &Client) -> Vec<(u32, String)> {
    let ours: Vec<String> = Api::<Pod>::namespaced(c.clone(), INSTALL_NS)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        if !cmd.starts_with(b"/usr/local/bin/kamaji-reconciler\0") {
            continue;
        }
        let env = std::fs::read(e.path().join("environ")).unwrap_or_default();
        let pod = env
            .split(|b| *b == 0)
            .find_map(|v| v.strip_prefix(b"POD_NAME="))
            .map(|v| String::from_utf8_lossy(v).to_string());
        if let Some(pod) = pod.filter(|p| ours.contains(p)) {
            out.push((pid, pod));
        }
    }
    out
}

/// A process's environment, one `K=V` each.
pub fn proc_env(pid: u32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/environ"))
        .unwrap_or_default()
        .split(|b| *b == 0)
        .map(|v| String::from_utf8_lossy(v).to_string())
        .collect()
}

/// Kills a process at once (a crash: no shutdown, no Lease released).
pub fn kill(pid: u32) {
    signal(pid, "KILL");
}

/// Sends `SIG<name>` to a process.
pub fn signal(pid: u32, name: &str) {
    assert!(
        Command::new("kill")
            .args([format!("-{name}"), pid.to_string()])
            .status()
            .unwrap()
            .success()
    );
}

pub async fn deployment(c: &Client) -> Deployment {
    Api::<Deployment>::namespaced(c.clone(), INSTALL_NS)
        .get("kamaji-reconciler")
        .await
        .unwrap()
}

/// Whether the Deployment runs `replicas` available pods of its current template and no others.
pub async fn is_rolled_out(c: &Client, replicas: i32) -> bool {
    let d = deployment(c).await;
    let s = d.status.clone().unwrap_or_default();
    let gen_seen = s.observed_generation >= d.metadata.generation;
    gen_seen
        && s.updated_replicas == Some(replicas)
        && s.available_replicas == Some(replicas)
        && s.replicas == Some(replicas)
}

/// Waits until the Deployment has rolled out `replicas` Ready pods of its current template.
pub async fn rolled_out(tb: &testbed::Testbed, c: &Client, replicas: i32, what: &str) {
    wait_image(tb, 120, what, || async {
        is_rolled_out(c, replicas).await.then_some(())
    })
    .await;
}

pub async fn lease(c: &Client) -> Option<Lease> {
    Api::<Lease>::namespaced(c.clone(), INSTALL_NS)
        .get_opt(kamaji_reconciler::leader::LEASE_NAME)
        .await
        .ok()
        .flatten()
}

pub async fn lease_holder(c: &Client) -> Option<String> {
    lease(c)
        .await
        .and_then(|l| l.spec?.holder_identity)
        .filter(|h| !h.is_empty())
}

/// The leader's process: waits for a Lease holder that runs here.
pub async fn leader_process(tb: &testbed::Testbed, c: &Client) -> (u32, String) {
    wait_image(tb, 60, "a running Lease holder", || async {
        let holder = lease_holder(c).await?;
        reconciler_processes(c)
            .await
            .into_iter()
            .find(|(_, pod)| *pod == holder)
    })
    .await
}
