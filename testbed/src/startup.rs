//! [`Testbed::start`]: the testbed's directory, then etcd, kube-apiserver, the profile's CRDs,
//! kube-controller-manager and the optional real controllers, each waited for in that order.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::api::Api;

use crate::{
    ADMIN_TOKEN, Assets, BYOH_MANAGER_TOKEN, Error, LIMITED_TOKEN, Options, Proc, Profile,
    RECONCILER_TOKEN, Testbed, byoh, capi, certs, client_for, crds, free_port, http_get_ok,
    inotify, kamaji, process, write_private,
};

/// Removes testbed directories left by processes that no longer exist (a test binary killed
/// with SIGKILL cannot clean up after itself; its children died with it).
fn sweep_stale_dirs(root: &Path) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        let Some(rest) = name.strip_prefix("capi-testbed-") else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// The testbed's directory: `dir` when given (kept afterwards), otherwise a fresh temporary
/// one (removed on drop, and at exit). Returns it and whether to remove it.
fn testbed_dir(dir: Option<&Path>) -> Result<(PathBuf, bool), Error> {
    if let Some(d) = dir {
        std::fs::create_dir_all(d).map_err(|e| Error::io(d, e))?;
        start_clean(d)?;
        return Ok((d.to_path_buf(), false));
    }
    let root = std::env::temp_dir();
    sweep_stale_dirs(&root);
    static N: AtomicUsize = AtomicUsize::new(0);
    let d = root.join(format!(
        "capi-testbed-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).map_err(|e| Error::io(&d, e))?;
    process::remove_at_exit(&d);
    Ok((d, true))
}

/// What a run leaves in a kept directory that a new run must not inherit: the API server's and
/// Kamaji's datastore's etcd data (objects written against the last API server, such as a BYOH
/// BootstrapKubeconfig naming its URL and CA, while the new one gets a new port and new
/// certificates), the audit log, and tenant pods' directories. Logs are truncated by each start.
const LAST_RUN: &[&str] = &[
    "etcd",
    "datastore-etcd",
    "datastore-dedicated-etcd",
    "audit.log",
    "tenant-pods",
    crate::storage::DIR,
];

/// Removes the state of an earlier run in `dir` (saying so), so every start is a fresh cluster.
fn start_clean(dir: &Path) -> Result<(), Error> {
    let mut removed = Vec::new();
    for name in LAST_RUN {
        let p = dir.join(name);
        let Ok(meta) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        let gone = if meta.is_dir() {
            std::fs::remove_dir_all(&p)
        } else {
            std::fs::remove_file(&p)
        };
        gone.map_err(|e| Error::io(&p, e))?;
        removed.push(*name);
    }
    if !removed.is_empty() {
        tracing::info!(
            "starting clean: removed what an earlier run left in {} ({})",
            dir.display(),
            removed.join(", ")
        );
    }
    Ok(())
}

/// The API server's static token file: the admin, limited, reconciler and BYOH manager tokens.
fn write_token_file(dir: &Path) -> Result<PathBuf, Error> {
    let tokens = dir.join("pki/tokens.csv");
    std::fs::write(
        &tokens,
        format!(
            "{ADMIN_TOKEN},admin-token-user,100,\"system:masters\"\n{LIMITED_TOKEN},limited,101,\"testbed:limited\"\n{RECONCILER_TOKEN},reconciler,102,\"system:masters\"\n{BYOH_MANAGER_TOKEN},system:serviceaccount:byoh-system:byoh-controller-manager,103,\"system:serviceaccounts,system:masters\"\n"
        ),
    )
    .map_err(|e| Error::io(&tokens, e))?;
    Ok(tokens)
}

/// The API server's audit flags (and its policy file) when `audit` is set: every request at
/// metadata level into `<dir>/audit.log`.
fn audit_args(dir: &Path, audit: bool) -> Result<Vec<String>, Error> {
    let mut args = Vec::new();
    if audit {
        let policy = dir.join("audit-policy.yaml");
        std::fs::write(
            &policy,
            "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n- level: Metadata\n",
        )
        .map_err(|e| Error::io(&policy, e))?;
        args.push(format!("--audit-policy-file={}", policy.display()));
        args.push(format!(
            "--audit-log-path={}",
            dir.join("audit.log").display()
        ));
        args.push("--audit-log-maxsize=0".into());
    }
    Ok(args)
}

/// What a testbed needs free where its directory lives: etcd preallocates 64 MiB WAL segments
/// (two per etcd, the testbed's and each DataStore's), and logs and tenant data grow from there.
/// Below it etcd dies at start with "failed to create WAL", which names no cause.
const MIN_FREE_BYTES: u64 = 1 << 30;

/// Refuses to start on a file system with less than `need` bytes free to this user.
fn ensure_free_space(dir: &Path, need: u64) -> Result<(), Error> {
    let free = free_bytes(dir)?;
    if free < need {
        return Err(Error::Start(format!(
            "only {} MiB free under {}, a testbed needs {} MiB: free some disk (cargo clean, old \
             /tmp/capi-testbed-* directories) or set TMPDIR to a larger file system",
            free >> 20,
            dir.display(),
            need >> 20
        )));
    }
    Ok(())
}

/// Bytes available to an unprivileged user on the file system holding `dir` (statvfs(3)).
fn free_bytes(dir: &Path) -> Result<u64, Error> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| Error::Start(format!("{} contains a NUL byte", dir.display())))?;
    // SAFETY: statvfs only writes into the zeroed struct we own; `c` is a valid C string.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(Error::io(dir, std::io::Error::last_os_error()));
    }
    // Both are u64 (fsblkcnt_t, unsigned long) on the 64-bit Linux targets the testbed runs on.
    Ok(st.f_bavail.saturating_mul(st.f_frsize))
}

