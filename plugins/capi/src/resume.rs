//! `kubectl capi resume CLUSTER`: clears the Cluster's `spec.paused` (see `pause`).

pub use crate::pause::Args;

pub async fn run(args: &Args) -> Result<(), shared::error::Error> {
    crate::pause::run(args, false).await
}
