//! The KamajiControlPlane provider's API and pure logic, shared by the reconciler (which runs it)
//! and `kubectl kamaji install` (which installs it):
//! - [`api`]: the KamajiControlPlane and KamajiControlPlaneTemplate types (v1alpha2, v1alpha1);
//! - [`crd`]: their CRDs, generated from the types; [`install`]: every object `install` applies;
//! - [`provider`]: the same objects as clusterctl's release assets (`components.yaml`, `metadata.yaml`);
//! - [`tcp`]: the TenantControlPlane built from a KamajiControlPlane and its Cluster;
//! - [`endpoint`], [`infra`]: the control-plane endpoint and the infrastructure-cluster patch;
//! - [`version`]: walking a TenantControlPlane up one minor at a time.

pub mod api;
pub mod crd;
pub mod endpoint;
pub mod infra;
pub mod install;
pub mod provider;
pub mod tcp;
pub mod version;

pub use crd::{contract_labels, crds, try_crds};
pub use install::{DEFAULT_IMAGE, DEFAULT_NAMESPACE, install_manifests, uninstall_manifests};
