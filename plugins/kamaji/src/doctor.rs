//! `kubectl kamaji doctor`: the fleet report (shared with `kubectl capi doctor`; see `cli::doctor`).
pub use cli::doctor::{Args, run};
