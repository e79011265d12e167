//! The checks, one function per kind of problem, grouped by section.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::{Check, FleetRead, MachineFacts, Problem, Section, Subject, Thresholds};
use crate::fields;
use crate::json::{self, str_at};
use crate::labels::{CLUSTER_NAME_LABEL, PAUSED_ANNOTATION};
use crate::plan::Severity;
use crate::plan::hosts::HostState;
use crate::version::KubeVersion;

use crate::labels::{CACPPK_LEASE, RECONCILER_LEASE};
/// How many minors a kubelet may lag its API server (Kubernetes' version skew policy since
/// v1.28).
const MAX_KUBELET_SKEW: u64 = 3;

pub(super) struct Ctx<'a> {
    pub fleet: &'a super::Fleet,
    pub thresholds: &'a Thresholds,
    /// Unix seconds.
    pub now: i64,
}

impl Ctx<'_> {
    /// Seconds since an RFC 3339 time at `path`, if set and readable.
    fn since(&self, obj: &Value, path: &[&str]) -> Option<i64> {
        let t = str_at(obj, path)?;
        let ts: jiff::Timestamp = t.parse().ok()?;
        Some(self.now.saturating_sub(ts.as_second()))
    }
    fn stuck(&self, seconds: i64) -> bool {
        seconds > self.thresholds.stuck_after_seconds
    }
}

fn finding(
    section: Section,
    severity: Severity,
    check: Check,
    object: Subject,
    cause: String,
    fix: String,
) -> Problem {
    Problem {
        section,
        severity,
        check,
        object,
        cause,
        fix,
    }
}

/// `-n NS` for a fix line.
fn ns_flag(ns: &str) -> String {
    if ns.is_empty() {
        String::new()
    } else {
        format!(" -n {ns}")
    }
}

/// One check function: its section, the codes it reports, the inputs it cannot run without
/// (refused whole, it does not run: an empty list would read as "nothing wrong", or as
/// everything orphaned) and those it runs without, finding less.
struct Entry {
    section: Section,
    checks: &'static [Check],
    needs: &'static [FleetRead],
    uses: &'static [FleetRead],
    run: fn(&Ctx, &mut Vec<Problem>),
}

