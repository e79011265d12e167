//! `ops.capi-kamaji.io/v1alpha1`: the ClusterUpgrade, a multi-minor upgrade of one cluster that
//! the reconciler carries out. All of its state lives in `status`, so a restarted reconciler
//! resumes where the last one stopped.

// The CustomResource derive takes one `printcolumn(...)` per column; clippy reads two columns
// with the same `type_` as a duplicated attribute.
#![allow(clippy::duplicated_attributes)]

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::kamaji::api::common::{V_VERSION_PATTERN, VERSION_MAX_LENGTH};

/// The conditions of ClusterUpgrade and FleetUpgrade: `metav1.Condition` as the wire has it.
pub use crate::kamaji::api::common::Condition;

fn preserve_unknown(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "x-kubernetes-preserve-unknown-fields": true, "type": "object" })
}

fn preserve_unknown_array(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "array",
        "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
    })
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// What to upgrade and how. A ClusterUpgrade is named after its cluster (the CRD refuses any
/// other name), so the API server itself refuses a second one for the same cluster.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "ops.capi-kamaji.io",
    version = "v1alpha1",
    kind = "ClusterUpgrade",
    namespaced,
    status = "ClusterUpgradeStatus",
    shortname = "cu",
    category = "capi-kamaji",
    derive = "Default",
    derive = "PartialEq",
    doc = "ClusterUpgrade moves one Cluster API cluster to a Kubernetes version, one minor at a time, control plane first; kamaji-reconciler carries it out.",
    printcolumn(name = "Cluster", type_ = "string", json_path = ".spec.clusterName"),
    printcolumn(name = "Version", type_ = "string", json_path = ".spec.version"),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "Step", type_ = "string", json_path = ".status.progress"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterUpgradeSpec {
    /// The Cluster, in the ClusterUpgrade's namespace; the ClusterUpgrade carries its name.
    #[schemars(length(min = 1, max = 253))]
    pub cluster_name: String,
    /// The Kubernetes version to reach, vMAJOR.MINOR.PATCH.
    #[schemars(
        length(min = 1, max = VERSION_MAX_LENGTH),
        regex(pattern = V_VERSION_PATTERN)
    )]
    pub version: String,
    /// Upgrade only the control plane.
    #[serde(default, skip_serializing_if = "is_false")]
    pub control_plane_only: bool,
    /// Upgrade only the MachineDeployments, up to the control plane's version.
    #[serde(default, skip_serializing_if = "is_false")]
    pub workers_only: bool,
    /// MachineDeployments rolled at once within a minor (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub max_parallel_machine_deployments: Option<u32>,
    /// The newest patch release of each minor on the way, as the command that asked for the
    /// upgrade resolved them (Kubernetes' stable-release markers, else its shipped table): the
    /// upgrade steps through these, the path that command showed. Empty: the reconciler's
    /// shipped table.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        length(max = 32),
        inner(
            length(min = 1, max = VERSION_MAX_LENGTH),
            regex(pattern = r"^v\d+\.\d+\.\d+$")
        )
    )]
    pub patch_releases: Vec<String>,
    /// Go ahead despite blocking preflight findings (too few spare BYOH hosts).
    #[serde(default, skip_serializing_if = "is_false")]
    pub force: bool,
    /// Start no further step while true; a rollout under way runs to its end.
    #[serde(default, skip_serializing_if = "is_false")]
    pub paused: bool,
    /// Stop for good: no further step starts; a rollout under way runs to its end.
    #[serde(default, skip_serializing_if = "is_false")]
    pub cancelled: bool,
}

/// Where a ClusterUpgrade stands.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterUpgradeStatus {
    /// The spec generation this status is about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Pending, Running, Paused, Succeeded, Failed or Cancelled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// `N/M`: steps done of the plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<String>,
    /// The control plane's version when the plan was made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_version: Option<String>,
    /// The minors in order, ending with the target.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub path: Vec<String>,
    /// The plan, as `kubectl capi upgrade CLUSTER --to VERSION --plan` prints it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub plan: Vec<PlannedStep>,
    /// The preflight's findings when the plan was made.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<PlanFinding>,
    /// Numbers of the steps rolling now.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub current_steps: Vec<u32>,
    /// Per step: its phase, reason and times.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<StepStatus>,
    /// `Ready` (the upgrade is complete) and `Progressing`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<String>,
    /// Where it stands, in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Earlier upgrades of this cluster through this object, newest last (at most 10).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<HistoryEntry>,
}

