//! `kubectl capi hosts describe HOST`: one host with its chain host → ByoMachine → Machine →
//! Node → Cluster, conditions, network, labels and recent events, as `kubectl describe` lays
//! an object out.

use cli::Conn;
use kclient::discovery::ServerApis;
use kclient::error::Error;
use kclient::render::{Human, Printer, Render, Table, object_name};
use kcore::condition::Condition;
use kcore::json;
use kcore::plan::hosts::{Diagnosis, HostRow, HostState, Interface, Inventory, PendingMachine};
use serde::Serialize;
use serde_json::Value;

use super::DescribeArgs;
use crate::common::{cells, host_pool, time};

/// One event about the host.
#[derive(Serialize, Debug, Clone)]
#[serde(rename_all = "camelCase")]
pub struct EventRow {
    #[serde(rename = "type")]
    pub type_: String,
    pub reason: String,
    pub message: String,
    pub source: String,
    pub count: i64,
    pub last_seen: Option<String>,
}

/// The chain host → ByoMachine → Machine → Node → Cluster.
#[derive(Serialize, Debug, Clone, Default)]
#[serde(rename_all = "camelCase")]
pub struct Chain {
    /// `namespace/name`, and whether it still exists.
    pub byo_machine: Option<String>,
    pub byo_machine_exists: bool,
    pub byo_machine_ready: Option<bool>,
    pub machine: Option<String>,
    pub machine_phase: Option<String>,
    pub node: Option<String>,
    pub cluster: Option<String>,
    pub cluster_exists: bool,
    pub provider_id: Option<String>,
}

/// `hosts describe`.
#[derive(Serialize, Debug)]
#[serde(rename_all = "camelCase")]
pub struct HostDescription {
    pub name: String,
    pub namespace: String,
    pub state: HostState,
    pub diagnosis: Diagnosis,
    pub host: HostRow,
    pub chain: Chain,
    pub conditions: Vec<Condition>,
    pub interfaces: Vec<Interface>,
    pub labels: std::collections::BTreeMap<String, String>,
    pub annotations: std::collections::BTreeMap<String, String>,
    pub events: Vec<EventRow>,
    /// ByoMachines of the host's cluster waiting for a host, when the host is free.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pending_machines: Vec<PendingMachine>,
}

fn section(out: &mut String, title: &str) {
    out.push_str(title);
    out.push_str(":\n");
}

fn kv(out: &mut String, key: &str, value: &str) {
    out.push_str(&format!("  {:<14}{value}\n", format!("{key}:")));
}

/// The ByoMachine line: its name, and whether it is ready or gone.
fn byo_machine_text(c: &Chain) -> String {
    match (&c.byo_machine, c.byo_machine_exists) {
        (Some(b), true) => format!(
            "{b}{}",
            match c.byo_machine_ready {
                Some(true) => " (ready)",
                Some(false) => " (not ready)",
                None => "",
            }
        ),
        (Some(b), false) => format!("{b} (gone)"),
        (None, _) => "<none>".into(),
    }
}

fn chain_section(o: &mut String, c: &Chain) {
    section(o, "Chain");
    kv(o, "ByoMachine", &byo_machine_text(c));
    let m = match (&c.machine, &c.machine_phase) {
        (Some(m), Some(p)) => format!("{m} ({p})"),
        (Some(m), None) => m.clone(),
        _ => "<none>".into(),
    };
    kv(o, "Machine", &m);
    kv(o, "Node", &cells::or_none(c.node.as_deref()));
    let cl = match (&c.cluster, c.cluster_exists) {
        (Some(n), true) => n.clone(),
        (Some(n), false) => format!("{n} (not found)"),
        (None, _) => "<none>".into(),
    };
    kv(o, "Cluster", &cl);
    kv(o, "Provider ID", &cells::or_none(c.provider_id.as_deref()));
}

/// A section's table, indented, or `  <none>` when it has no rows.
fn table_section(o: &mut String, title: &str, t: Option<Table>) {
    section(o, title);
    match t {
        Some(t) => indent(o, &t.render(false, true, false)),
        None => o.push_str("  <none>\n"),
    }
}

fn conditions_table(conditions: &[Condition]) -> Option<Table> {
    let headers = ["TYPE", "STATUS", "SEVERITY", "REASON", "MESSAGE"];
    Table::of(&headers, conditions, |c| {
        [
            c.type_.clone(),
            c.status.clone(),
            c.severity.clone().unwrap_or_default(),
            c.reason.clone().unwrap_or_default(),
            c.message.clone().unwrap_or_default(),
        ]
    })
}

