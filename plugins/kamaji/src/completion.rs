//! `kubectl kamaji completion bash|zsh|fish`.
pub use cli::verbs::completion::{Args, run};
