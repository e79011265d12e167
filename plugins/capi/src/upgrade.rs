//! `kubectl capi upgrade CLUSTER --to VERSION [--plan]`.
//!
//! Plans with `shared::plan::upgrade` from what the cluster runs now (minor by minor, control
//! plane first, then each MachineDeployment; template clones where templates name the version;
//! skew, downgrade and BYOH spare-host preflight; ClusterClass clusters move
//! `spec.topology.version`; Kamaji control planes are stepped by the reconciler in one step).
//! `--plan` prints it. Otherwise every remaining step is applied and waited for, with progress.
//! Because the plan is computed from observed versions, running the command again after an
//! interruption resumes at the first step not done.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use clap::Args as ClapArgs;
use cli::{KubeFlags, OutputFlags};
use kcore::version::KubeVersion;
use serde::Serialize;
use serde_json::Value;
use shared::error::Error;
use shared::error::human_duration;
use shared::plan::hosts::{HostState, Inventory};
use shared::plan::upgrade::{
    Observed, StepLine, StepProgress, StepRole, UpgradeError, UpgradePlan, UpgradeRequest,
    UpgradeStep, parse_version, plan_upgrade, step_progress,
};
use shared::plan::{ClusterObjects, Severity};
use shared::render::{Human, Poll, Printer, Progress, Render, Wait};

use crate::day2::{DryRun, Target, display_name, name_of};
use crate::scale::{Objects, fetch, show_findings};

#[derive(ClapArgs, Clone, Debug)]
#[command(
    args_conflicts_with_subcommands = true,
    after_help = "Where the ClusterUpgrade API is served (kubectl kamaji install), the reconciler carries the
upgrade out: the command creates a ClusterUpgrade and returns (--wait follows it), so closing the
terminal stops nothing. Without it, or with --client-side, this terminal applies the steps.

Examples:
  kubectl capi upgrade prod --to v1.34.2 --plan     # the steps, the patches, the preflight
  kubectl capi upgrade prod --to v1.34.2 --yes      # hand it to the reconciler
  kubectl capi upgrade prod --to v1.34.2 --yes --wait
  kubectl capi upgrade status prod                  # its plan and progress
  kubectl capi upgrade pause prod | resume prod | cancel prod
  kubectl capi upgrade -l env=staging --to v1.34.2 --canary 1 --max-parallel 3 --yes --wait
  kubectl capi upgrade prod --to v1.34.2 --yes --client-side   # from this terminal; re-run resumes"
)]
pub struct Args {
    #[command(subcommand)]
    pub op: Option<crate::upgrade_ops::UpgradeOp>,
    /// The cluster
    #[arg(value_name = "CLUSTER")]
    pub cluster: Option<String>,
    /// The Kubernetes version to reach, e.g. v1.34.2
    #[arg(long, value_name = "VERSION")]
    pub to: Option<String>,
    /// Print the plan (steps, patches, template clones, preflight) and change nothing
    #[arg(long)]
    pub plan: bool,
    /// Upgrade only the control plane
    #[arg(long, conflicts_with = "workers_only")]
    pub control_plane_only: bool,
    /// Upgrade only the MachineDeployments (up to the control plane's version)
    #[arg(long)]
    pub workers_only: bool,
    /// Do not ask (required when stdin is not a terminal)
    #[arg(short = 'y', long)]
    pub yes: bool,
    /// Go ahead despite blocking preflight findings (too few spare hosts)
    #[arg(long)]
    pub force: bool,
    /// Apply the steps from this terminal even where the reconciler could carry them out
    #[arg(long)]
    pub client_side: bool,
    /// Follow the reconciler's upgrade until it ends (with --client-side the command always waits)
    #[arg(long)]
    pub wait: bool,
    /// MachineDeployments the reconciler rolls at once within a minor (1 to 100)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=100))]
    pub max_parallel_deployments: Option<u32>,
    /// Upgrade every Cluster of the namespace with these labels, in waves (a FleetUpgrade)
    #[arg(short = 'l', long, value_name = "SELECTOR", value_parser = cli::label_selector)]
    pub selector: Option<String>,
    /// With --selector: clusters upgraded alone first
    #[arg(long, value_name = "N", default_value_t = 0, requires = "selector", value_parser = clap::value_parser!(u32).range(0..=1000))]
    pub canary: u32,
    /// With --selector: clusters upgraded at once after the canaries (1 to 1000, default 1)
    #[arg(long, value_name = "N", requires = "selector", value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub max_parallel: Option<u32>,
    /// With --selector: the FleetUpgrade's name (default upgrade-to-<version>)
    #[arg(long, value_name = "NAME", requires = "selector")]
    pub name: Option<String>,
    /// How long to wait for each step (client side) or for the whole upgrade (--wait)
    #[arg(long, value_name = "DURATION", default_value = "30m", value_parser = cli::parse_duration)]
    pub timeout: Duration,
    /// Only print (client) or validate the next step on the server (server)
    #[arg(long, value_enum, value_name = "MODE", num_args = 0..=1, default_value = "none", default_missing_value = "client")]
    pub dry_run: DryRun,
    #[command(flatten)]
    pub output: OutputFlags,
    #[command(flatten)]
    pub kube: KubeFlags,
}