/// Every check, in report order.
const TABLE: &[Entry] = &[
    Entry {
        section: Section::Management,
        checks: &[Check::ClusterApiMissing],
        needs: &[],
        uses: &[],
        run: cluster_api,
    },
    Entry {
        section: Section::Management,
        checks: &[Check::ReconcilerStopped, Check::SecondControlPlaneProvider],
        needs: &[FleetRead::Leases],
        uses: &[],
        run: leases,
    },
    Entry {
        section: Section::Management,
        checks: &[Check::ConversionFailing, Check::CrdStoredVersions],
        needs: &[FleetRead::Crds],
        uses: &[],
        run: crds,
    },
    Entry {
        section: Section::ControlPlanes,
        checks: &[Check::CertificateExpired, Check::CertificateExpiring],
        needs: &[FleetRead::Certificates],
        uses: &[],
        run: certificates,
    },
    Entry {
        section: Section::ControlPlanes,
        checks: &[Check::ControlPlaneNotReady],
        needs: &[FleetRead::TenantControlPlanes],
        uses: &[],
        run: control_planes_ready,
    },
    Entry {
        section: Section::ControlPlanes,
        checks: &[Check::VersionOutsideKamajiRange],
        needs: &[FleetRead::TenantControlPlanes],
        uses: &[FleetRead::KamajiRefusals],
        run: kamaji_range,
    },
    Entry {
        section: Section::ControlPlanes,
        checks: &[Check::DataStoreStopsKamaji],
        needs: &[FleetRead::DataStores],
        uses: &[],
        run: datastores_tls,
    },
    Entry {
        section: Section::ControlPlanes,
        checks: &[Check::DataStoreUnusable],
        needs: &[FleetRead::DataStores],
        uses: &[FleetRead::DataStoreSecrets],
        run: datastores_secrets,
    },
    Entry {
        section: Section::Workers,
        checks: &[Check::MachineStuck],
        needs: &[FleetRead::Machines],
        uses: &[],
        run: machines_stuck,
    },
    Entry {
        section: Section::Workers,
        checks: &[Check::VersionSkew],
        needs: &[FleetRead::Machines],
        // Without them, a Kamaji cluster's control-plane version is not known: less is found.
        uses: &[FleetRead::Clusters, FleetRead::KamajiControlPlanes],
        run: version_skew,
    },
    Entry {
        section: Section::Workers,
        checks: &[Check::HostFailed, Check::HostReleasing],
        // Without the ByoMachines every claimed host would read as released.
        needs: &[FleetRead::ByoHosts, FleetRead::ByoMachines],
        uses: &[FleetRead::Machines],
        run: hosts,
    },
    Entry {
        section: Section::Workers,
        checks: &[Check::HostUnreachable],
        needs: &[FleetRead::Machines],
        uses: &[FleetRead::ByoHosts],
        run: unreachable,
    },
    Entry {
        section: Section::Leftovers,
        checks: &[Check::OrphanTenantControlPlane],
        needs: &[
            FleetRead::TenantControlPlanes,
            FleetRead::KamajiControlPlanes,
        ],
        uses: &[],
        run: orphan_tenants,
    },
    Entry {
        section: Section::Leftovers,
        checks: &[Check::OrphanSecrets],
        needs: &[FleetRead::ClusterSecrets, FleetRead::Clusters],
        uses: &[],
        run: orphan_secrets,
    },
    Entry {
        section: Section::Leftovers,
        checks: &[Check::UnusedInstallerTemplate],
        needs: &[
            FleetRead::InstallerTemplates,
            FleetRead::ByoMachineTemplates,
        ],
        uses: &[],
        run: unused_installer_templates,
    },
    Entry {
        section: Section::Leftovers,
        checks: &[Check::UnusedBootstrapKubeconfig],
        needs: &[FleetRead::BootstrapKubeconfigs, FleetRead::ByoHosts],
        uses: &[],
        run: unused_bootstrap_kubeconfigs,
    },
    Entry {
        section: Section::Operations,
        checks: &[Check::ClusterPaused],
        needs: &[FleetRead::Clusters],
        uses: &[],
        run: paused_clusters,
    },
    Entry {
        section: Section::Operations,
        checks: &[
            Check::UpgradeFailed,
            Check::UpgradePaused,
            Check::UpgradeStalled,
        ],
        needs: &[],
        uses: &[FleetRead::ClusterUpgrades, FleetRead::FleetUpgrades],
        run: upgrades,
    },
];

/// Whether a read the check cannot run without was refused whole.
fn skipped(e: &Entry, fleet: &super::Fleet) -> bool {
    fleet
        .unread
        .iter()
        .any(|u| !u.partial && e.needs.contains(&u.input))
}

/// The findings of one section.
pub(super) fn run(section: Section, c: &Ctx) -> Vec<Problem> {
    let mut out = Vec::new();
    for e in TABLE
        .iter()
        .filter(|e| e.section == section && !skipped(e, c.fleet))
    {
        (e.run)(c, &mut out);
    }
    out
}

/// Each check a refused read kept from running or narrowed, with its section and the
/// permissions missing, in report order.
pub(super) fn affected(fleet: &super::Fleet) -> Vec<(Section, Check, Vec<String>)> {
    let mut out = Vec::new();
    for e in TABLE {
        let missing: Vec<String> = fleet
            .unread
            .iter()
            .filter(|u| e.needs.contains(&u.input) || e.uses.contains(&u.input))
            .map(|u| u.missing.clone())
            .collect();
        if missing.is_empty() {
            continue;
        }
        for check in e.checks {
            out.push((e.section, *check, missing.clone()));
        }
    }
    out
}

