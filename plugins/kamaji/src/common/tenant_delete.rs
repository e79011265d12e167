//! A control plane deleted and followed until its data is gone: what `delete` and `move
//! --delete-origin` share. The teardown is `kubectl capi delete`'s (`kclient::teardown`): the
//! Cluster goes and Cluster API cascades, the templates and addons only this cluster used go
//! after it, templates other clusters use stay. Kamaji's TenantControlPlane finalizer then
//! removes the control plane's data from its DataStore.
//!
//! Kamaji v1.0.0 clears the tenant's prefix while its API server still runs, and that API
//! server writes `kube-system` and its `extension-apiserver-authentication` ConfigMap again
//! before it stops (seen on every delete in the backup test; clastix/kamaji#700). So the wait
//! also waits for the tenant's pods to be gone, then removes what is left under the prefix
//! when no other TenantControlPlane reads it, and says so.

use std::time::Duration;

use cli::Conn;
use kclient::discovery::ServerApis;
use kclient::error::Error;
use kclient::render::{self, Poll};
use kclient::teardown::{self, Part, Teardown};

use super::control_plane::{self, ControlPlane};
use super::control_plane_row::ControlPlaneRow;
use super::datastores::{datastores, dial};

/// What deleting a control plane named NAME takes: the control plane (or what an interrupted
/// delete left of it), the teardown, and the DataStore its data is on.
pub struct Deletion {
    pub t: ControlPlane,
    pub td: Teardown,
    pub datastore: Option<String>,
}

impl Deletion {
    /// Reads what deleting `name` takes; "not found" when nothing of it is left.
    pub async fn plan(conn: &Conn, apis: &ServerApis, name: &str) -> Result<Deletion, Error> {
        let t = resolve_or_leftovers(conn, apis, name).await?;
        let cluster_name = t.cluster_or_own_name();
        let mut td =
            teardown::plan(conn, apis, &t.namespace, &cluster_name, own_parts(apis, &t)).await?;
        td.cascaded.extend(cascaded_tenant(apis, &t, &td));
        add_kamaji_held(conn, &mut td, &t.tcp_name()).await?;
        if t.kcp.is_none() && t.tcp.is_none() && td.all().next().is_none() {
            return Err(not_found(conn, apis, name).await);
        }
        let datastore = ControlPlaneRow::of(t.kcp.as_ref(), t.tcp.as_ref()).datastore;
        Ok(Deletion { t, td, datastore })
    }

    /// Whether this finishes an interrupted delete.
    pub fn resuming(&self) -> bool {
        resuming(&self.t)
    }

    /// What goes and stays, on stderr before the question.
    pub fn show(&self) {
        show(&self.td, &self.datastore);
    }

    /// Deletes what is not deleting yet, saying each.
    pub async fn delete(&self, conn: &Conn) -> Result<(), Error> {
        teardown::execute(conn, &self.td, WRITE, |d| {
            render::line(&format!(
                "{} deleted",
                render::object_name(&d.ar.kind, &d.ar.group, &d.name)
            ))
        })
        .await
    }

    /// Waits until everything is gone and the DataStore holds nothing of the tenant; returns
    /// the closing line.
    pub async fn wait(
        &self,
        conn: &Conn,
        apis: &ServerApis,
        timeout: Duration,
    ) -> Result<String, Error> {
        let t = &self.t;
        let started = std::time::Instant::now();
        wait_gone(conn, apis, &self.td, &t.name, timeout).await?;
        let left = timeout.saturating_sub(started.elapsed());
        let swept = sweep(conn, apis, t, self.datastore.as_deref(), left).await?;
        let datastore = match &self.datastore {
            Some(d) => format!("DataStore {d}"),
            None if resuming(t) => "its DataStore".to_string(),
            None => "DataStore <default>".to_string(),
        };
        Ok(format!(
            "{} is gone; {datastore} no longer holds its data ({swept})",
            t.name
        ))
    }
}

const WRITE: kclient::api::Write<'static> = kclient::api::Write {
    manager: kcore::kamaji::create::FIELD_MANAGER,
    dry_run: false,
    force: false,
};

