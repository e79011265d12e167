//! Upgrade plans for `kubectl capi upgrade CLUSTER --to VERSION [--plan]`.
//!
//! Rules (CAPI book "Upgrading clusters", KCP webhook, Kubernetes version-skew policy):
//! - versions are semver with a leading `v`; no downgrades;
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

use std::collections::BTreeMap;

use crate::version::{KubeVersion, VersionError};
use serde::Serialize;
use serde_json::{Map, Value, json};

use super::scale::{
    self, control_plane_infra_ref, deployment_infra_ref, deployment_strategy, find_template,
    kcp_max_surge,
};
use super::selector::LabelSelector;
use super::{ClusterObjects, FieldChange, Finding, ObjectPatch, Severity};
use crate::json::{self, at, i64_at, str_at};

/// The largest number of minors a kubelet may trail the API server (KEP-3935, Kubernetes ≥ 1.28).
pub const MAX_KUBELET_SKEW: u64 = 3;

/// Why an upgrade cannot be planned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UpgradeError {
    #[error("version {0:?} must start with v, e.g. v{0}")]
    MissingV(String),
    #[error("version {input:?} is not semver (vMAJOR.MINOR.PATCH, e.g. v1.33.1): {reason}")]
    Malformed { input: String, reason: String },
    #[error(
        "{target} is at {current}; {to} would be a downgrade, which Kubernetes does not support"
    )]
    Downgrade {
        target: String,
        current: String,
        to: String,
    },
    #[error("{target} is at {current}; upgrading across major versions to {to} is not supported")]
    MajorChange {
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

/// Parse a Kubernetes version: semver with a leading `v` (`v1.33.1`, `v1.33.1-rc.0`, `v1.30.4+rke2r1`).
pub fn parse_version(s: &str) -> Result<KubeVersion, UpgradeError> {
    KubeVersion::parse_v(s).map_err(|e| match e {
        VersionError::MissingV(bare) => UpgradeError::MissingV(bare),
        VersionError::Malformed { input, reason } => UpgradeError::Malformed { input, reason },
    })
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
#[derive(Debug, Clone, Default)]
pub struct UpgradeRequest {
    /// `--to`.
    pub to: String,
    pub control_plane_only: bool,
    pub workers_only: bool,
    pub worker_strategy: WorkerStrategy,
    pub clone_templates: CloneTemplates,
    /// Versions known to exist (e.g. ClusterClass `spec.kubernetesVersions`, host images, BYOH
    /// bundles): intermediate minors use the newest patch listed; otherwise `vX.Y.0`.
    pub available_versions: Vec<String>,
    /// Go ahead despite blocking findings (short of spare hosts).
    pub force: bool,
}

/// Versions observed on the cluster: per `Kind/name`, the lowest version running.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Observed {
    pub versions: BTreeMap<String, String>,
}

fn key(v: &Value) -> String {
    format!("{}/{}", json::kind(v), json::name(v))
}

fn min_version<'a>(it: impl Iterator<Item = &'a str>) -> Option<KubeVersion> {
    it.filter_map(|s| parse_version(s).ok()).min()
}

impl Observed {
    /// Read what runs: control-plane `status.version`, MachineDeployment `status.versions`, and
    /// the Machines' `spec.version` (labels `cluster.x-k8s.io/control-plane-name`,
    /// `cluster.x-k8s.io/deployment-name`), keeping the lowest per object.
    pub fn from_objects(objs: &ClusterObjects<'_>, machines: &[Value]) -> Self {
        let mut versions = BTreeMap::new();
        fn put(versions: &mut BTreeMap<String, String>, k: String, v: Option<KubeVersion>) {
            if let Some(v) = v {
                versions.insert(k, v.to_string());
            }
        }
        if let Some(cp) = objs.control_plane {
            let cp_name = json::name(cp);
            let from_machines = min_version(
                machines
                    .iter()
                    .filter(|m| {
                        json::label(m, "cluster.x-k8s.io/control-plane-name") == Some(cp_name)
                    })
                    .filter_map(|m| str_at(m, &["spec", "version"])),
            );
            let status = version_at(cp, &["status", "version"]);
            put(
                &mut versions,
                key(cp),
                [from_machines, status].into_iter().flatten().min(),
            );
        }
        for md in objs.machine_deployments {
            let name = json::name(md);
            let from_machines = min_version(
                machines
                    .iter()
                    .filter(|m| json::label(m, "cluster.x-k8s.io/deployment-name") == Some(name))
                    .filter_map(|m| str_at(m, &["spec", "version"])),
            );
            let from_status = min_version(
                at(md, &["status", "versions"])
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|v| str_at(v, &["version"])),
            );
            put(
                &mut versions,
                key(md),
                [from_machines, from_status].into_iter().flatten().min(),
            );
        }
        if at(objs.cluster, &["spec", "topology"]).is_some() {
            let all: Vec<KubeVersion> = versions
                .values()
                .filter_map(|v| parse_version(v).ok())
                .collect();
            let from_status = min_version(
                ["controlPlane", "workers"]
                    .iter()
                    .filter_map(|p| {
                        at(objs.cluster, &["status", p, "versions"]).and_then(Value::as_array)
                    })
                    .flatten()
                    .filter_map(|v| str_at(v, &["version"])),
            );
            put(
                &mut versions,
                key(objs.cluster),
                all.into_iter().chain(from_status).min(),
            );
        }
        Observed { versions }
    }

    fn get(&self, k: &str) -> Option<KubeVersion> {
        self.versions.get(k).and_then(|v| parse_version(v).ok())
    }
}

