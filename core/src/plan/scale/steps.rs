//! The two steps of a scale: the control plane (the object, or the Cluster's topology) and one
//! MachineDeployment (the object, or its topology entry), each with its patch and, on BYOH, its
//! free-host check.

use serde_json::{Value, json};

use super::pool::{HostPool, host_check};
use super::{
    Role, ScaleError, ScaleRequest, ScaleStep, ScaleTarget, TOPOLOGY_DEPLOYMENT_LABEL, api_version,
    control_plane_infra_ref, deployment_infra_ref, kcp_max_surge, kcp_stacked_etcd, replicas_patch,
};
use crate::json::{self, at, i64_at, str_at};
use crate::plan::{ClusterObjects, FieldChange, Finding, ObjectPatch};

/// What both steps read.
pub(super) struct Scaling<'o, 'a> {
    pub objs: &'o ClusterObjects<'a>,
    pub req: &'o ScaleRequest,
    /// The Cluster's `spec.topology` (a ClusterClass cluster).
    pub topology: Option<&'a Value>,
    pub cname: String,
    pub ns: String,
}

impl Scaling<'_, '_> {
    /// The control plane to `n` replicas.
    pub(super) fn control_plane_step(
        &self,
        n: i64,
        hosts: Option<&mut HostPool<'_>>,
        findings: &mut Vec<Finding>,
    ) -> Result<ScaleStep, ScaleError> {
        let cp = self.objs.control_plane;
        let kind = cp.map(json::kind).unwrap_or("");
        let cp_name = cp.map(json::name).unwrap_or("");
        if self.topology.is_none() && cp.is_none() {
            return Err(ScaleError::NoControlPlane(self.cname.clone()));
        }
        if let Some(cp) = cp {
            check_control_plane(cp, n, findings)?;
        }
        let from = match self.topology {
            Some(t) => i64_at(t, &["controlPlane", "replicas"])
                .or_else(|| cp.and_then(|c| i64_at(c, &["spec", "replicas"]))),
            None => cp.and_then(|c| i64_at(c, &["spec", "replicas"])),
        };
        let patch = match (self.topology, cp) {
            (Some(_), _) => {
                let path = "/spec/topology/controlPlane/replicas";
                self.cluster_patch(
                    path,
                    from,
                    n,
                    json!([{"op": "add", "path": path, "value": n}]),
                    Some(json!({"spec": {"topology": {"controlPlane": {"replicas": n}}}})),
                )
            }
            (None, Some(cp)) => replicas_patch(
                cp,
                from,
                n,
                !matches!(kind, "KubeadmControlPlane" | "KamajiControlPlane"),
            ),
            (None, None) => return Err(ScaleError::NoControlPlane(self.cname.clone())),
        };
        let host_check = match cp {
            Some(cp) => host_check(
                self.objs,
                control_plane_infra_ref(cp),
                str_at(cp, &["spec", "version"]),
                from,
                n,
                hosts,
                findings,
                self.req.force,
                || format!("{kind} {cp_name}"),
            )?,
            _ => None,
        };
        Ok(ScaleStep {
            role: Role::ControlPlane,
            target: cp
                .map(ScaleTarget::of)
                .unwrap_or(ScaleTarget::TopologyControlPlane),
            from,
            to: n,
            patch,
            hosts: host_check,
        })
    }

    /// The MachineDeployment `--deployment` picks to `n` replicas.
    pub(super) fn workers_step(
        &self,
        n: i64,
        hosts: Option<&mut HostPool<'_>>,
        findings: &mut Vec<Finding>,
    ) -> Result<ScaleStep, ScaleError> {
        let (topo_idx, md) = pick_deployment(self.objs, self.req.deployment.as_deref())?;
        let (from, patch, target) = match topo_idx {
            Some(i) => self.topology_workers_patch(i, md, n),
            None => {
                let Some(md) = md else {
                    return Err(ScaleError::NoDeployments(self.cname.clone()));
                };
                let from = i64_at(md, &["spec", "replicas"]);
                (
                    from,
                    replicas_patch(md, from, n, false),
                    ScaleTarget::of(md),
                )
            }
        };
        let host_check = match md {
            Some(md) => host_check(
                self.objs,
                deployment_infra_ref(md),
                str_at(md, &["spec", "template", "spec", "version"]),
                from,
                n,
                hosts,
                findings,
                self.req.force,
                || target.to_string(),
            )?,
            _ => None,
        };
        Ok(ScaleStep {
            role: Role::Workers,
            target,
            from,
            to: n,
            patch,
            hosts: host_check,
        })
    }

