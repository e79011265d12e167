//! Pure planning logic behind the `kubectl capi` verbs: no I/O, no API calls, no printing.
//!
//! Inputs are `serde_json::Value` objects exactly as the API server returns them (so every CAPI
//! contract version and BYOH fork works), outputs are plain `Serialize` structs that the render
//! code prints as tables, JSON or YAML.

pub mod hosts;
pub mod selector;
pub mod template;

pub mod util;
