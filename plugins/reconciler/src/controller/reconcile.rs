//! One reconcile of a KamajiControlPlane, in one direction: observe (what exists, as typed
//! facts), decide (with no I/O, in `kcore::kamaji::reconcile`), act (the API writes), then one
//! status write from what was found and what the writes did. A reconcile that cannot go on
//! decides so; the status says why and the reconcile waits for a change of a watched object. A
//! failed one backs off ([`error_policy`]).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use kube::runtime::controller::Action;
use kube::runtime::events::EventType;

use super::KcpCtx;
use super::act::act;
use super::observe::observe;
use super::status::{event, write_status};
use super::stored::StoredKcp;
use crate::Error;
use crate::api::v1alpha2::KamajiControlPlane;
use kcore::kamaji::reconcile::{self, Setup};

/// Failed reconciles back off (`Retries::doubling`).
pub(super) fn error_policy(kcp: Arc<StoredKcp>, err: &Error, ctx: Arc<KcpCtx>) -> Action {
    ctx.retries
        .failed(&ctx.base, "KamajiControlPlane", kcp.as_ref(), err)
}

pub(super) async fn reconcile(stored: Arc<StoredKcp>, ctx: Arc<KcpCtx>) -> Result<Action, Error> {
    let kcp = stored.parse()?;
    let r = reconcile_inner(&kcp, &ctx).await;
    // Counted once done, so that a count read after it includes this reconcile's requests.
    ctx.base.metrics.reconciles.fetch_add(1, Ordering::Relaxed);
    if r.is_ok() {
        ctx.retries.succeeded(stored.as_ref());
    }
    r
}

/// Observe, decide, act, write the status.
async fn reconcile_inner(kcp: &KamajiControlPlane, ctx: &KcpCtx) -> Result<Action, Error> {
    let found = observe(kcp, ctx).await?;
    let setup = Setup {
        external_cluster_reference: ctx.cfg.external_cluster_reference,
        tcp_api_version: &ctx.disc.tcp.api_version,
        tcp_spec_schema: &ctx.disc.tcp_spec_schema,
    };
    let decision = reconcile::decide(kcp, found, &setup);
    // A TenantControlPlane in another cluster is not watched: looked at again after a while.
    let next = decision
        .requeue
        .map_or_else(Action::await_change, Action::requeue);
    let Some(done) = act(kcp, ctx, decision).await? else {
        return Ok(next);
    };
    write_status(kcp, ctx, &done.state, &done.conds).await?;
    if let Some(n) = done.event {
        event(ctx, kcp, EventType::Warning, n.reason, n.message).await;
    }
    done.end.map(|()| next)
}
