//! The join host → ByoMachine → Machine, over whole objects (the [`Inventory`](super::Inventory)
//! of `hosts describe` and the plans) or over the few fields a row reads of each
//! ([`ByoMachineLink`], [`MachineLink`]: the [`RowJoin`] of the `hosts` list, which holds a
//! fleet's ByoMachines and Machines as those fields rather than as JSON trees). One lookup
//! ([`Index`]) and one row ([`finish`]) serve both.

use std::collections::HashMap;

use serde_json::Value;

use super::{
    CLUSTER_NAME_LABEL, HostFacts, HostRow, HostState, K8S_VERSION_ANNOTATION, Key, byomachine_ref,
    default_ip, host_from_provider_id,
};
use crate::json::{self, str_at};
use crate::text;

/// A ByoMachine as the join reads it.
pub(super) trait JoinedByoMachine {
    fn key(&self) -> Key<'_>;
    /// Its Machine: the controller owner of kind Machine (else the first owner of that kind).
    fn machine_owner(&self) -> Option<&str>;
}

/// A Machine as the join reads it.
pub(super) trait JoinedMachine {
    fn key(&self) -> Key<'_>;
    /// The ByoMachine its `spec.infrastructureRef` names.
    fn infra_byomachine(&self) -> Option<&str>;
    /// The host named by its `byoh://<host>/<id>` `spec.providerID`.
    fn provider_host(&self) -> Option<&str>;
}

impl JoinedByoMachine for Value {
    fn key(&self) -> Key<'_> {
        (json::namespace(self), json::name(self))
    }
    fn machine_owner(&self) -> Option<&str> {
        json::owner_of_kind(self, "Machine")
    }
}

impl JoinedMachine for Value {
    fn key(&self) -> Key<'_> {
        (json::namespace(self), json::name(self))
    }
    fn infra_byomachine(&self) -> Option<&str> {
        (str_at(self, &["spec", "infrastructureRef", "kind"]) == Some("ByoMachine"))
            .then(|| str_at(self, &["spec", "infrastructureRef", "name"]))
            .flatten()
    }
    fn provider_host(&self) -> Option<&str> {
        str_at(self, &["spec", "providerID"]).and_then(host_from_provider_id)
    }
}

/// What of a host links it to what claims it: its name, the ByoMachine it names and whether
/// it is claimed at all (that ByoMachine, or the cluster-name label).
pub(super) struct HostLink<'h> {
    name: &'h str,
    byomachine: Option<Key<'h>>,
    claimed: bool,
}

impl<'h> HostLink<'h> {
    pub(super) fn of(host: &'h Value) -> Self {
        let byomachine = byomachine_ref(host);
        HostLink {
            name: json::name(host),
            byomachine,
            claimed: byomachine.is_some() || json::label(host, CLUSTER_NAME_LABEL).is_some(),
        }
    }

    fn of_facts(f: &'h HostFacts) -> Self {
        let byomachine = f
            .byomachine
            .as_ref()
            .map(|(ns, n)| (ns.as_str(), n.as_str()));
        HostLink {
            name: &f.name,
            byomachine,
            claimed: byomachine.is_some() || f.cluster_label.is_some(),
        }
    }
}

/// ByoMachines and Machines indexed for the join, so that it is O(n) in the number of objects.
pub(super) struct Index<'a, B, M> {
    byomachines: HashMap<Key<'a>, &'a B>,
    machines: HashMap<Key<'a>, &'a M>,
    /// Machines by the ByoMachine they point at (`spec.infrastructureRef`), for ByoMachines
    /// without owner refs.
    machines_by_infra: HashMap<Key<'a>, &'a M>,
    /// Machines by the host name in their `byoh://<host>/<id>` providerID.
    machines_by_host: HashMap<&'a str, &'a M>,
}

impl<'a, B: JoinedByoMachine, M: JoinedMachine> Index<'a, B, M> {
    pub(super) fn build(byomachines: &'a [B], machines: &'a [M]) -> Self {
        let mut machines_by_infra = HashMap::with_capacity(machines.len());
        let mut machines_by_host = HashMap::new();
        for m in machines {
            if let Some(n) = m.infra_byomachine() {
                machines_by_infra.insert((m.key().0, n), m);
            }
            if let Some(h) = m.provider_host() {
                machines_by_host.insert(h, m);
            }
        }
        Index {
            byomachines: byomachines.iter().map(|b| (b.key(), b)).collect(),
            machines: machines.iter().map(|m| (m.key(), m)).collect(),
            machines_by_infra,
            machines_by_host,
        }
    }

