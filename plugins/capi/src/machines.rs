//! `kubectl capi machines [CLUSTER] [--watch]`: CAPI Machines with their role, readiness, node
//! and BYOH host.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

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
use kube::discovery::ApiResource;
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

/// The order of the rows: by namespace, cluster, role and name.
fn order(a: &MachineRow, b: &MachineRow) -> std::cmp::Ordering {
    (&a.namespace, &a.cluster, &a.role, &a.name).cmp(&(&b.namespace, &b.cluster, &b.role, &b.name))
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
        host_pool::host_claims(&conn, host_ar.clone()),
    )?;
    let host_map = hosts_by_byomachine(&hosts);
    // The claims go on to the watch, which keeps them current.
    let hosts = if args.watch { hosts } else { Vec::new() };
    let mut listed: Vec<(MachineRow, Option<String>)> = pending
        .into_iter()
        .map(|(row, byomachine)| (with_host((row, byomachine.clone()), &host_map), byomachine))
        .collect();
    drop(host_map);
    listed.sort_by(|a, b| order(&a.0, &b.0));
    if let Some(c) = &args.cluster
        && listed.is_empty()
    {
        // Say whether the cluster itself exists.
        let cluster_ar = apis.cluster()?;
        let ns = conn.namespace.clone();
        kclient::api::get_or_suggest(&conn, &cluster_ar, &ns, c).await?;
    }
    let structured = args.list.output.output.is_structured();
    if listed.is_empty() && !structured {
        kclient::render::none_found("machines", namespace.as_deref());
        if !args.watch {
            return Ok(());
        }
    } else if !args.watch {
        let items = listed.into_iter().map(|(row, _)| row).collect();
        return printer.print(&MachineList { items });
    } else if structured {
        for (r, _) in &listed {
            print_one(&printer, r)?;
        }
    } else {
        let items = listed.iter().map(|(row, _)| row.clone()).collect();
        printer.print(&MachineList { items })?;
    }
    // The watch goes on from what was listed: the rows printed and the hosts' claims.
    let state = WatchState::new(listed, &hosts);
    drop(hosts);
    let target = WatchTarget {
        machines: &machine_ar,
        hosts: host_ar.as_ref(),
        namespace: namespace.as_deref(),
        lp: &lp,
    };
    watch(&conn, &printer, target, state).await
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

/// What `--watch` watches: the Machines the listing showed and, where BYOH is served, the
/// ByoHosts of every namespace (their claims name the host of a Machine no providerID names).
struct WatchTarget<'a> {
    machines: &'a ApiResource,
    hosts: Option<&'a ApiResource>,
    namespace: Option<&'a str>,
    lp: &'a ListParams,
}

/// Which watch an event came from.
enum Watched {
    Machine,
    Host,
}

/// Streams changes: one line whenever a machine's row changes, appears or is deleted, and when
/// the host BYOH claimed for it changes (a new Machine's host is claimed well before a
/// providerID names it).
async fn watch(
    conn: &cli::Conn,
    printer: &Printer,
    target: WatchTarget<'_>,
    mut state: WatchState,
) -> Result<(), Error> {
    let machines: Api<DynamicObject> =
        kclient::api::dynamic(conn, target.machines, target.namespace);
    let mut cfg = watcher::Config::default();
    if let Some(l) = &target.lp.label_selector {
        cfg = cfg.labels(l);
    }
    let machines = watcher(machines, cfg).map(|e| (Watched::Machine, e));
    let hosts = match target.hosts {
        Some(ar) => {
            let hosts: Api<DynamicObject> = kclient::api::dynamic(conn, ar, None);
            let hosts = watcher(hosts, watcher::Config::default());
            hosts.map(|e| (Watched::Host, e)).boxed()
        }
        None => futures::stream::empty().boxed(),
    };
    let mut stream = futures::stream::select(machines.boxed(), hosts);
    while let Some((from, ev)) = stream.next().await {
        let ev = match ev {
            Ok(ev) => ev,
            Err(watcher::Error::WatchError(s)) if s.code == 403 => {
                let (ar, namespace) = match from {
                    Watched::Machine => (target.machines, target.namespace),
                    Watched::Host => (target.hosts.unwrap_or(target.machines), None),
                };
                let op = Op::on("watch", ar).in_namespace(namespace);
                return Err(conn.error(kube::Error::Api(s), &op));
            }
            Err(e) => {
                // The watcher re-lists and resumes by itself; say so once per failure.
                tracing::info!("watch interrupted, resuming: {e}");
                continue;
            }
        };
        let ev = as_json(ev);
        let rows = match from {
            Watched::Machine => state.on_machine(ev, time::now()),
            Watched::Host => state.on_host(ev),
        };
        for r in &rows {
            print_one(printer, r)?;
        }
    }
    Ok(())
}

