//! Process counters, and what the certificate and findings scans last saw (`crate::certificates`,
//! `crate::findings`), served as Prometheus text on `/metrics`. The bottom of the reconciler's
//! modules: the scans publish here, the KamajiControlPlane controller reads the certificates'
//! conditions from here, and this module imports neither.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::channel::mpsc::{UnboundedReceiver, UnboundedSender, unbounded};
use kcore::doctor::{CertificatesCondition, certificates_condition};

/// Counters of the controller.
#[derive(Debug, Default)]
pub struct Metrics {
    pub reconciles: AtomicU64,
    pub reconcile_errors: AtomicU64,
    /// Requests sent to the API server (watches count once per (re)connection).
    pub api_requests: AtomicU64,
    /// The TenantControlPlanes' certificates as the last scan saw them.
    pub certificates: Expiries,
    /// The fleet doctor's findings as the last scan counted them.
    pub findings: Findings,
    /// The TenantBackups as their last runs ended.
    pub backups: Backups,
    /// This process does the work: it holds the leader-election Lease (or runs without one).
    pub leader: std::sync::atomic::AtomicBool,
}

impl Metrics {
    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let counters = format!(
            "# HELP kamaji_reconciler_reconciles_total Reconciliations run.\n# TYPE kamaji_reconciler_reconciles_total counter\nkamaji_reconciler_reconciles_total {}\n# HELP kamaji_reconciler_reconcile_errors_total Reconciliations that failed.\n# TYPE kamaji_reconciler_reconcile_errors_total counter\nkamaji_reconciler_reconcile_errors_total {}\n# HELP kamaji_reconciler_api_requests_total Requests sent to the Kubernetes API server.\n# TYPE kamaji_reconciler_api_requests_total counter\nkamaji_reconciler_api_requests_total {}\n",
            self.reconciles.load(Ordering::Relaxed),
            self.reconcile_errors.load(Ordering::Relaxed),
            self.api_requests.load(Ordering::Relaxed)
        );
        let mut leader = String::new();
        family(
            &mut leader,
            "kamaji_reconciler_leader",
            "gauge",
            "1 while this process holds the leader-election Lease (or runs without leader election), else 0.",
            Some(i64::from(self.leader.load(Ordering::Relaxed))),
        );
        counters
            + &leader
            + &self.certificates.render()
            + &self.findings.render()
            + &self.backups.render()
    }
}

/// The `# HELP` and `# TYPE` lines of the metric `name` (`kind`: gauge, counter), then, when
/// given, its one unlabelled sample.
pub(crate) fn family(out: &mut String, name: &str, kind: &str, help: &str, value: Option<i64>) {
    out.push_str(&format!("# HELP {name} {help}\n# TYPE {name} {kind}\n"));
    if let Some(v) = value {
        out.push_str(&format!("{name} {v}\n"));
    }
}

/// The Prometheus text of the scan `last` holds, written by `write`: nothing before a scan
/// succeeded.
fn last_text<S>(last: &Mutex<Option<S>>, write: impl FnOnce(&S, &mut String)) -> String {
    let mut out = String::new();
    if let Ok(last) = last.lock()
        && let Some(scan) = last.as_ref()
    {
        write(scan, &mut out);
    }
    out
}

/// One tenant as the last scan saw it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Tenant {
    /// Unix seconds of the earliest `notAfter`.
    pub earliest: i64,
    /// Certificates expired or expiring within the threshold.
    pub at_risk: usize,
    pub condition: CertificatesCondition,
}

/// The outcome of one certificate scan.
#[derive(Clone, Debug)]
pub(crate) struct CertificateScan {
    /// Unix seconds.
    pub at: i64,
    pub warn_seconds: i64,
    /// (namespace, TenantControlPlane) → its certificates.
    pub tenants: BTreeMap<(String, String), Tenant>,
}

impl CertificateScan {
    fn condition(&self, ns: &str, name: &str) -> CertificatesCondition {
        match self.tenants.get(&(ns.to_string(), name.to_string())) {
            Some(t) => t.condition.clone(),
            None => certificates_condition(name, None, self.warn_seconds, self.at),
        }
    }
}

