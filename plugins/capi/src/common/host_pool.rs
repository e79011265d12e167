//! The BYOH host pool: the ByoHosts and what claims them (ByoMachine, Machine, Cluster), read
//! with one LIST per kind at the versions discovery found, concurrently, for the inventory's
//! rows (`host_rows`), one host's description (`host_lists`), the free hosts a scale or upgrade
//! plan counts (`free_host_lists`), a teardown's preview (`inventory_lists`), and one host and
//! the Machine it serves (`find_host`, `machine_on_host`).

use cli::Conn;
use kclient::discovery::ServerApis;
use kclient::error::Error;
use kcore::groups::INFRASTRUCTURE_GROUP;
use kcore::labels::CLUSTER_NAME_LABEL;
use kcore::plan::hosts::{
    ByoMachineLink, HostFilter, HostPart, HostRow, Inventory, MachineLink, RowJoin,
};
use kube::api::ListParams;
use kube::discovery::ApiResource;
use serde_json::Value;

use super::cluster::ClusterHandle;
use super::lists::{MachineStatus, Narrow, list_narrow, list_opt, prune};
use super::time::now;

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

/// The four lists behind the host inventory.
pub struct HostLists {
    pub hosts: Vec<Value>,
    pub byomachines: Vec<Value>,
    pub machines: Vec<Value>,
    pub clusters: Vec<Value>,
}

impl HostLists {
    /// The inventory the lists make (`now` for the hosts' ages).
    pub fn inventory(&self, now: Option<jiff::Timestamp>) -> Inventory<'_> {
        Inventory::build(
            &self.hosts,
            &self.byomachines,
            &self.machines,
            &self.clusters,
            now,
        )
    }
}

/// How much of the inventory a caller reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostDetail {
    /// The table's columns: hosts, and ByoMachines as metadata (the Machine is the
    /// ByoMachine's controller owner). Of Machines, only which Nodes stopped reporting (an
    /// Unreachable host); no Clusters.
    Table,
    /// The wide table's columns: the table's, and the ByoMachines' provider IDs. Of Machines,
    /// as for the table, only the silent Nodes: on a claimed host BYOH's cluster-name label and
    /// k8sversion annotation name the cluster and version (set with `status.machineRef`,
    /// `attachByoHost` in BYOH v0.5.0), and a Machine's providerID is its ByoMachine's, copied
    /// by CAPI's Machine controller.
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

