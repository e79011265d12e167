//! `kubectl capi logs TARGET`: what a Cluster, Machine or ByoHost relates to, and the Events and
//! controller log lines about those objects, merged in time order. Pure: the verb reads the
//! objects, the Events and the controllers' `pods/log`, and hands them here.
//!
//! - [`parse_target`] and [`pick_kind`]: the argument as kubectl reads a typed one
//!   (`cluster/NAME`, `machine/NAME`, `host/NAME`, or a bare NAME tried as each kind);
//! - [`related_to_cluster`], [`related_to_machine`], [`related_to_host`]: the objects whose Events
//!   are shown and the names a log line is kept for ([`Related`]);
//! - [`Matcher`]: whether a line names one of them, as a word;
//! - [`split_timestamp`]: a line of `kubectl logs --timestamps` (`pods/log?timestamps=true`);
//! - [`event_entry`], [`log_entry`], [`in_time_order`], [`Newest`], [`Cursor`], [`SeenEvents`]: the
//!   entries, bounded, in time order, and what `--follow` has already shown. Whose logs are read
//!   is the set `kubectl capi init` installs ([`crate::init::set::controllers`]).

use std::collections::{BTreeMap, BTreeSet, HashSet, VecDeque};
use std::time::Duration;

use jiff::Timestamp;
use serde::Serialize;
use serde_json::Value;

use crate::error::{Error, usage};
use crate::fields;
use crate::json::{self, str_at};
use crate::plan::hosts::{BYOMACHINE_NAME_LABEL, host_from_provider_id};

#[cfg(test)]
mod tests;

/// `--since` when not given.
pub const DEFAULT_SINCE: Duration = Duration::from_secs(3600);
/// The longest `--since`: a week (kubelets rotate container logs long before on a busy
/// controller, and the API server keeps Events an hour by default).
pub const MAX_SINCE: Duration = Duration::from_secs(7 * 24 * 3600);
/// The lines read of each container: the newest, within `--since` (`tailLines`).
pub const READ_LINES: i64 = 20_000;
/// The bytes read of each container at most (`limitBytes`).
pub const READ_BYTES: i64 = 32 * 1024 * 1024;
/// The matching lines kept of each controller: the newest.
pub const MAX_LINES_PER_CONTROLLER: usize = 1_000;
/// The Events kept: the newest.
pub const MAX_EVENTS: usize = 1_000;
/// The longest message shown; a longer one is cut there (on a character boundary) and marked.
pub const MAX_MESSAGE_BYTES: usize = 4_096;

/// `--since`, checked: at least a second, at most [`MAX_SINCE`].
pub fn check_since(d: Duration) -> Result<Duration, Error> {
    if d < Duration::from_secs(1) {
        return Err(usage(
            "--since must be at least 1s",
            "give a duration such as 10m, 1h or 24h",
        ));
    }
    if d > MAX_SINCE {
        return Err(usage(
            format!(
                "--since {} is longer than {}",
                crate::text::human_duration(d),
                crate::text::human_duration(MAX_SINCE)
            ),
            "controllers' logs rotate and Events expire long before; give at most 168h",
        ));
    }
    Ok(d)
}

// ---------------------------------------------------------------- the target

/// What `logs` is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum TargetKind {
    Cluster,
    Machine,
    Host,
}

impl TargetKind {
    /// The order a bare NAME is tried in.
    pub const ALL: [TargetKind; 3] = [TargetKind::Cluster, TargetKind::Machine, TargetKind::Host];

    /// The API kind.
    pub fn kind(self) -> &'static str {
        match self {
            TargetKind::Cluster => "Cluster",
            TargetKind::Machine => "Machine",
            TargetKind::Host => "ByoHost",
        }
    }

    /// The word of `word/NAME`.
    pub fn word(self) -> &'static str {
        match self {
            TargetKind::Cluster => "cluster",
            TargetKind::Machine => "machine",
            TargetKind::Host => "host",
        }
    }

    /// The kind a `TYPE` of `TYPE/NAME` names: the word, kind or plural, with or without the
    /// API group, in any case (as kubectl reads `machines.cluster.x-k8s.io/NAME`).
    fn of_type(t: &str) -> Option<TargetKind> {
        let t = t.to_ascii_lowercase();
        let (name, group) = t.split_once('.').unwrap_or((&t, ""));
        let (kind, kind_group) = match name {
            "cluster" | "clusters" => (TargetKind::Cluster, crate::groups::CAPI_GROUP),
            "machine" | "machines" | "ma" => (TargetKind::Machine, crate::groups::CAPI_GROUP),
            "host" | "hosts" | "byohost" | "byohosts" => {
                (TargetKind::Host, crate::groups::INFRASTRUCTURE_GROUP)
            }
            _ => return None,
        };
        (group.is_empty() || group == kind_group).then_some(kind)
    }
}

