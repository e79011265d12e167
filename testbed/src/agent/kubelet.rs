//! The testbed's side of a host's SIMULATED `kubeadm` ([`super::host`]): its join and its
//! kubelet. `kubeadm join --config F` posts F to the host's spool; this task reads it, joins the
//! workload cluster as kubeadm and the kubelet would ([`crate::agent::join`]: discovery, TLS
//! bootstrap, the Node) and then keeps the Node's status and Lease fresh every 10 s, as a
//! kubelet's heartbeat does, until `kubeadm reset` stops it. The kubelet's version is the one
//! BYOH's controller asked the host for (the ByoHost's `k8sversion` annotation), which is what
//! the installer or the image pre-installed on the host would have put there.
//!
//! `kubeadm init --config F` and a `kubeadm join` whose configuration has `controlPlane` start
//! the host's control plane first ([`super::controlplane`]: etcd, kube-apiserver,
//! kube-controller-manager and kube-scheduler as real processes), and the kubelet then keeps
//! its static pods' mirror Pods current. Its API's port-forward endpoint
//! ([`crate::portforward`], on 127.0.0.1: the host's own network is not routable from the
//! testbed's processes; the Node's `daemonEndpoints` names the port) reaches that etcd and
//! kube-apiserver, which is how CAPI's KubeadmControlPlane controller checks them.
//!
//! A host powered off ([`super::HostAgent::power`]) answers nothing and sends no heartbeat;
//! its control plane's processes are stopped until the power is back.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use kube::Client;
use kube::api::{Api, DynamicObject};

use crate::agent::controlplane::{self, ControlPlane, Ctx};
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
    /// The host's `/etc` upper layer (where the bootstrap data wrote `/etc/kubernetes/pki`).
    pub etc: PathBuf,
    /// Where a control plane of this host keeps its data and logs.
    pub dir: PathBuf,
    pub assets: crate::Assets,
    /// The hosts file of host names to 127.0.0.1 a control plane's kube-apiserver resolves
    /// kubelets by (each host's kubelet API listens there).
    pub hosts_file: PathBuf,
    /// The testbed's network namespaces (its controllers'), into which a control plane's
    /// endpoint is forwarded: BYOH's manager reaches the workload cluster there.
    pub sandboxes: Arc<std::sync::Mutex<Vec<Arc<crate::netns::NetSandbox>>>>,
}