/// One step of the plan: the object, its version change and the patch that makes it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlannedStep {
    pub number: u32,
    /// ControlPlane, Workers or Topology.
    pub role: String,
    /// `Kind/name` of the object whose version changes.
    pub target: String,
    pub from_version: String,
    pub to_version: String,
    /// Minors a Kamaji control plane's reconciler walks on its own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub via: Vec<String>,
    #[serde(default, skip_serializing_if = "is_false")]
    pub stepped_by_reconciler: bool,
    /// What "done" means, in words.
    pub wait_for: String,
    pub patch: PlannedPatch,
    /// Machine templates to create first (templates are immutable).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clone_templates: Vec<PlannedClone>,
}

/// The version patch of a step.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlannedPatch {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    /// The RFC 6902 patch.
    #[schemars(schema_with = "preserve_unknown_array")]
    pub json_patch: Value,
}

/// A template clone of a step.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlannedClone {
    pub kind: String,
    pub source_name: String,
    pub new_name: String,
    /// The object to create.
    #[schemars(schema_with = "preserve_unknown")]
    pub object: Value,
}

/// A preflight finding.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlanFinding {
    /// info, warning or error.
    pub severity: String,
    pub message: String,
}

/// A step's state.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StepStatus {
    pub number: u32,
    /// Pending, Running or Succeeded.
    pub phase: String,
    /// Why, in one CamelCase word (Applied, RollingOut, Reached...).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<String>,
}

/// An earlier upgrade of the same cluster.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HistoryEntry {
    pub version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_version: Option<String>,
    pub phase: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Upgrades the Clusters a label selector picks, in waves: the canaries alone first, then at
/// most `maxParallel` clusters at once, each through a ClusterUpgrade; the first failed cluster
/// stops the waves.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "ops.capi-kamaji.io",
    version = "v1alpha1",
    kind = "FleetUpgrade",
    namespaced,
    status = "FleetUpgradeStatus",
    shortname = "fu",
    category = "capi-kamaji",
    derive = "Default",
    derive = "PartialEq",
    doc = "FleetUpgrade upgrades the Clusters a label selector picks, canaries first, then in waves of at most maxParallel, stopping at the first failure; kamaji-reconciler carries it out through ClusterUpgrades.",
    printcolumn(name = "Version", type_ = "string", json_path = ".spec.version"),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "Done", type_ = "string", json_path = ".status.progress"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct FleetUpgradeSpec {
    /// Clusters of this namespace, by label (`env=staging,tier!=db`, as kubectl -l takes it).
    #[schemars(length(min = 1, max = 1024))]
    pub selector: String,
    /// The Kubernetes version to reach, vMAJOR.MINOR.PATCH.
    #[schemars(
        length(min = 1, max = VERSION_MAX_LENGTH),
        regex(pattern = V_VERSION_PATTERN)
    )]
    pub version: String,
    /// Clusters upgraded alone first (default 0).
    #[serde(default)]
    #[schemars(range(min = 0, max = 1000))]
    pub canary: u32,
    /// Clusters upgraded at once after the canaries (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1000))]
    pub max_parallel: Option<u32>,
    /// MachineDeployments rolled at once within a cluster's minor (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub max_parallel_machine_deployments: Option<u32>,
    /// The newest patch release of each minor on the way, as the command that asked for the
    /// upgrade resolved them (Kubernetes' stable-release markers, else its shipped table): the
    /// upgrade steps through these, the path that command showed. Empty: the reconciler's
    /// shipped table.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        length(max = 32),
        inner(
            length(min = 1, max = VERSION_MAX_LENGTH),
            regex(pattern = r"^v\d+\.\d+\.\d+$")
        )
    )]
    pub patch_releases: Vec<String>,
    /// Go ahead despite blocking preflight findings.
    #[serde(default, skip_serializing_if = "is_false")]
    pub force: bool,
    /// Start no further cluster while true.
    #[serde(default, skip_serializing_if = "is_false")]
    pub paused: bool,
}

/// Where a FleetUpgrade stands.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FleetUpgradeStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Pending, Running, Paused, Succeeded or Failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// `N/M`: clusters upgraded of those picked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<String>,
    /// The clusters picked when the fleet upgrade started, in wave order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clusters: Vec<FleetMember>,
    /// The cluster whose failure stopped the waves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_cluster: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// One cluster of a fleet upgrade.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FleetMember {
    pub name: String,
    /// 1 for the canaries, then 2, 3…
    pub wave: u32,
    /// Pending, Running, Succeeded or Failed (its ClusterUpgrade's phase).
    pub phase: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}