/// An event with its object as JSON.
fn as_json(ev: watcher::Event<DynamicObject>) -> watcher::Event<Value> {
    use watcher::Event as E;
    match ev {
        E::Apply(o) => E::Apply(fields::object_json(&o)),
        E::InitApply(o) => E::InitApply(fields::object_json(&o)),
        E::Delete(o) => E::Delete(fields::object_json(&o)),
        E::Init => E::Init,
        E::InitDone => E::InitDone,
    }
}

/// `namespace/name` of an object.
fn key_of(v: &Value) -> String {
    format!("{}/{}", json::namespace(v), json::name(v))
}

/// What a watch printed last, and the line each change makes it print (pure: the events in,
/// the rows to print out).
///
/// Two things a watch has to do that a LIST does not. A watch that (re)starts lists again
/// (`Init`, `InitApply`…, `InitDone`), and kube-runtime says a Machine printed before but not
/// in that list was deleted meanwhile (`watcher::Event::InitDone`): the Machines' watch starts
/// after the listing printed its rows, so a Machine deleted in between, or while the watch was
/// away, is printed deleted then. And the host of a Machine whose providerID names none comes
/// from the host claimed for its ByoMachine, which changes without the Machine changing: BYOH
/// claims a host for a new Machine seconds before the node it bootstraps gets the providerID,
/// so the claims are watched too.
#[derive(Debug, Default)]
struct WatchState {
    /// The row printed last per Machine (`namespace/name`), and the ByoMachine
    /// (`namespace/name`) whose claimed host fills it when no providerID names one.
    shown: BTreeMap<String, (MachineRow, Option<String>)>,
    /// The Machine each such ByoMachine belongs to.
    by_byomachine: HashMap<String, String>,
    /// Machines listed since the Machines' watch began (re)listing.
    relisting: Option<HashSet<String>>,
    /// Host name by ByoMachine (`namespace/name`), as [`hosts_by_byomachine`] reads the claims.
    hosts: HashMap<String, String>,
    /// The ByoMachines each host (`namespace/name`) claims.
    claims: HashMap<String, Vec<String>>,
    /// Hosts listed since the hosts' watch began (re)listing.
    hosts_relisting: Option<HashSet<String>>,
}

/// Two rows say the same, but for their age (which changes all the time).
fn same_row(a: &MachineRow, b: &MachineRow) -> bool {
    let bare = |r: &MachineRow| MachineRow {
        age_seconds: None,
        ..r.clone()
    };
    bare(a) == bare(b)
}

impl WatchState {
    /// After the listing: its rows, each with the ByoMachine whose claimed host fills it
    /// ([`row_before_hosts`]), and the hosts' claims it read.
    fn new(listed: Vec<(MachineRow, Option<String>)>, hosts: &[Value]) -> Self {
        let mut state = WatchState::default();
        for h in hosts {
            state.claim(h, true);
        }
        for (row, byomachine) in listed {
            state.remember(row, byomachine);
        }
        state
    }

    fn remember(&mut self, row: MachineRow, byomachine: Option<String>) {
        let k = format!("{}/{}", row.namespace, row.name);
        if let Some(bm) = &byomachine {
            self.by_byomachine.insert(bm.clone(), k.clone());
        }
        if let Some((_, Some(old))) = self.shown.insert(k, (row, byomachine.clone()))
            && byomachine.as_ref() != Some(&old)
        {
            self.by_byomachine.remove(&old);
        }
    }

    fn forget(&mut self, k: &str) -> Option<MachineRow> {
        let (row, byomachine) = self.shown.remove(k)?;
        if let Some(bm) = byomachine
            && self.by_byomachine.get(&bm).is_some_and(|m| m == k)
        {
            self.by_byomachine.remove(&bm);
        }
        Some(row)
    }

    /// The rows a Machine event prints.
    fn on_machine(&mut self, ev: watcher::Event<Value>, now: jiff::Timestamp) -> Vec<MachineRow> {
        use watcher::Event as E;
        match ev {
            E::Init => {
                self.relisting = Some(HashSet::new());
                vec![]
            }
            E::InitApply(m) => {
                if let Some(listed) = &mut self.relisting {
                    listed.insert(key_of(&m));
                }
                self.apply(&m, now).into_iter().collect()
            }
            E::Apply(m) => self.apply(&m, now).into_iter().collect(),
            E::Delete(m) => match self.forget(&key_of(&m)) {
                Some(_) => {
                    let mut r = row(&m, &self.hosts, now);
                    r.deleted = true;
                    vec![r]
                }
                None => vec![],
            },
            E::InitDone => {
                let listed = self.relisting.take().unwrap_or_default();
                let gone: Vec<String> = self
                    .shown
                    .keys()
                    .filter(|k| !listed.contains(*k))
                    .cloned()
                    .collect();
                gone.iter()
                    .filter_map(|k| self.forget(k))
                    .map(|r| MachineRow { deleted: true, ..r })
                    .collect()
            }
        }
    }

