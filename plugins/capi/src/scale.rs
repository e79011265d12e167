//! `kubectl capi scale CLUSTER --control-plane N | --workers N [--deployment NAME]`.
//!
//! Reads the cluster, its control plane, MachineDeployments and infrastructure machine
//! templates (and, on BYOH, the host inventory), plans with `shared::plan::scale` (KCP odd-count
//! rule, free hosts matching each template's selector, ClusterClass topology fields), then
//! patches with the `kubectl-capi` field manager and, with `--wait`, follows the replicas until
//! they are ready.

use std::time::Duration;

use clap::Args as ClapArgs;
use cli::KubeFlags;
use serde_json::Value;
use shared::discovery::fields::{self, ObjectRef};
use shared::error::Error;
use shared::plan::hosts::Inventory;
use shared::plan::scale::{HostPool, ScaleError, ScalePlan, ScaleRequest, plan_scale};
use shared::plan::{ClusterObjects, Severity};
use shared::render::Poll;

use crate::day2::{CLUSTER_NAME_LABEL, DryRun, Target, display_name};

#[derive(ClapArgs, Clone, Debug)]
#[command(
    group(clap::ArgGroup::new("what").required(true).multiple(true).args(["control_plane", "workers", "remove_machine", "remove_host"])),
    after_help = "Examples:
  kubectl capi scale prod --workers 5
  kubectl capi scale prod --control-plane 3 --wait
  kubectl capi scale prod --workers 2 --deployment prod-md-gpu --dry-run
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
    /// Only print (client) or validate on the server (server) what would change
    #[arg(long, value_enum, value_name = "MODE", num_args = 0..=1, default_value = "none", default_missing_value = "client")]
    pub dry_run: DryRun,
    /// Wait until the new replica counts are ready
    #[arg(long)]
    pub wait: bool,
    /// How long --wait waits
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = cli::parse_duration)]
    pub timeout: Duration,
    #[command(flatten)]
    pub kube: KubeFlags,
}

/// Everything the plans read, fetched once.
pub struct Objects {
    pub control_plane: Option<Value>,
    pub machine_deployments: Vec<Value>,
    pub infra_templates: Vec<Value>,
    /// The BYOH inventory lists: hosts, ByoMachines, Machines, Clusters (all namespaces).
    pub inventory: Option<[Vec<Value>; 4]>,
}

impl Objects {
    pub fn cluster_objects<'a>(&'a self, t: &'a Target) -> ClusterObjects<'a> {
        ClusterObjects {
            cluster: &t.cluster,
            control_plane: self.control_plane.as_ref(),
            machine_deployments: &self.machine_deployments,
            infra_templates: &self.infra_templates,
        }
    }
}

/// Reads the control plane, deployments, their infrastructure templates and, when any template
/// is a ByoMachineTemplate, the host inventory.
pub async fn fetch(t: &Target) -> Result<Objects, Error> {
    let (control_plane, machine_deployments) =
        tokio::try_join!(t.control_plane(), t.machine_deployments())?;
    let control_plane = control_plane.map(|(_, v)| v);
    let mut refs: Vec<ObjectRef> = Vec::new();
    if let Some(cp) = &control_plane
        && let Some(r) = fields::control_plane_machine_template_ref(cp)
    {
        refs.push(r);
    }
    for md in &machine_deployments {
        if let Some(r) = fields::template_infrastructure_ref(md) {
            refs.push(r);
        }
    }
    refs.sort_by(|a, b| (&a.kind, &a.name).cmp(&(&b.kind, &b.name)));
    refs.dedup_by(|a, b| a.kind == b.kind && a.name == b.name);
    // One GET per template, all at once (a cluster has a handful).
    let gets = refs.iter().map(|r| async move {
        let ar = t.apis.resolve_ref(r)?;
        t.get_opt(&ar, &r.name).await
    });
    let infra_templates: Vec<Value> = futures::future::try_join_all(gets)
        .await?
        .into_iter()
        .flatten()
        .collect();
    let byoh = infra_templates
        .iter()
        .any(|v| v.get("kind").and_then(Value::as_str) == Some("ByoMachineTemplate"));
    let inventory = match (byoh, t.apis.byo_host()) {
        (true, Some(host_ar)) => Some(free_host_lists(t, &host_ar).await?),
        _ => None,
    };
    Ok(Objects {
        control_plane,
        machine_deployments,
        infra_templates,
        inventory,
    })
}

