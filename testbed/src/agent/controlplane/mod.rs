//! The SIMULATED `kubeadm init` and `kubeadm join --control-plane` of a BYOH host (and
//! `kubeadm reset` of one): the host's control plane runs as real processes (etcd,
//! kube-apiserver, kube-controller-manager and kube-scheduler of the host's Kubernetes version,
//! the upstream binaries the testbed built), with the certificates CAPI's kubeadm bootstrap
//! provider put in the bootstrap data, and the phases kubeadm v1.36 runs against the API are
//! done against it for real, so CAPI's KubeadmControlPlane controller finds what it reads on a
//! real cluster.
//!
//! `kubeadm init` ([`ControlPlane::init`]), kubeadm's phases in order:
//! `certs` and `kubeconfig` ([`certs`]: the leaves and kubeconfigs from the bootstrap data's
//! CAs), `etcd` (a single member), `control-plane` (the three other processes, [`components`]),
//! `kubelet-start` (the Node registered with the kubelet's credentials,
//! [`crate::agent::join::register_node`]), `wait-control-plane` (the apiserver's `/readyz`,
//! the other two's ports), then `upload-config`, `mark-control-plane` and `bootstrap-token`
//! ([`kubeadm`]), and the kubelet's mirror pods ([`pods`]).
//!
//! `kubeadm join --control-plane` ([`ControlPlane::join`]): discovery and the TLS bootstrap
//! exactly as a worker's ([`crate::agent::join::join`]), the ClusterConfiguration read back from
//! `kubeadm-config`, `certs` and `kubeconfig`, then `control-plane-join`: the etcd member added
//! as a learner through a member the etcd mirror pods name, started with the whole cluster and
//! promoted ([`etcd`]), the other processes, `mark-control-plane`.
//!
//! `kubeadm reset` ([`ControlPlane::reset`]): `remove-etcd-member` (through another member; a
//! member KCP already removed is fine), then `cleanup-node`: the processes stopped, the mirror
//! pods deleted, the host's PKI, kubeconfigs and etcd data removed.
//!
//! What is SIMULATED, and what stands in for what:
//! - Every process runs in the testbed machine's root network namespace on 127.0.0.1, each on a
//!   free port, and advertises 127.0.0.1 (kubeadm binds 2379/2380/6443/10257/10259 on the
//!   host's address): the hosts' own network namespaces are not routable from the management
//!   side, where CAPI's controllers and the tests run. [`ControlPlane::target`] says where each
//!   static pod's port really listens (for port-forwards to the mirror pods).
//! - The cluster's `controlPlaneEndpoint` is a SIMULATED VIP ([`vip`]), as kube-vip provides
//!   on a real site: a proxy on the endpoint to every host's live apiserver.
//! - There is no kubelet running static pods: the processes are started directly, and their
//!   mirror pods are written by the testbed ([`pods`]).
//! - Each host's PKI is written where the bootstrap data put it (the host's
//!   `/etc/kubernetes/pki`); its etcd data and the processes' logs live in [`Ctx::dir`].

mod certs;
mod components;
mod config;
mod etcd;
mod kubeadm;
mod pods;
pub(crate) mod vip;

#[cfg(test)]
mod tests;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use kube::Client;
use kube::api::{Api, ListParams};

pub(crate) use config::is_control_plane_join;

use self::certs::Pair;
use self::components::Ports;
use crate::Proc;
use crate::agent::join::{self, Joined};

/// How long a process may take to answer after its start.
const START_TIMEOUT: Duration = Duration::from_secs(90);

/// Where and what a host's control plane runs.
pub(crate) struct Ctx {
    /// Logs and etcd data of this host.
    pub dir: PathBuf,
    /// The host's name: its Node's and its etcd member's.
    pub host: String,
    /// The Kubernetes version the host runs (BYOH's `k8sversion`), `v1.36.3` or `1.36.3`.
    pub version: String,
    /// The etcd binary.
    pub etcd: PathBuf,
    /// The folder with that version's kube-apiserver, kube-controller-manager and
    /// kube-scheduler.
    pub release: PathBuf,
    /// The SIMULATED cluster DNS's hosts file, for kube-apiserver to resolve node names
    /// ([`crate::pods::names::host_command`]).
    pub hosts_file: Option<PathBuf>,
}

