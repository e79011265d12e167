//! Reading the fleet: one paginated LIST per kind, run concurrently, at the versions discovery
//! found (v1beta2 or v1beta1 core, whatever the providers serve). Not a verb: `hosts`,
//! `machines`, `list` and `describe` share it.

use cli::Conn;
use kube::api::ListParams;
use kube::discovery::ApiResource;
use serde_json::Value;
use shared::discovery::{INFRASTRUCTURE_GROUP, ServerApis};
use shared::error::Error;

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

/// Lists ByoHosts (in `host_namespace`, else everywhere, narrowed by `host_selector`), and
/// ByoMachines, Machines and Clusters in all namespaces (any namespace's machines may claim a
/// host): four paginated LISTs, concurrently.
///
/// With `metadata_only`, only ByoMachines are listed, as metadata (names, labels, owner
/// references): enough for the table's CLUSTER and MACHINE columns (the Machine is the
/// ByoMachine's owner), and much cheaper for the server on big fleets. Machine phase, node and
/// provider ID need the full lists.
pub async fn host_lists(
    conn: &Conn,
    apis: &ServerApis,
    host_namespace: Option<&str>,
    host_selector: Option<&str>,
    metadata_only: bool,
) -> Result<HostLists, Error> {
    let (host_ar, bm_ar) = byoh(apis)?;
    let mut host_lp = ListParams::default();
    if let Some(s) = host_selector {
        host_lp = host_lp.labels(s);
    }
    let lp = ListParams::default();
    // Machines and ByoMachines are only joined on: keep what the join reads, so that memory
    // stays close to the hosts' own size on big fleets.
    if metadata_only {
        let meta = |ar: Option<ApiResource>| {
            let lp = &lp;
            async move {
                match ar {
                    Some(ar) => shared::api::list_metadata_json(conn, &ar, None, lp).await,
                    None => Ok(Vec::new()),
                }
            }
        };
        let (hosts, byomachines) = tokio::try_join!(
            shared::api::list_json(conn, &host_ar, host_namespace, &host_lp),
            meta(bm_ar),
        )?;
        // The Machine of a ByoMachine is its controller owner (CAPI sets it, the garbage
        // collector removes ByoMachines whose Machine is gone): its name needs no Machine LIST.
        let machines = machines_from_owners(&byomachines);
        let clusters = Vec::new();
        return Ok(HostLists {
            hosts,
            byomachines,
            machines,
            clusters,
        });
    }
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
        shared::api::list_json(conn, &host_ar, host_namespace, &host_lp),
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
