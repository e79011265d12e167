//! LISTs that cost little: a kind the server does not serve lists as empty (`list_opt`),
//! objects are pruned to the fields a join reads (`prune`) or parsed straight into them from
//! the response (`Narrow`, `list_narrow`), so a fleet of 10,000 hosts or machines is never
//! held whole.

use cli::Conn;
use kclient::error::Error;
use kube::api::ListParams;
use kube::discovery::ApiResource;
use serde_json::Value;

/// Lists `ar` (all namespaces when `namespace` is `None`); an absent resource lists as empty.
pub async fn list_opt(
    conn: &Conn,
    ar: Option<&ApiResource>,
    namespace: Option<&str>,
    lp: &ListParams,
) -> Result<Vec<Value>, Error> {
    match ar {
        Some(ar) => kclient::api::list_json(conn, ar, namespace, lp).await,
        None => Ok(Vec::new()),
    }
}

/// One LIST of `ar` in all namespaces (empty when it is not served), each item parsed as
/// `Narrow<S>` and made what the caller keeps by `keep` (a `Value` of the fields a join reads,
/// or a typed row of them) as it is parsed.
pub async fn list_narrow<S: serde::de::DeserializeOwned + 'static, U: Send + 'static>(
    conn: &Conn,
    ar: Option<ApiResource>,
    lp: &ListParams,
    metadata_only: bool,
    keep: fn(Narrow<S>) -> U,
) -> Result<Vec<U>, Error> {
    match ar {
        Some(ar) => kclient::api::list_whole(conn, &ar, None, lp, metadata_only, keep).await,
        None => Ok(Vec::new()),
    }
}

/// An object as the inventory's rows read it: the metadata the joins use and the few `spec`
/// and `status` fields of each kind. Parsed straight from the LIST's pages, so everything else
/// (`managedFields` above all) is skipped, never allocated; a 10,000-host fleet then costs
/// little more memory than its rows.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Narrow<S = Value> {
    api_version: Option<String>,
    kind: Option<String>,
    #[serde(default)]
    metadata: NarrowMeta,
    #[serde(default)]
    spec: NarrowSpec,
    status: Option<S>,
}

#[derive(serde::Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct NarrowMeta {
    name: Option<String>,
    namespace: Option<String>,
    labels: Option<Value>,
    annotations: Option<Value>,
    creation_timestamp: Option<String>,
    owner_references: Option<Value>,
}

/// The `spec` fields any of the three kinds' rows read (ByoHosts: none).
#[derive(serde::Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct NarrowSpec {
    #[serde(rename = "providerID")]
    provider_id: Option<Value>,
    cluster_name: Option<Value>,
    version: Option<Value>,
    infrastructure_ref: Option<Value>,
}

/// The `status` fields of a Machine a row reads (its conditions, addresses and node info are
/// the bulk of it and are skipped).
#[derive(serde::Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct MachineStatus {
    phase: Option<Value>,
    node_ref: Option<Value>,
    /// v1beta2's conditions (a v1beta1 Machine's are under `v1beta2`).
    conditions: Option<Vec<Value>>,
    v1beta2: Option<V1beta2Conditions>,
}

#[derive(serde::Deserialize, Default)]
pub struct V1beta2Conditions {
    conditions: Option<Vec<Value>>,
}

impl MachineStatus {
    /// The Machine's `NodeReady` condition when it says its Node stopped reporting
    /// ([`kcore::fields::node_silence`]), as `status.conditions` of a v1beta2 Machine: all a
    /// host's row reads of a Machine's conditions.
    fn silent_node(&mut self) -> Option<Value> {
        let v1beta2 = self.v1beta2.take().and_then(|c| c.conditions);
        let c = self
            .conditions
            .take()
            .into_iter()
            .chain(v1beta2)
            .flatten()
            .find(|c| c["type"] == "NodeReady")?;
        let status = serde_json::json!({"status": {"conditions": [c]}});
        kcore::fields::node_silence(&status).map(|_| status["status"]["conditions"].clone())
    }
}

/// A JSON object of the fields that are set.
fn object<const N: usize>(fields: [(&str, Option<Value>); N]) -> Value {
    Value::Object(
        fields
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| (k.to_string(), v)))
            .collect(),
    )
}

fn empty() -> Value {
    Value::Object(serde_json::Map::new())
}

