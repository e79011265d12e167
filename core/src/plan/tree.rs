//! The object tree of `kubectl capi describe CLUSTER`, built as `clusterctl describe cluster`
//! builds it (`cmd/clusterctl/client/tree`), kept apart from printing so `-o json|yaml` can print
//! the same tree as data.
//!
//! - Root `Cluster`; its infrastructure cluster; its control plane (a grouping object) with the
//!   control-plane Machines; a virtual `Workers` node with MachineDeployments (grouping objects,
//!   or MachineSets with `show_machinesets`), their Machines, and MachinePools; Machines owned by
//!   none of these under a virtual `Other` node inside `Workers`.
//! - Sibling Machines under a grouping object merge into a `MachineGroup` row ("3 Machines...")
//!   when their Available, Ready and UpToDate conditions have the same status and reason
//!   (v1beta1 layout: the Ready condition's status, severity and reason); `grouping: false`
//!   turns this off.
//! - Each visible Machine gets its infrastructure machine and bootstrap config as children,
//!   hidden unless `echo` when their Ready is True or matches the Machine's.
//! - Departure from clusterctl: `Workers` is shown as soon as the cluster has a
//!   MachineDeployment, so a deployment scaled to 0 still has a row.
//! - Additions: KamajiControlPlane rows carry the control-plane pod replicas; Machines on BYOH
//!   carry their host name.

//!
//! Submodules: `builder` (the skeleton: Cluster, control plane, workers), `machines` (the
//! Machine and MachineGroup rows) and `row` (a Machine as the rows read it, [`TreeMachine`]).

mod builder;
mod details;
mod machines;
mod row;

pub use details::machines_needing_details;
pub use row::TreeMachine;
use serde::Serialize;
use serde_json::Value;

use crate::condition::Condition;
use crate::text;

/// Which columns and condition set a tree uses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub enum Layout {
    /// `NAME REPLICAS AVAILABLE READY UP-TO-DATE STATUS REASON SINCE MESSAGE` (CAPI ≥ 1.11).
    #[default]
    V1Beta2,
    /// `NAME READY SEVERITY REASON SINCE MESSAGE` (CAPI ≤ 1.10).
    V1Beta1,
}

/// `--show-conditions` for one object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub(crate) enum ConditionFilter {
    None,
    All,
    /// Only conditions not in their good state (plus Available and Ready): the `+` suffix.
    NonZero,
}

/// Describe options, as clusterctl's flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeOptions {
    /// `--show-conditions`: comma list of `all`, `Kind`, `Kind/name`, each optionally with `+`.
    pub show_conditions: String,
    pub show_machinesets: bool,
    /// `--show-templates`: the machine infrastructure and bootstrap config templates of the
    /// control plane and of each MachineDeployment, as children of their owners.
    pub show_templates: bool,
    /// `--show-resourcesets`: a virtual `ClusterResourceSets` node with the sets bound to the cluster.
    pub show_resourcesets: bool,
    /// `--echo`: show infrastructure machines and bootstrap configs even when they add nothing.
    pub echo: bool,
    /// `--grouping` (default true).
    pub grouping: bool,
    pub layout: Layout,
}

impl Default for TreeOptions {
    fn default() -> Self {
        TreeOptions {
            show_conditions: String::new(),
            show_machinesets: false,
            show_templates: false,
            show_resourcesets: false,
            echo: false,
            grouping: true,
            layout: Layout::V1Beta2,
        }
    }
}

/// Why `--show-conditions` is invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TreeError {
    #[error(
        "invalid --show-conditions {0:?}: use all, a Kind or Kind/name, comma separated, each optionally ending in +, with no spaces"
    )]
    ShowConditions(String),
}

impl TreeOptions {
    /// Validate `show_conditions` the way clusterctl does (no whitespace; at most one `/` per
    /// item), and refuse an empty kind or name (`Bogus/`, `/x`, `a,,b`), which would match
    /// nothing without saying so.
    pub fn validate(&self) -> Result<(), TreeError> {
        let s = &self.show_conditions;
        let bad_item = |f: &str| {
            let parts: Vec<&str> = f.trim_end_matches('+').split('/').collect();
            parts.len() > 2 || parts.iter().any(|p| p.is_empty())
        };
        if s.len() > 1024
            || s.chars().any(char::is_whitespace)
            || (!s.is_empty() && s.split(',').any(bad_item))
        {
            return Err(TreeError::ShowConditions(s.clone()));
        }
        Ok(())
    }

    /// The condition filter for an object.
    pub(crate) fn filter_for(&self, kind: &str, name: &str) -> ConditionFilter {
        for f in self.show_conditions.split(',').filter(|f| !f.is_empty()) {
            let plus = f.ends_with('+');
            let hit = if f.trim_end_matches('+').eq_ignore_ascii_case("all") {
                true
            } else if let Some((k, n)) = f.split_once('/') {
                k.eq_ignore_ascii_case(kind) && n.trim_end_matches('+').eq_ignore_ascii_case(name)
            } else {
                f.trim_end_matches('+').eq_ignore_ascii_case(kind)
            };
            if hit {
                return if plus {
                    ConditionFilter::NonZero
                } else {
                    ConditionFilter::All
                };
            }
        }
        ConditionFilter::None
    }
}