/// What the free-host checks need, in the inventory's shape: the ByoHosts no cluster has
/// claimed, from every namespace (BYOH picks hosts anywhere), and no ByoMachines, Machines or
/// Clusters. BYOH selects hosts for a ByoMachine with the same `!cluster.x-k8s.io/cluster-name`
/// requirement (`attachByoHost` in `controllers/infrastructure/byomachine_controller.go`,
/// BYOH v0.5.0), and an unclaimed host's state depends on nothing but the host
/// (`Inventory::state`), so the plan sees the same Available hosts while the cost follows the
/// free pool, not the fleet's Machines and claimed hosts.
pub async fn free_host_lists(
    t: &Target,
    host_ar: &kube::discovery::ApiResource,
) -> Result<[Vec<Value>; 4], Error> {
    let lp = kube::api::ListParams::default().labels(&format!("!{CLUSTER_NAME_LABEL}"));
    // Parsed into what a host's state and the selectors read (labels, annotations, status), in
    // one response: paged, a selector that matches few of many hosts makes `continue` pages,
    // which an idle API server reads from etcd (`shared::api::whole`); `make bench` saw this
    // plan at 2.4x its empty-fleet cost with 10,000 claimed hosts elsewhere.
    let hosts = shared::api::list_whole(
        &t.conn,
        host_ar,
        None,
        &lp,
        false,
        crate::fleet::Narrow::host,
    )
    .await?;
    Ok([hosts, Vec::new(), Vec::new(), Vec::new()])
}

/// Hosts, ByoMachines, Machines and Clusters in all namespaces (BYOH picks hosts anywhere).
pub async fn inventory_lists(
    t: &Target,
    host_ar: &kube::discovery::ApiResource,
) -> Result<[Vec<Value>; 4], Error> {
    let hosts = t.list_all(host_ar, None).await?;
    let byomachines = match t
        .apis
        .provider_kind(shared::discovery::INFRASTRUCTURE_GROUP, "ByoMachine")
    {
        Some(ar) => t.list_all(&ar, None).await?,
        None => Vec::new(),
    };
    let machines = t.list_all(&t.core("Machine")?, None).await?;
    let clusters = t.list_all(&t.cluster_ar, None).await?;
    Ok([hosts, byomachines, machines, clusters])
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

/// Prints the plan's findings: warnings as `Warning:`, the rest as notes.
pub fn show_findings(findings: &[shared::plan::Finding]) {
    for f in findings {
        match f.severity {
            Severity::Info => shared::render::info(&f.message),
            Severity::Warning | Severity::Error => shared::render::warn(&f.message),
        }
    }
}

/// The most machines one `--remove-machine`/`--remove-host` list may name.
const MAX_REMOVALS: usize = 500;

/// The Machines named by `--remove-machine`, and those on the hosts of `--remove-host`.
async fn machines_to_remove(t: &Target, args: &Args) -> Result<Vec<Value>, Error> {
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
                    suggestions: shared::error::closest_names(
                        &n,
                        known.iter().map(crate::day2::name_of),
                    ),
                });
            }
        }
    }
    Ok(machines)
}

/// The Machine a host serves: host `status.machineRef` (BYOH sets it when it attaches a
/// ByoMachine) → that ByoMachine's owning Machine.
pub async fn machine_on_host(
    t: &Target,
    host_ar: &kube::discovery::ApiResource,
    host: &str,
) -> Result<String, Error> {
    let found = crate::hosts_maint::find_host(&t.conn, host_ar, host, Some(&t.namespace)).await?;
    let h = &found;
    let Some(bm) = kcore::json::str_at(h, &["status", "machineRef", "name"]) else {
        return Err(Error::other(format!(
            "ByoHost {host} serves no machine (it is free), so there is nothing to remove on it"
        )));
    };
    let bm_ns = kcore::json::str_at(h, &["status", "machineRef", "namespace"])
        .unwrap_or(kcore::json::namespace(h));
    if bm_ns != t.namespace {
        return Err(Error::other(format!(
            "ByoHost {host} serves a machine in namespace {bm_ns}, not of cluster {} in {}",
            t.name, t.namespace
        )));
    }
    let bm_ar = t
        .apis
        .provider_kind(shared::discovery::INFRASTRUCTURE_GROUP, "ByoMachine")
        .ok_or_else(|| Error::other("this management cluster serves no ByoMachine API"))?;
    let obj = t.get_opt(&bm_ar, bm).await?.ok_or_else(|| {
        Error::other(format!(
            "ByoHost {host} names ByoMachine {bm}, which no longer exists; its machine is already going"
        ))
    })?;
    obj.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .and_then(|refs| {
            refs.iter()
                .find(|r| r.get("kind").and_then(Value::as_str) == Some("Machine"))
        })
        .and_then(|r| r.get("name").and_then(Value::as_str))
        .map(str::to_string)
        .ok_or_else(|| {
            Error::other(format!(
                "ByoMachine {bm} on host {host} has no owning Machine yet; try again in a moment"
            ))
        })
}