    /// The row of a Machine that appeared or changed, unless it says what was printed last.
    fn apply(&mut self, m: &Value, now: jiff::Timestamp) -> Option<MachineRow> {
        let (row, byomachine) = row_before_hosts(m, now);
        let row = with_host((row, byomachine.clone()), &self.hosts);
        let k = format!("{}/{}", row.namespace, row.name);
        if self
            .shown
            .get(&k)
            .is_some_and(|(last, bm)| same_row(last, &row) && *bm == byomachine)
        {
            return None;
        }
        self.remember(row.clone(), byomachine);
        Some(row)
    }

    /// The rows a host event prints: those of the Machines whose claimed host it changed.
    fn on_host(&mut self, ev: watcher::Event<Value>) -> Vec<MachineRow> {
        use watcher::Event as E;
        match ev {
            E::Init => {
                self.hosts_relisting = Some(HashSet::new());
                vec![]
            }
            E::InitApply(h) => {
                if let Some(listed) = &mut self.hosts_relisting {
                    listed.insert(key_of(&h));
                }
                self.claim(&h, true)
            }
            E::Apply(h) => self.claim(&h, true),
            E::Delete(h) => self.claim(&h, false),
            E::InitDone => {
                let listed = self.hosts_relisting.take().unwrap_or_default();
                let gone: Vec<String> = self
                    .claims
                    .keys()
                    .filter(|k| !listed.contains(*k))
                    .cloned()
                    .collect();
                gone.iter()
                    .flat_map(|k| self.set_claims(k, vec![]))
                    .collect()
            }
        }
    }

    /// Takes in what a host claims now (nothing once it is deleted).
    fn claim(&mut self, h: &Value, present: bool) -> Vec<MachineRow> {
        let claims = match present {
            true => hosts_by_byomachine(std::slice::from_ref(h))
                .into_iter()
                .collect(),
            false => vec![],
        };
        self.set_claims(&key_of(h), claims)
    }

