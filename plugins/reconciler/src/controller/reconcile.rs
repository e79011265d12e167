//! One reconcile of a KamajiControlPlane, as a list of steps.
//!
//! A step that cannot go on writes the status saying why and returns `Ok(None)` (or `false`);
//! the reconcile then waits for a change of a watched object. A step that fails writes the status
//! too and returns the error, which backs off ([`error_policy`]).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};

use super::cache::{self, Cached};
use super::external::{finalize, tcp_place};
use super::infra_cluster::infra_step;
use super::secrets::publish_secrets;
use super::status::{
    ObservedTcp, event, has_condition, observe, write_status, write_status_obs,
    write_status_obs_with, write_status_with,
};
use super::stored::StoredKcp;
use super::{Cond, KcpCtx, MANAGER, TcpPlace, kcp_ns, no, patch_kcp, yes};
use crate::Error;
use crate::api::v1alpha2::KamajiControlPlane;
use crate::endpoint::{self, Endpoint};
use crate::tcp::{self, ClusterNetwork, Fit};
use crate::version::{self, Step};
use kcore::labels::PAUSED_ANNOTATION;
use kcore::version::KubeVersion;
use kcore::version::releases::{PATCH_RELEASES_ANNOTATION, Releases};

/// Failed reconciles back off (`Retries::doubling`).
pub(super) fn error_policy(kcp: Arc<StoredKcp>, err: &Error, ctx: Arc<KcpCtx>) -> Action {
    ctx.retries
        .failed(&ctx.base, "KamajiControlPlane", kcp.as_ref(), err)
}

pub(super) async fn reconcile(stored: Arc<StoredKcp>, ctx: Arc<KcpCtx>) -> Result<Action, Error> {
    let kcp = stored.parse()?;
    let mut r = reconcile_inner(&kcp, &ctx).await;
    // Counted once done, so that a count read after it includes this reconcile's requests.
    ctx.base.metrics.reconciles.fetch_add(1, Ordering::Relaxed);
    // A TenantControlPlane in another cluster is not watched: KamajiControlPlanes with an
    // external cluster reference are looked at again every 30 s (only those).
    let remote = ctx.cfg.external_cluster_reference
        && kcp.meta().deletion_timestamp.is_none()
        && kcp
            .spec
            .fields
            .deployment
            .as_ref()
            .is_some_and(|d| d.external_cluster_reference.is_some());
    if remote && r.is_ok() {
        r = Ok(Action::requeue(Duration::from_secs(30)));
    }
    if r.is_ok() {
        ctx.retries.succeeded(stored.as_ref());
    }
    r
}

