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

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;
use serde_json::Value;

use super::hosts::host_from_provider_id;
use crate::condition::{self, Condition};
use crate::json::{self, at, i64_at, str_at};
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
pub enum ConditionFilter {
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
    /// Validate `show_conditions` the way clusterctl does (no whitespace; at most one `/` per item).
    pub fn validate(&self) -> Result<(), TreeError> {
        let s = &self.show_conditions;
        if s.chars().any(char::is_whitespace) || s.split(',').any(|f| f.split('/').count() > 2) {
            return Err(TreeError::ShowConditions(s.clone()));
        }
        Ok(())
    }

    /// The condition filter for an object.
    pub fn filter_for(&self, kind: &str, name: &str) -> ConditionFilter {
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
    /// Machines with label `cluster.x-k8s.io/cluster-name=<cluster>`.
    pub machines: &'a [Value],
    pub machine_deployments: &'a [Value],
    pub machine_sets: &'a [Value],
    pub machine_pools: &'a [Value],
    /// Infrastructure machines (ByoMachine, DockerMachine, ...) the Machines reference.
    pub infrastructure_machines: &'a [Value],
    /// Bootstrap configs (KubeadmConfig, ...) the Machines reference.
    pub bootstrap_configs: &'a [Value],
    /// ByoHosts, to name the host of each BYOH Machine (may be empty).
    pub byo_hosts: &'a [Value],
    /// For SINCE; `None` leaves `since_seconds` empty.
    pub now: Option<jiff::Timestamp>,
}

/// A condition as a row shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConditionView {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub severity: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since_seconds: Option<i64>,
    /// True is the bad state for this type (Paused, Deleting, RollingOut, ...).
    pub negative_polarity: bool,
}

