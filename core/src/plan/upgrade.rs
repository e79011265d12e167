//! Upgrade plans for `kubectl capi upgrade CLUSTER --to VERSION [--plan]`.
//!
//! Rules (CAPI book "Upgrading clusters", KCP webhook, Kubernetes version-skew policy):
//! - versions are Kubernetes 1.x semver (`crate::version::parse_version`); no downgrades;
//! - the control plane moves **one minor at a time** (the KCP webhook refuses more), first;
//! - a kubelet may be up to 3 minors older than the API server and never newer, so workers follow
//!   the control plane: in lockstep (each minor, the CAPI book's advice and the default), or only
//!   when they would fall out of skew ([`WorkerStrategy::WithinSkew`], the default for Kamaji
//!   control planes, which the reconciler steps through minors itself: one step record);
//! - machine templates are immutable: when a template names the old version (an image, say) it is
//!   cloned under a new name and repointed in the **same** patch as the version;
//! - ClusterClass clusters patch `spec.topology.version`, one minor at a time;
//! - on BYOH every rolling step needs `maxSurge` spare hosts matching the template's selector.
//!
//! The plan is computed from **observed** versions (the lowest version among an object's
//! machines), so re-planning after an interruption resumes where it stopped;
//! [`UpgradePlan::remaining`] gives the steps still to do.

//!
//! The module is split by concept: `observed` (what runs), `path` (the minors and the walk of
//! the control plane with its workers), `patches` (version patches and template clones), `steps`
//! (one step per object and minor); this file holds the request, the plan and its assembly.

pub mod deprecated;
mod observed;
mod patches;
mod path;
mod progress;
mod steps;

use std::collections::BTreeMap;

use crate::version::releases::Releases;
use crate::version::{KubeVersion, VersionError, parse_version};
use serde::Serialize;
use serde_json::Value;

use super::scale;
use super::{ClusterObjects, FieldChange, Finding, ObjectPatch, Severity};
use crate::json::{self, at, str_at};

pub use observed::Observed;
pub(crate) use progress::step_reached;
pub use progress::{StepLine, StepProgress, step_progress};

/// The largest number of minors a kubelet may trail the API server (KEP-3935, Kubernetes ≥ 1.28).
pub(crate) const MAX_KUBELET_SKEW: u64 = 3;

/// Why an upgrade cannot be planned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UpgradeError {
    /// The version asked for is not a Kubernetes version ([`parse_version`]).
    #[error(transparent)]
    Version(#[from] VersionError),
    #[error(
        "{target} is at {current}; {to} would be a downgrade, which Kubernetes does not support"
    )]
    Downgrade {
        target: String,
        current: String,
        to: String,
    },
    #[error(
        "cluster {0} has no control plane version: is spec.controlPlaneRef set and the control plane object listed?"
    )]
    NoControlPlane(String),
    #[error(
        "the control plane is at {cp}: workers cannot go to {to}, newer than the control plane; upgrade the control plane first"
    )]
    WorkersAheadOfControlPlane { cp: String, to: String },
    #[error("--control-plane-only and --workers-only exclude each other")]
    ConflictingScope,
    #[error(
        "cluster {0} uses a ClusterClass: spec.topology.version moves the control plane, then the workers; --control-plane-only and --workers-only do not apply"
    )]
    ScopeWithTopology(String),
}

fn version_at(v: &Value, path: &[&str]) -> Option<KubeVersion> {
    str_at(v, path).and_then(|s| parse_version(s).ok())
}

/// How workers follow the control plane.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub enum WorkerStrategy {
    /// Lockstep, except for Kamaji control planes (within skew).
    #[default]
    Auto,
    /// After each control-plane minor, every MachineDeployment goes to it.
    Lockstep,
    /// Workers move only when the next control-plane minor would put them more than 3 minors
    /// behind, and at the end (fewer rollouts; each worker jump stays within the skew policy).
    WithinSkew,
}

