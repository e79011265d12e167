//! Scale preflight and patch plan for `kubectl capi scale CLUSTER --control-plane N | --workers N`.
//!
//! - KubeadmControlPlane: `spec.replicas`; with stacked etcd the count must be odd (the KCP
//!   webhook refuses even counts; external etcd is exempt); `maxSurge: 0` needs at least 3.
//! - KamajiControlPlane: `spec.replicas` (control-plane pods in the management cluster; no hosts).
//! - any other control plane: the scale subresource.
//! - MachineDeployment: `spec.replicas`.
//! - ClusterClass clusters: `spec.topology.controlPlane.replicas` and
//!   `spec.topology.workers.machineDeployments[i].replicas` on the Cluster (the generated objects
//!   would be overwritten by the topology controller).
//! - BYOH: each new Machine needs one free host matching its ByoMachineTemplate's selector.

//!
//! Submodules: `rollout` (template references and rollout strategies, which upgrade reads
//! too), `pool` (BYOH's free hosts), `steps` (the control-plane and worker steps).

mod pool;
pub mod removal;
mod rollout;
mod steps;

use serde::Serialize;
use serde_json::{Value, json};

use super::{ClusterObjects, FieldChange, Finding, ObjectPatch};
use crate::json::{self, at, str_at};

pub use pool::HostPool;
pub use rollout::{Strategy, deployment_infra_ref};
pub(crate) use rollout::{
    control_plane_infra_ref, deployment_strategy, find_template, kcp_max_surge, kcp_stacked_etcd,
};

/// Label on generated MachineDeployments naming their topology entry.
pub use crate::labels::TOPOLOGY_DEPLOYMENT_LABEL;

/// Why a scale cannot be planned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScaleError {
    #[error("nothing to scale: give --control-plane N or --workers N")]
    NothingRequested,
    #[error("replicas must be 0 or more, got {0}")]
    Negative(i64),
    #[error(
        "cluster {0} has no control plane object (spec.controlPlaneRef is empty or the object was not found)"
    )]
    NoControlPlane(String),
    #[error("a {kind} cannot have 0 replicas: scale to at least 1, or delete the cluster")]
    ZeroControlPlane { kind: String },
    #[error(
        "{kind} {name} uses stacked etcd, so its replicas must be odd (1, 3, 5...) to keep etcd quorum; {requested} is even"
    )]
    EvenWithStackedEtcd {
        kind: String,
        name: String,
        requested: i64,
    },
    #[error(
        "{kind} {name} rolls out with maxSurge 0, which needs at least 3 replicas; {requested} requested"
    )]
    MaxSurgeZeroNeedsThree {
        kind: String,
        name: String,
        requested: i64,
    },
    #[error("cluster {cluster} has no MachineDeployment {name:?}; it has: {available}")]
    UnknownDeployment {
        cluster: String,
        name: String,
        available: String,
    },
    #[error(
        "cluster {cluster} has {count} MachineDeployments ({names}): pick one with --deployment"
    )]
    AmbiguousDeployment {
        cluster: String,
        count: usize,
        names: String,
    },
    #[error("cluster {0} has no MachineDeployment to scale")]
    NoDeployments(String),
    #[error(
        "{target} needs {needed} free hosts matching {selector}{carrying}; {available} available{misfits}: register or free hosts, or pass --force to create the machines anyway (they wait in Provisioning until hosts appear)"
    )]
    NotEnoughHosts {
        target: String,
        needed: usize,
        selector: String,
        /// ` carrying Kubernetes v1.36` when the machines run on the hosts' own Kubernetes.
        carrying: String,
        available: usize,
        /// ` (another Kubernetes on node-3 (v1.35.4))`: matching hosts that do not fit.
        misfits: String,
    },
}

