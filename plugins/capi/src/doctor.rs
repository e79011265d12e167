//! `kubectl capi doctor`: the fleet report (shared with `kubectl kamaji doctor`; see `cli::doctor`).
pub use cli::doctor::{Args, run};