/// The steps: release the finalizer when deleted; find the owning Cluster; stop while paused;
/// find where the TenantControlPlane lives; choose the version (one minor at a time); apply the
/// TenantControlPlane; publish its endpoint; patch the infrastructure cluster; publish the Secrets;
/// write readiness and the status.
async fn reconcile_inner(kcp: &KamajiControlPlane, ctx: &KcpCtx) -> Result<Action, Error> {
    if kcp.meta().deletion_timestamp.is_some() {
        ctx.forget_written(kcp);
        return finalize(kcp, ctx).await;
    }
    let Some(cluster) = owning_cluster(kcp, ctx).await? else {
        return Ok(Action::await_change());
    };
    let cluster_v = serde_json::to_value(&cluster).unwrap_or(Value::Null);
    if paused(kcp, ctx, &cluster, &cluster_v).await? {
        return Ok(Action::await_change());
    }
    let mut conds = vec![no("Paused", "NotPaused", "")];
    let Some(place) = tcp_place(kcp, ctx, &mut conds).await? else {
        return Ok(Action::await_change());
    };
    let existing = match read_tcp(kcp, ctx, &place).await? {
        TcpRead::Is(t) => t,
        // The watch has yet to bring this process's last apply; that event reconciles again.
        TcpRead::Behind => return Ok(Action::await_change()),
    };
    // A count or a version the CRD refuses now, kept from before it did: not copied into the
    // TenantControlPlane, which stays as it is until the KamajiControlPlane is fixed.
    if let Some(why) = kcp.spec.out_of_bounds() {
        let cond = no("TenantControlPlaneCreated", "InvalidSpec", why);
        write_status_with(kcp, ctx, existing.as_ref(), &mut conds, cond).await?;
        return Ok(Action::await_change());
    }
    let Some(target) = version_target(kcp, ctx, existing.as_ref(), &mut conds).await? else {
        return Ok(Action::await_change());
    };
    let applied = apply_tcp(kcp, ctx, &place, &cluster_v, &target, existing, &mut conds);
    let Some(tcp) = applied.await? else {
        return Ok(Action::await_change());
    };
    let observed = observe(&tcp, kcp, ctx.disc.contract);
    let Some(ep) = endpoint_step(kcp, ctx, &tcp, &observed, &mut conds).await? else {
        return Ok(Action::await_change());
    };
    if !ctx.cfg.skip_infra_patch {
        conds.push(infra_step(kcp, ctx, &cluster_v, &kcp_ns(kcp), &ep).await?);
        repair_cluster_endpoint(kcp, ctx, &cluster, &cluster_v, &ep).await?;
    }
    let secrets = publish_secrets(kcp, ctx, &cluster.name_any(), &tcp, &place).await;
    secrets_condition(kcp, ctx, secrets, &observed, &mut conds).await?;
    readiness_conditions(&tcp, &observed, &mut conds);
    write_status_obs(kcp, ctx, &observed, &conds).await?;
    Ok(Action::await_change())
}

/// The TenantControlPlane as it is, or `Behind` when the watch has not yet brought what this
/// process last applied to it.
enum TcpRead {
    Is(Option<Value>),
    Behind,
}

/// The TenantControlPlane from the watch's cache; read from the API server only when it is in
/// another cluster (not watched), when the watch has not listed yet, or when the cache has none
/// although this process applied one (created too recently for the watch to have brought it).
async fn read_tcp(
    kcp: &KamajiControlPlane,
    ctx: &KcpCtx,
    place: &TcpPlace,
) -> Result<TcpRead, Error> {
    let applied = ctx.written(kcp).tcp;
    if !place.remote {
        match ctx.seen.tcps.get(&place.ns, &place.name) {
            Cached::Present(k) => {
                if let Some(t) = cache::parse::<Value>(&k) {
                    let behind = applied.as_ref().is_some_and(|(_, uid, generation)| {
                        t["metadata"]["uid"] == *uid.as_str()
                            && t["metadata"]["generation"]
                                .as_i64()
                                .is_some_and(|g| g < *generation)
                    });
                    return Ok(if behind {
                        TcpRead::Behind
                    } else {
                        TcpRead::Is(Some(t))
                    });
                }
            }
            Cached::Absent if applied.is_none() => return Ok(TcpRead::Is(None)),
            Cached::Absent | Cached::Unknown => {}
        }
    }
    let t = place.api.get_opt(&place.name).await?;
    Ok(TcpRead::Is(
        t.map(|t| serde_json::to_value(t).unwrap_or(Value::Null)),
    ))
}