impl Args {
    /// `--to`, checked present by [`run`] before anything reads it.
    fn to(&self) -> &str {
        self.to.as_deref().unwrap_or_default()
    }
}

fn upgrade_error(e: UpgradeError) -> Error {
    let usage = |hint: &str| Error::Usage {
        message: e.to_string(),
        hint: Some(hint.into()),
    };
    match e {
        UpgradeError::MissingV(_) | UpgradeError::Malformed { .. } => {
            usage("write the version as vMAJOR.MINOR.PATCH, e.g. --to v1.35.0")
        }
        UpgradeError::ConflictingScope => {
            usage("pass one of them, or neither for the whole cluster")
        }
        UpgradeError::ScopeWithTopology(_) => usage(
            "drop --control-plane-only/--workers-only; the topology controller orders the rollout",
        ),
        other => Error::other(other.to_string()),
    }
}

/// The plan with which steps are already done.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PlanView {
    #[serde(flatten)]
    plan: UpgradePlan,
    /// Numbers of the steps already done (what a re-run skips).
    done_steps: Vec<usize>,
}

impl Render for PlanView {
    fn human(&self) -> Human {
        let p = &self.plan;
        let mut s = format!(
            "Upgrade plan for cluster {}/{}: {} -> {} (path: {})\n",
            p.namespace,
            p.cluster,
            p.from_version,
            p.to_version,
            p.path.join(", ")
        );
        if p.steps.is_empty() {
            s.push_str("Nothing to do: the cluster already runs that version.\n");
        }
        for st in &p.steps {
            let state = if self.done_steps.contains(&st.number) {
                "done"
            } else {
                "to do"
            };
            s.push_str(&format!(
                "\nStep {}/{} [{state}]: {} {} -> {}{}\n",
                st.number,
                p.steps.len(),
                st.target,
                st.from_version,
                st.to_version,
                if st.stepped_by_reconciler && !st.via.is_empty() {
                    format!(" (the reconciler steps through {})", st.via.join(", "))
                } else {
                    String::new()
                }
            ));
            for c in &st.clone_templates {
                s.push_str(&format!(
                    "  clone {} {} -> {} (templates are immutable)\n",
                    c.kind, c.source_name, c.new_name
                ));
                for ch in &c.changes {
                    s.push_str(&format!("    {}: {} -> {}\n", ch.path, ch.from, ch.to));
                }
            }
            s.push_str(&format!(
                "  patch {}:\n",
                display_name(&st.patch.kind, &st.patch.api_version, &st.patch.name)
            ));
            for ch in &st.patch.changes {
                s.push_str(&format!("    {}: {} -> {}\n", ch.path, ch.from, ch.to));
            }
            for h in &st.spare_hosts {
                s.push_str(&format!(
                    "  spare hosts: needs {} matching {{{}}}; {} available{}\n",
                    h.needed,
                    h.selector,
                    h.available,
                    if h.ok { "" } else { " - SHORT" }
                ));
                if !h.ok {
                    for w in &h.ways_out {
                        s.push_str(&format!("    way out: {w}\n"));
                    }
                }
            }
            s.push_str(&format!("  wait for: {}\n", st.wait_for));
        }
        if !p.findings.is_empty() {
            s.push_str("\nPreflight:\n");
            for f in &p.findings {
                let sev = match f.severity {
                    Severity::Info => "info",
                    Severity::Warning => "warning",
                    Severity::Error => "BLOCKING",
                };
                s.push_str(&format!("  {sev}: {}\n", f.message));
            }
        }
        Human::Text(s)
    }
}

