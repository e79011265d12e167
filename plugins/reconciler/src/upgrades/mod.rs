//! The ClusterUpgrade controller: carries out `ops.capi-kamaji.io` ClusterUpgrades, one step at
//! a time, control plane first per minor, from the plan `kubectl capi upgrade --plan` prints.
//!
//! Watch-driven like the KamajiControlPlane controller: the ClusterUpgrades, and as metadata only
//! the Clusters, MachineDeployments and control planes whose status moves as a rollout
//! progresses (each maps to the ClusterUpgrade named after its cluster). No timer polls; idle,
//! it makes no requests. The decisions are pure (`kcore::ops::run`); this module reads, writes
//! the status, then patches.
//!
//! FleetUpgrades (`fleet`) create ClusterUpgrades wave by wave.
//!
//! Runs only where the ClusterUpgrade CRD is served (`kubectl kamaji install` applies it).

mod apply;
mod fleet;
mod input;
mod world;

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kcore::ops::run::{self, Decision};
use kcore::ops::{ClusterUpgrade, ClusterUpgradeStatus, FleetUpgrade, phase, reason};
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::core::PartialObjectMeta;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Client, ResourceExt};

use crate::Error;
use crate::controller::Config;
use crate::metrics::Metrics;
use crate::skeleton::{Base, MANAGER, Retries, discover_contract, drive};

use kcore::labels::CLUSTER_NAME_LABEL;

struct UpgradeCtx {
    base: Base,
    /// `apiVersion`/`group` + kind → resource, resolved once.
    resources: Mutex<HashMap<(String, String), ApiResource>>,
    /// The CAPI core group's version (v1beta2 or v1beta1).
    capi_version: &'static str,
    retries: Retries<ClusterUpgrade>,
    fleet_retries: Retries<FleetUpgrade>,
}

/// Runs until shutdown; returns at once (Ok) when the ClusterUpgrade API is not served.
pub async fn run(client: Client, cfg: Config, metrics: Arc<Metrics>) -> Result<(), Error> {
    if !crate::skeleton::served(&client, kcore::ops::GROUP, "ClusterUpgrade").await {
        tracing::info!(
            "the ClusterUpgrade API ({}) is not served: upgrades are left to the CLI",
            kcore::ops::GROUP
        );
        return Ok(());
    }
    let capi_version = discover_contract(&client).await?.as_str();
    let ctx = Arc::new(UpgradeCtx {
        base: Base::new(client, metrics),
        resources: Mutex::new(HashMap::new()),
        capi_version,
        retries: Retries::doubling(),
        // A fleet's failures are its members' to retry; its own reads are retried evenly.
        fleet_retries: Retries::every(Duration::from_secs(10)),
    });
    // One controller of each kind per watched namespace (or one for all): no watch spans
    // namespaces the reconciler is not granted. They share the context, whose state is keyed
    // by object.
    let mut runs = Vec::new();
    for scope in cfg.scopes() {
        let controller = watches(&ctx, &cfg, scope.as_deref()).await;
        let upgrades = drive(controller, reconcile, error_policy, ctx.clone(), "upgrade");
        let fleets = fleet::run(ctx.clone(), scope);
        runs.push(async move {
            futures::join!(upgrades, fleets);
        });
    }
    futures::future::join_all(runs).await;
    Ok(())
}

fn api_for<K>(client: &Client, ns: Option<&str>, r: &ApiResource) -> Api<K>
where
    K: kube::Resource<Scope = kube::core::DynamicResourceScope, DynamicType = ApiResource>,
{
    match ns {
        Some(n) => Api::namespaced_with(client.clone(), n, r),
        None => Api::all_with(client.clone(), r),
    }
}