/// The certificates of the tenants as the last scan saw them, shared by the scan, the
/// KamajiControlPlane controller and `/metrics`.
#[derive(Debug, Default)]
pub struct Expiries {
    /// `None` until a scan succeeded.
    last: Mutex<Option<CertificateScan>>,
    /// Where the KamajiControlPlanes whose condition changed are sent, (namespace, name).
    trigger: Mutex<Option<UnboundedSender<(String, String)>>>,
}

impl Expiries {
    /// The KamajiControlPlanes to reconcile because their condition changed, (namespace, name):
    /// the KamajiControlPlane controller's extra trigger (the last caller gets them).
    pub fn triggers(&self) -> UnboundedReceiver<(String, String)> {
        let (tx, rx) = unbounded();
        if let Ok(mut t) = self.trigger.lock() {
            *t = Some(tx);
        }
        rx
    }

    /// The `CertificatesExpiring` condition of the tenant `name` of `ns` from the last scan;
    /// `None` before the first scan succeeded (the condition written before stays).
    pub fn condition(&self, ns: &str, name: &str) -> Option<CertificatesCondition> {
        let last = self.last.lock().ok()?;
        last.as_ref().map(|s| s.condition(ns, name))
    }

    /// Keeps `scan` as the last one, and sends the tenants whose condition it changed (all it
    /// saw after no scan at all).
    pub(crate) fn publish(&self, scan: CertificateScan) {
        let changed: Vec<(String, String)> = {
            let Ok(mut last) = self.last.lock() else {
                return;
            };
            let changed = match last.as_ref() {
                None => scan.tenants.keys().cloned().collect(),
                Some(prev) => {
                    let keys: BTreeSet<&(String, String)> =
                        prev.tenants.keys().chain(scan.tenants.keys()).collect();
                    keys.into_iter()
                        .filter(|(ns, n)| prev.condition(ns, n) != scan.condition(ns, n))
                        .cloned()
                        .collect()
                }
            };
            *last = Some(scan);
            changed
        };
        let Ok(t) = self.trigger.lock() else {
            return;
        };
        // No controller yet (the first scan): its first reconciles read the scan anyway.
        let Some(tx) = t.as_ref().filter(|_| !changed.is_empty()) else {
            return;
        };
        tracing::info!(
            count = changed.len(),
            "certificates: CertificatesExpiring changed; reconciling those KamajiControlPlanes"
        );
        for key in changed {
            // The controller gone (shutting down): nothing left to tell.
            let _ = tx.unbounded_send(key);
        }
    }

    /// The Prometheus text of the certificates: one series per tenant the last scan saw.
    pub fn render(&self) -> String {
        last_text(&self.last, |scan, out| {
            family(
                out,
                "kamaji_reconciler_certificate_scan_timestamp_seconds",
                "gauge",
                "Unix time of the last scan of the TenantControlPlanes' certificates that succeeded.",
                Some(scan.at),
            );
            // One series per tenant each.
            let series: [TenantSeries; 2] = [
                (
                    "kamaji_reconciler_tenant_certificate_expiry_timestamp_seconds",
                    "Unix time at which the first certificate of the TenantControlPlane expires (its earliest notAfter).",
                    |t| t.earliest,
                ),
                (
                    "kamaji_reconciler_tenant_certificates_expiring",
                    "Certificates of the TenantControlPlane expired or expiring within --cert-warn.",
                    |t| i64::try_from(t.at_risk).unwrap_or(i64::MAX),
                ),
            ];
            for (metric, help, value) in series {
                family(out, metric, "gauge", help, None);
                for ((ns, name), t) in &scan.tenants {
                    let _ = writeln!(out, "{metric}{{{}}} {}", labels(ns, name), value(t));
                }
            }
        })
    }
}

/// A series per TenantBackup: its name, its help, and its value.
type BackupFamily = (&'static str, &'static str, fn(&BackupSeries) -> i64);