/// The objects of one cluster, as listed from the API server.
#[derive(Debug, Clone, Copy)]
pub struct TreeInput<'a> {
    pub cluster: &'a Value,
    pub infrastructure_cluster: Option<&'a Value>,
    pub control_plane: Option<&'a Value>,
    /// Machines with label `cluster.x-k8s.io/cluster-name=<cluster>`, as the rows read them
    /// (narrowed to the options with [`TreeMachine::narrowed`], or whole).
    pub machines: &'a [TreeMachine],
    pub machine_deployments: &'a [Value],
    pub machine_sets: &'a [Value],
    pub machine_pools: &'a [Value],
    /// Infrastructure machines (ByoMachine, DockerMachine, ...) the Machines reference.
    pub infrastructure_machines: &'a [Value],
    /// Bootstrap configs (KubeadmConfig, ...) the Machines reference.
    pub bootstrap_configs: &'a [Value],
    /// ByoHosts, to name the host of each BYOH Machine (may be empty).
    pub byo_hosts: &'a [Value],
    /// Machine infrastructure and bootstrap config templates the control plane and the
    /// MachineDeployments reference (read only with `show_templates`).
    pub templates: &'a [Value],
    /// ClusterResourceSets bound to the cluster (its ClusterResourceSetBinding; read only with
    /// `show_resourcesets`).
    pub resource_sets: &'a [Value],
    /// For SINCE; `None` leaves `since_seconds` empty.
    pub now: Option<jiff::Timestamp>,
}

#[cfg(test)]
impl<'a> TreeInput<'a> {
    /// A Cluster and nothing else (in tests).
    pub(crate) fn only(cluster: &'a Value) -> Self {
        TreeInput {
            cluster,
            infrastructure_cluster: None,
            control_plane: None,
            machines: &[],
            machine_deployments: &[],
            machine_sets: &[],
            machine_pools: &[],
            infrastructure_machines: &[],
            bootstrap_configs: &[],
            byo_hosts: &[],
            templates: &[],
            resource_sets: &[],
            now: None,
        }
    }
}

/// A condition as a row shows it: the condition, and what the row derives from it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConditionView {
    #[serde(flatten)]
    pub condition: Condition,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since_seconds: Option<i64>,
    /// True is the bad state for this type (Paused, Deleting, RollingOut, ...).
    pub negative_polarity: bool,
}

impl ConditionView {
    fn new(c: &Condition, now: Option<jiff::Timestamp>) -> Self {
        ConditionView {
            condition: c.clone(),
            since_seconds: now.and_then(|n| {
                c.last_transition_time
                    .as_deref()
                    .and_then(|t| text::seconds_since(t, n))
            }),
            negative_polarity: c.is_negative_polarity(),
        }
    }

    /// In its good state (True, or False for negative polarity).
    pub fn is_good(&self) -> bool {
        match self.condition.status.as_str() {
            "True" => !self.negative_polarity,
            "False" => self.negative_polarity,
            _ => false,
        }
    }
}

/// The replica columns.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Counters {
    /// Current replicas.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub current: Option<i64>,
    /// Desired replicas (`spec.replicas`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub desired: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub available: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub up_to_date: Option<i64>,
}

impl Counters {
    /// The REPLICAS cell: `current/desired`, or `current` alone.
    pub fn replicas_cell(&self) -> String {
        match (self.current, self.desired) {
            (Some(c), Some(d)) => format!("{c}/{d}"),
            (Some(c), None) => c.to_string(),
            (None, Some(d)) => format!("0/{d}"),
            (None, None) => String::new(),
        }
    }
}

/// A group of merged siblings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupInfo {
    /// The kind of the items (`Machine`).
    pub item_kind: String,
    /// Item names, sorted.
    pub items: Vec<String>,
    /// BYOH hosts of the items, sorted (empty off BYOH).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<String>,
}

/// One row of the tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TreeNode {
    /// Object kind; virtual nodes: `WorkerGroup`, `OtherGroup`; groups: `<Kind>Group`.
    pub kind: String,
    pub name: String,
    pub namespace: String,
    /// `ClusterInfrastructure`, `ControlPlane`, `MachineInfrastructure`, `BootstrapConfig`, ...
    #[serde(skip_serializing_if = "Option::is_none")]
    pub meta_name: Option<String>,
    /// The NAME cell as clusterctl writes it: `Machine ns/name, v1.33.1`, `3 Machines...`, `Workers`.
    pub display_name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// A node that is no API object (Workers, Other, groups).
    pub virtual_node: bool,
    /// Has `metadata.deletionTimestamp` (clusterctl prefixes `!! DELETED !!`).
    pub deleting: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<GroupInfo>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub counters: Option<Counters>,
    /// The condition of the STATUS/REASON/SINCE/MESSAGE cells (v1beta2: Available or Ready per
    /// kind; v1beta1 layout: Ready with severity). Cleared when `conditions` are shown instead.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<ConditionView>,
    /// All (or non-zero) conditions, when `--show-conditions` selects this object.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<ConditionView>,
    /// The MESSAGE override of group rows: `See m1, m2, ...`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// BYOH: the host serving this Machine.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// KamajiControlPlane: the control-plane pods (desired, ready, available, up to date).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub control_plane_pods: Option<Counters>,
    pub children: Vec<TreeNode>,
}

/// The whole tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ObjectTree {
    pub layout: Layout,
    pub root: TreeNode,
}

impl ObjectTree {
    /// Depth-first walk, with the depth of each node.
    pub fn walk(&self) -> Vec<(usize, &TreeNode)> {
        fn go<'a>(n: &'a TreeNode, d: usize, out: &mut Vec<(usize, &'a TreeNode)>) {
            out.push((d, n));
            for c in &n.children {
                go(c, d + 1, out);
            }
        }
        let mut out = Vec::new();
        go(&self.root, 0, &mut out);
        out
    }
}
/// Build the tree.
pub fn build_tree(input: TreeInput<'_>, opts: &TreeOptions) -> Result<ObjectTree, TreeError> {
    opts.validate()?;
    Ok(ObjectTree {
        layout: opts.layout,
        root: builder::Builder::new(input, opts).build(),
    })
}

#[cfg(test)]
mod tests;
