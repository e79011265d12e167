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

use serde::Serialize;
use serde_json::{Value, json};

use super::hosts::{HostState, Inventory};
use super::selector::LabelSelector;
use super::{ClusterObjects, FieldChange, Finding, ObjectPatch};
use crate::json::{self, at, i64_at, str_at};

/// Label on generated MachineDeployments naming their topology entry.
pub const TOPOLOGY_DEPLOYMENT_LABEL: &str = "topology.cluster.x-k8s.io/deployment-name";

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
        "{target} needs {needed} free hosts matching {selector}; {available} available: register or free hosts, or pass --force to create the machines anyway (they wait in Provisioning until hosts appear)"
    )]
    NotEnoughHosts {
        target: String,
        needed: usize,
        selector: String,
        available: usize,
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
    /// Free hosts matching, not already counted for an earlier step.
    pub available: usize,
    pub ok: bool,
}

/// One scale step.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScaleStep {
    pub role: Role,
    /// `Kind/name` of the object whose replicas change (for topology clusters, the generated
    /// object, while the patch goes to the Cluster).
    pub target: String,
    pub from: Option<i64>,
    pub to: i64,
    pub patch: ObjectPatch,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hosts: Option<HostCheck>,
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
    /// Whether no step changes anything.
    pub fn is_noop(&self) -> bool {
        self.steps.iter().all(|s| s.from == Some(s.to))
    }
}

/// The infrastructure template reference of a control plane (v1beta2
/// `spec.machineTemplate.spec.infrastructureRef`, v1beta1 `spec.machineTemplate.infrastructureRef`).
pub fn control_plane_infra_ref(cp: &Value) -> Option<(&str, &str)> {
    let r = at(
        cp,
        &["spec", "machineTemplate", "spec", "infrastructureRef"],
    )
    .or_else(|| at(cp, &["spec", "machineTemplate", "infrastructureRef"]))?;
    Some((str_at(r, &["kind"])?, str_at(r, &["name"])?))
}

/// The infrastructure template reference of a MachineDeployment.
pub fn deployment_infra_ref(md: &Value) -> Option<(&str, &str)> {
    let r = at(md, &["spec", "template", "spec", "infrastructureRef"])?;
    Some((str_at(r, &["kind"])?, str_at(r, &["name"])?))
}

/// KCP `maxSurge` (v1beta2 `spec.rollout.strategy.rollingUpdate.maxSurge`, v1beta1
/// `spec.rolloutStrategy.rollingUpdate.maxSurge`); MachineDeployments use
/// [`deployment_strategy`]. Integers only (KCP allows 0 or 1); defaults to 1.
pub fn kcp_max_surge(cp: &Value) -> i64 {
    at(
        cp,
        &["spec", "rollout", "strategy", "rollingUpdate", "maxSurge"],
    )
    .or_else(|| {
        at(
            cp,
            &["spec", "rolloutStrategy", "rollingUpdate", "maxSurge"],
        )
    })
    .and_then(|v| {
        v.as_i64()
            .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
    })
    .unwrap_or(1)
}

/// Whether a KubeadmControlPlane runs stacked etcd (no `clusterConfiguration.etcd.external`).
pub fn kcp_stacked_etcd(cp: &Value) -> bool {
    at(
        cp,
        &[
            "spec",
            "kubeadmConfigSpec",
            "clusterConfiguration",
            "etcd",
            "external",
        ],
    )
    .is_none_or(Value::is_null)
}

/// A MachineDeployment's rollout strategy, v1beta2 (`spec.rollout.strategy`) or v1beta1 (`spec.strategy`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Strategy {
    /// `RollingUpdate` (default) or `OnDelete`.
    pub type_: String,
    /// maxSurge resolved against the replica count (percent rounded up), default 1.
    pub max_surge: i64,
    /// maxUnavailable resolved (percent rounded down), default 0.
    pub max_unavailable: i64,
}

fn int_or_percent(v: Option<&Value>, replicas: i64, round_up: bool, default: i64) -> i64 {
    match v {
        Some(Value::Number(n)) => n.as_i64().unwrap_or(default),
        Some(Value::String(s)) => match s
            .strip_suffix('%')
            .and_then(|p| p.trim().parse::<i64>().ok())
        {
            Some(p) => {
                let x = p * replicas;
                if round_up { (x + 99) / 100 } else { x / 100 }
            }
            None => s.parse().unwrap_or(default),
        },
        _ => default,
    }
}

