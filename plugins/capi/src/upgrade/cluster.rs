//! `kubectl capi upgrade CLUSTER --to VERSION [--plan]`: one cluster.
//!
//! Plans with `kcore::plan::upgrade` from what the cluster runs now (minor by minor, control
//! plane first, then each MachineDeployment; template clones where templates name the version;
//! skew, downgrade and BYOH spare-host preflight; ClusterClass clusters move
//! `spec.topology.version`; Kamaji control planes are stepped by the reconciler in one step).
//! `--plan` prints it. Where the ClusterUpgrade API is served (and without `--client-side`) the
//! reconciler carries it out (`hand_over`); otherwise every remaining step is applied and
//! waited for, with progress. Because the plan is computed from observed versions, running the
//! command again after an interruption resumes at the first step not done.

use std::time::{Duration, Instant};

use cli::DryRun;
use kclient::error::Error;
use kclient::render::{Poll, Printer, Progress, Wait};
use kcore::plan::hosts::HostState;
use kcore::plan::upgrade::deprecated;
use kcore::plan::upgrade::{
    StepLine, StepProgress, StepRole, UpgradePlan, UpgradeRequest, UpgradeStep, plan_upgrade,
    step_progress, walk_start,
};
use kcore::plan::{ClusterObjects, Finding, Severity};
use kcore::text::human_duration;
use kcore::version::KubeVersion;
use kcore::version::releases::{ReleaseSource, Releases};
use serde_json::Value;

use super::hand_over::{hand_over, refuse_busy};
use super::plan_view::PlanView;
use super::request::ClusterRequest;
use super::snapshot::{Snapshot, cluster_runs, role_object};
use super::upgrade_error;
use crate::common::cluster::ClusterHandle;
use crate::common::cluster_upgrade;
use crate::common::findings::show_findings;
use crate::common::names::{display_name, name_of};
use crate::common::workload_kubeconfig;

fn plan(
    t: &ClusterHandle,
    snap: &Snapshot,
    req: &ClusterRequest,
    releases: &Releases,
) -> Result<(UpgradePlan, Vec<usize>), Error> {
    let co: ClusterObjects<'_> = snap.objs.cluster_objects(t);
    let observed = snap.observed(t);
    let request = UpgradeRequest {
        control_plane_only: req.control_plane_only,
        workers_only: req.workers_only,
        force: req.force,
        releases: releases.clone(),
        ..UpgradeRequest::new(req.to.clone())
    };
    let free: Option<Vec<&Value>> = snap.objs.free_hosts.as_ref().map(|lists| {
        let inv = lists.inventory(None);
        lists
            .hosts
            .iter()
            .filter(|x| inv.state(x) == HostState::Available)
            .collect()
    });
    let plan = plan_upgrade(&co, &request, &observed, free.as_deref()).map_err(upgrade_error)?;
    let remaining: Vec<usize> = plan.remaining(&observed).iter().map(|s| s.number).collect();
    let done = plan
        .steps
        .iter()
        .map(|s| s.number)
        .filter(|n| !remaining.contains(n))
        .collect();
    Ok((plan, done))
}

/// The patch releases the walk steps through: the versions a ClusterClass lists (CAPI takes
/// only those), else Kubernetes' stable-release markers over the shipped table, with a note
/// when some marker could not be read. Resolved once per command, so every re-plan between
/// steps walks the same path.
async fn releases(t: &ClusterHandle, snap: &Snapshot, to: &KubeVersion) -> Releases {
    let class = kcore::json::strings_at(&t.cluster, &["status", "kubernetesVersions"]);
    if !class.is_empty() {
        return Releases::none().with(class, ReleaseSource::ClusterClass);
    }
    let from = walk_start(&snap.objs.cluster_objects(t), &snap.observed(t));
    match from {
        Some(from) => {
            let r = kclient::releases::resolve(&from, to).await;
            if let Some(note) = &r.note {
                kclient::render::warn(note);
            }
            r.releases
        }
        None => Releases::shipped(),
    }
}

/// Before crossing a minor: the deprecated APIs the workload cluster's clients still call that
/// the target removes, from its API server's own count (read with the cluster's kubeconfig
/// Secret, `<cluster>-kubeconfig`), or a warning that they could not be read.
async fn deprecated_apis(t: &ClusterHandle, plan: &UpgradePlan) -> Option<Finding> {
    let (from, to) = (&plan.from_version, &plan.to_version);
    if to.minor <= from.minor {
        return None;
    }
    let read = async {
        let (text, _) = workload_kubeconfig::read(&t.conn, &t.namespace, &t.name).await?;
        let label = format!("cluster {}", t.name);
        let (client, target) = kclient::kubeconfig::client_of(&text, &label).await?;
        kclient::metrics::requested_deprecated_apis(&client, &target).await
    };
    match read.await {
        Ok(apis) => deprecated::finding(&deprecated::removed_by(&apis, from, to), to),
        Err(e) => Some(Finding::warning(format!(
            "the deprecated APIs the cluster's clients call were not checked: {}",
            e.to_string().lines().next().unwrap_or_default()
        ))),
    }
}

