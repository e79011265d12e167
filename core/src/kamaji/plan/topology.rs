//! `kubectl kamaji scale` and `upgrade` on a ClusterClass cluster: the replicas and version live
//! in the Cluster's `spec.topology` (`controlPlane.replicas`,
//! `workers.machineDeployments[].replicas`, `version`), and CAPI's topology controller writes
//! them into the KamajiControlPlane and the MachineDeployments it manages; a change made on
//! those objects would be put back. These fields have the same shape in CAPI's v1beta1 and
//! v1beta2 Clusters.

use serde::Serialize;
use serde_json::{Value, json};

use crate::Error;
use crate::json::{self, at, str_at};
use crate::plan::ObjectPatch;

/// The Cluster's `spec.topology`, when it is a ClusterClass cluster.
pub fn topology(cluster: &Value) -> Option<&Value> {
    at(cluster, &["spec", "topology"]).filter(|t| t.is_object())
}

/// One change of the Cluster's topology and the line the verb prints once it is applied.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TopologyChange {
    pub patch: ObjectPatch,
    pub done: String,
}

fn cluster_patch(cluster: &Value, path: &str, from: Value, to: Value, ops: Value) -> ObjectPatch {
    ObjectPatch::cluster_field(cluster, path, (from, to), ops, None)
}

fn not_topology(cluster: &Value) -> Error {
    Error::other(format!(
        "cluster {} has no spec.topology",
        json::name(cluster)
    ))
}

fn shown(n: Option<i64>) -> String {
    n.map_or_else(|| "unset".to_string(), |f| f.to_string())
}

/// `scale --replicas N` of a ClusterClass cluster: `spec.topology.controlPlane.replicas`.
pub fn scale_control_plane(cluster: &Value, replicas: i64) -> Result<TopologyChange, Error> {
    let t = topology(cluster).ok_or_else(|| not_topology(cluster))?;
    let name = json::name(cluster);
    let from = at(t, &["controlPlane", "replicas"]).and_then(Value::as_i64);
    let path = "/spec/topology/controlPlane/replicas";
    let op = if t.get("controlPlane").is_some_and(Value::is_object) {
        json!([{"op": "add", "path": path, "value": replicas}])
    } else {
        json!([{"op": "add", "path": "/spec/topology/controlPlane", "value": {"replicas": replicas}}])
    };
    let note = if replicas == 0 {
        " (asleep)"
    } else if from == Some(0) {
        " (waking up)"
    } else {
        ""
    };
    Ok(TopologyChange {
        patch: cluster_patch(cluster, path, json!(from), json!(replicas), op),
        done: format!(
            "cluster.cluster.x-k8s.io/{name} topology controlPlane scaled from {} to {replicas}{note}",
            shown(from)
        ),
    })
}

/// `scale --workers N` of a ClusterClass cluster: its one `workers.machineDeployments` entry
/// (guarded by a `test` of the entry's name, so a list changed meanwhile fails the patch).
pub fn scale_workers(cluster: &Value, workers: i64) -> Result<TopologyChange, Error> {
    let t = topology(cluster).ok_or_else(|| not_topology(cluster))?;
    let name = json::name(cluster);
    let entries = at(t, &["workers", "machineDeployments"])
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let entry = match entries {
        [e] => e,
        [] => {
            return Err(Error::Other {
                message: format!("cluster {name} has no MachineDeployment in its topology"),
                hint: Some(
                    "add one under spec.topology.workers.machineDeployments (kubectl edit cluster)"
                        .into(),
                ),
            });
        }
        _ => {
            return Err(Error::Other {
                message: format!("cluster {name} has several MachineDeployments in its topology"),
                hint: Some(format!(
                    "scale one with kubectl capi scale {name} --workers N --deployment NAME"
                )),
            });
        }
    };
    let tname = str_at(entry, &["name"]).unwrap_or_default();
    let from = entry["replicas"].as_i64();
    let base = "/spec/topology/workers/machineDeployments/0";
    let path = format!("{base}/replicas");
    let ops = json!([
        {"op": "test", "path": format!("{base}/name"), "value": tname},
        {"op": "add", "path": path, "value": workers},
    ]);
    Ok(TopologyChange {
        patch: cluster_patch(cluster, &path, json!(from), json!(workers), ops),
        done: format!(
            "cluster.cluster.x-k8s.io/{name} topology machineDeployment {tname} scaled from {} to {workers}",
            shown(from)
        ),
    })
}