impl Testbed {
    /// Starts a testbed and waits until it is ready for clients.
    pub async fn start(opts: Options) -> Result<Testbed, Error> {
        let t0 = Instant::now();
        if opts.byoh && !opts.capi_manager {
            return Err(Error::Start(
                "the BYOH controller needs the CAPI manager (its conversion webhook)".into(),
            ));
        }
        // Before any process starts: the processes of this testbed and the ones already running
        // on this machine must fit under the inotify limits together.
        let _budget = inotify::reserve(&opts)?;
        let capi_v1beta1 = opts.capi_manager && opts.profile == Profile::V1Beta1;
        let mut assets =
            Assets::ensure_for(opts.capi_manager && !capi_v1beta1, opts.kamaji, opts.byoh)?;
        if capi_v1beta1 {
            assets.for_capi_v1beta1()?;
        }
        if opts.tenants {
            assets.for_day0()?;
        }
        let (dir, remove_dir) = testbed_dir(opts.dir.as_deref())?;
        ensure_free_space(&dir, MIN_FREE_BYTES)?;
        let pki = certs::Pki::generate(&dir.join("pki"))?;
        let mut tb = Testbed {
            kubeconfig: dir.join("kubeconfig"),
            dir: dir.clone(),
            server: String::new(),
            profile: opts.profile,
            assets,
            registry: None,
            datastores: None,
            node: None,
            cluster_hosts: None,
            procs: Mutex::new(Vec::new()),
            tasks: Mutex::new(Vec::new()),
            sandboxes: Default::default(),
            remove_dir,
            ns_counter: AtomicUsize::new(0),
        };
        let etcd_url = tb.start_etcd().await?;
        tb.start_apiserver(&etcd_url, opts.audit, opts.node, &pki)
            .await?;
        tracing::info!(
            "kube-apiserver ready at {} after {:?}",
            tb.server,
            t0.elapsed()
        );

        // CRDs before the controller manager, whose garbage collector only rediscovers every 30 s.
        let client = tb.client().await;
        match opts.profile {
            Profile::Full => crds::install_dir(&client, &tb.assets.crds.join("full")).await?,
            Profile::V1Beta1 => crds::install_dir(&client, &tb.assets.crds.join("v1beta1")).await?,
            Profile::Bare => {}
        }
        tracing::info!("CRDs installed after {:?}", t0.elapsed());

        if opts.controller_manager {
            tb.start_controller_manager(opts.kamaji || opts.images, opts.images, opts.node)?;
        }
        if opts.images && !opts.node {
            // Before the tenant-pod runner, whose processes get it as their /etc/hosts.
            tb.cluster_hosts = Some(crate::pods::names::host_file(&tb.dir)?);
        }
        if opts.tenants {
            if !opts.images || opts.kamaji {
                return Err(Error::Start(
                    "Options::tenants is for a Kamaji run from its image: set images, not kamaji"
                        .into(),
                ));
            }
            tb.datastores = Some(kamaji::start_datastores(&tb)?);
            kamaji::start_tenant_runner(&tb, None)?;
        }
        if opts.node && !opts.images {
            return Err(Error::Start(
                "Options::node runs the registry's pods: set images too".into(),
            ));
        }
        if opts.node {
            tb.start_node().await?;
        } else if opts.images {
            tb.start_images().await?;
            crate::storage::provision(&tb, &client).await?;
        }
        tb.start_controllers(&opts, &client).await?;
        tracing::info!("testbed ready after {:?}", t0.elapsed());
        Ok(tb)
    }

