//! What `describe` reads: the cluster and only what belongs to it (labelled LISTs, referenced
//! GETs, its ClusterUpgrade, the ByoHosts of its BYOH machines), as concurrently as the
//! dependencies allow.

use std::collections::{BTreeSet, HashSet};

use cli::Conn;
use kclient::discovery::ServerApis;
use kclient::error::Error;
use kcore::fields::{self, ObjectRef};
use kcore::plan::hosts::BYOMACHINE_NAME_LABEL;
use kcore::plan::tree::{TreeMachine, TreeOptions};
use kube::api::ListParams;
use kube::discovery::ApiResource;
use serde_json::Value;

use crate::common::{cluster_upgrade, host_pool, lists};

use kcore::labels::CLUSTER_NAME_LABEL;

/// Concurrent GETs at most (templates; a handful per cluster).
const GET_CONCURRENCY: usize = 16;

/// GETs the object a reference points at; `None` when it is missing or its kind is not served
/// (the tree simply shows less). The object stays the JSON the server sent.
async fn get_ref(conn: &Conn, apis: &ServerApis, r: &ObjectRef, ns: &str) -> Option<Value> {
    let ar = apis.resolve_ref(r).ok()?;
    let namespace = Some(r.namespace.as_deref().unwrap_or(ns));
    match kclient::api::get_json_opt(conn, &ar, namespace, &r.name).await {
        Ok(o) => o,
        Err(e) => {
            tracing::info!("get {} {}: {e}", r.kind, r.name);
            None
        }
    }
}

/// The cluster's objects of each kind among `refs`: one LIST per kind in `ns`, selected by the
/// cluster-name label, all kinds at once. Cluster API labels every infrastructure machine and
/// bootstrap config it creates with the name of its cluster (`GenerateTemplate` in
/// `controllers/external/util.go`, CAPI v1.14.2, and since v1alpha3), so the selector returns
/// exactly the cluster's, however many other clusters share the namespace.
async fn list_kinds(
    conn: &Conn,
    apis: &ServerApis,
    refs: &[ObjectRef],
    ns: &str,
    cluster: &str,
) -> Vec<Value> {
    let kinds: BTreeSet<(&str, &str)> = refs
        .iter()
        .map(|r| (r.api_group.as_str(), r.kind.as_str()))
        .collect();
    let lists = kinds.into_iter().filter_map(|(group, kind)| {
        let r = ObjectRef {
            api_group: group.to_string(),
            kind: kind.to_string(),
            ..Default::default()
        };
        let ar = apis.resolve_ref(&r).ok()?;
        Some((kind, list_labelled(conn, Some(ar), ns, cluster)))
    });
    gather(lists).await
}

/// Runs the LISTs side by side and joins their items. A LIST that fails is logged and left out:
/// describe shows what it could read.
async fn gather<F, E>(lists: impl IntoIterator<Item = (&str, F)>) -> Vec<Value>
where
    F: std::future::Future<Output = Result<Vec<Value>, E>>,
    E: std::fmt::Display,
{
    let all = lists.into_iter().map(|(what, list)| async move {
        list.await.unwrap_or_else(|e| {
            tracing::info!("list {what}: {e}");
            Vec::new()
        })
    });
    futures::future::join_all(all)
        .await
        .into_iter()
        .flatten()
        .collect()
}

async fn list_labelled(
    conn: &Conn,
    ar: Option<ApiResource>,
    ns: &str,
    cluster: &str,
) -> Result<Vec<Value>, Error> {
    let lp = ListParams::default().labels(&format!("{CLUSTER_NAME_LABEL}={cluster}"));
    lists::list_opt(conn, ar.as_ref(), Some(ns), &lp).await
}

/// Machine LISTs at most at once: one per MachineDeployment up to this many, and one for the
/// rest.
const MACHINE_LISTS: usize = 8;

/// CAPI labels each Machine of a MachineDeployment with its name (`MachineDeploymentNameLabel`
/// in `api/core/v1beta2/common_types.go`, CAPI v1.14.2).
use kcore::labels::DEPLOYMENT_NAME_LABEL;

