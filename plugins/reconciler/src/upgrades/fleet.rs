//! The FleetUpgrade controller: picks the Clusters once, then creates their ClusterUpgrades
//! wave by wave (`kcore::ops::fleet`), watching the ClusterUpgrades it owns. The first failed
//! member stops the waves.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use kcore::ops::fleet::{self, FLEET_LABEL, FleetDecision};
use kcore::ops::{ClusterUpgrade, FleetUpgrade, FleetUpgradeStatus, phase, reason};
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use serde_json::json;

use super::{UpgradeCtx, input, world};
use crate::Error;
use crate::skeleton::{MANAGER, drive};

/// Runs the FleetUpgrade controller of namespace `ns` (all when `None`) until shutdown.
pub(super) async fn run(ctx: Arc<UpgradeCtx>, ns: Option<String>) {
    let (fleets, upgrades): (Api<FleetUpgrade>, Api<ClusterUpgrade>) = match &ns {
        Some(n) => (
            Api::namespaced(ctx.base.client.clone(), n),
            Api::namespaced(ctx.base.client.clone(), n),
        ),
        None => (
            Api::all(ctx.base.client.clone()),
            Api::all(ctx.base.client.clone()),
        ),
    };
    let wc = watcher::Config::default().any_semantic();
    let controller = Controller::new(fleets, wc.clone()).owns(upgrades, wc);
    drive(controller, reconcile, error_policy, ctx, "fleet").await;
}

/// Failed reconciles run again after 10 s (`Retries::every`).
fn error_policy(f: Arc<FleetUpgrade>, err: &Error, ctx: Arc<UpgradeCtx>) -> Action {
    ctx.fleet_retries
        .failed(&ctx.base, "fleet", f.as_ref(), err)
}

/// Writes a FleetUpgrade's status ([`super::write_status`]).
async fn write(ctx: &UpgradeCtx, f: &FleetUpgrade, st: &FleetUpgradeStatus) -> Result<(), Error> {
    super::write_status(ctx, f, f.status.as_ref(), st).await
}

fn clusters_api(ctx: &UpgradeCtx, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(
        ctx.base.client.clone(),
        ns,
        &world::ar(
            kcore::groups::CAPI_GROUP,
            ctx.capi_version,
            "Cluster",
            "clusters",
        ),
    )
}

/// The Clusters the selector picks, in wave order; `Err((reason, message))` for a selector
/// the fleet cannot act on (malformed, or picking nothing).
async fn pick(
    ctx: &UpgradeCtx,
    f: &FleetUpgrade,
) -> Result<Result<FleetUpgradeStatus, (&'static str, String)>, Error> {
    let ns = f.namespace().unwrap_or_default();
    if let Err(m) = fleet::check_selector(&f.spec.selector) {
        return Ok(Err((reason::INVALID_SELECTOR, m)));
    }
    let lp = ListParams::default().labels(&f.spec.selector);
    let names: Vec<String> = match clusters_api(ctx, &ns).list_metadata(&lp).await {
        Ok(l) => l
            .items
            .into_iter()
            .filter_map(|c| c.metadata.name)
            .collect(),
        // The API server's grammar is the last word: a selector it refuses is input too.
        Err(kube::Error::Api(e)) if e.code == 400 => {
            let m = format!("spec.selector: the API server refuses it: {}", e.message);
            return Ok(Err((reason::INVALID_SELECTOR, m)));
        }
        Err(e) => return Err(e.into()),
    };
    if names.is_empty() {
        let m = format!(
            "the selector {:?} picks no Cluster in namespace {ns}; label the Clusters or edit spec.selector",
            f.spec.selector
        );
        return Ok(Err((reason::NO_CLUSTER_SELECTED, m)));
    }
    Ok(Ok(FleetUpgradeStatus {
        observed_generation: f.metadata.generation,
        phase: Some(phase::RUNNING.into()),
        clusters: fleet::waves(names, f.spec.canary, f.spec.max_parallel.unwrap_or(1)),
        ..Default::default()
    }))
}

/// Reports a FleetUpgrade that cannot start: its status (Failed for this generation, so a
/// fixed spec picks again) and, the first time, a Warning Event.
async fn cannot_act(
    ctx: &UpgradeCtx,
    f: &FleetUpgrade,
    why: &str,
    message: &str,
) -> Result<(), Error> {
    let generation = f.metadata.generation;
    let news = !f
        .status
        .as_ref()
        .is_some_and(|s| s.reports(generation, why));
    let now = super::now();
    let mut st = FleetUpgradeStatus::cannot_act(generation, why, message, &now);
    // Keep the transition time of a condition already reported.
    if let Some(old) = f.status.as_ref().filter(|_| !news) {
        st.conditions.clone_from(&old.conditions);
    }
    write(ctx, f, &st).await?;
    if news {
        input::warn(ctx, &input::reference(f), why, message).await;
    }
    Ok(())
}

/// Reads each started member's ClusterUpgrade into its phase.
async fn refresh(
    ctx: &UpgradeCtx,
    f: &FleetUpgrade,
    st: &mut FleetUpgradeStatus,
) -> Result<(), Error> {
    let api: Api<ClusterUpgrade> =
        Api::namespaced(ctx.base.client.clone(), &f.namespace().unwrap_or_default());
    for m in st.clusters.iter_mut().filter(|m| m.phase != "Pending") {
        if m.phase == phase::SUCCEEDED || m.phase == phase::FAILED {
            continue;
        }
        let Some(cu) = api.get_opt(&m.name).await? else {
            m.phase = phase::FAILED.into();
            m.message = "its ClusterUpgrade was deleted".into();
            continue;
        };
        let Some(s) = cu.status.as_ref() else {
            continue;
        };
        if s.observed_generation != cu.metadata.generation {
            continue;
        }
        match s.phase.as_deref() {
            Some(p @ (phase::SUCCEEDED | phase::FAILED | phase::CANCELLED)) => {
                m.phase = p.to_string();
                m.message = s.message.clone().unwrap_or_default();
            }
            _ => {
                m.phase = phase::RUNNING.into();
                m.message = s
                    .progress
                    .clone()
                    .map(|p| format!("step {p}"))
                    .unwrap_or_default();
            }
        }
    }
    Ok(())
}