/// Read a MachineDeployment's strategy.
pub fn deployment_strategy(md: &Value) -> Strategy {
    let s = at(md, &["spec", "rollout", "strategy"]).or_else(|| at(md, &["spec", "strategy"]));
    let replicas = i64_at(md, &["spec", "replicas"]).unwrap_or(1);
    let ru = s.and_then(|s| s.get("rollingUpdate"));
    Strategy {
        type_: s
            .and_then(|s| str_at(s, &["type"]))
            .unwrap_or("RollingUpdate")
            .to_string(),
        max_surge: int_or_percent(ru.and_then(|r| r.get("maxSurge")), replicas, true, 1),
        max_unavailable: int_or_percent(
            ru.and_then(|r| r.get("maxUnavailable")),
            replicas,
            false,
            0,
        ),
    }
}

/// The `apiVersion` of an object, or a fallback.
fn api_version(v: &Value, fallback: &str) -> String {
    str_at(v, &["apiVersion"]).unwrap_or(fallback).to_string()
}

fn kind_name(v: &Value) -> String {
    format!("{}/{}", json::kind(v), json::name(v))
}

/// Find the infra template by kind and name in the cluster's namespace.
pub fn find_template<'a>(objs: &ClusterObjects<'a>, kind: &str, name: &str) -> Option<&'a Value> {
    let ns = json::namespace(objs.cluster);
    objs.infra_templates.iter().find(|t| {
        json::kind(t) == kind
            && json::name(t) == name
            && (json::namespace(t) == ns || json::namespace(t).is_empty())
    })
}

/// The topology entry index and MachineDeployment object selected by `--deployment`.
fn pick_deployment<'a>(
    objs: &ClusterObjects<'a>,
    wanted: Option<&str>,
) -> Result<(Option<usize>, Option<&'a Value>), ScaleError> {
    let cluster = json::name(objs.cluster).to_string();
    let topo: Vec<&str> = at(
        objs.cluster,
        &["spec", "topology", "workers", "machineDeployments"],
    )
    .and_then(Value::as_array)
    .map(|a| {
        a.iter()
            .map(|m| str_at(m, &["name"]).unwrap_or(""))
            .collect()
    })
    .unwrap_or_default();
    let is_topology = at(objs.cluster, &["spec", "topology"]).is_some();
    let md_for_topo = |tname: &str| {
        objs.machine_deployments
            .iter()
            .find(|m| json::label(m, TOPOLOGY_DEPLOYMENT_LABEL) == Some(tname))
    };
    if is_topology {
        let idx = match wanted {
            Some(w) => topo.iter().position(|t| *t == w).or_else(|| {
                // an MD object name also selects its topology entry
                objs.machine_deployments
                    .iter()
                    .find(|m| json::name(m) == w)
                    .and_then(|m| json::label(m, TOPOLOGY_DEPLOYMENT_LABEL))
                    .and_then(|t| topo.iter().position(|x| *x == t))
            }),
            None if topo.len() == 1 => Some(0),
            None if topo.is_empty() => return Err(ScaleError::NoDeployments(cluster)),
            None => {
                return Err(ScaleError::AmbiguousDeployment {
                    cluster,
                    count: topo.len(),
                    names: topo.join(", "),
                });
            }
        };
        let Some(i) = idx else {
            return Err(ScaleError::UnknownDeployment {
                cluster,
                name: wanted.unwrap_or_default().to_string(),
                available: topo.join(", "),
            });
        };
        return Ok((Some(i), md_for_topo(topo[i])));
    }
    let mds = objs.machine_deployments;
    let md = match wanted {
        Some(w) => mds.iter().find(|m| json::name(m) == w).ok_or_else(|| {
            ScaleError::UnknownDeployment {
                cluster: cluster.clone(),
                name: w.to_string(),
                available: mds.iter().map(json::name).collect::<Vec<_>>().join(", "),
            }
        })?,
        None => match mds {
            [] => return Err(ScaleError::NoDeployments(cluster)),
            [one] => one,
            _ => {
                return Err(ScaleError::AmbiguousDeployment {
                    cluster,
                    count: mds.len(),
                    names: mds.iter().map(json::name).collect::<Vec<_>>().join(", "),
                });
            }
        },
    };
    Ok((None, Some(md)))
}

/// Free-host bookkeeping across steps (a host counted for one step is not counted again).
pub struct HostPool<'a> {
    free: Vec<&'a Value>,
    taken: Vec<bool>,
}

