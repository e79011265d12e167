//! Process counters, served as Prometheus text on `/metrics`.

use std::sync::atomic::{AtomicU64, Ordering};

/// Counters of the controller.
#[derive(Debug, Default)]
pub struct Metrics {
    pub reconciles: AtomicU64,
    pub reconcile_errors: AtomicU64,
}

impl Metrics {
    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        format!(
            "# HELP kamaji_reconciler_reconciles_total Reconciliations run.\n# TYPE kamaji_reconciler_reconciles_total counter\nkamaji_reconciler_reconciles_total {}\n# HELP kamaji_reconciler_reconcile_errors_total Reconciliations that failed.\n# TYPE kamaji_reconciler_reconcile_errors_total counter\nkamaji_reconciler_reconcile_errors_total {}\n",
            self.reconciles.load(Ordering::Relaxed),
            self.reconcile_errors.load(Ordering::Relaxed)
        )
    }
}
