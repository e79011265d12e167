//! How the plugin writes: every write carries the `kubectl-capi` field manager.

use cli::DryRun;

/// The field manager of every write.
pub const FIELD_MANAGER: &str = "kubectl-capi";

/// How a verb's writes to a cluster's objects are sent: server-side apply takes over fields
/// (these verbs own what they set), `--dry-run=server` sends `dryRun=All`.
pub fn taking_over(dry: DryRun) -> kclient::api::Write<'static> {
    kclient::api::Write {
        manager: FIELD_MANAGER,
        dry_run: dry.server(),
        force: true,
    }
}