/// The owning Cluster (kind and group checked, not just the first ownerReference), remembered
/// for the Cluster and infrastructure-cluster watches; from the watch's cache, read from the API
/// server only when the cache has none.
async fn owning_cluster(
    kcp: &KamajiControlPlane,
    ctx: &KcpCtx,
) -> Result<Option<DynamicObject>, Error> {
    let ns = kcp_ns(kcp);
    let owner = kcp
        .owner_references()
        .iter()
        .find(|o| o.kind == "Cluster" && o.api_version.starts_with("cluster.x-k8s.io/"));
    let Some(owner) = owner else {
        let msg = "no ownerReference to a cluster.x-k8s.io Cluster; Cluster API adds it once a Cluster's spec.controlPlaneRef names this KamajiControlPlane, and nothing is created until then";
        let cond = no("TenantControlPlaneCreated", "WaitingForClusterOwner", msg);
        let already = has_condition(kcp, &cond);
        write_status(kcp, ctx, None, &[cond]).await?;
        if !already {
            event(ctx, kcp, EventType::Warning, "WaitingForClusterOwner", msg).await;
        }
        return Ok(None);
    };
    // Remembered before the read, so that a change of the Cluster from now on is seen.
    if let Ok(mut m) = ctx.clusters.lock() {
        m.insert((ns.clone(), owner.name.clone()), kcp.name_any());
    }
    let cached = match ctx.seen.clusters.get(&ns, &owner.name) {
        Cached::Present(k) => cache::parse::<DynamicObject>(&k),
        Cached::Absent | Cached::Unknown => None,
    };
    let cluster = match cached {
        Some(c) => Some(c),
        None => {
            let clusters: Api<DynamicObject> =
                Api::namespaced_with(ctx.base.client.clone(), &ns, &ctx.disc.cluster);
            clusters.get_opt(&owner.name).await?
        }
    };
    let Some(cluster) = cluster else {
        let cond = no(
            "TenantControlPlaneCreated",
            "ClusterNotFound",
            format!("the owning Cluster {ns}/{} does not exist", owner.name),
        );
        write_status(kcp, ctx, None, &[cond]).await?;
        return Ok(None);
    };
    Ok(Some(cluster))
}

/// Whether reconciliation is paused (then the status says so).
async fn paused(
    kcp: &KamajiControlPlane,
    ctx: &KcpCtx,
    cluster: &DynamicObject,
    cluster_v: &Value,
) -> Result<bool, Error> {
    let paused = cluster_v["spec"]["paused"] == json!(true)
        || cluster.annotations().contains_key(PAUSED_ANNOTATION)
        || kcp.annotations().contains_key(PAUSED_ANNOTATION);
    if paused {
        let mut c = yes("Paused", "Paused");
        c.message = "reconciliation is paused (Cluster spec.paused or the cluster.x-k8s.io/paused annotation)".into();
        write_status(kcp, ctx, None, &[c]).await?;
    }
    Ok(paused)
}

/// The version to apply now: a later minor is reached through the newest patch of the current
/// minor and of each minor between (those recorded on the KamajiControlPlane, else the shipped
/// table), each step waiting until Kamaji reports the previous one Ready; downgrades of the
/// minor are refused.
async fn version_target(
    kcp: &KamajiControlPlane,
    ctx: &KcpCtx,
    existing: Option<&Value>,
    conds: &mut Vec<Cond>,
) -> Result<Option<String>, Error> {
    let cur_version = existing.and_then(|t| {
        t["spec"]["kubernetes"]["version"]
            .as_str()
            .map(str::to_string)
    });
    let ready_at_current = existing.is_some_and(|t| {
        let v = &t["status"]["kubernetesResources"]["version"];
        v["status"] == "Ready" && v["version"].as_str() == cur_version.as_deref()
    });
    let desired = version::v_prefixed(&kcp.spec.version);
    // The patch releases the planning command recorded, over the shipped table; an upgrade
    // nobody planned (a hand edit, a ClusterClass's topology) gets no extra step within the
    // current minor.
    let releases = match kcp.annotations().get(PATCH_RELEASES_ANNOTATION) {
        Some(a) => Releases::shipped().with_recorded(Some(a)),
        None => match cur_version.as_deref().map(KubeVersion::parse) {
            Some(Ok(c)) => Releases::shipped().without_minor_of(&c),
            _ => Releases::shipped(),
        },
    };
    let target = match version::next_step(
        &desired,
        cur_version.as_deref(),
        ready_at_current,
        &releases,
    ) {
        Step::Desired(v) => {
            conds.push(rollout_condition(existing, &v));
            v
        }
        Step::Intermediate { version, remaining } => {
            conds.push(yes("VersionUpgrade", "SteppingMinor").with_message(format!(
                "upgrading {} to {desired} one minor at a time: step {version} in progress ({remaining} more after it)",
                cur_version.clone().unwrap_or_default()
            )));
            version
        }
        Step::Wait { version, remaining } => {
            conds.push(yes("VersionUpgrade", "WaitingForStep").with_message(format!(
                "upgrading to {desired} one minor at a time: waiting for {version} to be Ready ({remaining} minor(s) to go)"
            )));
            version
        }
        Step::Refused(why) => {
            let cond = no("TenantControlPlaneCreated", "VersionRefused", why);
            write_status_with(kcp, ctx, existing, conds, cond).await?;
            return Ok(None);
        }
    };
    Ok(Some(target))
}