/// Everything read for one planning round.
pub(crate) struct Snapshot {
    objs: Objects,
    machines: Vec<Value>,
}

impl Snapshot {
    pub(crate) async fn read(t: &Target) -> Result<Snapshot, Error> {
        Ok(Snapshot {
            objs: fetch(t).await?,
            machines: t.machines().await?,
        })
    }
    pub(crate) fn observed(&self, t: &Target) -> Observed {
        Observed::from_objects(&self.objs.cluster_objects(t), &self.machines)
    }
}

fn plan(t: &Target, snap: &Snapshot, args: &Args) -> Result<(UpgradePlan, Vec<usize>), Error> {
    let co: ClusterObjects<'_> = snap.objs.cluster_objects(t);
    let observed = snap.observed(t);
    let req = UpgradeRequest {
        to: args.to().to_string(),
        control_plane_only: args.control_plane_only,
        workers_only: args.workers_only,
        force: args.force,
        available_versions: topology_versions(t),
        ..Default::default()
    };
    let free: Option<Vec<&Value>> = snap.objs.inventory.as_ref().map(|[h, b, m, c]| {
        let inv = Inventory::build(h, b, m, c, None);
        h.iter()
            .filter(|x| inv.state(x) == HostState::Available)
            .collect()
    });
    let plan = plan_upgrade(&co, &req, &observed, free.as_deref()).map_err(upgrade_error)?;
    let remaining: Vec<usize> = plan.remaining(&observed).iter().map(|s| s.number).collect();
    let done = plan
        .steps
        .iter()
        .map(|s| s.number)
        .filter(|n| !remaining.contains(n))
        .collect();
    Ok((plan, done))
}

/// ClusterClass clusters may list the versions their class supports.
fn topology_versions(t: &Target) -> Vec<String> {
    kcore::json::strings_at(&t.cluster, &["status", "kubernetesVersions"])
}

/// Shows the preflight's warnings; blocking findings fail the command (`--force` drops them).
fn preflight(t: &Target, args: &Args, plan: &UpgradePlan) -> Result<(), Error> {
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
    let blocking: Vec<&str> = plan
        .findings
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .map(|f| f.message.as_str())
        .collect();
    Err(Error::Other {
        message: format!("the upgrade preflight failed: {}", blocking.join("; ")),
        hint: Some(format!(
            "see kubectl capi upgrade {} --to {} --plan for the ways out, or pass --force",
            t.name,
            args.to()
        )),
    })
}

