//! Version-agnostic accessors for the CAPI fields that moved between v1beta1 and v1beta2.
//!
//! Each accessor takes the whole object as JSON (`DynamicObject::data` works too: use
//! [`object_json`]) and reads the v1beta2 location first, then the v1beta1 one. Sources:
//! the CAPI v1.14 CRD schemas (v1beta1 and v1beta2 versions) and the provider contracts.
//!
//! | What | v1beta2 | v1beta1 |
//! |---|---|---|
//! | Cluster infrastructure | `status.initialization.infrastructureProvisioned` | `status.infrastructureReady` |
//! | Cluster control plane | `status.initialization.controlPlaneInitialized` | `ControlPlaneInitialized` condition, `status.controlPlaneReady` |
//! | Control-plane provider | `status.initialization.controlPlaneInitialized` | `status.initialized` (`status.ready`) |
//! | Infra provider (cluster/machine) | `status.initialization.provisioned` | `status.ready` |
//! | Machine | `status.initialization.{infrastructureProvisioned,bootstrapDataSecretCreated}` | `status.{infrastructureReady,bootstrapReady}` |
//! | References | `{apiGroup, kind, name}` | `{apiVersion, kind, name, namespace}` |
//! | Replicas | `status.{replicas,readyReplicas,availableReplicas,upToDateReplicas}` | `status.v1beta2.*`, else `status.{readyReplicas,availableReplicas,updatedReplicas}` |
//! | Rollout | `spec.rollout.{strategy,after}` | MD `spec.{strategy,rolloutAfter}`, KCP `spec.{rolloutStrategy,rolloutAfter}` |
//! | Conditions | `status.conditions` (metav1) | `status.v1beta2.conditions` (CAPI ≥ 1.9), else `status.conditions` (with severity) |

use serde::Serialize;
use serde_json::{Value, json};

use crate::groups::CapiVersion;
pub use crate::json::at;
use crate::json::{bool_at, i64_at as int_at, str_at};

// Conditions are read through here too (their locations moved between contracts like the fields
// above); the model itself is [`crate::condition`].
pub use crate::condition::{Condition, condition, conditions, summary_condition};

/// The whole object of a `DynamicObject` as JSON (metadata, types and data).
pub fn object_json(obj: &kube::core::DynamicObject) -> Value {
    serde_json::to_value(obj).unwrap_or(Value::Null)
}

/// The CAPI version of a core object from its apiVersion.
pub fn api_level(obj: &Value) -> Option<CapiVersion> {
    str_at(obj, &["apiVersion"]).and_then(CapiVersion::of_api_version)
}

// ---------------------------------------------------------------- readiness and initialization

/// Cluster: is its control plane initialized (the API server answered once)?
pub fn cluster_control_plane_initialized(cluster: &Value) -> bool {
    if let Some(b) = bool_at(
        cluster,
        &["status", "initialization", "controlPlaneInitialized"],
    ) {
        return b;
    }
    if let Some(c) = condition(cluster, "ControlPlaneInitialized") {
        return c.is_true();
    }
    bool_at(cluster, &["status", "controlPlaneReady"]).unwrap_or(false)
}

/// Control-plane provider object (KamajiControlPlane, KubeadmControlPlane): initialized?
pub fn control_plane_initialized(cp: &Value) -> bool {
    bool_at(cp, &["status", "initialization", "controlPlaneInitialized"])
        .or_else(|| bool_at(cp, &["status", "initialized"]))
        .unwrap_or(false)
}

/// Control-plane provider object: ready to serve? v1beta1 contract `status.ready`; under the
/// v1beta2 contract the `Available` condition (then `Ready`), else initialization.
pub fn control_plane_ready(cp: &Value) -> bool {
    if let Some(c) = condition(cp, "Available").or_else(|| condition(cp, "Ready")) {
        return c.is_true();
    }
    bool_at(cp, &["status", "ready"]).unwrap_or_else(|| control_plane_initialized(cp))
}

// ---------------------------------------------------------------- references

/// A reference in either shape. v1beta2 refs have no version (`api_version: None`); resolve
/// them with [`super::ServerApis::resolve_ref`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectRef {
    pub api_group: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    pub kind: String,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