/// What a process's mirror pod shows.
#[derive(Clone)]
struct Shown {
    name: &'static str,
    image: String,
    /// The program's name, then the flags.
    command: Vec<String>,
    annotations: Vec<(String, String)>,
    started_at: String,
    exited: Option<(i32, String)>,
}

struct Component {
    shown: Shown,
    proc: Option<Proc>,
}

/// One host's running control plane. Dropping it stops the processes and takes the host's
/// apiserver out of the VIP.
pub(crate) struct ControlPlane {
    ctx: Ctx,
    version: String,
    cluster: config::Cluster,
    local: config::Local,
    pki: PathBuf,
    ports: Ports,
    joined: Joined,
    admin: Pair,
    etcd_client: Pair,
    etcd_ca: String,
    components: Mutex<Vec<Component>>,
    backend: Mutex<Option<SocketAddr>>,
}

fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

impl ControlPlane {
    /// `kubeadm init --config` with `config` (ClusterConfiguration and InitConfiguration) on a
    /// host whose bootstrap data wrote the cluster's CAs into `pki`.
    pub(crate) async fn init(ctx: Ctx, config: &str, pki: &Path) -> Result<ControlPlane, String> {
        let (cluster, local) = config::parse_init(config)?;
        let version = config::normal_version(&ctx.version);
        if let Some(want) = &cluster.version
            && *want != version
        {
            return Err(format!(
                "[preflight] the ClusterConfiguration asks for Kubernetes {want}, this host runs {version}"
            ));
        }
        let cp = ControlPlane::prepare(ctx, cluster, local, pki, version, None)?;
        let initial = format!("{}=https://127.0.0.1:{}", cp.ctx.host, cp.ports.etcd_peer);
        cp.start_etcd(&initial, false)?;
        cp.wait_etcd().await?;
        cp.start_control_plane()?;
        cp.wait_control_plane().await?;
        cp.register_vip()?;
        let admin = cp.admin_client().await?;
        cp.wait_namespaces(&admin).await?;
        kubeadm::upload_config(&admin, &cp.cluster, &cp.local, &cp.version).await?;
        join::register_node(&cp.joined, &cp.ctx.host).await?;
        cp.mirror(&admin).await?;
        kubeadm::mark_control_plane(&admin, &cp.ctx.host, cp.local.taints.as_ref()).await?;
        kubeadm::bootstrap_token(
            &admin,
            &cp.cluster.endpoint,
            &cp.joined.ca_pem,
            &cp.local.bootstrap_tokens,
        )
        .await?;
        Ok(cp)
    }

    /// `kubeadm join --config` with `config` (a JoinConfiguration with `controlPlane`) on a
    /// host whose bootstrap data wrote the cluster's CAs into `pki`.
    pub(crate) async fn join(ctx: Ctx, config: &str, pki: &Path) -> Result<ControlPlane, String> {
        let local = config::parse_join(config)?;
        let discovery = join::parse_join_configuration(config)
            .ok_or("the JoinConfiguration has no bootstrap-token discovery")?;
        let version = config::normal_version(&ctx.version);
        binaries(&ctx)?;
        let joined = join::join(&discovery, &ctx.host).await?;
        let cluster = cluster_of(&joined).await?;
        let cp = ControlPlane::prepare(ctx, cluster, local, pki, version, Some(joined))?;
        let admin = cp.admin_client().await?;
        let urls = etcd_urls(&admin).await?;
        let peer_url = format!("https://127.0.0.1:{}", cp.ports.etcd_peer);
        let mut last = "no etcd mirror pod in kube-system names a member".to_string();
        let mut added = None;
        for url in &urls {
            let gw = etcd::Gateway::new(url, &cp.etcd_ca, &cp.etcd_client).await?;
            match gw.add_learner(&peer_url).await {
                Ok((id, members)) => {
                    added = Some((gw, id, members));
                    break;
                }
                Err(e) => last = e,
            }
        }
        let (gw, id, members) = added.ok_or(format!("[control-plane-join] etcd: {last}"))?;
        let initial = etcd::initial_cluster(&members, &cp.ctx.host, &peer_url);
        cp.start_etcd(&initial, true)?;
        etcd::promote_when_ready(&gw, &id, START_TIMEOUT).await?;
        cp.wait_etcd().await?;
        cp.start_control_plane()?;
        cp.wait_control_plane().await?;
        cp.register_vip()?;
        cp.mirror(&admin).await?;
        kubeadm::mark_control_plane(&admin, &cp.ctx.host, cp.local.taints.as_ref()).await?;
        Ok(cp)
    }