/// The cluster's Machines, as concurrent LISTs that split them by MachineDeployment: the API
/// server encodes each on a core of its own, where one LIST of thousands of Machines is bound
/// by one core's JSON encoding. The selectors partition the cluster's Machines exactly: one
/// per deployment named (`deployment-name=D`), and one for every other Machine
/// (`deployment-name notin (...)`, which also matches Machines without the label: control
/// plane, MachinePools, strays, deployments created since). Each Machine is parsed straight
/// into the row the tree reads and narrowed to what `opts` shows as it arrives
/// ([`TreeMachine::narrowed`]): its addresses, node info and other conditions are most of a
/// Machine, and are never held.
async fn list_machines(
    conn: &Conn,
    apis: &ServerApis,
    ns: &str,
    cluster: &str,
    mds: &[Value],
    opts: &TreeOptions,
) -> Result<Vec<TreeMachine>, Error> {
    let Ok(ar) = apis.capi_kind("Machine") else {
        return Ok(Vec::new());
    };
    let base = format!("{CLUSTER_NAME_LABEL}={cluster}");
    let named: Vec<&str> = mds
        .iter()
        .map(kcore::json::name)
        .take(MACHINE_LISTS - 1)
        .collect();
    let mut selectors: Vec<String> = named
        .iter()
        .map(|d| format!("{base},{DEPLOYMENT_NAME_LABEL}={d}"))
        .collect();
    selectors.push(match named.is_empty() {
        true => base.clone(),
        false => format!("{base},{DEPLOYMENT_NAME_LABEL} notin ({})", named.join(",")),
    });
    let ar = &ar;
    let lists = selectors.iter().map(|sel| async move {
        let lp = ListParams::default().labels(sel);
        let opts = opts.clone();
        let keep = move |m: TreeMachine| m.narrowed(&opts);
        kclient::api::list_whole(conn, ar, Some(ns), &lp, false, keep).await
    });
    let parts = futures::future::join_all(lists).await;
    let mut out = Vec::with_capacity(parts.iter().flatten().map(Vec::len).sum());
    for part in parts {
        out.extend(part?);
    }
    Ok(out)
}

/// Everything the tree is built from, as read.
pub(super) struct Objects {
    pub(super) cluster: Value,
    pub(super) infra: Option<Value>,
    pub(super) cp: Option<Value>,
    pub(super) machines: Vec<TreeMachine>,
    pub(super) mds: Vec<Value>,
    pub(super) mss: Vec<Value>,
    pub(super) mps: Vec<Value>,
    pub(super) infra_machines: Vec<Value>,
    pub(super) bootstrap_configs: Vec<Value>,
    pub(super) hosts: Vec<Value>,
    pub(super) templates: Vec<Value>,
    pub(super) resource_sets: Vec<Value>,
    /// The ClusterUpgrade named after the cluster, if the API is served and it exists.
    pub(super) upgrade: Option<Value>,
}

/// `--show-templates`: the templates the control plane and MachineDeployments reference, one
/// GET each (templates carry no cluster label: clusters may share them, so a LIST would read
/// other clusters' too).
async fn read_templates(
    conn: &Conn,
    apis: &ServerApis,
    cp: Option<&Value>,
    mds: &[Value],
    ns: &str,
) -> Vec<Value> {
    let mut refs: Vec<ObjectRef> = cp
        .and_then(fields::control_plane_machine_template_ref)
        .into_iter()
        .collect();
    for md in mds {
        refs.extend(fields::template_infrastructure_ref(md));
        refs.extend(fields::object_ref(
            md,
            &["spec", "template", "spec", "bootstrap", "configRef"],
        ));
    }
    // MachineDeployments often share a template: read each once.
    let refs: BTreeSet<(String, String, String, String)> = refs
        .into_iter()
        .map(|r| {
            let namespace = r.namespace.unwrap_or_else(|| ns.to_string());
            (r.api_group, r.kind, namespace, r.name)
        })
        .collect();
    let refs: Vec<ObjectRef> = refs
        .into_iter()
        .map(|(api_group, kind, namespace, name)| ObjectRef {
            api_group,
            kind,
            name,
            namespace: Some(namespace),
            ..Default::default()
        })
        .collect();
    get_each(conn, apis, &refs, ns).await
}

/// `--show-resourcesets`: the ClusterResourceSets named by the cluster's
/// ClusterResourceSetBinding (named like the cluster, as clusterctl reads it).
async fn read_resource_sets(conn: &Conn, apis: &ServerApis, ns: &str, cluster: &str) -> Vec<Value> {
    let group = "addons.cluster.x-k8s.io";
    let (Some(binding_ar), Some(crs_ar)) = (
        apis.provider_kind(group, "ClusterResourceSetBinding"),
        apis.provider_kind(group, "ClusterResourceSet"),
    ) else {
        return vec![];
    };
    let Ok(Some(binding)) = kclient::api::get_json_opt(conn, &binding_ar, Some(ns), cluster).await
    else {
        return vec![];
    };
    let mut out = Vec::new();
    let names: Vec<String> = kcore::json::at(&binding, &["spec", "bindings"])
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|b| kcore::json::str_at(b, &["clusterResourceSetName"]).map(str::to_string))
        .collect();
    // One LIST of the namespace's sets, not a GET per bound set.
    let all = ListParams::default();
    if let Ok(sets) = kclient::api::list_json(conn, &crs_ar, Some(ns), &all).await {
        out.extend(
            sets.into_iter()
                .filter(|c| names.iter().any(|n| n == kcore::json::name(c))),
        );
    }
    out
}