    pub(super) fn has_byomachine(&self, namespace: &str, name: &str) -> bool {
        self.byomachines.contains_key(&(namespace, name))
    }

    /// The ByoMachine of a host, if it still exists.
    pub(super) fn byomachine_of(&self, host: &HostLink) -> Option<&'a B> {
        host.byomachine
            .and_then(|k| self.byomachines.get(&k).copied())
    }

    /// The Machine of a host: the ByoMachine's owner, else the Machine pointing at the
    /// ByoMachine, else the Machine whose providerID names the host.
    pub(super) fn machine_of(&self, host: &HostLink) -> Option<&'a M> {
        if let Some(bm) = self.byomachine_of(host) {
            let (ns, name) = bm.key();
            if let Some(owner) = bm.machine_owner()
                && let Some(m) = self.machines.get(&(ns, owner))
            {
                return Some(m);
            }
            if let Some(m) = self.machines_by_infra.get(&(ns, name)) {
                return Some(m);
            }
        }
        // Only trust the providerID link while the host is still claimed.
        if host.claimed {
            return self.machines_by_host.get(host.name).copied();
        }
        None
    }
}

/// A ByoMachine as a host's row reads it: its name, its Machine and its provider ID.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ByoMachineLink {
    pub namespace: String,
    pub name: String,
    /// The Machine owning it ([`json::owner_of_kind`]).
    pub machine: Option<String>,
    /// `spec.providerID`.
    pub provider_id: Option<String>,
}

impl ByoMachineLink {
    /// The link of one ByoMachine as the server sent it.
    pub fn of(bm: &Value) -> Self {
        ByoMachineLink {
            namespace: json::namespace(bm).to_string(),
            name: json::name(bm).to_string(),
            machine: json::owner_of_kind(bm, "Machine").map(str::to_string),
            provider_id: str_at(bm, &["spec", "providerID"]).map(str::to_string),
        }
    }
}

impl JoinedByoMachine for ByoMachineLink {
    fn key(&self) -> Key<'_> {
        (&self.namespace, &self.name)
    }
    fn machine_owner(&self) -> Option<&str> {
        self.machine.as_deref()
    }
}

/// A Machine as a host's row reads it: the join's keys and the row's columns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MachineLink {
    pub namespace: String,
    pub name: String,
    /// The ByoMachine its `spec.infrastructureRef` names.
    pub byomachine: Option<String>,
    pub cluster_name: Option<String>,
    pub version: Option<String>,
    pub provider_id: Option<String>,
    pub phase: Option<String>,
    pub node: Option<String>,
    /// Its Node stopped reporting ([`crate::fields::node_silence`]).
    pub silent: bool,
}

impl MachineLink {
    /// The link of one Machine as the server sent it.
    pub fn of(m: &Value) -> Self {
        let s = |path: &[&str]| str_at(m, path).map(str::to_string);
        MachineLink {
            namespace: json::namespace(m).to_string(),
            name: json::name(m).to_string(),
            byomachine: m.infra_byomachine().map(str::to_string),
            cluster_name: s(&["spec", "clusterName"]),
            version: s(&["spec", "version"]),
            provider_id: s(&["spec", "providerID"]),
            phase: s(&["status", "phase"]),
            node: s(&["status", "nodeRef", "name"]),
            silent: crate::fields::node_silence(m).is_some(),
        }
    }
}

impl JoinedMachine for MachineLink {
    fn key(&self) -> Key<'_> {
        (&self.namespace, &self.name)
    }
    fn infra_byomachine(&self) -> Option<&str> {
        self.byomachine.as_deref()
    }
    fn provider_host(&self) -> Option<&str> {
        self.provider_id.as_deref().and_then(host_from_provider_id)
    }
}

/// A ByoHost as its row reads it: the row's own columns and the facts its state comes from,
/// cut from the object as it is parsed, so that a fleet of hosts is held as rows while the
/// kinds they join are read.
#[derive(Debug, Clone)]
pub struct HostPart {
    /// The row with the host's columns; the joined ones are filled by [`RowJoin::row`].
    row: HostRow,
    facts: HostFacts,
}

