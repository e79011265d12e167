//! The one teardown of a cluster, shared by `kubectl capi delete` and `kubectl kamaji delete`:
//!
//! 1. [`plan`] finds what goes: the Cluster; the objects Cluster API removes through owner
//!    references once the Cluster goes (its control plane and infrastructure cluster, the
//!    MachineDeployments with their MachineSets and Machines; `kubectl kamaji delete` adds the
//!    TenantControlPlane the garbage collector removes after its KamajiControlPlane); and what nobody would
//!    remove: the machine, bootstrap and BYOH installer templates the cluster's deployments
//!    use, and what `kubectl kamaji create --cni*` and `--kube-proxy-mode` added (a
//!    ClusterResourceSet each and the ConfigMaps or Secrets holding the manifests, labelled with
//!    the cluster and `app.kubernetes.io/managed-by: kubectl-kamaji`). Templates another
//!    cluster still uses are kept ([`kcore::plan::teardown::templates_in_use`]).
//! 2. [`execute`] first releases the kept templates from the Cluster's ownership (else the
//!    garbage collector would take them with it), then deletes the Cluster and lets Cluster
//!    API cascade (machines are drained and deleted before the control plane, as CAPI orders
//!    it), then deletes the rest; an object already gone is not an error, so a re-run finishes
//!    an interrupted teardown.

use kube::api::ApiResource;
use serde_json::{Value, json};

use crate::api::{self, Write};
use crate::conn::Conn;
use crate::discovery::ServerApis;
use crate::error::Error;
use kcore::fields;
use kcore::groups::{ADDONS_GROUP, INFRASTRUCTURE_GROUP};
use kcore::labels::CLUSTER_NAME_LABEL;

/// One object of the teardown.
#[derive(Clone, Debug)]
pub struct Part {
    pub ar: ApiResource,
    pub name: String,
}

/// A template the teardown keeps because something outside the cluster still uses it.
#[derive(Clone, Debug)]
pub struct Kept {
    pub ar: ApiResource,
    pub name: String,
    /// Who uses it, e.g. `MachineDeployment other-md-0`.
    pub user: String,
}

/// What a teardown deletes and keeps, in the namespace of the cluster.
#[derive(Clone, Debug)]
pub struct Teardown {
    pub namespace: String,
    pub cluster_name: String,
    /// The Cluster, when it exists: deleted first.
    pub cluster: Option<Part>,
    /// What Cluster API deletes once the Cluster goes (its control plane and infrastructure
    /// cluster, the MachineDeployments): shown and waited for, not deleted one by one, so CAPI
    /// keeps its order (workers before the control plane, the infrastructure last).
    pub cascaded: Vec<Part>,
    /// What nobody else would delete, in delete order: templates, create's addons, and objects
    /// the caller named that have no Cluster to cascade from.
    pub parts: Vec<Part>,
    pub kept: Vec<Kept>,
}

impl Teardown {
    /// Every object that goes, the Cluster first.
    pub fn all(&self) -> impl Iterator<Item = &Part> {
        self.cluster.iter().chain(&self.cascaded).chain(&self.parts)
    }
    /// What [`execute`] deletes itself: the Cluster, then [`Teardown::parts`].
    pub fn deleted(&self) -> impl Iterator<Item = &Part> {
        self.cluster.iter().chain(&self.parts)
    }
}

/// The label selector of what `kubectl kamaji create` added for `cluster` besides CAPI's objects.
fn created_addons_selector(cluster: &str) -> String {
    let (k, v) = kcore::kamaji::create::MANAGED_BY;
    format!("{CLUSTER_NAME_LABEL}={cluster},{k}={v}")
}

