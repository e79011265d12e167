//! A real Kubernetes management-cluster API for tests, the sandbox and the demo.
//!
//! It runs the upstream etcd, kube-apiserver and kube-controller-manager (garbage collector and
//! namespace controllers) as plain processes, installs the upstream CAPI, Kamaji and BYOH CRDs,
//! and optionally the real Cluster API core manager with its webhooks. Nothing here is a mock:
//! schema validation, server-side apply, subresources, watches, finalizers and garbage
//! collection are the API server's own.
//!
//! The binaries and CRDs come from `testbed/build-bins.sh`, which builds them from the Go module
//! proxy into a version-keyed cache outside the repository and skips work already done.
//!
//! ```no_run
//! # async fn t() {
//! let tb = testbed::shared();              // one per test binary
//! let (client, ns) = tb.namespace("hosts").await;  // each test gets its own namespace
//! # }
//! ```

pub mod agent;
mod assets;
mod byoh;
mod capi;
pub use capi::{KcpManager, start_kcp};
mod certs;
pub use certs::expiring_certificate;
mod crds;
pub mod datastore;
pub mod expect;
mod faults;
pub mod fixtures;
pub mod images;
mod inotify;
mod kamaji;
pub use datastore::SECOND as SECOND_DATASTORE;
pub use kamaji::KAMAJI_VALIDATION_LABEL;
pub(crate) mod meta;
mod netns;
pub mod node;
pub mod pods;
pub mod portforward;
mod process;
pub mod spdy;
mod startup;
pub mod storage;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

pub use assets::Assets;
/// Runs `testbed/build-bins.sh <set>` (building once, cached by version) and returns the directory
/// holding that set's binaries: what tests of release tooling (krew) need besides a testbed.
pub use assets::build as build_bins;
/// Installs every CRD of a folder (server-side apply) and waits until they are served.
pub use crds::install_dir as install_crds;
pub use meta::ar as api_resource;
pub use process::Proc;

/// Which upstream CRDs the API server gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Profile {
    /// CAPI v1.14 (v1beta1 and v1beta2 served, no conversion webhook), Kamaji, BYOH.
    Full,
    /// CAPI v1.10 (v1beta1 only): the shape of a CAPI 1.10 management cluster. Kamaji, BYOH.
    V1Beta1,
    /// No CRDs at all: a cluster without Cluster API.
    Bare,
}

impl Profile {
    pub fn as_str(self) -> &'static str {
        match self {
            Profile::Full => "full",
            Profile::V1Beta1 => "v1beta1",
            Profile::Bare => "bare",
        }
    }
    pub fn parse(s: &str) -> Option<Profile> {
        match s {
            "full" => Some(Profile::Full),
            "v1beta1" => Some(Profile::V1Beta1),
            "bare" => Some(Profile::Bare),
            _ => None,
        }
    }
}

#[derive(Clone, Debug)]
pub struct Options {
    pub profile: Profile,
    /// Run kube-controller-manager (garbage collector and namespace controllers).
    pub controller_manager: bool,
    /// Run the real Cluster API core manager, with its webhooks registered by URL: v1.14's
    /// (and its kubeadm bootstrap manager) with the full profile, v1.10's with the v1beta1 one.
    pub capi_manager: bool,
    /// Run the real Kamaji operator, its datastore etcd, and the SIMULATED kubelet that runs
    /// tenant control-plane pods with real Kubernetes binaries.
    pub kamaji: bool,
    /// Run the real BYOH controller manager with its webhooks (needs `capi_manager`).
    pub byoh: bool,
    /// Run a local OCI registry (`crane registry serve`, [`Testbed::registry`]) and the
    /// SIMULATED kubelet of the pods whose images it holds ([`pods::image`]); the controller
    /// manager then runs the Deployment and ReplicaSet controllers too.
    pub images: bool,
    /// Run the datastore etcds ([`Testbed::datastores`]) and the SIMULATED kubelet of tenant
    /// control-plane pods with its plumbing, but not Kamaji: for a Kamaji that `kubectl capi
    /// init` installs and the image kubelet runs (needs `images`).
    pub tenants: bool,
    /// With `images`: run the registry's pods on a real node ([`node`]: the kubelet and
    /// kube-proxy with containerd and the CNI bridge, and kube-scheduler) instead of the
    /// SIMULATED image kubelet.
    pub node: bool,
    /// Write an audit log (`<dir>/audit.log`, one JSON event per request, metadata level), so
    /// benchmarks can count the requests each user makes.
    pub audit: bool,
    /// Where to keep certificates, etcd data, logs and the kubeconfig. A fresh temporary
    /// directory (removed on drop) when `None`. A given directory is kept afterwards, but each
    /// start is a fresh cluster: the etcd data an earlier run left there is removed first (the
    /// new API server has a new port and new certificates).
    pub dir: Option<PathBuf>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            profile: Profile::Full,
            controller_manager: true,
            capi_manager: false,
            kamaji: false,
            byoh: false,
            images: false,
            tenants: false,
            node: false,
            audit: false,
            dir: None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("building the testbed binaries failed: {0}")]
    Assets(String),
    #[error("certificate generation failed: {0}")]
    Pki(String),
    #[error("{0}")]
    Start(String),
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("CRD {file}: {msg}")]
    Crd { file: String, msg: String },
}