    /// Starts etcd on free ports and waits for its `/health`; returns its client URL.
    async fn start_etcd(&self) -> Result<String, Error> {
        let dir = &self.dir;
        let (client_port, peer_port) = (free_port()?, free_port()?);
        let etcd_url = format!("http://127.0.0.1:{client_port}");
        let etcd = Proc::spawn(
            "etcd",
            &self.assets.etcd(),
            &[
                format!("--data-dir={}", dir.join("etcd").display()),
                format!("--listen-client-urls={etcd_url}"),
                format!("--advertise-client-urls={etcd_url}"),
                format!("--listen-peer-urls=http://127.0.0.1:{peer_port}"),
                format!("--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}"),
                format!("--initial-cluster=default=http://127.0.0.1:{peer_port}"),
                "--unsafe-no-fsync=true".into(),
                "--quota-backend-bytes=8589934592".into(),
                // As kubeadm runs etcd (kubernetes/cmd/kubeadm, etcd static pod): progress
                // notifications let a restarted API server's watch cache reach the current
                // revision, so watches resumed after a restart do not end in 410 forever.
                "--watch-progress-notify-interval=5s".into(),
                "--log-level=warn".into(),
            ],
            &dir.join("etcd.log"),
        )?;
        self.push(etcd);
        self.wait_until(
            "etcd",
            &dir.join("etcd.log"),
            Duration::from_secs(30),
            || async { http_get_ok(client_port, "/health") },
        )
        .await?;
        Ok(etcd_url)
    }

    /// Starts kube-apiserver on a free port (setting [`Testbed::server`]), writes the admin
    /// kubeconfig and waits until the API server is ready.
    async fn start_apiserver(
        &mut self,
        etcd_url: &str,
        audit: bool,
        node: bool,
        pki: &certs::Pki,
    ) -> Result<(), Error> {
        let dir = self.dir.clone();
        let port = free_port()?;
        self.server = format!("https://127.0.0.1:{port}");
        let tokens = write_token_file(&dir)?;
        let p = |f: &str| dir.join("pki").join(f).display().to_string();
        let audit_args = audit_args(&dir, audit)?;
        let apiserver = Proc::spawn(
            "kube-apiserver",
            &self.assets.kube_apiserver(),
            &[
                format!("--etcd-servers={etcd_url}"),
                format!("--secure-port={port}"),
                "--bind-address=127.0.0.1".into(),
                "--advertise-address=127.0.0.1".into(),
                "--endpoint-reconciler-type=none".into(),
                "--service-cluster-ip-range=10.0.0.0/24".into(),
                "--allow-privileged=true".into(),
                // Webhook and conversion Services are called at an endpoint of their
                // EndpointSlices (a pod's own address), not at their ClusterIP: the testbed has
                // no kube-proxy to route a ClusterIP.
                "--enable-aggregator-routing=true".into(),
                // A real node's pods get their ServiceAccount token volume as in a cluster; the
                // SIMULATED kubelets mount tokens themselves and ServiceAccounts need not exist.
                if node {
                    "--enable-admission-plugins=ServiceAccount".into()
                } else {
                    "--disable-admission-plugins=ServiceAccount".into()
                },
                "--authorization-mode=RBAC".into(),
                // Kubelets by address, as kubeadm sets it: a node's name need not resolve.
                "--kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname".into(),
                format!("--cert-dir={}", p("")),
                format!("--tls-cert-file={}", p("apiserver.crt")),
                format!("--tls-private-key-file={}", p("apiserver.key")),
                format!("--client-ca-file={}", p("client-ca.crt")),
                format!("--token-auth-file={}", tokens.display()),
                // Bootstrap tokens authenticate as on a kubeadm cluster, so a BYOH
                // BootstrapKubeconfig's token (`kubectl capi hosts add`) can be used for real.
                "--enable-bootstrap-token-auth".into(),
                format!("--service-account-issuer=https://127.0.0.1:{port}/"),
                format!("--service-account-key-file={}", p("sa.pub")),
                format!("--service-account-signing-key-file={}", p("sa.key")),
                "--v=1".into(),
            ]
            .into_iter()
            .chain(audit_args)
            .collect::<Vec<_>>(),
            &dir.join("kube-apiserver.log"),
        )?;
        self.push(apiserver);
        self.write_kubeconfig(pki)?;
        self.wait_for_apiserver().await
    }