/// One TenantBackup as its last run left it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BackupSeries {
    /// Unix seconds of the last backup written (0: none yet).
    pub last_success: i64,
    /// 1 when the last run failed or the spec cannot be acted on, else 0.
    pub failing: i64,
    /// Seconds between the last two scheduled times (0 before the schedule gives two).
    pub interval: i64,
    /// The last backup's compressed size.
    pub bytes: i64,
}

/// Every TenantBackup's series, (namespace, name) → its last run; a TenantBackup deleted is
/// dropped by its controller within seconds.
#[derive(Debug, Default)]
pub struct Backups(Mutex<BTreeMap<(String, String), BackupSeries>>);

impl Backups {
    pub fn set(&self, ns: &str, name: &str, s: BackupSeries) {
        if let Ok(mut m) = self.0.lock() {
            m.insert((ns.to_string(), name.to_string()), s);
        }
    }

    /// Keeps the series of the TenantBackups `keep` says still exist.
    pub fn retain(&self, keep: impl Fn(&str, &str) -> bool) {
        if let Ok(mut m) = self.0.lock() {
            m.retain(|(ns, name), _| keep(ns, name));
        }
    }

    fn render(&self) -> String {
        let mut out = String::new();
        let Ok(m) = self.0.lock() else {
            return out;
        };
        if m.is_empty() {
            return out;
        }
        let series: [BackupFamily; 4] = [
            (
                "kamaji_reconciler_tenant_backup_last_success_timestamp_seconds",
                "Unix time of the TenantBackup's last backup written (0: none yet).",
                |s| s.last_success,
            ),
            (
                "kamaji_reconciler_tenant_backup_failing",
                "1 when the TenantBackup's last run failed or its spec cannot be acted on, else 0.",
                |s| s.failing,
            ),
            (
                "kamaji_reconciler_tenant_backup_interval_seconds",
                "Seconds between the TenantBackup's scheduled runs (0 until known).",
                |s| s.interval,
            ),
            (
                "kamaji_reconciler_tenant_backup_size_bytes",
                "Compressed size of the TenantBackup's last backup written.",
                |s| s.bytes,
            ),
        ];
        for (metric, help, value) in series {
            family(&mut out, metric, "gauge", help, None);
            for ((ns, name), s) in m.iter() {
                let _ = writeln!(
                    out,
                    "{metric}{{namespace=\"{}\",tenantbackup=\"{}\"}} {}",
                    escape(ns),
                    escape(name),
                    value(s)
                );
            }
        }
        out
    }
}

/// A series per tenant: its name, its help, and its value for a tenant.
type TenantSeries = (&'static str, &'static str, fn(&Tenant) -> i64);

/// The labels of a tenant's series.
fn labels(ns: &str, name: &str) -> String {
    format!(
        "namespace=\"{}\",tenant_control_plane=\"{}\"",
        escape(ns),
        escape(name)
    )
}

/// A label value as the Prometheus text format wants it (names never need it; safe anyway).
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The counts of the last scan, `(check, severity)` → findings.
#[derive(Clone, Debug, PartialEq)]
struct FindingsScan {
    /// Unix seconds.
    at: i64,
    counts: BTreeMap<(String, String), usize>,
}

/// The findings as the last scan that succeeded counted them, for `/metrics`.
#[derive(Debug, Default)]
pub struct Findings {
    /// `None` until a scan succeeded.
    last: Mutex<Option<FindingsScan>>,
}

impl Findings {
    /// Keeps `counts` (taken at `at`) as the last scan's, with a 0 for every pair the scan
    /// before counted and this one did not: the series falls to 0 for one scan, so that an
    /// alert on it resolves, then goes.
    pub(crate) fn publish(&self, at: i64, mut counts: BTreeMap<(String, String), usize>) {
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
        *last = Some(FindingsScan { at, counts });
    }