/// Shows the preflight's warnings; blocking findings fail the command (`--force` drops them).
fn preflight(t: &ClusterHandle, req: &ClusterRequest, plan: &UpgradePlan) -> Result<(), Error> {
    show_findings(
        &plan
            .findings
            .iter()
            .filter(|f| f.severity != Severity::Error)
            .cloned()
            .collect::<Vec<_>>(),
    );
    if !plan.blocked {
        return Ok(());
    }
    let blocking = plan.blocking();
    Err(Error::Other {
        message: format!("the upgrade preflight failed: {}", blocking.join("; ")),
        hint: Some(format!(
            "see kubectl capi upgrade {} --to {} --plan for the ways out, or pass --force",
            t.name, req.to
        )),
    })
}

/// Shows the plan and asks, unless `--yes` or a dry run; `false` when the user declines.
fn confirmed(t: &ClusterHandle, req: &ClusterRequest, view: &PlanView) -> Result<bool, Error> {
    if req.yes || req.dry_run.is_dry() {
        return Ok(true);
    }
    kclient::render::require_terminal(
        &format!("upgrade cluster {}", t.name),
        format!(
            "review it with --plan, then pass --yes (kubectl capi upgrade {} --to {} --yes)",
            t.name, req.to
        ),
    )?;
    Printer::new(&req.output).print(view)?;
    if !kclient::render::confirm(&format!(
        "Upgrade cluster {}/{} to {}?",
        t.namespace, t.name, view.plan.to_version
    ))? {
        kclient::render::line("cancelled; nothing was changed");
        return Ok(false);
    }
    Ok(true)
}

/// Applies step by step. Each round re-reads the cluster and re-plans, so what another actor
/// (or an earlier, interrupted run) did is taken into account. `total` and `done` number the
/// steps against the plan shown at the start. One updating line on a terminal (a line per
/// change otherwise) says where the step under way stands; each step done is a line on stdout,
/// and one line closes the upgrade.
async fn apply_steps(
    t: &mut ClusterHandle,
    req: &ClusterRequest,
    releases: &Releases,
    total: usize,
    done: usize,
) -> Result<(), Error> {
    let started = Instant::now();
    let mut progress = Progress::line();
    let mut completed = done;
    loop {
        let what = format!("reading cluster {}", t.name);
        // The reads between steps ride out an API server blip as the waits do.
        let read: &ClusterHandle = t;
        let cluster = steady(&what, req.timeout, &mut progress, || {
            read.get_opt(&read.cluster_ar, &read.name)
        })
        .await?;
        if let Some(c) = cluster {
            t.cluster = c;
        }
        let read: &ClusterHandle = t;
        let snap = steady(&what, req.timeout, &mut progress, || Snapshot::read(read)).await?;
        let (plan, _) = plan(t, &snap, req, releases)?;
        let observed = snap.observed(t);
        let Some(step) = plan.resume_point(&observed).cloned() else {
            break;
        };
        // Numbered against the plan shown at the start (re-planning renumbers from what runs).
        let n = completed + 1;
        let head = StepLine {
            number: n,
            total,
            target: &step.target,
            to: &step.to_version,
            progress: &StepProgress::default(),
            cluster_runs: None,
        }
        .head();
        apply_step(t, &step, req.dry_run).await?;
        if req.dry_run == DryRun::Server {
            progress.clear();
            kclient::render::line(&format!(
                "{head}: accepted by the server (server dry run; later steps depend on this one and were not sent)"
            ));
            return Ok(());
        }
        wait_step(t, &step, (n, total), req.timeout, &mut progress).await?;
        completed += 1;
        progress.out(&format!("{head}: done"));
    }
    progress.clear();
    kclient::render::line(&format!(
        "cluster {} upgraded to {} in {}",
        t.name,
        req.to,
        human_duration(started.elapsed())
    ));
    Ok(())
}

/// One read through the wait loop: an API server that does not answer is waited for (up to
/// `timeout`) instead of failing the upgrade between two steps.
async fn steady<T, F, Fut>(
    what: &str,
    timeout: Duration,
    progress: &mut Progress,
    mut read: F,
) -> Result<T, Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, Error>>,
{
    Wait::new(what, timeout)
        .on(progress)
        .until(|| {
            let r = read();
            async move { r.await.map(Poll::Ready) }
        })
        .await
}