    /// Waits (up to 90 s) until `/readyz` says ok and the `default` namespace exists.
    pub(crate) async fn wait_for_apiserver(&self) -> Result<(), Error> {
        let kubeconfig = self.kubeconfig.clone();
        self.wait_until(
            "kube-apiserver",
            &self.dir.join("kube-apiserver.log"),
            Duration::from_secs(90),
            || {
                let kubeconfig = kubeconfig.clone();
                async move {
                    let Ok(client) = client_for(&kubeconfig).await else {
                        return false;
                    };
                    let req = http::Request::get("/readyz").body(Vec::new());
                    let Ok(req) = req else { return false };
                    matches!(client.request_text(req).await, Ok(t) if t.trim() == "ok")
                        && Api::<Namespace>::all(client)
                            .get_opt("default")
                            .await
                            .ok()
                            .flatten()
                            .is_some()
                }
            },
        )
        .await
    }

    /// Starts the local OCI registry and a real node ([`crate::node`]) for its images' pods.
    async fn start_node(&mut self) -> Result<(), Error> {
        let crane = Assets::crane()?;
        let addr = crate::pods::image::start_registry(self, &crane).await?;
        let (info, sandbox, procs) = crate::node::start(self, &addr).await?;
        if let Ok(mut v) = self.sandboxes.lock() {
            v.push(sandbox);
        }
        for p in procs {
            self.push(p);
        }
        self.node = Some(info);
        self.registry = Some(addr);
        Ok(())
    }

    /// Starts the local OCI registry and the SIMULATED kubelet of its images' pods.
    async fn start_images(&mut self) -> Result<(), Error> {
        let crane = Assets::crane()?;
        let addr = crate::pods::image::start_registry(self, &crane).await?;
        let cfg = crate::pods::image::Config {
            dir: self.dir.join("image-pods"),
            registry: addr.clone(),
            crane,
            testbed_dir: self.dir.clone(),
            api_port: self.api_port()?,
            ca: self.dir.join("pki").join("serving-ca.crt"),
            tick: Duration::from_millis(500),
            sandboxes: self.sandboxes.clone(),
            forwards: self
                .datastores
                .as_ref()
                .map(|d| d.ports.iter().map(|(_, p)| *p).collect())
                .unwrap_or_default(),
            router: std::sync::Arc::new(crate::pods::network::Router::start(&self.dir)?),
            hosts: match &self.cluster_hosts {
                Some(h) => h.clone(),
                None => crate::pods::names::host_file(&self.dir)?,
            },
        };
        let kubeconfig = self.kubeconfig.clone();
        let task = crate::background()?.spawn(async move {
            let Ok(client) = crate::client_for(&kubeconfig).await else {
                tracing::warn!("SIMULATED kubelet of image pods: no client");
                return;
            };
            crate::pods::image::run(client, cfg).await;
        });
        self.push_task(task.abort_handle());
        self.registry = Some(addr);
        Ok(())
    }