/// The argument: a kind when it was typed, and the name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub kind: Option<TargetKind>,
    pub name: String,
}

/// Reads `TYPE/NAME` or a bare `NAME`, the name checked as an object name.
pub fn parse_target(arg: &str) -> Result<Target, Error> {
    let (kind, name) = match arg.split_once('/') {
        Some((t, name)) => match TargetKind::of_type(t) {
            Some(k) => (Some(k), name),
            None => {
                return Err(usage(
                    format!("{t:?} is not a kind logs reads"),
                    "give cluster/NAME, machine/NAME, host/NAME or a bare NAME",
                ));
            }
        },
        None => (None, arg),
    };
    let what = kind.map_or("Cluster, Machine or ByoHost", TargetKind::kind);
    crate::names::check_object_name(what, name)?;
    Ok(Target {
        kind,
        name: name.to_string(),
    })
}

/// The kind a bare `name` is, from the kinds found with that name in `namespace` (tried in
/// [`TargetKind::ALL`]'s order): one is it, none is not found, more is ambiguous.
pub fn pick_kind(name: &str, namespace: &str, found: &[TargetKind]) -> Result<TargetKind, Error> {
    let mut found: Vec<TargetKind> = found.to_vec();
    found.sort();
    found.dedup();
    match found.as_slice() {
        [one] => Ok(*one),
        [] => Err(Error::Other {
            message: format!(
                "no Cluster, Machine or ByoHost \"{name}\" in namespace {namespace}"
            ),
            hint: Some(
                "kubectl capi list, kubectl capi machines and kubectl capi hosts show the names; -n picks the namespace"
                    .into(),
            ),
        }),
        many => {
            let kinds: Vec<&str> = many.iter().map(|k| k.kind()).collect();
            let forms: Vec<String> = many.iter().map(|k| format!("{}/{name}", k.word())).collect();
            Err(usage(
                format!(
                    "\"{name}\" is a {} in namespace {namespace}",
                    kinds.join(" and a ")
                ),
                format!("say which: {}", forms.join(" or ")),
            ))
        }
    }
}

// ---------------------------------------------------------------- what relates to it

/// One object: its kind, namespace and name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct ObjectKey {
    pub kind: String,
    pub namespace: String,
    pub name: String,
}

/// What the target relates to: the objects whose Events are shown, and the Node names log lines
/// are matched on besides the objects' names.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Related {
    pub objects: BTreeSet<ObjectKey>,
    pub nodes: BTreeSet<String>,
}

impl Related {
    fn add(&mut self, kind: &str, namespace: &str, name: &str) {
        if !kind.is_empty() && !name.is_empty() {
            self.objects.insert(ObjectKey {
                kind: kind.to_string(),
                namespace: namespace.to_string(),
                name: name.to_string(),
            });
        }
    }

    fn add_object(&mut self, kind: &str, obj: &Value) {
        self.add(kind, json::namespace(obj), json::name(obj));
    }

    fn add_node(&mut self, name: Option<&str>) {
        if let Some(n) = name.filter(|n| !n.is_empty()) {
            self.nodes.insert(n.to_string());
        }
    }

    /// Every name a line is kept for.
    pub fn names(&self) -> BTreeSet<&str> {
        let objects = self.objects.iter().map(|o| o.name.as_str());
        objects
            .chain(self.nodes.iter().map(String::as_str))
            .collect()
    }

    /// The namespaces of the objects (where their Events are).
    pub fn namespaces(&self) -> BTreeSet<&str> {
        self.objects.iter().map(|o| o.namespace.as_str()).collect()
    }

    /// Whether `kind` `namespace/name` is one of the objects.
    pub fn has(&self, kind: &str, namespace: &str, name: &str) -> bool {
        self.objects.contains(&ObjectKey {
            kind: kind.to_string(),
            namespace: namespace.to_string(),
            name: name.to_string(),
        })
    }

