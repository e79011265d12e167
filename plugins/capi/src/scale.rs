//! `kubectl capi scale CLUSTER --control-plane N | --workers N [--deployment NAME]`.
//!
//! Reads the cluster, its control plane, MachineDeployments and infrastructure machine
//! templates (and, on BYOH, the host inventory), plans with `kcore::plan::scale` (KCP odd-count
//! rule, free hosts matching each template's selector, ClusterClass topology fields), then
//! patches with the `kubectl-capi` field manager and, with `--wait`, follows the replicas until
//! they are ready.

use std::time::Duration;

use clap::Args as ClapArgs;
use cli::{DryRun, DryRunFlag, KubeFlags};
use kclient::error::Error;
use kclient::render::Poll;
use kcore::labels::DEPLOYMENT_NAME_LABEL;
use kcore::plan::scale::{
    HostPool, Role, ScaleError, ScalePlan, ScaleRequest, ScaleTarget, TOPOLOGY_DEPLOYMENT_LABEL,
    plan_scale,
};
use serde_json::Value;

use crate::common::cluster::ClusterHandle;
use crate::common::cluster_parts::{fetch_without_hosts, free_hosts_of};
use crate::common::findings::show_findings;
use crate::common::host_pool::machine_on_host;
use crate::common::names::{display_name, name_of};

#[derive(ClapArgs, Clone, Debug)]
#[command(
    group(clap::ArgGroup::new("what").required(true).multiple(true).args(["control_plane", "workers", "remove_machine", "remove_host"])),
    after_help = "Examples:
  kubectl capi scale prod --workers 5
  kubectl capi scale prod --control-plane 3 --wait
  kubectl capi scale prod --workers 2 --deployment prod-md-gpu --dry-run=client
  kubectl capi scale prod --remove-host node-17           # one worker fewer: the one on node-17
  kubectl capi scale prod --workers 3 --remove-machine prod-md-0-abc12-x7k2p

--remove-machine and --remove-host mark those Machines with Cluster API's
cluster.x-k8s.io/delete-machine annotation, which MachineSets delete first, then lower the
MachineDeployment's replicas (by their count unless --workers says more)."
)]
pub struct Args {
    /// The cluster
    #[arg(value_name = "CLUSTER")]
    pub cluster: String,
    /// Control-plane replicas
    #[arg(long, value_name = "N", value_parser = cli::count(kcore::plan::MAX_CONTROL_PLANE_REPLICAS), allow_negative_numbers = true)]
    pub control_plane: Option<i64>,
    /// Worker replicas of one MachineDeployment (--deployment when the cluster has several)
    #[arg(long, value_name = "N", value_parser = cli::count(kcore::plan::MAX_WORKERS), allow_negative_numbers = true)]
    pub workers: Option<i64>,
    /// The MachineDeployment to scale (its name, or its ClusterClass topology name)
    #[arg(long, value_name = "NAME")]
    pub deployment: Option<String>,
    /// A worker Machine to remove on scale-down (repeatable, or comma-separated)
    #[arg(long, value_name = "MACHINE", value_delimiter = ',')]
    pub remove_machine: Vec<String>,
    /// A BYOH host whose worker Machine to remove on scale-down (repeatable, or comma-separated)
    #[arg(long, value_name = "HOST", value_delimiter = ',')]
    pub remove_host: Vec<String>,
    /// Scale even when too few free BYOH hosts match (the new machines wait for hosts)
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub dry_run: DryRunFlag,
    /// Wait until the new replica counts are ready
    #[arg(long)]
    pub wait: bool,
    /// How long --wait waits
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = cli::parse_duration)]
    pub timeout: Duration,
    #[command(flatten)]
    pub kube: KubeFlags,
}

fn scale_error(e: ScaleError) -> Error {
    match e {
        ScaleError::NothingRequested | ScaleError::Negative(_) => Error::Usage {
            message: e.to_string(),
            hint: Some("pass --control-plane N and/or --workers N (0 or more)".into()),
        },
        other => Error::other(other.to_string()),
    }
}

/// The most machines one `--remove-machine`/`--remove-host` list may name.
const MAX_REMOVALS: usize = 500;

/// The Machines named by `--remove-machine`, and those on the hosts of `--remove-host`.
async fn machines_to_remove(t: &ClusterHandle, args: &Args) -> Result<Vec<Value>, Error> {
    let count = args
        .remove_machine
        .len()
        .saturating_add(args.remove_host.len());
    if count > MAX_REMOVALS {
        return Err(Error::usage(format!(
            "{count} machines named to remove; at most {MAX_REMOVALS} at a time"
        )));
    }
    for n in args.remove_machine.iter().chain(&args.remove_host) {
        kcore::names::check_object_name("machine or host", n)?;
    }
    let machine_ar = t.core("Machine")?;
    let mut names: Vec<String> = Vec::new();
    for m in &args.remove_machine {
        names.push(m.clone());
    }
    if !args.remove_host.is_empty() {
        let host_ar = t.apis.byo_host().ok_or_else(|| Error::Usage {
            message: "--remove-host needs BYOH, and this management cluster serves no ByoHost API"
                .into(),
            hint: Some("name the machine with --remove-machine instead".into()),
        })?;
        for h in &args.remove_host {
            names.push(machine_on_host(t, &host_ar, h).await?);
        }
    }
    names.sort();
    names.dedup();
    let mut machines = Vec::new();
    for n in names {
        match t.get_opt(&machine_ar, &n).await? {
            Some(m) => machines.push(m),
            None => {
                let known = t.machines().await.unwrap_or_default();
                return Err(Error::NotFound {
                    kind: "Machine".into(),
                    name: n.clone(),
                    namespace: Some(t.namespace.clone()),
                    suggestions: kcore::text::closest_names(&n, known.iter().map(name_of)),
                });
            }
        }
    }
    Ok(machines)
}