/// `VersionUpgrade` once the desired version is applied: rolling out until Kamaji reports it Ready.
fn rollout_condition(existing: Option<&Value>, v: &str) -> Cond {
    let reported = existing.map(|t| {
        let r = &t["status"]["kubernetesResources"]["version"];
        (
            r["version"].as_str().unwrap_or_default().to_string(),
            r["status"].as_str().unwrap_or_default().to_string(),
        )
    });
    match reported {
        Some((rv, rs)) if !rv.is_empty() && (rv != v || rs != "Ready") => {
            yes("VersionUpgrade", "RollingOut")
                .with_message(format!("Kamaji is rolling out {v} (it reports {rv}, {rs})"))
        }
        _ => no("VersionUpgrade", "UpToDate", ""),
    }
}

/// Builds the TenantControlPlane for `target` and applies it server-side; returns it as applied.
async fn apply_tcp(
    kcp: &KamajiControlPlane,
    ctx: &KcpCtx,
    place: &TcpPlace,
    cluster: &Value,
    target: &str,
    existing: Option<Value>,
    conds: &mut Vec<Cond>,
) -> Result<Option<Value>, Error> {
    let existing = existing.as_ref();
    let spec = match tcp_spec(kcp, ctx, cluster, target) {
        Ok(s) => s,
        Err(c) => {
            write_status_with(kcp, ctx, existing, conds, c).await?;
            return Ok(None);
        }
    };
    let body = tcp_body(kcp, ctx, place, spec);
    let hash = super::json_hash(&body);
    if let Some(t) = existing
        && unchanged_since_applied(&ctx.written(kcp), hash, &body, t)
    {
        conds.push(yes("TenantControlPlaneCreated", "Succeeded"));
        return Ok(Some(t.clone()));
    }
    let pp = PatchParams::apply(MANAGER).force();
    match place
        .api
        .patch(&place.name, &pp, &Patch::Apply(&body))
        .await
    {
        Ok(t) => {
            conds.push(yes("TenantControlPlaneCreated", "Succeeded"));
            if let (Some(uid), Some(g)) = (t.metadata.uid.clone(), t.metadata.generation) {
                ctx.set_written(kcp, |w| w.tcp = Some((hash, uid, g)));
            }
            Ok(Some(serde_json::to_value(&t).unwrap_or(Value::Null)))
        }
        Err(e) => {
            let cond = no("TenantControlPlaneCreated", "Failed", e.to_string());
            write_status_with(kcp, ctx, existing, conds, cond).await?;
            Err(e.into())
        }
    }
}

/// Whether applying `body` (hashed `hash`) to the TenantControlPlane `tcp` would change nothing:
/// the same body was applied last, the TCP's spec has not changed since (same uid and
/// generation), and it still carries the body's labels, annotations and ownerReference, which
/// do not move the generation. After a restart nothing is remembered, and the first reconcile
/// of each KCP applies.
fn unchanged_since_applied(w: &super::Written, hash: u64, body: &Value, tcp: &Value) -> bool {
    let Some((h, uid, generation)) = &w.tcp else {
        return false;
    };
    let meta = &tcp["metadata"];
    if *h != hash || meta["uid"] != *uid.as_str() || meta["generation"] != *generation {
        return false;
    }
    let maps_kept = ["labels", "annotations"].iter().all(|k| {
        body["metadata"][k]
            .as_object()
            .into_iter()
            .flatten()
            .all(|(key, v)| meta[k][key] == *v)
    });
    let owners_kept = body["metadata"]["ownerReferences"]
        .as_array()
        .into_iter()
        .flatten()
        .all(|o| {
            meta["ownerReferences"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|x| x["uid"] == o["uid"] && x["controller"] == o["controller"])
        });
    maps_kept && owners_kept
}

