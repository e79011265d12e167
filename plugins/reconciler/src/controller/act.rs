//! Act: the API writes a [`KcpDecision`] asks for, each skipped when this process knows it would
//! change nothing, and what they did, for the one status write that follows ([`Done`]).

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::runtime::events::EventType;
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};

use super::infra_cluster::infra_step;
use super::secrets::publish_secrets;
use super::status::{event, initialized_before};
use super::{Cond, KcpCtx, MANAGER, TcpPlace, kcp_ns, patch_kcp};
use crate::Error;
use crate::api::v1alpha2::KamajiControlPlane;
use crate::endpoint::Endpoint;
use kcore::kamaji::reconcile::{
    self, Apply, ECR_FINALIZER, Finalize, KcpDecision, Note, SecretsPublished, TcpState, Then,
};

/// What the writes leave for the status: the TenantControlPlane's state, the conditions, an
/// Event to publish after it, and how the reconcile ends once it is written (an error backs off).
pub(super) struct Done {
    pub(super) state: TcpState,
    pub(super) conds: Vec<Cond>,
    pub(super) event: Option<Note>,
    pub(super) end: Result<(), Error>,
}

/// Carries out `d`. `Ok(None)`: no status to write (deleted, or nothing to do); `Err`: a write
/// failed before there was anything to report (the reconcile backs off).
pub(super) async fn act(
    kcp: &KamajiControlPlane,
    ctx: &KcpCtx,
    d: KcpDecision<TcpPlace, Error>,
) -> Result<Option<Done>, Error> {
    if d.add_finalizer {
        add_finalizer(kcp, ctx).await?;
    }
    let before = initialized_before(kcp, ctx.disc.contract);
    let done = |state, conds, event, end| {
        Some(Done {
            state,
            conds,
            event,
            end,
        })
    };
    Ok(match d.then {
        Then::Finalize(f) => {
            ctx.forget_written(kcp);
            finalize(kcp, ctx, f).await?;
            None
        }
        Then::Nothing => None,
        Then::Wait { conds, tcp, event } => {
            let state = TcpState::of(tcp.as_ref(), kcp, before);
            done(state, conds, event, Ok(()))
        }
        Then::Fail { conds, error } => {
            done(TcpState::of(None, kcp, before), conds, None, Err(error))
        }
        Then::Apply(a) => Some(apply(kcp, ctx, a, before).await?),
    })
}

/// Applies the TenantControlPlane, then publishes what it reports: the endpoint on the KCP, the
/// infrastructure cluster (and the Cluster's endpoint, when BYOH's default port was copied
/// there), the Secrets Cluster API reads; readiness for the status.
async fn apply(
    kcp: &KamajiControlPlane,
    ctx: &KcpCtx,
    a: Apply<TcpPlace>,
    before: bool,
) -> Result<Done, Error> {
    let Apply {
        mut conds,
        body,
        place,
        cluster,
        tcp: existing,
    } = a;
    let tcp = match apply_tcp(kcp, ctx, &place, &body, existing.as_ref()).await {
        Ok(t) => t,
        Err(e) => {
            conds.push(reconcile::tcp_created(Some(e.to_string())));
            return Ok(Done {
                state: TcpState::of(existing.as_ref(), kcp, before),
                conds,
                event: None,
                end: Err(e.into()),
            });
        }
    };
    conds.push(reconcile::tcp_created(None));
    let published = reconcile::published(kcp, &tcp, before);
    let wait = |conds| Done {
        state: published.state.clone(),
        conds,
        event: None,
        end: Ok(()),
    };
    conds.push(published.address.clone());
    let Some(ep) = &published.endpoint else {
        return Ok(wait(conds));
    };
    patch_endpoint(kcp, ctx, ep).await?;
    conds.push(Cond::yes("ControlPlaneEndpointPatched", "Succeeded"));
    if !ctx.cfg.skip_infra_patch {
        conds.push(infra_step(kcp, ctx, &cluster, &kcp_ns(kcp), ep).await?);
        repair_cluster_endpoint(kcp, ctx, &cluster, ep).await?;
    }
    let cluster_name = cluster["metadata"]["name"].as_str().unwrap_or_default();
    let (secrets, end) = match publish_secrets(kcp, ctx, cluster_name, &tcp, &place).await {
        Ok(()) => (SecretsPublished::Done, Ok(())),
        Err(Error::Waiting(m)) => (SecretsPublished::Waiting(m), Ok(())),
        Err(e) => (SecretsPublished::Failed(e.to_string()), Err(e)),
    };
    conds.push(secrets.condition());
    if end.is_ok() {
        conds.extend(published.readiness.iter().cloned());
    }
    Ok(Done { end, ..wait(conds) })
}