pub async fn run(args: &Args) -> Result<(), Error> {
    let t = ClusterHandle::load(&args.kube, &args.cluster).await?;
    let mut objs = fetch_without_hosts(&t).await?;
    let mut req = ScaleRequest {
        control_plane: args.control_plane,
        workers: args.workers,
        deployment: args.deployment.clone(),
        force: args.force,
    };
    let mut marks = Vec::new();
    if !args.remove_machine.is_empty() || !args.remove_host.is_empty() {
        let machines = machines_to_remove(&t, args).await?;
        let removal = kcore::plan::scale::removal::plan_removal(
            &t.cluster,
            &objs.machine_deployments,
            &machines,
            args.workers,
            args.deployment.as_deref(),
        )
        .map_err(|e| Error::other(e.to_string()))?;
        req.workers = Some(removal.workers);
        req.deployment = Some(removal.deployment);
        marks = removal.marks;
    }
    // The free hosts are read only when a step adds Machines: a scale-down needs none.
    if plan_scale(&objs.cluster_objects(&t), &req, None).map_or(true, |p| p.grows()) {
        objs.free_hosts = free_hosts_of(&t, &objs.infra_templates).await?;
    }
    let co = objs.cluster_objects(&t);
    let plan = match &objs.free_hosts {
        Some(lists) => {
            let inv = lists.inventory(None);
            let mut pool = HostPool::from_inventory(&inv, &lists.hosts);
            plan_scale(&co, &req, Some(&mut pool))
        }
        None => plan_scale(&co, &req, None),
    }
    .map_err(scale_error)?;
    show_findings(&plan.findings);
    if args.dry_run == DryRun::Client {
        kclient::render::raw(kclient::render::to_yaml(&plan)?.as_bytes());
    }
    // The marks go first: once the replicas drop, the MachineSet picks what to delete.
    for m in &marks {
        let ar = t.resource_of(&m.api_version, &m.kind)?;
        t.patch(&ar, m, *args.dry_run).await?;
        kclient::render::line(&format!(
            "{} marked for deletion{}",
            display_name(&m.kind, &m.api_version, &m.name),
            args.dry_run.suffix()
        ));
    }
    for s in &plan.steps {
        let p = &s.patch;
        let shown = display_name(&p.kind, &p.api_version, &p.name);
        let what = if p.kind == "Cluster" {
            format!("{shown} ({})", s.target)
        } else {
            shown
        };
        if s.from == Some(s.to) {
            kclient::render::line(&format!("{what} already at {} replicas", s.to));
            continue;
        }
        let ar = t.resource_of(&p.api_version, &p.kind)?;
        t.patch(&ar, p, *args.dry_run).await?;
        let from = s.from.map(|f| f.to_string()).unwrap_or_else(|| "?".into());
        kclient::render::line(&format!(
            "{what} scaled from {from} to {}{}",
            s.to,
            args.dry_run.suffix()
        ));
    }
    if args.wait && !args.dry_run.is_dry() && !plan.is_noop() {
        wait_ready(&t, &plan, args.timeout).await?;
    }
    Ok(())
}

/// Waits until every step's object reports `to` replicas, all ready and up to date.
async fn wait_ready(t: &ClusterHandle, plan: &ScalePlan, timeout: Duration) -> Result<(), Error> {
    let what = format!("waiting for cluster {} to reach its replica counts", t.name);
    kclient::render::wait_until(&what, timeout, Duration::from_secs(1), || async {
        let mut pending = Vec::new();
        let cp = t.control_plane().await?.map(|(_, v)| v);
        let mds = t.machine_deployments().await?;
        // Workers are done when the extra Machines are gone, so they are counted per
        // MachineDeployment (a Kamaji control plane has no Machines to count).
        let machines = if plan.steps.iter().any(|s| s.role == Role::Workers) {
            t.machines().await?
        } else {
            Vec::new()
        };
        for s in &plan.steps {
            let obj = match s.role {
                Role::ControlPlane => cp.clone(),
                Role::Workers => deployment_of(&s.target, &mds).cloned(),
            };
            let Some(obj) = obj else {
                pending.push(format!("{} not found yet", s.target));
                continue;
            };
            let owned = match s.role {
                Role::ControlPlane => None,
                Role::Workers => Some(
                    machines
                        .iter()
                        .filter(|m| {
                            kcore::json::label(m, DEPLOYMENT_NAME_LABEL) == Some(name_of(&obj))
                        })
                        .count(),
                ),
            };
            if let Some(why) = s.pending(&obj, owned) {
                pending.push(why);
            }
        }
        Ok(if pending.is_empty() {
            Poll::Ready(())
        } else {
            Poll::Pending(pending.join("; "))
        })
    })
    .await?;
    kclient::render::line(&format!("cluster {} scaled: replicas ready", t.name));
    Ok(())
}

/// The MachineDeployment a workers step scales, among `mds` as last read: the one it names, or,
/// for a topology entry the topology controller had not generated when the plan was made, the
/// one that carries the entry's name in its topology label.
fn deployment_of<'a>(target: &ScaleTarget, mds: &'a [Value]) -> Option<&'a Value> {
    match target {
        ScaleTarget::Object { name, .. } => mds.iter().find(|m| name_of(m) == name),
        ScaleTarget::TopologyDeployment { name } => mds
            .iter()
            .find(|m| kcore::json::label(m, TOPOLOGY_DEPLOYMENT_LABEL) == Some(name.as_str())),
        ScaleTarget::TopologyControlPlane => None,
    }
}
