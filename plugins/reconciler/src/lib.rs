//! The KamajiControlPlane provider: a slim, watch-driven reconciler that turns
//! `KamajiControlPlane`s into Kamaji `TenantControlPlane`s for Cluster API.
//!
//! Public entry points for other crates:
//! - [`crds`]: the CRDs (both API versions in one CRD per kind);
//! - [`install_manifests`]: everything `kubectl kamaji install` applies;
//! - [`controller::run`]: the controller itself (the binary is a thin wrapper around it);
//! - [`upgrades::run`]: the ClusterUpgrade controller, where that API is served;
//! - [`backups::run`]: the TenantBackup controller (scheduled tenant backups to S3 or a claim);
//! - [`skeleton`]: what every controller is built on (context, retries, CAPI contract, run loop);
//! - [`certificates`]: the scan of the TenantControlPlanes' certificates (`/metrics` and the
//!   KamajiControlPlane's `CertificatesExpiring` condition);
//! - [`findings`]: the fleet doctor's findings, counted by check and severity for `/metrics`, at
//!   each certificate scan;
//! - [`reads`]: the fleet doctor's reads (`kcore::doctor::read`) through the reconciler's
//!   client, for both scans;
//! - [`metrics`]: the counters, and what the scans last saw, for `/metrics`.

pub mod backups;
pub mod certificates;
pub mod controller;
pub mod findings;
pub mod leader;
pub mod metrics;
pub mod reads;
pub mod server;
pub mod skeleton;
pub mod upgrades;

// The API, its CRDs and install manifests, and the pure TenantControlPlane logic live in the core
// crate (kubectl-kamaji installs them without linking this controller).
pub use kcore::install::{self, provider};
pub use kcore::install::{
    DEFAULT_IMAGE, DEFAULT_NAMESPACE, install_manifests, uninstall_manifests,
};
pub use kcore::kamaji::crd::{crds, try_crds};
pub use kcore::kamaji::{api, crd, endpoint, infra, tcp, version};
pub use kcore::labels::contract_labels;

/// Errors of the reconciler library.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    /// Waiting for another controller; not a failure.
    #[error("{0}")]
    Waiting(String),
    #[error("{0}")]
    Other(String),
}
