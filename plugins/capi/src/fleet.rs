//! Reading the fleet: one paginated LIST per kind, run concurrently, at the versions discovery
//! found (v1beta2 or v1beta1 core, whatever the providers serve). Not a verb: `hosts`,
//! `machines`, `list` and `describe` share it.

use cli::Conn;
use kube::api::ListParams;
use kube::discovery::ApiResource;
use serde_json::Value;
use shared::discovery::{INFRASTRUCTURE_GROUP, ServerApis};
use shared::error::Error;
use shared::plan::hosts::{HostFilter, HostRow, Inventory};

/// How BYOH is installed, in the message of a missing ByoHost API.
pub const BYOH_INSTALL: &str = "install BYOH with clusterctl init --infrastructure byoh";

/// The served ByoHost and ByoMachine resources (ByoMachine may be missing on odd installs).
pub fn byoh(apis: &ServerApis) -> Result<(ApiResource, Option<ApiResource>), Error> {
    let host = apis.require_provider_kind(
        INFRASTRUCTURE_GROUP,
        "ByoHost",
        "BYOH (Cluster API Provider Bring Your Own Host)",
        BYOH_INSTALL,
    )?;
    Ok((host, apis.provider_kind(INFRASTRUCTURE_GROUP, "ByoMachine")))
}

/// Lists `ar` (all namespaces when `namespace` is `None`); an absent resource lists as empty.
pub async fn list_opt(
    conn: &Conn,
    ar: Option<&ApiResource>,
    namespace: Option<&str>,
    lp: &ListParams,
) -> Result<Vec<Value>, Error> {
    match ar {
        Some(ar) => shared::api::list_json(conn, ar, namespace, lp).await,
        None => Ok(Vec::new()),
    }
}

/// The four lists behind the host inventory.
pub struct HostLists {
    pub hosts: Vec<Value>,
    pub byomachines: Vec<Value>,
    pub machines: Vec<Value>,
    pub clusters: Vec<Value>,
}

/// How much of the inventory a caller reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Detail {
    /// The table's columns: hosts, and ByoMachines as metadata (the Machine is the
    /// ByoMachine's controller owner). No Machines, no Clusters.
    Table,
    /// The wide table's columns: the table's, and the ByoMachines' provider IDs. No Machines:
    /// on a claimed host BYOH's cluster-name label and k8sversion annotation name the cluster
    /// and version (set with `status.machineRef`, `attachByoHost` in BYOH v0.5.0), and a
    /// Machine's providerID is its ByoMachine's, copied by CAPI's Machine controller.
    Wide,
    /// Every field of a row (`-o json|yaml|jsonpath|custom-columns`): hosts, ByoMachines and Machines, each parsed
    /// into the few fields a row reads. No Clusters (a row names its cluster from the host's
    /// label or the Machine).
    Rows,
}

/// Lists ByoHosts (in `host_namespace`, else everywhere), and ByoMachines, Machines and
/// Clusters in all namespaces (any namespace's machines may claim a host) as whole objects, for
/// `hosts describe`: one paginated LIST per kind, concurrently.
pub async fn host_lists(
    conn: &Conn,
    apis: &ServerApis,
    host_namespace: Option<&str>,
) -> Result<HostLists, Error> {
    let (host_ar, bm_ar) = byoh(apis)?;
    full_host_lists(
        conn,
        apis,
        &host_ar,
        bm_ar,
        host_namespace,
        &ListParams::default(),
    )
    .await
}

/// The rows of `hosts` that pass `filter`. The ByoHosts come as one LIST response (see
/// `shared::api::list_whole_text`: on an idle API server `continue` pages come from etcd, 4x
/// slower at 10,000 hosts), kept as the text the server sent while the joined kinds are read
/// (`detail`: ByoMachines as names and owners for the table; with their provider IDs for the
/// wide table; and the Machines for the structured rows), then parsed one host at a time, each
/// turned into its row at once: memory is the text, the joined kinds' keys and the rows, never
/// a fleet of parsed hosts.
pub async fn host_rows(
    conn: &Conn,
    apis: &ServerApis,
    host_namespace: Option<&str>,
    host_selector: Option<&str>,
    detail: Detail,
    filter: &HostFilter,
) -> Result<Vec<HostRow>, Error> {
    let (host_ar, bm_ar) = byoh(apis)?;
    let mut host_lp = ListParams::default();
    if let Some(s) = host_selector {
        host_lp = host_lp.labels(s);
    }
    let lp = &ListParams::default();
    let joined = async {
        match detail {
            Detail::Table => {
                let bms = narrow(conn, bm_ar, lp, true, Narrow::<Value>::owned).await?;
                // The Machine of a ByoMachine is its controller owner (CAPI sets it, the
                // garbage collector removes ByoMachines whose Machine is gone): its name needs
                // no Machine LIST.
                let machines = machines_from_owners(&bms);
                Ok::<_, Error>((bms, machines))
            }
            Detail::Wide => {
                let bms = narrow(conn, bm_ar, lp, false, Narrow::<Value>::byomachine_row).await?;
                let machines = machines_from_owners(&bms);
                Ok((bms, machines))
            }
            Detail::Rows => {
                let machine_ar = apis.capi_kind("Machine").ok();
                tokio::try_join!(
                    narrow(conn, bm_ar, lp, false, Narrow::<Value>::byomachine_row),
                    narrow(conn, machine_ar, lp, false, Narrow::machine_row),
                )
            }
        }
    };
    let (text, (bms, machines)) = tokio::try_join!(
        shared::api::list_whole_text(conn, &host_ar, host_namespace, &host_lp),
        joined,
    )?;
    let inv = Inventory::build(&[], &bms, &machines, &[], Some(now()));
    let rows = shared::api::whole_items(&host_ar, text, |h: Narrow<Value>| {
        let row = inv.row(&h.host());
        filter.matches(&row).then_some(row)
    })?;
    Ok(rows.into_iter().flatten().collect())
}

