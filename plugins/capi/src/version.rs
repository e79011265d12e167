//! `kubectl capi version`.
pub use cli::verbs::version::{Args, run};
