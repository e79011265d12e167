//! `create --wait`: the control-plane endpoint, then Ready: Kamaji's phases in the tenant, the
//! KamajiControlPlane's conditions and the workers (joined, Ready, or waiting for a network
//! plugin). `--merge-kubeconfig` waits for the same phases but the workers'.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use kcore::labels::DEPLOYMENT_NAME_LABEL;

use kclient::discovery::ServerApis;
use kclient::error::Error;
use kclient::render::{self, Poll};
use kcore::fields::{self, object_json};
use kcore::plan::workers::WorkerProgress;
use kube::discovery::ApiResource;
use serde_json::Value;

use crate::common::control_plane::{self, ControlPlane};
use crate::common::tenant_kubeconfig;
use crate::common::tenant_status;

pub(super) async fn wait_endpoint(
    conn: &cli::Conn,
    apis: &ServerApis,
    name: &str,
    timeout: Duration,
) -> Result<(String, u16), Error> {
    render::wait_until(
        &format!("waiting for Kamaji's endpoint of {name} before creating the OpenStackCluster"),
        timeout,
        Duration::from_millis(500),
        || async move {
            let t = match control_plane::resolve(conn, apis, name).await {
                Ok(t) => t,
                Err(Error::NotFound { .. }) => {
                    return Ok(Poll::Pending("KamajiControlPlane not found yet".into()));
                }
                Err(e) => return Err(e),
            };
            Ok(match tenant_status::endpoint(&t) {
                Some(ep) => Poll::Ready(ep),
                None => Poll::Pending(phase_text(&t)),
            })
        },
    )
    .await
}

fn phase_text(t: &ControlPlane) -> String {
    match &t.tcp {
        None => "control plane provisioning: no TenantControlPlane yet (is the reconciler running? kubectl kamaji install)".into(),
        Some(tcp) => format!(
            "control plane provisioning: TenantControlPlane {}",
            tenant_status::tcp_phase(tcp).unwrap_or_else(|| "has no status yet (is Kamaji running?)".into())
        ),
    }
}

/// Why a control plane with an endpoint is not ready yet (phase 3/4), or `None` when it is.
fn control_plane_pending(t: &ControlPlane, host: &str, port: u16) -> Option<String> {
    let kcp = t.kcp.clone().unwrap_or(Value::Null);
    let ready = match &t.kcp {
        Some(k) => fields::control_plane_ready(k),
        None => t.tcp.as_ref().and_then(tenant_status::tcp_phase).as_deref() == Some("Ready"),
    };
    if ready {
        return None;
    }
    let why = fields::conditions(&kcp)
        .into_iter()
        .find(|c| c.is_problem())
        .map(|c| format!("{} {}", c.type_, c.message.or(c.reason).unwrap_or_default()))
        .or_else(|| {
            t.tcp
                .as_ref()
                .and_then(tenant_status::tcp_phase)
                .map(|p| format!("TenantControlPlane {p}"))
        })
        .unwrap_or_default();
    Some(format!(
        "3/4 control plane ready (endpoint {host}:{port} assigned): {why}"
    ))
}

/// Kamaji reports Ready before its kubeadm phases have run in the tenant (the bootstrap
/// token, then admin.conf's cluster-admin binding); until then a join token cannot be made
/// and the admin kubeconfig is Forbidden. `Some` says which phase is still running.
async fn tenant_pending(
    conn: &cli::Conn,
    t: &ControlPlane,
    admin_ok: &AtomicBool,
    host: &str,
    port: u16,
) -> Option<String> {
    let tcp = t.tcp.as_ref()?;
    if !tenant_status::bootstrap_token_phase_done(tcp) {
        return Some(format!(
            "3/4 control plane ready (endpoint {host}:{port} assigned): Kamaji is running its kubeadm phases in the tenant (bootstrap token)"
        ));
    }
    if admin_ok.load(Ordering::Relaxed) {
        return None;
    }
    let check = async {
        let a = tenant_kubeconfig::tenant_admin(conn, t).await.ok()?;
        kube::Api::<k8s_openapi::api::core::v1::Namespace>::all(a.client)
            .get("kube-system")
            .await
            .ok()
    };
    // One poll never blocks the wait: a tenant that does not answer is asked again on the
    // next one.
    let usable = tokio::time::timeout(Duration::from_secs(10), check)
        .await
        .ok()
        .flatten()
        .is_some();
    if !usable {
        return Some(format!(
            "3/4 control plane ready (endpoint {host}:{port} assigned): Kamaji is running its kubeadm phases in the tenant (cluster-admin binding)"
        ));
    }
    admin_ok.store(true, Ordering::Relaxed);
    None
}

/// The Cluster's workers: MachineDeployment replicas, and their Machines joined (nodeRef)
/// and Ready (NodeReady).
async fn worker_progress(
    conn: &cli::Conn,
    t: &ControlPlane,
    name: &str,
    md_ar: Option<&ApiResource>,
    machine_ar: Option<&ApiResource>,
) -> Result<(WorkerProgress, i64), Error> {
    let mut want = 0;
    let mut md_ready = 0;
    let sel = format!("{}={name}", kcore::labels::CLUSTER_NAME_LABEL);
    if let Some(ar) = md_ar {
        for md in kclient::api::list(conn, ar, Some(&t.namespace), Some(&sel)).await? {
            let r = fields::replicas(&object_json(&md));
            want += r.desired.unwrap_or(0);
            md_ready += r.ready.unwrap_or(0);
        }
    }
    let mut machines = Vec::new();
    if let Some(ar) = machine_ar.filter(|_| want > 0) {
        let sel = format!("{sel},{DEPLOYMENT_NAME_LABEL}");
        machines = kclient::api::list_values(conn, ar, Some(&t.namespace), Some(&sel)).await?;
    }
    Ok((WorkerProgress::of(want, &machines, md_ready), want))
}