    /// A Machine, its infrastructure machine and bootstrap config, its Node, and the ByoHost
    /// behind it (its providerID, else the host that claimed its ByoMachine).
    fn add_machine(&mut self, m: &Value, hosts: &[Value]) {
        let ns = json::namespace(m);
        self.add_object("Machine", m);
        let infra = fields::machine_infrastructure_ref(m);
        for r in infra.iter().chain(fields::machine_bootstrap_ref(m).iter()) {
            self.add(&r.kind, r.namespace.as_deref().unwrap_or(ns), &r.name);
        }
        self.add_node(str_at(m, &["status", "nodeRef", "name"]));
        let from_id = str_at(m, &["spec", "providerID"]).and_then(host_from_provider_id);
        let byomachine = infra.filter(|r| r.kind == "ByoMachine").map(|r| r.name);
        for h in hosts {
            let named = from_id == Some(json::name(h));
            let claimed = byomachine
                .as_deref()
                .is_some_and(|bm| claim_of(h) == Some((ns, bm)));
            if named || claimed {
                self.add_object("ByoHost", h);
            }
        }
        if let Some(h) = from_id
            && !hosts.iter().any(|x| json::name(x) == h)
        {
            self.add_node(Some(h));
        }
    }
}

/// The ByoMachine that claimed a host: `status.machineRef`, else the byomachine-name label
/// (`<namespace>.<name>`, BYOH v0.5.0's `attachByoHost`).
fn claim_of(host: &Value) -> Option<(&str, &str)> {
    if let Some(name) = str_at(host, &["status", "machineRef", "name"]) {
        let ns = str_at(host, &["status", "machineRef", "namespace"])
            .unwrap_or_else(|| json::namespace(host));
        return Some((ns, name));
    }
    json::label(host, BYOMACHINE_NAME_LABEL).and_then(|l| l.split_once('.'))
}

/// The objects of a cluster `logs` reads, as the API server returns them.
#[derive(Clone, Copy, Debug, Default)]
pub struct ClusterLists<'a> {
    /// The objects labelled with the cluster's name, each list with its kind (Machines,
    /// MachineSets, MachineDeployments, ByoMachines, KubeadmConfigs, …): a LIST's items need not
    /// carry their kind.
    pub labelled: &'a [(&'a str, &'a [Value])],
    /// The ByoHosts (of every namespace the reader may list).
    pub hosts: &'a [Value],
}

/// A Cluster: itself, its infrastructure cluster and control plane (and, for a
/// KamajiControlPlane, Kamaji's TenantControlPlane of the same name), everything labelled with
/// its name, each Machine's parts, Node and host, and the hosts its ByoMachines claimed.
pub fn related_to_cluster(cluster: &Value, parts: ClusterLists<'_>) -> Related {
    let mut r = Related::default();
    let ns = json::namespace(cluster);
    r.add_object("Cluster", cluster);
    let refs = [
        fields::cluster_infrastructure_ref(cluster),
        fields::cluster_control_plane_ref(cluster),
    ];
    for x in refs.iter().flatten() {
        r.add(&x.kind, x.namespace.as_deref().unwrap_or(ns), &x.name);
        if x.kind == "KamajiControlPlane" {
            r.add(
                "TenantControlPlane",
                x.namespace.as_deref().unwrap_or(ns),
                &x.name,
            );
        }
    }
    for (kind, items) in parts.labelled {
        for o in items.iter() {
            if *kind == "Machine" {
                r.add_machine(o, parts.hosts);
            } else {
                r.add_object(kind, o);
            }
        }
    }
    for h in parts.hosts {
        if claim_of(h).is_some_and(|(bns, bm)| r.has("ByoMachine", bns, bm)) {
            r.add_object("ByoHost", h);
        }
    }
    r
}

/// A Machine: itself, its ByoMachine (or other infrastructure machine), bootstrap config, Node
/// and BYOH host.
pub fn related_to_machine(machine: &Value, hosts: &[Value]) -> Related {
    let mut r = Related::default();
    r.add_machine(machine, hosts);
    r
}

/// A ByoHost: itself, the ByoMachine that claimed it, and that ByoMachine's Machine (its owner,
/// else the Machine among `machines` whose infrastructure reference names it).
pub fn related_to_host(host: &Value, byomachines: &[Value], machines: &[Value]) -> Related {
    let mut r = Related::default();
    r.add_object("ByoHost", host);
    r.add_node(Some(json::name(host)));
    let Some((ns, bm)) = claim_of(host) else {
        return r;
    };
    r.add("ByoMachine", ns, bm);
    let owner = byomachines
        .iter()
        .find(|b| json::namespace(b) == ns && json::name(b) == bm)
        .and_then(|b| json::owner_of_kind(b, "Machine"));
    let machine = match owner {
        Some(m) => machines
            .iter()
            .find(|x| json::namespace(x) == ns && json::name(x) == m)
            .cloned()
            .or_else(|| Some(serde_json::json!({"metadata": {"name": m, "namespace": ns}}))),
        None => machines
            .iter()
            .find(|m| {
                json::namespace(m) == ns
                    && fields::machine_infrastructure_ref(m)
                        .is_some_and(|x| x.kind == "ByoMachine" && x.name == bm)
            })
            .cloned(),
    };
    if let Some(m) = machine {
        r.add_object("Machine", &m);
        if let Some(b) = fields::machine_bootstrap_ref(&m) {
            r.add(&b.kind, b.namespace.as_deref().unwrap_or(ns), &b.name);
        }
        r.add_node(str_at(&m, &["status", "nodeRef", "name"]));
    }
    r
}

