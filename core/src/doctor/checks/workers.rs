//! Machines and BYOH hosts.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{Ctx, Entry, entry, finding, ns_flag};
use crate::doctor::{Check, HostEvent, HostFacts, MachineFacts, Problem, Subject};
use crate::fields;
use crate::json::{self, str_at};
use crate::plan::Severity;
use crate::plan::hosts::HostState;
use crate::version::KubeVersion;

/// How many minors a kubelet may lag its API server (Kubernetes' version skew policy since
/// v1.28).
const MAX_KUBELET_SKEW: u64 = 3;

/// A host's failure Events count towards a loop while the last of them is this recent: the
/// agent's retries come at most 1000 s apart (controller-runtime's back-off cap), and the API
/// server keeps Events an hour by default (`--event-ttl`).
const LOOP_WINDOW_SECONDS: i64 = 3600;

pub(super) const CHECKS: &[Entry] = &[
    entry!(machines_stuck: [MachineStuck] needs [Machines] uses []),
    // Without Clusters and KamajiControlPlanes, a Kamaji cluster's control-plane version is not
    // known: less is found.
    entry!(version_skew: [VersionSkew] needs [Machines] uses [Clusters, KamajiControlPlanes]),
    // Without the ByoMachines every claimed host would read as released. A failed host whose
    // Events show it looping is reported as HostBootstrapLoop instead of HostFailed.
    entry!(hosts: [HostFailed, HostReleasing] needs [ByoHosts, ByoMachines] uses [Machines]),
    entry!(bootstrap_loops: [HostBootstrapLoop] needs [ByoHosts, HostEvents] uses []),
    entry!(unreachable: [HostUnreachable] needs [Machines] uses [ByoHosts]),
];

/// The passing phase a Machine is in, and since when (Unix seconds).
fn transient_since(m: &MachineFacts) -> Option<(&str, Option<i64>)> {
    if m.deleting_unix.is_some() {
        return Some(("Deleting", m.deleting_unix));
    }
    match m.phase.as_deref().unwrap_or("Pending") {
        phase @ ("Pending" | "Provisioning" | "Provisioned") => Some((phase, m.created_unix)),
        "Deleting" => Some(("Deleting", m.deleting_unix)),
        _ => None,
    }
}

fn machines_stuck(c: &Ctx, out: &mut Vec<Problem>) {
    for m in &c.fleet.machines {
        let Some((phase, Some(from))) = transient_since(m) else {
            continue;
        };
        let secs = c.now.saturating_sub(from);
        if !c.stuck(secs) {
            continue;
        }
        let cluster = m.cluster.as_deref().unwrap_or_default();
        let ns = m.namespace.as_str();
        let why = m
            .not_ready
            .as_deref()
            .map(|w| format!(": {}", w.replace('\n', " ")))
            .unwrap_or_default();
        let fix = if m.byoh && phase != "Deleting" {
            format!(
                "kubectl capi hosts --available (a BYOH machine waits for a free matching host; kubectl capi hosts add brings more), then kubectl capi describe {cluster}{}",
                ns_flag(ns)
            )
        } else {
            format!("kubectl capi describe {cluster}{}", ns_flag(ns))
        };
        out.push(finding(
            Severity::Warning,
            Check::MachineStuck,
            machine_subject(m),
            format!("{phase} for {}{why}", crate::text::age(secs)),
            fix,
        ));
    }
}

fn machine_subject(m: &MachineFacts) -> Subject {
    Subject {
        kind: "Machine".into(),
        namespace: m.namespace.clone(),
        name: m.name.clone(),
    }
}

/// The control plane's version of each cluster, `(namespace, cluster)` → version: a
/// KamajiControlPlane's `status.version` (else `spec.version`); for other control planes, the
/// oldest control-plane Machine.
fn control_plane_versions(c: &Ctx) -> BTreeMap<(String, String), KubeVersion> {
    let mut out = BTreeMap::new();
    let kcps: BTreeMap<(&str, &str), &Value> = c
        .fleet
        .kamaji_control_planes
        .iter()
        .map(|k| ((json::namespace(k), json::name(k)), k))
        .collect();
    for cl in &c.fleet.clusters {
        let ns = json::namespace(cl);
        if let Some(r) = fields::cluster_control_plane_ref(cl)
            && r.kind == "KamajiControlPlane"
            && let Some(k) = kcps.get(&(ns, r.name.as_str()))
            && let Some(v) = str_at(k, &["status", "version"])
                .or_else(|| str_at(k, &["spec", "version"]))
                .and_then(|v| KubeVersion::parse_v(v).ok())
        {
            out.insert((ns.to_string(), json::name(cl).to_string()), v);
        }
    }
    for m in c.fleet.machines.iter().filter(|m| m.control_plane) {
        let Some((cluster, v)) = cluster_version(m) else {
            continue;
        };
        let key = (m.namespace.clone(), cluster.to_string());
        match out.get(&key) {
            Some(have) if *have <= v => {}
            _ => {
                out.insert(key, v);
            }
        }
    }
    out
}

