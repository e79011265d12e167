//! A Machine as the tree reads it ([`TreeMachine`]): the few fields of each of a cluster's
//! thousands of Machines that the rows use, parsed straight from the LIST as each Machine
//! arrives, and narrowed to the conditions the options show ([`TreeMachine::narrowed`]).
//! Held as a JSON tree, a pruned Machine cost about 19 KB (each condition list a map per
//! condition); as this row it costs a few hundred bytes.

use serde::{Deserialize, Deserializer};
use serde_json::Value;

use super::{ConditionFilter, Layout, TreeOptions};
use crate::condition::{self, Condition};
use crate::fields::ObjectRef;
use crate::json::{self, at, str_at};
use crate::labels::CONTROL_PLANE_LABEL;

/// The current-style conditions a Machine's row reads when it shows none of its conditions:
/// Available, Ready and UpToDate group Machines and fill the counters, Ready fills the row.
const ROW_TYPES: [&str; 3] = ["Available", "Ready", "UpToDate"];

/// A Machine as the tree of `describe` reads it: its name, namespace, control-plane label,
/// owner, deletion, version, providerID, references and conditions, all read as the JSON
/// accessors read the object (`kcore::json`, `kcore::condition`, `kcore::fields`), so either
/// contract's Machines read alike.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TreeMachine {
    /// `metadata.name`, or `""`.
    pub name: String,
    /// `metadata.namespace`, or `""`.
    pub namespace: String,
    /// `spec.providerID`, when set and not empty.
    pub provider_id: Option<String>,
    pub(crate) kind: String,
    /// Has the control-plane label.
    pub(crate) control_plane: bool,
    /// Has a `metadata.deletionTimestamp`.
    pub(crate) deleting: bool,
    /// The owning MachineSet and MachinePool ([`json::owner_of_kind`]).
    pub(crate) machine_set: Option<String>,
    pub(crate) machine_pool: Option<String>,
    /// `spec.version`, when set and not empty.
    pub(crate) version: Option<String>,
    /// `spec.infrastructureRef`, as `fields::machine_infrastructure_ref` reads it.
    pub infrastructure_ref: Option<ObjectRef>,
    /// `spec.bootstrap.configRef`, as `fields::machine_bootstrap_ref` reads it.
    pub bootstrap_ref: Option<ObjectRef>,
    /// The references with a kind and a name but neither a group nor an apiVersion, which the
    /// fields above leave out and the tree joins on all the same (rare: both are required).
    pub(crate) ungrouped: Option<Box<[Option<ObjectRef>; 2]>>,
    /// The current-style conditions (`condition::conditions`).
    pub(crate) current: Vec<Condition>,
    /// The legacy (v1beta1) conditions (`condition::legacy_conditions`).
    pub(crate) legacy: Vec<Condition>,
}

/// The reference at `path` as [`ObjectRef::parse`] reads it, and, when that reads none though
/// the reference has a kind and a name (it names no group nor apiVersion), those.
fn reference(m: &Value, path: &[&str]) -> (Option<ObjectRef>, Option<ObjectRef>) {
    let Some(r) = at(m, path) else {
        return (None, None);
    };
    if let Some(parsed) = ObjectRef::parse(r) {
        return (Some(parsed), None);
    }
    let ungrouped = match (str_at(r, &["kind"]), str_at(r, &["name"])) {
        (Some(kind), Some(name)) => Some(ObjectRef {
            kind: kind.to_string(),
            name: name.to_string(),
            ..Default::default()
        }),
        _ => None,
    };
    (None, ungrouped)
}

impl TreeMachine {
    /// The Machine's fields the tree reads, every condition kept.
    pub(crate) fn of(m: &Value) -> TreeMachine {
        let owned = |s: Option<&str>| s.map(str::to_string);
        let (infrastructure_ref, infra_ungrouped) = reference(m, &["spec", "infrastructureRef"]);
        let (bootstrap_ref, boot_ungrouped) = reference(m, &["spec", "bootstrap", "configRef"]);
        let ungrouped = (infra_ungrouped.is_some() || boot_ungrouped.is_some())
            .then(|| Box::new([infra_ungrouped, boot_ungrouped]));
        TreeMachine {
            name: json::name(m).to_string(),
            namespace: json::namespace(m).to_string(),
            provider_id: owned(str_at(m, &["spec", "providerID"])),
            kind: json::kind(m).to_string(),
            control_plane: json::label(m, CONTROL_PLANE_LABEL).is_some(),
            deleting: at(m, &["metadata", "deletionTimestamp"]).is_some_and(|d| !d.is_null()),
            machine_set: owned(json::owner_of_kind(m, "MachineSet")),
            machine_pool: owned(json::owner_of_kind(m, "MachinePool")),
            version: owned(str_at(m, &["spec", "version"])),
            infrastructure_ref,
            bootstrap_ref,
            ungrouped,
            current: condition::conditions(m),
            legacy: condition::legacy_conditions(m),
        }
    }

    /// The (kind, name) the tree finds the infrastructure machine by.
    pub(crate) fn infrastructure_key(&self) -> Option<(&str, &str)> {
        self.key(self.infrastructure_ref.as_ref(), 0)
    }

