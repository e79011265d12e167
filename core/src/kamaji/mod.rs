//! Everything the suite knows about Kamaji and its Cluster API control-plane provider, in one
//! place, one submodule per subject:
//! - [`api`]: the KamajiControlPlane and KamajiControlPlaneTemplate types (v1alpha2, v1alpha1),
//!   and Kamaji's defaults they state (replicas, Service type, admission controllers);
//! - [`crd`]: their CRDs, generated from the types;
//! - [`version`]: the Kubernetes releases Kamaji runs and the walk one minor at a time it
//!   requires (the reconciler's next step, `kubectl kamaji upgrade`'s steps);
//! - [`endpoint`]: the API server's endpoint: Kamaji's default port, `host:port` parsing, the
//!   endpoint derived from a TenantControlPlane, and what each infrastructure cluster takes;
//! - [`tcp`]: the TenantControlPlane built from a KamajiControlPlane and its Cluster;
//! - [`infra`]: the reconciler's infrastructure-cluster patch table and plan;
//! - [`backup`]: `kubectl kamaji backup` and `restore` (the file's lines and manifest, the
//!   objects carried, a restore's renaming);
//! - [`migrate`]: `kubectl kamaji migrate` (a DataStore as a migration reads it, the preflight,
//!   where Kamaji's migration stands);
//! - [`create`]: `kubectl kamaji create` and `generate clusterclass` (the flags, the
//!   infrastructure providers' registry, the objects they build);
//! - [`plan`]: `kubectl kamaji scale` and `upgrade` (and their ClusterClass topology form);
//! - [`reconcile`]: what one reconcile of a KamajiControlPlane by kamaji-reconciler does,
//!   decided from what it found (conditions, writes, when to look again), with no I/O.
//!
//! The reconciler's install manifests, which also carry our own `ops` CRDs, sit one level up, in
//! [`crate::install`]. No two submodules import each other (`tests/tests/layers.rs`).

pub mod api;
pub mod backup;
pub mod certificates;
pub mod crd;
pub mod create;
pub mod endpoint;
pub mod infra;
pub mod migrate;
pub mod orphans;
pub mod plan;
pub mod reconcile;
pub mod tcp;
pub mod version;