impl Error {
    fn io(path: &Path, source: std::io::Error) -> Error {
        Error::Io {
            path: path.to_path_buf(),
            source,
        }
    }
    fn pki(e: rcgen::Error) -> Error {
        Error::Pki(e.to_string())
    }
}

/// Tokens accepted by the API server besides the admin client certificate.
pub const ADMIN_TOKEN: &str = "testbed-admin-token";
/// A user with no RBAC grants at all (user `limited`, group `testbed:limited`).
pub const LIMITED_TOKEN: &str = "testbed-limited-token";
/// A cluster admin of its own (user `reconciler`), so the audit log can single out a
/// controller's requests.
pub const RECONCILER_TOKEN: &str = "testbed-reconciler-token";
/// The BYOH controller manager's service-account user, the only user besides host agents that
/// BYOH's ByoHost webhook lets update hosts.
pub const BYOH_MANAGER_TOKEN: &str = "testbed-byoh-manager-token";

/// A running management-cluster API. Dropping it stops every process and removes its
/// temporary directory.
pub struct Testbed {
    pub dir: PathBuf,
    pub kubeconfig: PathBuf,
    pub server: String,
    pub profile: Profile,
    pub assets: Assets,
    /// The local OCI registry (`127.0.0.1:PORT`) with [`Options::images`].
    pub registry: Option<String>,
    /// The datastore etcds with [`Options::tenants`], for a test to write DataStores of.
    pub datastores: Option<kamaji::DataStores>,
    /// The real node with [`Options::node`].
    pub node: Option<node::NodeInfo>,
    /// With [`Options::images`] (and no real node): the SIMULATED cluster DNS's hosts file for
    /// processes of the host's network ([`pods::names`]), which the tenant-pod runner gives each
    /// of its processes and a test may give its own ([`pods::names::host_command`]).
    pub cluster_hosts: Option<PathBuf>,
    procs: Mutex<Vec<Proc>>,
    /// Background tasks (tenant pod runner, forwarders) to abort when the testbed stops.
    tasks: Mutex<Vec<tokio::task::AbortHandle>>,
    /// The network namespaces of controllers that must reach tenant API servers (Kamaji, BYOH):
    /// every tenant port is forwarded into each of them.
    sandboxes: std::sync::Arc<Mutex<Vec<std::sync::Arc<netns::NetSandbox>>>>,
    remove_dir: bool,
    ns_counter: AtomicUsize,
}