fn cluster_api(c: &Ctx, out: &mut Vec<Problem>) {
    if !c.fleet.capi_served {
        out.push(finding(
            Section::Management,
            Severity::Error,
            Check::ClusterApiMissing,
            Subject {
                kind: "APIGroup".into(),
                namespace: String::new(),
                name: crate::groups::CAPI_GROUP.into(),
            },
            "Cluster API's core (cluster.x-k8s.io Clusters) is not served".into(),
            "clusterctl init --control-plane kamaji --infrastructure byoh, then kubectl kamaji install".into(),
        ));
    }
}

fn crds(c: &Ctx, out: &mut Vec<Problem>) {
    for crd in &c.fleet.crds {
        let subject = || Subject {
            kind: "CustomResourceDefinition".into(),
            namespace: String::new(),
            name: crd.name.clone(),
        };
        if let Some((version, message)) = &crd.conversion_failure {
            out.push(finding(
                Section::Management,
                Severity::Error,
                Check::ConversionFailing,
                subject(),
                format!(
                    "reading it at {version} fails in its conversion webhook: {}",
                    message.replace('\n', " ")
                ),
                format!(
                    "check the provider that serves its conversion webhook (kubectl get crd {} -o jsonpath='{{.spec.conversion.webhook.clientConfig}}')",
                    crd.name
                ),
            ));
        }
        let old: Vec<&str> = crd
            .stored_versions
            .iter()
            .filter(|v| **v != crd.storage_version)
            .map(String::as_str)
            .collect();
        if !old.is_empty() && !crd.storage_version.is_empty() {
            out.push(finding(
                Section::Management,
                Severity::Warning,
                Check::CrdStoredVersions,
                subject(),
                format!(
                    "objects may still be stored at {} (it stores {} now): a release that stops serving {} cannot read them",
                    old.join(", "),
                    crd.storage_version,
                    if old.len() == 1 { "it" } else { "them" }
                ),
                format!(
                    "re-write every object at {} (clusterctl upgrade apply does for its providers), then: kubectl patch crd {} --subresource=status --type=merge -p '{{\"status\":{{\"storedVersions\":[\"{}\"]}}}}'",
                    crd.storage_version, crd.name, crd.storage_version
                ),
            ));
        }
    }
}

/// A Lease is held while it was renewed within twice its duration (one missed renewal is
/// allowed for, as client-go's leader election does with its retry period).
fn lease_alive(l: &super::LeaseInfo, now: i64) -> Option<bool> {
    let renewed = l.renewed_unix?;
    Some(now.saturating_sub(renewed) <= l.duration_seconds.saturating_mul(2).max(1))
}

fn leases(c: &Ctx, out: &mut Vec<Problem>) {
    let ours = c.fleet.leases.iter().find(|l| l.name == RECONCILER_LEASE);
    let theirs = c.fleet.leases.iter().find(|l| l.name == CACPPK_LEASE);
    let lease_subject = |l: &super::LeaseInfo| Subject {
        kind: "Lease".into(),
        namespace: l.namespace.clone(),
        name: l.name.clone(),
    };
    if let Some(l) = ours
        && lease_alive(l, c.now) == Some(false)
    {
        let ago = l.renewed_unix.map(|r| c.now.saturating_sub(r)).unwrap_or(0);
        out.push(finding(
            Section::Management,
            Severity::Error,
            Check::ReconcilerStopped,
            lease_subject(l),
            format!(
                "kamaji-reconciler last renewed its Lease {} ago: no KamajiControlPlane, ClusterUpgrade or FleetUpgrade moves",
                crate::text::age(ago)
            ),
            format!(
                "kubectl{} rollout restart deployment/kamaji-reconciler (kubectl kamaji install puts it back if it is gone)",
                ns_flag(&l.namespace)
            ),
        ));
    }
    if let (Some(a), Some(b)) = (ours, theirs)
        && lease_alive(a, c.now) == Some(true)
        && lease_alive(b, c.now) == Some(true)
    {
        out.push(finding(
            Section::Management,
            Severity::Error,
            Check::SecondControlPlaneProvider,
            lease_subject(b),
            "two KamajiControlPlane providers run (kamaji-reconciler and CACPPK): they write the same TenantControlPlanes".into(),
            "keep one: clusterctl delete --control-plane kamaji, or kubectl kamaji uninstall".into(),
        ));
    }
}