/// Creates the member's ClusterUpgrade, owned by the fleet, or renews a finished one. A
/// ClusterUpgrade under way that is not the fleet's fails the member.
async fn start(
    ctx: &UpgradeCtx,
    f: &FleetUpgrade,
    cluster: &str,
) -> Result<Result<(), String>, Error> {
    let ns = f.namespace().unwrap_or_default();
    let api: Api<ClusterUpgrade> = Api::namespaced(ctx.base.client.clone(), &ns);
    let spec = fleet::member_spec(&f.spec, cluster);
    let owner = f.controller_owner_ref(&());
    match api.get_opt(cluster).await? {
        None => {
            // Owned by the fleet (its controller) and by the Cluster, so that neither going
            // leaves it behind once the other is gone too (the garbage collector deletes an
            // object when its last owner goes).
            let by_cluster = match clusters_api(ctx, &ns).get_opt(cluster).await? {
                Some(c) => serde_json::to_value(c)
                    .ok()
                    .and_then(|c| input::cluster_owner(&c))
                    .and_then(|o| serde_json::from_value(o).ok()),
                None => return Ok(Err(format!("cluster {cluster} was deleted"))),
            };
            let mut cu = ClusterUpgrade::new(cluster, spec);
            cu.metadata.namespace = Some(ns.clone());
            cu.metadata.labels = Some([(FLEET_LABEL.to_string(), f.name_any())].into());
            cu.metadata.owner_references = Some(owner.into_iter().chain(by_cluster).collect());
            let pp = PostParams {
                field_manager: Some(MANAGER.into()),
                ..Default::default()
            };
            api.create(&pp, &cu).await?;
            Ok(Ok(()))
        }
        Some(cu) => {
            let finished = cu.status.as_ref().is_some_and(|s| {
                s.observed_generation == cu.metadata.generation
                    && s.phase.as_deref().is_some_and(phase::is_terminal)
            });
            // Ours already (a reconcile that read the fleet before its last status write):
            // started, nothing to do.
            let ours = cu.labels().get(FLEET_LABEL) == Some(&f.name_any())
                && cu.spec.version == f.spec.version;
            if ours && !finished {
                return Ok(Ok(()));
            }
            if !finished {
                return Ok(Err(format!(
                    "cluster {cluster} already has an upgrade under way (to {})",
                    cu.spec.version
                )));
            }
            let body = json!({
                "metadata": {
                    "resourceVersion": cu.metadata.resource_version,
                    "labels": {FLEET_LABEL: f.name_any()},
                },
                "spec": spec,
            });
            api.patch(cluster, &PatchParams::default(), &Patch::Merge(body))
                .await?;
            Ok(Ok(()))
        }
    }
}

async fn reconcile(f: Arc<FleetUpgrade>, ctx: Arc<UpgradeCtx>) -> Result<Action, Error> {
    ctx.base.metrics.reconciles.fetch_add(1, Ordering::Relaxed);
    let Some(f) = super::read_afresh(&ctx, f.as_ref()).await? else {
        return Ok(Action::await_change());
    };
    let mut st = match f.status.clone() {
        Some(s) if !s.needs_pick(f.metadata.generation) => s,
        _ => match pick(&ctx, &f).await? {
            Ok(st) => st,
            Err((why, message)) => {
                cannot_act(&ctx, &f, why, &message).await?;
                return Ok(Action::await_change());
            }
        },
    };
    if st.phase.as_deref().is_some_and(phase::is_terminal) {
        write(&ctx, &f, &st).await?;
        return Ok(Action::await_change());
    }
    refresh(&ctx, &f, &mut st).await?;
    match fleet::decide(&st, f.spec.paused) {
        FleetDecision::Start(names) => {
            st.phase = Some(phase::RUNNING.into());
            for n in names {
                let m = match start(&ctx, &f, &n).await? {
                    Ok(()) => (phase::RUNNING, String::new()),
                    Err(why) => (phase::FAILED, why),
                };
                if let Some(member) = st.clusters.iter_mut().find(|x| x.name == n) {
                    member.phase = m.0.into();
                    member.message = m.1;
                }
            }
            st.message = Some("upgrading".into());
        }
        FleetDecision::Wait => st.phase = Some(phase::RUNNING.into()),
        FleetDecision::Paused => {
            st.phase = Some(phase::PAUSED.into());
            st.message =
                Some("paused: no further cluster starts until spec.paused is false".into());
        }
        FleetDecision::Failed { cluster, message } => {
            st.phase = Some(phase::FAILED.into());
            st.message = Some(format!(
                "cluster {cluster} failed: {message}; no further cluster starts"
            ));
            st.failed_cluster = Some(cluster);
        }
        FleetDecision::Succeeded => {
            st.phase = Some(phase::SUCCEEDED.into());
            st.message = Some(format!("every cluster runs {}", f.spec.version));
        }
    }
    st.observed_generation = f.metadata.generation;
    st.update_progress();
    write(&ctx, &f, &st).await?;
    Ok(Action::await_change())
}
