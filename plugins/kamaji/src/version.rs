//! `kubectl kamaji version`.
pub use shared::verbs::version::{Args, run};
