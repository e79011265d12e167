//! The ByoHost inventory behind `kubectl capi hosts` and `kubectl capi hosts describe`.
//!
//! Pure: the verb LISTs each kind once (ByoHosts, ByoMachines, Machines, Clusters, in all
//! namespaces) and hands the items here; the lists are taken as complete (a host claimed by a
//! ByoMachine missing from its list is Releasing). [`Inventory::build`] indexes them in hash maps, so the
//! join host → ByoMachine → Machine → Cluster is O(n) in the number of objects.

//!
//! Submodules: `diagnose` (`hosts describe`'s plain words, ByoMachines waiting for a host) and
//! `network` (the host's interfaces).

mod diagnose;
mod join;
pub mod maintenance;
mod network;
pub mod removal;
pub mod version;

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use serde::Serialize;
use serde_json::Value;

use super::selector::LabelSelector;
use crate::condition::{self, Condition};
use crate::json::{self, str_at};

pub use diagnose::{Diagnosis, PendingMachine};
pub use join::{ByoMachineLink, HostPart, MachineLink, RowJoin};
pub(crate) use network::default_ip;
pub use network::{AddressFit, Interface, address_fit, interfaces, named_networks};

/// `cluster.x-k8s.io/cluster-name`: set on a host while a machine uses it.
pub use crate::labels::CLUSTER_NAME_LABEL;
/// `<namespace>.<byomachine>` of the ByoMachine that claimed the host.
pub const BYOMACHINE_NAME_LABEL: &str = "byoh.infrastructure.cluster.x-k8s.io/byomachine-name";
/// Set by the ByoMachine delete path; the host agent removes it once it has cleaned up.
pub(crate) const UNREGISTERING_ANNOTATION: &str =
    "byoh.infrastructure.cluster.x-k8s.io/unregistering";
/// The Kubernetes version of the machine on the host.
pub(crate) const K8S_VERSION_ANNOTATION: &str = "byoh.infrastructure.cluster.x-k8s.io/k8sversion";
/// ByoHost condition: the node bootstrapped (kubeadm join/init ran).
pub(crate) const BOOTSTRAP_CONDITION: &str = "K8sNodeBootstrapSucceeded";
/// ByoHost condition: the Kubernetes components were installed.
pub(crate) const INSTALL_CONDITION: &str = "K8sComponentsInstallationSucceeded";

/// Condition reasons that mean the agent failed on the host.
const FAILURE_REASONS: [&str; 3] = [
    "CloudInitExecutionFailed",
    "K8sComponentsInstallationFailed",
    "CleanK8sDirectoriesFailed",
];

/// The state of a host, derived from its labels, annotations, `status.machineRef` and conditions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum HostState {
    /// In the pool: no machine claims it.
    Available,
    /// Claimed by a ByoMachine; the agent has not started on it yet (no bootstrap data, or the
    /// agent has not reported since the claim).
    Reserved,
    /// The agent is installing Kubernetes or joining the node.
    Provisioning,
    /// The node bootstrapped.
    Running,
    /// It serves a machine whose Node stopped reporting ([`crate::fields::node_silence`]): the
    /// host is down, or its kubelet and agent stopped. `kubectl capi hosts retire` replaces its
    /// machine and releases it.
    Unreachable,
    /// Its machine is gone or being deleted; the agent has not cleaned up yet.
    Releasing,
    /// The agent reported an install, bootstrap or cleanup failure.
    Failed,
    /// Paused with its cluster or ByoMachine; the agent skips it.
    Paused,
    /// Taken out of BYOH's selection by `kubectl capi hosts cordon|drain` (see
    /// [`maintenance`]); `uncordon` puts it back.
    Cordoned,
}

impl HostState {
    /// Every state, in summary order.
    pub const ALL: [HostState; 9] = [
        HostState::Available,
        HostState::Reserved,
        HostState::Provisioning,
        HostState::Running,
        HostState::Unreachable,
        HostState::Releasing,
        HostState::Failed,
        HostState::Paused,
        HostState::Cordoned,
    ];

    /// The name shown in the STATE column.
    pub fn as_str(self) -> &'static str {
        match self {
            HostState::Available => "Available",
            HostState::Reserved => "Reserved",
            HostState::Provisioning => "Provisioning",
            HostState::Running => "Running",
            HostState::Unreachable => "Unreachable",
            HostState::Releasing => "Releasing",
            HostState::Failed => "Failed",
            HostState::Paused => "Paused",
            HostState::Cordoned => "Cordoned",
        }
    }

    /// Parse a `--state` value, case-insensitively.
    pub fn parse(s: &str) -> Result<Self, HostsError> {
        HostState::ALL
            .into_iter()
            .find(|st| st.as_str().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| HostsError::UnknownState(s.to_string()))
    }
}