    /// The `certs` and `kubeconfig` phases, and the ports; `joined`: the kubelet's credentials
    /// from a join's TLS bootstrap (init: a `system:node:` certificate signed by the CA).
    fn prepare(
        ctx: Ctx,
        cluster: config::Cluster,
        local: config::Local,
        pki: &Path,
        version: String,
        joined: Option<Joined>,
    ) -> Result<ControlPlane, String> {
        binaries(&ctx)?;
        std::fs::create_dir_all(&ctx.dir).map_err(|e| format!("{}: {e}", ctx.dir.display()))?;
        let cas = certs::Cas::load(pki)?;
        let ports = Ports::pick()?;
        let host = ctx.host.as_str();
        let mut apiserver_sans = vec![
            config::nth_ip(&cluster.service_subnet, 1).unwrap_or_else(|| "10.96.0.1".into()),
            format!("kubernetes.default.svc.{}", cluster.dns_domain),
        ];
        if let Some((h, _)) = cluster.endpoint.rsplit_once(':') {
            apiserver_sans.push(h.trim_matches(['[', ']']).to_string());
        }
        apiserver_sans.extend(cluster.cert_sans.iter().cloned());
        let names = certs::Names {
            host,
            apiserver: apiserver_sans,
            etcd_server: cluster.etcd_server_sans.clone(),
            etcd_peer: cluster.etcd_peer_sans.clone(),
        };
        let issued = certs::issue(&cas, pki, &names)?;
        let local_api = format!("127.0.0.1:{}", ports.apiserver);
        certs::kubeconfigs(&cas, &issued, pki, host, &cluster.endpoint, &local_api)?;
        let joined = match joined {
            Some(j) => {
                let pair = Pair {
                    cert: j.cert_pem.clone(),
                    key: j.key_pem.clone(),
                };
                let text = certs::kubeconfig(
                    &cluster.endpoint,
                    &j.ca_pem,
                    &format!("system:node:{host}"),
                    &pair,
                );
                let path = pki.parent().unwrap_or(pki).join("kubelet.conf");
                crate::write_private_bytes(&path, text.as_bytes()).map_err(|e| e.to_string())?;
                j
            }
            None => Joined {
                endpoint: cluster.endpoint.clone(),
                ca_pem: cas.ca.cert_pem.clone(),
                cert_pem: issued.kubelet.cert.clone(),
                key_pem: issued.kubelet.key.clone(),
            },
        };
        Ok(ControlPlane {
            version,
            pki: pki.to_path_buf(),
            ports,
            joined,
            admin: issued.admin,
            etcd_client: issued.etcd_client,
            etcd_ca: cas.etcd.cert_pem,
            components: Mutex::new(Vec::new()),
            backend: Mutex::new(None),
            cluster,
            local,
            ctx,
        })
    }

    /// The kubelet's credentials, for its heartbeat ([`crate::agent::join::heartbeat`]).
    pub(crate) fn joined(&self) -> &Joined {
        &self.joined
    }

    /// The Kubernetes version the host's control plane runs (`v1.36.3`).
    pub(crate) fn version(&self) -> &str {
        &self.version
    }