    /// Starts kube-controller-manager: the garbage collector and namespace controllers, and
    /// with `workloads` the Deployment and ReplicaSet ones (tenant control planes and image
    /// pods are Deployments) and the Job one (Kamaji's DataStore migration).
    /// With `endpoints`, the EndpointSlice controller too (image pods serve webhooks behind
    /// Services, as in a cluster) and the ClusterRole aggregation one; and the StatefulSet, the
    /// PersistentVolume binder, the claim and volume protection and the ServiceAccount ones
    /// (image pods run StatefulSets on claimed volumes, [`crate::storage`], as their
    /// namespace's `default` ServiceAccount).
    /// With `node`, the ServiceAccount, root CA publisher and node lifecycle ones: a real node's
    /// pods need their namespace's `default` ServiceAccount and `kube-root-ca.crt`, and a Node
    /// schedulable once Ready.
    fn start_controller_manager(
        &self,
        workloads: bool,
        endpoints: bool,
        node: bool,
    ) -> Result<(), Error> {
        let mut controllers = String::from("garbagecollector,namespace,csrsigning");
        let mut extra = Vec::new();
        if node {
            // The node lifecycle controller takes the not-ready taint the kubelet registers
            // its Node with off once the Node is Ready, as in a cluster.
            controllers.push_str(",serviceaccount,root-ca-cert-publisher,nodelifecycle");
            extra.push(format!(
                "--root-ca-file={}",
                self.dir.join("pki/serving-ca.crt").display()
            ));
        }
        if workloads {
            // Kamaji's tenant control planes are Deployments; its DataStore migration is a Job.
            controllers.push_str(",deployment,replicaset,job");
        }
        if endpoints {
            // And the ClusterRole aggregation, which CAPI's release manifests rely on (their
            // manager's role aggregates the roles labelled to join it).
            controllers.push_str(",endpointslice,clusterrole-aggregation");
            // `kubectl capi init --datastore etcd` runs an etcd StatefulSet: the StatefulSet
            // controller makes its pods and their claims, the PersistentVolume binder binds the
            // claims to the testbed's volumes, and the protection controllers take off the
            // finalizers the API server's StorageObjectInUseProtection admission puts on every
            // claim and volume, without which deleting one (uninstall, a namespace) never ends.
            controllers
                .push_str(",statefulset,persistentvolume-binder,pvc-protection,pv-protection");
            // Its pods, like any that names no ServiceAccount, run as their namespace's
            // `default` one, which the ServiceAccount controller makes in every namespace (the
            // SIMULATED kubelet asks a token of it). A node testbed runs it already.
            if !node {
                controllers.push_str(",serviceaccount");
            }
        }
        let kcm = Proc::spawn(
            "kube-controller-manager",
            &self.assets.kube_controller_manager(),
            &[
                format!("--kubeconfig={}", self.kubeconfig.display()),
                format!("--controllers={controllers}"),
                // Client certificates from approved CSRs (the BYOH host agent's), signed by the CA
                // the API server trusts for clients, as on a kubeadm cluster.
                format!(
                    "--cluster-signing-kube-apiserver-client-cert-file={}",
                    self.dir.join("pki/client-ca.crt").display()
                ),
                format!(
                    "--cluster-signing-kube-apiserver-client-key-file={}",
                    self.dir.join("pki/client-ca.key").display()
                ),
                "--leader-elect=false".into(),
                "--use-service-account-credentials=false".into(),
                "--secure-port=0".into(),
                "--concurrent-gc-syncs=5".into(),
                "--v=1".into(),
            ]
            .into_iter()
            .chain(extra)
            .collect::<Vec<_>>(),
            &self.dir.join("kube-controller-manager.log"),
        )?;
        self.push(kcm);
        Ok(())
    }

    /// Starts the real controllers `opts` asks for: the CAPI managers, then Kamaji, then BYOH.
    async fn start_controllers(&self, opts: &Options, client: &Client) -> Result<(), Error> {
        if opts.capi_manager {
            match opts.profile {
                Profile::Full => capi::start(self, client).await?,
                // CAPI v1.10's own manager on CAPI v1.10's CRDs.
                Profile::V1Beta1 => capi::start_v1beta1(self, client).await?,
                Profile::Bare => {
                    return Err(Error::Start(
                        "the CAPI manager needs CAPI's CRDs: the full or v1beta1 profile".into(),
                    ));
                }
            }
        }
        if opts.kamaji {
            kamaji::start(self, client).await?;
        }
        if opts.byoh {
            byoh::start(self, client).await?;
        }
        Ok(())
    }

    /// Polls `ready` every 100 ms until it returns true, failing as soon as the process `what`
    /// names has exited (with its own last error line), and after `timeout`.
    pub(crate) async fn wait_until<F, Fut>(
        &self,
        what: &str,
        log: &Path,
        timeout: Duration,
        ready: F,
    ) -> Result<(), Error>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        let exited = || {
            self.procs.lock().ok().and_then(|mut v| {
                v.iter_mut()
                    .rev()
                    .find(|p| p.name == what)
                    .and_then(|p| p.exited())
            })
        };
        process::wait_ready(what, log, timeout, exited, ready).await
    }

    fn write_kubeconfig(&self, pki: &certs::Pki) -> Result<(), Error> {
        use base64::Engine;
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s.as_bytes());
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: testbed\n  cluster:\n    server: {server}\n    certificate-authority-data: {ca}\nusers:\n- name: testbed-admin\n  user:\n    client-certificate-data: {crt}\n    client-key-data: {key}\ncontexts:\n- name: testbed\n  context:\n    cluster: testbed\n    user: testbed-admin\n    namespace: default\ncurrent-context: testbed\n",
            server = self.server,
            ca = b64(&pki.serving_ca_pem),
            crt = b64(&pki.admin_cert_pem),
            key = b64(&pki.admin_key_pem),
        );
        write_private(&self.kubeconfig, &text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_disk_is_named_before_etcd_starts() {
        let dir = std::env::temp_dir();
        assert!(free_bytes(&dir).unwrap() > 0);
        ensure_free_space(&dir, 1).unwrap();
        let err = ensure_free_space(&dir, u64::MAX).unwrap_err().to_string();
        assert!(err.contains("MiB free under"), "{err}");
        assert!(err.contains("TMPDIR"), "{err}");
        assert!(free_bytes(Path::new("/no/such/dir")).is_err());
    }
}
