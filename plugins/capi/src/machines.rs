//! `kubectl capi machines [CLUSTER] [--watch]`: CAPI Machines with their role, readiness, node
//! and BYOH host.

use std::collections::{BTreeMap, HashMap};

use clap::Args as ClapArgs;
use cli::OutputFormat;
use futures::StreamExt;
use kclient::discovery::ServerApis;
use kclient::error::{Error, Op};
use kclient::render::{Cell, Human, Printer, Render, RowObjects, Table, Tone};
use kcore::fields;
use kcore::groups::CAPI_GROUP;
use kcore::json;
use kcore::plan::hosts::{BYOMACHINE_NAME_LABEL, host_from_provider_id};
use kube::api::{Api, DynamicObject, ListParams};
use kube::runtime::watcher;
use serde::Serialize;
use serde_json::Value;

use crate::common::list_flags::ListFlags;
use crate::common::{cells, host_pool, time};

use kcore::labels::CLUSTER_NAME_LABEL;
use kcore::labels::CONTROL_PLANE_LABEL;

#[derive(ClapArgs, Clone, Debug)]
#[command(
    mut_arg("selector", |a| a.help("Label selector over Machine labels")),
    after_help = "Examples:\n  kubectl capi machines\n  kubectl capi machines prod -n team-a -o wide\n  kubectl capi machines -A --watch"
)]
pub struct Args {
    /// Only the machines of this cluster
    #[arg(value_name = "CLUSTER")]
    pub cluster: Option<String>,
    /// After listing, stream changes as they happen (one line per change; Ctrl-C stops)
    #[arg(short = 'w', long)]
    pub watch: bool,
    #[command(flatten)]
    pub list: ListFlags,
}

/// One row of `machines`.
#[derive(Serialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MachineRow {
    /// kubectl's `metadata` (name, namespace, labels) of the Machine.
    pub metadata: json::RowMeta,
    pub name: String,
    pub namespace: String,
    pub cluster: String,
    /// `control-plane` or `worker`.
    pub role: String,
    pub phase: Option<String>,
    /// Status of the Ready, Available and UpToDate conditions (`True`, `False`, `Unknown`).
    pub ready: String,
    pub available: String,
    pub up_to_date: String,
    pub version: Option<String>,
    pub node: Option<String>,
    /// The BYOH host behind the machine (providerID, else the host claimed by its ByoMachine).
    pub host: Option<String>,
    pub deployment: Option<String>,
    pub provider_id: Option<String>,
    /// Why it is not ready, when it is not.
    pub reason: Option<String>,
    pub message: Option<String>,
    pub created: Option<String>,
    pub age_seconds: Option<i64>,
    /// Set on watch lines of deleted machines.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub deleted: bool,
}

fn status_of(m: &Value, type_: &str) -> String {
    fields::condition(m, type_)
        .map(|c| c.status)
        .unwrap_or_else(|| "Unknown".into())
}

/// Host name by ByoMachine `namespace/name`, from the hosts' byomachine-name labels.
pub fn hosts_by_byomachine(hosts: &[Value]) -> HashMap<String, String> {
    let mut m = HashMap::new();
    for h in hosts {
        if let Some(v) = json::label(h, BYOMACHINE_NAME_LABEL)
            && let Some((ns, bm)) = v.split_once('.')
        {
            m.insert(format!("{ns}/{bm}"), json::name(h).to_string());
        }
        if let (Some(ns), Some(n)) = (
            json::str_at(h, &["status", "machineRef", "namespace"]),
            json::str_at(h, &["status", "machineRef", "name"]),
        ) {
            m.insert(format!("{ns}/{n}"), json::name(h).to_string());
        }
    }
    m
}

/// The row of one Machine (pure).
pub fn row(m: &Value, hosts: &HashMap<String, String>, now: jiff::Timestamp) -> MachineRow {
    with_host(row_before_hosts(m, now), hosts)
}

/// A row from [`row_before_hosts`], its host looked up by its ByoMachine when it needs one.
fn with_host(
    (mut row, byomachine): (MachineRow, Option<String>),
    hosts: &HashMap<String, String>,
) -> MachineRow {
    if let Some(k) = byomachine {
        row.host = hosts.get(&k).cloned();
    }
    row
}