/// When to clone machine templates.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub enum CloneTemplates {
    /// Clone when the template's spec names the current version (e.g. an image `...-v1.30.4`).
    #[default]
    Auto,
    /// Clone on every step (the provider picks images by template, e.g. a new image per version).
    Always,
    Never,
}

/// What to upgrade.
#[derive(Debug, Clone)]
pub struct UpgradeRequest {
    /// `--to`.
    pub to: KubeVersion,
    pub control_plane_only: bool,
    pub workers_only: bool,
    pub worker_strategy: WorkerStrategy,
    pub clone_templates: CloneTemplates,
    /// The newest patch release of each minor (stable-release markers, the ClusterClass's
    /// list, the shipped table): the walk steps through them ([`Releases::walk`]).
    pub releases: Releases,
    /// Go ahead despite blocking findings (short of spare hosts).
    pub force: bool,
}

impl UpgradeRequest {
    /// The whole cluster to `to`, as the defaults have it: workers in lockstep (within skew
    /// behind a Kamaji control plane), templates cloned when they name the version, through the
    /// shipped patch releases, blocked by blocking findings.
    pub fn new(to: KubeVersion) -> UpgradeRequest {
        UpgradeRequest {
            to,
            control_plane_only: false,
            workers_only: false,
            worker_strategy: WorkerStrategy::default(),
            clone_templates: CloneTemplates::default(),
            releases: Releases::default(),
            force: false,
        }
    }
}

fn key(v: &Value) -> String {
    format!("{}/{}", json::kind(v), json::name(v))
}

/// Which part a step upgrades.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
pub enum StepRole {
    ControlPlane,
    Workers,
    /// A ClusterClass cluster: CAPI rolls the control plane, then the workers.
    Topology,
}

/// A machine template cloned for a step (templates are immutable).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TemplateClone {
    pub kind: String,
    pub source_name: String,
    pub new_name: String,
    /// The object to create: the source with the new name and the version replaced in its spec.
    pub object: Value,
    /// The spec fields that changed.
    pub changes: Vec<FieldChange>,
}

/// Spare BYOH hosts a rolling step needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SpareHostCheck {
    /// `Kind/name` of the object rolling.
    pub target: String,
    pub selector: String,
    pub needed: usize,
    pub available: usize,
    pub ok: bool,
    /// What to do when short.
    pub ways_out: Vec<String>,
}

/// One step of an upgrade.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UpgradeStep {
    /// Position in the full plan, from 1.
    pub number: usize,
    pub role: StepRole,
    /// `Kind/name` of the object whose version changes (the Cluster for topology steps).
    pub target: String,
    pub from_version: KubeVersion,
    pub to_version: KubeVersion,
    /// Minors the reconciler walks through on its own (Kamaji), in order, ending at `to_version`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub via: Vec<KubeVersion>,
    /// The reconciler steps the minors (one record for several minors).
    pub stepped_by_reconciler: bool,
    /// Templates to create before the patch.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub clone_templates: Vec<TemplateClone>,
    pub patch: ObjectPatch,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub spare_hosts: Vec<SpareHostCheck>,
    /// What "done" means, in words.
    pub wait_for: String,
}

/// The whole plan.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UpgradePlan {
    pub cluster: String,
    pub namespace: String,
    /// The control plane's observed version (for workers-only plans too).
    pub from_version: KubeVersion,
    pub to_version: KubeVersion,
    /// The minors in order, ending with the target.
    pub path: Vec<KubeVersion>,
    pub steps: Vec<UpgradeStep>,
    pub findings: Vec<Finding>,
    /// A finding of severity Error that `--force` did not waive.
    pub blocked: bool,
}

impl UpgradePlan {
    /// What blocks the plan: the messages of its error findings.
    pub fn blocking(&self) -> Vec<&str> {
        self.findings
            .iter()
            .filter(|f| f.severity == Severity::Error)
            .map(|f| f.message.as_str())
            .collect()
    }

    /// The steps still to do, given what runs now: a step is done when its target's observed
    /// version is at least the step's version.
    pub fn remaining(&self, observed: &Observed) -> Vec<&UpgradeStep> {
        self.steps
            .iter()
            .filter(|s| observed.get(&s.target).is_none_or(|o| o < s.to_version))
            .collect()
    }