/// Shows the plan and asks, unless `--yes` or a dry run; `false` when the user declines.
fn confirmed(t: &Target, args: &Args, view: &PlanView) -> Result<bool, Error> {
    if args.yes || args.dry_run.is_dry() {
        return Ok(true);
    }
    if !std::io::stdin().is_terminal() {
        return Err(Error::Usage {
            message: format!(
                "refusing to upgrade cluster {} without confirmation: stdin is not a terminal",
                t.name
            ),
            hint: Some(format!(
                "review it with --plan, then pass --yes (kubectl capi upgrade {} --to {} --yes)",
                t.name,
                args.to()
            )),
        });
    }
    Printer::new(&args.output).print(view)?;
    if !shared::render::confirm(&format!(
        "Upgrade cluster {}/{} to {}?",
        t.namespace, t.name, view.plan.to_version
    ))? {
        shared::render::line("cancelled; nothing was changed");
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
    t: &mut Target,
    args: &Args,
    total: usize,
    done: usize,
    to_version: &str,
) -> Result<(), Error> {
    let started = Instant::now();
    let mut progress = Progress::line();
    let mut completed = done;
    loop {
        let what = format!("reading cluster {}", t.name);
        // The reads between steps ride out an API server blip as the waits do.
        let read: &Target = t;
        let cluster = steady(&what, args.timeout, &mut progress, || {
            read.get_opt(&read.cluster_ar, &read.name)
        })
        .await?;
        if let Some(c) = cluster {
            t.cluster = c;
        }
        let read: &Target = t;
        let snap = steady(&what, args.timeout, &mut progress, || Snapshot::read(read)).await?;
        let (plan, _) = plan(t, &snap, args)?;
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
        apply_step(t, &step, args.dry_run).await?;
        if args.dry_run == DryRun::Server {
            progress.clear();
            shared::render::line(&format!(
                "{head}: accepted by the server (server dry run; later steps depend on this one and were not sent)"
            ));
            return Ok(());
        }
        wait_step(t, &step, (n, total), args.timeout, &mut progress).await?;
        completed += 1;
        progress.out(&format!("{head}: done"));
    }
    progress.clear();
    shared::render::line(&format!(
        "cluster {} upgraded to {to_version} in {}",
        t.name,
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

pub async fn run(args: &Args) -> Result<(), Error> {
    if let Some(op) = &args.op {
        return crate::upgrade_ops::run(op).await;
    }
    // An empty selector matches every Cluster of the namespace: too much to be a typo's
    // consequence, so it is refused before anything is read.
    if args
        .selector
        .as_deref()
        .is_some_and(|s| s.trim().is_empty())
    {
        return Err(Error::Usage {
            message: "an empty selector (-l '') would select every cluster of the namespace; nothing was changed".into(),
            hint: Some(
                "name the clusters' label, e.g. -l env=staging (kubectl capi list --show-labels shows them), or upgrade one cluster with kubectl capi upgrade CLUSTER --to VERSION".into(),
            ),
        });
    }
    if let (Some(selector), Some(to)) = (&args.selector, &args.to) {
        parse_version(to).map_err(upgrade_error)?;
        if let Some(n) = &args.name {
            kcore::names::check_object_name("FleetUpgrade", n)?;
        }
        return crate::upgrade_fleet::run(args, selector, to).await;
    }
    let (Some(cluster), Some(to)) = (&args.cluster, &args.to) else {
        return Err(Error::Usage {
            message: "upgrade needs a cluster and --to <VERSION>".into(),
            hint: Some(
                "kubectl capi upgrade CLUSTER --to VERSION [--plan], or kubectl capi upgrade status|pause|resume|cancel CLUSTER".into(),
            ),
        });
    };
    // A malformed version is a usage error before anything is read.
    parse_version(to).map_err(upgrade_error)?;
    let mut t = Target::load(&args.kube, cluster).await?;
    let hand_over = !args.client_side && !args.plan && !args.dry_run.is_dry();
    if hand_over && let Some(ar) = crate::upgrade_ops::resource(&t.apis) {
        // Before any planning output: another upgrade under way is refused in one line.
        crate::upgrade_ops::refuse_busy(&t, &ar, to).await?;
    }
    let snap = Snapshot::read(&t).await?;
    let (plan, done_steps) = plan(&t, &snap, args)?;
    let view = PlanView { plan, done_steps };
    if args.plan || args.dry_run == DryRun::Client {
        Printer::new(&args.output).print(&view)?;
        return Ok(());
    }
    preflight(&t, args, &view.plan)?;
    let (total, done) = (view.plan.steps.len(), view.done_steps.len());
    if done == total {
        shared::render::line(&format!(
            "cluster {} already runs {}; nothing to do",
            t.name, view.plan.to_version
        ));
        return Ok(());
    }
    if let Some(note) = resume_note(&t, &snap, &view.plan, &view.done_steps) {
        shared::render::line(&format!("resuming: {note}"));
    }
    if !confirmed(&t, args, &view)? {
        return Ok(());
    }
    if hand_over {
        match crate::upgrade_ops::resource(&t.apis) {
            Some(ar) => {
                let req = crate::upgrade_ops::Request {
                    to,
                    control_plane_only: args.control_plane_only,
                    workers_only: args.workers_only,
                    force: args.force,
                    max_parallel: args.max_parallel_deployments,
                    wait: args.wait,
                    timeout: args.timeout,
                    steps: total,
                };
                return crate::upgrade_ops::hand_over(&t, &ar, &req).await;
            }
            None => shared::render::info(
                "note: the ClusterUpgrade API is not installed (kubectl kamaji install adds it with the reconciler); upgrading from this terminal",
            ),
        }
    }
    apply_steps(&mut t, args, total, done, &view.plan.to_version).await
}

/// Why this run is a resumption, if it is: steps of the plan already done, or the first step's
/// object already set to its version by an earlier, interrupted run.
fn resume_note(t: &Target, snap: &Snapshot, plan: &UpgradePlan, done: &[usize]) -> Option<String> {
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
    (spec == first.to_version).then(|| {
        format!(
            "{} was already set to {} by an earlier run and is still rolling out ({} runs {})",
            first.target, first.to_version, first.target, first.from_version
        )
    })
}

/// Creates the step's template clones (server-side apply: idempotent) and patches the version.
async fn apply_step(t: &Target, step: &UpgradeStep, dry: DryRun) -> Result<(), Error> {
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
        shared::render::line(&format!(
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
fn step_object(t: &Target, snap: &Snapshot, step: &UpgradeStep) -> Option<Value> {
    role_object(t, snap, step.role, &step.target)
}

/// The object a step of `role` on `target` (`Kind/name`) changes, as last read.
pub(crate) fn role_object(
    t: &Target,
    snap: &Snapshot,
    role: StepRole,
    target: &str,
) -> Option<Value> {
    match role {
        StepRole::ControlPlane => snap.objs.control_plane.clone(),
        StepRole::Workers => snap
            .objs
            .machine_deployments
            .iter()
            .find(|m| format!("MachineDeployment/{}", name_of(m)) == target)
            .cloned(),
        StepRole::Topology => Some(t.cluster.clone()),
    }
}

/// Waits until the step's object runs the new version everywhere and is ready; `(n, total)`
/// number the step for its progress line.
async fn wait_step(
    t: &Target,
    step: &UpgradeStep,
    (n, total): (usize, usize),
    timeout: Duration,
    progress: &mut Progress,
) -> Result<(), Error> {
    let to = parse_version(&step.to_version).map_err(upgrade_error)?;
    let to = &to;
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

/// The version the cluster runs: its control plane's (a ClusterClass cluster's lowest).
pub(crate) fn cluster_runs(
    t: &Target,
    snap: &Snapshot,
    observed: &Observed,
) -> Option<KubeVersion> {
    let key = match &snap.objs.control_plane {
        Some(cp) => format!(
            "{}/{}",
            cp.get("kind").and_then(Value::as_str).unwrap_or_default(),
            name_of(cp)
        ),
        None => format!("Cluster/{}", t.name),
    };
    observed.get(&key)
}