fn certificates(c: &Ctx, out: &mut Vec<Problem>) {
    // Per tenant, the certificate that expires first.
    let tenants =
        super::tenant_expiries(&c.fleet.certificates, c.thresholds.cert_warn_seconds, c.now);
    for t in tenants
        .iter()
        .filter(|t| t.expired.saturating_add(t.expiring) > 0)
    {
        let (cert, expired, soon) = (&t.first, t.expired, t.expiring);
        let (ns, tenant) = (cert.namespace.as_str(), cert.tenant.as_str());
        let subject = Subject {
            kind: "TenantControlPlane".into(),
            namespace: ns.into(),
            name: tenant.into(),
        };
        let left = cert.not_after_unix.saturating_sub(c.now);
        let which = format!("{} of Secret {}", cert.key, cert.secret);
        let (severity, check, cause) = if expired > 0 {
            (
                Severity::Error,
                Check::CertificateExpired,
                format!(
                    "{expired} certificate(s) expired, {which} on {} ({} ago)",
                    cert.not_after,
                    crate::text::age(left.saturating_neg())
                ),
            )
        } else {
            (
                Severity::Warning,
                Check::CertificateExpiring,
                format!(
                    "{soon} certificate(s) expire within {}, {which} first, in {} days",
                    crate::text::age(c.thresholds.cert_warn_seconds),
                    left.div_euclid(86_400)
                ),
            )
        };
        let fix = format!(
            "kubectl kamaji certificates rotate {tenant}{} --all=true",
            ns_flag(ns)
        );
        out.push(finding(
            Section::ControlPlanes,
            severity,
            check,
            subject,
            cause,
            fix,
        ));
    }
}

fn control_planes_ready(c: &Ctx, out: &mut Vec<Problem>) {
    for tcp in &c.fleet.tenant_control_planes {
        let status = str_at(tcp, &["status", "kubernetesResources", "version", "status"]);
        if status == Some("Ready") || json::at(tcp, &["metadata", "deletionTimestamp"]).is_some() {
            continue;
        }
        let Some(age) = c.since(tcp, &["metadata", "creationTimestamp"]) else {
            continue;
        };
        if !c.stuck(age) {
            continue;
        }
        let name = json::name(tcp);
        let ns = ns_flag(json::namespace(tcp));
        // Migrating: the tenant is frozen until Kamaji's migration ends; Kamaji v1.0.0 never
        // ends one on Kubernetes v1.31+ by itself (see `kamaji::migrate::complete_first`).
        let (cause, fix) = match (status, str_at(tcp, &["spec", "dataStore"])) {
            (Some("Migrating"), Some(to)) => (
                format!(
                    "Migrating to DataStore {to} (writes to the tenant are refused until it ends); created {} ago",
                    crate::text::age(age)
                ),
                format!("kubectl kamaji migrate {name} --to {to} --wait{ns}"),
            ),
            _ => (
                format!(
                    "{} {} after its creation",
                    status.unwrap_or("no status"),
                    crate::text::age(age)
                ),
                format!("kubectl kamaji status {name}{ns}"),
            ),
        };
        out.push(finding(
            Section::ControlPlanes,
            Severity::Error,
            Check::ControlPlaneNotReady,
            Subject::of("TenantControlPlane", tcp),
            cause,
            fix,
        ));
    }
}

/// TenantControlPlanes at a version Kamaji refused a change to (the CLI asks Kamaji once per
/// version): stuck, since Kamaji has no rollback (clastix/kamaji#979).
fn kamaji_range(c: &Ctx, out: &mut Vec<Problem>) {
    for tcp in &c.fleet.tenant_control_planes {
        let Some(version) = str_at(tcp, &["spec", "kubernetes", "version"]) else {
            continue;
        };
        let Some(refusal) = c.fleet.kamaji_refusals.get(version) else {
            continue;
        };
        out.push(finding(
            Section::ControlPlanes,
            Severity::Error,
            Check::VersionOutsideKamajiRange,
            Subject::of("TenantControlPlane", tcp),
            format!("runs Kubernetes {version}, and Kamaji refuses every change to it: \"{refusal}\""),
            format!(
                "install a Kamaji release that supports {version}: Kamaji cannot downgrade a control plane, so this one waits for it"
            ),
        ));
    }
}