/// One LIST of `ar` in all namespaces (empty when it is not served), each item parsed as
/// `Narrow<S>` and made a `Value` by `to_value`.
async fn narrow<S: serde::de::DeserializeOwned + 'static>(
    conn: &Conn,
    ar: Option<ApiResource>,
    lp: &ListParams,
    metadata_only: bool,
    to_value: fn(Narrow<S>) -> Value,
) -> Result<Vec<Value>, Error> {
    match ar {
        Some(ar) => shared::api::list_whole(conn, &ar, None, lp, metadata_only, to_value).await,
        None => Ok(Vec::new()),
    }
}

/// The four lists as whole objects (Machines and ByoMachines pruned to what the joins read).
async fn full_host_lists(
    conn: &Conn,
    apis: &ServerApis,
    host_ar: &ApiResource,
    bm_ar: Option<ApiResource>,
    host_namespace: Option<&str>,
    host_lp: &ListParams,
) -> Result<HostLists, Error> {
    let lp = ListParams::default();
    let machine_ar = apis.capi_kind("Machine").ok();
    let cluster_ar = apis.cluster().ok();
    let list_pruned = |ar: Option<ApiResource>,
                       spec: &'static [&'static str],
                       status: &'static [&'static str]| {
        let lp = &lp;
        async move {
            match ar {
                Some(ar) => {
                    shared::api::list_json_map(conn, &ar, None, lp, |v| prune(v, spec, status))
                        .await
                }
                None => Ok(Vec::new()),
            }
        }
    };
    let (hosts, byomachines, machines, clusters) = tokio::try_join!(
        shared::api::list_json(conn, host_ar, host_namespace, host_lp),
        list_pruned(bm_ar, &["providerID", "selector"], &["ready", "conditions"]),
        list_pruned(
            machine_ar,
            &["clusterName", "version", "providerID", "infrastructureRef"],
            &["phase", "nodeRef"]
        ),
        list_opt(conn, cluster_ar.as_ref(), None, &lp),
    )?;
    Ok(HostLists {
        hosts,
        byomachines,
        machines,
        clusters,
    })
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

/// The ByoHosts of every namespace as claims ([`Narrow::claim`]): which host serves which
/// ByoMachine, without the hosts' network, conditions and host info.
pub async fn host_claims(conn: &Conn, host_ar: Option<ApiResource>) -> Result<Vec<Value>, Error> {
    narrow(conn, host_ar, &ListParams::default(), false, Narrow::claim).await
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
        let st = self.status.take().unwrap_or_default();
        let status = object([("phase", st.phase), ("nodeRef", st.node_ref)]);
        self.key_with(Some(spec), Some(status))
    }
}

/// Minimal Machines (namespace and name) named by the ByoMachines' Machine owner references.
pub fn machines_from_owners(byomachines: &[Value]) -> Vec<Value> {
    byomachines
        .iter()
        .filter_map(|bm| {
            let owner = kcore::json::owner_of_kind(bm, "Machine")?;
            Some(serde_json::json!({"kind": "Machine", "metadata": {
                "name": owner, "namespace": kcore::json::namespace(bm)}}))
        })
        .collect()
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

/// Now, for ages.
pub fn now() -> jiff::Timestamp {
    jiff::Timestamp::now()
}

/// `5m`, `3d`: the AGE column, or `<unknown>`.
pub fn age(seconds: Option<i64>) -> String {
    match seconds {
        Some(s) => kcore::text::age(s),
        None => "<unknown>".into(),
    }
}

/// The age of an object at `now`.
pub fn age_of(obj: &Value, now: jiff::Timestamp) -> Option<i64> {
    kcore::json::str_at(obj, &["metadata", "creationTimestamp"])
        .and_then(|t| kcore::text::seconds_since(t, now))
}

/// `<none>` for empty cells, as kubectl prints them.
pub fn or_none(s: Option<&str>) -> String {
    match s {
        Some(s) if !s.is_empty() => s.to_string(),
        _ => "<none>".into(),
    }
}