/// A loopback port nothing listens on, for a component to bind.
///
/// The kernel hands out a free port, but between our listener closing and the component
/// binding it, another testbed (in this process or another test binary running beside it)
/// could be handed the same one. So each port handed out is also reserved, for
/// [`PORT_RESERVATION`], by creating a file named after it in a directory every testbed on the
/// machine shares: a port whose file exists (and is younger than that) is skipped.
fn free_port() -> Result<u16, Error> {
    let dir = std::env::temp_dir().join("capi-kamaji-testbed-ports");
    std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
    let any = Path::new("127.0.0.1:0");
    let mut last = 0;
    for _ in 0..64 {
        let l = TcpListener::bind("127.0.0.1:0").map_err(|e| Error::io(any, e))?;
        let port = l.local_addr().map_err(|e| Error::io(any, e))?.port();
        last = port;
        if reserve_port(&dir, port) {
            return Ok(port);
        }
    }
    // 64 ports in a row reserved by others: take the kernel's word for the last one.
    Ok(last)
}

/// How long a port handed out stays reserved: far more than a component takes to bind it.
const PORT_RESERVATION: Duration = Duration::from_secs(600);

/// Reserves `port` (see [`free_port`]); false when another testbed holds it.
fn reserve_port(dir: &Path, port: u16) -> bool {
    let file = dir.join(port.to_string());
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&file)
    {
        Ok(_) => true,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let stale = std::fs::metadata(&file)
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age > PORT_RESERVATION);
            // A stale reservation is taken over (its mtime renewed); a fresh one is not ours.
            stale
                && std::fs::OpenOptions::new()
                    .write(true)
                    .open(&file)
                    .and_then(|f| f.set_modified(std::time::SystemTime::now()))
                    .is_ok()
        }
        // Cannot reserve (a read-only temp dir): the kernel's word is all there is.
        Err(_) => true,
    }
}

fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(15)..].join("\n")
}

/// A raw HTTP/1.0 GET on loopback, enough for etcd's plain-HTTP `/health`.
fn http_get_ok(port: u16, path: &str) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    if s.write_all(format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").as_bytes())
        .is_err()
    {
        return false;
    }
    let mut buf = String::new();
    let _ = s.read_to_string(&mut buf);
    buf.starts_with("HTTP/1.0 200") || buf.starts_with("HTTP/1.1 200")
}

impl Testbed {
    fn push(&self, p: Proc) {
        if let Ok(mut v) = self.procs.lock() {
            v.push(p);
        }
    }

    /// The API server's port on 127.0.0.1.
    pub fn api_port(&self) -> Result<u16, Error> {
        self.server
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .ok_or_else(|| Error::Start(format!("no port in {}", self.server)))
    }

    fn push_task(&self, t: tokio::task::AbortHandle) {
        if let Ok(mut v) = self.tasks.lock() {
            v.push(t);
        }
    }