fn interfaces_table(interfaces: &[Interface]) -> Option<Table> {
    let headers = ["INTERFACE", "DEFAULT", "CONNECTED", "MAC", "ADDRESSES"];
    Table::of(&headers, interfaces, |i| {
        let addresses = if i.addresses.is_empty() {
            "<none>".to_string()
        } else {
            i.addresses.join(",")
        };
        [
            i.name.clone(),
            if i.is_default { "yes" } else { "" }.to_string(),
            if i.connected { "yes" } else { "no" }.to_string(),
            i.mac.clone().unwrap_or_default(),
            addresses,
        ]
    })
}

fn events_table(events: &[EventRow]) -> Option<Table> {
    let now = time::now();
    Table::of(&["TYPE", "REASON", "AGE", "FROM", "MESSAGE"], events, |e| {
        let age = e
            .last_seen
            .as_deref()
            .and_then(|t| kcore::text::seconds_since(t, now));
        let age = match (age, e.count) {
            (a, n) if n > 1 => format!("{} (x{n})", kcore::text::age_cell(a)),
            (a, _) => kcore::text::age_cell(a),
        };
        [
            e.type_.clone(),
            e.reason.clone(),
            age,
            e.source.clone(),
            e.message.clone(),
        ]
    })
}

impl HostDescription {
    /// The lines above the sections: name, state, diagnosis and what the host runs.
    fn header(&self, o: &mut String) {
        let h = &self.host;
        o.push_str(&format!("Name:         {}\n", self.name));
        o.push_str(&format!("Namespace:    {}\n", self.namespace));
        o.push_str(&format!("State:        {}\n", self.state));
        o.push_str(&format!("Diagnosis:    {}\n", self.diagnosis.summary));
        for hint in &self.diagnosis.hints {
            o.push_str(&format!("              - {hint}\n"));
        }
        o.push_str(&format!(
            "Host:         {} {} ({}), Kubernetes {}\n",
            cells::or_none(h.os.as_deref()),
            cells::or_none(h.arch.as_deref()),
            cells::or_none(h.os_image.as_deref()),
            cells::or_none(h.version.as_deref())
        ));
        o.push_str(&format!(
            "Age:          {}\n",
            kcore::text::age_cell(h.age_seconds)
        ));
    }
}

impl Render for HostDescription {
    fn human(&self) -> Human {
        let mut o = String::new();
        self.header(&mut o);
        chain_section(&mut o, &self.chain);
        table_section(&mut o, "Conditions", conditions_table(&self.conditions));
        table_section(&mut o, "Network", interfaces_table(&self.interfaces));
        section(&mut o, "Labels");
        map_lines(&mut o, &self.labels);
        section(&mut o, "Annotations");
        map_lines(&mut o, &self.annotations);
        if !self.pending_machines.is_empty() {
            section(&mut o, "Machines waiting for a host");
            for p in &self.pending_machines {
                o.push_str(&format!("  {}: {}\n", p.byo_machine, p.message));
            }
        }
        table_section(&mut o, "Events", events_table(&self.events));
        Human::Text(o)
    }
    fn names(&self) -> Option<Vec<String>> {
        Some(vec![object_name(
            "ByoHost",
            kcore::groups::INFRASTRUCTURE_GROUP,
            &self.name,
        )])
    }
}

fn indent(out: &mut String, text: &str) {
    for l in text.lines() {
        out.push_str("  ");
        out.push_str(l);
        out.push('\n');
    }
}

fn map_lines(out: &mut String, m: &std::collections::BTreeMap<String, String>) {
    if m.is_empty() {
        out.push_str("  <none>\n");
    }
    for (k, v) in m {
        out.push_str(&format!("  {k}={v}\n"));
    }
}

