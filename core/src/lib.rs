//! The pure core of `kubectl capi`, `kubectl kamaji` and the KamajiControlPlane reconciler.
//!
//! Everything here is a function of its inputs: API objects as the server returns them
//! (`serde_json::Value`, so both CAPI contracts, v1beta1 and v1beta2, and every provider fork
//! work), flags already parsed into plain values, and the current time passed in. Nothing here
//! talks to a server, parses flags or prints; `cargo tree -p capi-kamaji-core` shows no tokio,
//! kube client, hyper or clap, and a test keeps it that way.
//!
//! - [`groups`], [`labels`]: API groups, contract levels, well-known labels;
//! - [`json`], [`fields`]: reading objects, including fields that moved between contracts;
//! - [`condition`]: the one condition model; [`version`]: the one Kubernetes version type;
//! - [`doctor`]: what is wrong across the fleet, from one read of each kind;
//! - [`plan`]: every plan a verb shows before it acts; [`build`]: the objects a verb creates;
//! - [`kamaji`]: everything about Kamaji and its control-plane provider; [`ops`]: our
//!   ClusterUpgrade and FleetUpgrade API; [`install`]: the reconciler's install manifests, which
//!   carry both; `crd` (crate-private): what every CRD we generate goes through.

// Every `pub` item is reachable from outside, so `core/public-api.txt` (tests/tests/layers.rs)
// lists what other crates can use, and what only the core uses is `pub(crate)`.
#![warn(unreachable_pub)]

pub mod build;
pub mod condition;
pub(crate) mod crd;
pub mod doctor;
pub mod error;
pub mod fields;
pub mod groups;
pub mod init;
pub mod install;
pub mod json;
pub mod kamaji;
pub mod labels;
pub mod names;
pub mod ops;
pub mod plan;
pub mod text;
pub mod version;
pub mod yaml;

pub use error::Error;