impl fmt::Display for HostState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Bad filter input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostsError {
    #[error(
        "unknown host state {0:?}: use one of Available, Reserved, Provisioning, Running, Unreachable, Releasing, Failed, Paused, Cordoned"
    )]
    UnknownState(String),
}

/// One row of `kubectl capi hosts` (table columns first, `-o wide` fields after).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HostRow {
    /// kubectl's `metadata` (name, namespace, labels) of the ByoHost.
    pub metadata: json::RowMeta,
    pub name: String,
    pub namespace: String,
    pub state: HostState,
    /// The cluster using the host (label, else the Machine's cluster).
    pub cluster: Option<String>,
    /// `<namespace>/<name>` of the ByoMachine that claimed the host.
    pub byo_machine: Option<String>,
    /// The CAPI Machine owning that ByoMachine.
    pub machine: Option<String>,
    /// The Machine's phase (`Running`, `Provisioning`, ...).
    pub machine_phase: Option<String>,
    /// The workload Node (Machine `status.nodeRef.name`).
    pub node: Option<String>,
    /// Kubernetes version: the host's k8sversion annotation, else the Machine's, else the one it
    /// carries (its `capi-kamaji.io/kubernetes-version` label).
    pub version: Option<String>,
    /// `status.hostinfo.osname`.
    pub os: Option<String>,
    /// `status.hostinfo.architecture`.
    pub arch: Option<String>,
    /// First address of the default interface (without prefix length).
    pub ip: Option<String>,
    /// `metadata.creationTimestamp`.
    pub created: Option<String>,
    /// Seconds since creation at the `now` given to [`Inventory::build`].
    pub age_seconds: Option<i64>,
    /// `status.hostinfo.osimage` (wide).
    pub os_image: Option<String>,
    /// Machine or ByoMachine `spec.providerID` (wide).
    pub provider_id: Option<String>,
    /// The most telling condition reason (wide).
    pub reason: Option<String>,
    /// That condition's message.
    pub message: Option<String>,
    /// The host's labels (wide).
    pub labels: BTreeMap<String, String>,
}

/// Filters of `kubectl capi hosts`.
#[derive(Debug, Clone, Default)]
pub struct HostFilter {
    /// `--cluster`: hosts used by this cluster.
    pub cluster: Option<String>,
    /// `--state` (any of).
    pub states: Vec<HostState>,
    /// `--available`: only Available hosts.
    pub available: bool,
    /// `-l`: a selector over host labels.
    pub selector: Option<LabelSelector>,
    /// `-n`: only hosts in this namespace.
    pub namespace: Option<String>,
}

impl HostFilter {
    /// Whether a row passes every filter.
    pub fn matches(&self, row: &HostRow) -> bool {
        if let Some(c) = &self.cluster
            && row.cluster.as_deref() != Some(c.as_str())
        {
            return false;
        }
        if !self.states.is_empty() && !self.states.contains(&row.state) {
            return false;
        }
        if self.available && row.state != HostState::Available {
            return false;
        }
        if let Some(ns) = &self.namespace
            && &row.namespace != ns
        {
            return false;
        }
        if let Some(sel) = &self.selector
            && !sel.matches(&row.labels)
        {
            return false;
        }
        true
    }

    /// Keep the rows that pass.
    #[cfg(test)]
    pub(crate) fn apply(&self, rows: Vec<HostRow>) -> Vec<HostRow> {
        rows.into_iter().filter(|r| self.matches(r)).collect()
    }
}

/// Counts per state: "40 hosts: 12 available, 25 running, 2 releasing, 1 failed".
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct HostSummary {
    pub total: usize,
    pub available: usize,
    pub reserved: usize,
    pub provisioning: usize,
    pub running: usize,
    pub unreachable: usize,
    pub releasing: usize,
    pub failed: usize,
    pub paused: usize,
    pub cordoned: usize,
}

impl HostSummary {
    /// Count the rows.
    pub fn of(rows: &[HostRow]) -> Self {
        let mut s = HostSummary {
            total: rows.len(),
            ..Default::default()
        };
        for r in rows {
            *s.slot(r.state) += 1;
        }
        s
    }