/// The rows of `hosts` that pass `filter`. The ByoHosts come as one LIST response (on an idle
/// API server `continue` pages come from etcd, 4x slower at 10,000 hosts), parsed as it
/// streams in, each host cut at once to its row's own columns and state facts
/// ([`HostPart`]), while the joined kinds are read (`detail`) the same way, each object cut
/// to the few fields a row reads of it ([`ByoMachineLink`], [`MachineLink`]): memory holds
/// the rows and those links, never the response text nor a fleet of JSON trees.
pub async fn host_rows(
    conn: &Conn,
    apis: &ServerApis,
    host_namespace: Option<&str>,
    host_selector: Option<&str>,
    detail: HostDetail,
    filter: &HostFilter,
) -> Result<Vec<HostRow>, Error> {
    let (host_ar, bm_ar) = byoh(apis)?;
    let mut host_lp = ListParams::default();
    if let Some(s) = host_selector {
        host_lp = host_lp.labels(s);
    }
    let lp = &ListParams::default();
    let joined = async {
        let machine_ar = apis.capi_kind("Machine").ok();
        match detail {
            HostDetail::Table | HostDetail::Wide => {
                let to_link: fn(Narrow<Value>) -> ByoMachineLink = match detail {
                    HostDetail::Table => |bm| ByoMachineLink::of(&bm.owned()),
                    _ => |bm| ByoMachineLink::of(&bm.byomachine_row()),
                };
                let (bms, silent) = tokio::try_join!(
                    list_narrow(conn, bm_ar, lp, detail == HostDetail::Table, to_link),
                    list_narrow(conn, machine_ar, lp, false, Narrow::silent),
                )?;
                // The Machine of a ByoMachine is its controller owner (CAPI sets it, the
                // garbage collector removes ByoMachines whose Machine is gone): its name needs
                // no more of the Machine LIST than which Machines' Nodes stopped reporting
                // (an Unreachable host).
                let machines = machines_from_owners(&bms, &silent);
                Ok::<_, Error>((bms, machines))
            }
            HostDetail::Rows => {
                tokio::try_join!(
                    list_narrow(conn, bm_ar, lp, false, |bm: Narrow<Value>| {
                        ByoMachineLink::of(&bm.byomachine_row())
                    }),
                    list_narrow(conn, machine_ar, lp, false, |m: Narrow<MachineStatus>| {
                        MachineLink::of(&m.machine_row())
                    }),
                )
            }
        }
    };
    let (parts, (bms, machines)) = tokio::try_join!(
        kclient::api::list_whole(
            conn,
            &host_ar,
            host_namespace,
            &host_lp,
            false,
            |h: Narrow<Value>| HostPart::of(&h.host())
        ),
        joined,
    )?;
    let join = RowJoin::build(&bms, &machines, Some(now()));
    Ok(parts
        .into_iter()
        .map(|p| join.row(p))
        .filter(|row| filter.matches(row))
        .collect())
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
                    kclient::api::list_json_map(conn, &ar, None, lp, |v| prune(v, spec, status))
                        .await
                }
                None => Ok(Vec::new()),
            }
        }
    };
    let (hosts, byomachines, machines, clusters) = tokio::try_join!(
        kclient::api::list_json(conn, host_ar, host_namespace, host_lp),
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

/// The ByoHosts of every namespace as claims ([`Narrow::claim`]): which host serves which
/// ByoMachine, without the hosts' network, conditions and host info.
pub async fn host_claims(conn: &Conn, host_ar: Option<ApiResource>) -> Result<Vec<Value>, Error> {
    list_narrow(conn, host_ar, &ListParams::default(), false, Narrow::claim).await
}

/// Minimal Machines (namespace and name) named by the ByoMachines' Machine owner references,
/// silent when they are among `silent` ([`Narrow::silent`]).
pub fn machines_from_owners(byomachines: &[ByoMachineLink], silent: &[Value]) -> Vec<MachineLink> {
    let silent: std::collections::HashSet<(&str, &str)> = silent
        .iter()
        .filter(|m| !m.is_null())
        .map(|m| (kcore::json::namespace(m), kcore::json::name(m)))
        .collect();
    byomachines
        .iter()
        .filter_map(|bm| {
            let owner = bm.machine.as_deref()?;
            Some(MachineLink {
                namespace: bm.namespace.clone(),
                name: owner.to_string(),
                silent: silent.contains(&(bm.namespace.as_str(), owner)),
                ..MachineLink::default()
            })
        })
        .collect()
}

/// What the free-host checks need, in the inventory's shape: the ByoHosts no cluster has
/// claimed, from every namespace (BYOH picks hosts anywhere), and no ByoMachines, Machines or
/// Clusters. BYOH selects hosts for a ByoMachine with the same `!cluster.x-k8s.io/cluster-name`
/// requirement (`attachByoHost` in `controllers/infrastructure/byomachine_controller.go`,
/// BYOH v0.5.0), and an unclaimed host's state depends on nothing but the host
/// (`Inventory::state`), so the plan sees the same Available hosts while the cost follows the
/// free pool, not the fleet's Machines and claimed hosts.
pub async fn free_host_lists(t: &ClusterHandle, host_ar: &ApiResource) -> Result<HostLists, Error> {
    let lp = kube::api::ListParams::default().labels(&format!("!{CLUSTER_NAME_LABEL}"));
    // Parsed into what a host's state and the selectors read (labels, annotations, status), in
    // one response: paged, a selector that matches few of many hosts makes `continue` pages,
    // which an idle API server reads from etcd (`kclient::api::whole`); `make bench` saw this
    // plan at 2.4x its empty-fleet cost with 10,000 claimed hosts elsewhere.
    let hosts = kclient::api::list_whole(&t.conn, host_ar, None, &lp, false, Narrow::host).await?;
    Ok(HostLists {
        hosts,
        byomachines: Vec::new(),
        machines: Vec::new(),
        clusters: Vec::new(),
    })
}

/// Hosts, ByoMachines, Machines and Clusters in all namespaces (BYOH picks hosts anywhere).
pub async fn inventory_lists(t: &ClusterHandle, host_ar: &ApiResource) -> Result<HostLists, Error> {
    let hosts = t.list_all(host_ar, None).await?;
    let byomachines = match t.apis.provider_kind(INFRASTRUCTURE_GROUP, "ByoMachine") {
        Some(ar) => t.list_all(&ar, None).await?,
        None => Vec::new(),
    };
    let machines = t.list_all(&t.core("Machine")?, None).await?;
    let clusters = t.list_all(&t.cluster_ar, None).await?;
    Ok(HostLists {
        hosts,
        byomachines,
        machines,
        clusters,
    })
}

/// The ByoHost `name`: one field-selected LIST over every namespace; with several of that
/// name, the one in `prefer_ns`.
pub async fn find_host(
    conn: &Conn,
    host_ar: &ApiResource,
    name: &str,
    prefer_ns: Option<&str>,
) -> Result<Value, Error> {
    let lp = kube::api::ListParams::default().fields(&format!("metadata.name={name}"));
    let mut found = kclient::api::list_json(conn, host_ar, None, &lp).await?;
    if found.len() > 1
        && let Some(ns) = prefer_ns
        && found.iter().any(|h| kcore::json::namespace(h) == ns)
    {
        found.retain(|h| kcore::json::namespace(h) == ns);
    }
    match found.len() {
        // Searched in every namespace: the error names none.
        0 => Err(Error::NotFound {
            kind: "ByoHost".into(),
            name: name.to_string(),
            namespace: None,
            suggestions: Vec::new(),
        }),
        1 => Ok(found.remove(0)),
        _ => Err(Error::Usage {
            message: format!("ByoHost {name} exists in several namespaces"),
            hint: Some("pick one with -n NAMESPACE".into()),
        }),
    }
}

/// The Machine a host serves: host `status.machineRef` (BYOH sets it when it attaches a
/// ByoMachine) → that ByoMachine's owning Machine.
pub async fn machine_on_host(
    t: &ClusterHandle,
    host_ar: &ApiResource,
    host: &str,
) -> Result<String, Error> {
    let found = find_host(&t.conn, host_ar, host, Some(&t.namespace)).await?;
    let h = &found;
    let Some(bm) = kcore::json::str_at(h, &["status", "machineRef", "name"]) else {
        return Err(Error::other(format!(
            "ByoHost {host} serves no machine (it is free), so there is nothing to remove on it"
        )));
    };
    let bm_ns = kcore::json::str_at(h, &["status", "machineRef", "namespace"])
        .unwrap_or(kcore::json::namespace(h));
    if bm_ns != t.namespace {
        return Err(Error::other(format!(
            "ByoHost {host} serves a machine in namespace {bm_ns}, not of cluster {} in {}",
            t.name, t.namespace
        )));
    }
    let bm_ar = t
        .apis
        .provider_kind(INFRASTRUCTURE_GROUP, "ByoMachine")
        .ok_or_else(|| Error::other("this management cluster serves no ByoMachine API"))?;
    let obj = t.get_opt(&bm_ar, bm).await?.ok_or_else(|| {
        Error::other(format!(
            "ByoHost {host} names ByoMachine {bm}, which no longer exists; its machine is already going"
        ))
    })?;
    obj.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .and_then(|refs| {
            refs.iter()
                .find(|r| r.get("kind").and_then(Value::as_str) == Some("Machine"))
        })
        .and_then(|r| r.get("name").and_then(Value::as_str))
        .map(str::to_string)
        .ok_or_else(|| {
            Error::other(format!(
                "ByoMachine {bm} on host {host} has no owning Machine yet; try again in a moment"
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn machine(name: &str, status: Value) -> Narrow<MachineStatus> {
        serde_json::from_value(json!({"kind": "Machine",
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {"clusterName": "c1"}, "status": status}))
        .unwrap()
    }

    fn node_ready(status: &str, reason: &str, message: &str) -> Value {
        json!({"type": "NodeReady", "status": status, "reason": reason, "message": message})
    }

    /// The table's Machines: only those whose Node stopped reporting carry their `NodeReady`
    /// (either contract), and the host's Machine built from its ByoMachine's owner gets it, so
    /// the table shows the host Unreachable.
    #[test]
    fn silent_nodes_reach_the_tables_machines() {
        let silent = node_ready(
            "Unknown",
            "NodeReadyUnknown",
            "* Node.Ready: Kubelet stopped posting node status.",
        );
        let read = [
            machine(
                "m1",
                json!({"phase": "Running", "conditions": [silent.clone()]}),
            ),
            machine(
                "m2",
                json!({"phase": "Running", "v1beta2": {"conditions": [silent.clone()]}}),
            ),
            machine(
                "m3",
                json!({"phase": "Running", "conditions": [node_ready("True", "NodeReady", "")]}),
            ),
        ]
        .map(Narrow::silent);
        assert!(read[2].is_null());
        let bms: Vec<ByoMachineLink> = ["m1", "m2", "m3"]
            .iter()
            .map(|m| {
                ByoMachineLink::of(&json!({"kind": "ByoMachine", "metadata": {"name": format!("bm-{m}"), "namespace": "ns",
                    "ownerReferences": [{"kind": "Machine", "name": m, "controller": true}]}}))
            })
            .collect();
        let machines = machines_from_owners(&bms, &read);
        let silent_names: Vec<&str> = machines
            .iter()
            .filter(|m| m.silent)
            .map(|m| m.name.as_str())
            .collect();
        assert_eq!(silent_names, ["m1", "m2"]);
        // The structured rows carry it too; a Node still starting is not silent.
        let row = machine("m1", json!({"phase": "Running", "conditions": [silent]})).machine_row();
        assert!(kcore::fields::node_silence(&row).is_some(), "{row}");
        assert!(MachineLink::of(&row).silent, "{row}");
        let starting = machine(
            "m4",
            json!({"conditions": [node_ready("Unknown", "NodeReadyUnknown", "* Node.Ready: Condition not yet reported")]}),
        );
        assert!(starting.silent().is_null());
    }
}
