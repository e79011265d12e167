//! The fleet doctor's findings on `/metrics`, counted by check and severity, so that alerts work
//! without anyone running `kubectl capi doctor`.
//!
//! At every certificate scan (one timer for both: [`run`]), the reconciler reads a
//! [`Fleet`] the way the CLI does (one paged LIST per kind, each object kept as its facts or
//! pruned by [`kcore::doctor::prune`] as its page arrives, in the namespaces it watches or all), reuses the
//! certificates that scan just read instead of listing Kamaji's Secrets twice, and asks
//! [`kcore::doctor::examine`], the checks of `kubectl capi doctor`. `/metrics` then shows
//! `kamaji_reconciler_findings{check,severity}` for every pair the last scan found, and for one
//! scan more as 0 a pair that went away, so that an alert on it resolves.
//!
//! What the reconciler does not read, the CLI does: DataStores and their Secrets (cluster-scoped;
//! the reconciler watches namespaces), Kamaji's refusals (found by server-side dry runs of a
//! change to a TenantControlPlane: the reconciler writes nothing to find a finding) and the CRDs
//! (cluster-scoped, with conversion probes). Their checks stay silent here.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Secret;
use kcore::doctor::{self, Counts, Fleet, LeaseInfo, Problem, TenantCertificate, Thresholds};
use kcore::groups::{
    CAPI_GROUP, CONTROLPLANE_GROUP, INFRASTRUCTURE_GROUP, KAMAJI_GROUP, OPS_GROUP,
};
use kcore::labels::{CACPPK_LEASE, CLUSTER_NAME_LABEL, RECONCILER_LEASE};
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams, ObjectList};
use kube::discovery::{ApiResource, Discovery};
use serde_json::Value;

use crate::Error;
use crate::certificates::{self, ScanConfig};
use crate::metrics::{Metrics, family};

/// Objects per page: each page is pruned as it arrives, so a page is all that is held whole.
const PAGE: u32 = 500;

/// How a kind's objects are kept in the [`Fleet`], each as its page arrives.
type Keep = fn(&mut Fleet, Value);

/// The kinds the checks read, by group and kind, and how each is kept (the fleet-sized kinds as
/// facts, the others pruned): what `kubectl capi doctor` lists (`cli/src/doctor.rs`), each read
/// where served.
const KINDS: [(&str, &str, Keep); 10] = [
    (CAPI_GROUP, "Cluster", |f, o| {
        f.clusters.push(doctor::prune(o))
    }),
    (CAPI_GROUP, "Machine", |f, o| {
        f.machines.push(doctor::MachineFacts::of(&o))
    }),
    (INFRASTRUCTURE_GROUP, "ByoHost", |f, o| {
        f.byo_hosts.push(kcore::plan::hosts::HostFacts::of(&o))
    }),
    (INFRASTRUCTURE_GROUP, "ByoMachine", |f, o| {
        f.byo_machines.insert(doctor::object_key(&o));
    }),
    (KAMAJI_GROUP, "TenantControlPlane", |f, o| {
        f.tenant_control_planes.push(doctor::prune(o))
    }),
    (CONTROLPLANE_GROUP, "KamajiControlPlane", |f, o| {
        f.kamaji_control_planes.push(doctor::prune(o))
    }),
    (INFRASTRUCTURE_GROUP, "ByoMachineTemplate", |f, o| {
        f.byo_machine_templates.push(doctor::prune(o))
    }),
    (
        INFRASTRUCTURE_GROUP,
        "K8sInstallerConfigTemplate",
        |f, o| f.installer_templates.push(doctor::prune(o)),
    ),
    (OPS_GROUP, "ClusterUpgrade", |f, o| {
        f.cluster_upgrades.push(doctor::prune(o))
    }),
    (OPS_GROUP, "FleetUpgrade", |f, o| {
        f.fleet_upgrades.push(doctor::prune(o))
    }),
];

/// The API groups of [`KINDS`]: discovery asks about these only.
const GROUPS: [&str; 5] = [
    CAPI_GROUP,
    INFRASTRUCTURE_GROUP,
    CONTROLPLANE_GROUP,
    KAMAJI_GROUP,
    OPS_GROUP,
];

/// The counts of the last scan, `(check, severity)` → findings.
#[derive(Clone, Debug, PartialEq)]
struct Scan {
    /// Unix seconds.
    at: i64,
    counts: BTreeMap<(String, String), usize>,
}

