//! Long operations carried out in the cluster: our own API group `ops.capi-kamaji.io`
//! (`api`), its CRDs (`crd`), and the pure decisions the reconciler takes on a ClusterUpgrade
//! (`run`). The plan is the one `kubectl capi upgrade --plan` prints (`plan::upgrade`); what runs
//! it is the reconciler, so an upgrade survives a closed terminal.

pub mod api;
pub mod crd;
pub mod fleet;
pub mod run;
pub mod summary;

pub use api::{
    ClusterUpgrade, ClusterUpgradeSpec, ClusterUpgradeStatus, FleetUpgrade, FleetUpgradeSpec,
    FleetUpgradeStatus,
};
pub use crd::{crds, try_crds};

/// The API group.
pub const GROUP: &str = crate::groups::OPS_GROUP;
/// The served (and stored) version.
pub const VERSION: &str = "v1alpha1";

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