/// The TenantControlPlane `spec`, fitted to the installed CRD, or the condition saying why
/// there is none.
fn tcp_spec(
    kcp: &KamajiControlPlane,
    ctx: &KcpCtx,
    cluster: &Value,
    target: &str,
) -> Result<Value, Cond> {
    let net = ClusterNetwork::from_cluster(cluster);
    let spec = tcp::build_spec(&kcp.spec, &net, target)
        .map_err(|e| no("TenantControlPlaneCreated", "InvalidSpec", e.to_string()))?;
    match tcp::fit_to_schema(&spec, &ctx.disc.tcp_spec_schema) {
        Fit::Ok(s) => Ok(s),
        Fit::Unsupported(fields) => Err(no(
            "TenantControlPlaneCreated",
            "UnsupportedByInstalledKamaji",
            format!(
                "the installed TenantControlPlane CRD cannot hold: {}; upgrade Kamaji or remove these settings from the KamajiControlPlane/Cluster",
                fields.join(", ")
            ),
        )),
    }
}

/// The applied TenantControlPlane: the KCP's labels and annotations, and (when local) a
/// controller ownerReference to the KCP.
fn tcp_body(kcp: &KamajiControlPlane, ctx: &KcpCtx, place: &TcpPlace, spec: Value) -> Value {
    // Empty maps are left out: an empty map in an apply changes the object every time.
    let mut meta = json!({"name": place.name, "namespace": place.ns});
    if !kcp.labels().is_empty() {
        meta["labels"] = json!(kcp.labels());
    }
    let annotations = tcp::tcp_annotations(kcp.annotations());
    if !annotations.is_empty() {
        meta["annotations"] = json!(annotations);
    }
    if !place.remote
        && let Some(oref) = super::owner_ref(kcp)
    {
        meta["ownerReferences"] = json!([oref]);
    }
    json!({
        "apiVersion": ctx.disc.tcp.api_version,
        "kind": "TenantControlPlane",
        "metadata": meta,
        "spec": spec,
    })
}

/// The endpoint Kamaji reports, written to the KCP's `spec.controlPlaneEndpoint`.
async fn endpoint_step(
    kcp: &KamajiControlPlane,
    ctx: &KcpCtx,
    tcp: &Value,
    observed: &ObservedTcp,
    conds: &mut Vec<Cond>,
) -> Result<Option<Endpoint>, Error> {
    let status_ep = tcp["status"]["controlPlaneEndpoint"]
        .as_str()
        .unwrap_or_default();
    let Some(ep) = endpoint::derive(status_ep, kcp.spec.fields.network.as_deref()) else {
        let why =
            "waiting for Kamaji to report the TenantControlPlane's status.controlPlaneEndpoint";
        let cond = no("TenantControlPlaneAddressReady", "WaitingForKamaji", why);
        write_status_obs_with(kcp, ctx, observed, conds, cond).await?;
        return Ok(None);
    };
    conds.push(yes("TenantControlPlaneAddressReady", "Succeeded"));
    patch_endpoint(kcp, ctx, &ep).await?;
    conds.push(yes("ControlPlaneEndpointPatched", "Succeeded"));
    Ok(Some(ep))
}

