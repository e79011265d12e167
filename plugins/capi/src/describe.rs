//! `kubectl capi describe CLUSTER`: the object tree, as `clusterctl describe cluster` builds
//! it (v1beta2 columns, or the v1beta1 layout on v1beta1 management clusters). Unlike
//! clusterctl, `-o json|yaml` prints the same tree as data.

use std::collections::{BTreeSet, HashSet};

use clap::{ArgAction, Args as ClapArgs};
use cli::{Conn, KubeFlags, OutputFlags};
use kube::api::ListParams;
use kube::discovery::ApiResource;
use serde::Serialize;
use serde_json::Value;
use shared::discovery::fields::{self, ObjectRef};
use shared::discovery::{CapiVersion, ServerApis};
use shared::error::Error;
use shared::plan::tree::{
    ConditionView, Layout, ObjectTree, TreeInput, TreeNode, TreeOptions, build_tree,
};
use shared::render::{Cell, Human, Printer, Render, Table, Tone, object_name};

use crate::fleet;

const CLUSTER_NAME: &str = "cluster.x-k8s.io/cluster-name";
use shared::plan::hosts::BYOMACHINE_NAME_LABEL;

#[derive(ClapArgs, Clone, Debug)]
#[command(
    after_help = "Examples:\n  kubectl capi describe prod\n  kubectl capi describe prod --show-conditions all --grouping=false --echo\n  kubectl capi describe prod --show-conditions KamajiControlPlane,Machine+\n  kubectl capi describe prod -o json
  kubectl capi describe cluster prod --show-conditions=all --grouping=false --echo=true --show-machinesets=true

clusterctl describe cluster's flags work as there, booleans with or without =true|false."
)]
pub struct Args {
    /// The cluster (clusterctl's form `describe cluster NAME` works too)
    #[arg(value_name = "CLUSTER", num_args = 1..=2, required = true)]
    pub words: Vec<String>,
    /// Show conditions of these objects: all, Kind or Kind/name, comma-separated; a trailing + shows only those not in their good state
    #[arg(long, value_name = "KINDS", default_value = "")]
    pub show_conditions: String,
    /// Show MachineSets under their MachineDeployments
    #[arg(long, action = ArgAction::Set, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true", default_value_t = false)]
    pub show_machinesets: bool,
    /// Show the machine infrastructure and bootstrap config templates of the control plane and MachineDeployments
    #[arg(long, action = ArgAction::Set, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true", default_value_t = false)]
    pub show_templates: bool,
    /// Show the ClusterResourceSets bound to the cluster
    #[arg(long, action = ArgAction::Set, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true", default_value_t = false)]
    pub show_resourcesets: bool,
    /// clusterctl's deprecated --v1beta2 (default true): --v1beta2=false shows the v1beta1 layout (Ready, severity)
    #[arg(long, hide = true, action = ArgAction::Set, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub v1beta2: Option<bool>,
    /// Group machines whose Available, Ready and UpToDate conditions match (--grouping=false lists each)
    #[arg(long, default_value_t = true, action = ArgAction::Set, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub grouping: bool,
    /// Show infrastructure machines and bootstrap configs even when they add nothing
    #[arg(long, action = ArgAction::Set, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true", default_value_t = false)]
    pub echo: bool,
    #[command(flatten)]
    pub kube: KubeFlags,
    #[command(flatten)]
    pub output: OutputFlags,
}

/// The result: the tree, plus what it describes.
#[derive(Serialize, Debug)]
#[serde(rename_all = "camelCase")]
pub struct Description {
    pub cluster: String,
    pub namespace: String,
    /// The CAPI core version the tree was read at.
    pub api_version: String,
    #[serde(flatten)]
    pub tree: ObjectTree,
}

impl Args {
    /// The cluster name: the last word (`describe prod` or `describe cluster prod`).
    pub fn cluster(&self) -> Result<&str, Error> {
        match self.words.as_slice() {
            [name] => Ok(name),
            [word, name] if word == "cluster" => Ok(name),
            _ => Err(Error::Usage {
                message: format!("unexpected arguments {:?}", self.words.join(" ")),
                hint: Some(
                    "kubectl capi describe CLUSTER (or clusterctl's describe cluster CLUSTER)"
                        .into(),
                ),
            }),
        }
    }
}

fn since(c: &ConditionView) -> String {
    c.since_seconds.map(kcore::text::age).unwrap_or_default()
}

fn status_cell(c: &ConditionView) -> Cell {
    let tone = if c.is_good() {
        Tone::Good
    } else if c.status == "Unknown" {
        Tone::Warn
    } else {
        Tone::Bad
    };
    Cell::new(c.status.clone(), tone)
}