/// What to scale.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScaleRequest {
    /// `--control-plane N`.
    pub control_plane: Option<i64>,
    /// `--workers N`.
    pub workers: Option<i64>,
    /// `--deployment NAME` (a MachineDeployment name, or a topology `machineDeployments[].name`).
    pub deployment: Option<String>,
    /// `--force`: go ahead with too few free hosts.
    pub force: bool,
}

/// Which part of the cluster a step scales.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Role {
    ControlPlane,
    Workers,
}

/// The free-host arithmetic for one step (BYOH only).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HostCheck {
    /// The template whose selector picks hosts.
    pub template: String,
    /// The selector in kubectl syntax (empty: any host).
    pub selector: String,
    /// New Machines, each needing a host.
    pub needed: usize,
    /// Free hosts matching, not already counted for an earlier step; absent when the step needs
    /// no host and the pool was not read (a scale-down reads no hosts).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub available: Option<usize>,
    pub ok: bool,
}

/// The object whose replicas a step changes. On a ClusterClass cluster the patch goes to the
/// Cluster's topology while this names the generated object, or, before the topology
/// controller has created it, the topology entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScaleTarget {
    /// An object that exists: a control plane or a MachineDeployment.
    Object { kind: String, name: String },
    /// A ClusterClass cluster's control plane, not created yet.
    TopologyControlPlane,
    /// A ClusterClass cluster's `machineDeployments` entry `name`, whose MachineDeployment does
    /// not exist yet (once it does, it carries [`TOPOLOGY_DEPLOYMENT_LABEL`] with that name).
    TopologyDeployment { name: String },
}

impl ScaleTarget {
    /// The existing object `v`.
    fn of(v: &Value) -> ScaleTarget {
        ScaleTarget::Object {
            kind: json::kind(v).to_string(),
            name: json::name(v).to_string(),
        }
    }
}

/// `Kind/name`, `ControlPlane (topology)` or `MachineDeployment (topology NAME)`: how steps,
/// findings and waits name the target, and how the plan serializes it.
impl std::fmt::Display for ScaleTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ScaleTarget::Object { kind, name } => write!(f, "{kind}/{name}"),
            ScaleTarget::TopologyControlPlane => f.write_str("ControlPlane (topology)"),
            ScaleTarget::TopologyDeployment { name } => {
                write!(f, "MachineDeployment (topology {name})")
            }
        }
    }
}

impl Serialize for ScaleTarget {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// One scale step.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScaleStep {
    pub role: Role,
    /// The object whose replicas change (serialized as its display text, `Kind/name`).
    pub target: ScaleTarget,
    pub from: Option<i64>,
    pub to: i64,
    pub patch: ObjectPatch,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hosts: Option<HostCheck>,
}

impl ScaleStep {
    /// Why `obj` (this step's object as last read) has not reached the step's count, or `None`
    /// once it has. `machines` is how many Machines the object owns, deleting ones included
    /// (workers; `None` where there are none to count, as for a Kamaji control plane): a
    /// scale-down is done when the extra Machines are gone, not when the counters say so. A
    /// status older than the object's spec (`observedGeneration` behind `generation`) is not
    /// believed: right after a patch it still shows the previous count.
    pub fn pending(&self, obj: &Value, machines: Option<usize>) -> Option<String> {
        let to = self.to;
        let r = crate::fields::replicas(obj);
        let observed = match (
            obj.pointer("/status/observedGeneration")
                .and_then(Value::as_i64),
            obj.pointer("/metadata/generation").and_then(Value::as_i64),
        ) {
            (Some(seen), Some(generation)) => seen >= generation,
            _ => true,
        };
        let machines_done = machines.is_none_or(|n| i64::try_from(n).is_ok_and(|n| n == to));
        let done = observed
            && machines_done
            && r.desired == Some(to)
            && r.current.unwrap_or(0) == to
            && r.ready.unwrap_or(0) == to
            && r.up_to_date.unwrap_or(to) == to;
        if done {
            return None;
        }
        let mut why = format!(
            "{}: {}/{to} ready, {} current",
            self.target,
            r.ready.unwrap_or(0),
            r.current.unwrap_or(0)
        );
        if let Some(n) = machines.filter(|_| !machines_done) {
            why.push_str(&format!(", {n} machines"));
        }
        if !observed {
            why.push_str(" (status not yet updated)");
        }
        Some(why)
    }
}