/// Finds what the teardown of `cluster_name` in `namespace` deletes and keeps. `extra` are
/// objects the caller knows of beyond the Cluster's (a KamajiControlPlane and its
/// TenantControlPlane, which also go when there is no Cluster).
pub async fn plan(
    conn: &Conn,
    apis: &ServerApis,
    namespace: &str,
    cluster_name: &str,
    extra: Vec<Part>,
) -> Result<Teardown, Error> {
    let ns = namespace;
    let mut cascaded = Vec::new();
    let mut parts = Vec::new();
    let mut cluster = None;
    if let Ok(ar) = apis.cluster()
        && let Some(c) = api::get_opt(conn, &ar, Some(ns), cluster_name).await?
    {
        let v = fields::object_json(&c);
        for r in [
            fields::cluster_control_plane_ref(&v),
            fields::cluster_infrastructure_ref(&v),
        ]
        .into_iter()
        .flatten()
        {
            if let Ok(rar) = apis.resolve_ref(&r) {
                cascaded.push(Part {
                    ar: rar,
                    name: r.name,
                });
            }
        }
        cluster = Some(Part {
            ar,
            name: cluster_name.to_string(),
        });
    }
    let all_mds = deployment_parts(conn, apis, ns, cluster_name, &mut cascaded, &mut parts).await?;
    for ar in addon_resources(apis) {
        let selector = created_addons_selector(cluster_name);
        for o in api::list(conn, &ar, Some(ns), Some(&selector)).await? {
            parts.push(Part {
                ar: ar.clone(),
                name: o.metadata.name.clone().unwrap_or_default(),
            });
        }
    }
    parts.extend(extra);
    // Unique, first occurrence wins (the order is the delete order).
    let mut seen: Vec<(String, String)> = cluster
        .iter()
        .map(|c| (c.ar.kind.clone(), c.name.clone()))
        .collect();
    for list in [&mut cascaded, &mut parts] {
        list.retain(|d| {
            let k = (d.ar.kind.clone(), d.name.clone());
            let new = !seen.contains(&k);
            if new {
                seen.push(k);
            }
            new
        });
    }
    let unowned = not_cascading(conn, ns, cluster_name, &mut cascaded).await?;
    parts.splice(0..0, unowned);
    // A KamajiControlPlane's TenantControlPlane has its name (the reconciler's and CACPPK's
    // naming); what Kamaji's finalizers hold for it goes last, when Kamaji lets go.
    let tcps: Vec<String> = cascaded
        .iter()
        .chain(&parts)
        .filter(|p| p.ar.kind == "TenantControlPlane" || p.ar.kind == "KamajiControlPlane")
        .map(|p| p.name.clone())
        .collect();
    cascaded.extend(kamaji_held(conn, ns, &tcps).await?);
    let kept =
        keep_shared_templates(conn, apis, ns, cluster_name, &all_mds, &seen, &mut parts).await?;
    Ok(Teardown {
        namespace: ns.to_string(),
        cluster_name: cluster_name.to_string(),
        cluster,
        cascaded,
        parts,
        kept,
    })
}

/// What Kamaji's finalizers hold for the TenantControlPlanes `tcps` in `ns`
/// ([`kcore::plan::teardown::held_by_kamaji`]: the `<tcp>-datastore-config` Secret until the
/// DataStore is cleaned). Waited for, never deleted here: the garbage collector removes it
/// through its owner reference to the TenantControlPlane once Kamaji drops the finalizer, and
/// deleting it early could take the DataStore credentials from Kamaji's clean-up. Only once
/// that TenantControlPlane is gone does [`finish_kamaji_release`] take a finalizer Kamaji left.
pub async fn kamaji_held(conn: &Conn, ns: &str, tcps: &[String]) -> Result<Vec<Part>, Error> {
    if tcps.is_empty() {
        return Ok(Vec::new());
    }
    let ar = ApiResource::erase::<k8s_openapi::api::core::v1::Secret>(&());
    let selector = kcore::plan::teardown::KAMAJI_PROJECT_SELECTOR;
    let labelled = api::list_values(conn, &ar, Some(ns), Some(selector)).await?;
    Ok(kcore::plan::teardown::held_by_kamaji(&labelled, tcps)
        .into_iter()
        .map(|name| Part {
            ar: ar.clone(),
            name,
        })
        .collect())
}