    /// Writes a kubeconfig for a bearer-token user (for example [`LIMITED_TOKEN`], or a token
    /// the API server does not know) next to the admin kubeconfig, and returns its path.
    pub fn kubeconfig_with_token(&self, name: &str, token: &str) -> Result<PathBuf, Error> {
        let admin = std::fs::read_to_string(&self.kubeconfig)
            .map_err(|e| Error::io(&self.kubeconfig, e))?;
        let ca = admin
            .lines()
            .find_map(|l| l.trim().strip_prefix("certificate-authority-data: "))
            .unwrap_or_default()
            .to_string();
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: testbed\n  cluster:\n    server: {server}\n    certificate-authority-data: {ca}\nusers:\n- name: {name}\n  user:\n    token: {token}\ncontexts:\n- name: {name}\n  context:\n    cluster: testbed\n    user: {name}\n    namespace: default\ncurrent-context: {name}\n",
            server = self.server
        );
        let path = self.dir.join(format!("kubeconfig-{name}"));
        write_private(&path, &text)?;
        Ok(path)
    }

    /// A client for the admin user, bound to the calling tokio runtime.
    pub async fn client(&self) -> Client {
        client_for(&self.kubeconfig)
            .await
            .unwrap_or_else(|e| panic!("testbed client: {e}"))
    }

    /// Creates a fresh namespace for one test and returns an admin client and its name.
    pub async fn namespace(&self, prefix: &str) -> (Client, String) {
        let client = self.client().await;
        let n = self.ns_counter.fetch_add(1, Ordering::SeqCst);
        let prefix: String = prefix
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_lowercase()
                } else {
                    '-'
                }
            })
            .take(40)
            .collect();
        let name = format!("{}-{}-{n}", prefix.trim_matches('-'), std::process::id());
        let ns: Namespace = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "labels": {"testbed.capi-kamaji.io/test": "true"}}
        }))
        .unwrap_or_default();
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .unwrap_or_else(|e| panic!("creating namespace {name}: {e}"));
        (client, name)
    }

    /// Deletes a namespace (the namespace controller finishes the job).
    pub async fn delete_namespace(&self, client: &Client, name: &str) {
        let _ = Api::<Namespace>::all(client.clone())
            .delete(name, &DeleteParams::default())
            .await;
    }

    /// PIDs of the running processes, by name.
    pub fn pids(&self) -> Vec<(String, u32)> {
        self.procs
            .lock()
            .map(|v| v.iter().map(|p| (p.name.clone(), p.pid())).collect())
            .unwrap_or_default()
    }

    /// Stops every process (last started first).
    pub fn stop(&self) {
        if let Ok(mut v) = self.tasks.lock() {
            for t in v.drain(..) {
                t.abort();
            }
        }
        if let Ok(mut v) = self.sandboxes.lock() {
            v.clear();
        }
        if let Ok(mut v) = self.procs.lock() {
            while let Some(mut p) = v.pop() {
                p.kill();
            }
        }
    }

    /// Stops one process by name, for fault-injection tests (for example a stopped server).
    /// Stops `name` (SIGKILL, as a crash would) and starts it again with the same flags; for
    /// `kube-apiserver`, waits until it serves again. Fault injection for the tests that prove
    /// `--wait` verbs and the reconciler's watches recover from a restart.
    pub async fn restart_process(&self, name: &str) -> Result<(), Error> {
        let again = {
            let mut v = self
                .procs
                .lock()
                .map_err(|_| Error::Start("process list lock poisoned".into()))?;
            let Some(p) = v.iter_mut().find(|p| p.name == name) else {
                return Err(Error::Start(format!("no process {name} to restart")));
            };
            p.kill();
            let again = p.respawn()?;
            *p = again;
            p.pid()
        };
        tracing::info!(name, pid = again, "restarted");
        if name == "kube-apiserver" {
            self.wait_for_apiserver().await?;
        }
        Ok(())
    }

    pub fn stop_process(&self, name: &str) {
        if let Ok(mut v) = self.procs.lock()
            && let Some(i) = v.iter().position(|p| p.name == name)
        {
            let mut p = v.remove(i);
            p.kill();
        }
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        self.stop();
        if self.remove_dir {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// The runtime of the testbed's background tasks. A shared testbed starts on a runtime that
/// ends when the start does, so work that must outlive it runs here, on threads of its own.
pub(crate) fn background() -> Result<&'static tokio::runtime::Handle, Error> {
    static RT: OnceLock<Result<tokio::runtime::Runtime, String>> = OnceLock::new();
    match RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("testbed-background")
            .enable_all()
            .build()
            .map_err(|e| e.to_string())
    }) {
        Ok(rt) => Ok(rt.handle()),
        Err(e) => Err(Error::Start(format!("background runtime: {e}"))),
    }
}

/// Writes bytes readable by their owner only (a pod's secret volume file).
pub(crate) fn write_private_bytes(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| Error::io(path, e))?;
    f.write_all(bytes).map_err(|e| Error::io(path, e))
}

/// Writes a file readable by its owner only, atomically.
fn write_private(path: &Path, text: &str) -> Result<(), Error> {
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension("tmp");
    {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(|e| Error::io(&tmp, e))?;
        f.write_all(text.as_bytes())
            .map_err(|e| Error::io(&tmp, e))?;
    }
    std::fs::rename(&tmp, path).map_err(|e| Error::io(path, e))
}

/// A client from a kubeconfig file, with generous rate limits for tests.
pub async fn client_for(kubeconfig: &Path) -> Result<Client, Error> {
    let kc = Kubeconfig::read_from(kubeconfig).map_err(|e| Error::Start(e.to_string()))?;
    let config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .map_err(|e| Error::Start(e.to_string()))?;
    Ok(Client::try_from(config)?)
}

