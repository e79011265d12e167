//! The tree's skeleton, as Cluster API's clusterctl builds it
//! (`cmd/clusterctl/client/tree/discovery.go`): the Cluster, its infrastructure cluster, the
//! control plane with its Machines, and the `Workers` node with MachineDeployments (or
//! MachineSets), MachinePools and `Other` Machines. The Machine rows are in `machines`.

use std::collections::HashMap;

use serde_json::Value;

use super::row::TreeMachine;
use super::{ConditionFilter, ConditionView, Counters, Layout, TreeInput, TreeNode, TreeOptions};
use crate::condition::{self, Condition};
use crate::fields;
use crate::json::{self, at, i64_at, str_at};

/// The grouping key of an object: (type, status, reason[, severity]) of the compared conditions.
pub(super) type GroupKey = Vec<Option<(String, Option<String>, Option<String>)>>;

/// What a row reads of an object: a JSON object as the server sent it, or a Machine's
/// [`TreeMachine`].
pub(super) trait Object {
    fn kind(&self) -> &str;
    fn name(&self) -> &str;
    fn namespace(&self) -> &str;
    /// Has a `metadata.deletionTimestamp`.
    fn deleting(&self) -> bool;
    /// The current-style condition of a type.
    fn current(&self, type_: &str) -> Option<Condition>;
    /// The current-style conditions.
    fn current_all(&self) -> Vec<Condition>;
    /// The legacy (v1beta1) condition of a type.
    fn legacy(&self, type_: &str) -> Option<Condition>;
    /// The legacy (v1beta1) conditions.
    fn legacy_all(&self) -> Vec<Condition>;
}

impl Object for Value {
    fn kind(&self) -> &str {
        json::kind(self)
    }
    fn name(&self) -> &str {
        json::name(self)
    }
    fn namespace(&self) -> &str {
        json::namespace(self)
    }
    fn deleting(&self) -> bool {
        at(self, &["metadata", "deletionTimestamp"]).is_some_and(|d| !d.is_null())
    }
    fn current(&self, type_: &str) -> Option<Condition> {
        condition::current(self, type_)
    }
    fn current_all(&self) -> Vec<Condition> {
        condition::conditions(self)
    }
    fn legacy(&self, type_: &str) -> Option<Condition> {
        condition::legacy(self, type_)
    }
    fn legacy_all(&self) -> Vec<Condition> {
        condition::legacy_conditions(self)
    }
}

impl Object for TreeMachine {
    fn kind(&self) -> &str {
        &self.kind
    }
    fn name(&self) -> &str {
        &self.name
    }
    fn namespace(&self) -> &str {
        &self.namespace
    }
    fn deleting(&self) -> bool {
        self.deleting
    }
    fn current(&self, type_: &str) -> Option<Condition> {
        condition::find(&self.current, type_).cloned()
    }
    fn current_all(&self) -> Vec<Condition> {
        self.current.clone()
    }
    fn legacy(&self, type_: &str) -> Option<Condition> {
        condition::find(&self.legacy, type_).cloned()
    }
    fn legacy_all(&self) -> Vec<Condition> {
        self.legacy.clone()
    }
}

pub(super) struct Builder<'a> {
    pub input: TreeInput<'a>,
    pub opts: &'a TreeOptions,
    /// Infrastructure machines by (kind, name).
    pub infra_machines: HashMap<(&'a str, &'a str), &'a Value>,
    /// Bootstrap configs by (kind, name).
    pub bootstrap: HashMap<(&'a str, &'a str), &'a Value>,
    /// ByoHost names by the (namespace, name) of the ByoMachine they run.
    pub hosts_by_byomachine: HashMap<(&'a str, &'a str), &'a str>,
}

pub(super) fn is_cp_machine(m: &TreeMachine) -> bool {
    m.control_plane
}

impl<'a> Builder<'a> {
    pub(super) fn new(input: TreeInput<'a>, opts: &'a TreeOptions) -> Self {
        let mut hosts_by_byomachine = HashMap::new();
        for h in input.byo_hosts {
            if let Some(n) = str_at(h, &["status", "machineRef", "name"]) {
                let ns = str_at(h, &["status", "machineRef", "namespace"])
                    .unwrap_or_else(|| json::namespace(h));
                hosts_by_byomachine.insert((ns, n), json::name(h));
            }
        }
        Builder {
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
        }
    }

    pub(super) fn now(&self) -> Option<jiff::Timestamp> {
        self.input.now
    }

    pub(super) fn v1beta1(&self) -> bool {
        self.opts.layout == Layout::V1Beta1
    }

    pub(super) fn v1beta1_ready<O: Object + ?Sized>(&self, v: &O) -> Option<Condition> {
        v.legacy("Ready")
    }

    pub(super) fn cond<O: Object + ?Sized>(&self, v: &O, t: &str) -> Option<Condition> {
        v.current(t)
    }