    /// Where each static pod's port really listens: (`etcd` or `etcd-<host>`, 2379) the etcd
    /// client URL's address, 2380 its peer's, 2381 its metrics'; (`kube-apiserver`, the
    /// `localAPIEndpoint.bindPort`, 6443 by default) the apiserver's;
    /// (`kube-controller-manager`, 10257) and (`kube-scheduler`, 10259) theirs.
    pub(crate) fn target(&self, pod: &str, port: u16) -> Option<SocketAddr> {
        let suffix = format!("-{}", self.ctx.host);
        let component = pod.strip_suffix(&suffix).unwrap_or(pod);
        let p = &self.ports;
        let real = match (component, port) {
            ("etcd", 2379) => p.etcd_client,
            ("etcd", 2380) => p.etcd_peer,
            ("etcd", 2381) => p.etcd_metrics,
            ("kube-apiserver", x) if x == self.local.bind_port || x == 6443 => p.apiserver,
            ("kube-controller-manager", 10257) => p.controller_manager,
            ("kube-scheduler", 10259) => p.scheduler,
            _ => return None,
        };
        Some(loopback(real))
    }

    /// Creates the host's missing mirror pods and writes each one's status from its process
    /// (as the kubelet's pod sync does); failures are logged.
    pub(crate) async fn refresh_mirror_pods(&self, admin: &Client) {
        if let Err(e) = self.mirror(admin).await {
            tracing::warn!("SIMULATED kubelet of {}: {e}", self.ctx.host);
        }
    }

    async fn mirror(&self, admin: &Client) -> Result<(), String> {
        let shown: Vec<Shown> = {
            let mut comps = self
                .components
                .lock()
                .map_err(|_| "the components lock is poisoned".to_string())?;
            for c in comps.iter_mut() {
                if c.shown.exited.is_none()
                    && let Some(status) = c.proc.as_mut().and_then(Proc::exited)
                {
                    c.shown.exited = Some((status.code().unwrap_or(-1), crate::meta::now()));
                }
            }
            comps.iter().map(|c| c.shown.clone()).collect()
        };
        let mirrors: Vec<pods::Mirror<'_>> = shown
            .iter()
            .map(|s| pods::Mirror {
                component: s.name,
                host: &self.ctx.host,
                image: &s.image,
                command: &s.command,
                annotations: &s.annotations,
                started_at: &s.started_at,
                exited: s.exited.as_ref().map(|(c, at)| (*c, at.as_str())),
            })
            .collect();
        pods::refresh(admin, &mirrors).await
    }

    /// `kubeadm reset`: this host's etcd member removed, its processes stopped, its apiserver
    /// out of the VIP, its mirror pods deleted (when the API still answers) and its etcd data
    /// and the certificates and kubeconfigs the testbed made removed. Every step tolerates what
    /// is already gone. The files the bootstrap data wrote (the CAs, `sa.key`) are the host's
    /// `kubeadm reset` shim's to delete, through the host's `/etc` overlay (`super::host`).
    pub(crate) async fn reset(self) {
        if let Err(e) = self.remove_member().await {
            tracing::warn!("SIMULATED kubeadm reset on {}: {e}", self.ctx.host);
        }
        self.unregister_vip();
        self.stop_all(Duration::from_secs(5)).await;
        if let Ok(admin) = self.admin_client().await {
            pods::delete(&admin, &self.ctx.host).await;
        }
        let _ = std::fs::remove_dir_all(self.ctx.dir.join("etcd"));
        let kubeconfig_dir = self.pki.parent().unwrap_or(&self.pki).to_path_buf();
        let leaves = certs::LEAVES
            .iter()
            .flat_map(|l| [format!("{l}.crt"), format!("{l}.key")]);
        for f in leaves {
            let _ = std::fs::remove_file(self.pki.join(f));
        }
        for f in certs::KUBECONFIGS {
            let _ = std::fs::remove_file(kubeconfig_dir.join(f));
        }
    }