    /// Replaces the claims of host `host` (`namespace/name`) with `claims` (ByoMachine, host
    /// name), and returns the rows whose host that changed.
    fn set_claims(&mut self, host: &str, claims: Vec<(String, String)>) -> Vec<MachineRow> {
        let name = host.split_once('/').map_or(host, |(_, n)| n);
        let old = self.claims.remove(host).unwrap_or_default();
        for bm in &old {
            if self.hosts.get(bm).is_some_and(|h| h == name) {
                self.hosts.remove(bm);
            }
        }
        let mut touched: BTreeSet<String> = old.into_iter().collect();
        let mut now_claimed = Vec::with_capacity(claims.len());
        for (bm, h) in claims {
            self.hosts.insert(bm.clone(), h);
            touched.insert(bm.clone());
            now_claimed.push(bm);
        }
        if !now_claimed.is_empty() {
            self.claims.insert(host.to_string(), now_claimed);
        }
        let mut out = Vec::new();
        for bm in &touched {
            let Some(m) = self.by_byomachine.get(bm) else {
                continue;
            };
            let Some((row, _)) = self.shown.get_mut(m) else {
                continue;
            };
            // A providerID names the host of this row; the claim does not count.
            if row
                .provider_id
                .as_deref()
                .and_then(host_from_provider_id)
                .is_some()
            {
                continue;
            }
            let host = self.hosts.get(bm).cloned();
            if row.host != host {
                row.host = host;
                out.push(row.clone());
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use watcher::Event as E;

    fn now() -> jiff::Timestamp {
        "2026-12-07T09:10:00Z".parse().unwrap()
    }

    /// A worker Machine of cluster c1 in `ns`, on ByoMachine `bm`, with `provider_id`.
    fn machine(name: &str, bm: &str, provider_id: Option<&str>) -> Value {
        json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
            "metadata": {"name": name, "namespace": "ns", "creationTimestamp": "2026-12-07T09:00:00Z",
                         "labels": {"cluster.x-k8s.io/cluster-name": "c1"}},
            "spec": {"clusterName": "c1", "version": "v1.35.4", "providerID": provider_id,
                     "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                                           "kind": "ByoMachine", "name": bm}},
            "status": {"phase": "Provisioning"},
        })
    }

    /// ByoHost `name` as BYOH v0.5.0's attachByoHost leaves it once it claimed ByoMachine
    /// `bm` of `ns` (label and machineRef in one patch); unclaimed without `bm`.
    fn host(name: &str, bm: Option<&str>) -> Value {
        let mut h = json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "ByoHost",
            "metadata": {"name": name, "namespace": "pool"}, "status": {},
        });
        if let Some(bm) = bm {
            h["metadata"]["labels"] =
                json!({"byoh.infrastructure.cluster.x-k8s.io/byomachine-name": format!("ns.{bm}")});
            h["status"]["machineRef"] = json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                "kind": "ByoMachine", "namespace": "ns", "name": bm});
        }
        h
    }

    /// The watch's state after the listing of `machines` and `hosts`, as `run` starts it.
    fn listed(machines: &[Value], hosts: &[Value]) -> WatchState {
        let map = hosts_by_byomachine(hosts);
        let rows = machines
            .iter()
            .map(|m| {
                let (row, bm) = row_before_hosts(m, now());
                (with_host((row, bm.clone()), &map), bm)
            })
            .collect();
        WatchState::new(rows, hosts)
    }

    fn names(rows: &[MachineRow]) -> Vec<(&str, Option<&str>, bool)> {
        rows.iter()
            .map(|r| (r.name.as_str(), r.host.as_deref(), r.deleted))
            .collect()
    }

    /// The Machines' watch starts after the listing printed, and lists again after it was
    /// away: a Machine printed but not in that list was deleted meanwhile (kube-runtime's
    /// `Event::InitDone`), as `hosts retire` deletes one right after a watch starts.
    #[test]
    fn a_machine_deleted_before_the_watch_listed_is_printed_deleted() {
        let (a, b) = (machine("a", "bm-a", None), machine("b", "bm-b", None));
        let mut w = listed(
            &[a.clone(), b],
            &[host("h1", Some("bm-a")), host("h2", Some("bm-b"))],
        );
        assert!(w.on_machine(E::Init, now()).is_empty());
        assert!(
            w.on_machine(E::InitApply(a.clone()), now()).is_empty(),
            "a is as listed"
        );
        let gone = w.on_machine(E::InitDone, now());
        assert_eq!(names(&gone), [("b", Some("h2"), true)]);
        // Printed once: a later list without it says nothing more.
        w.on_machine(E::Init, now());
        w.on_machine(E::InitApply(a), now());
        assert!(w.on_machine(E::InitDone, now()).is_empty());
        // A deletion seen as it happens is printed the same way, once.
        let a = machine("a", "bm-a", None);
        assert_eq!(
            names(&w.on_machine(E::Delete(a.clone()), now())),
            [("a", Some("h1"), true)]
        );
        assert!(w.on_machine(E::Delete(a), now()).is_empty());
    }

    /// BYOH claims a host for a new Machine seconds before the node it bootstraps gets the
    /// providerID: the Machine's row names the host from the claim when the claim is made,
    /// though the Machine itself did not change, and loses it when the claim goes.
    #[test]
    fn a_new_machine_names_the_host_claimed_for_it() {
        let mut w = listed(&[], &[host("spare", None)]);
        let new = machine("new", "bm-new", None);
        assert_eq!(
            names(&w.on_machine(E::Apply(new.clone()), now())),
            [("new", None, false)]
        );
        let claimed = host("spare", Some("bm-new"));
        assert_eq!(
            names(&w.on_host(E::Apply(claimed.clone()))),
            [("new", Some("spare"), false)]
        );
        assert!(w.on_host(E::Apply(claimed)).is_empty(), "nothing changed");
        assert!(
            w.on_machine(E::Apply(new), now()).is_empty(),
            "the row says this already"
        );
        // Released: the row has no host again.
        assert_eq!(
            names(&w.on_host(E::Apply(host("spare", None)))),
            [("new", None, false)]
        );
        // A host deleted while the hosts' watch was away lets go of its claim too.
        w.on_host(E::Apply(host("spare", Some("bm-new"))));
        w.on_host(E::Init);
        assert_eq!(names(&w.on_host(E::InitDone)), [("new", None, false)]);
    }

    /// A providerID names the host for good: claims do not override it.
    #[test]
    fn a_provider_id_outranks_the_claims() {
        let on = machine("on", "bm-on", Some("byoh://h1/abc123"));
        let mut w = listed(&[on], &[]);
        assert!(w.on_host(E::Apply(host("h2", Some("bm-on")))).is_empty());
        assert!(w.on_host(E::Delete(host("h2", Some("bm-on")))).is_empty());
    }
}