/// A Machine's cluster and Kubernetes version, when it names both.
fn cluster_version(m: &MachineFacts) -> Option<(&str, KubeVersion)> {
    let v = KubeVersion::parse_v(m.version.as_deref()?).ok()?;
    Some((m.cluster.as_deref()?, v))
}

fn version_skew(c: &Ctx, out: &mut Vec<Problem>) {
    let cps = control_plane_versions(c);
    for m in c.fleet.machines.iter().filter(|m| !m.control_plane) {
        let ns = m.namespace.as_str();
        let Some((cluster, v)) = cluster_version(m) else {
            continue;
        };
        let Some(cp) = cps.get(&(ns.to_string(), cluster.to_string())) else {
            continue;
        };
        let newer = (v.major, v.minor) > (cp.major, cp.minor);
        let behind = cp.major == v.major && cp.minor.saturating_sub(v.minor) > MAX_KUBELET_SKEW;
        if !newer && !behind && cp.major == v.major {
            continue;
        }
        let cause = if newer {
            format!("runs {v}, newer than its control plane's {cp}")
        } else {
            format!(
                "runs {v}, more than {MAX_KUBELET_SKEW} minors behind its control plane's {cp} (Kubernetes' version skew policy)"
            )
        };
        out.push(finding(
            Severity::Error,
            Check::VersionSkew,
            machine_subject(m),
            cause,
            format!(
                "kubectl capi upgrade {cluster}{} --to {cp} --plan",
                ns_flag(ns)
            ),
        ));
    }
}

fn hosts(c: &Ctx, out: &mut Vec<Problem>) {
    let byo_machines = &c.fleet.byo_machines;
    let loops = loops(c);
    // The cluster of a host whose label is gone: the Machine whose providerID names it.
    let by_host: BTreeMap<&str, &str> = c
        .fleet
        .machines
        .iter()
        .filter_map(|m| Some((m.provider_host.as_deref()?, m.cluster.as_deref()?)))
        .collect();
    for h in &c.fleet.byo_hosts {
        let state = h.state(|ns, name| byo_machines.contains(&(ns.to_string(), name.to_string())));
        let subject = || Subject {
            kind: "ByoHost".into(),
            namespace: h.namespace.clone(),
            name: h.name.clone(),
        };
        let fix = format!(
            "kubectl capi hosts describe {}{}",
            h.name,
            ns_flag(&h.namespace)
        );
        let why = h
            .reason
            .as_deref()
            .map(|r| format!(": {r}"))
            .unwrap_or_default();
        match state {
            HostState::Failed if loops.contains_key(&(h.namespace.as_str(), h.name.as_str())) => {}
            HostState::Failed => out.push(finding(
                Severity::Error,
                Check::HostFailed,
                subject(),
                format!("the agent reported a failure{why}"),
                fix,
            )),
            HostState::Releasing => {
                let cluster = h
                    .cluster_label
                    .as_deref()
                    .or_else(|| by_host.get(h.name.as_str()).copied());
                out.push(finding(
                    Severity::Warning,
                    Check::HostReleasing,
                    subject(),
                    format!(
                        "its machine is gone{}; the host returns to the pool once its agent cleans up",
                        cluster.map(|c| format!(" (cluster {c})")).unwrap_or_default()
                    ),
                    format!("{fix} (is its agent running?)"),
                ));
            }
            _ => {}
        }
    }
}

/// The failures of one host's agent within [`LOOP_WINDOW_SECONDS`] of the last.
struct Loop<'a> {
    /// How many, summed over the Events' counts.
    failures: u64,
    /// Unix seconds of the first of them, if known.
    since: Option<i64>,
    /// The Event of the last one.
    last: &'a HostEvent,
}

