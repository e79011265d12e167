//! `scale --remove-machine M | --remove-host H`: choose which workers go on scale-down.
//!
//! Cluster API deletes Machines that carry the `cluster.x-k8s.io/delete-machine` annotation
//! first, whatever the MachineSet's deletion order (`core/reconcilers/machineset/
//! machineset_deletion_order.go`, CAPI v1.14: the annotation's presence is what counts). So the
//! plan annotates the named Machines and lowers their MachineDeployment's replicas by at least
//! as many.

use serde::Serialize;
use serde_json::{Value, json};

use super::{FieldChange, ObjectPatch, api_version};
use crate::json;
use crate::labels::CLUSTER_NAME_LABEL;

/// CAPI's annotation: a Machine that carries it is deleted first on scale-down.
pub(crate) const DELETE_MACHINE_ANNOTATION: &str = "cluster.x-k8s.io/delete-machine";
/// CAPI's label on control-plane Machines.
use crate::labels::CONTROL_PLANE_LABEL;
/// CAPI's label on a MachineDeployment's Machines, naming the deployment.
use crate::labels::DEPLOYMENT_NAME_LABEL;

/// Why the named machines cannot be removed; each message names the way out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RemovalError {
    #[error(
        "Machine {machine} belongs to cluster {owner:?}, not {cluster}: name a machine of {cluster} (kubectl capi machines {cluster})"
    )]
    OtherCluster {
        machine: String,
        owner: String,
        cluster: String,
    },
    #[error(
        "Machine {0} is a control-plane machine: scale the control plane with --control-plane N"
    )]
    ControlPlane(String),
    #[error(
        "Machine {0} belongs to no MachineDeployment, so scaling cannot remove it; delete it with kubectl delete machine {0}"
    )]
    NoDeployment(String),
    #[error(
        "the named machines belong to several MachineDeployments ({0}): remove machines of one at a time"
    )]
    SeveralDeployments(String),
    #[error("--deployment {given} does not hold the named machines; they belong to {actual}")]
    DeploymentMismatch { given: String, actual: String },
    #[error("MachineDeployment {0} was not found")]
    UnknownDeployment(String),
    #[error(
        "--workers {workers} removes {removes} machines of {deployment} (from {current}), fewer than the {named} named: pass --workers {wanted} or less, or leave --workers out"
    )]
    TooFewRemoved {
        workers: i64,
        removes: i64,
        deployment: String,
        current: i64,
        named: i64,
        wanted: i64,
    },
    #[error(
        "--workers {workers} is more than {deployment}'s {current} replicas; naming machines to remove needs a scale-down"
    )]
    NotADownscale {
        workers: i64,
        deployment: String,
        current: i64,
    },
}

/// What removing the named machines takes.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Removal {
    /// The MachineDeployment (its own name, not a topology name).
    pub deployment: String,
    /// Its replicas after the scale-down.
    pub workers: i64,
    /// The annotations, one per named Machine, applied before the replicas change.
    pub marks: Vec<ObjectPatch>,
}

/// Plans the removal of `machines` (the Machine objects named by `--remove-machine` or found on
/// the hosts of `--remove-host`) from `cluster`, with the user's `--workers` and `--deployment`.
pub fn plan_removal(
    cluster: &Value,
    machine_deployments: &[Value],
    machines: &[Value],
    workers: Option<i64>,
    deployment: Option<&str>,
) -> Result<Removal, RemovalError> {
    let md_name = owning_deployment(cluster, machines)?;
    let md = machine_deployments
        .iter()
        .find(|d| json::name(d) == md_name)
        .ok_or_else(|| RemovalError::UnknownDeployment(md_name.clone()))?;
    if let Some(given) = deployment {
        check_deployment_flag(md, &md_name, given)?;
    }
    let current = json::at(md, &["spec", "replicas"])
        .and_then(Value::as_i64)
        .unwrap_or(1);
    // Bounded by the machines listed, which the verb caps; usize → i64 cannot overflow there.
    let named = i64::try_from(machines.len()).unwrap_or(i64::MAX);
    let workers = target_workers(workers, current, named, &md_name)?;
    Ok(Removal {
        deployment: md_name,
        workers,
        marks: machines.iter().map(delete_mark).collect(),
    })
}

/// The one MachineDeployment that owns every machine, each checked to be a worker of `cluster`.
fn owning_deployment(cluster: &Value, machines: &[Value]) -> Result<String, RemovalError> {
    let cname = json::name(cluster);
    let mut deployments: Vec<String> = Vec::new();
    for m in machines {
        let name = json::name(m).to_string();
        let labels = json::labels(m);
        let owner = labels.get(CLUSTER_NAME_LABEL).cloned().unwrap_or_default();
        if owner != cname || json::namespace(m) != json::namespace(cluster) {
            return Err(RemovalError::OtherCluster {
                machine: name,
                owner,
                cluster: cname.to_string(),
            });
        }
        if labels.contains_key(CONTROL_PLANE_LABEL) {
            return Err(RemovalError::ControlPlane(name));
        }
        let Some(md) = labels.get(DEPLOYMENT_NAME_LABEL) else {
            return Err(RemovalError::NoDeployment(name));
        };
        if !deployments.contains(md) {
            deployments.push(md.clone());
        }
    }
    match deployments.as_slice() {
        [one] => Ok(one.clone()),
        _ => Err(RemovalError::SeveralDeployments(deployments.join(", "))),
    }
}

