//! Pure planning logic behind the `kubectl capi` verbs: no I/O, no API calls, no printing.
//!
//! Inputs are `serde_json::Value` objects exactly as the API server returns them (so every CAPI
//! contract version and BYOH fork works), outputs are plain `Serialize` structs that the render
//! code prints as tables, JSON or YAML.

pub mod hosts;
pub mod logs;
pub mod scale;
pub mod selector;
pub mod teardown;
pub mod template;
pub mod tree;
pub mod upgrade;
pub mod workers;

/// The most workers (Machines of one MachineDeployment) a verb accepts: Kubernetes supports
/// clusters of up to 5,000 nodes (kubernetes.io, "Considerations for large clusters").
pub const MAX_WORKERS: i64 = 5000;
/// The most control-plane replicas a verb accepts (kubeadm control planes run 1, 3 or 5; a
/// Kamaji tenant's API servers are stateless pods, and more than 16 is a typo).
pub const MAX_CONTROL_PLANE_REPLICAS: i64 = 16;

use serde::Serialize;
use serde_json::Value;

/// How serious a preflight finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum Severity {
    Info,
    Warning,
    /// Blocks the plan unless forced (where forcing is allowed).
    Error,
}

/// One preflight finding, in plain words.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub severity: Severity,
    pub message: String,
}

impl Finding {
    pub fn info(message: impl Into<String>) -> Self {
        Finding {
            severity: Severity::Info,
            message: message.into(),
        }
    }
    pub fn warning(message: impl Into<String>) -> Self {
        Finding {
            severity: Severity::Warning,
            message: message.into(),
        }
    }
    pub fn error(message: impl Into<String>) -> Self {
        Finding {
            severity: Severity::Error,
            message: message.into(),
        }
    }
}

/// The objects of one cluster that scale and upgrade plans read, as the API server returns them.
#[derive(Debug, Clone, Copy)]
pub struct ClusterObjects<'a> {
    /// The `Cluster`.
    pub cluster: &'a Value,
    /// The object `spec.controlPlaneRef` points at (KubeadmControlPlane, KamajiControlPlane, ...).
    pub control_plane: Option<&'a Value>,
    /// The cluster's MachineDeployments (label `cluster.x-k8s.io/cluster-name`).
    pub machine_deployments: &'a [Value],
    /// Infrastructure machine templates the control plane and deployments reference
    /// (e.g. ByoMachineTemplates, for host selectors and template cloning).
    pub infra_templates: &'a [Value],
}

#[cfg(test)]
impl<'a> ClusterObjects<'a> {
    /// A cluster, its control plane, MachineDeployments and machine templates (in tests).
    pub(crate) fn of(
        cluster: &'a Value,
        control_plane: &'a Value,
        machine_deployments: &'a [Value],
        infra_templates: &'a [Value],
    ) -> Self {
        ClusterObjects {
            cluster,
            control_plane: Some(control_plane),
            machine_deployments,
            infra_templates,
        }
    }
}

/// A change to one object: an RFC 6902 JSON patch (always) and the equivalent merge patch
/// (when one exists; list items cannot be addressed by a merge patch).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectPatch {
    pub api_version: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    /// `Some("scale")` when the change goes through the scale subresource.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subresource: Option<String>,
    /// The fields that change, as `path: from -> to` records.
    pub changes: Vec<FieldChange>,
    /// RFC 6902 operations (with `test` guards where a list index is addressed).
    pub json_patch: Value,
    /// The same change as a JSON merge patch, when expressible.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub merge_patch: Option<Value>,
}

impl ObjectPatch {
    /// A change of one field of a Cluster (`path`, a JSON pointer), applied as `json_patch`
    /// (and as `merge_patch`, when expressible).
    pub(crate) fn cluster_field(
        cluster: &Value,
        path: &str,
        (from, to): (Value, Value),
        json_patch: Value,
        merge_patch: Option<Value>,
    ) -> ObjectPatch {
        ObjectPatch {
            api_version: crate::json::str_at(cluster, &["apiVersion"]).map_or_else(
                || crate::groups::CapiVersion::V1Beta2.api_version(),
                str::to_string,
            ),
            kind: "Cluster".into(),
            namespace: crate::json::namespace(cluster).to_string(),
            name: crate::json::name(cluster).to_string(),
            subresource: None,
            changes: vec![FieldChange {
                path: path.into(),
                from,
                to,
            }],
            json_patch,
            merge_patch,
        }
    }
}

/// One field change.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FieldChange {
    /// A JSON pointer, e.g. `/spec/replicas`.
    pub path: String,
    pub from: Value,
    pub to: Value,
}