fn first_line(s: &str) -> String {
    let l = s.lines().next().unwrap_or("").trim();
    let more = s.lines().count() > 1;
    let mut out: String = l.chars().take(100).collect();
    if more || l.chars().count() > 100 {
        out.push_str(" ...");
    }
    out
}

fn opt(v: Option<i64>) -> String {
    v.map(|n| n.to_string()).unwrap_or_default()
}

fn name_cell(n: &TreeNode) -> String {
    let mut s = match &n.meta_name {
        Some(meta) if !n.virtual_node => format!("{meta} - {}", n.display_name),
        _ => n.display_name.clone(),
    };
    if let Some(p) = &n.control_plane_pods {
        s.push_str(&format!(
            " ({}/{} pods ready)",
            opt(p.ready.or(Some(0))),
            opt(p.desired.or(p.current))
        ));
    }
    if let Some(h) = &n.host {
        s.push_str(&format!(" @ {h}"));
    }
    if let Some(g) = &n.group
        && !g.hosts.is_empty()
    {
        s.push_str(&format!(" @ {}", g.hosts.join(",")));
    }
    s
}

fn add_rows(t: &mut Table, n: &TreeNode, prefix: &str, last: bool, root: bool, layout: Layout) {
    let (branch, child_prefix) = if root {
        (String::new(), String::new())
    } else if last {
        (format!("{prefix}└─"), format!("{prefix}  "))
    } else {
        (format!("{prefix}├─"), format!("{prefix}│ "))
    };
    let name = format!("{branch}{}", name_cell(n));
    let message = n
        .message
        .clone()
        .or_else(|| n.status.as_ref().and_then(|s| s.message.clone()))
        .map(|m| first_line(&m))
        .unwrap_or_default();
    let st = n.status.as_ref();
    match layout {
        Layout::V1Beta2 => {
            let c = n.counters.clone().unwrap_or_default();
            t.row([
                Cell::from(name),
                Cell::from(c.replicas_cell()),
                Cell::from(opt(c.available)),
                Cell::from(opt(c.ready)),
                Cell::from(opt(c.up_to_date)),
                st.map(status_cell).unwrap_or_default(),
                Cell::from(st.and_then(|s| s.reason.clone()).unwrap_or_default()),
                Cell::from(st.map(since).unwrap_or_default()),
                Cell::from(message),
            ]);
        }
        Layout::V1Beta1 => {
            t.row([
                Cell::from(name),
                st.map(status_cell).unwrap_or_default(),
                Cell::from(st.and_then(|s| s.severity.clone()).unwrap_or_default()),
                Cell::from(st.and_then(|s| s.reason.clone()).unwrap_or_default()),
                Cell::from(st.map(since).unwrap_or_default()),
                Cell::from(message),
            ]);
        }
    }
    // Conditions, one row each, under the object.
    let cond_prefix = if n.children.is_empty() {
        format!("{child_prefix}  ")
    } else {
        format!("{child_prefix}│ ")
    };
    for c in &n.conditions {
        let msg = c.message.as_deref().map(first_line).unwrap_or_default();
        let label = format!("{cond_prefix}{}", c.type_);
        match layout {
            Layout::V1Beta2 => t.row([
                Cell::new(label, Tone::Dim),
                Cell::default(),
                Cell::default(),
                Cell::default(),
                Cell::default(),
                status_cell(c),
                Cell::from(c.reason.clone().unwrap_or_default()),
                Cell::from(since(c)),
                Cell::from(msg),
            ]),
            Layout::V1Beta1 => t.row([
                Cell::new(label, Tone::Dim),
                status_cell(c),
                Cell::from(c.severity.clone().unwrap_or_default()),
                Cell::from(c.reason.clone().unwrap_or_default()),
                Cell::from(since(c)),
                Cell::from(msg),
            ]),
        };
    }
    let count = n.children.len();
    for (i, c) in n.children.iter().enumerate() {
        add_rows(t, c, &child_prefix, i + 1 == count, false, layout);
    }
}

impl Render for Description {
    fn human(&self) -> Human {
        let mut t = match self.tree.layout {
            Layout::V1Beta2 => Table::new([
                "NAME",
                "REPLICAS",
                "AVAILABLE",
                "READY",
                "UP TO DATE",
                "STATUS",
                "REASON",
                "SINCE",
                "MESSAGE",
            ]),
            Layout::V1Beta1 => {
                Table::new(["NAME", "READY", "SEVERITY", "REASON", "SINCE", "MESSAGE"])
            }
        };
        add_rows(&mut t, &self.tree.root, "", true, true, self.tree.layout);
        Human::Table(t)
    }
    fn names(&self) -> Option<Vec<String>> {
        let mut out = Vec::new();
        for (_, n) in self.tree.walk() {
            if n.virtual_node || n.group.is_some() {
                continue;
            }
            let group = match n.kind.as_str() {
                "Cluster" | "Machine" | "MachineDeployment" | "MachineSet" | "MachinePool" => {
                    shared::discovery::CAPI_GROUP
                }
                k if k.ends_with("ControlPlane") => shared::discovery::CONTROLPLANE_GROUP,
                k if k.starts_with("Kubeadm") => shared::discovery::BOOTSTRAP_GROUP,
                _ => shared::discovery::INFRASTRUCTURE_GROUP,
            };
            out.push(object_name(&n.kind, group, &n.name));
        }
        Some(out)
    }
}