/// The findings as the last scan that succeeded counted them, for `/metrics`.
#[derive(Debug, Default)]
pub struct Findings {
    /// `None` until a scan succeeded.
    last: Mutex<Option<Scan>>,
}

impl Findings {
    /// Keeps `counts` (taken at `at`) as the last scan's, with a 0 for every pair the scan
    /// before counted and this one did not: the series falls to 0 for one scan, so that an
    /// alert on it resolves, then goes.
    fn publish(&self, at: i64, mut counts: BTreeMap<(String, String), usize>) {
        let Ok(mut last) = self.last.lock() else {
            return;
        };
        if let Some(prev) = last.as_ref() {
            for (pair, n) in &prev.counts {
                if *n > 0 {
                    counts.entry(pair.clone()).or_insert(0);
                }
            }
        }
        *last = Some(Scan { at, counts });
    }

    /// The Prometheus text of the findings: nothing before the first scan succeeded.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let Ok(last) = self.last.lock() else {
            return out;
        };
        let Some(scan) = last.as_ref() else {
            return out;
        };
        family(
            &mut out,
            "kamaji_reconciler_findings_scan_timestamp_seconds",
            "gauge",
            "Unix time of the last scan of the fleet doctor's findings that succeeded.",
            Some(scan.at),
        );
        family(
            &mut out,
            "kamaji_reconciler_findings",
            "gauge",
            "Findings of the fleet doctor (the checks of kubectl capi doctor) in the last scan, by check and severity.",
            None,
        );
        for ((check, severity), n) in &scan.counts {
            // Both are Rust identifiers (a `Check` variant, a `Severity` name): nothing to
            // escape in a label value.
            let _ = writeln!(
                out,
                "kamaji_reconciler_findings{{check=\"{check}\",severity=\"{severity}\"}} {n}"
            );
        }
        out
    }
}

/// The findings per `(check, severity)`: the check as its `Debug` name (the stable code of
/// `-o json`), the severity as serde writes it (`Error`, `Warning`, `Info`).
fn count(findings: &[Problem]) -> BTreeMap<(String, String), usize> {
    let mut out: BTreeMap<(String, String), usize> = BTreeMap::new();
    for f in findings {
        let severity = serde_json::to_value(f.severity)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_else(|| format!("{:?}", f.severity));
        let n = out.entry((format!("{:?}", f.check), severity)).or_default();
        *n = n.saturating_add(1);
    }
    out
}

/// Every `cfg.interval`, for ever: the certificate scan, then, when `stuck_after` is given
/// (`--findings-scan`), the findings scan with the certificates it read. `first` is what the
/// certificate scan that ran before the controllers read (`None`: it failed), so that the first
/// findings scan runs at once. A failed scan is logged and the last good numbers stay.
pub async fn run(
    client: Client,
    cfg: ScanConfig,
    stuck_after: Option<Duration>,
    metrics: Arc<Metrics>,
    first: Option<Vec<TenantCertificate>>,
) {
    let thresholds = stuck_after.map(|stuck| Thresholds {
        cert_warn_seconds: seconds(cfg.warn),
        stuck_after_seconds: seconds(stuck),
    });
    let mut certs = first;
    loop {
        // No certificates (their scan failed): this round is skipped rather than run without
        // them, which would report every certificate finding resolved.
        if let Some(thresholds) = &thresholds
            && let Some(c) = certs.take()
            && let Err(e) = scan(&client, &cfg.namespaces, thresholds, c, &metrics).await
        {
            tracing::warn!(
                "findings: scan failed (the last counts stay on /metrics; next in {}s): {e}",
                cfg.interval.as_secs()
            );
        }
        tokio::time::sleep(cfg.interval).await;
        certs = match certificates::scan(&client, &cfg, &metrics).await {
            Ok(c) => Some(c),
            Err(e) => {
                tracing::warn!(
                    "certificates: scan failed (next in {}s): {e}",
                    cfg.interval.as_secs()
                );
                None
            }
        };
    }
}

fn seconds(d: Duration) -> i64 {
    i64::try_from(d.as_secs()).unwrap_or(i64::MAX)
}