/// The objects of the control plane beyond its Cluster's: the KamajiControlPlane, and a
/// TenantControlPlane no KamajiControlPlane owns (standalone).
fn own_parts(apis: &ServerApis, t: &ControlPlane) -> Vec<Part> {
    let mut out = Vec::new();
    if let Some(ar) = apis.kamaji_control_plane()
        && t.kcp.is_some()
    {
        out.push(Part {
            ar,
            name: t.name.clone(),
        });
    }
    if let Some(tcp) = &t.tcp
        && kcore::json::owner_of_kind(tcp, "KamajiControlPlane").is_none()
        && let Ok(ar) = control_plane::tcp_resource(apis)
    {
        out.push(Part {
            ar,
            name: t.tcp_name(),
        });
    }
    out
}

/// The TenantControlPlane the garbage collector removes after its KamajiControlPlane (through
/// the reconciler's owner reference), when the teardown does not delete it itself: shown and
/// waited for, since its Kamaji finalizer is what removes the data from the DataStore; `--wait`
/// must not say the data is gone before it is.
fn cascaded_tenant(apis: &ServerApis, t: &ControlPlane, td: &Teardown) -> Option<Part> {
    t.tcp.as_ref()?;
    let ar = control_plane::tcp_resource(apis).ok()?;
    let name = t.tcp_name();
    let listed = td.all().any(|p| p.ar.kind == ar.kind && p.name == name);
    (!listed).then_some(Part { ar, name })
}

/// The error `resolve` gives for a name with nothing of it left.
async fn not_found(conn: &Conn, apis: &ServerApis, name: &str) -> Error {
    match control_plane::resolve(conn, apis, name).await {
        Err(e) => e,
        Ok(_) => Error::other(format!(
            "{name} appeared while it was being looked up; run again"
        )),
    }
}

/// What goes and stays, on stderr before the question.
fn show(td: &Teardown, datastore: &Option<String>) {
    render::info(&format!("This deletes, in namespace {}:", td.namespace));
    for d in td.all() {
        render::info(&format!(
            "  {}",
            render::object_name(&d.ar.kind, &d.ar.group, &d.name)
        ));
    }
    render::info(&format!(
        "and Kamaji removes the control plane's data from DataStore {}.",
        datastore.as_deref().unwrap_or("<default>")
    ));
    for k in &td.kept {
        render::info(&format!(
            "It keeps {} (still used by {}).",
            render::object_name(&k.ar.kind, &k.ar.group, &k.name),
            k.user
        ));
    }
}

/// Whether `t` is what an interrupted delete left: no KamajiControlPlane any more, and no
/// TenantControlPlane or only one a KamajiControlPlane owned (a standalone one is deleted
/// as asked, not resumed).
fn resuming(t: &ControlPlane) -> bool {
    t.kcp.is_none()
        && t.tcp
            .as_ref()
            .is_none_or(|tcp| kcore::json::owner_of_kind(tcp, "KamajiControlPlane").is_some())
}

/// Adds what Kamaji's finalizers hold for the TenantControlPlane `tcp` (its DataStore Secret)
/// to what the teardown waits for, each once.
async fn add_kamaji_held(conn: &Conn, td: &mut Teardown, tcp: &str) -> Result<(), Error> {
    for p in teardown::kamaji_held(conn, &td.namespace, &[tcp.to_string()]).await? {
        if !td.all().any(|q| q.ar.kind == p.ar.kind && q.name == p.name) {
            td.cascaded.push(p);
        }
    }
    Ok(())
}

/// The control plane named `name`, or, when it is gone already, a target with neither object:
/// an interrupted delete whose Cluster (or leftovers) may still be there. Finishing that
/// teardown beats saying "not found".
async fn resolve_or_leftovers(
    conn: &Conn,
    apis: &ServerApis,
    name: &str,
) -> Result<ControlPlane, Error> {
    match control_plane::resolve(conn, apis, name).await {
        Ok(t) => Ok(t),
        Err(Error::NotFound { .. }) => Ok(ControlPlane {
            namespace: conn.namespace.clone(),
            name: name.to_string(),
            kcp: None,
            tcp: None,
        }),
        Err(e) => Err(e),
    }
}