/// Concurrent GETs at most (templates; a handful per cluster).
const GET_CONCURRENCY: usize = 16;

/// GETs the object a reference points at; `None` when it is missing or its kind is not served
/// (the tree simply shows less). The object stays the JSON the server sent.
async fn get_ref(conn: &Conn, apis: &ServerApis, r: &ObjectRef, ns: &str) -> Option<Value> {
    let ar = apis.resolve_ref(r).ok()?;
    let namespace = Some(r.namespace.as_deref().unwrap_or(ns));
    match shared::api::get_json_opt(conn, &ar, namespace, &r.name).await {
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
        Some(async move {
            match list_labelled(conn, Some(ar), ns, cluster).await {
                Ok(items) => items,
                Err(e) => {
                    tracing::info!("list {kind}: {e}");
                    Vec::new()
                }
            }
        })
    });
    futures::future::join_all(lists)
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
    let lp = ListParams::default().labels(&format!("{CLUSTER_NAME}={cluster}"));
    fleet::list_opt(conn, ar.as_ref(), Some(ns), &lp).await
}

/// Everything the tree is built from, as read.
struct Objects {
    cluster: Value,
    infra: Option<Value>,
    cp: Option<Value>,
    machines: Vec<Value>,
    mds: Vec<Value>,
    mss: Vec<Value>,
    mps: Vec<Value>,
    infra_machines: Vec<Value>,
    bootstrap_configs: Vec<Value>,
    hosts: Vec<Value>,
    templates: Vec<Value>,
    resource_sets: Vec<Value>,
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
    use futures::StreamExt;
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
    futures::stream::iter(refs)
        .map(|(api_group, kind, namespace, name)| async move {
            let r = ObjectRef {
                api_group,
                kind,
                name,
                namespace: Some(namespace),
                ..Default::default()
            };
            get_ref(conn, apis, &r, ns).await
        })
        .buffered(GET_CONCURRENCY)
        .filter_map(|o| async move { o })
        .collect()
        .await
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
    let Ok(Some(binding)) = shared::api::get_json_opt(conn, &binding_ar, Some(ns), cluster).await
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
    if let Ok(sets) = shared::api::list_json(conn, &crs_ar, Some(ns), &all).await {
        out.extend(
            sets.into_iter()
                .filter(|c| names.iter().any(|n| n == kcore::json::name(c))),
        );
    }
    out
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
fn unnamed_hosts(machines: &[Value], infra_machines: &[Value]) -> Vec<String> {
    use kcore::json::{kind, name, namespace, str_at};
    use shared::plan::hosts::host_from_provider_id;
    let named = |v: &Value| {
        str_at(v, &["spec", "providerID"])
            .and_then(host_from_provider_id)
            .is_some()
    };
    let with_host: HashSet<&str> = infra_machines
        .iter()
        .filter(|bm| kind(bm) == "ByoMachine" && named(bm))
        .map(name)
        .collect();
    machines
        .iter()
        .filter(|m| !named(m))
        .filter_map(|m| {
            let r = fields::machine_infrastructure_ref(m)?;
            (r.kind == "ByoMachine" && !with_host.contains(r.name.as_str()))
                .then(|| format!("{}.{}", namespace(m), r.name))
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
    let Some(host_ar) = fleet::byoh(apis).ok().map(|(h, _)| h) else {
        return Vec::new();
    };
    let host_ar = &host_ar;
    let lists = byomachines.chunks(HOSTS_PER_LIST).map(|chunk| async move {
        let selector = format!("{BYOMACHINE_NAME_LABEL} in ({})", chunk.join(","));
        let lp = ListParams::default().labels(&selector);
        // The tree reads only the claim of each host.
        let keep = |v: Value| fleet::prune(v, &[], &["machineRef"]);
        match shared::api::list_json_map(conn, host_ar, None, &lp, keep).await {
            Ok(hosts) => hosts,
            Err(e) => {
                tracing::info!("list ByoHosts: {e}");
                Vec::new()
            }
        }
    });
    futures::future::join_all(lists)
        .await
        .into_iter()
        .flatten()
        .collect()
}

/// Reads the cluster, what it references and the objects labelled with its name, then the
/// machines' infrastructure machines and bootstrap configs, concurrently where they do not
/// depend on each other; then, only when some BYOH machine's host is not in a providerID, the
/// cluster's ByoHosts. Nothing outside the cluster is read, so the cost follows the cluster,
/// not the management cluster.
async fn read(
    conn: &Conn,
    apis: &ServerApis,
    ns: &str,
    name: &str,
    opts: &TreeOptions,
) -> Result<Objects, Error> {
    let cluster_ar = apis.cluster()?;
    let cluster = shared::api::get_or_suggest(conn, &cluster_ar, ns, name).await?;
    let cluster = fields::object_json(&cluster);
    let infra_ref = fields::cluster_infrastructure_ref(&cluster);
    let cp_ref = fields::cluster_control_plane_ref(&cluster);
    let (infra, cp, machines, mds, mss, mps) = tokio::join!(
        get_opt_ref(conn, apis, infra_ref.as_ref(), ns),
        get_opt_ref(conn, apis, cp_ref.as_ref(), ns),
        list_labelled(conn, apis.capi_kind("Machine").ok(), ns, name),
        list_labelled(conn, apis.capi_kind("MachineDeployment").ok(), ns, name),
        list_labelled(conn, apis.capi_kind("MachineSet").ok(), ns, name),
        list_labelled(conn, apis.capi_kind("MachinePool").ok(), ns, name),
    );
    let (machines, mds, mss, mps) = (machines?, mds?, mss?, mps?);
    let infra_refs: Vec<ObjectRef> = machines
        .iter()
        .filter_map(fields::machine_infrastructure_ref)
        .collect();
    let boot_refs: Vec<ObjectRef> = machines
        .iter()
        .filter_map(fields::machine_bootstrap_ref)
        .collect();
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
    let (infra_machines, bootstrap_configs, templates, resource_sets) = tokio::join!(
        list_kinds(conn, apis, &infra_refs, ns, name),
        list_kinds(conn, apis, &boot_refs, ns, name),
        templates,
        resource_sets,
    );
    let unnamed = unnamed_hosts(&machines, &infra_machines);
    let hosts = match unnamed.is_empty() {
        true => Vec::new(),
        false => read_hosts(conn, apis, &unnamed).await,
    };
    Ok(Objects {
        cluster,
        infra,
        cp,
        machines,
        mds,
        mss,
        mps,
        infra_machines,
        bootstrap_configs,
        hosts,
        templates,
        resource_sets,
    })
}

fn tree_options(args: &Args, version: CapiVersion) -> TreeOptions {
    TreeOptions {
        show_conditions: args.show_conditions.clone(),
        show_machinesets: args.show_machinesets,
        show_templates: args.show_templates,
        show_resourcesets: args.show_resourcesets,
        echo: args.echo,
        grouping: args.grouping,
        layout: match (version, args.v1beta2) {
            (CapiVersion::V1Beta1, _) | (_, Some(false)) => Layout::V1Beta1,
            (CapiVersion::V1Beta2, _) => Layout::V1Beta2,
        },
    }
}

fn tree_input(o: &Objects) -> TreeInput<'_> {
    TreeInput {
        cluster: &o.cluster,
        infrastructure_cluster: o.infra.as_ref(),
        control_plane: o.cp.as_ref(),
        machines: &o.machines,
        machine_deployments: &o.mds,
        machine_sets: &o.mss,
        machine_pools: &o.mps,
        infrastructure_machines: &o.infra_machines,
        bootstrap_configs: &o.bootstrap_configs,
        byo_hosts: &o.hosts,
        templates: &o.templates,
        resource_sets: &o.resource_sets,
        now: Some(fleet::now()),
    }
}

pub async fn run(args: &Args) -> Result<(), Error> {
    let printer = Printer::new(&args.output);
    let layout_probe = TreeOptions {
        show_conditions: args.show_conditions.clone(),
        ..Default::default()
    };
    layout_probe.validate().map_err(|e| Error::Usage {
        message: e.to_string(),
        hint: Some("e.g. --show-conditions all, or KubeadmControlPlane+,Machine/m1".into()),
    })?;
    let cluster = args.cluster()?;
    kcore::names::check_object_name("Cluster", cluster)?;
    let conn = args.kube.connect().await?;
    let ns = conn.namespace.clone();
    let apis = ServerApis::discover(&conn).await?;
    let version = apis.require_capi()?;
    let opts = tree_options(args, version);
    let objects = read(&conn, &apis, &ns, cluster, &opts).await?;
    let tree = build_tree(tree_input(&objects), &opts).map_err(|e| Error::usage(e.to_string()))?;
    printer.print(&Description {
        cluster: cluster.to_string(),
        namespace: ns,
        api_version: version.as_str().to_string(),
        tree,
    })
}