    fn slot(&mut self, st: HostState) -> &mut usize {
        match st {
            HostState::Available => &mut self.available,
            HostState::Reserved => &mut self.reserved,
            HostState::Provisioning => &mut self.provisioning,
            HostState::Running => &mut self.running,
            HostState::Unreachable => &mut self.unreachable,
            HostState::Releasing => &mut self.releasing,
            HostState::Failed => &mut self.failed,
            HostState::Paused => &mut self.paused,
            HostState::Cordoned => &mut self.cordoned,
        }
    }

    /// The count of one state.
    pub fn count(&self, st: HostState) -> usize {
        let mut c = self.clone();
        *c.slot(st)
    }
}

impl fmt::Display for HostSummary {
    /// Zero counts are left out, except `available`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let noun = if self.total == 1 { "host" } else { "hosts" };
        write!(f, "{} {noun}: {} available", self.total, self.available)?;
        for st in &HostState::ALL[1..] {
            let n = self.count(*st);
            if n > 0 {
                write!(f, ", {n} {}", st.as_str().to_lowercase())?;
            }
        }
        Ok(())
    }
}

type Key<'a> = (&'a str, &'a str);

/// The four lists, indexed for the join.
pub struct Inventory<'a> {
    hosts: &'a [Value],
    index: join::Index<'a, Value, Value>,
    clusters: HashMap<Key<'a>, &'a Value>,
    now: Option<jiff::Timestamp>,
}

/// The host's ByoMachine reference: `status.machineRef`, else the byomachine-name label.
fn byomachine_ref(host: &Value) -> Option<(&str, &str)> {
    if let Some(name) = str_at(host, &["status", "machineRef", "name"]) {
        let ns = str_at(host, &["status", "machineRef", "namespace"])
            .unwrap_or_else(|| json::namespace(host));
        return Some((ns, name));
    }
    json::label(host, BYOMACHINE_NAME_LABEL).and_then(|l| l.split_once('.'))
}

/// The host name in a `byoh://<host>/<id>` provider ID.
pub fn host_from_provider_id(provider_id: &str) -> Option<&str> {
    provider_id
        .strip_prefix("byoh://")
        .map(|r| r.split('/').next().unwrap_or(r))
        .filter(|h| !h.is_empty())
}

impl<'a> Inventory<'a> {
    /// Index the lists. `now` turns creation timestamps into ages; pass `None` to skip ages.
    pub fn build(
        hosts: &'a [Value],
        byomachines: &'a [Value],
        machines: &'a [Value],
        clusters: &'a [Value],
        now: Option<jiff::Timestamp>,
    ) -> Self {
        let key = |v: &'a Value| (json::namespace(v), json::name(v));
        Inventory {
            hosts,
            index: join::Index::build(byomachines, machines),
            clusters: clusters.iter().map(|v| (key(v), v)).collect(),
            now,
        }
    }

    /// The ByoMachine of a host, if it still exists.
    pub fn byomachine_of(&self, host: &Value) -> Option<&'a Value> {
        self.index.byomachine_of(&join::HostLink::of(host))
    }

    /// The CAPI Machine of a host: the ByoMachine's owner, else the Machine pointing at the
    /// ByoMachine, else the Machine whose providerID names the host.
    pub fn machine_of(&self, host: &Value) -> Option<&'a Value> {
        self.index.machine_of(&join::HostLink::of(host))
    }

    /// The `(namespace, name)` of the cluster a host serves or last served: the cluster-name
    /// label (else its Machine's cluster), in the namespace of its Machine (else of the
    /// ByoMachine it points at, else its own). Cluster names repeat across namespaces (a `c1`
    /// per team), so a name alone does not say whose a host is.
    pub(crate) fn cluster_key_of(&self, host: &'a Value) -> Option<(&'a str, &'a str)> {
        let m = self.machine_of(host);
        let name = json::label(host, CLUSTER_NAME_LABEL)
            .or_else(|| m.and_then(|m| str_at(m, &["spec", "clusterName"])))?;
        let ns = m
            .map(json::namespace)
            .or_else(|| byomachine_ref(host).map(|(ns, _)| ns))
            .unwrap_or_else(|| json::namespace(host));
        Some((ns, name))
    }

    /// The Cluster object of a host, if it exists.
    pub fn cluster_of(&self, host: &'a Value) -> Option<&'a Value> {
        self.clusters.get(&self.cluster_key_of(host)?).copied()
    }

    /// The hosts of cluster `namespace/name` ([`Inventory::cluster_key_of`]).
    pub(crate) fn hosts_of(&self, namespace: &str, name: &str) -> Vec<&'a Value> {
        self.hosts
            .iter()
            .filter(|h| self.cluster_key_of(h) == Some((namespace, name)))
            .collect()
    }

    /// Derive the state of one host.
    pub fn state(&self, host: &Value) -> HostState {
        let facts = HostFacts::of(host);
        match facts.state(|ns, name| self.index.has_byomachine(ns, name)) {
            HostState::Running
                if self
                    .machine_of(host)
                    .is_some_and(|m| crate::fields::node_silence(m).is_some()) =>
            {
                HostState::Unreachable
            }
            s => s,
        }
    }

    /// One row per host, in list order.
    #[cfg(test)]
    pub(crate) fn rows(&self) -> Vec<HostRow> {
        self.hosts.iter().map(|h| self.row(h)).collect()
    }

    /// The row of one host (the row [`RowJoin::row`] makes of its [`HostPart`]).
    pub fn row(&self, host: &Value) -> HostRow {
        let bm = self.byomachine_of(host).map(ByoMachineLink::of);
        let machine = self.machine_of(host).map(MachineLink::of);
        join::finish(
            HostPart::of(host),
            bm.as_ref(),
            machine.as_ref(),
            |ns, name| self.index.has_byomachine(ns, name),
            self.now,
        )
    }
}