/// The row of one Machine before the hosts are read, and the `namespace/name` of the
/// ByoMachine whose claimed host fills its `host` when its providerID names none: the rows are
/// made as the Machines' LIST streams in, while the hosts' LIST is still under way.
fn row_before_hosts(m: &Value, now: jiff::Timestamp) -> (MachineRow, Option<String>) {
    let ns = json::namespace(m);
    let s = |p: &[&str]| json::str_at(m, p).map(str::to_string);
    let provider_id = s(&["spec", "providerID"]);
    let host = provider_id
        .as_deref()
        .and_then(host_from_provider_id)
        .map(str::to_string);
    let byomachine = match host {
        Some(_) => None,
        None => fields::machine_infrastructure_ref(m)
            .filter(|r| r.kind == "ByoMachine")
            .map(|r| format!("{ns}/{}", r.name)),
    };
    let ready = fields::condition(m, "Ready");
    let not_ready = ready.as_ref().filter(|c| !c.is_true());
    let row = MachineRow {
        metadata: json::RowMeta::of(m),
        name: json::name(m).to_string(),
        namespace: ns.to_string(),
        cluster: s(&["spec", "clusterName"])
            .or_else(|| json::label(m, CLUSTER_NAME_LABEL).map(str::to_string))
            .unwrap_or_default(),
        role: if json::label(m, CONTROL_PLANE_LABEL).is_some() {
            "control-plane".into()
        } else {
            "worker".into()
        },
        phase: s(&["status", "phase"]),
        ready: ready
            .as_ref()
            .map(|c| c.status.clone())
            .unwrap_or_else(|| "Unknown".into()),
        available: status_of(m, "Available"),
        up_to_date: status_of(m, "UpToDate"),
        version: s(&["spec", "version"]),
        node: s(&["status", "nodeRef", "name"]),
        host,
        deployment: json::label(m, kcore::labels::DEPLOYMENT_NAME_LABEL).map(str::to_string),
        provider_id,
        reason: not_ready.and_then(|c| c.reason.clone()),
        message: not_ready.and_then(|c| c.message.clone()),
        created: s(&["metadata", "creationTimestamp"]),
        age_seconds: time::age_of(m, now),
        deleted: false,
    };
    (row, byomachine)
}

/// The result of `machines`.
#[derive(Serialize, Debug)]
#[serde(rename_all = "camelCase")]
pub struct MachineList {
    pub items: Vec<MachineRow>,
}

fn phase_tone(p: Option<&str>) -> Tone {
    match p {
        Some("Running") => Tone::Good,
        Some("Failed") | Some("Deleted") => Tone::Bad,
        Some("Deleting") => Tone::Dim,
        _ => Tone::Warn,
    }
}

impl Render for MachineList {
    fn human(&self) -> Human {
        let mut t = Table::new([
            "NAME",
            "CLUSTER",
            "ROLE",
            "PHASE",
            "READY",
            "AVAILABLE",
            "UP-TO-DATE",
            "VERSION",
            "NODE",
            "HOST",
            "AGE",
        ])
        .wide(["NAMESPACE", "DEPLOYMENT", "PROVIDER-ID", "REASON"]);
        for r in &self.items {
            let phase = if r.deleted {
                Some("Deleted")
            } else {
                r.phase.as_deref()
            };
            t.row([
                Cell::from(&r.name),
                Cell::from(&r.cluster),
                Cell::from(&r.role),
                Cell::new(cells::or_none(phase), phase_tone(phase)),
                Cell::status(&r.ready),
                Cell::status(&r.available),
                Cell::status(&r.up_to_date),
                Cell::from(cells::or_none(r.version.as_deref())),
                Cell::from(cells::or_none(r.node.as_deref())),
                Cell::from(cells::or_none(r.host.as_deref())),
                Cell::from(kcore::text::age_cell(r.age_seconds)),
                Cell::from(&r.namespace),
                Cell::from(cells::or_none(r.deployment.as_deref())),
                Cell::from(cells::or_none(r.provider_id.as_deref())),
                Cell::from(cells::or_none(r.reason.as_deref())),
            ]);
        }
        Human::Table(t)
    }
    fn objects(&self) -> Option<RowObjects<'_>> {
        RowObjects::of("Machine", CAPI_GROUP, &self.items, |r| &r.metadata)
    }
}

fn selector(args: &Args) -> Option<String> {
    let mut parts = Vec::new();
    if let Some(c) = &args.cluster {
        parts.push(format!("{CLUSTER_NAME_LABEL}={c}"));
    }
    if let Some(s) = args.list.selector() {
        parts.push(s.to_string());
    }
    (!parts.is_empty()).then(|| parts.join(","))
}

fn sort(rows: &mut [MachineRow]) {
    rows.sort_by(|a, b| {
        (&a.namespace, &a.cluster, &a.role, &a.name).cmp(&(
            &b.namespace,
            &b.cluster,
            &b.role,
            &b.name,
        ))
    });
}

