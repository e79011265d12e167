//! The FleetUpgrade controller: picks the Clusters once, then creates their ClusterUpgrades
//! wave by wave (`kcore::ops::fleet`), watching the ClusterUpgrades it owns. The first failed
//! member stops the waves.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::StreamExt;
use kcore::ops::fleet::{self, FLEET_LABEL, FleetDecision};
use kcore::ops::{ClusterUpgrade, FleetUpgrade, FleetUpgradeStatus, phase};
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use serde_json::json;

use super::{Ctx, world};
use crate::Error;
use crate::controller::{Config, MANAGER};

/// Runs the FleetUpgrade controller until shutdown.
pub(super) async fn run(ctx: Arc<Ctx>, cfg: Config) {
    let (fleets, upgrades): (Api<FleetUpgrade>, Api<ClusterUpgrade>) = match &cfg.namespace {
        Some(n) => (
            Api::namespaced(ctx.client.clone(), n),
            Api::namespaced(ctx.client.clone(), n),
        ),
        None => (Api::all(ctx.client.clone()), Api::all(ctx.client.clone())),
    };
    let wc = watcher::Config::default().any_semantic();
    Controller::new(fleets, wc.clone())
        .owns(upgrades, wc)
        .shutdown_on_signal()
        .run(reconcile, error_policy, ctx)
        .for_each(|r| async move {
            if let Err(e) = r {
                tracing::debug!("fleet reconcile: {e}");
            }
        })
        .await;
}

fn error_policy(f: Arc<FleetUpgrade>, err: &Error, ctx: Arc<Ctx>) -> Action {
    ctx.metrics.reconcile_errors.fetch_add(1, Ordering::Relaxed);
    tracing::warn!(fleet = %f.name_any(), "fleet reconcile failed (retry in 10s): {err}");
    Action::requeue(Duration::from_secs(10))
}

async fn write(ctx: &Ctx, f: &FleetUpgrade, st: &FleetUpgradeStatus) -> Result<(), Error> {
    if f.status.as_ref() == Some(st) {
        return Ok(());
    }
    let api: Api<FleetUpgrade> =
        Api::namespaced(ctx.client.clone(), &f.namespace().unwrap_or_default());
    let body = json!({
        "apiVersion": format!("{}/{}", kcore::ops::GROUP, kcore::ops::VERSION),
        "kind": "FleetUpgrade",
        "status": st,
    });
    api.patch_status(
        &f.name_any(),
        &PatchParams::apply(MANAGER).force(),
        &Patch::Apply(body),
    )
    .await?;
    Ok(())
}

/// The Clusters the selector picks, in wave order.
async fn pick(ctx: &Ctx, f: &FleetUpgrade) -> Result<FleetUpgradeStatus, Error> {
    let ns = f.namespace().unwrap_or_default();
    let clusters: Api<DynamicObject> = Api::namespaced_with(
        ctx.client.clone(),
        &ns,
        &world::ar("cluster.x-k8s.io", &ctx.capi_version, "Cluster", "clusters"),
    );
    let names: Vec<String> = clusters
        .list_metadata(&ListParams::default().labels(&f.spec.selector))
        .await?
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect();
    let mut st = FleetUpgradeStatus {
        observed_generation: f.metadata.generation,
        phase: Some(phase::RUNNING.into()),
        clusters: fleet::waves(names, f.spec.canary, f.spec.max_parallel.unwrap_or(1)),
        ..Default::default()
    };
    if st.clusters.is_empty() {
        st.phase = Some(phase::FAILED.into());
        st.message = Some(format!(
            "the selector {:?} picks no Cluster in namespace {ns}",
            f.spec.selector
        ));
    }
    Ok(st)
}

/// Reads each started member's ClusterUpgrade into its phase.
async fn refresh(ctx: &Ctx, f: &FleetUpgrade, st: &mut FleetUpgradeStatus) -> Result<(), Error> {
    let api: Api<ClusterUpgrade> =
        Api::namespaced(ctx.client.clone(), &f.namespace().unwrap_or_default());
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
async fn start(ctx: &Ctx, f: &FleetUpgrade, cluster: &str) -> Result<Result<(), String>, Error> {
    let ns = f.namespace().unwrap_or_default();
    let api: Api<ClusterUpgrade> = Api::namespaced(ctx.client.clone(), &ns);
    let spec = fleet::member_spec(&f.spec, cluster);
    let owner = f.controller_owner_ref(&());
    match api.get_opt(cluster).await? {
        None => {
            let mut cu = ClusterUpgrade::new(cluster, spec);
            cu.metadata.namespace = Some(ns.clone());
            cu.metadata.labels = Some([(FLEET_LABEL.to_string(), f.name_any())].into());
            cu.metadata.owner_references = owner.map(|o| vec![o]);
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

async fn reconcile(f: Arc<FleetUpgrade>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    ctx.metrics.reconciles.fetch_add(1, Ordering::Relaxed);
    // Read afresh, as the ClusterUpgrade controller does: the cache may miss our last write.
    let api: Api<FleetUpgrade> =
        Api::namespaced(ctx.client.clone(), &f.namespace().unwrap_or_default());
    let Some(f) = api.get_opt(&f.name_any()).await? else {
        return Ok(Action::await_change());
    };
    let mut st = match f.status.clone() {
        Some(s) if !s.clusters.is_empty() || s.phase.is_some() => s,
        _ => pick(&ctx, &f).await?,
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