/// One findings scan: reads the fleet in `namespaces` (all when empty), examines it and
/// publishes the counts.
pub async fn scan(
    client: &Client,
    namespaces: &[String],
    thresholds: &Thresholds,
    certificates: Vec<TenantCertificate>,
    metrics: &Metrics,
) -> Result<(), Error> {
    let fleet = read_fleet(client, namespaces, certificates).await?;
    let now = jiff::Timestamp::now();
    let findings = doctor::examine(&fleet, thresholds, &[], now);
    let c = Counts::of(&findings);
    tracing::debug!(
        errors = c.error,
        warnings = c.warning,
        info = c.info,
        "findings: scanned"
    );
    metrics.findings.publish(now.as_second(), count(&findings));
    Ok(())
}

/// The fleet as the checks read it, in `namespaces` (each on its own, so that Roles in them
/// suffice; all at once when empty), with the `certificates` the certificate scan read.
async fn read_fleet(
    client: &Client,
    namespaces: &[String],
    certificates: Vec<TenantCertificate>,
) -> Result<Fleet, Error> {
    let discovery = discover(client).await?;
    let mut fleet = Fleet {
        capi_served: served(&discovery, CAPI_GROUP, "Cluster").is_some(),
        certificates,
        // Left empty (see the module's comment): `datastores`, `datastore_secrets`,
        // `kamaji_refusals` and `crds` are read by the CLI only.
        ..Fleet::default()
    };
    // One kind after another rather than all at once: a background scan has no one waiting,
    // and the API server and the memory see one LIST at a time.
    for (group, kind, keep) in KINDS {
        // A kind not served (BYOH or our API not installed) reads as none, as in the CLI.
        let Some(ar) = served(&discovery, group, kind) else {
            continue;
        };
        for ns in scopes(namespaces) {
            let api: Api<DynamicObject> = match ns {
                Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
                None => Api::all_with(client.clone(), &ar),
            };
            let fleet = &mut fleet;
            let api = &api;
            let list = |lp: ListParams| async move { api.list(&lp).await };
            paged(ListParams::default(), list, |o| {
                keep(fleet, to_value(o)?);
                Ok(())
            })
            .await?;
        }
    }
    // Cluster API's Secrets, metadata only: the orphan check reads their label and namespace.
    for ns in scopes(namespaces) {
        let secrets: Api<Secret> = match ns {
            Some(ns) => Api::namespaced(client.clone(), ns),
            None => Api::all(client.clone()),
        };
        let lp = ListParams::default().labels(CLUSTER_NAME_LABEL);
        let out = &mut fleet.cluster_secrets;
        let secrets = &secrets;
        let list = |lp: ListParams| async move { secrets.list_metadata(&lp).await };
        paged(lp, list, |s| {
            if let Some(key) = doctor::secret_cluster(&to_value(s)?) {
                *out.entry(key).or_default() += 1;
            }
            Ok(())
        })
        .await?;
    }
    fleet.leases = leases(client).await?;
    Ok(fleet)
}

/// Each of `namespaces`, or (`None`) every namespace at once when there are none.
fn scopes(namespaces: &[String]) -> Vec<Option<&str>> {
    if namespaces.is_empty() {
        vec![None]
    } else {
        namespaces.iter().map(|n| Some(n.as_str())).collect()
    }
}

/// The providers' Leases, ours and CACPPK's, in every namespace whatever the reconciler
/// watches: they live in the providers' namespaces, not the clusters'. Selected by name, so
/// that the nodes' Leases (one per node) are not read.
async fn leases(client: &Client) -> Result<Vec<LeaseInfo>, Error> {
    let api: Api<Lease> = Api::all(client.clone());
    let mut out = Vec::new();
    for name in [RECONCILER_LEASE, CACPPK_LEASE] {
        let lp = ListParams::default().fields(&format!("metadata.name={name}"));
        let api = &api;
        let list = |lp: ListParams| async move { api.list(&lp).await };
        paged(lp, list, |l: Lease| {
            out.push(LeaseInfo::of(l));
            Ok(())
        })
        .await?;
    }
    Ok(out)
}

/// Lists every page of `lp` through `list` (at most [`PAGE`] objects each, following the
/// continue token), handing each object to `each` as its page arrives.
async fn paged<T, L, F>(
    lp: ListParams,
    list: L,
    mut each: impl FnMut(T) -> Result<(), Error>,
) -> Result<(), Error>
where
    T: Clone,
    L: Fn(ListParams) -> F,
    F: Future<Output = Result<ObjectList<T>, kube::Error>>,
{
    let mut lp = lp.limit(PAGE);
    loop {
        let page = list(lp.clone()).await?;
        for o in page.items {
            each(o)?;
        }
        match page.metadata.continue_ {
            Some(c) if !c.is_empty() => lp = lp.continue_token(&c),
            _ => return Ok(()),
        }
    }
}