/// The hosts whose agent failed more than once lately, by `(namespace, host)`, from their
/// failure Events ([`HostEvent`]): one Event counted up by client-go's recorder, or several
/// (an agent restarted records anew).
fn loops<'a>(c: &Ctx<'a>) -> BTreeMap<(&'a str, &'a str), Loop<'a>> {
    let recent = |e: &HostEvent| {
        e.last_unix
            .is_none_or(|t| c.now.saturating_sub(t) <= LOOP_WINDOW_SECONDS)
    };
    let mut out: BTreeMap<(&str, &str), Loop> = BTreeMap::new();
    for e in c.fleet.host_events.iter().filter(|e| recent(e)) {
        let l = out
            .entry((e.namespace.as_str(), e.host.as_str()))
            .or_insert(Loop {
                failures: 0,
                since: e.first_unix,
                last: e,
            });
        l.failures = l.failures.saturating_add(e.count);
        l.since = match (l.since, e.first_unix) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if e.last_unix > l.last.last_unix {
            l.last = e;
        }
    }
    out.retain(|_, l| l.failures > 1);
    out
}

/// ByoHosts whose install or bootstrap keeps failing: the agent reports a failure (the host is
/// Failed) and has recorded it more than once lately. BYOH v0.5.0's agent retries forever,
/// resetting the node after each failed bootstrap, and keeps the failing command's output in its
/// own log only: its condition carries no message and its Events a fixed one.
fn bootstrap_loops(c: &Ctx, out: &mut Vec<Problem>) {
    let loops = loops(c);
    for h in &c.fleet.byo_hosts {
        let Some(l) = loops.get(&(h.namespace.as_str(), h.name.as_str())) else {
            continue;
        };
        if h.state(|_, _| true) != HostState::Failed {
            continue;
        }
        let ago = |t: Option<i64>| {
            t.map(|t| crate::text::age(c.now.saturating_sub(t)))
                .unwrap_or_else(|| "?".into())
        };
        let said = match l.last.message.as_str() {
            "" => String::new(),
            m => format!(" \"{}\"", m.replace('\n', " ")),
        };
        let condition = h
            .reason
            .as_deref()
            .map(|r| format!(", condition {r}"))
            .unwrap_or_default();
        let ns = ns_flag(&h.namespace);
        out.push(finding(
            Severity::Error,
            Check::HostBootstrapLoop,
            Subject {
                kind: "ByoHost".into(),
                namespace: h.namespace.clone(),
                name: h.name.clone(),
            },
            format!(
                "its agent failed {} times in {} (last {} ago: {}{said}{condition}) and resets the host and retries forever",
                l.failures,
                ago(l.since),
                ago(l.last.last_unix),
                l.last.reason
            ),
            format!(
                "kubectl capi hosts describe {name}{ns} (the failing command's output is in byoh-hostagent's log on the host); to stop it, move its machine to a spare host and cordon it: kubectl capi hosts drain {name}{ns} (kubectl capi hosts retire {name}{ns} --force if its agent is gone)",
                name = h.name
            ),
        ));
    }
}

/// Machines whose Node stopped reporting, named by their BYOH host where they have one: the
/// signal is Kubernetes' own (the tenant's node lifecycle controller, after its grace period),
/// as Cluster API mirrors it, so no workload cluster is read. BYOH v0.5.0's agent keeps no
/// heartbeat of its own; a host that serves no cluster is not seen to stop.
fn unreachable(c: &Ctx, out: &mut Vec<Problem>) {
    let hosts: BTreeMap<&str, &HostFacts> = c
        .fleet
        .byo_hosts
        .iter()
        .map(|h| (h.name.as_str(), h))
        .collect();
    for m in &c.fleet.machines {
        let Some(silence) = &m.node_silent else {
            continue;
        };
        if m.deleting_unix.is_some() {
            continue;
        }
        let ns = m.namespace.as_str();
        let cluster = m.cluster.as_deref().unwrap_or_default();
        let since = silence
            .since_unix
            .map(|t| format!(" {} ago", crate::text::age(c.now.saturating_sub(t))))
            .unwrap_or_default();
        let said = silence
            .message
            .trim_start_matches("* Node.Ready: ")
            .replace('\n', " ");
        let host = m.provider_host.as_deref().and_then(|h| hosts.get(h));
        let (object, fix) = match host {
            Some(h) => (
                Subject {
                    kind: "ByoHost".into(),
                    namespace: h.namespace.clone(),
                    name: h.name.clone(),
                },
                format!(
                    "check that the host is up and that byoh-hostagent and the kubelet run on it; if it is gone for good: kubectl capi hosts retire {}{}",
                    h.name,
                    ns_flag(&h.namespace)
                ),
            ),
            None => (
                machine_subject(m),
                format!(
                    "check the machine's host; a MachineHealthCheck replaces it: kubectl capi describe {cluster}{}",
                    ns_flag(ns)
                ),
            ),
        };
        out.push(finding(
            Severity::Error,
            Check::HostUnreachable,
            object,
            format!(
                "the Node of Machine {} (cluster {cluster}) stopped reporting{since}: {said}",
                m.name
            ),
            fix,
        ));
    }
}