fn datastores_tls(c: &Ctx, out: &mut Vec<Problem>) {
    for ds in &c.fleet.datastores {
        let name = json::name(ds);
        let tls = json::at(ds, &["spec", "tlsConfig"]).filter(|t| t.is_object());
        if tls.is_some_and(|t| t.get("clientCertificate").is_none_or(Value::is_null)) {
            out.push(finding(
                Section::ControlPlanes,
                Severity::Error,
                Check::DataStoreStopsKamaji,
                Subject {
                    kind: "DataStore".into(),
                    namespace: String::new(),
                    name: name.into(),
                },
                "has a tlsConfig without a clientCertificate: Kamaji v1.0.0's manager stops on such a DataStore (its DataStore Secret indexer dereferences it), and with it every control plane's reconciliation".into(),
                format!("kubectl edit datastore {name} (add spec.tlsConfig.clientCertificate, or remove tlsConfig)"),
            ));
        }
    }
}

fn datastores_secrets(c: &Ctx, out: &mut Vec<Problem>) {
    for ds in &c.fleet.datastores {
        let name = json::name(ds);
        let missing = crate::kamaji::plan::datastore_secret_keys(ds)
            .into_iter()
            .filter(|k| !k.namespace.is_empty())
            .find_map(|k| {
                let id = format!("{}/{}", k.namespace, k.name);
                match c.fleet.datastore_secrets.get(&id) {
                    Some(Some(keys)) if keys.contains(&k.key) => None,
                    Some(Some(_)) => Some(format!("Secret {id} has no key {}", k.key)),
                    Some(None) => Some(format!("Secret {id} does not exist")),
                    // Not read: nothing to say.
                    None => None,
                }
            });
        if let Some(missing) = missing {
            out.push(finding(
                Section::ControlPlanes,
                Severity::Error,
                Check::DataStoreUnusable,
                Subject {
                    kind: "DataStore".into(),
                    namespace: String::new(),
                    name: name.into(),
                },
                format!("{missing}, which Kamaji needs to reach it: control planes on it are not provisioned"),
                format!("kubectl get datastore {name} -o yaml (create the Secret and key it names)"),
            ));
        }
    }
}

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
            Section::Workers,
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
        let (Some(cluster), Some(v)) = (
            m.cluster.as_deref(),
            m.version
                .as_deref()
                .and_then(|v| KubeVersion::parse_v(v).ok()),
        ) else {
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

fn version_skew(c: &Ctx, out: &mut Vec<Problem>) {
    let cps = control_plane_versions(c);
    for m in c.fleet.machines.iter().filter(|m| !m.control_plane) {
        let ns = m.namespace.as_str();
        let (Some(cluster), Some(v)) = (
            m.cluster.as_deref(),
            m.version
                .as_deref()
                .and_then(|v| KubeVersion::parse_v(v).ok()),
        ) else {
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
            Section::Workers,
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
                Section::Workers,
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
                    Section::Workers,
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
    let hosts: BTreeMap<&str, &super::HostFacts> = c
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
            Section::Workers,
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

fn orphan_tenants(c: &Ctx, out: &mut Vec<Problem>) {
    let kcps: BTreeSet<(&str, &str)> = c
        .fleet
        .kamaji_control_planes
        .iter()
        .map(|k| (json::namespace(k), json::name(k)))
        .collect();
    for tcp in &c.fleet.tenant_control_planes {
        let ns = json::namespace(tcp);
        match json::owner_of_kind(tcp, "KamajiControlPlane") {
            Some(owner) if kcps.contains(&(ns, owner)) => continue,
            _ => {}
        }
        if json::at(tcp, &["metadata", "deletionTimestamp"]).is_some() {
            continue;
        }
        out.push(finding(
            Section::Leftovers,
            Severity::Warning,
            Check::OrphanTenantControlPlane,
            Subject::of("TenantControlPlane", tcp),
            "no KamajiControlPlane owns it: no Cluster API cluster uses this control plane".into(),
            format!(
                "kubectl kamaji delete {}{} (if nothing outside Cluster API uses it)",
                json::name(tcp),
                ns_flag(ns)
            ),
        ));
    }
}

fn orphan_secrets(c: &Ctx, out: &mut Vec<Problem>) {
    let clusters: BTreeSet<(&str, &str)> = c
        .fleet
        .clusters
        .iter()
        .map(|k| (json::namespace(k), json::name(k)))
        .collect();
    for ((ns, cluster), n) in &c.fleet.cluster_secrets {
        let (ns, cluster) = (ns.as_str(), cluster.as_str());
        if clusters.contains(&(ns, cluster)) {
            continue;
        }
        out.push(finding(
            Section::Leftovers,
            Severity::Warning,
            Check::OrphanSecrets,
            Subject {
                kind: "Cluster".into(),
                namespace: ns.into(),
                name: cluster.into(),
            },
            format!("{n} Secret(s) labelled for cluster {cluster}, which does not exist"),
            format!(
                "kubectl delete secret{} -l {CLUSTER_NAME_LABEL}={cluster}",
                ns_flag(ns)
            ),
        ));
    }
}

/// The first step of a running ClusterUpgrade that started longer than `--stuck-after` ago, and
/// for how long it has run.
fn stalled_step<'a>(c: &Ctx, u: &'a Value) -> Option<(&'a Value, i64)> {
    if str_at(u, &["status", "phase"]) != Some("Running") {
        return None;
    }
    json::at(u, &["status", "steps"])?
        .as_array()?
        .iter()
        .filter(|s| str_at(s, &["phase"]) == Some("Running"))
        .find_map(|s| {
            let age = c.since(s, &["startedAt"])?;
            c.stuck(age).then_some((s, age))
        })
}

/// BootstrapKubeconfigs no host needs (the rules `kubectl capi delete` cleans up by): one whose
/// token expired before a host registered with it is a warning (a host still waiting cannot
/// register with it); one whose host registered is clutter.
fn unused_bootstrap_kubeconfigs(c: &Ctx, out: &mut Vec<Problem>) {
    let now = jiff::Timestamp::from_second(c.now).ok();
    let hosts = c.fleet.byo_hosts.iter().map(|h| h.name.as_str()).collect();
    let unused = crate::plan::teardown::unused_bootstrap_kubeconfigs(
        &c.fleet.bootstrap_kubeconfigs,
        &hosts,
        now,
    );
    for u in unused {
        let (severity, cause) = if u.expired {
            (
                Severity::Warning,
                format!(
                    "{}: a host that has not registered yet cannot register with it",
                    u.reason
                ),
            )
        } else {
            (
                Severity::Info,
                format!("{}: it is not needed any more", u.reason),
            )
        };
        let fix = format!(
            "kubectl delete bootstrapkubeconfig {}{}{}",
            u.name,
            ns_flag(&u.namespace),
            if u.expired {
                " (kubectl capi hosts add issues a new one for a host still to register)"
            } else {
                ""
            }
        );
        out.push(finding(
            Section::Leftovers,
            severity,
            Check::UnusedBootstrapKubeconfig,
            Subject {
                kind: "BootstrapKubeconfig".into(),
                namespace: u.namespace,
                name: u.name,
            },
            cause,
            fix,
        ));
    }
}

/// K8sInstallerConfigTemplates no ByoMachineTemplate names (in `spec.template.spec.installerRef`,
/// its namespace defaulting to the template's): left behind by a cluster deleted by hand. One
/// younger than `--stuck-after` may be a create under way, and is not reported.
fn unused_installer_templates(c: &Ctx, out: &mut Vec<Problem>) {
    let used: BTreeSet<(&str, &str)> = c
        .fleet
        .byo_machine_templates
        .iter()
        .filter_map(|t| {
            let r = json::at(t, &["spec", "template", "spec", "installerRef"])?;
            let name = str_at(r, &["name"])?;
            let ns = str_at(r, &["namespace"])
                .filter(|n| !n.is_empty())
                .unwrap_or(json::namespace(t));
            Some((ns, name))
        })
        .collect();
    for t in &c.fleet.installer_templates {
        let (ns, name) = (json::namespace(t), json::name(t));
        if used.contains(&(ns, name))
            || json::at(t, &["metadata", "deletionTimestamp"]).is_some()
            || !c
                .since(t, &["metadata", "creationTimestamp"])
                .is_some_and(|age| c.stuck(age))
        {
            continue;
        }
        out.push(finding(
            Section::Leftovers,
            Severity::Info,
            Check::UnusedInstallerTemplate,
            Subject::of("K8sInstallerConfigTemplate", t),
            "no ByoMachineTemplate names it as its installer: no host installs Kubernetes from it"
                .into(),
            format!(
                "kubectl delete k8sinstallerconfigtemplate {name}{}",
                ns_flag(ns)
            ),
        ));
    }
}

fn paused_clusters(c: &Ctx, out: &mut Vec<Problem>) {
    for cl in &c.fleet.clusters {
        let paused = json::bool_at(cl, &["spec", "paused"]) == Some(true)
            || json::has_annotation(cl, PAUSED_ANNOTATION);
        if !paused {
            continue;
        }
        out.push(finding(
            Section::Operations,
            Severity::Info,
            Check::ClusterPaused,
            Subject::of("Cluster", cl),
            "paused: Cluster API reconciles none of its objects".into(),
            format!(
                "kubectl capi resume {}{}",
                json::name(cl),
                ns_flag(json::namespace(cl))
            ),
        ));
    }
}

fn upgrades(c: &Ctx, out: &mut Vec<Problem>) {
    let kinds = [
        ("ClusterUpgrade", &c.fleet.cluster_upgrades),
        ("FleetUpgrade", &c.fleet.fleet_upgrades),
    ];
    for (kind, list) in kinds {
        for u in list.iter() {
            let ns = json::namespace(u);
            let name = json::name(u);
            let msg = str_at(u, &["status", "message"])
                .map(|m| format!(": {}", m.replace('\n', " ")))
                .unwrap_or_default();
            let status_cmd = if kind == "ClusterUpgrade" {
                let cluster = str_at(u, &["spec", "clusterName"]).unwrap_or(name);
                format!("kubectl capi upgrade status {cluster}{}", ns_flag(ns))
            } else {
                format!("kubectl{} get fleetupgrade {name} -o yaml", ns_flag(ns))
            };
            if str_at(u, &["status", "phase"]) == Some("Failed") {
                out.push(finding(
                    Section::Operations,
                    Severity::Error,
                    Check::UpgradeFailed,
                    Subject::of(kind, u),
                    format!("failed{msg}"),
                    status_cmd,
                ));
            } else if json::bool_at(u, &["spec", "paused"]) == Some(true)
                && json::bool_at(u, &["spec", "cancelled"]) != Some(true)
            {
                out.push(finding(
                    Section::Operations,
                    Severity::Info,
                    Check::UpgradePaused,
                    Subject::of(kind, u),
                    "paused: no further step starts".into(),
                    if kind == "ClusterUpgrade" {
                        let cluster = str_at(u, &["spec", "clusterName"]).unwrap_or(name);
                        format!("kubectl capi upgrade resume {cluster}{}", ns_flag(ns))
                    } else {
                        status_cmd
                    },
                ));
            } else if let Some((step, age)) = stalled_step(c, u) {
                let message = str_at(step, &["message"])
                    .map(|m| format!(": {}", m.replace('\n', " ")))
                    .unwrap_or_default();
                out.push(finding(
                    Section::Operations,
                    Severity::Warning,
                    Check::UpgradeStalled,
                    Subject::of(kind, u),
                    format!(
                        "step {} has been running for {}{message}",
                        step["number"],
                        crate::text::age(age)
                    ),
                    status_cmd,
                ));
            }
        }
    }
}
