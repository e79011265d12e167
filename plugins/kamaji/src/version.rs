//! `kubectl kamaji version`.
pub use cli::verbs::version::{Args, run};