fn to_value(o: impl serde::Serialize) -> Result<Value, Error> {
    serde_json::to_value(o).map_err(|e| Error::Other(format!("an object as JSON: {e}")))
}

/// What the server serves of [`GROUPS`], asked again at every scan: a provider installed or
/// upgraded since the last one is read at once.
async fn discover(client: &Client) -> Result<Discovery, Error> {
    match Discovery::new(client.clone())
        .filter(&GROUPS)
        .run_aggregated()
        .await
    {
        Ok(d) => Ok(d),
        // Aggregated discovery (two requests) is served from Kubernetes 1.26 on; before, one
        // request per group version.
        Err(e) => {
            tracing::debug!("findings: aggregated discovery failed ({e}); asking each group");
            Ok(Discovery::new(client.clone()).filter(&GROUPS).run().await?)
        }
    }
}

/// The served version of `kind`: its group's preferred version when that serves it, else the
/// first other that does. A group several providers share (infrastructure.cluster.x-k8s.io)
/// may prefer a version one of them (BYOH v0.5.0: v1beta1 only) does not serve.
fn served(discovery: &Discovery, group: &str, kind: &str) -> Option<ApiResource> {
    let g = discovery.get(group)?;
    std::iter::once(g.preferred_version_or_latest())
        .chain(g.versions())
        .find_map(|v| {
            g.versioned_resources(v)
                .into_iter()
                .find(|(ar, _)| ar.kind == kind)
                .map(|(ar, _)| ar)
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kcore::doctor::{Check, Section, Subject};
    use kcore::plan::Severity;

    fn problem(check: Check, severity: Severity, name: &str) -> Problem {
        Problem {
            section: Section::Workers,
            severity,
            check,
            object: Subject {
                kind: "Machine".into(),
                namespace: "ns".into(),
                name: name.into(),
            },
            cause: String::new(),
            fix: String::new(),
        }
    }

    #[test]
    fn counts_by_check_and_severity() {
        let c = count(&[
            problem(Check::MachineStuck, Severity::Warning, "a"),
            problem(Check::MachineStuck, Severity::Warning, "b"),
            problem(Check::ClusterPaused, Severity::Info, "c"),
            problem(Check::HostFailed, Severity::Error, "d"),
        ]);
        let k = |c: &str, s: &str| (c.to_string(), s.to_string());
        assert_eq!(
            c,
            BTreeMap::from([
                (k("ClusterPaused", "Info"), 1),
                (k("HostFailed", "Error"), 1),
                (k("MachineStuck", "Warning"), 2),
            ])
        );
    }

    #[test]
    fn a_pair_gone_shows_zero_for_one_scan_then_goes() {
        let f = Findings::default();
        assert_eq!(f.render(), "");
        let k = |c: &str, s: &str| (c.to_string(), s.to_string());
        f.publish(
            100,
            BTreeMap::from([
                (k("OrphanSecrets", "Warning"), 2),
                (k("ClusterPaused", "Info"), 1),
            ]),
        );
        let text = f.render();
        for want in [
            "# TYPE kamaji_reconciler_findings gauge\n",
            "# TYPE kamaji_reconciler_findings_scan_timestamp_seconds gauge\n",
            "kamaji_reconciler_findings_scan_timestamp_seconds 100\n",
            "kamaji_reconciler_findings{check=\"OrphanSecrets\",severity=\"Warning\"} 2\n",
            "kamaji_reconciler_findings{check=\"ClusterPaused\",severity=\"Info\"} 1\n",
        ] {
            assert!(text.contains(want), "{want} in:\n{text}");
        }
        f.publish(200, BTreeMap::from([(k("ClusterPaused", "Info"), 1)]));
        let text = f.render();
        assert!(
            text.contains(
                "kamaji_reconciler_findings{check=\"OrphanSecrets\",severity=\"Warning\"} 0\n"
            ),
            "{text}"
        );
        assert!(text.contains("kamaji_reconciler_findings_scan_timestamp_seconds 200\n"));
        f.publish(300, BTreeMap::from([(k("ClusterPaused", "Info"), 1)]));
        let text = f.render();
        assert!(!text.contains("OrphanSecrets"), "{text}");
        assert_eq!(
            text.matches("kamaji_reconciler_findings{").count(),
            1,
            "{text}"
        );
    }
}