fn string_map(v: Option<&Value>) -> std::collections::BTreeMap<String, String> {
    v.and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| {
                    let s = match v {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    (k.clone(), s)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The one ByoHost named `name`: not found (with suggestions), or ambiguous across namespaces.
fn find_host<'a>(
    hosts: &'a [Value],
    name: &str,
    namespace: Option<&String>,
) -> Result<&'a Value, Error> {
    let matching: Vec<&Value> = hosts.iter().filter(|h| json::name(h) == name).collect();
    match matching.as_slice() {
        [one] => Ok(*one),
        [] => {
            let names = hosts.iter().map(json::name);
            Err(Error::NotFound {
                kind: "ByoHost".into(),
                name: name.to_string(),
                namespace: namespace.cloned(),
                suggestions: kcore::text::closest_names(name, names),
            })
        }
        many => {
            let nss: Vec<&str> = many.iter().map(|h| json::namespace(h)).collect();
            Err(Error::Usage {
                message: format!(
                    "ByoHost \"{}\" exists in several namespaces: {}",
                    name,
                    nss.join(", ")
                ),
                hint: Some(format!("pick one with -n, e.g. -n {}", nss[0])),
            })
        }
    }
}

/// The chain host → ByoMachine → Machine → Node → Cluster, as the inventory joined it.
fn chain(inv: &Inventory, host: &Value, row: &HostRow) -> Chain {
    let bm = inv.byomachine_of(host);
    let machine = inv.machine_of(host);
    let cluster = inv.cluster_of(host);
    Chain {
        byo_machine: row.byo_machine.clone(),
        byo_machine_exists: bm.is_some(),
        byo_machine_ready: bm.and_then(|b| json::bool_at(b, &["status", "ready"])),
        machine: row.machine.clone(),
        machine_phase: machine
            .and_then(|m| json::str_at(m, &["status", "phase"]).map(str::to_string)),
        node: row.node.clone(),
        cluster: row.cluster.clone(),
        cluster_exists: cluster.is_some(),
        provider_id: row.provider_id.clone(),
    }
}

/// Everything `hosts describe` shows about `host` but its events (left empty).
fn description(lists: &host_pool::HostLists, host: &Value) -> HostDescription {
    let inv = lists.inventory(Some(time::now()));
    let row = inv.row(host);
    let pending_machines = if row.state == HostState::Available {
        inv.pending_machines(&lists.byomachines)
    } else {
        Vec::new()
    };
    HostDescription {
        name: row.name.clone(),
        namespace: row.namespace.clone(),
        state: row.state,
        diagnosis: inv.diagnose(host),
        chain: chain(&inv, host, &row),
        conditions: kcore::condition::conditions_at(host, &["status", "conditions"]),
        interfaces: kcore::plan::hosts::interfaces(host),
        labels: row.labels.clone(),
        annotations: string_map(json::at(host, &["metadata", "annotations"])),
        events: Vec::new(),
        pending_machines,
        host: row,
    }
}

pub(super) async fn run(args: &DescribeArgs) -> Result<(), Error> {
    let printer = Printer::new(&args.output);
    let conn = args.kube.connect().await?;
    let namespace =
        (conn.namespace_explicit && !conn.all_namespaces).then(|| conn.namespace.clone());
    let apis = ServerApis::discover(&conn).await?;
    let lists = host_pool::host_lists(&conn, &apis, namespace.as_deref()).await?;
    let host = find_host(&lists.hosts, &args.host, namespace.as_ref())?;
    let mut desc = description(&lists, host);
    desc.events = host_events(&conn, json::namespace(host), &args.host).await;
    printer.print(&desc)
}

/// Recent events about the host (newest last). Events are best effort: a user who may read
/// hosts but not events still gets the rest.
async fn host_events(conn: &Conn, namespace: &str, host: &str) -> Vec<EventRow> {
    let ar = kube::discovery::ApiResource {
        group: String::new(),
        version: "v1".into(),
        api_version: "v1".into(),
        kind: "Event".into(),
        plural: "events".into(),
    };
    let lp = kube::api::ListParams::default().fields(&format!(
        "involvedObject.kind=ByoHost,involvedObject.name={host}"
    ));
    let items = match kclient::api::list_json(conn, &ar, Some(namespace), &lp).await {
        Ok(items) => items,
        Err(e) => {
            tracing::info!("events of ByoHost {host}: {e}");
            return Vec::new();
        }
    };
    let mut events: Vec<EventRow> = items
        .iter()
        .map(|e| {
            let s = |p: &[&str]| json::str_at(e, p).map(str::to_string);
            EventRow {
                type_: s(&["type"]).unwrap_or_default(),
                reason: s(&["reason"]).unwrap_or_default(),
                message: s(&["message"]).unwrap_or_default(),
                source: s(&["source", "component"])
                    .or_else(|| s(&["reportingComponent"]))
                    .unwrap_or_default(),
                count: json::i64_at(e, &["count"]).unwrap_or(1),
                last_seen: s(&["lastTimestamp"])
                    .or_else(|| s(&["eventTime"]))
                    .or_else(|| s(&["metadata", "creationTimestamp"])),
            }
        })
        .collect();
    events.sort_by(|a, b| a.last_seen.cmp(&b.last_seen));
    let n = events.len();
    events.split_off(n.saturating_sub(20))
}