impl ObjectRef {
    /// Parses `{apiGroup, kind, name}` or `{apiVersion, kind, name, namespace}`.
    pub fn parse(v: &Value) -> Option<ObjectRef> {
        let kind = str_at(v, &["kind"])?.to_string();
        let name = str_at(v, &["name"])?.to_string();
        let api_version = str_at(v, &["apiVersion"]).map(str::to_string);
        let api_group = match str_at(v, &["apiGroup"]) {
            Some(g) => g.to_string(),
            None => match &api_version {
                Some(av) => crate::groups::split_api_version(av).0.to_string(),
                None => return None,
            },
        };
        Some(ObjectRef {
            api_group,
            api_version,
            kind,
            name,
            namespace: str_at(v, &["namespace"]).map(str::to_string),
        })
    }

    /// The reference as a `level` object writes it. v1beta1 needs the apiVersion: pass the
    /// resolved one (for example from `ServerApis::resolve_ref`).
    pub fn to_value(&self, level: CapiVersion, api_version: Option<&str>) -> Value {
        match level {
            CapiVersion::V1Beta2 => {
                json!({"apiGroup": self.api_group, "kind": self.kind, "name": self.name})
            }
            CapiVersion::V1Beta1 => {
                let av = api_version
                    .map(str::to_string)
                    .or_else(|| self.api_version.clone())
                    .unwrap_or_else(|| self.api_group.clone());
                let mut v = json!({"apiVersion": av, "kind": self.kind, "name": self.name});
                if let Some(ns) = &self.namespace {
                    v["namespace"] = json!(ns);
                }
                v
            }
        }
    }
}

/// The reference at `path`, in either shape.
pub fn object_ref(obj: &Value, path: &[&str]) -> Option<ObjectRef> {
    at(obj, path).and_then(ObjectRef::parse)
}

/// Cluster `spec.infrastructureRef`.
pub fn cluster_infrastructure_ref(cluster: &Value) -> Option<ObjectRef> {
    object_ref(cluster, &["spec", "infrastructureRef"])
}

/// Cluster `spec.controlPlaneRef`.
pub fn cluster_control_plane_ref(cluster: &Value) -> Option<ObjectRef> {
    object_ref(cluster, &["spec", "controlPlaneRef"])
}

/// Machine `spec.infrastructureRef`.
pub fn machine_infrastructure_ref(machine: &Value) -> Option<ObjectRef> {
    object_ref(machine, &["spec", "infrastructureRef"])
}

/// Machine `spec.bootstrap.configRef`.
pub fn machine_bootstrap_ref(machine: &Value) -> Option<ObjectRef> {
    object_ref(machine, &["spec", "bootstrap", "configRef"])
}

/// MachineDeployment/MachineSet `spec.template.spec.infrastructureRef`.
pub fn template_infrastructure_ref(md: &Value) -> Option<ObjectRef> {
    object_ref(md, &["spec", "template", "spec", "infrastructureRef"])
}

/// KubeadmControlPlane machine template: `spec.machineTemplate.spec.infrastructureRef`
/// (v1beta2) or `spec.machineTemplate.infrastructureRef` (v1beta1).
pub fn control_plane_machine_template_ref(kcp: &Value) -> Option<ObjectRef> {
    object_ref(
        kcp,
        &["spec", "machineTemplate", "spec", "infrastructureRef"],
    )
    .or_else(|| object_ref(kcp, &["spec", "machineTemplate", "infrastructureRef"]))
}

// ---------------------------------------------------------------- replicas

/// Replica counters with v1beta2 meanings (ready = Ready condition, available = Available,
/// up to date = UpToDate). `None` when the object does not report a counter.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Replicas {
    pub desired: Option<i64>,
    pub current: Option<i64>,
    pub ready: Option<i64>,
    pub available: Option<i64>,
    pub up_to_date: Option<i64>,
}