/// The ClusterUpgrade of an object's cluster: named after the cluster, in its namespace.
fn upgrade_of(m: &kube::core::ObjectMeta, is_cluster: bool) -> Option<ObjectRef<ClusterUpgrade>> {
    let ns = m.namespace.clone()?;
    let cluster = if is_cluster {
        m.name.clone()
    } else {
        m.labels
            .as_ref()
            .and_then(|l| l.get(CLUSTER_NAME_LABEL).cloned())
            .or_else(|| {
                m.owner_references
                    .iter()
                    .flatten()
                    .find(|o| {
                        o.kind == "Cluster"
                            && kcore::groups::in_group(&o.api_version, kcore::groups::CAPI_GROUP)
                    })
                    .map(|o| o.name.clone())
            })
    }?;
    Some(ObjectRef::new(&cluster).within(&ns))
}

/// The controller and its watches: Clusters, MachineDeployments and every served control-plane
/// kind the planner knows, as metadata.
async fn watches(
    ctx: &Arc<UpgradeCtx>,
    cfg: &Config,
    ns: Option<&str>,
) -> Controller<ClusterUpgrade> {
    let client = &ctx.base.client;
    let primary: Api<ClusterUpgrade> = match ns {
        Some(n) => Api::namespaced(client.clone(), n),
        None => Api::all(client.clone()),
    };
    let wc = watcher::Config::default().any_semantic();
    let mut c = Controller::new(primary, wc.clone()).with_config(
        kube::runtime::controller::Config::default().concurrency(cfg.concurrency.max(1)),
    );
    let v = ctx.capi_version;
    let cluster = world::ar(kcore::groups::CAPI_GROUP, v, "Cluster", "clusters");
    let mds = world::ar(
        kcore::groups::CAPI_GROUP,
        v,
        "MachineDeployment",
        "machinedeployments",
    );
    c = c.watches_with(
        api_for::<PartialObjectMeta<DynamicObject>>(client, ns, &cluster),
        cluster.clone(),
        wc.clone(),
        |o| upgrade_of(&o.metadata, true).into_iter(),
    );
    c = c.watches_with(
        api_for::<PartialObjectMeta<DynamicObject>>(client, ns, &mds),
        mds.clone(),
        wc.clone(),
        |o| upgrade_of(&o.metadata, false).into_iter(),
    );
    if let Ok(g) = kube::discovery::group(client, kcore::groups::CONTROLPLANE_GROUP).await {
        for (res, _) in g.resources_by_stability() {
            if matches!(
                res.kind.as_str(),
                "KubeadmControlPlane" | "KamajiControlPlane"
            ) {
                c = c.watches_with(
                    api_for::<PartialObjectMeta<DynamicObject>>(client, ns, &res),
                    res.clone(),
                    wc.clone(),
                    |o| upgrade_of(&o.metadata, false).into_iter(),
                );
            }
        }
    }
    c
}

/// Failed reconciles back off (`Retries::doubling`).
fn error_policy(cu: Arc<ClusterUpgrade>, err: &Error, ctx: Arc<UpgradeCtx>) -> Action {
    ctx.retries.failed(&ctx.base, "upgrade", cu.as_ref(), err)
}

async fn reconcile(cu: Arc<ClusterUpgrade>, ctx: Arc<UpgradeCtx>) -> Result<Action, Error> {
    ctx.base.metrics.reconciles.fetch_add(1, Ordering::Relaxed);
    let Some(fresh) = read_afresh(&ctx, cu.as_ref()).await? else {
        return Ok(Action::await_change());
    };
    let r = reconcile_inner(&fresh, &ctx).await;
    if r.is_ok() {
        ctx.retries.succeeded(cu.as_ref());
    }
    r
}

fn now() -> String {
    jiff::Timestamp::now()
        .round(jiff::Unit::Second)
        .map(|t| t.to_string())
        .unwrap_or_else(|_| jiff::Timestamp::now().to_string())
}

/// What the upgrade controllers act on: ClusterUpgrades and FleetUpgrades.
trait OpsObject:
    kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
    + Clone
    + serde::de::DeserializeOwned
    + std::fmt::Debug
{
}

impl<K> OpsObject for K where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
{
}

