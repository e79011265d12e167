//! The testbed's side of a host's SIMULATED `kubeadm` ([`super::host`]): its join and its
//! kubelet. `kubeadm join --config F` posts F to the host's spool; this task reads it, joins the
//! workload cluster as kubeadm and the kubelet would ([`crate::agent::join`]: discovery, TLS
//! bootstrap, the Node) and then keeps the Node's status and Lease fresh every 10 s, as a
//! kubelet's heartbeat does, until `kubeadm reset` stops it. The kubelet's version is the one
//! BYOH's controller asked the host for (the ByoHost's `k8sversion` annotation), which is what
//! the installer or the image pre-installed on the host would have put there.
//!
//! A host powered off ([`super::HostAgent::power`]) answers nothing and sends no heartbeat.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use kube::Client;
use kube::api::{Api, DynamicObject};

use crate::agent::join::{self, Joined};

const K8S_VERSION: &str = "byoh.infrastructure.cluster.x-k8s.io/k8sversion";
const HEARTBEAT: Duration = Duration::from_secs(10);
const TICK: Duration = Duration::from_millis(200);

/// Who the host is, for its kubelet.
pub(crate) struct Host {
    pub kubeconfig: PathBuf,
    pub name: String,
    pub namespace: String,
    pub ip: std::net::Ipv4Addr,
    pub spool: PathBuf,
    pub powered: Arc<AtomicBool>,
    /// False: `kubeadm join` succeeds without joining (the test plays the Node).
    pub joins: bool,
}

/// Runs until aborted (the [`super::HostAgent`] aborts it when dropped).
pub(crate) async fn run(host: Host) {
    let admin = loop {
        match crate::client_for(&host.kubeconfig).await {
            Ok(c) => break c,
            Err(e) => {
                tracing::warn!("SIMULATED kubelet of {}: {e}", host.name);
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    };
    let mut node: Option<(Joined, Option<Instant>)> = None;
    loop {
        if host.powered.load(Ordering::SeqCst) {
            for (stem, path) in requests(&host.spool) {
                let (code, message) = if stem.starts_with("join-") && node.is_some() {
                    // kubeadm's preflight on a host still joined (a release without reset,
                    // as BYOH v0.5.0 does with --skip-installation).
                    (1, "[preflight] Some fatal errors occurred: [ERROR FileAvailable--etc-kubernetes-kubelet.conf]: /etc/kubernetes/kubelet.conf already exists".to_string())
                } else if stem.starts_with("join-") && !host.joins {
                    (0, "This node has joined the cluster (SIMULATED kubeadm; the test plays its Node)".into())
                } else if stem.starts_with("join-") {
                    match join_from(&path, &host.name).await {
                        Ok(j) => {
                            node = Some((j, None));
                            (
                                0,
                                "This node has joined the cluster (SIMULATED kubeadm)".into(),
                            )
                        }
                        Err(e) => (1, format!("error execution phase (SIMULATED kubeadm): {e}")),
                    }
                } else {
                    node = None;
                    (0, "[reset] SIMULATED: the kubelet stopped".to_string())
                };
                tracing::info!(
                    "SIMULATED kubeadm on {}: {stem}: exit {code}: {message}",
                    host.name
                );
                answer(&host.spool, &stem, code, &message);
                let _ = std::fs::remove_file(&path);
            }
            if let Some((joined, last)) = node.as_mut()
                && last.is_none_or(|t| t.elapsed() >= HEARTBEAT)
            {
                *last = Some(Instant::now());
                heartbeat(&admin, &host, joined).await;
            }
        }
        tokio::time::sleep(TICK).await;
    }
}

/// The spool's pending requests, oldest first by name: (stem, path).
fn requests(spool: &Path) -> Vec<(String, PathBuf)> {
    let Ok(rd) = std::fs::read_dir(spool) else {
        return Vec::new();
    };
    let mut out: Vec<(String, PathBuf)> = rd
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().to_string();
            let stem = name.strip_suffix(".req")?.to_string();
            Some((stem, e.path()))
        })
        .collect();
    out.sort();
    out
}

/// The answer `kubeadm` waits for: the exit code on the first line, then what it prints;
/// written whole, then renamed.
fn answer(spool: &Path, stem: &str, code: i32, message: &str) {
    let tmp = spool.join(format!("{stem}.answer"));
    let done = spool.join(format!("{stem}.done"));
    if let Err(e) = std::fs::write(&tmp, format!("{code}\n{message}\n"))
        .and_then(|()| std::fs::rename(&tmp, &done))
    {
        tracing::warn!("SIMULATED kubeadm answer {}: {e}", done.display());
    }
}

async fn join_from(config: &Path, host: &str) -> Result<Joined, String> {
    let text = std::fs::read_to_string(config).map_err(|e| format!("{}: {e}", config.display()))?;
    let cfg = join::parse_join_configuration(&text)
        .ok_or("the configuration has no JoinConfiguration with a bootstrap token")?;
    join::join(&cfg, host).await
}

async fn heartbeat(admin: &Client, host: &Host, joined: &Joined) {
    let r = crate::meta::ar(
        "infrastructure.cluster.x-k8s.io",
        "v1beta1",
        "ByoHost",
        "byohosts",
    );
    let byohost = Api::<DynamicObject>::namespaced_with(admin.clone(), &host.namespace, &r)
        .get_opt(&host.name)
        .await
        .ok()
        .flatten();
    let version = byohost
        .as_ref()
        .and_then(|h| crate::meta::annotation(h, K8S_VERSION))
        .unwrap_or("")
        .to_string();
    let cni = match byohost.as_ref() {
        Some(h) => match join::tenant_admin(admin, h).await {
            Some(c) => join::cni_present(&c).await,
            None => false,
        },
        None => false,
    };
    if let Err(e) = join::heartbeat(joined, &host.name, &version, &host.ip.to_string(), cni).await {
        tracing::debug!("SIMULATED kubelet of {}: {e}", host.name);
    }
}