/// Counters of a MachineDeployment, MachineSet, MachinePool or control-plane provider object.
pub fn replicas(obj: &Value) -> Replicas {
    let status = at(obj, &["status"]).cloned().unwrap_or(Value::Null);
    let v1beta2 = at(&status, &["v1beta2"]);
    let is_v1beta1_shape = v1beta2.is_some()
        || status.get("updatedReplicas").is_some()
        || status.get("unavailableReplicas").is_some();
    let new = |key: &str| -> Option<i64> {
        v1beta2.and_then(|v| int_at(v, &[key])).or_else(|| {
            if is_v1beta1_shape {
                None
            } else {
                int_at(&status, &[key])
            }
        })
    };
    let current = int_at(&status, &["replicas"]);
    let ready = new("readyReplicas").or_else(|| int_at(&status, &["readyReplicas"]));
    let available = new("availableReplicas")
        .or_else(|| int_at(&status, &["availableReplicas"]))
        .or_else(|| {
            // v1beta1 KCP reports unavailable instead of available.
            let unavailable = int_at(&status, &["unavailableReplicas"])?;
            Some(current? - unavailable)
        });
    let up_to_date = new("upToDateReplicas").or_else(|| int_at(&status, &["updatedReplicas"]));
    Replicas {
        desired: int_at(obj, &["spec", "replicas"]),
        current,
        ready,
        available,
        up_to_date,
    }
}

fn cluster_group_replicas(cluster: &Value, group: &str) -> Replicas {
    let g = at(cluster, &["status", group])
        .or_else(|| at(cluster, &["status", "v1beta2", group]))
        .cloned()
        .unwrap_or(Value::Null);
    Replicas {
        desired: int_at(&g, &["desiredReplicas"]),
        current: int_at(&g, &["replicas"]),
        ready: int_at(&g, &["readyReplicas"]),
        available: int_at(&g, &["availableReplicas"]),
        up_to_date: int_at(&g, &["upToDateReplicas"]),
    }
}

/// Cluster `status.controlPlane` (v1beta2) or `status.v1beta2.controlPlane` (v1beta1).
pub fn cluster_control_plane_replicas(cluster: &Value) -> Replicas {
    cluster_group_replicas(cluster, "controlPlane")
}

/// Cluster `status.workers` (v1beta2) or `status.v1beta2.workers` (v1beta1).
pub fn cluster_worker_replicas(cluster: &Value) -> Replicas {
    cluster_group_replicas(cluster, "workers")
}

// ---------------------------------------------------------------- rollout

/// Where the rollout fields of a kind live at an API level, for reading and for patches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RolloutPaths {
    pub strategy: &'static [&'static str],
    pub after: &'static [&'static str],
}

/// Rollout paths: MachineDeployment and KubeadmControlPlane at v1beta1 or v1beta2.
pub fn rollout_paths(kind: &str, level: CapiVersion) -> RolloutPaths {
    match (level, kind) {
        (CapiVersion::V1Beta2, _) => RolloutPaths {
            strategy: &["spec", "rollout", "strategy"],
            after: &["spec", "rollout", "after"],
        },
        (CapiVersion::V1Beta1, "KubeadmControlPlane") => RolloutPaths {
            strategy: &["spec", "rolloutStrategy"],
            after: &["spec", "rolloutAfter"],
        },
        (CapiVersion::V1Beta1, _) => RolloutPaths {
            strategy: &["spec", "strategy"],
            after: &["spec", "rolloutAfter"],
        },
    }
}

/// The rollout settings of a MachineDeployment or KubeadmControlPlane.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Rollout {
    /// `RollingUpdate` (default) or `OnDelete`.
    pub strategy_type: Option<String>,
    /// Int or percentage string.
    pub max_surge: Option<Value>,
    pub max_unavailable: Option<Value>,
    /// RFC 3339 time after which a rollout is forced.
    pub after: Option<String>,
}

/// Reads the rollout settings at whichever level the object is.
pub fn rollout(obj: &Value) -> Rollout {
    let kind = str_at(obj, &["kind"]).unwrap_or("");
    let level = if at(obj, &["spec", "rollout"]).is_some() {
        CapiVersion::V1Beta2
    } else {
        api_level(obj).unwrap_or(CapiVersion::V1Beta1)
    };
    let p = rollout_paths(kind, level);
    let strategy = at(obj, p.strategy).cloned().unwrap_or(Value::Null);
    Rollout {
        strategy_type: str_at(&strategy, &["type"]).map(str::to_string),
        max_surge: at(&strategy, &["rollingUpdate", "maxSurge"]).cloned(),
        max_unavailable: at(&strategy, &["rollingUpdate", "maxUnavailable"]).cloned(),
        after: str_at(obj, p.after).map(str::to_string),
    }
}

