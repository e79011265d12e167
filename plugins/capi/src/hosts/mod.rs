//! `kubectl capi hosts`: the ByoHost inventory, joined host → ByoMachine → Machine → Cluster
//! (here), and the sub-verbs on hosts, each in its submodule: `describe HOST` (`describe`),
//! `add HOST...` (`add`), `cordon|uncordon|drain HOST` (`maint`).

use clap::{Args as ClapArgs, Subcommand};
use cli::{KubeFlags, OutputFlags};
use kclient::discovery::ServerApis;
use kclient::error::Error;
use kclient::render::{Cell, Human, Printer, Render, RowObjects, Table, Tone, labels_text};
use kcore::groups::INFRASTRUCTURE_GROUP;
use kcore::plan::hosts::{HostFilter, HostRow, HostState, HostSummary};
use kcore::plan::selector::LabelSelector;
use serde::Serialize;
use serde_json::Value;

use crate::common::list_flags::ListFlags;
use crate::common::{cells, host_pool, lists};

mod add;
mod describe;
mod maint;
mod remove;

#[derive(ClapArgs, Clone, Debug)]
#[command(
    args_conflicts_with_subcommands = true,
    // --cluster is the kubeconfig cluster, as everywhere in kubectl; the CAPI cluster filter
    // is --cluster-name. --kubeconfig-cluster (the old spelling) still works.
    mut_arg("kube-cluster", |a| a.alias("kubeconfig-cluster")),
    mut_arg("selector", |a| a.help("Label selector over host labels (kubectl syntax: k=v, k!=v, k in (a,b), !k)")),
    after_help = "Hosts of every namespace are listed unless -n is given: any namespace's machines may claim a host.\n\nExamples:\n  kubectl capi hosts\n  kubectl capi hosts --available\n  kubectl capi hosts --cluster-name prod -o wide\n  kubectl capi hosts --state failed,releasing\n  kubectl capi hosts describe host-07"
)]
pub struct Args {
    #[command(subcommand)]
    pub cmd: Option<Cmd>,
    /// Only hosts used by this CAPI cluster (label cluster.x-k8s.io/cluster-name)
    #[arg(long = "cluster-name", value_name = "CLUSTER")]
    pub cluster: Option<String>,
    /// Only hosts in these states (Available, Reserved, Provisioning, Running, Unreachable, Releasing, Failed, Paused, Cordoned; comma-separated or repeated)
    #[arg(long, value_name = "STATE", value_delimiter = ',')]
    pub state: Vec<String>,
    /// Only free hosts (same as --state Available)
    #[arg(long)]
    pub available: bool,
    #[command(flatten)]
    pub list: ListFlags,
}

#[derive(Subcommand, Clone, Debug)]
pub enum Cmd {
    /// Show one host: conditions, events, host → ByoMachine → Machine → Node, interfaces and a diagnosis
    Describe(DescribeArgs),
    /// Bring hosts into the BYOH pool: a BootstrapKubeconfig each, and the script to run on the host
    Add(add::AddArgs),
    /// Take a free host out of BYOH's selection (maintenance)
    Cordon(maint::CordonArgs),
    /// Return a cordoned host to the pool
    Uncordon(maint::CordonArgs),
    /// Move the worker machine on a host to a spare host, then cordon the host
    Drain(maint::DrainArgs),
    /// Replace the machine of a host that stopped (Unreachable), release the host for its dead agent, and cordon it
    Retire(maint::RetireArgs),
    /// Take free hosts out of the pool for good: their ByoHosts and what was issued for them; prints what to run on each
    Remove(remove::RemoveArgs),
}

#[derive(ClapArgs, Clone, Debug)]
pub struct DescribeArgs {
    /// The ByoHost name
    #[arg(value_name = "HOST")]
    pub host: String,
    #[command(flatten)]
    pub kube: KubeFlags,
    #[command(flatten)]
    pub output: OutputFlags,
}

/// The ByoHost resource, or that BYOH is not installed (the host verbs that write).
fn byo_host_resource(
    apis: &ServerApis,
    conn: &kclient::conn::Conn,
) -> Result<kube::discovery::ApiResource, Error> {
    apis.byo_host().ok_or_else(|| Error::NotInstalled {
        product: "BYOH".into(),
        group: INFRASTRUCTURE_GROUP.into(),
        install: "install the BYOH provider (clusterctl init --infrastructure byoh)".into(),
        context: conn.context.clone(),
    })
}