/// What a host's state is derived from, read from its object: the one derivation behind the
/// hosts table and `doctor`, small enough that a fleet of hosts can be held as facts rather
/// than as objects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostFacts {
    pub namespace: String,
    pub name: String,
    /// The cluster-name label (empty on a cordoned host).
    pub cluster_label: Option<String>,
    /// The ByoMachine that claimed it (`status.machineRef`, else the byomachine-name label).
    byomachine: Option<(String, String)>,
    unregistering: bool,
    failed: bool,
    paused: bool,
    cordoned: bool,
    bootstrapped: bool,
    /// `status.machineRef` is set and the agent reported progress on it.
    provisioning: bool,
    /// Why it is in its state: the failed condition, else one not True with a reason, else the
    /// bootstrap condition.
    pub reason: Option<String>,
    pub message: Option<String>,
}

impl HostFacts {
    /// The facts of one ByoHost as the server sent it.
    pub fn of(host: &Value) -> HostFacts {
        let conds = condition::conditions_at(host, &["status", "conditions"]);
        let reason_cond = failure(&conds)
            .or_else(|| conds.iter().find(|c| !c.is_true() && c.reason.is_some()))
            .or_else(|| condition::find(&conds, BOOTSTRAP_CONDITION));
        let has_machine_ref = str_at(host, &["status", "machineRef", "name"]).is_some();
        HostFacts {
            namespace: json::namespace(host).to_string(),
            name: json::name(host).to_string(),
            cluster_label: json::label(host, CLUSTER_NAME_LABEL).map(str::to_string),
            byomachine: byomachine_ref(host).map(|(ns, n)| (ns.to_string(), n.to_string())),
            unregistering: json::has_annotation(host, UNREGISTERING_ANNOTATION),
            failed: failure(&conds).is_some(),
            paused: json::has_annotation(host, crate::labels::PAUSED_ANNOTATION),
            cordoned: maintenance::is_cordoned(host),
            bootstrapped: condition::find(&conds, BOOTSTRAP_CONDITION)
                .is_some_and(Condition::is_true),
            provisioning: has_machine_ref && agent_started(&conds),
            reason: reason_cond.and_then(|c| c.reason.clone()),
            message: reason_cond.and_then(|c| c.message.clone()),
        }
    }

    /// Its state, `byomachine_exists(namespace, name)` saying whether the ByoMachine that
    /// claimed it is still there.
    pub fn state(&self, byomachine_exists: impl Fn(&str, &str) -> bool) -> HostState {
        if self.unregistering {
            return HostState::Releasing;
        }
        if self.failed {
            return HostState::Failed;
        }
        if self.paused {
            return HostState::Paused;
        }
        if self.cordoned {
            return HostState::Cordoned;
        }
        if self.byomachine.is_none() && self.cluster_label.is_none() {
            return HostState::Available;
        }
        // Claimed by a ByoMachine that no longer exists: the controller released it (or the
        // machine was force-deleted) and the agent has not cleaned up.
        if let Some((ns, name)) = &self.byomachine
            && !byomachine_exists(ns, name)
        {
            return HostState::Releasing;
        }
        if self.bootstrapped {
            HostState::Running
        } else if self.provisioning {
            HostState::Provisioning
        } else {
            HostState::Reserved
        }
    }
}