/// Finishes what Kamaji v1.0.0 sometimes leaves undone ([`kcore::plan::teardown::left_by_kamaji`]):
/// takes Kamaji's finalizer off a Secret of the teardown that its TenantControlPlane no longer
/// exists to release, guarded by the resourceVersion read. Returns the names of the Secrets it
/// let go, for the caller to say so. Called by the `--wait` loops before each look.
pub async fn finish_kamaji_release(
    conn: &Conn,
    apis: &ServerApis,
    t: &Teardown,
    w: Write<'_>,
) -> Result<Vec<String>, Error> {
    let mut released = Vec::new();
    let Some(tcp_ar) = apis.tenant_control_plane() else {
        return Ok(released);
    };
    for p in t
        .all()
        .filter(|p| p.ar.kind == "Secret" && p.ar.group.is_empty())
    {
        let Some(o) = api::get_opt(conn, &p.ar, Some(&t.namespace), &p.name).await? else {
            continue;
        };
        let secret = fields::object_json(&o);
        let Some(tcp) = kcore::json::label(&secret, kcore::plan::teardown::KAMAJI_NAME_LABEL)
        else {
            continue;
        };
        let now = api::get_opt(conn, &tcp_ar, Some(&t.namespace), tcp).await?;
        let uid = now.as_ref().and_then(|o| o.metadata.uid.as_deref());
        if let Some(keep) = kcore::plan::teardown::left_by_kamaji(&secret, uid) {
            let patch = json!({"metadata": {"finalizers": keep,
                "resourceVersion": o.metadata.resource_version}});
            match api::merge_patch(conn, &p.ar, &t.namespace, &p.name, &patch, w).await {
                // Gone meanwhile, or changed (Kamaji got there first): the next look decides.
                Ok(_) => released.push(p.name.clone()),
                Err(Error::NotFound { .. } | Error::Conflict { .. }) => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(released)
}

/// Says on stderr which Secrets [`finish_kamaji_release`] let go, and why.
pub fn say_released(secrets: &[String]) {
    for s in secrets {
        crate::render::info(&format!(
            "took Kamaji's finalizer off Secret {s}: its TenantControlPlane is gone (the DataStore \
             clean-up finished first), and Kamaji v1.0.0 had left it there for good"
        ));
    }
}

/// Takes out of `cascaded` what the Cluster does not own: Cluster API cascades through owner
/// references (which its controllers set), so an object without one to the Cluster (its
/// controllers not running, or an object made by hand) would stay; those are deleted explicitly
/// right after the Cluster. Objects already gone are dropped.
async fn not_cascading(
    conn: &Conn,
    ns: &str,
    cluster_name: &str,
    cascaded: &mut Vec<Part>,
) -> Result<Vec<Part>, Error> {
    let mut out = Vec::new();
    let mut owned = Vec::new();
    for p in cascaded.drain(..) {
        match api::get_opt(conn, &p.ar, Some(ns), &p.name).await? {
            Some(o)
                if kcore::plan::teardown::owned_by_cluster(
                    &fields::object_json(&o),
                    cluster_name,
                ) =>
            {
                owned.push(p)
            }
            Some(_) => out.push(p),
            None => {}
        }
    }
    *cascaded = owned;
    Ok(out)
}

/// The cluster's MachineDeployments into `cascaded` and the templates they use (for BYOH, with
/// the installer template their ByoMachineTemplate names) into `parts`; returns every
/// MachineDeployment of the namespace, for [`keep_shared_templates`].
async fn deployment_parts(
    conn: &Conn,
    apis: &ServerApis,
    ns: &str,
    cluster_name: &str,
    cascaded: &mut Vec<Part>,
    parts: &mut Vec<Part>,
) -> Result<Vec<Value>, Error> {
    let Ok(ar) = apis.capi_kind("MachineDeployment") else {
        return Ok(Vec::new());
    };
    let all_mds = api::list_values(conn, &ar, Some(ns), None).await?;
    for v in all_mds
        .iter()
        .filter(|m| kcore::json::label(m, CLUSTER_NAME_LABEL) == Some(cluster_name))
    {
        cascaded.push(Part {
            ar: ar.clone(),
            name: kcore::json::name(v).to_string(),
        });
        for r in [
            fields::template_infrastructure_ref(v),
            fields::object_ref(v, &["spec", "template", "spec", "bootstrap", "configRef"]),
        ]
        .into_iter()
        .flatten()
        {
            let Ok(rar) = apis.resolve_ref(&r) else {
                continue;
            };
            if r.kind == "ByoMachineTemplate"
                && let Some(bmt) = api::get_opt(conn, &rar, Some(ns), &r.name).await?
                && let Some(ir) = fields::object_ref(
                    &fields::object_json(&bmt),
                    &["spec", "template", "spec", "installerRef"],
                )
                && ir.namespace.as_deref().is_none_or(|n| n == ns)
                && let Ok(iar) = apis.resolve_ref(&ir)
            {
                parts.push(Part {
                    ar: iar,
                    name: ir.name,
                });
            }
            parts.push(Part {
                ar: rar,
                name: r.name,
            });
        }
    }
    Ok(all_mds)
}

/// The kinds `kubectl kamaji create --cni*` and `--kube-proxy-mode` add objects of.
fn addon_resources(apis: &ServerApis) -> Vec<ApiResource> {
    let mut out = Vec::new();
    if let Some(k) = apis.kind(ADDONS_GROUP, "ClusterResourceSet") {
        out.push(k.resource(k.version()));
    }
    out.push(ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(
        &(),
    ));
    out.push(ApiResource::erase::<k8s_openapi::api::core::v1::Secret>(&()));
    out
}

/// Moves the templates another cluster still uses from `parts` to the kept list.
async fn keep_shared_templates(
    conn: &Conn,
    apis: &ServerApis,
    ns: &str,
    cluster_name: &str,
    all_mds: &[Value],
    doomed: &[(String, String)],
    parts: &mut Vec<Part>,
) -> Result<Vec<Kept>, Error> {
    let machine_templates: Vec<Value> =
        match apis.provider_kind(INFRASTRUCTURE_GROUP, "ByoMachineTemplate") {
            Some(ar) => api::list_values(conn, &ar, Some(ns), None).await?,
            None => Vec::new(),
        };
    let in_use =
        kcore::plan::teardown::templates_in_use(cluster_name, all_mds, &machine_templates, doomed);
    let mut kept = Vec::new();
    parts.retain(|d| match in_use.get(&(d.ar.kind.clone(), d.name.clone())) {
        Some(user) => {
            kept.push(Kept {
                ar: d.ar.clone(),
                name: d.name.clone(),
                user: user.clone(),
            });
            false
        }
        None => true,
    });
    Ok(kept)
}

/// Runs the teardown (see the module documentation). `on_deleted` is called with each object
/// the server accepted the deletion of (not with those already gone). With `w.dry_run` the
/// server validates every deletion and stores nothing, and kept templates are not released.
pub async fn execute(
    conn: &Conn,
    t: &Teardown,
    w: Write<'_>,
    mut on_deleted: impl FnMut(&Part),
) -> Result<(), Error> {
    if !w.dry_run {
        release_kept(conn, t, w).await?;
    }
    for d in t.deleted() {
        if api::delete_if_present(conn, &d.ar, Some(&t.namespace), &d.name, w.dry_run).await? {
            on_deleted(d);
        }
    }
    Ok(())
}

/// A kept template the Cluster owns would go with it (garbage collection): drop that owner
/// reference first, guarded by the resourceVersion read.
async fn release_kept(conn: &Conn, t: &Teardown, w: Write<'_>) -> Result<(), Error> {
    for k in &t.kept {
        if let Some(o) = api::get_opt(conn, &k.ar, Some(&t.namespace), &k.name).await?
            && let Some(refs) = kcore::kamaji::create::disowned_by_cluster(
                &fields::object_json(&o),
                &t.cluster_name,
            )
        {
            let patch = json!({"metadata": {"ownerReferences": refs,
                "resourceVersion": o.metadata.resource_version}});
            api::merge_patch(conn, &k.ar, &t.namespace, &k.name, &patch, w).await?;
        }
    }
    Ok(())
}

/// The objects of the teardown still present, as the API server returns them.
pub async fn present(conn: &Conn, t: &Teardown) -> Result<Vec<Value>, Error> {
    let mut left = Vec::new();
    for d in t.all() {
        if let Some(o) = api::get_opt(conn, &d.ar, Some(&t.namespace), &d.name).await? {
            let mut v = fields::object_json(&o);
            // Callers report by kind; a GET answers with it, but do not rely on that.
            if v.get("kind").is_none_or(Value::is_null) {
                v["kind"] = json!(d.ar.kind);
            }
            left.push(v);
        }
    }
    Ok(left)
}

/// The objects of the teardown still present, with their finalizers (`Kind name (finalizers
/// a,b)`), for progress reports.
pub async fn remaining(conn: &Conn, t: &Teardown) -> Result<Vec<String>, Error> {
    Ok(present(conn, t)
        .await?
        .iter()
        .map(|o| {
            let fin = kcore::json::strings_at(o, &["metadata", "finalizers"]);
            let why = if fin.is_empty() {
                String::new()
            } else {
                format!(" (finalizers {})", fin.join(","))
            };
            format!("{} {}{why}", kcore::json::kind(o), kcore::json::name(o))
        })
        .collect())
}
