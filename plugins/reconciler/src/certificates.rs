//! The certificates of the TenantControlPlanes, read where the work lives: every scan interval
//! one paged LIST of Kamaji's certificate Secrets (labelled `kamaji.clastix.io/project=kamaji`)
//! in the namespaces the reconciler watches gives, per tenant, the certificate that expires
//! first. `/metrics` shows it, and the KamajiControlPlane named like the tenant carries the
//! `CertificatesExpiring` condition (`kcore::doctor::certificates_condition` decides it), so that
//! alerts work without anyone running `kubectl capi doctor`.
//!
//! The first scan runs before the controller starts, so its first reconcile of each
//! KamajiControlPlane writes the condition; a later scan asks for a reconcile (through
//! `crate::metrics::Expiries::triggers`) only of the KamajiControlPlanes whose condition changed. A reconcile
//! reads the condition from the last scan and makes no request for it. The timer that repeats
//! the scan is `crate::findings::run`'s, which counts the fleet doctor's findings with the
//! certificates each scan read.

use std::time::Duration;

use kcore::doctor::{TenantCertificate, TenantExpiry, certificates_condition, tenant_expiries};
use kube::Client;

use crate::Error;
use crate::metrics::{CertificateScan, Metrics, Tenant};
use crate::reads::ClientReads;

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

/// One scan: reads the certificates, decides, and publishes; returns the certificates read, which
/// the findings scan reuses (`crate::findings`) rather than listing Kamaji's Secrets again.
pub async fn scan(
    client: &Client,
    cfg: &ScanConfig,
    metrics: &Metrics,
) -> Result<Vec<TenantCertificate>, Error> {
    // One paged LIST of Kamaji's Secrets in each namespace watched (all at once when none).
    let reads = ClientReads::new(client.clone());
    let certs = kcore::doctor::read::certificates(&reads, &cfg.namespaces).await?;
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
    metrics.certificates.publish(CertificateScan {
        at,
        warn_seconds: warn,
        tenants,
    });
    Ok(certs)
}