    /// Topology entry `i` to `n` replicas: the current count, the Cluster patch, the target.
    fn topology_workers_patch(
        &self,
        i: usize,
        md: Option<&Value>,
        n: i64,
    ) -> (Option<i64>, ObjectPatch, ScaleTarget) {
        let entry = &self
            .topology
            .and_then(|t| at(t, &["workers", "machineDeployments"]))
            .and_then(|a| a.get(i))
            .cloned()
            .unwrap_or(Value::Null);
        let tname = str_at(entry, &["name"]).unwrap_or("").to_string();
        let from = i64_at(entry, &["replicas"])
            .or_else(|| md.and_then(|m| i64_at(m, &["spec", "replicas"])));
        let base = format!("/spec/topology/workers/machineDeployments/{i}");
        let path = format!("{base}/replicas");
        // The test guard makes the patch fail if the list changed under us.
        let json_patch = json!([
            {"op": "test", "path": format!("{base}/name"), "value": tname},
            {"op": "add", "path": path, "value": n}
        ]);
        let patch = self.cluster_patch(&path, from, n, json_patch, None);
        let target = md
            .map(ScaleTarget::of)
            .unwrap_or(ScaleTarget::TopologyDeployment { name: tname });
        (from, patch, target)
    }

    /// A replica change of the Cluster's topology at `path`.
    fn cluster_patch(
        &self,
        path: &str,
        from: Option<i64>,
        n: i64,
        json_patch: Value,
        merge_patch: Option<Value>,
    ) -> ObjectPatch {
        ObjectPatch {
            api_version: api_version(
                self.objs.cluster,
                &crate::groups::CapiVersion::V1Beta2.api_version(),
            ),
            kind: "Cluster".into(),
            namespace: self.ns.clone(),
            name: self.cname.clone(),
            subresource: None,
            changes: vec![FieldChange {
                path: path.into(),
                from: json!(from),
                to: json!(n),
            }],
            json_patch,
            merge_patch,
        }
    }
}

/// The control plane's rules: no 0 replicas but on Kamaji (a warning there), an odd count with
/// stacked etcd and at least 3 with `maxSurge: 0` on a KubeadmControlPlane.
fn check_control_plane(cp: &Value, n: i64, findings: &mut Vec<Finding>) -> Result<(), ScaleError> {
    let kind = json::kind(cp);
    let cp_name = json::name(cp);
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
        findings.push(Finding::warning(format!(
            "KamajiControlPlane {cp_name} at 0 replicas stops the tenant API server: the cluster becomes unreachable"
        )));
    }
    Ok(())
}

/// The topology entry index and MachineDeployment object selected by `--deployment`.
fn pick_deployment<'a>(
    objs: &ClusterObjects<'a>,
    wanted: Option<&str>,
) -> Result<(Option<usize>, Option<&'a Value>), ScaleError> {
    if at(objs.cluster, &["spec", "topology"]).is_some() {
        return pick_topology_entry(objs, wanted);
    }
    let cluster = json::name(objs.cluster).to_string();
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

/// On a ClusterClass cluster: the `machineDeployments` entry `--deployment` names (the entry's
/// name, or its generated MachineDeployment's), and that MachineDeployment when it exists.
fn pick_topology_entry<'a>(
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
    let md = objs
        .machine_deployments
        .iter()
        .find(|m| json::label(m, TOPOLOGY_DEPLOYMENT_LABEL) == Some(topo[i]));
    Ok((Some(i), md))
}