    /// The first step not done, if any (where an interrupted apply resumes).
    pub fn resume_point(&self, observed: &Observed) -> Option<&UpgradeStep> {
        self.remaining(observed).into_iter().next()
    }
}

/// Control-plane flavour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CpKind {
    Kubeadm,
    Kamaji,
    Other,
}

struct Planner<'a, 'b> {
    objs: &'b ClusterObjects<'a>,
    req: &'b UpgradeRequest,
    free_hosts: Option<&'b [&'a Value]>,
    steps: Vec<UpgradeStep>,
    findings: Vec<Finding>,
    /// Current template name per object key (changes as steps clone).
    templates: BTreeMap<String, String>,
    /// Cloned templates by name, so a later step can clone the clone.
    clones: BTreeMap<String, Value>,
}

/// Plan an upgrade. `free_hosts` are the Available ByoHosts (None: no BYOH check).
pub fn plan_upgrade(
    objs: &ClusterObjects<'_>,
    req: &UpgradeRequest,
    observed: &Observed,
    free_hosts: Option<&[&Value]>,
) -> Result<UpgradePlan, UpgradeError> {
    if req.control_plane_only && req.workers_only {
        return Err(UpgradeError::ConflictingScope);
    }
    let to = &req.to;
    let cluster = objs.cluster;
    let cname = json::name(cluster).to_string();
    let topology = at(cluster, &["spec", "topology"]).filter(|t| !t.is_null());
    if topology.is_some() && (req.control_plane_only || req.workers_only) {
        return Err(UpgradeError::ScopeWithTopology(cname));
    }
    let mut p = Planner {
        objs,
        req,
        free_hosts,
        steps: vec![],
        findings: vec![],
        templates: BTreeMap::new(),
        clones: BTreeMap::new(),
    };
    let cp_version = control_plane_version(objs, observed, topology)
        .ok_or_else(|| UpgradeError::NoControlPlane(cname.clone()))?;
    // MachineDeployments with their current versions.
    let mds: Vec<(&Value, KubeVersion)> = objs
        .machine_deployments
        .iter()
        .filter_map(|m| {
            current(observed, m, &["spec", "template", "spec", "version"]).map(|v| (m, v))
        })
        .collect();
    check_versions(objs, req, &cp_version, to, &mds, &mut p.findings)?;

    let path = path::minor_path(&cp_version, to, &req.releases, &mut p.findings);
    if let Some(t) = topology {
        p.plan_topology(t, &cp_version, &path);
    } else if req.workers_only {
        for (m, v) in &mds {
            if v < to {
                p.md_step(m, v, to);
            }
        }
    } else {
        let cp = objs
            .control_plane
            .ok_or_else(|| UpgradeError::NoControlPlane(cname.clone()))?;
        let kind = match json::kind(cp) {
            "KubeadmControlPlane" => CpKind::Kubeadm,
            "KamajiControlPlane" => CpKind::Kamaji,
            _ => CpKind::Other,
        };
        p.plan_walk(cp, kind, &cp_version, to, &mds, &path);
    }
    Ok(p.into_plan(cname, &cp_version, to, path))
}

/// An object's current version: the lower of its spec (at `spec_path`) and what runs.
fn current(observed: &Observed, obj: &Value, spec_path: &[&str]) -> Option<KubeVersion> {
    let spec = version_at(obj, spec_path);
    let obs = observed.get(&key(obj));
    [spec, obs].into_iter().flatten().min()
}

/// Where an upgrade's walk starts: the control plane's current version (with a ClusterClass,
/// the lowest of the topology's, the Cluster's observed one and the control plane's).
pub fn walk_start(objs: &ClusterObjects<'_>, observed: &Observed) -> Option<KubeVersion> {
    let topology = at(objs.cluster, &["spec", "topology"]).filter(|t| !t.is_null());
    control_plane_version(objs, observed, topology)
}

