//! The KamajiControlPlane provider: a slim, watch-driven reconciler that turns
//! `KamajiControlPlane`s into Kamaji `TenantControlPlane`s for Cluster API.
//!
//! Public entry points for other crates:
//! - [`crds`]: the CRDs (both API versions in one CRD per kind);
//! - [`install_manifests`]: everything `kubectl kamaji install` applies;
//! - [`controller::run`]: the controller itself (the binary is a thin wrapper around it);
//! - [`upgrades::run`]: the ClusterUpgrade controller, where that API is served;
//! - [`skeleton`]: what every controller is built on (context, retries, CAPI contract, run loop).

pub mod controller;
pub mod leader;
pub mod metrics;
pub mod server;
pub mod skeleton;
pub mod upgrades;

// The API, its CRDs and install manifests, and the pure TenantControlPlane logic live in the core
// crate (kubectl-kamaji installs them without linking this controller).
pub use kcore::kcp::{
    DEFAULT_IMAGE, DEFAULT_NAMESPACE, contract_labels, crds, install_manifests, try_crds,
    uninstall_manifests,
};
pub use kcore::kcp::{api, crd, endpoint, infra, install, provider, tcp, version};

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