/// Asks before a destructive step on a terminal; without one, `--yes` is needed.
fn confirm(yes: bool, what: &str) -> Result<(), Error> {
    if yes {
        return Ok(());
    }
    if !std::io::IsTerminal::is_terminal(&std::io::stdin()) {
        return Err(Error::Usage {
            message: format!("{what}: confirm with --yes (no terminal to ask on)"),
            hint: None,
        });
    }
    if !kclient::render::confirm(&format!("{what}?"))? {
        return Err(Error::other("nothing was changed"));
    }
    Ok(())
}

pub fn state_tone(s: HostState) -> Tone {
    match s {
        HostState::Available | HostState::Running => Tone::Good,
        HostState::Failed | HostState::Unreachable => Tone::Bad,
        HostState::Paused | HostState::Cordoned => Tone::Dim,
        HostState::Reserved | HostState::Provisioning | HostState::Releasing => Tone::Warn,
    }
}

/// The MACHINE column: the CAPI Machine, else the ByoMachine that claimed the host.
fn machine_cell(r: &HostRow) -> String {
    match (&r.machine, &r.byo_machine) {
        (Some(m), _) => m.clone(),
        (None, Some(bm)) => format!("byomachine/{}", bm.rsplit('/').next().unwrap_or(bm)),
        (None, None) => "<none>".into(),
    }
}

/// The hosts table without rows: its columns, the wide ones last.
fn host_table() -> Table {
    Table::new([
        "NAME", "STATE", "CLUSTER", "MACHINE", "VERSION", "OS", "ARCH", "IP", "AGE",
    ])
    .wide(["OS-IMAGE", "PROVIDER-ID", "REASON", "LABELS", "NAMESPACE"])
}

/// The cells of a host's row, the wide ones last.
fn host_cells(r: &HostRow) -> Vec<Cell> {
    vec![
        Cell::from(&r.name),
        Cell::new(r.state.as_str(), state_tone(r.state)),
        Cell::from(cells::or_none(r.cluster.as_deref())),
        Cell::from(machine_cell(r)),
        Cell::from(cells::or_none(r.version.as_deref())),
        Cell::from(cells::or_none(r.os.as_deref())),
        Cell::from(cells::or_none(r.arch.as_deref())),
        Cell::from(cells::or_none(r.ip.as_deref())),
        Cell::from(kcore::text::age_cell(r.age_seconds)),
        Cell::from(cells::or_none(r.os_image.as_deref())),
        Cell::from(cells::or_none(r.provider_id.as_deref())),
        Cell::from(cells::or_none(r.reason.as_deref())),
        Cell::from(labels_text(&r.labels)),
        Cell::from(&r.namespace),
    ]
}

/// The result of `hosts`: the rows and the summary of what is shown.
#[derive(Serialize, Debug)]
#[serde(rename_all = "camelCase")]
pub struct HostList {
    pub summary: HostSummary,
    pub items: Vec<HostRow>,
}

impl Render for HostList {
    fn human(&self) -> Human {
        let mut t = host_table();
        for r in &self.items {
            t.row(host_cells(r));
        }
        Human::Table(t)
    }
    fn objects(&self) -> Option<RowObjects<'_>> {
        RowObjects::of("ByoHost", INFRASTRUCTURE_GROUP, &self.items, |r| {
            &r.metadata
        })
    }
    fn footer(&self) -> Option<String> {
        Some(format!("\n{}", self.summary))
    }
}

/// `--cluster` naming no Cluster is a typo, not an empty pool: say so, with the closest names.
fn unknown_cluster(name: &str, clusters: &[Value], namespace: Option<&str>) -> Result<(), Error> {
    let names: Vec<&str> = clusters.iter().map(kcore::json::name).collect();
    if names.contains(&name) {
        return Ok(());
    }
    Err(Error::NotFound {
        kind: "Cluster".into(),
        name: name.to_string(),
        namespace: namespace.map(str::to_string),
        suggestions: kcore::text::closest_names(name, names.iter().copied()),
    })
}

