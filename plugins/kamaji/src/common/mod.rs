//! What the verbs share, one subject a module: no verb imports another verb, so what two verbs
//! need lives here.
//!
//! - [`control_plane`]: which control plane a NAME means (the KamajiControlPlane, its
//!   TenantControlPlane, its Cluster); [`control_plane_row`]: one in a row, as `list` prints it;
//!   [`tenant_status`]: what Kamaji reports (phases, endpoint).
//! - [`datastores`]: Kamaji's DataStores, their certificates, and an etcd one dialled from here.
//! - [`secrets`]: a control plane's Secrets, read, or deleted for Kamaji to re-issue;
//!   [`tenant_kubeconfig`]: the tenant's admin kubeconfig and a client made from it.
//! - [`writes`]: apply and patches with the field manager `kubectl-kamaji`;
//!   [`api_versions`]: the versions a new cluster's or class's objects are written at.
//! - [`spec_flags`]: the flags `create` and `generate clusterclass` share; [`clastix`]: cobra's
//!   flag values, as clastix's plugin takes them.
//! - [`age`]: kubectl's AGE.

pub mod age;
pub mod api_versions;
pub mod clastix;
pub mod control_plane;
pub mod control_plane_row;
pub mod datastores;
pub mod secrets;
pub mod spec_flags;
pub mod tenant_backup;
pub mod tenant_delete;
pub mod tenant_kubeconfig;
pub mod tenant_status;
pub mod writes;