/// Refuses a `--deployment` that does not name `md`.
fn check_deployment_flag(md: &Value, md_name: &str, given: &str) -> Result<(), RemovalError> {
    // A topology name is accepted for the deployment it generated.
    let topology = json::labels(md)
        .get(super::TOPOLOGY_DEPLOYMENT_LABEL)
        .cloned();
    if given != md_name && topology.as_deref() != Some(given) {
        return Err(RemovalError::DeploymentMismatch {
            given: given.to_string(),
            actual: md_name.to_string(),
        });
    }
    Ok(())
}

/// The deployment's new replicas: `--workers` if it removes at least the `named` machines,
/// otherwise `current` less those.
fn target_workers(
    workers: Option<i64>,
    current: i64,
    named: i64,
    md_name: &str,
) -> Result<i64, RemovalError> {
    let wanted = current.saturating_sub(named).max(0);
    match workers {
        None => Ok(wanted),
        Some(w) if w > current => Err(RemovalError::NotADownscale {
            workers: w,
            deployment: md_name.to_string(),
            current,
        }),
        Some(w) if current.saturating_sub(w) < named => Err(RemovalError::TooFewRemoved {
            workers: w,
            removes: current.saturating_sub(w),
            deployment: md_name.to_string(),
            current,
            named,
            wanted,
        }),
        Some(w) => Ok(w),
    }
}

/// The patch that puts CAPI's delete-machine annotation on `m`.
fn delete_mark(m: &Value) -> ObjectPatch {
    let path = "/metadata/annotations/cluster.x-k8s.io~1delete-machine";
    let had = json::at(m, &["metadata", "annotations", DELETE_MACHINE_ANNOTATION]).cloned();
    ObjectPatch {
        api_version: api_version(m, &crate::groups::CapiVersion::V1Beta2.api_version()),
        kind: "Machine".into(),
        namespace: json::namespace(m).to_string(),
        name: json::name(m).to_string(),
        subresource: None,
        changes: vec![FieldChange {
            path: path.into(),
            from: had.unwrap_or(Value::Null),
            to: json!("true"),
        }],
        // JSON patch cannot add a key to a map that is not there.
        json_patch: if json::at(m, &["metadata", "annotations"]).is_some_and(Value::is_object) {
            json!([{"op": "add", "path": path, "value": "true"}])
        } else {
            json!([{"op": "add", "path": "/metadata/annotations",
                    "value": {DELETE_MACHINE_ANNOTATION: "true"}}])
        },
        merge_patch: Some(
            json!({"metadata": {"annotations": {DELETE_MACHINE_ANNOTATION: "true"}}}),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster() -> Value {
        json!({"kind": "Cluster", "metadata": {"name": "c1", "namespace": "ns"}})
    }
    fn md(name: &str, replicas: i64) -> Value {
        json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment",
               "metadata": {"name": name, "namespace": "ns"}, "spec": {"replicas": replicas}})
    }
    fn machine(name: &str, cluster: &str, md: Option<&str>) -> Value {
        let mut labels = json!({CLUSTER_NAME_LABEL: cluster});
        if let Some(d) = md {
            labels[DEPLOYMENT_NAME_LABEL] = json!(d);
        }
        json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
               "metadata": {"name": name, "namespace": "ns", "labels": labels}})
    }

    #[test]
    fn marks_the_machines_and_scales_down_by_their_count() {
        let mds = [md("c1-md-0", 3)];
        let ms = [machine("m1", "c1", Some("c1-md-0"))];
        let r = plan_removal(&cluster(), &mds, &ms, None, None).unwrap();
        assert_eq!((r.deployment.as_str(), r.workers), ("c1-md-0", 2));
        assert_eq!(r.marks.len(), 1);
        assert_eq!(r.marks[0].name, "m1");
        assert_eq!(
            r.marks[0].json_patch,
            json!([{"op": "add", "path": "/metadata/annotations",
                    "value": {DELETE_MACHINE_ANNOTATION: "true"}}])
        );
        // --workers may remove more than the named machines, never fewer.
        assert_eq!(
            plan_removal(&cluster(), &mds, &ms, Some(1), None)
                .unwrap()
                .workers,
            1
        );
        let e = plan_removal(&cluster(), &mds, &ms, Some(3), None).unwrap_err();
        assert!(e.to_string().contains("--workers 2 or less"), "{e}");
        let e = plan_removal(&cluster(), &mds, &ms, Some(4), None).unwrap_err();
        assert!(matches!(e, RemovalError::NotADownscale { .. }));
    }

    #[test]
    fn refusals() {
        let mds = [md("c1-md-0", 3), md("c1-md-1", 2)];
        let other = [machine("x", "c2", Some("c2-md-0"))];
        let e = plan_removal(&cluster(), &mds, &other, None, None).unwrap_err();
        assert!(
            e.to_string().contains("belongs to cluster \"c2\", not c1"),
            "{e}"
        );
        let mut cp = machine("cp", "c1", None);
        cp["metadata"]["labels"][CONTROL_PLANE_LABEL] = json!("");
        assert!(matches!(
            plan_removal(&cluster(), &mds, &[cp], None, None),
            Err(RemovalError::ControlPlane(_))
        ));
        let two = [
            machine("a", "c1", Some("c1-md-0")),
            machine("b", "c1", Some("c1-md-1")),
        ];
        assert!(matches!(
            plan_removal(&cluster(), &mds, &two, None, None),
            Err(RemovalError::SeveralDeployments(_))
        ));
        let one = [machine("a", "c1", Some("c1-md-0"))];
        assert!(matches!(
            plan_removal(&cluster(), &mds, &one, None, Some("c1-md-1")),
            Err(RemovalError::DeploymentMismatch { .. })
        ));
        assert!(matches!(
            plan_removal(&cluster(), &mds, &[machine("a", "c1", None)], None, None),
            Err(RemovalError::NoDeployment(_))
        ));
    }
}