// ---------------------------------------------------------------- lines

/// Whether a line names one of the related objects: a name counts as a word, so `demo` is not
/// found in `demo-md-0` (whose Machine is found by its own name) nor in `host-1.example.com`.
/// A word is a run of letters, digits, `-`, `_` and `.` (the characters of object names), a
/// trailing `.` (a sentence's end) dropped.
#[derive(Clone, Debug, Default)]
pub struct Matcher {
    names: HashSet<String>,
}

impl Matcher {
    pub fn new<'a>(names: impl IntoIterator<Item = &'a str>) -> Matcher {
        Matcher {
            names: names
                .into_iter()
                .filter(|n| !n.is_empty())
                .map(str::to_string)
                .collect(),
        }
    }

    pub fn matches(&self, line: &str) -> bool {
        let word = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
        line.split(|c: char| !word(c))
            .filter(|w| !w.is_empty())
            .any(|w| self.names.contains(w) || self.names.contains(w.trim_end_matches('.')))
    }
}

/// A line of `pods/log?timestamps=true`: the time the kubelet put first (RFC 3339, nine
/// fractional digits: `2026-01-02T10:00:00.123456789Z`; any RFC 3339 time is read) and the line.
pub fn split_timestamp(line: &str) -> Option<(Timestamp, &str)> {
    let (time, rest) = line.split_once(' ').unwrap_or((line, ""));
    let at: Timestamp = time.parse().ok()?;
    Some((at, rest.strip_suffix('\r').unwrap_or(rest)))
}

/// `text` cut at [`MAX_MESSAGE_BYTES`] (on a character boundary), and whether it was.
pub fn bounded(text: &str) -> (String, bool) {
    if text.len() <= MAX_MESSAGE_BYTES {
        return (text.to_string(), false);
    }
    let mut end = MAX_MESSAGE_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    (text[..end].to_string(), true)
}

// ---------------------------------------------------------------- entries

/// Where an entry comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum EntryKind {
    Event,
    Log,
}

/// One line of `logs`: an Event about a related object, or a controller's log line naming one.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    /// When: RFC 3339 in UTC with nine fractional digits.
    pub time: String,
    #[serde(skip)]
    pub at: Timestamp,
    /// `event`, or the controller: its component's name in `kubectl capi init`
    /// (`infrastructure-byoh`, `cluster-api`, …).
    pub source: String,
    pub kind: EntryKind,
    /// Events: `Kind/name` of the object, its namespace, `Normal` or `Warning`, the reason, how
    /// many times it happened.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub object: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub event_type: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count: Option<i64>,
    /// Log lines: the pod (`namespace/name`) and container.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
    pub message: String,
    /// The message was longer than [`MAX_MESSAGE_BYTES`] and is cut.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
}

/// An entry's time as it is written.
pub fn time_text(at: Timestamp) -> String {
    format!("{at:.9}")
}

/// When an Event last happened: `series.lastObservedTime`, `lastTimestamp`, `eventTime`,
/// `firstTimestamp`, else its creation.
pub fn event_time(ev: &Value) -> Option<Timestamp> {
    [
        &["series", "lastObservedTime"][..],
        &["lastTimestamp"],
        &["eventTime"],
        &["firstTimestamp"],
        &["metadata", "creationTimestamp"],
    ]
    .iter()
    .find_map(|p| str_at(ev, p).and_then(|t| t.parse().ok()))
}

