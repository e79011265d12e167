//! `kubectl capi version`.
pub use shared::verbs::version::{Args, run};
