//! The certificates of the TenantControlPlanes, read where the work lives: every scan interval
//! one paged LIST of Kamaji's certificate Secrets (labelled `kamaji.clastix.io/project=kamaji`)
//! in the namespaces the reconciler watches gives, per tenant, the certificate that expires
//! first. `/metrics` shows it, and the KamajiControlPlane named like the tenant carries the
//! `CertificatesExpiring` condition (`kcore::doctor::certificates_condition` decides it), so that
//! alerts work without anyone running `kubectl capi doctor`.
//!
//! The first scan runs before the controller starts, so its first reconcile of each
//! KamajiControlPlane writes the condition; a later scan asks for a reconcile (through
//! [`Expiries::triggers`]) only of the KamajiControlPlanes whose condition changed. A reconcile
//! reads the condition from the last scan and makes no request for it. The timer that repeats
//! the scan is `crate::findings::run`'s, which counts the fleet doctor's findings with the
//! certificates each scan read.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::Duration;

use futures::channel::mpsc::{UnboundedReceiver, UnboundedSender, unbounded};
use k8s_openapi::api::core::v1::Secret;
use kcore::doctor::{
    CertificatesCondition, TenantCertificate, TenantExpiry, certificates_condition, tenant_expiries,
};
use kcore::plan::teardown::KAMAJI_PROJECT_SELECTOR;
use kube::Client;
use kube::api::{Api, ListParams};

use crate::Error;
use crate::metrics::{Metrics, family};

/// Secrets per page of a scan: a page is held in memory while its certificates are read
/// (Kamaji's Secrets carry kubeconfigs of a few KiB each), as the watches' pages are.
const PAGE: u32 = 100;

/// What the scan reads and decides with.
#[derive(Clone, Debug)]
pub struct ScanConfig {
    /// Scan these namespaces only, one LIST each (all at once when empty), as the controller
    /// watches.
    pub namespaces: Vec<String>,
    /// Time between two scans (`--cert-scan-interval`).
    pub interval: Duration,
    /// A certificate expiring within this long sets `CertificatesExpiring` (`--cert-warn`).
    pub warn: Duration,
}

impl ScanConfig {
    fn warn_seconds(&self) -> i64 {
        i64::try_from(self.warn.as_secs()).unwrap_or(i64::MAX)
    }
}

/// One tenant as the last scan saw it.
#[derive(Clone, Debug, PartialEq)]
struct Tenant {
    /// Unix seconds of the earliest `notAfter`.
    earliest: i64,
    /// Certificates expired or expiring within the threshold.
    at_risk: usize,
    condition: CertificatesCondition,
}

/// The outcome of one scan.
#[derive(Clone, Debug)]
struct Scan {
    /// Unix seconds.
    at: i64,
    warn_seconds: i64,
    /// (namespace, TenantControlPlane) → its certificates.
    tenants: BTreeMap<(String, String), Tenant>,
}

impl Scan {
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
    last: Mutex<Option<Scan>>,
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
    fn publish(&self, scan: Scan) {
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
        let mut out = String::new();
        let Ok(last) = self.last.lock() else {
            return out;
        };
        let Some(scan) = last.as_ref() else {
            return out;
        };
        family(
            &mut out,
            "kamaji_reconciler_certificate_scan_timestamp_seconds",
            "gauge",
            "Unix time of the last scan of the TenantControlPlanes' certificates that succeeded.",
            Some(scan.at),
        );
        family(
            &mut out,
            "kamaji_reconciler_tenant_certificate_expiry_timestamp_seconds",
            "gauge",
            "Unix time at which the first certificate of the TenantControlPlane expires (its earliest notAfter).",
            None,
        );
        for ((ns, name), t) in &scan.tenants {
            let _ = writeln!(
                out,
                "kamaji_reconciler_tenant_certificate_expiry_timestamp_seconds{{{}}} {}",
                labels(ns, name),
                t.earliest
            );
        }
        family(
            &mut out,
            "kamaji_reconciler_tenant_certificates_expiring",
            "gauge",
            "Certificates of the TenantControlPlane expired or expiring within --cert-warn.",
            None,
        );
        for ((ns, name), t) in &scan.tenants {
            let _ = writeln!(
                out,
                "kamaji_reconciler_tenant_certificates_expiring{{{}}} {}",
                labels(ns, name),
                t.at_risk
            );
        }
        out
    }
}

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

/// One scan: reads the certificates, decides, and publishes; returns the certificates read, which
/// the findings scan reuses (`crate::findings`) rather than listing Kamaji's Secrets again.
pub async fn scan(
    client: &Client,
    cfg: &ScanConfig,
    metrics: &Metrics,
) -> Result<Vec<TenantCertificate>, Error> {
    let mut certs = Vec::new();
    if cfg.namespaces.is_empty() {
        certs = read_certificates(client, None).await?;
    }
    for ns in &cfg.namespaces {
        certs.extend(read_certificates(client, Some(ns)).await?);
    }
    let at = jiff::Timestamp::now().as_second();
    let warn = cfg.warn_seconds();
    let tenants = tenant_expiries(&certs, warn, at)
        .into_iter()
        .map(|e: TenantExpiry| {
            let key = (e.first.namespace.clone(), e.first.tenant.clone());
            let t = Tenant {
                earliest: e.first.not_after_unix,
                at_risk: e.expired.saturating_add(e.expiring),
                condition: certificates_condition(&key.1, Some(&e), warn, at),
            };
            (key, t)
        })
        .collect();
    metrics.certificates.publish(Scan {
        at,
        warn_seconds: warn,
        tenants,
    });
    Ok(certs)
}

/// Every certificate of Kamaji's Secrets, in one paged LIST.
async fn read_certificates(
    client: &Client,
    namespace: Option<&str>,
) -> Result<Vec<TenantCertificate>, Error> {
    let api: Api<Secret> = match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let mut lp = ListParams::default()
        .labels(KAMAJI_PROJECT_SELECTOR)
        .limit(PAGE);
    let mut out = Vec::new();
    loop {
        let page = api.list(&lp).await?;
        for s in page.items {
            out.extend(kcore::doctor::secret_certificates(s));
        }
        match page.metadata.continue_ {
            Some(c) if !c.is_empty() => lp = lp.continue_token(&c),
            _ => return Ok(out),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    fn scan(tenants: Vec<((String, String), Tenant)>) -> Scan {
        Scan {
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
}