    /// kubeadm's `remove-etcd-member`: this member removed through another one.
    async fn remove_member(&self) -> Result<(), String> {
        let own = format!("https://127.0.0.1:{}", self.ports.etcd_client);
        let peer = format!("https://127.0.0.1:{}", self.ports.etcd_peer);
        let mut candidates = vec![own.clone()];
        if let Ok(admin) = self.admin_client().await {
            candidates.extend(etcd_urls(&admin).await.unwrap_or_default());
        }
        let mut members = None;
        for url in &candidates {
            let Ok(gw) = etcd::Gateway::new(url, &self.etcd_ca, &self.etcd_client).await else {
                continue;
            };
            if let Ok(m) = gw.members().await {
                members = Some(m);
                break;
            }
        }
        let members = members.ok_or("no etcd member answers")?;
        let Some(me) = members
            .iter()
            .find(|m| m.peer_urls.contains(&peer) || m.name == self.ctx.host)
        else {
            return Ok(());
        };
        if members.len() == 1 {
            return Ok(());
        }
        let others = members
            .iter()
            .filter(|m| m.id != me.id)
            .flat_map(|m| m.client_urls.iter().cloned());
        let mut last = String::new();
        for url in others.chain(std::iter::once(own)) {
            let gw = match etcd::Gateway::new(&url, &self.etcd_ca, &self.etcd_client).await {
                Ok(gw) => gw,
                Err(e) => {
                    last = e;
                    continue;
                }
            };
            match gw.remove(&me.id).await {
                Ok(()) => return Ok(()),
                Err(e) if e.contains("member not found") => return Ok(()),
                Err(e) => last = e,
            }
        }
        Err(format!("removing etcd member {}: {last}", me.id))
    }

    /// A host losing power (`on` false) or getting it back: every process of its control plane
    /// stopped (SIGSTOP: its ports still accept connections, nothing answers, as a machine
    /// that froze) or continued.
    pub(crate) fn power(&self, on: bool) {
        let signal = if on { libc::SIGCONT } else { libc::SIGSTOP };
        if let Ok(comps) = self.components.lock() {
            for p in comps.iter().filter_map(|c| c.proc.as_ref()) {
                // SAFETY: plain syscall on a process group the testbed created (Proc::spawn).
                unsafe {
                    libc::kill(-(p.pid() as i32), signal);
                }
            }
        }
    }

    /// SIGTERM to every process, SIGKILL to those still running after `grace`.
    async fn stop_all(&self, grace: Duration) {
        let mut procs: Vec<Proc> = match self.components.lock() {
            Ok(mut comps) => comps.iter_mut().filter_map(|c| c.proc.take()).collect(),
            Err(_) => Vec::new(),
        };
        for p in &procs {
            // SAFETY: plain syscall on a process group the testbed created (Proc::spawn).
            unsafe {
                libc::kill(-(p.pid() as i32), libc::SIGTERM);
            }
        }
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline && procs.iter_mut().any(|p| p.exited().is_none()) {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        for p in procs.iter_mut() {
            p.kill();
        }
    }

    async fn admin_client(&self) -> Result<Client, String> {
        certs::client(&self.cluster.endpoint, &self.joined.ca_pem, &self.admin).await
    }

    fn spawn(
        &self,
        name: &'static str,
        program: &Path,
        args: Vec<String>,
        image: String,
        annotations: Vec<(String, String)>,
        hosts: Option<&Path>,
    ) -> Result<(), String> {
        let log = self.ctx.dir.join(format!("{name}.log"));
        let (prog, argv) = match hosts {
            Some(h) => crate::pods::names::host_command(h, program, &args),
            None => (program.to_path_buf(), args.clone()),
        };
        let proc = Proc::spawn(&format!("{name}-{}", self.ctx.host), &prog, &argv, &log)
            .map_err(|e| e.to_string())?;
        let mut command = vec![name.to_string()];
        command.extend(args);
        self.components
            .lock()
            .map_err(|_| "the components lock is poisoned".to_string())?
            .push(Component {
                shown: Shown {
                    name,
                    image,
                    command,
                    annotations,
                    started_at: crate::meta::now(),
                    exited: None,
                },
                proc: Some(proc),
            });
        Ok(())
    }

    /// kubeadm's `etcd` phase (and a join's member start): the member on a fresh data dir.
    fn start_etcd(&self, initial_cluster: &str, existing: bool) -> Result<(), String> {
        let data = self.ctx.dir.join("etcd");
        let _ = std::fs::remove_dir_all(&data);
        {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&data)
                .map_err(|e| format!("{}: {e}", data.display()))?;
        }
        let args = components::etcd(
            &self.cluster,
            &self.ctx.host,
            &self.pki,
            &data,
            &self.ports,
            initial_cluster,
            existing,
        );
        let image = format!(
            "{}/etcd:{}",
            self.cluster.image_repository, self.cluster.etcd_image_tag
        );
        let annotations = vec![(
            "kubeadm.kubernetes.io/etcd.advertise-client-urls".to_string(),
            format!("https://127.0.0.1:{}", self.ports.etcd_client),
        )];
        self.spawn("etcd", &self.ctx.etcd, args, image, annotations, None)
    }