/// The cluster's ClusterUpgrade: one GET of the one named after the cluster (the API allows
/// no other name), only where the API is served; `None` when it is missing or unreadable.
async fn read_upgrade(conn: &Conn, apis: &ServerApis, ns: &str, cluster: &str) -> Option<Value> {
    let ar = cluster_upgrade::resource(apis)?;
    match kclient::api::get_json_opt(conn, &ar, Some(ns), cluster).await {
        Ok(o) => o,
        Err(e) => {
            tracing::info!("get ClusterUpgrade {cluster}: {e}");
            None
        }
    }
}

/// The referenced object, if there is a reference.
async fn get_opt_ref(
    conn: &Conn,
    apis: &ServerApis,
    r: Option<&ObjectRef>,
    ns: &str,
) -> Option<Value> {
    match r {
        Some(r) => get_ref(conn, apis, r, ns).await,
        None => None,
    }
}

/// The ByoMachines (as `namespace.name`, BYOH's byomachine-name label value) of the BYOH
/// machines whose host is named by no providerID (the Machine's or its ByoMachine's,
/// `byoh://HOST/...`): only their hosts are found through the ByoHosts' `status.machineRef`.
fn unnamed_hosts(machines: &[TreeMachine], infra_machines: &[Value]) -> Vec<String> {
    use kcore::json::{kind, name, str_at};
    use kcore::plan::hosts::host_from_provider_id;
    let named = |id: Option<&str>| id.and_then(host_from_provider_id).is_some();
    let with_host: HashSet<&str> = infra_machines
        .iter()
        .filter(|bm| kind(bm) == "ByoMachine" && named(str_at(bm, &["spec", "providerID"])))
        .map(name)
        .collect();
    machines
        .iter()
        .filter(|m| !named(m.provider_id.as_deref()))
        .filter_map(|m| {
            let r = m.infrastructure_ref.as_ref()?;
            (r.kind == "ByoMachine" && !with_host.contains(r.name.as_str()))
                .then(|| format!("{}.{}", m.namespace, r.name))
        })
        .collect()
}

/// Label values per ByoHost LIST: a selector of 200 `namespace.name` values stays well under
/// the API server's request-line limit.
const HOSTS_PER_LIST: usize = 200;

/// The ByoHosts claimed by `byomachines` (`namespace.name`). BYOH labels a host with
/// `byoh.infrastructure.cluster.x-k8s.io/byomachine-name=<namespace>.<name>` in the same patch
/// that sets its `status.machineRef` (`attachByoHost` in
/// `controllers/infrastructure/byomachine_controller.go`, BYOH v0.5.0), so a set-based selector
/// on that label returns exactly those hosts, from whichever namespace holds them, and never
/// the hosts of a same-named cluster elsewhere. Host names are a bonus: a user who cannot list
/// hosts still gets the tree.
async fn read_hosts(conn: &Conn, apis: &ServerApis, byomachines: &[String]) -> Vec<Value> {
    let Some(host_ar) = host_pool::byoh(apis).ok().map(|(h, _)| h) else {
        return Vec::new();
    };
    let host_ar = &host_ar;
    let lists = byomachines.chunks(HOSTS_PER_LIST).map(|chunk| {
        let list = async move {
            let selector = format!("{BYOMACHINE_NAME_LABEL} in ({})", chunk.join(","));
            let lp = ListParams::default().labels(&selector);
            // The tree reads only the claim of each host.
            let keep = |v: Value| lists::prune(v, &[], &["machineRef"]);
            kclient::api::list_json_map(conn, host_ar, None, &lp, keep).await
        };
        ("ByoHosts", list)
    });
    gather(lists).await
}