/// Builds the filter from the flags (bad states or selectors are usage errors).
pub fn filter(args: &Args, namespace: Option<String>) -> Result<HostFilter, Error> {
    let mut states = Vec::new();
    for s in args.state.iter().filter(|s| !s.trim().is_empty()) {
        states.push(HostState::parse(s).map_err(|e| {
            let names: Vec<&str> = HostState::ALL.iter().map(|s| s.as_str()).collect();
            Error::Usage {
                message: e.to_string(),
                hint: Some(format!("use one of: {}", names.join(", "))),
            }
        })?);
    }
    let selector = match &args.list.selector {
        Some(s) => Some(LabelSelector::parse(s).map_err(|e| Error::Usage {
            message: e.to_string(),
            hint: Some("use kubectl's syntax: -l 'role=worker,zone in (a,b),!gpu'".into()),
        })?),
        None => None,
    };
    Ok(HostFilter {
        cluster: args.cluster.clone(),
        states,
        available: args.available,
        selector,
        namespace,
    })
}

/// `hosts --cluster prod` once filtered by CAPI cluster; it now names the kubeconfig cluster,
/// as in kubectl. When no such kubeconfig cluster exists, point at `--cluster-name`.
fn cluster_flag_hint(kube: &KubeFlags, e: Error) -> Error {
    match (&kube.cluster, e) {
        (Some(c), Error::Kubeconfig { message, .. }) if message.contains(&format!("\"{c}\"")) => {
            Error::Kubeconfig {
                message,
                hint: format!(
                    "--cluster is the kubeconfig cluster, as in kubectl; for the hosts of CAPI cluster {c}, use --cluster-name {c}"
                ),
            }
        }
        (_, e) => e,
    }
}

pub async fn run(args: &Args) -> Result<(), Error> {
    match &args.cmd {
        Some(Cmd::Describe(d)) => return describe::run(d).await,
        Some(Cmd::Add(a)) => return add::run(a).await,
        Some(Cmd::Cordon(a)) => return maint::cordon(a).await,
        Some(Cmd::Uncordon(a)) => return maint::uncordon(a).await,
        Some(Cmd::Drain(a)) => return maint::drain(a).await,
        Some(Cmd::Retire(a)) => return maint::retire(a).await,
        Some(Cmd::Remove(a)) => return remove::run(a).await,
        None => {}
    }
    let printer = Printer::new(&args.list.output);
    // Every flag is checked before anything is read.
    filter(args, None)?;
    if let Some(c) = &args.cluster {
        kcore::names::check_object_name("cluster", c)?;
    }
    let conn = args
        .list
        .kube
        .connect()
        .await
        .map_err(|e| cluster_flag_hint(&args.list.kube, e))?;
    // All namespaces unless -n: any namespace's machines may claim a host.
    let namespace =
        (conn.namespace_explicit && !conn.all_namespaces).then(|| conn.namespace.clone());
    let filter = filter(args, namespace.clone())?;
    let apis = ServerApis::discover(&conn).await?;
    // The selector also narrows the LIST on the server.
    // The table needs names only from the joined kinds; wide, JSON and YAML need more.
    let detail = match args.list.output.output {
        cli::OutputFormat::Table | cli::OutputFormat::Name => host_pool::HostDetail::Table,
        cli::OutputFormat::Wide => host_pool::HostDetail::Wide,
        _ => host_pool::HostDetail::Rows,
    };
    let mut items = host_pool::host_rows(
        &conn,
        &apis,
        namespace.as_deref(),
        args.list.selector(),
        detail,
        &filter,
    )
    .await?;
    items.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    if items.is_empty()
        && let Some(c) = &args.cluster
    {
        // Clusters are read only to tell a typo from a cluster without hosts (the table has
        // always left that to the empty list).
        let clusters = match detail {
            host_pool::HostDetail::Table => Vec::new(),
            _ => {
                let cluster_ar = apis.cluster().ok();
                let lp = kube::api::ListParams::default();
                lists::list_opt(&conn, cluster_ar.as_ref(), None, &lp).await?
            }
        };
        unknown_cluster(c, &clusters, namespace.as_deref())?;
    }
    let summary = HostSummary::of(&items);
    if items.is_empty() && !args.list.output.output.is_structured() {
        kclient::render::none_found("hosts", namespace.as_deref());
        return Ok(());
    }
    // Printed as it is made (JSON as it is serialised, the tables row by row): at 10,000
    // hosts the text and the tables' cells would otherwise be held whole on top of the rows.
    let list = HostList { summary, items };
    printer.print_rows(&list, host_table(), &list.items, host_cells)
}