/// The control plane's current version; with a ClusterClass, the lowest of the topology's, the
/// Cluster's observed one and the control plane's.
fn control_plane_version(
    objs: &ClusterObjects<'_>,
    observed: &Observed,
    topology: Option<&Value>,
) -> Option<KubeVersion> {
    let cp = objs
        .control_plane
        .and_then(|c| current(observed, c, &["spec", "version"]));
    match topology {
        Some(t) => {
            let spec = str_at(t, &["version"]).and_then(|s| parse_version(s).ok());
            [spec, observed.get(&key(objs.cluster)), cp]
                .into_iter()
                .flatten()
                .min()
        }
        None => cp,
    }
}

/// Refuses a downgrade, workers ahead of the control plane; notes workers already newer than
/// the control plane or out of skew. (Both versions are Kubernetes 1.x: [`parse_version`].)
fn check_versions(
    objs: &ClusterObjects<'_>,
    req: &UpgradeRequest,
    cp_version: &KubeVersion,
    to: &KubeVersion,
    mds: &[(&Value, KubeVersion)],
    findings: &mut Vec<Finding>,
) -> Result<(), UpgradeError> {
    let cp_target = objs
        .control_plane
        .map(key)
        .unwrap_or_else(|| key(objs.cluster));
    if !req.workers_only && to < cp_version {
        return Err(UpgradeError::Downgrade {
            target: cp_target,
            current: cp_version.to_string(),
            to: to.to_string(),
        });
    }
    if req.workers_only && to > cp_version {
        return Err(UpgradeError::WorkersAheadOfControlPlane {
            cp: cp_version.to_string(),
            to: to.to_string(),
        });
    }
    for (m, v) in mds {
        if !req.control_plane_only && v > to {
            return Err(UpgradeError::Downgrade {
                target: key(m),
                current: v.to_string(),
                to: to.to_string(),
            });
        }
        if v > cp_version {
            findings.push(Finding::error(format!(
                "{} runs {} but the control plane runs {}: kubelets must not be newer than the API server",
                key(m),
                v,
                cp_version
            )));
        } else if cp_version.minor.saturating_sub(v.minor) > MAX_KUBELET_SKEW {
            findings.push(Finding::warning(format!(
                "{} at {} is already more than {MAX_KUBELET_SKEW} minors behind the control plane ({}): outside the version-skew policy",
                key(m),
                v,
                cp_version
            )));
        }
    }
    Ok(())
}

impl Planner<'_, '_> {
    /// The plan: the steps numbered, closing findings (nothing to do, BYOH bundles), blocked
    /// when an error finding stands without `--force`.
    fn into_plan(
        mut self,
        cluster: String,
        cp_version: &KubeVersion,
        to: &KubeVersion,
        path: Vec<KubeVersion>,
    ) -> UpgradePlan {
        if self.steps.is_empty() {
            self.findings
                .push(Finding::info(format!("nothing to do: already at {}", to)));
        }
        let is_byoh = self.steps.iter().any(|s| !s.spare_hosts.is_empty())
            || self
                .objs
                .infra_templates
                .iter()
                .any(|t| json::kind(t) == "ByoMachineTemplate");
        if is_byoh && !self.steps.is_empty() {
            let mut vs: Vec<String> = self
                .steps
                .iter()
                .map(|s| s.to_version.to_string())
                .collect();
            vs.dedup();
            self.findings.push(Finding::info(format!(
                "BYOH installs Kubernetes per version on each host: the bundles (or host images) must provide {}",
                vs.join(", ")
            )));
        }
        let blocked =
            !self.req.force && self.findings.iter().any(|f| f.severity == Severity::Error);
        let mut steps = self.steps;
        for (n, s) in steps.iter_mut().enumerate() {
            s.number = n + 1;
        }
        UpgradePlan {
            cluster,
            namespace: json::namespace(self.objs.cluster).to_string(),
            from_version: cp_version.clone(),
            to_version: to.clone(),
            path,
            steps,
            findings: self.findings,
            blocked,
        }
    }
}

// Re-exported so verbs can read strategies without importing scale.
pub use scale::Strategy;

#[cfg(test)]
mod tests;