/// A Node that stopped reporting, as its Machine mirrors it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSilence {
    /// Unix seconds of the condition's last transition.
    pub since_unix: Option<i64>,
    /// The mirrored message (`* Node.Ready: Kubelet stopped posting node status.`).
    pub message: String,
}

/// Cluster API's reason for a `NodeReady` that mirrors a Node's Ready Unknown.
const NODE_READY_UNKNOWN: &str = "NodeReadyUnknown";
/// Cluster API's message for a Node without a Ready condition yet, under the same reason: a
/// Node still starting, not one that went silent.
const NOT_YET_REPORTED: &str = "Condition not yet reported";

/// Whether a Machine's Node stopped reporting: Kubernetes' node lifecycle controller set the
/// Node's Ready to Unknown ("Kubelet stopped posting node status.") after its grace period,
/// which Cluster API mirrors on the Machine as `NodeReady` Unknown, reason `NodeReadyUnknown`
/// (Cluster API v1.14, `machine_controller_status.go`). The host is down, or its kubelet (and on
/// a BYOH host, its agent) stopped. A workload cluster Cluster API cannot reach reads
/// `ConnectionDown` instead, and says nothing of the host.
pub fn node_silence(m: &Value) -> Option<NodeSilence> {
    let c = condition(m, "NodeReady")?;
    if c.status != "Unknown" || c.reason.as_deref() != Some(NODE_READY_UNKNOWN) {
        return None;
    }
    let message = c.message.unwrap_or_default();
    if message.contains(NOT_YET_REPORTED) {
        return None;
    }
    let since_unix = c
        .last_transition_time
        .and_then(|t| t.parse::<jiff::Timestamp>().ok())
        .map(|t| t.as_second());
    Some(NodeSilence {
        since_unix,
        message,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::condition::legacy_conditions;

    fn cluster_v1beta2() -> Value {
        json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
            "metadata": {"name": "c1", "namespace": "ns"},
            "spec": {
                "controlPlaneRef": {"apiGroup": "controlplane.cluster.x-k8s.io", "kind": "KamajiControlPlane", "name": "c1-cp"},
                "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "ByoCluster", "name": "c1"}
            },
            "status": {
                "initialization": {"infrastructureProvisioned": true, "controlPlaneInitialized": true},
                "controlPlane": {"desiredReplicas": 3, "replicas": 3, "readyReplicas": 2, "availableReplicas": 2, "upToDateReplicas": 3},
                "workers": {"desiredReplicas": 2, "replicas": 1, "readyReplicas": 1, "availableReplicas": 1, "upToDateReplicas": 1},
                "conditions": [
                    {"type": "Available", "status": "False", "reason": "NotAvailable", "message": "* WorkersAvailable: 1 of 2", "lastTransitionTime": "2026-11-30T08:00:00Z", "observedGeneration": 2},
                    {"type": "ControlPlaneInitialized", "status": "True", "reason": "Initialized", "lastTransitionTime": "2026-11-30T07:00:00Z"}
                ],
                "deprecated": {"v1beta1": {"conditions": [
                    {"type": "Ready", "status": "False", "severity": "Warning", "reason": "WaitingForWorkers", "lastTransitionTime": "2026-11-30T08:00:00Z"}
                ]}}
            }
        })
    }

    fn cluster_v1beta1() -> Value {
        json!({
            "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster",
            "metadata": {"name": "c1", "namespace": "ns"},
            "spec": {
                "controlPlaneRef": {"apiVersion": "controlplane.cluster.x-k8s.io/v1alpha1", "kind": "KamajiControlPlane", "name": "c1-cp", "namespace": "ns"},
                "infrastructureRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "ByoCluster", "name": "c1", "namespace": "ns"}
            },
            "status": {
                "infrastructureReady": true,
                "controlPlaneReady": false,
                "phase": "Provisioned",
                "conditions": [
                    {"type": "Ready", "status": "False", "severity": "Info", "reason": "WaitingForControlPlane", "lastTransitionTime": "2026-11-30T08:00:00Z"},
                    {"type": "ControlPlaneInitialized", "status": "True", "lastTransitionTime": "2026-11-30T07:00:00Z"}
                ],
                "v1beta2": {
                    "conditions": [{"type": "Available", "status": "True", "reason": "Available", "lastTransitionTime": "2026-11-30T08:00:00Z"}],
                    "controlPlane": {"desiredReplicas": 1, "replicas": 1, "readyReplicas": 1, "availableReplicas": 1, "upToDateReplicas": 1}
                }
            }
        })
    }

    #[test]
    fn cluster_initialization_in_both_versions() {
        let b2 = cluster_v1beta2();
        assert!(cluster_control_plane_initialized(&b2));
        let b1 = cluster_v1beta1();
        // ControlPlaneInitialized condition wins over controlPlaneReady=false.
        assert!(cluster_control_plane_initialized(&b1));
        let empty =
            json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "status": {}});
        assert!(!cluster_control_plane_initialized(&empty));
    }

    #[test]
    fn references_in_both_shapes() {
        let r2 = cluster_control_plane_ref(&cluster_v1beta2()).unwrap();
        assert_eq!(r2.api_group, "controlplane.cluster.x-k8s.io");
        assert_eq!(r2.api_version, None);
        assert_eq!(r2.kind, "KamajiControlPlane");
        let r1 = cluster_control_plane_ref(&cluster_v1beta1()).unwrap();
        assert_eq!(r1.api_group, "controlplane.cluster.x-k8s.io");
        assert_eq!(
            r1.api_version.as_deref(),
            Some("controlplane.cluster.x-k8s.io/v1alpha1")
        );
        assert_eq!(r1.namespace.as_deref(), Some("ns"));
        assert_eq!(
            r2.to_value(CapiVersion::V1Beta2, None),
            json!({"apiGroup": "controlplane.cluster.x-k8s.io", "kind": "KamajiControlPlane", "name": "c1-cp"})
        );
        assert_eq!(
            r2.to_value(
                CapiVersion::V1Beta1,
                Some("controlplane.cluster.x-k8s.io/v1alpha2")
            ),
            json!({"apiVersion": "controlplane.cluster.x-k8s.io/v1alpha2", "kind": "KamajiControlPlane", "name": "c1-cp"})
        );
        assert_eq!(ObjectRef::parse(&json!({"kind": "X", "name": "y"})), None);
        let kcp1 = json!({"spec": {"machineTemplate": {"infrastructureRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "ByoMachineTemplate", "name": "t"}}}});
        let kcp2 = json!({"spec": {"machineTemplate": {"spec": {"infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "ByoMachineTemplate", "name": "t"}}}}});
        assert_eq!(control_plane_machine_template_ref(&kcp1).unwrap().name, "t");
        assert_eq!(control_plane_machine_template_ref(&kcp2).unwrap().name, "t");
    }

    #[test]
    fn replicas_prefer_v1beta2_meanings() {
        let md2 = json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment",
            "spec": {"replicas": 3},
            "status": {"replicas": 3, "readyReplicas": 2, "availableReplicas": 1, "upToDateReplicas": 3,
                       "deprecated": {"v1beta1": {"readyReplicas": 3, "availableReplicas": 3, "updatedReplicas": 3}}}
        });
        assert_eq!(
            replicas(&md2),
            Replicas {
                desired: Some(3),
                current: Some(3),
                ready: Some(2),
                available: Some(1),
                up_to_date: Some(3)
            }
        );
        let md1 = json!({
            "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineDeployment",
            "spec": {"replicas": 3},
            "status": {"replicas": 3, "readyReplicas": 3, "availableReplicas": 3, "updatedReplicas": 2,
                       "v1beta2": {"readyReplicas": 1, "availableReplicas": 1, "upToDateReplicas": 2}}
        });
        assert_eq!(
            replicas(&md1),
            Replicas {
                desired: Some(3),
                current: Some(3),
                ready: Some(1),
                available: Some(1),
                up_to_date: Some(2)
            }
        );
        let old_md = json!({"spec": {"replicas": 2}, "status": {"replicas": 2, "readyReplicas": 2, "availableReplicas": 2, "updatedReplicas": 1}});
        assert_eq!(replicas(&old_md).up_to_date, Some(1));
        assert_eq!(replicas(&old_md).ready, Some(2));
        let kcp1 = json!({"spec": {"replicas": 3}, "status": {"replicas": 3, "readyReplicas": 3, "updatedReplicas": 3, "unavailableReplicas": 1}});
        assert_eq!(replicas(&kcp1).available, Some(2));
        let c1 = cluster_v1beta1();
        assert_eq!(cluster_control_plane_replicas(&c1).ready, Some(1));
        assert_eq!(cluster_worker_replicas(&c1), Replicas::default());
        let c2 = cluster_v1beta2();
        assert_eq!(cluster_control_plane_replicas(&c2).desired, Some(3));
        assert_eq!(cluster_worker_replicas(&c2).available, Some(1));
    }

    #[test]
    fn rollout_paths_and_values() {
        let md2 = json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment",
            "spec": {"rollout": {"after": "2026-12-01T00:00:00Z", "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": "25%"}}}}});
        let r = rollout(&md2);
        assert_eq!(r.strategy_type.as_deref(), Some("RollingUpdate"));
        assert_eq!(r.max_surge, Some(json!(1)));
        assert_eq!(r.max_unavailable, Some(json!("25%")));
        assert_eq!(r.after.as_deref(), Some("2026-12-01T00:00:00Z"));
        let md1 = json!({"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineDeployment",
            "spec": {"rolloutAfter": "2026-12-01T00:00:00Z", "strategy": {"type": "OnDelete"}}});
        let r = rollout(&md1);
        assert_eq!(r.strategy_type.as_deref(), Some("OnDelete"));
        assert_eq!(r.after.as_deref(), Some("2026-12-01T00:00:00Z"));
        let kcp1 = json!({"apiVersion": "controlplane.cluster.x-k8s.io/v1beta1", "kind": "KubeadmControlPlane",
            "spec": {"rolloutStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0}}}});
        assert_eq!(rollout(&kcp1).max_surge, Some(json!(0)));
        assert_eq!(
            rollout_paths("KubeadmControlPlane", CapiVersion::V1Beta1).strategy,
            &["spec", "rolloutStrategy"]
        );
        assert_eq!(
            rollout_paths("MachineDeployment", CapiVersion::V1Beta2).after,
            &["spec", "rollout", "after"]
        );
    }

    #[test]
    fn conditions_in_all_three_places() {
        let b2 = cluster_v1beta2();
        let available = summary_condition(&b2).unwrap();
        assert_eq!(available.type_, "Available");
        assert!(available.is_false());
        assert_eq!(available.severity, None);
        let legacy = legacy_conditions(&b2);
        assert_eq!(legacy[0].severity.as_deref(), Some("Warning"));
        // Ready is only among the deprecated conditions: found through the fallback.
        assert_eq!(
            condition(&b2, "Ready").unwrap().reason.as_deref(),
            Some("WaitingForWorkers")
        );

        let b1 = cluster_v1beta1();
        // status.v1beta2.conditions first.
        assert!(summary_condition(&b1).unwrap().is_true());
        let ready = condition(&b1, "Ready").unwrap();
        assert_eq!(ready.severity.as_deref(), Some("Info"));
        assert_eq!(legacy_conditions(&b1).len(), 2);

        let plain_v1beta1 = json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "ByoHost",
            "status": {"conditions": [{"type": "K8sNodeBootstrapSucceeded", "status": "False", "severity": "Info", "reason": "WaitingForMachineRefToBeAssigned"}]}});
        let c = condition(&plain_v1beta1, "K8sNodeBootstrapSucceeded").unwrap();
        assert_eq!(
            c.reason.as_deref(),
            Some("WaitingForMachineRefToBeAssigned")
        );
        assert!(conditions(&json!({})).is_empty());
    }

    #[test]
    fn provider_readiness_in_both_contracts() {
        let kcp_v1beta2 = json!({"status": {"initialization": {"controlPlaneInitialized": true},
            "conditions": [{"type": "Available", "status": "True"}]}});
        assert!(control_plane_initialized(&kcp_v1beta2));
        assert!(control_plane_ready(&kcp_v1beta2));
        let kcp_v1beta1 = json!({"status": {"initialized": true, "ready": false}});
        assert!(control_plane_initialized(&kcp_v1beta1));
        assert!(!control_plane_ready(&kcp_v1beta1));
    }
}