/// Plans, shows or asks, then hands the upgrade to the reconciler or applies it from here.
pub async fn run(req: &ClusterRequest) -> Result<(), Error> {
    let to = &req.to;
    let mut t = ClusterHandle::load(&req.kube, &req.cluster).await?;
    let handing_over = !req.client_side && !req.plan && !req.dry_run.is_dry();
    if handing_over && let Some(ar) = cluster_upgrade::resource(&t.apis) {
        // Before any planning output: another upgrade under way is refused in one line.
        refuse_busy(&t, &ar, to).await?;
    }
    let snap = Snapshot::read(&t).await?;
    let releases = releases(&t, &snap, to).await;
    let (mut plan, done_steps) = plan(&t, &snap, req, &releases)?;
    if let Some(f) = deprecated_apis(&t, &plan).await {
        plan.blocked |= f.severity == Severity::Error && !req.force;
        plan.findings.push(f);
    }
    let view = PlanView { plan, done_steps };
    if req.plan || req.dry_run == DryRun::Client {
        Printer::new(&req.output).print(&view)?;
        return Ok(());
    }
    preflight(&t, req, &view.plan)?;
    let (total, done) = (view.plan.steps.len(), view.done_steps.len());
    if done == total {
        kclient::render::line(&format!(
            "cluster {} already runs {}; nothing to do",
            t.name, view.plan.to_version
        ));
        return Ok(());
    }
    if let Some(note) = resume_note(&t, &snap, &view.plan, &view.done_steps) {
        kclient::render::line(&format!("resuming: {note}"));
    }
    if !confirmed(&t, req, &view)? {
        return Ok(());
    }
    if handing_over {
        match cluster_upgrade::resource(&t.apis) {
            Some(ar) => {
                let recorded = releases.recorded(&view.plan.from_version, &view.plan.to_version);
                return hand_over(&t, &ar, req, total, &recorded).await;
            }
            None => kclient::render::info(
                "note: the ClusterUpgrade API is not installed (kubectl kamaji install adds it with the reconciler); upgrading from this terminal",
            ),
        }
    }
    apply_steps(&mut t, req, &releases, total, done).await
}

/// Why this run is a resumption, if it is: steps of the plan already done, or the first step's
/// object already set to its version by an earlier, interrupted run.
fn resume_note(
    t: &ClusterHandle,
    snap: &Snapshot,
    plan: &UpgradePlan,
    done: &[usize],
) -> Option<String> {
    if !done.is_empty() {
        return Some(format!(
            "{} of {} steps already done; continuing at step {}",
            done.len(),
            plan.steps.len(),
            done.len() + 1
        ));
    }
    let first = plan.steps.first()?;
    let obj = match first.role {
        StepRole::ControlPlane => snap.objs.control_plane.as_ref(),
        StepRole::Workers => snap
            .objs
            .machine_deployments
            .iter()
            .find(|m| format!("MachineDeployment/{}", name_of(m)) == first.target),
        StepRole::Topology => Some(&t.cluster),
    }?;
    let spec = first
        .patch
        .changes
        .iter()
        .find(|c| c.path.ends_with("/version"))
        .and_then(|c| obj.pointer(&c.path))
        .and_then(Value::as_str)?;
    (spec == first.to_version.to_string()).then(|| {
        format!(
            "{} was already set to {} by an earlier run and is still rolling out ({} runs {})",
            first.target, first.to_version, first.target, first.from_version
        )
    })
}

/// Creates the step's template clones (server-side apply: idempotent) and patches the version.
async fn apply_step(t: &ClusterHandle, step: &UpgradeStep, dry: DryRun) -> Result<(), Error> {
    for c in &step.clone_templates {
        let av = c
            .object
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or("");
        let ar = t.resource_of(av, &c.kind)?;
        let mut body = c.object.clone();
        if let Some(m) = body.as_object_mut() {
            m.remove("apiVersion");
            m.remove("kind");
        }
        if let Some(meta) = body.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("name");
            meta.remove("namespace");
        }
        t.apply(&ar, &c.new_name, body, dry).await?;
        kclient::render::line(&format!(
            "{} created from {}{}",
            display_name(&c.kind, av, &c.new_name),
            c.source_name,
            dry.suffix()
        ));
    }
    let p = &step.patch;
    let ar = t.resource_of(&p.api_version, &p.kind)?;
    t.patch(&ar, p, dry).await
}

/// The object the step changes, as last read.
fn step_object(t: &ClusterHandle, snap: &Snapshot, step: &UpgradeStep) -> Option<Value> {
    role_object(t, snap, step.role, &step.target)
}

/// Waits until the step's object runs the new version everywhere and is ready; `(n, total)`
/// number the step for its progress line.
async fn wait_step(
    t: &ClusterHandle,
    step: &UpgradeStep,
    (n, total): (usize, usize),
    timeout: Duration,
    progress: &mut Progress,
) -> Result<(), Error> {
    let to = &step.to_version;
    Wait::new(format!("waiting for {}", step.wait_for), timeout)
        .on(progress)
        .until(|| async move {
            let snap = Snapshot::read(t).await?;
            let observed = snap.observed(t);
            let obj = step_object(t, &snap, step);
            let obs = observed.get(&step.target);
            let p = step_progress(step.role, obj.as_ref(), obs.as_ref(), to);
            if p.reached {
                return Ok(Poll::Ready(()));
            }
            let runs = cluster_runs(t, &snap, &observed);
            Ok(Poll::Pending(
                StepLine {
                    number: n,
                    total,
                    target: &step.target,
                    to: &step.to_version,
                    progress: &p,
                    cluster_runs: runs.as_ref(),
                }
                .to_string(),
            ))
        })
        .await
        .map_err(|e| match e {
            Error::Timeout { what, after } => Error::Timeout {
                what: format!("{what}; run the same command again to resume"),
                after,
            },
            e => e,
        })
}
