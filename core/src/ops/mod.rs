//! Long operations carried out in the cluster: our own API group `ops.capi-kamaji.io`
//! (`api`), its CRDs (`crd`), and the pure decisions the reconciler takes on a ClusterUpgrade
//! (`run`), and the TenantBackup's schedule (`backup`). The plan is the one `kubectl capi upgrade --plan` prints (`plan::upgrade`); what runs
//! it is the reconciler, so an upgrade survives a closed terminal.

pub mod api;
pub mod backup;
pub mod crd;
pub mod fleet;
pub mod run;
pub mod summary;

pub use api::{
    ClusterUpgrade, ClusterUpgradeSpec, ClusterUpgradeStatus, FleetUpgrade, FleetUpgradeSpec,
    FleetUpgradeStatus,
};
pub use backup::{TenantBackup, TenantBackupSpec, TenantBackupStatus};
pub use crd::{crds, try_crds};

/// The API group.
pub const GROUP: &str = crate::groups::OPS_GROUP;
/// The served (and stored) version.
pub const VERSION: &str = "v1alpha1";

/// The reasons (`status.conditions[].reason` and the Event's) for input the reconciler cannot
/// act on. It reports them once and waits for the object (or, for a missing Cluster, the
/// Cluster) to change, instead of retrying.
pub mod reason {
    /// A ClusterUpgrade names a Cluster its namespace does not hold.
    pub const CLUSTER_NOT_FOUND: &str = "ClusterNotFound";
    /// A FleetUpgrade's `spec.selector` is no label selector.
    pub const INVALID_SELECTOR: &str = "InvalidSelector";
    /// A FleetUpgrade's selector picks no Cluster.
    pub const NO_CLUSTER_SELECTED: &str = "NoClusterSelected";
    /// No plan can be made from the spec and the cluster (a downgrade, an unknown version...).
    pub const PLAN_FAILED: &str = "PlanFailed";
    /// The preflight blocks the plan (too few spare BYOH hosts); `spec.force` goes ahead.
    pub(crate) const PREFLIGHT_FAILED: &str = "PreflightFailed";
}

/// The phases of a ClusterUpgrade, as `status.phase` spells them.
pub mod phase {
    pub const PENDING: &str = "Pending";
    pub const RUNNING: &str = "Running";
    pub const PAUSED: &str = "Paused";
    pub const SUCCEEDED: &str = "Succeeded";
    pub const FAILED: &str = "Failed";
    pub const CANCELLED: &str = "Cancelled";

    /// Whether nothing more happens in this phase until the spec changes.
    pub fn is_terminal(p: &str) -> bool {
        matches!(p, SUCCEEDED | FAILED | CANCELLED)
    }
}