/// What `--wait` polls: the kinds it lists, and what it remembers between polls.
struct ReadyWait<'a> {
    conn: &'a cli::Conn,
    apis: &'a ServerApis,
    name: &'a str,
    md_ar: Option<ApiResource>,
    machine_ar: Option<ApiResource>,
    /// The workers as last seen, to explain a timeout.
    last_workers: Mutex<Option<WorkerProgress>>,
    /// Whether the tenant admin kubeconfig answered once (checked until it does).
    admin_ok: AtomicBool,
    /// Only the control plane: ready once its admin kubeconfig answers (`--merge-kubeconfig`).
    control_plane_only: bool,
}

impl<'a> ReadyWait<'a> {
    /// The wait for `name`; `control_plane_only` stops once its admin kubeconfig answers (the
    /// workers' kinds are then not read).
    fn new(
        conn: &'a cli::Conn,
        apis: &'a ServerApis,
        name: &'a str,
        control_plane_only: bool,
    ) -> ReadyWait<'a> {
        let kind = |k: &str| {
            (!control_plane_only)
                .then(|| apis.capi_kind(k).ok())
                .flatten()
        };
        ReadyWait {
            conn,
            apis,
            name,
            md_ar: kind("MachineDeployment"),
            machine_ar: kind("Machine"),
            last_workers: Mutex::new(None),
            admin_ok: AtomicBool::new(false),
            control_plane_only,
        }
    }

    /// One poll of the four phases.
    async fn poll(&self) -> Result<Poll<String>, Error> {
        let (conn, name) = (self.conn, self.name);
        let t = match control_plane::resolve(conn, self.apis, name).await {
            Ok(t) => t,
            Err(Error::NotFound { .. }) => {
                return Ok(Poll::Pending(
                    "1/4 control plane provisioning: KamajiControlPlane not found".into(),
                ));
            }
            Err(e) => return Err(e),
        };
        let Some((host, port)) = tenant_status::endpoint(&t) else {
            return Ok(Poll::Pending(format!("1/4 {}", phase_text(&t))));
        };
        if let Some(why) = control_plane_pending(&t, &host, port) {
            return Ok(Poll::Pending(why));
        }
        if let Some(why) = tenant_pending(conn, &t, &self.admin_ok, &host, port).await {
            return Ok(Poll::Pending(why));
        }
        if self.control_plane_only {
            return Ok(Poll::Ready(format!(
                "the control plane of {name} answers at {host}:{port}"
            )));
        }
        let (md_ar, machine_ar) = (self.md_ar.as_ref(), self.machine_ar.as_ref());
        let (workers, want) = worker_progress(conn, &t, name, md_ar, machine_ar).await?;
        if !workers.done() {
            let text = format!("4/4 {}", workers.pending());
            if let Ok(mut l) = self.last_workers.lock() {
                *l = Some(workers);
            }
            return Ok(Poll::Pending(text));
        }
        let kcp = t.kcp.clone().unwrap_or(Value::Null);
        let version = kcp["status"]["version"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        Ok(Poll::Ready(format!(
            "cluster {name} is ready: control plane {version} at {host}:{port}, {}/{want} workers",
            workers.ready.min(want)
        )))
    }
}

/// The first three phases of `--wait`, for `--merge-kubeconfig`: until the tenant's admin
/// kubeconfig answers (Kamaji's kubeadm phases done); `Ready` with a one-line summary.
pub(super) async fn wait_control_plane(
    conn: &cli::Conn,
    apis: &ServerApis,
    name: &str,
    timeout: Duration,
) -> Result<String, Error> {
    let wait = ReadyWait::new(conn, apis, name, true);
    render::wait_until(
        &format!("waiting for the control plane of {name} to merge its kubeconfig"),
        timeout,
        Duration::from_millis(500),
        || wait.poll(),
    )
    .await
}

/// The four phases of `--wait`; `Ready` with a one-line summary.
pub(super) async fn wait_ready(
    conn: &cli::Conn,
    apis: &ServerApis,
    name: &str,
    timeout: Duration,
) -> Result<String, Error> {
    let wait = ReadyWait::new(conn, apis, name, false);
    let result = render::wait_until(
        &format!("waiting for cluster {name}"),
        timeout,
        Duration::from_millis(500),
        || wait.poll(),
    )
    .await;
    match result {
        // Nodes NotReady for want of a network plugin: say that, not "the controllers are slow".
        Err(Error::Timeout { .. }) => {
            let last = wait.last_workers.lock().ok().and_then(|l| l.clone());
            match last.and_then(|w| w.timeout_error(name, timeout)) {
                Some(e) => Err(e.into()),
                None => result,
            }
        }
        r => r,
    }
}
