//! `kubectl capi describe CLUSTER`: the object tree, as `clusterctl describe cluster` builds
//! it (v1beta2 columns, or the v1beta1 layout on v1beta1 management clusters). Unlike
//! clusterctl, `-o json|yaml` prints the same tree as data.

use clap::{ArgAction, Args as ClapArgs};
use cli::{KubeFlags, OutputFlags};
use kclient::discovery::ServerApis;
use kclient::error::Error;
use kclient::render::{Cell, Human, Printer, Render, Table, Tone, object_name};
use kcore::groups::CapiVersion;
use kcore::ops::summary::{UpgradeSummary, summarize};
use kcore::plan::tree::{
    ConditionView, Layout, ObjectTree, TreeInput, TreeNode, TreeOptions, build_tree,
    machines_needing_details,
};
use serde::Serialize;

use crate::common::time;

mod fetch;

use fetch::{Objects, read, read_details};

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
    /// The cluster's ClusterUpgrade, when one is under way or failed
    /// (`kcore::ops::summary`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upgrade: Option<UpgradeSummary>,
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
    } else if c.condition.status == "Unknown" {
        Tone::Warn
    } else {
        Tone::Bad
    };
    Cell::new(c.condition.status.clone(), tone)
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
        s.push_str(&format!(" @ {}", host_list(&g.hosts)));
    }
    s
}

/// Hosts a group row names before it counts the rest.
const GROUP_HOSTS_SHOWN: usize = 3;

/// A group's hosts as kubectl prints long lists (`get endpoints`: `a,b,c + 7 more...`): a group
/// of 5,000 Machines would otherwise widen every row of the table to its host list. `-o json`
/// and `-o yaml` keep every host.
fn host_list(hosts: &[String]) -> String {
    match hosts.len().checked_sub(GROUP_HOSTS_SHOWN) {
        Some(more) if more > 0 => {
            format!("{} + {more} more...", hosts[..GROUP_HOSTS_SHOWN].join(","))
        }
        _ => hosts.join(","),
    }
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
        .or_else(|| n.status.as_ref().and_then(|s| s.condition.message.clone()))
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
                Cell::from(
                    st.and_then(|s| s.condition.reason.clone())
                        .unwrap_or_default(),
                ),
                Cell::from(st.map(since).unwrap_or_default()),
                Cell::from(message),
            ]);
        }
        Layout::V1Beta1 => {
            t.row([
                Cell::from(name),
                st.map(status_cell).unwrap_or_default(),
                Cell::from(
                    st.and_then(|s| s.condition.severity.clone())
                        .unwrap_or_default(),
                ),
                Cell::from(
                    st.and_then(|s| s.condition.reason.clone())
                        .unwrap_or_default(),
                ),
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
        let msg = c
            .condition
            .message
            .as_deref()
            .map(first_line)
            .unwrap_or_default();
        let label = format!("{cond_prefix}{}", c.condition.type_);
        match layout {
            Layout::V1Beta2 => t.row([
                Cell::new(label, Tone::Dim),
                Cell::default(),
                Cell::default(),
                Cell::default(),
                Cell::default(),
                status_cell(c),
                Cell::from(c.condition.reason.clone().unwrap_or_default()),
                Cell::from(since(c)),
                Cell::from(msg),
            ]),
            Layout::V1Beta1 => t.row([
                Cell::new(label, Tone::Dim),
                status_cell(c),
                Cell::from(c.condition.severity.clone().unwrap_or_default()),
                Cell::from(c.condition.reason.clone().unwrap_or_default()),
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
                    kcore::groups::CAPI_GROUP
                }
                k if k.ends_with("ControlPlane") => kcore::groups::CONTROLPLANE_GROUP,
                k if k.starts_with("Kubeadm") => kcore::groups::BOOTSTRAP_GROUP,
                _ => kcore::groups::INFRASTRUCTURE_GROUP,
            };
            out.push(object_name(&n.kind, group, &n.name));
        }
        Some(out)
    }
    /// The upgrade's line under the tree.
    fn footer(&self) -> Option<String> {
        self.upgrade.as_ref().map(UpgradeSummary::line)
    }
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
        now: Some(time::now()),
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
    let mut objects = read(&conn, &apis, &ns, cluster, &opts).await?;
    let usage = |e: kcore::plan::tree::TreeError| Error::usage(e.to_string());
    let needed = machines_needing_details(tree_input(&objects), &opts).map_err(usage)?;
    read_details(&conn, &apis, &ns, cluster, &mut objects, &needed).await;
    let tree = build_tree(tree_input(&objects), &opts).map_err(usage)?;
    printer.print(&Description {
        cluster: cluster.to_string(),
        namespace: ns,
        api_version: version.as_str().to_string(),
        upgrade: objects.upgrade.as_ref().and_then(summarize),
        tree,
    })
}

#[cfg(test)]
mod tests {
    use super::host_list;

    #[test]
    fn long_host_lists_are_counted_as_kubectl_does() {
        let hosts = |n: usize| -> Vec<String> { (1..=n).map(|i| format!("h{i}")).collect() };
        assert_eq!(host_list(&[]), "");
        assert_eq!(host_list(&hosts(3)), "h1,h2,h3");
        assert_eq!(host_list(&hosts(4)), "h1,h2,h3 + 1 more...");
        assert_eq!(host_list(&hosts(5000)), "h1,h2,h3 + 4997 more...");
    }
}