/// Where this host's static pods' ports really listen, for its kubelet's port-forward.
type Targets = Arc<std::sync::Mutex<Option<Arc<ControlPlane>>>>;

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
    let targets: Targets = Arc::default();
    let server = {
        let (targets, name) = (targets.clone(), host.name.clone());
        let resolve: crate::portforward::Resolve = Arc::new(move |ns, pod, port| {
            let cp = targets.lock().ok()?.clone()?;
            let component = pod.strip_suffix(&format!("-{name}"))?;
            (ns == "kube-system").then(|| cp.target(component, port))?
        });
        match crate::portforward::serve(std::net::Ipv4Addr::LOCALHOST.into(), resolve).await {
            Ok(s) => Some(s),
            Err(e) => {
                tracing::warn!("SIMULATED kubelet API of {}: {e}", host.name);
                None
            }
        }
    };
    let kubelet_port = server.as_ref().map(|s| s.port());
    let mut node: Option<(Joined, Option<Instant>)> = None;
    let mut frozen = false;
    loop {
        let powered = host.powered.load(Ordering::SeqCst);
        if powered == frozen {
            // Power lost or back: the host's control plane stops or goes on with it.
            frozen = !powered;
            if let Some(cp) = targets.lock().ok().and_then(|t| t.clone()) {
                cp.power(powered);
            }
        }
        if powered {
            for (stem, path) in requests(&host.spool) {
                let (code, message) = if (stem.starts_with("join-") || stem.starts_with("init-"))
                    && node.is_some()
                {
                    // kubeadm's preflight on a host still joined (a release without reset,
                    // as BYOH v0.5.0 does with --skip-installation).
                    (1, "[preflight] Some fatal errors occurred: [ERROR FileAvailable--etc-kubernetes-kubelet.conf]: /etc/kubernetes/kubelet.conf already exists".to_string())
                } else if stem.starts_with("join-") && !host.joins {
                    (0, "This node has joined the cluster (SIMULATED kubeadm; the test plays its Node)".into())
                } else if stem.starts_with("init-") || is_control_plane(&path) {
                    match control_plane(&host, &stem, &path).await {
                        Ok(cp) => {
                            forward_endpoint(&host, &cp.joined().endpoint);
                            node = Some((cp.joined().clone(), None));
                            if let Ok(mut t) = targets.lock() {
                                *t = Some(Arc::new(cp));
                            }
                            (0, "Your Kubernetes control-plane has initialized successfully! (SIMULATED kubeadm)".into())
                        }
                        Err(e) => (1, format!("error execution phase (SIMULATED kubeadm): {e}")),
                    }
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
                    let cp = targets.lock().ok().and_then(|mut t| t.take());
                    if let Some(cp) = cp {
                        reset(cp).await;
                    }
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
                let cp = targets.lock().ok().and_then(|t| t.clone());
                heartbeat(&admin, &host, joined, kubelet_port, cp.as_deref()).await;
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

/// Forwards the cluster's control-plane endpoint (the SIMULATED VIP, on the testbed's
/// loopback) into every network namespace of the testbed, as it would be routable there.
fn forward_endpoint(host: &Host, endpoint: &str) {
    let Ok(addr) = endpoint.parse::<std::net::SocketAddrV4>() else {
        tracing::warn!(
            "SIMULATED kubelet of {}: endpoint {endpoint} is no IPv4 address and port",
            host.name
        );
        return;
    };
    let all: Vec<_> = host.sandboxes.lock().map(|v| v.clone()).unwrap_or_default();
    for sandbox in all {
        if let Err(e) = sandbox.forward_same(addr) {
            tracing::warn!("SIMULATED kubelet of {}: forwarding {addr}: {e}", host.name);
        }
    }
}

/// Whether the request is a `kubeadm join` of a control-plane node.
fn is_control_plane(config: &Path) -> bool {
    std::fs::read_to_string(config).is_ok_and(|t| controlplane::is_control_plane_join(&t))
}

/// `kubeadm init`, or `kubeadm join` of a control-plane node: the host's control plane, its
/// certificates from the host's `/etc/kubernetes/pki` as the bootstrap data wrote them.
async fn control_plane(host: &Host, stem: &str, config: &Path) -> Result<ControlPlane, String> {
    let text = std::fs::read_to_string(config).map_err(|e| format!("{}: {e}", config.display()))?;
    let admin = crate::client_for(&host.kubeconfig)
        .await
        .map_err(|e| e.to_string())?;
    let version = host_version(&admin, host).await;
    let release = host
        .assets
        .tenant_release(&version)
        .ok_or_else(|| {
            format!(
                "no Kubernetes {version} binaries here (the testbed has {:?})",
                host.assets.tenant_versions()
            )
        })?
        .to_path_buf();
    let ctx = Ctx {
        dir: host.dir.join("control-plane"),
        host: host.name.clone(),
        etcd: host.assets.k8s.join("etcd"),
        release,
        hosts_file: Some(host.hosts_file.clone()),
        version,
    };
    let pki = host.etc.join("kubernetes").join("pki");
    if stem.starts_with("init-") {
        ControlPlane::init(ctx, &text, &pki).await
    } else {
        ControlPlane::join(ctx, &text, &pki).await
    }
}

/// `kubeadm reset` of a control-plane node, once no one else holds it.
async fn reset(cp: Arc<ControlPlane>) {
    match Arc::try_unwrap(cp) {
        Ok(cp) => cp.reset().await,
        // A port-forward still holds it: its processes stop when the last holder drops it.
        Err(cp) => tracing::warn!(
            "SIMULATED kubeadm reset: control plane still in use ({} holders)",
            Arc::strong_count(&cp)
        ),
    }
}

/// The Kubernetes version BYOH's controller asked the host for.
async fn host_version(admin: &Client, host: &Host) -> String {
    byohost(admin, host)
        .await
        .as_ref()
        .and_then(|h| crate::meta::annotation(h, K8S_VERSION))
        .unwrap_or("")
        .to_string()
}

async fn byohost(admin: &Client, host: &Host) -> Option<DynamicObject> {
    let r = crate::meta::ar(
        "infrastructure.cluster.x-k8s.io",
        "v1beta1",
        "ByoHost",
        "byohosts",
    );
    Api::<DynamicObject>::namespaced_with(admin.clone(), &host.namespace, &r)
        .get_opt(&host.name)
        .await
        .ok()
        .flatten()
}

async fn heartbeat(
    admin: &Client,
    host: &Host,
    joined: &Joined,
    kubelet_port: Option<u16>,
    cp: Option<&ControlPlane>,
) {
    let byohost = byohost(admin, host).await;
    let version = byohost
        .as_ref()
        .and_then(|h| crate::meta::annotation(h, K8S_VERSION))
        .unwrap_or("")
        .to_string();
    let workload = match byohost.as_ref() {
        Some(h) => join::tenant_admin(admin, h).await,
        None => None,
    };
    let cni = match &workload {
        Some(c) => join::cni_present(c).await,
        None => false,
    };
    if let (Some(cp), Some(c)) = (cp, &workload) {
        cp.refresh_mirror_pods(c).await;
    }
    let ip = host.ip.to_string();
    if let Err(e) = join::heartbeat(joined, &host.name, &version, &ip, cni, kubelet_port).await {
        tracing::debug!("SIMULATED kubelet of {}: {e}", host.name);
    }
}