    pub(super) fn group_key(&self, v: &TreeMachine) -> GroupKey {
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
    pub(super) fn node<O: Object + ?Sized>(
        &self,
        v: &O,
        meta: Option<&str>,
        row_condition: &[&str],
        counters: Option<Counters>,
        version: Option<String>,
    ) -> TreeNode {
        let kind = v.kind().to_string();
        let name = v.name().to_string();
        let namespace = v.namespace().to_string();
        let status = if self.v1beta1() {
            self.v1beta1_ready(v)
        } else {
            row_condition.iter().find_map(|t| self.cond(v, t))
        }
        .map(|c| ConditionView::new(&c, self.now()));
        let filter = self.opts.filter_for(&kind, &name);
        let all = || -> Vec<ConditionView> {
            let all = if self.v1beta1() {
                v.legacy_all()
            } else {
                v.current_all()
            };
            all.iter()
                .map(|c| ConditionView::new(c, self.now()))
                .collect()
        };
        let conditions: Vec<ConditionView> = match filter {
            ConditionFilter::None => vec![],
            ConditionFilter::All => all(),
            ConditionFilter::NonZero => all()
                .into_iter()
                .filter(|c| {
                    c.condition.type_ == "Available" || c.condition.type_ == "Ready" || !c.is_good()
                })
                .collect(),
        };
        let deleting = v.deleting();
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

    pub(super) fn virtual_node(&self, kind: &str, name: &str) -> TreeNode {
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

    /// The whole tree.
    pub(super) fn build(&self) -> TreeNode {
        let c = self.input.cluster;
        let mut root = self.cluster_node(c);
        if let Some(infra) = self.input.infrastructure_cluster {
            root.children.push(self.node(
                infra,
                Some("ClusterInfrastructure"),
                &["Ready"],
                None,
                None,
            ));
        }
        if self.opts.show_resourcesets && !self.input.resource_sets.is_empty() {
            let mut sets = self.virtual_node("ClusterResourceSetGroup", "ClusterResourceSets");
            for crs in self.input.resource_sets {
                sets.children.push(self.node(
                    crs,
                    None,
                    &["ResourcesApplied", "Ready"],
                    None,
                    None,
                ));
            }
            root.children.push(sets);
        }
        let mut placed = vec![false; self.input.machines.len()];
        if let Some(cp) = self.input.control_plane {
            let mut cp_node = self.control_plane_node(cp);
            let cp_machines = self.take_machines(&mut placed, is_cp_machine);
            cp_node.children = self.templates_of(&[fields::control_plane_machine_template_ref(cp)]);
            cp_node
                .children
                .extend(self.machines_under(&cp_machines, true));
            root.children.push(cp_node);
        }
        let workers = self.workers_node(&mut placed);
        if !workers.children.is_empty() {
            root.children.push(workers);
        }
        root
    }

    /// The root: the Cluster, with the control plane's and workers' counters summed.
    fn cluster_node(&self, c: &Value) -> TreeNode {
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
        self.node(
            c,
            None,
            &["Available"],
            has_counters.then_some(counters),
            topo_version,
        )
    }

    /// The Machines not placed yet that `owned` picks, now placed.
    fn take_machines(
        &self,
        placed: &mut [bool],
        owned: impl Fn(&TreeMachine) -> bool,
    ) -> Vec<usize> {
        let machines = self.input.machines;
        let taken: Vec<usize> = (0..machines.len())
            .filter(|&i| !placed[i] && owned(&machines[i]))
            .collect();
        for &i in &taken {
            placed[i] = true;
        }
        taken
    }

    /// The virtual `Workers` node: MachineDeployments, MachinePools, then `Other` Machines.
    fn workers_node(&self, placed: &mut [bool]) -> TreeNode {
        let mut workers = self.virtual_node("WorkerGroup", "Workers");
        let mut mds: Vec<&Value> = self.input.machine_deployments.iter().collect();
        mds.sort_by_key(|m| json::name(m));
        for md in mds {
            workers.children.push(self.deployment_node(md, placed));
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
            let owned = self.take_machines(placed, |m| m.machine_pool.as_deref() == Some(mp_name));
            mp_node.children = self.machines_under(&owned, true);
            workers.children.push(mp_node);
        }
        let others = self.take_machines(placed, |_| true);
        if !others.is_empty() {
            let mut other = self.virtual_node("OtherGroup", "Other");
            other.children = self.machines_under(&others, false);
            workers.children.push(other);
        }
        workers
    }

    /// A MachineDeployment with its MachineSets' Machines: under MachineSet rows with
    /// `show_machinesets`, else directly.
    fn deployment_node(&self, md: &Value, placed: &mut [bool]) -> TreeNode {
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
            let owned = self.take_machines(placed, |m| m.machine_set.as_deref() == Some(ms_name));
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
        let mut templates = self.templates_of(&[
            fields::template_infrastructure_ref(md),
            fields::object_ref(md, &["spec", "template", "spec", "bootstrap", "configRef"]),
        ]);
        templates.append(&mut md_node.children);
        md_node.children = templates;
        md_node
    }

    /// With `show_templates`, the nodes of the referenced templates that were read, as
    /// clusterctl names them (`MachineInfrastructureTemplate`, `BootstrapConfigTemplate`).
    fn templates_of(&self, refs: &[Option<fields::ObjectRef>]) -> Vec<TreeNode> {
        if !self.opts.show_templates {
            return vec![];
        }
        let meta = ["MachineInfrastructureTemplate", "BootstrapConfigTemplate"];
        refs.iter()
            .zip(meta)
            .filter_map(|(r, meta)| {
                let r = r.as_ref()?;
                let t = self
                    .input
                    .templates
                    .iter()
                    .find(|t| json::kind(t) == r.kind && json::name(t) == r.name)?;
                Some(self.node(t, Some(meta), &["Ready"], None, None))
            })
            .collect()
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
}