/// The entry of a core/v1 Event whose `involvedObject` is one of `related`'s objects and that
/// happened at or after `since`.
pub fn event_entry(ev: &Value, related: &Related, since: Timestamp) -> Option<Entry> {
    let kind = str_at(ev, &["involvedObject", "kind"])?;
    let name = str_at(ev, &["involvedObject", "name"])?;
    let ns = str_at(ev, &["involvedObject", "namespace"]).unwrap_or_else(|| json::namespace(ev));
    if !related.has(kind, ns, name) {
        return None;
    }
    let at = event_time(ev).filter(|t| *t >= since)?;
    let (message, truncated) = bounded(str_at(ev, &["message"]).unwrap_or_default().trim_end());
    Some(Entry {
        time: time_text(at),
        at,
        source: "event".into(),
        kind: EntryKind::Event,
        object: Some(format!("{kind}/{name}")),
        namespace: Some(ns.to_string()),
        event_type: str_at(ev, &["type"]).map(str::to_string),
        reason: str_at(ev, &["reason"]).map(str::to_string),
        count: json::i64_at(ev, &["series", "count"])
            .or_else(|| json::i64_at(ev, &["count"]))
            .filter(|n| *n > 0),
        pod: None,
        container: None,
        message,
        truncated,
    })
}

/// The entry of a controller's log line (its time already split off), if it names a related
/// object.
pub fn log_entry(
    source: &str,
    pod: &str,
    container: &str,
    at: Timestamp,
    line: &str,
    matcher: &Matcher,
) -> Option<Entry> {
    if !matcher.matches(line) {
        return None;
    }
    let (message, truncated) = bounded(line.trim_end());
    Some(Entry {
        time: time_text(at),
        at,
        source: source.to_string(),
        kind: EntryKind::Log,
        object: None,
        namespace: None,
        event_type: None,
        reason: None,
        count: None,
        pod: Some(pod.to_string()),
        container: Some(container.to_string()),
        message,
        truncated,
    })
}

/// Every entry in time order; entries of the same time keep the order they came in (a
/// container's lines stay in its order).
pub fn in_time_order(groups: impl IntoIterator<Item = Vec<Entry>>) -> Vec<Entry> {
    let mut all: Vec<Entry> = groups.into_iter().flatten().collect();
    all.sort_by_key(|e| e.at);
    all
}

/// The newest `cap` entries pushed in time order (older ones dropped and counted).
#[derive(Clone, Debug)]
pub struct Newest {
    cap: usize,
    items: VecDeque<Entry>,
    pub dropped: u64,
}

impl Newest {
    pub fn new(cap: usize) -> Newest {
        Newest {
            cap,
            items: VecDeque::new(),
            dropped: 0,
        }
    }

    pub fn push(&mut self, e: Entry) {
        if self.cap == 0 {
            self.dropped = self.dropped.saturating_add(1);
            return;
        }
        if self.items.len() == self.cap {
            self.items.pop_front();
            self.dropped = self.dropped.saturating_add(1);
        }
        self.items.push_back(e);
    }

    pub fn into_vec(self) -> Vec<Entry> {
        self.items.into()
    }
}

/// What `--follow` has read of one container: the time of its last line and the lines read at
/// that time. The next read asks from a little before it (`sinceTime` has whole seconds), so
/// a line is let through once: after the last time, or at it and not yet read.
#[derive(Clone, Debug, Default)]
pub struct Cursor {
    last: Option<Timestamp>,
    at_last: HashSet<String>,
}

impl Cursor {
    /// Whether a line read now is new (and remembers it).
    pub fn admit(&mut self, at: Timestamp, line: &str) -> bool {
        match self.last {
            Some(l) if at < l => false,
            Some(l) if at == l => self.at_last.insert(line.to_string()),
            _ => {
                self.last = Some(at);
                self.at_last.clear();
                self.at_last.insert(line.to_string());
                true
            }
        }
    }

    /// Whether a line was read yet.
    pub fn has_read(&self) -> bool {
        self.last.is_some()
    }

    /// The `sinceTime` of the next read: a second before the last line (the API rounds it to
    /// whole seconds), else `start`.
    pub fn since(&self, start: Timestamp) -> Timestamp {
        self.last
            .and_then(|l| l.checked_sub(jiff::SignedDuration::from_secs(1)).ok())
            .unwrap_or(start)
    }
}

/// The Events `--follow` has shown, by uid, with their `resourceVersion`: an Event is shown
/// again when it changes (it happened again: its count and time moved).
#[derive(Clone, Debug, Default)]
pub struct SeenEvents(BTreeMap<String, String>);

impl SeenEvents {
    /// Whether `ev` is new or changed since it was last let through (and remembers it).
    pub fn admit(&mut self, ev: &Value) -> bool {
        let uid = str_at(ev, &["metadata", "uid"]).unwrap_or_default();
        let rv = str_at(ev, &["metadata", "resourceVersion"]).unwrap_or_default();
        if uid.is_empty() {
            return true;
        }
        self.0.insert(uid.to_string(), rv.to_string()).as_deref() != Some(rv)
    }
}