/// One `upgrade` step of a ClusterClass cluster: `spec.topology.version`.
pub fn set_version(cluster: &Value, version: &str) -> Result<TopologyChange, Error> {
    let t = topology(cluster).ok_or_else(|| not_topology(cluster))?;
    let name = json::name(cluster);
    let path = "/spec/topology/version";
    let ops = json!([{"op": "add", "path": path, "value": version}]);
    Ok(TopologyChange {
        patch: cluster_patch(cluster, path, t["version"].clone(), json!(version), ops),
        done: format!("cluster.cluster.x-k8s.io/{name} topology version set to {version}"),
    })
}

/// The names of the topology's MachineDeployments (they follow the control plane on upgrade).
pub fn deployment_names(cluster: &Value) -> Vec<String> {
    topology(cluster)
        .and_then(|t| at(t, &["workers", "machineDeployments"]))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|e| e["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// The refusal of `upgrade --control-plane-only` on a ClusterClass cluster: the topology
/// controller upgrades the workers once the control plane is at the version.
pub fn control_plane_only_refused(cluster: &Value) -> Error {
    Error::Usage {
        message: format!(
            "cluster {} uses a ClusterClass: spec.topology.version moves the control plane, then the workers; --control-plane-only does not apply",
            json::name(cluster)
        ),
        hint: Some("drop --control-plane-only".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(topology: Value) -> Value {
        json!({"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster",
               "metadata": {"name": "c1", "namespace": "ns"},
               "spec": {"topology": topology}})
    }

    #[test]
    fn control_plane_replicas_go_to_the_topology() {
        let c = cluster(json!({"version": "v1.35.4", "controlPlane": {"replicas": 2}}));
        let ch = scale_control_plane(&c, 0).unwrap();
        assert_eq!(
            ch.patch.json_patch,
            json!([{"op": "add", "path": "/spec/topology/controlPlane/replicas", "value": 0}])
        );
        assert_eq!(ch.patch.kind, "Cluster");
        assert_eq!(ch.patch.api_version, "cluster.x-k8s.io/v1beta1");
        assert_eq!(ch.patch.namespace, "ns");
        assert!(
            ch.done.ends_with("scaled from 2 to 0 (asleep)"),
            "{}",
            ch.done
        );
        // Without a controlPlane entry the whole entry is added.
        let c = cluster(json!({"version": "v1.35.4"}));
        assert_eq!(
            scale_control_plane(&c, 3).unwrap().patch.json_patch,
            json!([{"op": "add", "path": "/spec/topology/controlPlane", "value": {"replicas": 3}}])
        );
        assert!(scale_control_plane(&json!({"spec": {}}), 1).is_err());
    }

    #[test]
    fn workers_scale_the_one_topology_deployment_guarded_by_its_name() {
        let c = cluster(json!({"workers": {"machineDeployments": [
            {"class": "default-worker", "name": "md-0", "replicas": 1}]}}));
        let ch = scale_workers(&c, 4).unwrap();
        assert_eq!(
            ch.patch.json_patch,
            json!([
                {"op": "test", "path": "/spec/topology/workers/machineDeployments/0/name", "value": "md-0"},
                {"op": "add", "path": "/spec/topology/workers/machineDeployments/0/replicas", "value": 4},
            ])
        );
        assert!(ch.done.contains("md-0 scaled from 1 to 4"), "{}", ch.done);
        let none = cluster(json!({"version": "v1.35.4"}));
        assert!(
            scale_workers(&none, 1)
                .unwrap_err()
                .to_string()
                .contains("no MachineDeployment")
        );
        let two =
            cluster(json!({"workers": {"machineDeployments": [{"name": "a"}, {"name": "b"}]}}));
        let e = scale_workers(&two, 1).unwrap_err();
        assert!(e.to_string().contains("several"), "{e}");
        assert_eq!(deployment_names(&two), ["a", "b"]);
    }

    #[test]
    fn an_upgrade_step_sets_the_topology_version() {
        let c = cluster(json!({"version": "v1.35.4"}));
        let ch = set_version(&c, "v1.36.0").unwrap();
        assert_eq!(
            ch.patch.json_patch,
            json!([{"op": "add", "path": "/spec/topology/version", "value": "v1.36.0"}])
        );
        assert_eq!(ch.patch.changes[0].from, json!("v1.35.4"));
        assert!(topology(&json!({"spec": {"topology": null}})).is_none());
        assert_eq!(control_plane_only_refused(&c).exit_code(), 2);
    }
}