/// Server-side applies `body` unless it would change nothing; returns the TenantControlPlane
/// as applied (as read when skipped).
async fn apply_tcp(
    kcp: &KamajiControlPlane,
    ctx: &KcpCtx,
    place: &TcpPlace,
    body: &Value,
    existing: Option<&Value>,
) -> Result<Value, kube::Error> {
    let hash = super::json_hash(body);
    if let Some(t) = existing
        && unchanged_since_applied(&ctx.written(kcp), hash, body, t)
    {
        return Ok(t.clone());
    }
    let pp = PatchParams::apply(MANAGER).force();
    let t = place
        .api
        .patch(&place.name, &pp, &Patch::Apply(body))
        .await?;
    if let (Some(uid), Some(g)) = (t.metadata.uid.clone(), t.metadata.generation) {
        ctx.set_written(kcp, |w| w.tcp = Some((hash, uid, g)));
    }
    Ok(serde_json::to_value(&t).unwrap_or(Value::Null))
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

/// Puts the Cluster back on the control plane's endpoint when Cluster API copied BYOH's
/// default port into it ([`crate::infra::byoh_default_port_copied`]), with a Warning Event.
async fn repair_cluster_endpoint(
    kcp: &KamajiControlPlane,
    ctx: &KcpCtx,
    cluster: &Value,
    ep: &Endpoint,
) -> Result<(), Error> {
    if !crate::infra::byoh_default_port_copied(cluster, ep) {
        return Ok(());
    }
    let api: Api<DynamicObject> =
        Api::namespaced_with(ctx.base.client.clone(), &kcp_ns(kcp), &ctx.disc.cluster);
    let name = cluster["metadata"]["name"].as_str().unwrap_or_default();
    // Guarded by the resourceVersion read: a Cluster changed since is looked at again.
    let body = json!({
        "metadata": {"resourceVersion": cluster["metadata"]["resourceVersion"]},
        "spec": {"controlPlaneEndpoint": {"host": ep.host, "port": ep.port}},
    });
    api.patch(name, &PatchParams::default(), &Patch::Merge(&body))
        .await?;
    let note = format!(
        "Cluster {name}'s spec.controlPlaneEndpoint was {}:{} (BYOH's default port, copied from the ByoCluster before it was corrected); set to {ep}",
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

/// Adds the external-reference finalizer (guarded by the resourceVersion read).
async fn add_finalizer(kcp: &KamajiControlPlane, ctx: &KcpCtx) -> Result<(), Error> {
    let mut f = kcp.finalizers().to_vec();
    f.push(ECR_FINALIZER.into());
    let body = json!({"metadata": {"finalizers": f, "resourceVersion": kcp.resource_version()}});
    patch_kcp(kcp, ctx, &body).await?;
    Ok(())
}

/// Deletion: local TCPs and Secrets go with ownerReference garbage collection; a remote TCP is
/// deleted here. The external-reference finalizer is always released (also on NotFound).
async fn finalize(
    kcp: &KamajiControlPlane,
    ctx: &KcpCtx,
    f: Finalize<TcpPlace, Error>,
) -> Result<(), Error> {
    match f {
        Finalize::NotOurs => return Ok(()),
        Finalize::Release => {}
        Finalize::DeleteRemote(place) => {
            match place.api.delete(&place.name, &Default::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(e) => return Err(e.into()),
            }
        }
        // The kubeconfig Secret is gone: nothing can be reached any more; release.
        Finalize::ReleaseUnreachable(e) => {
            tracing::warn!(kcp = %kcp.name_any(), "remote cluster unreachable, releasing the finalizer: {e}")
        }
    }
    let f: Vec<String> = kcp
        .finalizers()
        .iter()
        .filter(|f| *f != ECR_FINALIZER)
        .cloned()
        .collect();
    let body = json!({"metadata": {"finalizers": f, "resourceVersion": kcp.resource_version()}});
    match patch_kcp(kcp, ctx, &body).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}
