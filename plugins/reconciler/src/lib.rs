//! The KamajiControlPlane provider: a slim, watch-driven reconciler that turns
//! `KamajiControlPlane`s into Kamaji `TenantControlPlane`s for Cluster API.
//!
//! Public entry points for other crates:
//! - [`crds`]: the CRDs (both API versions in one CRD per kind);
//! - [`install_manifests`]: everything `kubectl kamaji install` applies;
//! - [`controller::run`]: the controller itself (the binary is a thin wrapper around it).

pub mod api;
pub mod controller;
pub mod crd;
pub mod endpoint;
pub mod infra;
pub mod install;
pub mod leader;
pub mod metrics;
pub mod server;
pub mod tcp;
pub mod version;

pub use crd::{contract_labels, crds, try_crds};
pub use install::{DEFAULT_IMAGE, DEFAULT_NAMESPACE, install_manifests, uninstall_manifests};

/// Errors of the reconciler library.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("generating the CRDs failed: {0}")]
    Crd(String),
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    /// Waiting for another controller; not a failure.
    #[error("{0}")]
    Waiting(String),
    #[error("{0}")]
    Other(String),
}