pub async fn run(args: &Args) -> Result<(), Error> {
    let printer = Printer::new(&args.list.output);
    if let Some(c) = &args.cluster {
        kcore::names::check_object_name("Cluster", c)?;
    }
    let conn = args.list.kube.connect().await?;
    let namespace = conn.list_namespace().map(str::to_string);
    let apis = ServerApis::discover(&conn).await?;
    let machine_ar = apis.capi_kind("Machine")?;
    let mut lp = ListParams::default();
    if let Some(s) = selector(args) {
        lp = lp.labels(&s);
    }
    // Hosts of every namespace may serve these machines; without BYOH there are none.
    let host_ar = host_pool::byoh(&apis).ok().map(|(h, _)| h);
    // The Machines in one response (on an idle API server `continue` pages come from etcd),
    // each made into its row as it streams in, while the hosts are read: a 10,000-machine
    // LIST is about 50 MB of JSON, and many times that parsed, so neither the text nor the
    // objects are held. A row whose host comes from its ByoMachine's claim gets it after.
    let now = time::now();
    let (pending, hosts) = tokio::try_join!(
        kclient::api::list_json_whole(
            &conn,
            &machine_ar,
            namespace.as_deref(),
            &lp,
            false,
            move |m| row_before_hosts(&m, now),
        ),
        host_pool::host_claims(&conn, host_ar),
    )?;
    let host_map = hosts_by_byomachine(&hosts);
    drop(hosts);
    let mut items: Vec<MachineRow> = pending
        .into_iter()
        .map(|p| with_host(p, &host_map))
        .collect();
    sort(&mut items);
    if let Some(c) = &args.cluster
        && items.is_empty()
    {
        // Say whether the cluster itself exists.
        let cluster_ar = apis.cluster()?;
        let ns = conn.namespace.clone();
        kclient::api::get_or_suggest(&conn, &cluster_ar, &ns, c).await?;
    }
    let structured = args.list.output.output.is_structured();
    if items.is_empty() && !structured {
        kclient::render::none_found("machines", namespace.as_deref());
    } else if args.watch && structured {
        for r in &items {
            print_one(&printer, r)?;
        }
    } else if !args.watch {
        return printer.print(&MachineList { items });
    } else {
        printer.print(&MachineList {
            items: items.clone(),
        })?;
    }
    if !args.watch {
        return Ok(());
    }
    watch(
        &conn,
        &printer,
        &machine_ar,
        namespace.as_deref(),
        &lp,
        &host_map,
        items,
    )
    .await
}

/// One line (or one JSON/YAML document) for a changed machine.
fn print_one(printer: &Printer, r: &MachineRow) -> Result<(), Error> {
    match printer.format {
        OutputFormat::Json => {
            let s = serde_json::to_string(r)
                .map_err(|e| Error::other(format!("cannot serialise the result as JSON: {e}")))?;
            kclient::render::line(&s);
            Ok(())
        }
        OutputFormat::Yaml => {
            let s = kclient::render::to_yaml(r)?;
            kclient::render::raw(format!("---\n{s}").as_bytes());
            Ok(())
        }
        _ => {
            let p = Printer {
                headers: false,
                ..printer.clone()
            };
            p.print(&MachineList {
                items: vec![r.clone()],
            })
        }
    }
}

/// Streams changes: one line whenever a machine's row changes, appears or is deleted.
async fn watch(
    conn: &cli::Conn,
    printer: &Printer,
    ar: &kube::discovery::ApiResource,
    namespace: Option<&str>,
    lp: &ListParams,
    host_map: &HashMap<String, String>,
    initial: Vec<MachineRow>,
) -> Result<(), Error> {
    let api: Api<DynamicObject> = kclient::api::dynamic(conn, ar, namespace);
    let mut cfg = watcher::Config::default();
    if let Some(l) = &lp.label_selector {
        cfg = cfg.labels(l);
    }
    let key = |r: &MachineRow| format!("{}/{}", r.namespace, r.name);
    // What was printed last, without the age (which changes all the time).
    let comparable = |r: &MachineRow| MachineRow {
        age_seconds: None,
        ..r.clone()
    };
    let mut shown: BTreeMap<String, MachineRow> =
        initial.iter().map(|r| (key(r), comparable(r))).collect();
    let mut stream = watcher(api, cfg).boxed();
    let op = Op::on("watch", ar).in_namespace(namespace);
    while let Some(ev) = stream.next().await {
        let ev = match ev {
            Ok(ev) => ev,
            Err(watcher::Error::WatchError(s)) if s.code == 403 => {
                return Err(conn.error(kube::Error::Api(s), &op));
            }
            Err(e) => {
                // The watcher re-lists and resumes by itself; say so once per failure.
                tracing::info!("watch interrupted, resuming: {e}");
                continue;
            }
        };
        let (obj, deleted) = match ev {
            watcher::Event::Apply(o) | watcher::Event::InitApply(o) => (o, false),
            watcher::Event::Delete(o) => (o, true),
            watcher::Event::Init | watcher::Event::InitDone => continue,
        };
        let v = fields::object_json(&obj);
        let mut r = row(&v, host_map, time::now());
        r.deleted = deleted;
        let k = key(&r);
        let c = comparable(&r);
        if deleted {
            if shown.remove(&k).is_none() {
                continue;
            }
        } else if shown.get(&k) == Some(&c) {
            continue;
        } else {
            shown.insert(k, c);
        }
        print_one(printer, &r)?;
    }
    Ok(())
}