impl<'a> HostPool<'a> {
    /// The Available hosts of an inventory.
    pub fn from_inventory(inv: &Inventory<'a>, hosts: &'a [Value]) -> Self {
        let free: Vec<&Value> = hosts
            .iter()
            .filter(|h| inv.state(h) == HostState::Available)
            .collect();
        let taken = vec![false; free.len()];
        HostPool { free, taken }
    }

    /// Free hosts given directly (already known to be Available).
    pub fn from_free(free: Vec<&'a Value>) -> Self {
        let taken = vec![false; free.len()];
        HostPool { free, taken }
    }

    /// How many untaken free hosts match; take up to `needed` of them.
    pub fn claim(&mut self, sel: &LabelSelector, needed: usize) -> usize {
        let mut matching = 0;
        let mut claimed = 0;
        for (i, h) in self.free.iter().enumerate() {
            if !self.taken[i] && sel.matches_object(h) {
                matching += 1;
                if claimed < needed {
                    self.taken[i] = true;
                    claimed += 1;
                }
            }
        }
        matching
    }
}

/// Plan a scale. `hosts` is the BYOH pool (None when the cluster does not use BYOH or hosts
/// were not listed; the host preflight is then skipped).
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
    let cname = json::name(cluster).to_string();
    let ns = json::namespace(cluster).to_string();
    let topology = at(cluster, &["spec", "topology"]).filter(|t| !t.is_null());
    let mut plan = ScalePlan {
        cluster: cname.clone(),
        namespace: ns.clone(),
        steps: vec![],
        findings: vec![],
    };

    if let Some(n) = req.control_plane {
        let cp = objs.control_plane;
        let kind = cp.map(json::kind).unwrap_or("");
        let cp_name = cp.map(json::name).unwrap_or("");
        if topology.is_none() && cp.is_none() {
            return Err(ScaleError::NoControlPlane(cname));
        }
        if let Some(cp) = cp {
            if n == 0 && kind != "KamajiControlPlane" {
                return Err(ScaleError::ZeroControlPlane {
                    kind: kind.to_string(),
                });
            }
            if kind == "KubeadmControlPlane" {
                if kcp_stacked_etcd(cp) && n % 2 == 0 {
                    return Err(ScaleError::EvenWithStackedEtcd {
                        kind: kind.into(),
                        name: cp_name.into(),
                        requested: n,
                    });
                }
                if kcp_max_surge(cp) == 0 && n < 3 {
                    return Err(ScaleError::MaxSurgeZeroNeedsThree {
                        kind: kind.into(),
                        name: cp_name.into(),
                        requested: n,
                    });
                }
            }
            if kind == "KamajiControlPlane" && n == 0 {
                plan.findings.push(Finding::warning(format!(
                    "KamajiControlPlane {cp_name} at 0 replicas stops the tenant API server: the cluster becomes unreachable"
                )));
            }
        }
        let from = match topology {
            Some(t) => i64_at(t, &["controlPlane", "replicas"])
                .or_else(|| cp.and_then(|c| i64_at(c, &["spec", "replicas"]))),
            None => cp.and_then(|c| i64_at(c, &["spec", "replicas"])),
        };
        let patch = match (topology, cp) {
            (Some(_), _) => {
                let path = "/spec/topology/controlPlane/replicas";
                ObjectPatch {
                    api_version: api_version(cluster, "cluster.x-k8s.io/v1beta2"),
                    kind: "Cluster".into(),
                    namespace: ns.clone(),
                    name: cname.clone(),
                    subresource: None,
                    changes: vec![FieldChange {
                        path: path.into(),
                        from: json!(from),
                        to: json!(n),
                    }],
                    json_patch: json!([{"op": "add", "path": path, "value": n}]),
                    merge_patch: Some(
                        json!({"spec": {"topology": {"controlPlane": {"replicas": n}}}}),
                    ),
                }
            }
            (None, Some(cp)) => replicas_patch(
                cp,
                from,
                n,
                !matches!(kind, "KubeadmControlPlane" | "KamajiControlPlane"),
            ),
            (None, None) => return Err(ScaleError::NoControlPlane(cname)),
        };
        let host_check = match (cp, hosts.as_deref_mut()) {
            (Some(cp), Some(pool)) => host_check(
                objs,
                control_plane_infra_ref(cp),
                from,
                n,
                pool,
                &mut plan.findings,
                req.force,
                || format!("{kind} {cp_name}"),
            )?,
            _ => None,
        };
        plan.steps.push(ScaleStep {
            role: Role::ControlPlane,
            target: cp
                .map(kind_name)
                .unwrap_or_else(|| "ControlPlane (topology)".into()),
            from,
            to: n,
            patch,
            hosts: host_check,
        });
    }

    if let Some(n) = req.workers {
        let (topo_idx, md) = pick_deployment(objs, req.deployment.as_deref())?;
        let (from, patch, target) = match topo_idx {
            Some(i) => {
                let entry = &topology
                    .and_then(|t| at(t, &["workers", "machineDeployments"]))
                    .and_then(|a| a.get(i))
                    .cloned()
                    .unwrap_or(Value::Null);
                let tname = str_at(entry, &["name"]).unwrap_or("").to_string();
                let from = i64_at(entry, &["replicas"])
                    .or_else(|| md.and_then(|m| i64_at(m, &["spec", "replicas"])));
                let base = format!("/spec/topology/workers/machineDeployments/{i}");
                let path = format!("{base}/replicas");
                let patch = ObjectPatch {
                    api_version: api_version(cluster, "cluster.x-k8s.io/v1beta2"),
                    kind: "Cluster".into(),
                    namespace: ns.clone(),
                    name: cname.clone(),
                    subresource: None,
                    changes: vec![FieldChange {
                        path: path.clone(),
                        from: json!(from),
                        to: json!(n),
                    }],
                    // The test guard makes the patch fail if the list changed under us.
                    json_patch: json!([
                        {"op": "test", "path": format!("{base}/name"), "value": tname},
                        {"op": "add", "path": path, "value": n}
                    ]),
                    merge_patch: None,
                };
                let target = md
                    .map(kind_name)
                    .unwrap_or_else(|| format!("MachineDeployment (topology {tname})"));
                (from, patch, target)
            }
            None => {
                let Some(md) = md else {
                    return Err(ScaleError::NoDeployments(cname));
                };
                let from = i64_at(md, &["spec", "replicas"]);
                (from, replicas_patch(md, from, n, false), kind_name(md))
            }
        };
        let host_check = match (md, hosts) {
            (Some(md), Some(pool)) => {
                let t = target.clone();
                host_check(
                    objs,
                    deployment_infra_ref(md),
                    from,
                    n,
                    pool,
                    &mut plan.findings,
                    req.force,
                    || t.clone(),
                )?
            }
            _ => None,
        };
        plan.steps.push(ScaleStep {
            role: Role::Workers,
            target,
            from,
            to: n,
            patch,
            hosts: host_check,
        });
    }

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
    Ok(plan)
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