/// The plan: steps to apply, and findings to show.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScalePlan {
    pub cluster: String,
    pub namespace: String,
    pub steps: Vec<ScaleStep>,
    pub findings: Vec<Finding>,
}

impl ScalePlan {
    /// Whether a step adds Machines (and so, on BYOH, needs free hosts).
    pub fn grows(&self) -> bool {
        self.steps.iter().any(|s| s.to > s.from.unwrap_or(0))
    }

    /// Whether no step changes anything.
    pub fn is_noop(&self) -> bool {
        self.steps.iter().all(|s| s.from == Some(s.to))
    }
}

/// Plan a scale. `hosts` is the BYOH pool (None when the cluster does not use BYOH or hosts
/// were not listed; the host preflight is then skipped, and a BYOH step that needs no host
/// still says so). [`ScalePlan::grows`] on a plan made without hosts says whether the pool must
/// be read at all.
pub fn plan_scale(
    objs: &ClusterObjects<'_>,
    req: &ScaleRequest,
    mut hosts: Option<&mut HostPool<'_>>,
) -> Result<ScalePlan, ScaleError> {
    if req.control_plane.is_none() && req.workers.is_none() {
        return Err(ScaleError::NothingRequested);
    }
    for n in [req.control_plane, req.workers].into_iter().flatten() {
        if n < 0 {
            return Err(ScaleError::Negative(n));
        }
    }
    let cluster = objs.cluster;
    let scaling = steps::Scaling {
        objs,
        req,
        topology: at(cluster, &["spec", "topology"]).filter(|t| !t.is_null()),
        cname: json::name(cluster).to_string(),
        ns: json::namespace(cluster).to_string(),
    };
    let mut plan = ScalePlan {
        cluster: scaling.cname.clone(),
        namespace: scaling.ns.clone(),
        steps: vec![],
        findings: vec![],
    };
    if let Some(n) = req.control_plane {
        let step = scaling.control_plane_step(n, hosts.as_deref_mut(), &mut plan.findings)?;
        plan.steps.push(step);
    }
    if let Some(n) = req.workers {
        let step = scaling.workers_step(n, hosts, &mut plan.findings)?;
        plan.steps.push(step);
    }
    released_hosts(&mut plan);
    Ok(plan)
}

/// Notes the hosts a scale-down gives back to the pool.
fn released_hosts(plan: &mut ScalePlan) {
    for s in &plan.steps {
        if let (Some(from), Some(h)) = (s.from, &s.hosts)
            && s.to < from
            && h.needed == 0
        {
            plan.findings.push(Finding::info(format!(
                "{}: {} hosts are released by their agents and return to the pool once cleaned up",
                s.target,
                from - s.to
            )));
        }
    }
}

/// The `apiVersion` of an object, or a fallback.
fn api_version(v: &Value, fallback: &str) -> String {
    str_at(v, &["apiVersion"]).unwrap_or(fallback).to_string()
}

fn replicas_patch(obj: &Value, from: Option<i64>, n: i64, scale_subresource: bool) -> ObjectPatch {
    let path = "/spec/replicas";
    ObjectPatch {
        api_version: api_version(obj, ""),
        kind: json::kind(obj).to_string(),
        namespace: json::namespace(obj).to_string(),
        name: json::name(obj).to_string(),
        subresource: scale_subresource.then(|| "scale".to_string()),
        changes: vec![FieldChange {
            path: path.into(),
            from: json!(from),
            to: json!(n),
        }],
        json_patch: json!([{"op": "add", "path": path, "value": n}]),
        merge_patch: Some(json!({"spec": {"replicas": n}})),
    }
}

#[cfg(test)]
mod tests;
