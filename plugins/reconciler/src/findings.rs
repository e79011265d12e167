//! The fleet doctor's findings on `/metrics`, counted by check and severity, so that alerts work
//! without anyone running `kubectl capi doctor`.
//!
//! At every certificate scan (one timer for both: [`run`]), the reconciler reads a
//! [`Fleet`](kcore::doctor::Fleet) with the CLI's reads (`kcore::doctor::read`: one paged LIST
//! per kind, each object kept as the few fields the checks read as its page arrives, in the
//! namespaces it watches or all), reuses the certificates that scan just read instead of
//! listing Kamaji's Secrets twice, and asks
//! [`kcore::doctor::examine`], the checks of `kubectl capi doctor`. `/metrics` then shows
//! `kamaji_reconciler_findings{check,severity}` for every pair the last scan found, and for one
//! scan more as 0 a pair that went away, so that an alert on it resolves.
//!
//! What the reconciler does not read, the CLI does: DataStores and their Secrets (cluster-scoped;
//! the reconciler watches namespaces), Kamaji's refusals (found by server-side dry runs of a
//! change to a TenantControlPlane: the reconciler writes nothing to find a finding) and the CRDs
//! (cluster-scoped, with conversion probes). Their checks stay silent here.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use kcore::doctor::{self, Counts, Problem, TenantCertificate, Thresholds, read};
use kube::Client;

use crate::Error;
use crate::certificates::{self, ScanConfig};
use crate::metrics::Metrics;
use crate::reads::ClientReads;

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
    let reads = ClientReads::discover(client.clone()).await?;
    let ask = read::Ask {
        namespaces,
        // Left out (see the module's comment): `datastores`, `datastore_secrets`,
        // `kamaji_refusals` and `crds`, and BYOH's BootstrapKubeconfigs, which hold bootstrap
        // tokens; the certificates are the certificate scan's.
        ..read::Ask::default()
    };
    let mut fleet = read::fleet(&reads, &ask).await?;
    fleet.certificates = certificates;
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
}