#[allow(clippy::too_many_arguments)]
fn host_check(
    objs: &ClusterObjects<'_>,
    infra: Option<(&str, &str)>,
    from: Option<i64>,
    to: i64,
    pool: &mut HostPool<'_>,
    findings: &mut Vec<Finding>,
    force: bool,
    target: impl Fn() -> String,
) -> Result<Option<HostCheck>, ScaleError> {
    let Some((kind, name)) = infra else {
        return Ok(None);
    };
    if kind != "ByoMachineTemplate" {
        return Ok(None);
    }
    let needed = usize::try_from(to - from.unwrap_or(0)).unwrap_or(0);
    let Some(tpl) = find_template(objs, kind, name) else {
        findings.push(Finding::warning(format!(
            "{}: cannot check free hosts, {kind} {name} was not found",
            target()
        )));
        return Ok(None);
    };
    let sel = match LabelSelector::from_json(
        at(tpl, &["spec", "template", "spec", "selector"]).unwrap_or(&Value::Null),
    ) {
        Ok(s) => s,
        Err(e) => {
            findings.push(Finding::warning(format!(
                "{}: {kind} {name} has an invalid selector: {e}",
                target()
            )));
            return Ok(None);
        }
    };
    let available = pool.claim(&sel, needed);
    let ok = available >= needed;
    let check = HostCheck {
        template: format!("{kind}/{name}"),
        selector: sel.to_string(),
        needed,
        available,
        ok,
    };
    if !ok {
        let err = ScaleError::NotEnoughHosts {
            target: target(),
            needed,
            selector: sel.braced(),
            available,
        };
        if !force {
            return Err(err);
        }
        findings.push(Finding::warning(format!("--force: {err}")));
    }
    Ok(Some(check))
}

#[cfg(test)]
mod tests;