/// Which part a step upgrades.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
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
    pub from_version: String,
    pub to_version: String,
    /// Minors the reconciler walks through on its own (Kamaji), in order, ending at `to_version`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub via: Vec<String>,
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
    pub from_version: String,
    pub to_version: String,
    /// The minors in order, ending with the target.
    pub path: Vec<String>,
    pub steps: Vec<UpgradeStep>,
    pub findings: Vec<Finding>,
    /// A finding of severity Error that `--force` did not waive.
    pub blocked: bool,
}

impl UpgradePlan {
    /// The steps still to do, given what runs now: a step is done when its target's observed
    /// version is at least the step's version.
    pub fn remaining(&self, observed: &Observed) -> Vec<&UpgradeStep> {
        self.steps
            .iter()
            .filter(|s| {
                let to = parse_version(&s.to_version).ok();
                !matches!((observed.get(&s.target), to), (Some(o), Some(t)) if o >= t)
            })
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
    let to = parse_version(&req.to)?;
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

    // Current versions: the lower of spec and observed.
    let current = |obj: &Value, spec_path: &[&str]| -> Option<KubeVersion> {
        let spec = version_at(obj, spec_path);
        let obs = observed.get(&key(obj));
        [spec, obs].into_iter().flatten().min()
    };
    let cp_kind = match objs.control_plane.map(json::kind) {
        Some("KubeadmControlPlane") => CpKind::Kubeadm,
        Some("KamajiControlPlane") => CpKind::Kamaji,
        _ => CpKind::Other,
    };
    let cp_version = match topology {
        Some(t) => {
            let spec = str_at(t, &["version"]).and_then(|s| parse_version(s).ok());
            [
                spec,
                observed.get(&key(cluster)),
                objs.control_plane
                    .and_then(|c| current(c, &["spec", "version"])),
            ]
            .into_iter()
            .flatten()
            .min()
        }
        None => objs
            .control_plane
            .and_then(|c| current(c, &["spec", "version"])),
    }
    .ok_or_else(|| UpgradeError::NoControlPlane(cname.clone()))?;

    // MachineDeployments with their current versions.
    let mds: Vec<(&Value, KubeVersion)> = objs
        .machine_deployments
        .iter()
        .filter_map(|m| current(m, &["spec", "template", "spec", "version"]).map(|v| (m, v)))
        .collect();

    let cp_target = objs.control_plane.map(key).unwrap_or_else(|| key(cluster));
    if to.major != cp_version.major {
        return Err(UpgradeError::MajorChange {
            target: cp_target,
            current: cp_version.to_string(),
            to: to.to_string(),
        });
    }
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
    for (m, v) in &mds {
        if !req.control_plane_only && *v > to {
            return Err(UpgradeError::Downgrade {
                target: key(m),
                current: v.to_string(),
                to: to.to_string(),
            });
        }
        if *v > cp_version {
            p.findings.push(Finding::error(format!(
                "{} runs {} but the control plane runs {}: kubelets must not be newer than the API server",
                key(m),
                v,
                cp_version
            )));
        } else if cp_version.minor.saturating_sub(v.minor) > MAX_KUBELET_SKEW {
            p.findings.push(Finding::warning(format!(
                "{} at {} is already more than {MAX_KUBELET_SKEW} minors behind the control plane ({}): outside the version-skew policy",
                key(m),
                v,
                cp_version
            )));
        }
    }

    let path = minor_path(&cp_version, &to, &req.available_versions, &mut p.findings);
    let path_strings: Vec<String> = path.iter().map(ToString::to_string).collect();

    if let Some(t) = topology {
        p.plan_topology(t, &cp_version, &path);
    } else if req.workers_only {
        for (m, v) in &mds {
            if *v < to {
                p.md_step(m, v, &to);
            }
        }
    } else {
        let cp = objs
            .control_plane
            .ok_or_else(|| UpgradeError::NoControlPlane(cname.clone()))?;
        let strategy = match req.worker_strategy {
            WorkerStrategy::Auto if cp_kind == CpKind::Kamaji => WorkerStrategy::WithinSkew,
            WorkerStrategy::Auto => WorkerStrategy::Lockstep,
            s => s,
        };
        let workers = !req.control_plane_only;
        let mut md_versions: Vec<KubeVersion> = mds.iter().map(|(_, v)| v.clone()).collect();
        let mut cp_now = cp_version.clone();
        if strategy == WorkerStrategy::Lockstep && workers {
            // Workers behind the control plane (e.g. an apply interrupted mid-way) catch up first.
            for (k, (m, _)) in mds.iter().enumerate() {
                if md_versions[k] < cp_now {
                    p.md_step(m, &md_versions[k].clone(), &cp_now);
                    md_versions[k] = cp_now.clone();
                }
            }
        }
        let mut i = 0;
        while i < path.len() {
            // How far the control plane may go before workers must catch up.
            let j = match strategy {
                WorkerStrategy::Lockstep if workers => i,
                _ if !workers || md_versions.is_empty() => path.len() - 1,
                _ => {
                    let min_w = md_versions
                        .iter()
                        .min()
                        .map(|v| v.minor)
                        .unwrap_or(cp_now.minor);
                    match path[i..]
                        .iter()
                        .rposition(|v| v.minor <= min_w + MAX_KUBELET_SKEW)
                    {
                        Some(k) => i + k,
                        None => {
                            // Already out of skew: bring the workers up to the control plane first.
                            for (k, (m, _)) in mds.iter().enumerate() {
                                if md_versions[k] < cp_now {
                                    p.md_step(m, &md_versions[k].clone(), &cp_now);
                                    md_versions[k] = cp_now.clone();
                                }
                            }
                            continue;
                        }
                    }
                }
            };
            let segment = &path[i..=j];
            if cp_kind == CpKind::Kamaji {
                p.cp_step(cp, cp_kind, &cp_now, segment);
            } else {
                for v in segment {
                    p.cp_step(cp, cp_kind, &cp_now, std::slice::from_ref(v));
                    cp_now = v.clone();
                }
            }
            cp_now = path[j].clone();
            i = j + 1;
            if workers {
                let last = i >= path.len();
                for (k, (m, _)) in mds.iter().enumerate() {
                    let must = match strategy {
                        WorkerStrategy::Lockstep => true,
                        _ => {
                            last || path.get(i).is_some_and(|next| {
                                next.minor > md_versions[k].minor + MAX_KUBELET_SKEW
                            })
                        }
                    };
                    if must && md_versions[k] < cp_now {
                        p.md_step(m, &md_versions[k].clone(), &cp_now);
                        md_versions[k] = cp_now.clone();
                    }
                }
            }
        }
        if workers {
            // Whatever is still behind ends at the control plane's version (the target).
            for (k, (m, _)) in mds.iter().enumerate() {
                if md_versions[k] < cp_now {
                    p.md_step(m, &md_versions[k].clone(), &cp_now);
                    md_versions[k] = cp_now.clone();
                }
            }
        } else {
            for (m, v) in &mds {
                if to.minor > v.minor + MAX_KUBELET_SKEW {
                    p.findings.push(Finding::error(format!(
                        "{} at {} would be {} minors behind {}: the version-skew policy allows {MAX_KUBELET_SKEW}; upgrade the workers too, or stop the control plane at v{}.{}",
                        key(m),
                        v,
                        to.minor - v.minor,
                        to,
                        to.major,
                        v.minor + MAX_KUBELET_SKEW
                    )));
                }
            }
        }
    }

    if p.steps.is_empty() {
        p.findings
            .push(Finding::info(format!("nothing to do: already at {}", to)));
    }
    let is_byoh = p.steps.iter().any(|s| !s.spare_hosts.is_empty())
        || objs
            .infra_templates
            .iter()
            .any(|t| json::kind(t) == "ByoMachineTemplate");
    if is_byoh && !p.steps.is_empty() {
        let mut vs: Vec<&str> = p.steps.iter().map(|s| s.to_version.as_str()).collect();
        vs.dedup();
        p.findings.push(Finding::info(format!(
            "BYOH installs Kubernetes per version on each host: the bundles (or host images) must provide {}",
            vs.join(", ")
        )));
    }
    let blocked = !req.force && p.findings.iter().any(|f| f.severity == Severity::Error);
    let mut steps = p.steps;
    for (n, s) in steps.iter_mut().enumerate() {
        s.number = n + 1;
    }
    Ok(UpgradePlan {
        cluster: cname,
        namespace: json::namespace(cluster).to_string(),
        from_version: cp_version.to_string(),
        to_version: to.to_string(),
        path: path_strings,
        steps,
        findings: p.findings,
        blocked,
    })
}

/// The versions to pass through: each minor after `from` up to `to`'s minor, ending at `to`.
fn minor_path(
    from: &KubeVersion,
    to: &KubeVersion,
    available: &[String],
    findings: &mut Vec<Finding>,
) -> Vec<KubeVersion> {
    if to <= from {
        return vec![];
    }
    let avail: Vec<KubeVersion> = available
        .iter()
        .filter_map(|s| parse_version(s).ok())
        .filter(|v| v.pre.is_empty())
        .collect();
    // The walk one minor at a time, each intermediate minor at its newest listed patch release
    // when there is one, else at .0.
    let mut path = crate::version::minor_steps(from, to);
    path.pop();
    let mut guessed = Vec::new();
    for step in &mut path {
        match avail.iter().filter(|v| v.same_minor(step)).max() {
            Some(v) => *step = v.clone(),
            None => guessed.push(step.to_string()),
        }
    }
    if !guessed.is_empty() {
        findings.push(Finding::info(format!(
            "intermediate versions {} are .0 releases: list the patch releases you have (e.g. the newest patch of each minor) to use those instead",
            guessed.join(", ")
        )));
    }
    if let Some(latest) = avail
        .iter()
        .filter(|v| v.major == from.major && v.minor == from.minor)
        .max()
        && latest > from
        && to.minor > from.minor
    {
        findings.push(Finding::info(format!(
            "{} is not the newest patch of its minor ({} is available): consider upgrading to it first",
            from,
            latest
        )));
    }
    path.push(to.clone());
    path
}

/// Replace every form of `from` (`v1.30.4`, `1.30.4`, `v1-30-4`, `1-30-4`, `v1_30_4`) with `to` in a string.
fn replace_version(s: &str, from: &KubeVersion, to: &KubeVersion) -> String {
    let f = format!("{}.{}.{}", from.major, from.minor, from.patch);
    let t = format!("{}.{}.{}", to.major, to.minor, to.patch);
    let mut out = s.replace(&f, &t);
    for sep in ['-', '_'] {
        let fs = f.replace('.', &sep.to_string());
        let ts = t.replace('.', &sep.to_string());
        out = out.replace(&fs, &ts);
    }
    out
}

fn replace_in(
    v: &Value,
    from: &KubeVersion,
    to: &KubeVersion,
    path: &str,
    changes: &mut Vec<FieldChange>,
) -> Value {
    match v {
        Value::String(s) => {
            let r = replace_version(s, from, to);
            if &r != s {
                changes.push(FieldChange {
                    path: path.to_string(),
                    from: json!(s),
                    to: json!(r),
                });
            }
            Value::String(r)
        }
        Value::Array(a) => Value::Array(
            a.iter()
                .enumerate()
                .map(|(i, x)| replace_in(x, from, to, &format!("{path}/{i}"), changes))
                .collect(),
        ),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, x)| {
                    (
                        k.clone(),
                        replace_in(
                            x,
                            from,
                            to,
                            &format!("{path}/{}", k.replace('~', "~0").replace('/', "~1")),
                            changes,
                        ),
                    )
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Clone a template for a version change, or `None` when it does not need to change.
pub fn clone_template(
    template: &Value,
    from: &KubeVersion,
    to: &KubeVersion,
    mode: CloneTemplates,
) -> Option<TemplateClone> {
    if mode == CloneTemplates::Never {
        return None;
    }
    let mut changes = Vec::new();
    let spec = replace_in(
        template.get("spec").unwrap_or(&Value::Null),
        from,
        to,
        "/spec",
        &mut changes,
    );
    if changes.is_empty() && mode == CloneTemplates::Auto {
        return None;
    }
    let source_name = json::name(template).to_string();
    let mut new_name = replace_version(&source_name, from, to);
    if new_name == source_name {
        new_name = format!("{source_name}-v{}-{}-{}", to.major, to.minor, to.patch);
    }
    if new_name.len() > 253 {
        new_name.truncate(253);
    }
    let mut meta = Map::new();
    meta.insert("name".into(), json!(new_name));
    if let Some(ns) = str_at(template, &["metadata", "namespace"]) {
        meta.insert("namespace".into(), json!(ns));
    }
    if let Some(l) = at(template, &["metadata", "labels"]) {
        meta.insert("labels".into(), l.clone());
    }
    if let Some(Value::Object(a)) = at(template, &["metadata", "annotations"]) {
        let kept: Map<String, Value> = a
            .iter()
            .filter(|(k, _)| k.as_str() != "kubectl.kubernetes.io/last-applied-configuration")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if !kept.is_empty() {
            meta.insert("annotations".into(), Value::Object(kept));
        }
    }
    if let Some(o) = at(template, &["metadata", "ownerReferences"]) {
        meta.insert("ownerReferences".into(), o.clone());
    }
    let object = json!({
        "apiVersion": template.get("apiVersion").cloned().unwrap_or(Value::Null),
        "kind": json::kind(template),
        "metadata": meta,
        "spec": spec,
    });
    Some(TemplateClone {
        kind: json::kind(template).to_string(),
        source_name,
        new_name,
        object,
        changes,
    })
}

/// Build a nested merge patch from a JSON pointer and value.
fn merge_at(pointer: &str, value: Value) -> Value {
    pointer
        .trim_start_matches('/')
        .split('/')
        .rev()
        .fold(value, |acc, k| json!({ k: acc }))
}

fn merge_patches(a: Value, b: Value) -> Value {
    match (a, b) {
        (Value::Object(mut x), Value::Object(y)) => {
            for (k, v) in y {
                let merged = match x.remove(&k) {
                    Some(old) => merge_patches(old, v),
                    None => v,
                };
                x.insert(k, merged);
            }
            Value::Object(x)
        }
        (_, b) => b,
    }
}

impl Planner<'_, '_> {
    fn template_for(&self, obj_key: &str, kind: &str, name: &str) -> Option<Value> {
        let current = self
            .templates
            .get(obj_key)
            .cloned()
            .unwrap_or_else(|| name.to_string());
        self.clones
            .get(&current)
            .cloned()
            .or_else(|| find_template(self.objs, kind, &current).cloned())
    }

    /// The patch and clone for a version change on `obj` (control plane or MachineDeployment).
    fn version_patch(
        &mut self,
        obj: &Value,
        version_path: &str,
        infra: Option<(&str, &str)>,
        infra_name_path: &str,
        from: &KubeVersion,
        to: &KubeVersion,
    ) -> (ObjectPatch, Vec<TemplateClone>) {
        let k = key(obj);
        let mut changes = vec![FieldChange {
            path: version_path.to_string(),
            from: json!(str_at(
                obj,
                &version_path
                    .trim_start_matches('/')
                    .split('/')
                    .collect::<Vec<_>>()
            )),
            to: json!(to.to_string()),
        }];
        let mut ops = vec![json!({"op": "add", "path": version_path, "value": to.to_string()})];
        let mut merge = merge_at(version_path, json!(to.to_string()));
        let mut clones = vec![];
        if let Some((kind, name)) = infra {
            match self.template_for(&k, kind, name) {
                Some(tpl) => {
                    if let Some(c) = clone_template(&tpl, from, to, self.req.clone_templates) {
                        changes.push(FieldChange {
                            path: infra_name_path.to_string(),
                            from: json!(json::name(&tpl)),
                            to: json!(c.new_name),
                        });
                        ops.push(
                            json!({"op": "add", "path": infra_name_path, "value": c.new_name}),
                        );
                        merge = merge_patches(merge, merge_at(infra_name_path, json!(c.new_name)));
                        self.templates.insert(k.clone(), c.new_name.clone());
                        self.clones.insert(c.new_name.clone(), c.object.clone());
                        clones.push(c);
                    }
                }
                None if self.req.clone_templates != CloneTemplates::Never => {
                    let msg = format!(
                        "{k}: {kind} {name} was not found; cannot tell whether it must be cloned for the new version"
                    );
                    if !self.findings.iter().any(|f| f.message == msg) {
                        self.findings.push(Finding::warning(msg));
                    }
                }
                None => {}
            }
        }
        let patch = ObjectPatch {
            api_version: str_at(obj, &["apiVersion"]).unwrap_or("").to_string(),
            kind: json::kind(obj).to_string(),
            namespace: json::namespace(obj).to_string(),
            name: json::name(obj).to_string(),
            subresource: None,
            changes,
            json_patch: Value::Array(ops),
            merge_patch: Some(merge),
        };
        (patch, clones)
    }

    fn cp_step(&mut self, cp: &Value, kind: CpKind, from: &KubeVersion, segment: &[KubeVersion]) {
        let Some(to) = segment.last() else { return };
        let infra = control_plane_infra_ref(cp);
        let infra_path = if at(
            cp,
            &["spec", "machineTemplate", "spec", "infrastructureRef"],
        )
        .is_some()
        {
            "/spec/machineTemplate/spec/infrastructureRef/name"
        } else {
            "/spec/machineTemplate/infrastructureRef/name"
        };
        let (patch, clones) = if kind == CpKind::Kamaji {
            self.version_patch(cp, "/spec/version", None, "", from, to)
        } else {
            self.version_patch(cp, "/spec/version", infra, infra_path, from, to)
        };
        let mut spare = vec![];
        if kind == CpKind::Kubeadm
            && let Some(c) = self.spare_check(cp, infra, usize::from(kcp_max_surge(cp) > 0), |needed, available, sel| {
                let mut w = vec![];
                let replicas = i64_at(cp, &["spec", "replicas"]).unwrap_or(1);
                if replicas >= 3 {
                    w.push("set the KubeadmControlPlane's maxSurge to 0: it removes an old machine before creating a new one".to_string());
                } else {
                    w.push(format!("maxSurge 0 (replace without a spare) needs at least 3 control-plane replicas; this one has {replicas}"));
                }
                w.push(format!("free or register {} more host(s) matching {sel}", needed - available));
                w
            })
        {
            spare.push(c);
        }
        let target = key(cp);
        let wait_for = if kind == CpKind::Kamaji {
            format!(
                "{target}: the reconciler reaches {} and every control-plane pod is updated",
                to
            )
        } else {
            format!("{target}: all replicas at {}, ready and up to date", to)
        };
        self.steps.push(UpgradeStep {
            number: 0,
            role: StepRole::ControlPlane,
            target,
            from_version: from.to_string(),
            to_version: to.to_string(),
            via: if kind == CpKind::Kamaji && segment.len() > 1 {
                segment.iter().map(ToString::to_string).collect()
            } else {
                vec![]
            },
            stepped_by_reconciler: kind == CpKind::Kamaji,
            clone_templates: clones,
            patch,
            spare_hosts: spare,
            wait_for,
        });
    }

    fn md_step(&mut self, md: &Value, from: &KubeVersion, to: &KubeVersion) {
        let infra = deployment_infra_ref(md);
        let (patch, clones) = self.version_patch(
            md,
            "/spec/template/spec/version",
            infra,
            "/spec/template/spec/infrastructureRef/name",
            from,
            to,
        );
        let mut spare = vec![];
        if let Some(c) = self.md_spare(md, infra) {
            spare.push(c);
        }
        let target = key(md);
        self.steps.push(UpgradeStep {
            number: 0,
            role: StepRole::Workers,
            wait_for: format!("{target}: all replicas at {}, ready and up to date", to),
            target,
            from_version: from.to_string(),
            to_version: to.to_string(),
            via: vec![],
            stepped_by_reconciler: false,
            clone_templates: clones,
            patch,
            spare_hosts: spare,
        });
    }

    fn md_spare(&mut self, md: &Value, infra: Option<(&str, &str)>) -> Option<SpareHostCheck> {
        let st = deployment_strategy(md);
        let replicas = i64_at(md, &["spec", "replicas"]).unwrap_or(1);
        let needed = if st.type_ == "OnDelete" || replicas == 0 {
            0
        } else {
            st.max_surge.clamp(0, replicas) as usize
        };
        let name = json::name(md).to_string();
        let cluster = json::name(self.objs.cluster).to_string();
        self.spare_check(md, infra, needed, |needed, available, sel| {
            let short = (needed - available) as i64;
            vec![
                "set maxSurge 0 and maxUnavailable 1: each machine is replaced in place, one at a time".to_string(),
                "use the OnDelete strategy and delete old Machines one by one".to_string(),
                format!(
                    "scale down by {short} first: kubectl capi scale {cluster} --workers {} --deployment {name}",
                    (replicas - short).max(0)
                ),
                format!("free or register {short} more host(s) matching {sel}"),
            ]
        })
    }

    fn spare_check(
        &mut self,
        obj: &Value,
        infra: Option<(&str, &str)>,
        needed: usize,
        ways_out: impl Fn(usize, usize, &str) -> Vec<String>,
    ) -> Option<SpareHostCheck> {
        let free = self.free_hosts?;
        let (kind, name) = infra?;
        if kind != "ByoMachineTemplate" {
            return None;
        }
        let tpl = self.template_for(&key(obj), kind, name)?;
        let sel = LabelSelector::from_json(
            at(&tpl, &["spec", "template", "spec", "selector"]).unwrap_or(&Value::Null),
        )
        .ok()?;
        let available = free.iter().filter(|h| sel.matches_object(h)).count();
        let ok = available >= needed;
        let braced = sel.braced();
        let check = SpareHostCheck {
            target: key(obj),
            selector: sel.to_string(),
            needed,
            available,
            ok,
            ways_out: if ok {
                vec![]
            } else {
                ways_out(needed, available, &braced)
            },
        };
        if !ok {
            let msg = format!(
                "{}: a rolling upgrade needs {needed} spare host(s) matching {braced}; {available} available",
                key(obj)
            );
            if !self.findings.iter().any(|f| f.message == msg) {
                self.findings.push(Finding::error(msg));
            }
        }
        Some(check)
    }

    fn plan_topology(&mut self, topology: &Value, cp_version: &KubeVersion, path: &[KubeVersion]) {
        let cluster = self.objs.cluster;
        let mut from = cp_version.clone();
        for to in path {
            let mut spare = vec![];
            if let Some(cp) = self.objs.control_plane
                && json::kind(cp) == "KubeadmControlPlane"
                && let Some(c) = self.spare_check(
                    cp,
                    control_plane_infra_ref(cp),
                    usize::from(kcp_max_surge(cp) > 0),
                    |n, a, sel| {
                        vec![format!(
                            "free or register {} more host(s) matching {sel}",
                            n - a
                        )]
                    },
                )
            {
                spare.push(c);
            }
            for md in self.objs.machine_deployments {
                if let Some(c) = self.md_spare(md, deployment_infra_ref(md)) {
                    spare.push(c);
                }
            }
            let path_ptr = "/spec/topology/version";
            let patch = ObjectPatch {
                api_version: str_at(cluster, &["apiVersion"])
                    .unwrap_or("cluster.x-k8s.io/v1beta2")
                    .to_string(),
                kind: "Cluster".into(),
                namespace: json::namespace(cluster).to_string(),
                name: json::name(cluster).to_string(),
                subresource: None,
                changes: vec![FieldChange {
                    path: path_ptr.into(),
                    from: json!(str_at(topology, &["version"])),
                    to: json!(to.to_string()),
                }],
                json_patch: json!([{"op": "add", "path": path_ptr, "value": to.to_string()}]),
                merge_patch: Some(json!({"spec": {"topology": {"version": to.to_string()}}})),
            };
            self.steps.push(UpgradeStep {
                number: 0,
                role: StepRole::Topology,
                target: key(cluster),
                from_version: from.to_string(),
                to_version: to.to_string(),
                via: vec![],
                stepped_by_reconciler: false,
                clone_templates: vec![],
                patch,
                spare_hosts: spare,
                wait_for: format!(
                    "Cluster {}: control plane, then every MachineDeployment at {}, ready and up to date",
                    json::name(cluster),
                    to
                ),
            });
            from = to.clone();
        }
    }
}

// Re-exported so verbs can read strategies without importing scale.
pub use scale::Strategy;

#[cfg(test)]
mod tests;