impl HostPart {
    /// The part of one ByoHost as the server sent it.
    pub fn of(host: &Value) -> HostPart {
        let mut facts = HostFacts::of(host);
        let s = |v: Option<&str>| v.map(str::to_string);
        let metadata = json::RowMeta::of(host);
        let row = HostRow {
            labels: metadata.labels.clone(),
            metadata,
            name: json::name(host).to_string(),
            namespace: json::namespace(host).to_string(),
            // Set by `finish`.
            state: HostState::Available,
            cluster: facts.cluster_label.clone(),
            byo_machine: facts.byomachine.as_ref().map(|(ns, n)| format!("{ns}/{n}")),
            machine: None,
            machine_phase: None,
            node: None,
            version: s(json::annotation(host, K8S_VERSION_ANNOTATION).filter(|v| !v.is_empty())),
            os: s(str_at(host, &["status", "hostinfo", "osname"])),
            arch: s(str_at(host, &["status", "hostinfo", "architecture"])),
            ip: default_ip(host),
            created: s(str_at(host, &["metadata", "creationTimestamp"])),
            age_seconds: None,
            os_image: s(str_at(host, &["status", "hostinfo", "osimage"])),
            provider_id: None,
            // The row carries them; the state does not read them.
            reason: facts.reason.take(),
            message: facts.message.take(),
        };
        HostPart { row, facts }
    }
}

/// The row of a host from its part, the ByoMachine and Machine the join found for it,
/// whether the ByoMachine it names exists, and `now` for its age.
pub(super) fn finish(
    part: HostPart,
    bm: Option<&ByoMachineLink>,
    machine: Option<&MachineLink>,
    byomachine_exists: impl Fn(&str, &str) -> bool,
    now: Option<jiff::Timestamp>,
) -> HostRow {
    let HostPart { mut row, facts } = part;
    row.state = match facts.state(byomachine_exists) {
        HostState::Running if machine.is_some_and(|m| m.silent) => HostState::Unreachable,
        s => s,
    };
    if let Some(m) = machine {
        if row.cluster.is_none() {
            row.cluster.clone_from(&m.cluster_name);
        }
        row.machine = Some(m.name.clone());
        row.machine_phase.clone_from(&m.phase);
        row.node.clone_from(&m.node);
        if row.version.is_none() {
            row.version.clone_from(&m.version);
        }
    }
    if row.version.is_none() {
        // A free host: the Kubernetes it carries, as its onboarding script labelled it.
        row.version = row
            .labels
            .get(crate::labels::KUBERNETES_VERSION_LABEL)
            .filter(|v| !v.is_empty())
            .cloned();
    }
    row.age_seconds = now.and_then(|now| {
        row.created
            .as_deref()
            .and_then(|t| text::seconds_since(t, now))
    });
    row.provider_id = machine
        .and_then(|m| m.provider_id.clone())
        .or_else(|| bm.and_then(|b| b.provider_id.clone()));
    row
}

/// The join of the `hosts` list: a fleet's ByoMachines and Machines as links, each host's
/// part made its row ([`RowJoin::row`]), as [`Inventory::row`](super::Inventory::row) makes it
/// from whole objects.
pub struct RowJoin<'a> {
    index: Index<'a, ByoMachineLink, MachineLink>,
    now: Option<jiff::Timestamp>,
}

impl<'a> RowJoin<'a> {
    /// Index the links; `now` turns creation timestamps into ages (`None`: no ages).
    pub fn build(
        byomachines: &'a [ByoMachineLink],
        machines: &'a [MachineLink],
        now: Option<jiff::Timestamp>,
    ) -> Self {
        RowJoin {
            index: Index::build(byomachines, machines),
            now,
        }
    }

    /// The row of one host.
    pub fn row(&self, part: HostPart) -> HostRow {
        let link = HostLink::of_facts(&part.facts);
        let bm = self.index.byomachine_of(&link);
        let machine = self.index.machine_of(&link);
        finish(
            part,
            bm,
            machine,
            |ns, n| self.index.has_byomachine(ns, n),
            self.now,
        )
    }
}