    /// kubeadm's `control-plane` phase: kube-apiserver, kube-controller-manager, kube-scheduler.
    fn start_control_plane(&self) -> Result<(), String> {
        let kc_dir = self.pki.parent().unwrap_or(&self.pki);
        let image = |c: &str| format!("{}/{c}:{}", self.cluster.image_repository, self.version());
        let bin = |c: &str| self.ctx.release.join(c);
        let api = components::apiserver(&self.cluster, &self.pki, &self.ports);
        let endpoint = vec![(
            "kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint".to_string(),
            format!("127.0.0.1:{}", self.ports.apiserver),
        )];
        self.spawn(
            "kube-apiserver",
            &bin("kube-apiserver"),
            api,
            image("kube-apiserver"),
            endpoint,
            self.ctx.hosts_file.as_deref(),
        )?;
        let kcm = components::controller_manager(
            &self.cluster,
            &self.pki,
            &kc_dir.join("controller-manager.conf"),
            &self.ctx.dir.join("kube-controller-manager"),
            &self.ports,
        );
        self.spawn(
            "kube-controller-manager",
            &bin("kube-controller-manager"),
            kcm,
            image("kube-controller-manager"),
            Vec::new(),
            None,
        )?;
        let sched = components::scheduler(
            &self.cluster,
            &kc_dir.join("scheduler.conf"),
            &self.ctx.dir.join("kube-scheduler"),
            &self.ports,
        );
        self.spawn(
            "kube-scheduler",
            &bin("kube-scheduler"),
            sched,
            image("kube-scheduler"),
            Vec::new(),
            None,
        )
    }

    /// The exit status of `name`'s process, once it exited.
    fn exited(&self, name: &str) -> Option<std::process::ExitStatus> {
        let mut comps = self.components.lock().ok()?;
        comps
            .iter_mut()
            .find(|c| c.shown.name == name)
            .and_then(|c| c.proc.as_mut())
            .and_then(Proc::exited)
    }

    fn log_of(&self, name: &str) -> PathBuf {
        self.ctx.dir.join(format!("{name}.log"))
    }

    async fn wait_etcd(&self) -> Result<(), String> {
        let port = self.ports.etcd_metrics;
        let what = format!("etcd of {}", self.ctx.host);
        crate::process::wait_ready(
            &what,
            &self.log_of("etcd"),
            START_TIMEOUT,
            || self.exited("etcd"),
            || etcd::healthy(port),
        )
        .await
        .map_err(|e| format!("[etcd] {e}"))
    }

    /// kubeadm's `wait-control-plane`: the apiserver's `/readyz` (as the admin), the
    /// controller manager's and the scheduler's ports (kubeadm v1.36 checks all components).
    async fn wait_control_plane(&self) -> Result<(), String> {
        let local = format!("127.0.0.1:{}", self.ports.apiserver);
        let client = certs::client(&local, &self.joined.ca_pem, &self.admin).await?;
        let what = format!("kube-apiserver of {}", self.ctx.host);
        crate::process::wait_ready(
            &what,
            &self.log_of("kube-apiserver"),
            START_TIMEOUT,
            || self.exited("kube-apiserver"),
            || readyz(client.clone()),
        )
        .await
        .map_err(|e| format!("[wait-control-plane] {e}"))?;
        for (name, port) in [
            ("kube-controller-manager", self.ports.controller_manager),
            ("kube-scheduler", self.ports.scheduler),
        ] {
            let what = format!("{name} of {}", self.ctx.host);
            crate::process::wait_ready(
                &what,
                &self.log_of(name),
                START_TIMEOUT,
                || self.exited(name),
                || async move { tokio::net::TcpStream::connect(loopback(port)).await.is_ok() },
            )
            .await
            .map_err(|e| format!("[wait-control-plane] {e}"))?;
        }
        Ok(())
    }

