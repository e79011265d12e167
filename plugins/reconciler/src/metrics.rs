//! Process counters, served as Prometheus text on `/metrics`.

use std::sync::atomic::{AtomicU64, Ordering};

/// Counters of the controller.
#[derive(Debug, Default)]
pub struct Metrics {
    pub reconciles: AtomicU64,
    pub reconcile_errors: AtomicU64,
    /// Requests sent to the API server (watches count once per (re)connection).
    pub api_requests: AtomicU64,
    /// The TenantControlPlanes' certificates as the last scan saw them.
    pub certificates: crate::certificates::Expiries,
    /// The fleet doctor's findings as the last scan counted them.
    pub findings: crate::findings::Findings,
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
        counters + &leader + &self.certificates.render() + &self.findings.render()
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
