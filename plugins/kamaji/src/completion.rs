//! `kubectl kamaji completion bash|zsh|fish`.
pub use shared::verbs::completion::{Args, run};