/// The API of `obj`'s kind in its namespace.
fn api_of<K: OpsObject>(ctx: &UpgradeCtx, obj: &K) -> Api<K> {
    Api::namespaced(
        ctx.base.client.clone(),
        &obj.namespace().unwrap_or_default(),
    )
}

/// `obj` read afresh, `None` once it is gone: the watch cache may not hold the status this
/// controller wrote a moment ago, and deciding from an older one would start a step again.
async fn read_afresh<K: OpsObject>(ctx: &UpgradeCtx, obj: &K) -> Result<Option<K>, Error> {
    Ok(api_of(ctx, obj).get_opt(&obj.name_any()).await?)
}

/// Writes `st` as the status of `obj` whose status is `current`, unless it is that already
/// (server-side apply of the whole status: fields it no longer holds go).
async fn write_status<K: OpsObject, S: serde::Serialize + PartialEq>(
    ctx: &UpgradeCtx,
    obj: &K,
    current: Option<&S>,
    st: &S,
) -> Result<(), Error> {
    if current == Some(st) {
        return Ok(());
    }
    let api = api_of(ctx, obj);
    let body = serde_json::json!({
        "apiVersion": format!("{}/{}", kcore::ops::GROUP, kcore::ops::VERSION),
        "kind": K::kind(&()),
        "status": st,
    });
    api.patch_status(
        &obj.name_any(),
        &PatchParams::apply(MANAGER).force(),
        &Patch::Apply(body),
    )
    .await?;
    Ok(())
}

/// Writes a ClusterUpgrade's status ([`write_status`]).
async fn write(
    ctx: &UpgradeCtx,
    cu: &ClusterUpgrade,
    st: &ClusterUpgradeStatus,
) -> Result<(), Error> {
    write_status(ctx, cu, cu.status.as_ref(), st).await
}

/// Whether the status must be planned afresh: nothing planned yet (no phase, or Pending while
/// its input could not be acted on), or a new target or options (a changed `paused` or
/// `cancelled` keeps the plan under way).
fn needs_plan(cu: &ClusterUpgrade, st: &ClusterUpgradeStatus) -> bool {
    if st.plan.is_empty() && st.phase.as_deref().is_none_or(|p| p == phase::PENDING) {
        return true;
    }
    if st.observed_generation == cu.metadata.generation {
        return false;
    }
    let terminal = st.phase.as_deref().is_some_and(phase::is_terminal);
    let retarget = st.path.last() != Some(&cu.spec.version);
    (terminal && !cu.spec.cancelled) || retarget
}

/// Ends the upgrade when nothing more is to happen: finished for this generation, or cancelled.
/// `None` when the upgrade goes on.
async fn settle(
    cu: &ClusterUpgrade,
    ctx: &UpgradeCtx,
    st: &mut ClusterUpgradeStatus,
    now: &str,
) -> Result<Option<Action>, Error> {
    let terminal = st.phase.as_deref().is_some_and(phase::is_terminal);
    if !(cu.spec.cancelled || (terminal && !needs_plan(cu, st))) {
        return Ok(None);
    }
    st.observed_generation = cu.metadata.generation;
    if cu.spec.cancelled && !terminal {
        st.finish(
            phase::CANCELLED,
            "Cancelled",
            "cancelled: no further step starts (a rollout under way runs to its end)",
            now,
        );
    }
    write(ctx, cu, st).await?;
    Ok(Some(Action::await_change()))
}