/// Puts the Cluster back on the control plane's endpoint when Cluster API copied BYOH's
/// default port into it ([`crate::infra::byoh_default_port_copied`]), with a Warning Event.
async fn repair_cluster_endpoint(
    kcp: &KamajiControlPlane,
    ctx: &KcpCtx,
    cluster: &DynamicObject,
    cluster_v: &Value,
    ep: &Endpoint,
) -> Result<(), Error> {
    if !crate::infra::byoh_default_port_copied(cluster_v, ep) {
        return Ok(());
    }
    let api: Api<DynamicObject> =
        Api::namespaced_with(ctx.base.client.clone(), &kcp_ns(kcp), &ctx.disc.cluster);
    // Guarded by the resourceVersion read: a Cluster changed since is looked at again.
    let body = json!({
        "metadata": {"resourceVersion": cluster.resource_version()},
        "spec": {"controlPlaneEndpoint": {"host": ep.host, "port": ep.port}},
    });
    api.patch(
        &cluster.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&body),
    )
    .await?;
    let note = format!(
        "Cluster {}'s spec.controlPlaneEndpoint was {}:{} (BYOH's default port, copied from the ByoCluster before it was corrected); set to {ep}",
        cluster.name_any(),
        ep.host,
        crate::infra::BYOH_DEFAULT_PORT
    );
    event(
        ctx,
        kcp,
        EventType::Warning,
        "ControlPlaneEndpointRepaired",
        &note,
    )
    .await;
    Ok(())
}

/// Writes `spec.controlPlaneEndpoint` only when it differs, and not again while the
/// KamajiControlPlane read is older than this process's write of the same endpoint.
async fn patch_endpoint(
    kcp: &KamajiControlPlane,
    ctx: &KcpCtx,
    ep: &Endpoint,
) -> Result<(), Error> {
    let cur = kcp.spec.control_plane_endpoint.as_ref();
    if cur.is_some_and(|c| c.host == ep.host && c.port == ep.port) {
        return Ok(());
    }
    let generation = kcp.meta().generation.unwrap_or(0);
    let done = super::hash_of((kcp.uid(), ep.to_string()));
    if ctx
        .written(kcp)
        .endpoint
        .is_some_and(|(d, g)| d == done && generation < g)
    {
        return Ok(());
    }
    let body = json!({"spec": {"controlPlaneEndpoint": {"host": ep.host, "port": ep.port}}});
    let patched = patch_kcp(kcp, ctx, &body).await?;
    if let Some(g) = patched.meta().generation {
        ctx.set_written(kcp, |w| w.endpoint = Some((done, g)));
    }
    Ok(())
}

/// `KubeadmResourcesCreated` from publishing the Secrets: waiting for Kamaji is no failure.
async fn secrets_condition(
    kcp: &KamajiControlPlane,
    ctx: &KcpCtx,
    published: Result<(), Error>,
    observed: &ObservedTcp,
    conds: &mut Vec<Cond>,
) -> Result<(), Error> {
    match published {
        Ok(()) => conds.push(yes("KubeadmResourcesCreated", "Succeeded")),
        Err(Error::Waiting(m)) => conds.push(no("KubeadmResourcesCreated", "WaitingForKamaji", m)),
        Err(e) => {
            let cond = no("KubeadmResourcesCreated", "Failed", e.to_string());
            write_status_obs_with(kcp, ctx, observed, conds, cond).await?;
            return Err(e);
        }
    }
    Ok(())
}

/// Initialized once Ready for the first time; Ready (and Available) needs the version status
/// `Ready` or `Upgrading` and at least one available replica.
fn readiness_conditions(tcp: &Value, observed: &ObservedTcp, conds: &mut Vec<Cond>) {
    if observed.initialized {
        conds.push(yes("KamajiControlPlaneIsInitialized", "Succeeded"));
    } else {
        conds.push(no(
            "KamajiControlPlaneIsInitialized",
            "Pending",
            "waiting for the TenantControlPlane to be Ready for the first time",
        ));
    }
    if observed.ready {
        conds.push(yes("KamajiControlPlaneIsReady", "Succeeded"));
        conds.push(yes("Available", "Available"));
    } else {
        let why = format!(
            "TenantControlPlane version status is {:?} with {} available replica(s); ready needs Ready or Upgrading and at least one available replica",
            tcp["status"]["kubernetesResources"]["version"]["status"]
                .as_str()
                .unwrap_or("unknown"),
            observed.available_replicas.unwrap_or(0)
        );
        conds.push(no("KamajiControlPlaneIsReady", "Pending", why.clone()));
        conds.push(no("Available", "NotAvailable", why));
    }
}