/// Reads the cluster, then what it references, the objects labelled with its name and its
/// ClusterUpgrade, concurrently where they do not depend on each other. The Machines' own
/// infrastructure machines and bootstrap configs come after, from [`read_details`], for the
/// Machines the tree shows. Nothing outside the cluster is read, so the cost follows the
/// cluster, not the management cluster.
pub(super) async fn read(
    conn: &Conn,
    apis: &ServerApis,
    ns: &str,
    name: &str,
    opts: &TreeOptions,
) -> Result<Objects, Error> {
    let cluster_ar = apis.cluster()?;
    let cluster = kclient::api::get_or_suggest(conn, &cluster_ar, ns, name).await?;
    let cluster = fields::object_json(&cluster);
    let infra_ref = fields::cluster_infrastructure_ref(&cluster);
    let cp_ref = fields::cluster_control_plane_ref(&cluster);
    let deployments_then_machines = async {
        let mds = list_labelled(conn, apis.capi_kind("MachineDeployment").ok(), ns, name).await?;
        let machines = list_machines(conn, apis, ns, name, &mds, opts).await?;
        Ok::<_, Error>((mds, machines))
    };
    let (infra, cp, mds_machines, mss, mps, upgrade) = tokio::join!(
        get_opt_ref(conn, apis, infra_ref.as_ref(), ns),
        get_opt_ref(conn, apis, cp_ref.as_ref(), ns),
        deployments_then_machines,
        list_labelled(conn, apis.capi_kind("MachineSet").ok(), ns, name),
        list_labelled(conn, apis.capi_kind("MachinePool").ok(), ns, name),
        read_upgrade(conn, apis, ns, name),
    );
    let ((mds, machines), mss, mps) = (mds_machines?, mss?, mps?);
    let templates = async {
        match opts.show_templates {
            true => read_templates(conn, apis, cp.as_ref(), &mds, ns).await,
            false => vec![],
        }
    };
    let resource_sets = async {
        match opts.show_resourcesets {
            true => read_resource_sets(conn, apis, ns, name).await,
            false => vec![],
        }
    };
    let (templates, resource_sets) = tokio::join!(templates, resource_sets);
    Ok(Objects {
        cluster,
        infra,
        cp,
        machines,
        mds,
        mss,
        mps,
        infra_machines: Vec::new(),
        bootstrap_configs: Vec::new(),
        hosts: Vec::new(),
        templates,
        resource_sets,
        upgrade,
    })
}

/// Up to this many infrastructure machines and bootstrap configs are read one GET each; more
/// are read with one labelled LIST per kind (the cluster's all, cheaper than that many GETs).
const DETAIL_GETS: usize = 64;

/// Reads the infrastructure machines and bootstrap configs of the Machines named in `needed`
/// (the ones the tree shows; see `kcore::plan::tree::machines_needing_details`), as clusterctl
/// reads them only for the Machines it shows; then, only when some BYOH Machine's host is in
/// no providerID (the Machine's, or its ByoMachine's where that was read), the ByoHosts that
/// BYOH labels with its ByoMachine's name. A cluster whose Machines fold into groups costs no
/// read per Machine beyond the Machine LIST.
pub(super) async fn read_details(
    conn: &Conn,
    apis: &ServerApis,
    ns: &str,
    name: &str,
    o: &mut Objects,
    needed: &BTreeSet<String>,
) {
    let shown: Vec<&TreeMachine> = o
        .machines
        .iter()
        .filter(|m| needed.contains(&m.name))
        .collect();
    let infra_refs: Vec<ObjectRef> = shown
        .iter()
        .filter_map(|m| m.infrastructure_ref.clone())
        .collect();
    let boot_refs: Vec<ObjectRef> = shown
        .iter()
        .filter_map(|m| m.bootstrap_ref.clone())
        .collect();
    let (infra_machines, bootstrap_configs) =
        if infra_refs.len().saturating_add(boot_refs.len()) <= DETAIL_GETS {
            tokio::join!(
                get_each(conn, apis, &infra_refs, ns),
                get_each(conn, apis, &boot_refs, ns)
            )
        } else {
            tokio::join!(
                list_kinds(conn, apis, &infra_refs, ns, name),
                list_kinds(conn, apis, &boot_refs, ns, name)
            )
        };
    let unnamed = unnamed_hosts(&o.machines, &infra_machines);
    if !unnamed.is_empty() {
        o.hosts = read_hosts(conn, apis, &unnamed).await;
    }
    o.infra_machines = infra_machines;
    o.bootstrap_configs = bootstrap_configs;
}

/// One GET per reference, [`GET_CONCURRENCY`] at a time; missing objects are left out.
async fn get_each(conn: &Conn, apis: &ServerApis, refs: &[ObjectRef], ns: &str) -> Vec<Value> {
    use futures::StreamExt;
    futures::stream::iter(refs)
        .map(|r| get_ref(conn, apis, r, ns))
        .buffered(GET_CONCURRENCY)
        .filter_map(|o| async move { o })
        .collect()
        .await
}