impl ConditionView {
    fn new(c: &Condition, now: Option<jiff::Timestamp>) -> Self {
        ConditionView {
            type_: c.type_.clone(),
            status: c.status.clone(),
            reason: c.reason.clone(),
            message: c.message.clone(),
            severity: c.severity.clone(),
            last_transition_time: c.last_transition_time.clone(),
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
        match self.status.as_str() {
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

/// The grouping key of an object: (type, status, reason[, severity]) of the compared conditions.
type GroupKey = Vec<Option<(String, Option<String>, Option<String>)>>;

struct Builder<'a> {
    input: TreeInput<'a>,
    opts: &'a TreeOptions,
    infra_machines: HashMap<(&'a str, &'a str), &'a Value>,
    bootstrap: HashMap<(&'a str, &'a str), &'a Value>,
    hosts_by_byomachine: HashMap<(&'a str, &'a str), &'a str>,
}

/// Build the tree.
pub fn build_tree(input: TreeInput<'_>, opts: &TreeOptions) -> Result<ObjectTree, TreeError> {
    opts.validate()?;
    let mut hosts_by_byomachine = HashMap::new();
    for h in input.byo_hosts {
        if let Some(n) = str_at(h, &["status", "machineRef", "name"]) {
            let ns = str_at(h, &["status", "machineRef", "namespace"])
                .unwrap_or_else(|| json::namespace(h));
            hosts_by_byomachine.insert((ns, n), json::name(h));
        }
    }
    let b = Builder {
        input,
        opts,
        infra_machines: input
            .infrastructure_machines
            .iter()
            .map(|v| ((json::kind(v), json::name(v)), v))
            .collect(),
        bootstrap: input
            .bootstrap_configs
            .iter()
            .map(|v| ((json::kind(v), json::name(v)), v))
            .collect(),
        hosts_by_byomachine,
    };
    Ok(ObjectTree {
        layout: opts.layout,
        root: b.build(),
    })
}

fn is_cp_machine(m: &Value) -> bool {
    json::label(m, "cluster.x-k8s.io/control-plane").is_some()
}

impl<'a> Builder<'a> {
    fn now(&self) -> Option<jiff::Timestamp> {
        self.input.now
    }

    fn v1beta1(&self) -> bool {
        self.opts.layout == Layout::V1Beta1
    }

    /// The v1beta2 conditions of an object.
    fn conds(&self, v: &Value) -> Vec<Condition> {
        condition::conditions(v)
    }

    fn v1beta1_ready(&self, v: &Value) -> Option<Condition> {
        condition::find(&condition::legacy_conditions(v), "Ready").cloned()
    }

    fn cond(&self, v: &Value, t: &str) -> Option<Condition> {
        condition::find(&self.conds(v), t).cloned()
    }

    fn group_key(&self, v: &Value) -> GroupKey {
        let k = |c: Option<Condition>, with_severity: bool| {
            c.map(|c| {
                (
                    c.status,
                    c.reason,
                    if with_severity { c.severity } else { None },
                )
            })
        };
        if self.v1beta1() {
            vec![k(self.v1beta1_ready(v), true)]
        } else {
            vec![
                k(self.cond(v, "Available"), false),
                k(self.cond(v, "Ready"), false),
                k(self.cond(v, "UpToDate"), false),
            ]
        }
    }

    /// A node for an API object, with its row condition and counters.
    fn node(
        &self,
        v: &Value,
        meta: Option<&str>,
        row_condition: &[&str],
        counters: Option<Counters>,
        version: Option<String>,
    ) -> TreeNode {
        let kind = json::kind(v).to_string();
        let name = json::name(v).to_string();
        let namespace = json::namespace(v).to_string();
        let status = if self.v1beta1() {
            self.v1beta1_ready(v)
        } else {
            row_condition.iter().find_map(|t| self.cond(v, t))
        }
        .map(|c| ConditionView::new(&c, self.now()));
        let filter = self.opts.filter_for(&kind, &name);
        let all: Vec<Condition> = if self.v1beta1() {
            condition::legacy_conditions(v)
        } else {
            self.conds(v)
        };
        let conditions: Vec<ConditionView> = match filter {
            ConditionFilter::None => vec![],
            ConditionFilter::All => all
                .iter()
                .map(|c| ConditionView::new(c, self.now()))
                .collect(),
            ConditionFilter::NonZero => all
                .iter()
                .map(|c| ConditionView::new(c, self.now()))
                .filter(|c| c.type_ == "Available" || c.type_ == "Ready" || !c.is_good())
                .collect(),
        };
        let deleting = at(v, &["metadata", "deletionTimestamp"]).is_some_and(|d| !d.is_null());
        let mut display_name = format!("{kind} {namespace}/{name}");
        if namespace.is_empty() {
            display_name = format!("{kind} {name}");
        }
        if let Some(ver) = &version {
            display_name.push_str(&format!(", {ver}"));
        }
        if deleting {
            display_name = format!("!! DELETED !! {display_name}");
        }
        TreeNode {
            kind,
            name,
            namespace,
            meta_name: meta.map(str::to_string),
            display_name,
            version,
            virtual_node: false,
            deleting,
            group: None,
            counters,
            status: if filter == ConditionFilter::None {
                status
            } else {
                None
            },
            conditions,
            message: None,
            host: None,
            control_plane_pods: None,
            children: vec![],
        }
    }

    fn virtual_node(&self, kind: &str, name: &str) -> TreeNode {
        TreeNode {
            kind: kind.into(),
            name: name.into(),
            namespace: json::namespace(self.input.cluster).to_string(),
            meta_name: None,
            display_name: name.into(),
            version: None,
            virtual_node: true,
            deleting: false,
            group: None,
            counters: None,
            status: None,
            conditions: vec![],
            message: None,
            host: None,
            control_plane_pods: None,
            children: vec![],
        }
    }

    fn build(&self) -> TreeNode {
        let c = self.input.cluster;
        let sum = |f: &str| -> Option<i64> {
            let a = i64_at(c, &["status", "controlPlane", f]);
            let b = i64_at(c, &["status", "workers", f]);
            if a.is_none() && b.is_none() {
                None
            } else {
                Some(a.unwrap_or(0) + b.unwrap_or(0))
            }
        };
        let counters = Counters {
            current: sum("replicas").or_else(|| sum("desiredReplicas").map(|_| 0)),
            desired: sum("desiredReplicas"),
            available: sum("availableReplicas"),
            ready: sum("readyReplicas"),
            up_to_date: sum("upToDateReplicas"),
        };
        let has_counters = counters != Counters::default();
        let topo_version = str_at(c, &["spec", "topology", "version"]).map(str::to_string);
        let mut root = self.node(
            c,
            None,
            &["Available"],
            has_counters.then_some(counters),
            topo_version,
        );

        if let Some(infra) = self.input.infrastructure_cluster {
            root.children.push(self.node(
                infra,
                Some("ClusterInfrastructure"),
                &["Ready"],
                None,
                None,
            ));
        }

        let machines = self.input.machines;
        let mut placed = vec![false; machines.len()];
        if let Some(cp) = self.input.control_plane {
            let mut cp_node = self.control_plane_node(cp);
            let cp_machines: Vec<usize> = (0..machines.len())
                .filter(|&i| is_cp_machine(&machines[i]))
                .collect();
            for &i in &cp_machines {
                placed[i] = true;
            }
            cp_node.children = self.machines_under(&cp_machines, true);
            root.children.push(cp_node);
        }

        let mut workers = self.virtual_node("WorkerGroup", "Workers");
        let mut mds: Vec<&Value> = self.input.machine_deployments.iter().collect();
        mds.sort_by_key(|m| json::name(m));
        for md in mds {
            let md_name = json::name(md);
            let mut md_node = self.node(
                md,
                None,
                &["Available"],
                Some(self.replica_counters(md)),
                str_at(md, &["spec", "template", "spec", "version"]).map(str::to_string),
            );
            let mut sets: Vec<&Value> = self
                .input
                .machine_sets
                .iter()
                .filter(|ms| json::owner_of_kind(ms, "MachineDeployment") == Some(md_name))
                .collect();
            sets.sort_by_key(|m| json::name(m));
            let mut direct: Vec<usize> = vec![];
            for ms in sets {
                let ms_name = json::name(ms);
                let owned: Vec<usize> = (0..machines.len())
                    .filter(|&i| {
                        !placed[i]
                            && json::owner_of_kind(&machines[i], "MachineSet") == Some(ms_name)
                    })
                    .collect();
                for &i in &owned {
                    placed[i] = true;
                }
                if self.opts.show_machinesets {
                    let mut ms_node = self.node(
                        ms,
                        None,
                        &[],
                        Some(self.replica_counters(ms)),
                        str_at(ms, &["spec", "template", "spec", "version"]).map(str::to_string),
                    );
                    // MachineSets show no condition in the v1beta2 layout.
                    if !self.v1beta1() {
                        ms_node.status = None;
                    }
                    ms_node.children = self.machines_under(&owned, true);
                    md_node.children.push(ms_node);
                } else {
                    direct.extend(owned);
                }
            }
            if !self.opts.show_machinesets {
                md_node.children = self.machines_under(&direct, true);
            }
            workers.children.push(md_node);
        }
        let mut pools: Vec<&Value> = self.input.machine_pools.iter().collect();
        pools.sort_by_key(|m| json::name(m));
        for mp in pools {
            let mp_name = json::name(mp);
            let mut mp_node = self.node(
                mp,
                None,
                &["Available", "Ready"],
                Some(self.replica_counters(mp)),
                str_at(mp, &["spec", "template", "spec", "version"]).map(str::to_string),
            );
            let owned: Vec<usize> = (0..machines.len())
                .filter(|&i| {
                    !placed[i] && json::owner_of_kind(&machines[i], "MachinePool") == Some(mp_name)
                })
                .collect();
            for &i in &owned {
                placed[i] = true;
            }
            mp_node.children = self.machines_under(&owned, true);
            workers.children.push(mp_node);
        }
        let others: Vec<usize> = (0..machines.len()).filter(|&i| !placed[i]).collect();
        if !others.is_empty() {
            let mut other = self.virtual_node("OtherGroup", "Other");
            other.children = self.machines_under(&others, false);
            workers.children.push(other);
        }
        if !workers.children.is_empty() {
            root.children.push(workers);
        }
        root
    }

    fn replica_counters(&self, v: &Value) -> Counters {
        // v1beta1-served objects carry the v1beta2 counters in status.v1beta2.
        let pick =
            |f: &str| i64_at(v, &["status", "v1beta2", f]).or_else(|| i64_at(v, &["status", f]));
        Counters {
            current: i64_at(v, &["status", "replicas"]).or(Some(0)),
            desired: i64_at(v, &["spec", "replicas"]),
            available: pick("availableReplicas"),
            ready: pick("readyReplicas"),
            up_to_date: pick("upToDateReplicas"),
        }
    }

    fn control_plane_node(&self, cp: &Value) -> TreeNode {
        let counters = self.replica_counters(cp);
        let version = str_at(cp, &["spec", "version"]).map(str::to_string);
        let mut node = self.node(
            cp,
            Some("ControlPlane"),
            &["Available", "Ready"],
            Some(counters.clone()),
            version,
        );
        if json::kind(cp) == "KamajiControlPlane" {
            node.control_plane_pods = Some(counters);
        }
        node
    }

    /// Machine rows for a grouping parent (`grouping` = the parent groups its children).
    fn machines_under(&self, idx: &[usize], grouping_parent: bool) -> Vec<TreeNode> {
        let machines = self.input.machines;
        let mut singles: Vec<usize> = Vec::new();
        let mut groups: BTreeMap<GroupKey, Vec<usize>> = BTreeMap::new();
        if grouping_parent && self.opts.grouping {
            for &i in idx {
                groups
                    .entry(self.group_key(&machines[i]))
                    .or_default()
                    .push(i);
            }
            for (_, members) in std::mem::take(&mut groups).into_iter() {
                if members.len() == 1 {
                    singles.extend(members);
                } else {
                    groups.insert(self.group_key(&machines[members[0]]), members);
                }
            }
        } else {
            singles.extend_from_slice(idx);
        }
        let mut out: Vec<TreeNode> = singles
            .iter()
            .map(|&i| self.machine_node(&machines[i]))
            .collect();
        for members in groups.values() {
            out.push(self.group_node(members));
        }
        out.sort_by(|a, b| a.display_name.cmp(&b.display_name));
        out
    }

    fn host_of(&self, m: &Value) -> Option<String> {
        if let Some(h) = str_at(m, &["spec", "providerID"]).and_then(host_from_provider_id) {
            return Some(h.to_string());
        }
        let (kind, name) = (
            str_at(m, &["spec", "infrastructureRef", "kind"])?,
            str_at(m, &["spec", "infrastructureRef", "name"])?,
        );
        if kind != "ByoMachine" {
            return None;
        }
        if let Some(bm) = self.infra_machines.get(&(kind, name))
            && let Some(h) = str_at(bm, &["spec", "providerID"]).and_then(host_from_provider_id)
        {
            return Some(h.to_string());
        }
        self.hosts_by_byomachine
            .get(&(json::namespace(m), name))
            .map(|h| h.to_string())
    }

    fn machine_node(&self, m: &Value) -> TreeNode {
        let conds = self.conds(m);
        let one = |t: &str| {
            Some(i64::from(
                condition::find(&conds, t).is_some_and(Condition::is_true),
            ))
        };
        let counters = Counters {
            current: Some(1),
            desired: None,
            available: one("Available"),
            ready: one("Ready"),
            up_to_date: one("UpToDate"),
        };
        let mut node = self.node(
            m,
            None,
            &["Ready"],
            Some(counters),
            str_at(m, &["spec", "version"]).map(str::to_string),
        );
        node.host = self.host_of(m);
        // Infrastructure machine and bootstrap config, hidden unless they say something new.
        let parent_ready = if self.v1beta1() {
            self.v1beta1_ready(m)
        } else {
            self.cond(m, "Ready")
        };
        let refs = [
            (
                "MachineInfrastructure",
                at(m, &["spec", "infrastructureRef"]),
                &self.infra_machines,
            ),
            (
                "BootstrapConfig",
                at(m, &["spec", "bootstrap", "configRef"]),
                &self.bootstrap,
            ),
        ];
        for (meta, r, map) in refs {
            let Some(r) = r else { continue };
            let (Some(k), Some(n)) = (str_at(r, &["kind"]), str_at(r, &["name"])) else {
                continue;
            };
            let Some(obj) = map.get(&(k, n)) else {
                continue;
            };
            let ready = if self.v1beta1() {
                self.v1beta1_ready(obj)
            } else {
                self.cond(obj, "Ready")
            };
            let same = match (&parent_ready, &ready) {
                (None, None) => true,
                (Some(a), Some(b)) => {
                    a.status == b.status
                        && a.reason == b.reason
                        && (!self.v1beta1() || a.severity == b.severity)
                }
                _ => false,
            };
            let hide = !self.opts.echo && (ready.as_ref().is_some_and(Condition::is_true) || same);
            if !hide {
                node.children
                    .push(self.node(obj, Some(meta), &["Ready"], None, None));
            }
        }
        node
    }

    fn group_node(&self, members: &[usize]) -> TreeNode {
        let machines = self.input.machines;
        let first = &machines[members[0]];
        let mut items: Vec<String> = members
            .iter()
            .map(|&i| json::name(&machines[i]).to_string())
            .collect();
        items.sort();
        let mut hosts: Vec<String> = members
            .iter()
            .filter_map(|&i| self.host_of(&machines[i]))
            .collect();
        hosts.sort();
        let count = |t: &str| {
            members
                .iter()
                .filter(|&&i| self.cond(&machines[i], t).is_some_and(|c| c.is_true()))
                .count() as i64
        };
        // The group's condition: the shared status and reason, the earliest transition, no message.
        let row_cond = if self.v1beta1() {
            self.v1beta1_ready(first)
        } else {
            self.cond(first, "Ready")
        };
        let status = row_cond.map(|mut c| {
            c.message = None;
            c.last_transition_time = members
                .iter()
                .filter_map(|&i| {
                    let r = if self.v1beta1() {
                        self.v1beta1_ready(&machines[i])
                    } else {
                        self.cond(&machines[i], "Ready")
                    };
                    r.and_then(|r| r.last_transition_time)
                })
                .min();
            ConditionView::new(&c, self.now())
        });
        let message = if items.len() <= 2 {
            format!("See {}", items.join(", "))
        } else {
            format!("See {}, ...", items[..2].join(", "))
        };
        let mut node = self.virtual_node("MachineGroup", &format!("{} Machines...", items.len()));
        node.counters = Some(Counters {
            current: Some(items.len() as i64),
            desired: None,
            available: Some(count("Available")),
            ready: Some(count("Ready")),
            up_to_date: Some(count("UpToDate")),
        });
        node.status = status;
        node.message = Some(message);
        node.version = str_at(first, &["spec", "version"]).map(str::to_string);
        node.group = Some(GroupInfo {
            item_kind: "Machine".into(),
            items,
            hosts,
        });
        node
    }
}

#[cfg(test)]
mod tests;