/// Plans afresh when the spec asks for it (see [`needs_plan`]); `false` when the plan failed or
/// its preflight blocked it (the status says why).
async fn replan(
    cu: &ClusterUpgrade,
    ctx: &UpgradeCtx,
    w: &world::World,
    st: &mut ClusterUpgradeStatus,
    target: &str,
    now: &str,
) -> Result<bool, Error> {
    if !needs_plan(cu, st) {
        return Ok(true);
    }
    *st = match w.plan(cu) {
        Ok(plan) => run::fresh_status(&plan, cu.metadata.generation, Some(st), target, now),
        Err(message) => {
            let mut failed = ClusterUpgradeStatus {
                history: st.history.clone(),
                observed_generation: cu.metadata.generation,
                ..Default::default()
            };
            failed.finish(phase::FAILED, reason::PLAN_FAILED, &message, now);
            failed
        }
    };
    write(ctx, cu, st).await?;
    if st.phase.as_deref() != Some(phase::FAILED) {
        return Ok(true);
    }
    // The spec asks for what cannot be done (PlanFailed, PreflightFailed): said once per
    // generation, since only a new spec replans.
    if let Some(c) = st.conditions.iter().find(|c| c.type_ == "Ready") {
        input::warn(ctx, &input::reference(cu), &c.reason, &c.message).await;
    }
    Ok(false)
}

/// A ClusterUpgrade whose Cluster is missing: said on its status (and in an Event, the first
/// time for this generation), then it waits. The Cluster watch brings it back when a Cluster of
/// its name appears.
async fn cluster_missing(
    cu: &ClusterUpgrade,
    ctx: &UpgradeCtx,
    st: &mut ClusterUpgradeStatus,
    now: &str,
) -> Result<Action, Error> {
    let message = input::cluster_not_found(cu);
    let news = st.cannot_act(
        cu.metadata.generation,
        reason::CLUSTER_NOT_FOUND,
        &message,
        now,
    );
    write(ctx, cu, st).await?;
    if news {
        input::warn(
            ctx,
            &input::reference(cu),
            reason::CLUSTER_NOT_FOUND,
            &message,
        )
        .await;
    }
    Ok(Action::await_change())
}

async fn reconcile_inner(cu: &ClusterUpgrade, ctx: &UpgradeCtx) -> Result<Action, Error> {
    let mut st = cu.status.clone().unwrap_or_default();
    let target = format!(
        "{}/{}",
        cu.namespace().unwrap_or_default(),
        cu.spec.cluster_name
    );
    let now = now();
    if let Some(done) = settle(cu, ctx, &mut st, &now).await? {
        return Ok(done);
    }
    let Some(w) = world::read(ctx, cu).await? else {
        return cluster_missing(cu, ctx, &mut st, &now).await;
    };
    input::own(ctx, cu, w.cluster()).await?;
    if !replan(cu, ctx, &w, &mut st, &target, &now).await? {
        return Ok(Action::await_change());
    }
    st.observed_generation = cu.metadata.generation;
    let max = cu.spec.max_parallel_machine_deployments.unwrap_or(1);
    // Each pass either ends the reconcile or completes at least one step, so the plan's length
    // bounds the loop.
    for _ in 0..=st.plan.len() {
        let decision = run::decide(
            &st.plan,
            &st.current_steps,
            &st.completed_steps(),
            &w.observation(),
            max,
        );
        let batch = match decision {
            Decision::Completed(done) => {
                st.complete(&done, &now);
                continue;
            }
            Decision::Finished => {
                st.complete_all(&now);
                let m = format!("cluster {target} runs {}", cu.spec.version);
                st.finish(phase::SUCCEEDED, "Upgraded", &m, &now);
                break;
            }
            Decision::Wait(m) => {
                st.rolling(&m, &now);
                break;
            }
            Decision::Start(_) if cu.spec.paused => {
                st.pause(&now);
                break;
            }
            Decision::Start(batch) => {
                // Recorded before any patch: a reconciler killed in between finds the steps
                // under way and re-sends only what did not land.
                st.start(&batch, &now);
                write(ctx, cu, &st).await?;
                batch
            }
            Decision::Apply(batch) => batch,
        };
        apply::steps(ctx, cu, &st, &batch).await?;
        st.rolling(&format!("applied step(s) {batch:?}; rolling out"), &now);
        break;
    }
    write(ctx, cu, &st).await?;
    Ok(Action::await_change())
}