/// `--wait`: until every object of the teardown is gone.
async fn wait_gone(
    conn: &Conn,
    apis: &ServerApis,
    td: &Teardown,
    name: &str,
    timeout: Duration,
) -> Result<(), Error> {
    let total = td.all().count();
    let released = std::cell::RefCell::new(Vec::new());
    let waited = render::wait_until(
        &format!("waiting for {name} to be gone"),
        timeout,
        Duration::from_millis(500),
        || async {
            let let_go = teardown::finish_kamaji_release(conn, apis, td, WRITE).await?;
            released.borrow_mut().extend(let_go);
            let left = teardown::remaining(conn, td).await?;
            Ok(if left.is_empty() {
                Poll::Ready(())
            } else {
                Poll::Pending(format!(
                    "{}/{total} gone; left: {}",
                    total - left.len(),
                    left.join(", ")
                ))
            })
        },
    )
    .await;
    teardown::say_released(&released.take());
    waited
}

/// After the teardown: waits for the tenant's pods to stop, then removes the keys its API
/// server wrote under the prefix after Kamaji cleared it (see the module documentation).
/// Says what it did, for the closing line.
async fn sweep(
    conn: &Conn,
    apis: &ServerApis,
    t: &ControlPlane,
    datastore: Option<&str>,
    timeout: Duration,
) -> Result<String, Error> {
    let finished = "Kamaji's TenantControlPlane finalizer finished".to_string();
    let Some(store) = datastore else {
        return Ok(finished);
    };
    let tcp = t.tcp_name();
    pods_gone(conn, &t.namespace, &tcp, timeout).await?;
    let prefix = match &t.tcp {
        Some(v) => kcore::kamaji::migrate::etcd_prefix(v),
        None => kcore::kamaji::migrate::etcd_prefix(&serde_json::json!(
            {"metadata": {"namespace": t.namespace, "name": tcp}})),
    };
    let tcp_ar = control_plane::tcp_resource(apis)?;
    let owners = kclient::api::list_values(conn, &tcp_ar, None, None).await?;
    if owners
        .iter()
        .any(|o| kcore::kamaji::migrate::etcd_prefix(o) == prefix)
    {
        return Ok(format!(
            "{finished}; {prefix} is read by another TenantControlPlane"
        ));
    }
    let Some(d) = datastores(conn, apis)
        .await?
        .into_iter()
        .find(|d| d.name == store)
    else {
        return Ok(finished);
    };
    if !d.is_etcd() {
        return Ok(finished);
    }
    let etcd = match dial(conn, &d, &t.name).await {
        Ok(e) => e,
        Err(e) => {
            render::warn(&format!(
                "{e}: kubectl kamaji datastores --orphans, run where it answers, lists what {} left",
                t.name
            ));
            return Ok(finished);
        }
    };
    let removed = etcd.delete(&prefix).await?;
    Ok(if removed == 0 {
        finished
    } else {
        format!(
            "{finished}; {removed} keys its API server wrote under {prefix} after Kamaji cleared it were removed (clastix/kamaji#700)"
        )
    })
}

/// Waits until no pod of the TenantControlPlane `tcp` is left (Kamaji's
/// `kamaji.clastix.io/name` label).
pub async fn pods_gone(conn: &Conn, ns: &str, tcp: &str, timeout: Duration) -> Result<(), Error> {
    let pods = kube::api::ApiResource::erase::<k8s_openapi::api::core::v1::Pod>(&());
    let selector = format!("{}={tcp}", kcore::plan::teardown::KAMAJI_NAME_LABEL);
    render::wait_until(
        &format!("waiting for {tcp}'s pods to stop"),
        timeout,
        Duration::from_millis(500),
        || async {
            let n = kclient::api::list(conn, &pods, Some(ns), Some(&selector))
                .await?
                .len();
            Ok(if n == 0 {
                Poll::Ready(())
            } else {
                Poll::Pending(format!("{n} pods of {tcp} still running"))
            })
        },
    )
    .await
}