impl<S> Narrow<S> {
    /// The object with `spec` and `status` as given (left out when `None`).
    fn with(self, spec: Option<Value>, status: Option<Value>) -> Value {
        let m = self.metadata;
        object([
            ("apiVersion", self.api_version.map(Value::String)),
            ("kind", self.kind.map(Value::String)),
            (
                "metadata",
                Some(object([
                    ("name", m.name.map(Value::String)),
                    ("namespace", m.namespace.map(Value::String)),
                    ("labels", m.labels),
                    ("annotations", m.annotations),
                    ("creationTimestamp", m.creation_timestamp.map(Value::String)),
                    ("ownerReferences", m.owner_references),
                ])),
            ),
            ("spec", spec),
            ("status", status),
        ])
    }

    /// The object as a join key: kind, name, namespace and its owners' kinds and names, with
    /// `spec` and `status` as given. Small objects make a fleet's worth of them cheap to hold.
    fn key_with(self, spec: Option<Value>, status: Option<Value>) -> Value {
        let m = self.metadata;
        let owners = m.owner_references.and_then(|o| match o {
            Value::Array(a) => Some(Value::Array(
                a.into_iter()
                    .map(|mut o| {
                        let mut take = |k: &str| o.get_mut(k).map(Value::take);
                        object([
                            ("kind", take("kind")),
                            ("name", take("name")),
                            ("controller", take("controller")),
                        ])
                    })
                    .collect(),
            )),
            _ => None,
        });
        object([
            ("kind", self.kind.map(Value::String)),
            (
                "metadata",
                Some(object([
                    ("name", m.name.map(Value::String)),
                    ("namespace", m.namespace.map(Value::String)),
                    ("ownerReferences", owners),
                ])),
            ),
            ("spec", spec),
            ("status", status),
        ])
    }

    /// A ByoMachine as the table joins it: name and owner (its Machine).
    pub fn owned(self) -> Value {
        self.key_with(None, None)
    }

    /// A ByoMachine as a row reads it: name, owner and provider ID.
    pub fn byomachine_row(mut self) -> Value {
        let spec = std::mem::take(&mut self.spec);
        let spec = object([("providerID", spec.provider_id)]);
        self.key_with(Some(spec), None)
    }
}

impl Narrow<Value> {
    /// A ByoHost: metadata and its whole status (conditions, host info, network, claim).
    pub fn host(mut self) -> Value {
        let status = self.status.take().unwrap_or_else(empty);
        self.with(Some(empty()), Some(status))
    }
}

/// The `status` field of a ByoHost that names its claim.
#[derive(serde::Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct HostClaim {
    machine_ref: Option<Value>,
}

impl Narrow<HostClaim> {
    /// A ByoHost as a claim: its metadata (the byomachine-name label) and `status.machineRef`.
    pub fn claim(mut self) -> Value {
        let st = self.status.take().unwrap_or_default();
        let status = object([("machineRef", st.machine_ref)]);
        self.with(None, Some(status))
    }
}

impl Narrow<MachineStatus> {
    /// A Machine as a row reads it: name and namespace, cluster, version, provider ID,
    /// infrastructure reference, phase and node.
    pub fn machine_row(mut self) -> Value {
        let spec = std::mem::take(&mut self.spec);
        let spec = object([
            ("clusterName", spec.cluster_name),
            ("version", spec.version),
            ("providerID", spec.provider_id),
            ("infrastructureRef", spec.infrastructure_ref),
        ]);
        let mut st = self.status.take().unwrap_or_default();
        let conditions = st.silent_node();
        let status = object([
            ("phase", st.phase),
            ("nodeRef", st.node_ref),
            ("conditions", conditions),
        ]);
        self.key_with(Some(spec), Some(status))
    }

    /// A Machine whose Node stopped reporting, as a key with that condition; `Null` for any
    /// other (the table reads no more of Machines: their names come from the ByoMachines).
    pub fn silent(mut self) -> Value {
        let mut st = self.status.take().unwrap_or_default();
        match st.silent_node() {
            Some(c) => self.key_with(None, Some(object([("conditions", Some(c))]))),
            None => Value::Null,
        }
    }
}

/// Keeps `apiVersion`, `kind`, `metadata` and the named keys of `spec` and `status`.
pub fn prune(v: Value, spec: &[&str], status: &[&str]) -> Value {
    let Value::Object(mut m) = v else {
        return v;
    };
    let mut out = serde_json::Map::new();
    for k in ["apiVersion", "kind", "metadata"] {
        if let Some(x) = m.remove(k) {
            out.insert(k.to_string(), x);
        }
    }
    for (part, keys) in [("spec", spec), ("status", status)] {
        if let Some(Value::Object(mut p)) = m.remove(part) {
            let kept: serde_json::Map<String, Value> = keys
                .iter()
                .filter_map(|k| p.remove(*k).map(|x| (k.to_string(), x)))
                .collect();
            out.insert(part.to_string(), Value::Object(kept));
        }
    }
    Value::Object(out)
}
