//! The KamajiControlPlane API, field for field compatible with CACPPK:
//! `v1alpha2` (CAPI v1beta2 contract, storage) and `v1alpha1` (CAPI v1beta1 contract).

pub mod common;
pub mod v1alpha1;
pub mod v1alpha2;

pub use common::*;

/// API group of KamajiControlPlane and KamajiControlPlaneTemplate.
pub const GROUP: &str = crate::groups::CONTROLPLANE_GROUP;