    /// The system namespaces the apiserver creates right after it starts.
    async fn wait_namespaces(&self, admin: &Client) -> Result<(), String> {
        let api: Api<Namespace> = Api::all(admin.clone());
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let mut missing = None;
            for ns in ["kube-system", "kube-public"] {
                if !matches!(api.get_opt(ns).await, Ok(Some(_))) {
                    missing = Some(ns);
                }
            }
            let Some(ns) = missing else { return Ok(()) };
            if Instant::now() > deadline {
                return Err(format!(
                    "[wait-control-plane] namespace {ns} was not created"
                ));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    fn register_vip(&self) -> Result<(), String> {
        let backend = loopback(self.ports.apiserver);
        vip::register(&self.cluster.endpoint, backend)?;
        if let Ok(mut b) = self.backend.lock() {
            *b = Some(backend);
        }
        Ok(())
    }

    fn unregister_vip(&self) {
        if let Ok(mut b) = self.backend.lock()
            && let Some(backend) = b.take()
        {
            vip::unregister(&self.cluster.endpoint, backend);
        }
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        self.unregister_vip();
        if let Ok(mut comps) = self.components.lock() {
            for c in comps.iter_mut() {
                if let Some(mut p) = c.proc.take() {
                    p.kill();
                }
            }
        }
    }
}

/// The three binaries of the release and etcd, or what to run to build them.
fn binaries(ctx: &Ctx) -> Result<(), String> {
    let bins = [
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
    ]
    .map(|b| ctx.release.join(b));
    for b in bins.iter().chain(std::iter::once(&ctx.etcd)) {
        if !b.is_file() {
            return Err(format!(
                "{}: missing (`make testbed` builds the Kubernetes binaries)",
                b.display()
            ));
        }
    }
    Ok(())
}

/// The ClusterConfiguration in `kube-system/kubeadm-config`, read as the joining node (kubeadm
/// join reads it with the bootstrap token; `kubeadm:nodes-kubeadm-config` lets both).
async fn cluster_of(joined: &Joined) -> Result<config::Cluster, String> {
    let node = join::node_client(joined).await?;
    let cm = Api::<ConfigMap>::namespaced(node, "kube-system")
        .get("kubeadm-config")
        .await
        .map_err(|e| format!("[preflight] kube-system/kubeadm-config: {e}"))?;
    let text = cm
        .data
        .and_then(|d| d.get("ClusterConfiguration").cloned())
        .ok_or("kubeadm-config has no ClusterConfiguration")?;
    let doc: serde_json::Value =
        serde_saphyr::from_str(&text).map_err(|e| format!("kubeadm-config: {e}"))?;
    config::cluster(&doc)
}

/// The etcd members' client URLs the etcd mirror pods name (kubeadm's `NewFromCluster`).
async fn etcd_urls(admin: &Client) -> Result<Vec<String>, String> {
    let pods = Api::<Pod>::namespaced(admin.clone(), "kube-system")
        .list(&ListParams::default().labels("component=etcd,tier=control-plane"))
        .await
        .map_err(|e| format!("listing the etcd pods: {e}"))?;
    Ok(pods
        .items
        .iter()
        .filter_map(|p| {
            p.metadata
                .annotations
                .as_ref()?
                .get("kubeadm.kubernetes.io/etcd.advertise-client-urls")
                .cloned()
        })
        .flat_map(|u| {
            u.split(',')
                .map(|s| s.trim().to_string())
                .collect::<Vec<_>>()
        })
        .filter(|u| !u.is_empty())
        .collect())
}

async fn readyz(client: Client) -> bool {
    let Ok(req) = http::Request::get("/readyz").body(Vec::new()) else {
        return false;
    };
    matches!(client.request_text(req).await, Ok(t) if t.trim() == "ok")
}