    /// The Prometheus text of the findings: nothing before the first scan succeeded.
    pub fn render(&self) -> String {
        last_text(&self.last, |scan, out| {
            family(
                out,
                "kamaji_reconciler_findings_scan_timestamp_seconds",
                "gauge",
                "Unix time of the last scan of the fleet doctor's findings that succeeded.",
                Some(scan.at),
            );
            family(
                out,
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
        })
    }
}

/// A client whose every API request is counted in `metrics.api_requests`.
pub fn counting_client(
    config: kube::Config,
    metrics: std::sync::Arc<Metrics>,
) -> Result<kube::Client, kube::Error> {
    let layer = tower::util::MapRequestLayer::new(move |req: http::Request<kube::client::Body>| {
        metrics.api_requests.fetch_add(1, Ordering::Relaxed);
        req
    });
    Ok(kube::client::ClientBuilder::try_from(config)?
        .with_layer(&layer)
        .build())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn tenant(ns: &str, name: &str, earliest: i64, at_risk: usize) -> ((String, String), Tenant) {
        let condition = CertificatesCondition {
            status: at_risk > 0,
            reason: if at_risk > 0 {
                "Expiring"
            } else {
                "NotExpiring"
            },
            message: format!("{earliest}"),
        };
        (
            (ns.into(), name.into()),
            Tenant {
                earliest,
                at_risk,
                condition,
            },
        )
    }

    fn scan(tenants: Vec<((String, String), Tenant)>) -> CertificateScan {
        CertificateScan {
            at: 1_000,
            warn_seconds: 100,
            tenants: tenants.into_iter().collect(),
        }
    }

    fn drain(rx: &mut UnboundedReceiver<(String, String)>) -> Vec<(String, String)> {
        let mut out = Vec::new();
        while let Ok(k) = rx.try_recv() {
            out.push(k);
        }
        out
    }

    #[test]
    fn only_changed_conditions_trigger_and_gone_tenants_too() {
        let e = Expiries::default();
        assert_eq!(e.condition("ns", "a"), None);
        assert_eq!(e.render(), "");
        let mut rx = e.triggers();
        e.publish(scan(vec![
            tenant("ns", "a", 50, 1),
            tenant("ns", "b", 5_000, 0),
        ]));
        let k = |n: &str| ("ns".to_string(), n.to_string());
        assert_eq!(drain(&mut rx), vec![k("a"), k("b")]);
        // The same again: nothing; b's earliest moving with an unchanged condition: nothing.
        e.publish(scan(vec![
            tenant("ns", "a", 50, 1),
            tenant("ns", "b", 5_000, 0),
        ]));
        assert_eq!(drain(&mut rx), vec![]);
        // a renewed, b gone, c new.
        e.publish(scan(vec![
            tenant("ns", "a", 9_000, 0),
            tenant("ns", "c", 9_000, 0),
        ]));
        assert_eq!(drain(&mut rx), vec![k("a"), k("b"), k("c")]);
        let gone = e.condition("ns", "b").unwrap();
        assert_eq!((gone.status, gone.reason), (false, "NotExpiring"));
        assert!(gone.message.contains("kamaji.clastix.io/name=b"));
        assert_eq!(e.condition("ns", "a").unwrap().message, "9000");
    }

    #[test]
    fn one_series_per_tenant() {
        let e = Expiries::default();
        e.publish(scan(vec![
            tenant("ns", "a", 50, 2),
            tenant("ns", "b", 5_000, 0),
        ]));
        let text = e.render();
        for want in [
            "kamaji_reconciler_certificate_scan_timestamp_seconds 1000\n",
            "kamaji_reconciler_tenant_certificate_expiry_timestamp_seconds{namespace=\"ns\",tenant_control_plane=\"a\"} 50\n",
            "kamaji_reconciler_tenant_certificate_expiry_timestamp_seconds{namespace=\"ns\",tenant_control_plane=\"b\"} 5000\n",
            "kamaji_reconciler_tenant_certificates_expiring{namespace=\"ns\",tenant_control_plane=\"a\"} 2\n",
            "kamaji_reconciler_tenant_certificates_expiring{namespace=\"ns\",tenant_control_plane=\"b\"} 0\n",
            "# TYPE kamaji_reconciler_tenant_certificates_expiring gauge\n",
        ] {
            assert!(text.contains(want), "{want} in:\n{text}");
        }
        assert_eq!(text.matches("tenant_control_plane=").count(), 4);
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
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