fn start_blocking(opts: Options) -> Result<Testbed, String> {
    // The shared testbed outlives any one test's runtime, so it starts on a runtime of its own,
    // on a thread of its own (a test may already be inside a runtime).
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        rt.block_on(Testbed::start(opts)).map_err(|e| e.to_string())
    })
    .join()
    .map_err(|_| "testbed start panicked".to_string())?
}

/// Set by `make test` (`scripts/test.sh`) once `cargo test --workspace --no-run` has built every
/// binary of the workspace into `target/debug/`: a test then runs them as they are.
pub const WORKSPACE_BUILT: &str = "CAPI_KAMAJI_WORKSPACE_BUILT";

/// `target/<profile>/<bin>` of package `package`, next to `sibling` (another binary of the
/// workspace, e.g. `env!("CARGO_BIN_EXE_kubectl-capi")`), built at most once per test binary.
///
/// Under `make test` the workspace build already made it, so nothing is built: a second
/// `cargo build -p <package>` resolves the dependencies' features for that package alone, not for
/// the workspace's tests, and compiles a second copy of kube, hyper and rustls (minutes of a
/// clean run) and then overwrites the binary other test processes are running. Run alone
/// (`cargo test -p kubectl-kamaji --test controllers`), cargo builds only the package under test's
/// own binaries, so the others are built here.
pub fn workspace_binary(sibling: &str, package: &str, bin: &str) -> std::path::PathBuf {
    static BUILT: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let path = std::path::PathBuf::from(sibling).with_file_name(bin);
    if std::env::var_os(WORKSPACE_BUILT).is_some_and(|v| !v.is_empty()) && path.exists() {
        return path;
    }
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if !built.iter().any(|b| b == bin) {
        let status = cargo()
            .args(["build", "-p", package, "--bin", bin])
            .status();
        assert!(
            path.exists() && status.as_ref().is_ok_and(|s| s.success()),
            "building {} failed ({status:?}); run cargo build -p {package} --bin {bin}",
            path.display()
        );
        built.push(bin.to_string());
    }
    path
}

/// A `cargo` command (`$CARGO`, as `cargo test` sets it, else `cargo` on PATH) for a test that
/// builds one of our binaries, in the environment a shell would give it.
///
/// `cargo test` runs each test binary with its own package's variables set (`CARGO_MANIFEST_DIR`,
/// `CARGO_PKG_NAME`, ...). Build scripts such as ring's watch some of them
/// (`cargo:rerun-if-env-changed=CARGO_MANIFEST_DIR`), so a cargo started with them inherited
/// sees them changed and rebuilds the TLS stack, once per test package: minutes of every run.
pub fn cargo() -> std::process::Command {
    let mut c =
        std::process::Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    for (k, _) in std::env::vars_os() {
        let Some(k) = k.to_str() else { continue };
        let set_by_cargo_test = k.starts_with("CARGO_PKG_")
            || matches!(
                k,
                "CARGO_MANIFEST_DIR"
                    | "CARGO_MANIFEST_PATH"
                    | "CARGO_MANIFEST_LINKS"
                    | "CARGO_CRATE_NAME"
                    | "CARGO_BIN_NAME"
                    | "CARGO_PRIMARY_PACKAGE"
                    | "CARGO_TARGET_TMPDIR"
                    | "OUT_DIR"
            );
        if set_by_cargo_test {
            c.env_remove(k);
        }
    }
    c
}

/// Whether the testbed's logs on stderr may carry colour codes: only on a terminal, and not
/// with `NO_COLOR` set (no-color.org), so `make demo > file` and log files stay plain text.
pub fn log_colours() -> bool {
    use std::io::IsTerminal;
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

fn init_logging() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("TESTBED_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,kube_client=off")),
        )
        .with_writer(std::io::stderr)
        .with_test_writer()
        .with_ansi(log_colours())
        .try_init();
}

