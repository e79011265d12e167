//! The request of `kubectl capi upgrade CLUSTER --to VERSION`, which `cluster` plans and applies
//! and `hand_over` gives to the reconciler: a module of its own so that neither imports the
//! other.

use std::time::Duration;

use cli::{DryRun, KubeFlags, OutputFlags};
use kcore::version::KubeVersion;

/// `kubectl capi upgrade CLUSTER --to VERSION`, checked: the cluster and a well-formed version
/// are there.
pub struct ClusterRequest {
    pub cluster: String,
    /// The Kubernetes version to reach, e.g. v1.34.2.
    pub to: KubeVersion,
    /// `--plan`: print the plan and change nothing.
    pub plan: bool,
    pub control_plane_only: bool,
    pub workers_only: bool,
    pub yes: bool,
    pub force: bool,
    pub client_side: bool,
    pub wait: bool,
    pub max_parallel_deployments: Option<u32>,
    pub timeout: Duration,
    pub dry_run: DryRun,
    pub output: OutputFlags,
    pub kube: KubeFlags,
}
