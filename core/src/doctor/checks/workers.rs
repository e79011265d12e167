//! Machines and BYOH hosts.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{Ctx, Entry, entry, finding, ns_flag};
use crate::doctor::{Check, HostFacts, MachineFacts, Problem, Subject};
use crate::fields;
use crate::json::{self, str_at};
use crate::plan::Severity;
use crate::plan::hosts::HostState;
use crate::version::KubeVersion;

/// How many minors a kubelet may lag its API server (Kubernetes' version skew policy since
/// v1.28).
const MAX_KUBELET_SKEW: u64 = 3;

pub(super) const CHECKS: &[Entry] = &[
    entry!(machines_stuck: [MachineStuck] needs [Machines] uses []),
    // Without Clusters and KamajiControlPlanes, a Kamaji cluster's control-plane version is not
    // known: less is found.
    entry!(version_skew: [VersionSkew] needs [Machines] uses [Clusters, KamajiControlPlanes]),
    // Without the ByoMachines every claimed host would read as released.
    entry!(hosts: [HostFailed, HostReleasing] needs [ByoHosts, ByoMachines] uses [Machines]),
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