pub async fn run(args: &Args) -> Result<(), Error> {
    let t = Target::load(&args.kube, &args.cluster).await?;
    let objs = fetch(&t).await?;
    let co = objs.cluster_objects(&t);
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
    let plan = match &objs.inventory {
        Some([hosts, bms, machines, clusters]) => {
            let inv = Inventory::build(hosts, bms, machines, clusters, None);
            let mut pool = HostPool::from_inventory(&inv, hosts);
            plan_scale(&co, &req, Some(&mut pool))
        }
        None => plan_scale(&co, &req, None),
    }
    .map_err(scale_error)?;
    show_findings(&plan.findings);
    if args.dry_run == DryRun::Client {
        shared::render::raw(shared::render::to_yaml(&plan)?.as_bytes());
    }
    // The marks go first: once the replicas drop, the MachineSet picks what to delete.
    for m in &marks {
        let ar = t.resource_of(&m.api_version, &m.kind)?;
        t.patch(&ar, m, args.dry_run).await?;
        shared::render::line(&format!(
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
            shared::render::line(&format!("{what} already at {} replicas", s.to));
            continue;
        }
        let ar = t.resource_of(&p.api_version, &p.kind)?;
        t.patch(&ar, p, args.dry_run).await?;
        let from = s.from.map(|f| f.to_string()).unwrap_or_else(|| "?".into());
        shared::render::line(&format!(
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
async fn wait_ready(t: &Target, plan: &ScalePlan, timeout: Duration) -> Result<(), Error> {
    let what = format!("waiting for cluster {} to reach its replica counts", t.name);
    shared::render::wait_until(&what, timeout, Duration::from_secs(1), || async {
        let mut pending = Vec::new();
        let cp = t.control_plane().await?.map(|(_, v)| v);
        let mds = t.machine_deployments().await?;
        for s in &plan.steps {
            let obj = match s.role {
                shared::plan::scale::Role::ControlPlane => cp.clone(),
                shared::plan::scale::Role::Workers => {
                    let name = s.target.split_once('/').map(|(_, n)| n).unwrap_or("");
                    mds.iter()
                        .find(|m| crate::day2::name_of(m) == name)
                        .or_else(|| {
                            // topology: the generated MachineDeployment carries the topology name
                            let tname = s
                                .target
                                .strip_prefix("MachineDeployment (topology ")
                                .and_then(|r| r.strip_suffix(')'));
                            mds.iter().find(|m| {
                                tname.is_some()
                                    && m.pointer(
                                        "/metadata/labels/topology.cluster.x-k8s.io~1deployment-name",
                                    )
                                    .and_then(Value::as_str)
                                        == tname
                            })
                        })
                        .cloned()
                }
            };
            let Some(obj) = obj else {
                pending.push(format!("{} not found yet", s.target));
                continue;
            };
            let r = fields::replicas(&obj);
            let done = r.desired == Some(s.to)
                && r.current.unwrap_or(0) == s.to
                && r.ready.unwrap_or(0) == s.to
                && r.up_to_date.unwrap_or(s.to) == s.to;
            if !done {
                pending.push(format!(
                    "{}: {}/{} ready, {} current",
                    s.target,
                    r.ready.unwrap_or(0),
                    s.to,
                    r.current.unwrap_or(0)
                ));
            }
        }
        Ok(if pending.is_empty() {
            Poll::Ready(())
        } else {
            Poll::Pending(pending.join("; "))
        })
    })
    .await?;
    shared::render::line(&format!("cluster {} scaled: replicas ready", t.name));
    Ok(())
}