    /// The (kind, name) the tree finds the bootstrap config by.
    pub(crate) fn bootstrap_key(&self) -> Option<(&str, &str)> {
        self.key(self.bootstrap_ref.as_ref(), 1)
    }

    fn key<'a>(&'a self, r: Option<&'a ObjectRef>, i: usize) -> Option<(&'a str, &'a str)> {
        let ungrouped = || self.ungrouped.as_ref().and_then(|u| u[i].as_ref());
        r.or_else(ungrouped)
            .map(|r| (r.kind.as_str(), r.name.as_str()))
    }

    /// The Machine with only the conditions, and the parts of them, a tree built with `opts`
    /// reads: all of one contract's (the layout's) when `--show-conditions` selects the
    /// Machine; otherwise Available, Ready and UpToDate (Ready whole, the other two by status
    /// and reason, what grouping compares) and, in the v1beta1 layout, the legacy Ready (the
    /// current ones then only count by status). The tree built from the narrowed Machine is
    /// the tree built from the whole one.
    pub fn narrowed(mut self, opts: &TreeOptions) -> TreeMachine {
        let shown = opts.filter_for(&self.kind, &self.name) != ConditionFilter::None;
        let v1beta1 = opts.layout == Layout::V1Beta1;
        if v1beta1 || !shown {
            self.current
                .retain(|c| ROW_TYPES.contains(&c.type_.as_str()));
            for c in &mut self.current {
                if v1beta1 {
                    (c.reason, c.message, c.last_transition_time, c.severity) =
                        (None, None, None, None);
                } else if c.type_ != "Ready" {
                    (c.message, c.last_transition_time, c.severity) = (None, None, None);
                }
            }
        }
        match (v1beta1, shown) {
            (false, _) => self.legacy = Vec::new(),
            (true, false) => self.legacy.retain(|c| c.type_ == "Ready"),
            (true, true) => {}
        }
        self.current.shrink_to_fit();
        self.legacy.shrink_to_fit();
        self
    }
}

/// A Machine is parsed straight from the LIST's text into the few parts of it that
/// [`TreeMachine::of`] reads (its addresses, node info, `managedFields` and the rest are
/// skipped, never allocated), then read as [`TreeMachine::of`] reads the object.
impl<'de> Deserialize<'de> for TreeMachine {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = RawMachine::deserialize(d)?;
        Ok(TreeMachine::of(&raw.into_value()))
    }
}

/// A key that is present, `null` included (`Option<Value>` alone reads `null` as absent, and
/// the accessors tell the two apart: `status.v1beta2: null` is there).
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// The parts of a Machine [`TreeMachine::of`] reads; every other key is skipped.
#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct RawMachine {
    #[serde(deserialize_with = "present")]
    api_version: Option<Value>,
    #[serde(deserialize_with = "present")]
    kind: Option<Value>,
    metadata: Option<RawMeta>,
    spec: Option<RawSpec>,
    status: Option<RawStatus>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct RawMeta {
    #[serde(deserialize_with = "present")]
    name: Option<Value>,
    #[serde(deserialize_with = "present")]
    namespace: Option<Value>,
    #[serde(deserialize_with = "present")]
    labels: Option<Value>,
    #[serde(deserialize_with = "present")]
    owner_references: Option<Value>,
    #[serde(deserialize_with = "present")]
    deletion_timestamp: Option<Value>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct RawSpec {
    #[serde(deserialize_with = "present")]
    version: Option<Value>,
    #[serde(rename = "providerID", deserialize_with = "present")]
    provider_id: Option<Value>,
    #[serde(deserialize_with = "present")]
    infrastructure_ref: Option<Value>,
    #[serde(deserialize_with = "present")]
    bootstrap: Option<Value>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct RawStatus {
    #[serde(deserialize_with = "present")]
    conditions: Option<Value>,
    #[serde(deserialize_with = "present")]
    v1beta2: Option<Value>,
    #[serde(deserialize_with = "present")]
    deprecated: Option<Value>,
}

/// A JSON object of the keys that are present.
fn object<const N: usize>(keys: [(&str, Option<Value>); N]) -> Value {
    Value::Object(
        keys.into_iter()
            .filter_map(|(k, v)| v.map(|v| (k.to_string(), v)))
            .collect(),
    )
}

impl RawMachine {
    /// The Machine as a JSON object of what was read.
    fn into_value(self) -> Value {
        let metadata = self.metadata.map(|m| {
            object([
                ("name", m.name),
                ("namespace", m.namespace),
                ("labels", m.labels),
                ("ownerReferences", m.owner_references),
                ("deletionTimestamp", m.deletion_timestamp),
            ])
        });
        let spec = self.spec.map(|s| {
            object([
                ("version", s.version),
                ("providerID", s.provider_id),
                ("infrastructureRef", s.infrastructure_ref),
                ("bootstrap", s.bootstrap),
            ])
        });
        let status = self.status.map(|s| {
            object([
                ("conditions", s.conditions),
                ("v1beta2", s.v1beta2),
                ("deprecated", s.deprecated),
            ])
        });
        object([
            ("apiVersion", self.api_version),
            ("kind", self.kind),
            ("metadata", metadata),
            ("spec", spec),
            ("status", status),
        ])
    }
}