macro_rules! shared_testbed {
    ($(#[$m:meta])* $name:ident, $opts:expr) => {
        $(#[$m])*
        pub fn $name() -> &'static Testbed {
            static TB: OnceLock<Result<Testbed, String>> = OnceLock::new();
            init_logging();
            match TB.get_or_init(|| start_blocking($opts)) {
                Ok(tb) => tb,
                Err(e) => panic!("testbed failed to start: {e}"),
            }
        }
    };
}

shared_testbed!(
    /// The full-profile testbed shared by every test of this binary.
    shared,
    Options::default()
);
shared_testbed!(
    /// The v1beta1-only (CAPI 1.10 shaped) testbed shared by every test of this binary.
    shared_v1beta1,
    Options {
        profile: Profile::V1Beta1,
        ..Options::default()
    }
);
shared_testbed!(
    /// A testbed with no CRDs at all, shared by every test of this binary.
    shared_bare,
    Options {
        profile: Profile::Bare,
        controller_manager: false,
        ..Options::default()
    }
);
shared_testbed!(
    /// A full-profile testbed with the local OCI registry and the SIMULATED kubelet of the pods
    /// whose images it holds (the reconciler installed from its image).
    shared_images,
    Options {
        images: true,
        ..Options::default()
    }
);
shared_testbed!(
    /// A testbed with no CRDs, the local OCI registry and its pods' SIMULATED kubelet (a
    /// provider installed by `clusterctl init` runs from its image).
    shared_bare_images,
    Options {
        profile: Profile::Bare,
        images: true,
        ..Options::default()
    }
);
shared_testbed!(
    /// Day 0: a testbed with no CRDs and no controller of ours or upstream's, where `kubectl
    /// capi init` installs them all and they run from their images (the local OCI registry and
    /// its pods' SIMULATED kubelet, [`images::push_upstream`]); the datastore etcds and the
    /// SIMULATED kubelet of tenant control planes wait for the Kamaji that init installs.
    shared_day0,
    Options {
        profile: Profile::Bare,
        images: true,
        tenants: true,
        ..Options::default()
    }
);
shared_testbed!(
    /// A full-profile testbed running the real CAPI v1.14 core manager.
    shared_with_capi,
    Options {
        capi_manager: true,
        ..Options::default()
    }
);
shared_testbed!(
    /// A full-profile testbed running every real controller that can run here: the CAPI core and
    /// kubeadm bootstrap managers, the Kamaji operator (tenant control planes run for real) and
    /// the BYOH controller manager.
    shared_real,
    Options {
        capi_manager: true,
        kamaji: true,
        byoh: true,
        ..Options::default()
    }
);

shared_testbed!(
    /// The real CAPI v1.14 core and kubeadm bootstrap managers and the Kamaji operator (tenant
    /// control planes run for real), with the local OCI registry and the SIMULATED kubelet of its
    /// pods: our reconciler as users run it, from its image, beside the real controllers.
    shared_real_images,
    Options {
        capi_manager: true,
        kamaji: true,
        images: true,
        ..Options::default()
    }
);

shared_testbed!(
    /// A CAPI 1.10 management cluster run by its own controllers: the v1beta1 profile (CAPI
    /// v1.10's CRDs) with CAPI v1.10's core manager and its webhooks, and the Kamaji operator
    /// (tenant control planes run for real under the SIMULATED kubelet); needs root.
    shared_v1beta1_real,
    Options {
        profile: Profile::V1Beta1,
        capi_manager: true,
        kamaji: true,
        ..Options::default()
    }
);

#[cfg(test)]
mod tests {
    use super::*;

    /// Two testbeds (two test binaries side by side) are never handed the same port while the
    /// first may still be about to bind it; a reservation older than its time is taken over.
    #[test]
    fn a_reserved_port_is_not_handed_out_twice() {
        let dir = tempfile::tempdir().unwrap();
        assert!(reserve_port(dir.path(), 40001));
        assert!(!reserve_port(dir.path(), 40001));
        let old = std::time::SystemTime::now() - PORT_RESERVATION - Duration::from_secs(1);
        std::fs::File::options()
            .write(true)
            .open(dir.path().join("40001"))
            .unwrap()
            .set_modified(old)
            .unwrap();
        assert!(reserve_port(dir.path(), 40001));
        assert!(!reserve_port(dir.path(), 40001));
    }
}