/// Whether the agent reported progress on the current claim: a condition other than the idle
/// or cleaned-up ones (`WaitingForMachineRefToBeAssigned`, `K8sNodeAbsent`), which may be left
/// over from an earlier claim.
fn agent_started(conds: &[Condition]) -> bool {
    [BOOTSTRAP_CONDITION, INSTALL_CONDITION].iter().any(|t| {
        condition::find(conds, t).is_some_and(|c| {
            c.is_true()
                || !matches!(
                    c.reason.as_deref(),
                    None | Some("WaitingForMachineRefToBeAssigned" | "K8sNodeAbsent")
                )
        })
    })
}

/// The first failed condition (reason in the failure set, status not True).
fn failure(conds: &[Condition]) -> Option<&Condition> {
    conds.iter().find(|c| {
        !c.is_true()
            && c.reason
                .as_deref()
                .is_some_and(|r| FAILURE_REASONS.contains(&r))
    })
}

/// What the BYOH pool holds for `wanted` workers of cluster `namespace/name`: the hosts that
/// already serve it (a re-run of `create`) and the free hosts whose labels carry every pair of
/// `selector` (BYOH picks from every namespace).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolCheck {
    pub wanted: usize,
    pub serving: usize,
    pub free: usize,
    /// Free matching hosts that carry another Kubernetes than the one asked for, named
    /// (`node-3 (v1.35.4)`); empty when none or no version was asked for.
    pub misfits: String,
}

impl PoolCheck {
    /// Of the pool's ByoHosts; only the hosts' own fields are read. With `version`, the
    /// machines run on the hosts' own Kubernetes, so only hosts fitting it count as free.
    pub fn of(
        hosts: &[Value],
        namespace: &str,
        name: &str,
        selector: &BTreeMap<String, String>,
        version: Option<&crate::version::KubeVersion>,
        wanted: usize,
    ) -> PoolCheck {
        let inv = Inventory::build(hosts, &[], &[], &[], None);
        let matching: Vec<&Value> = hosts
            .iter()
            .filter(|h| inv.state(h) == HostState::Available)
            .filter(|h| {
                selector
                    .iter()
                    .all(|(k, v)| json::label(h, k) == Some(v.as_str()))
            })
            .collect();
        let (free, misfits) = match version {
            Some(v) => (
                matching.iter().filter(|h| version::fits(h, v)).count(),
                version::misfits(matching.iter().copied(), v),
            ),
            None => (matching.len(), String::new()),
        };
        PoolCheck {
            wanted,
            serving: inv.hosts_of(namespace, name).len(),
            free,
            misfits,
        }
    }

    /// Workers that would wait in Pending for a host.
    pub fn missing(&self) -> usize {
        self.wanted
            .saturating_sub(self.serving.saturating_add(self.free))
    }
}

/// The ByoHosts the machines of cluster `namespace/name` would run on: those that already serve
/// it (a re-run) and the free ones `selects` picks, of every namespace, as BYOH picks them.
pub fn pool_hosts<'a>(
    hosts: &'a [Value],
    namespace: &str,
    name: &str,
    selects: impl Fn(&Value) -> bool,
) -> Vec<&'a Value> {
    let inv = Inventory::build(hosts, &[], &[], &[], None);
    hosts
        .iter()
        .filter(|h| {
            inv.cluster_key_of(h) == Some((namespace, name))
                || (inv.state(h) == HostState::Available && selects(h))
        })
        .collect()
}

/// [`pool_hosts`] for the objects of a rendered cluster template: a free host is picked by the
/// selector of any of its ByoMachineTemplates (one without a selector picks any host, as BYOH
/// v0.5.0's `ByoMachineReconciler` does; one whose selector does not parse picks none). `None`:
/// the objects hold no ByoMachineTemplate, so no machine of theirs runs on a BYOH host.
pub fn template_pool<'a>(
    objects: &[Value],
    hosts: &'a [Value],
    namespace: &str,
    name: &str,
) -> Option<Vec<&'a Value>> {
    let selectors: Vec<Option<LabelSelector>> = objects
        .iter()
        .filter(|o| {
            json::kind(o) == "ByoMachineTemplate"
                && str_at(o, &["apiVersion"]).and_then(|v| v.split('/').next())
                    == Some(crate::groups::INFRASTRUCTURE_GROUP)
        })
        .map(|t| {
            let sel = json::at(t, &["spec", "template", "spec", "selector"]);
            LabelSelector::from_json(sel.unwrap_or(&Value::Null)).ok()
        })
        .collect();
    if selectors.is_empty() {
        return None;
    }
    let selects = |h: &Value| selectors.iter().flatten().any(|s| s.matches_object(h));
    Some(pool_hosts(hosts, namespace, name, selects))
}

#[cfg(test)]
mod tests;
