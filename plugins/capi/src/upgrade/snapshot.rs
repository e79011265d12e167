//! What one planning round of an upgrade reads of a cluster, and the objects and version a
//! step's progress is measured on (the client-side upgrade's waits and the reconciler's
//! upgrade followed with `--wait` share them).

use kclient::error::Error;
use kcore::plan::upgrade::{Observed, StepRole};
use kcore::version::KubeVersion;
use serde_json::Value;

use crate::common::cluster::ClusterHandle;
use crate::common::cluster_parts::{ClusterParts, fetch};
use crate::common::names::name_of;

/// Everything read for one planning round.
pub(super) struct Snapshot {
    pub(super) objs: ClusterParts,
    machines: Vec<Value>,
}

impl Snapshot {
    pub(super) async fn read(t: &ClusterHandle) -> Result<Snapshot, Error> {
        Ok(Snapshot {
            objs: fetch(t).await?,
            machines: t.machines().await?,
        })
    }
    pub(super) fn observed(&self, t: &ClusterHandle) -> Observed {
        Observed::from_objects(&self.objs.cluster_objects(t), &self.machines)
    }
}

/// The object a step of `role` on `target` (`Kind/name`) changes, as last read.
pub(super) fn role_object(
    t: &ClusterHandle,
    snap: &Snapshot,
    role: StepRole,
    target: &str,
) -> Option<Value> {
    match role {
        StepRole::ControlPlane => snap.objs.control_plane.clone(),
        StepRole::Workers => snap
            .objs
            .machine_deployments
            .iter()
            .find(|m| format!("MachineDeployment/{}", name_of(m)) == target)
            .cloned(),
        StepRole::Topology => Some(t.cluster.clone()),
    }
}

/// The version the cluster runs: its control plane's (a ClusterClass cluster's lowest).
pub(super) fn cluster_runs(
    t: &ClusterHandle,
    snap: &Snapshot,
    observed: &Observed,
) -> Option<KubeVersion> {
    let key = match &snap.objs.control_plane {
        Some(cp) => format!(
            "{}/{}",
            cp.get("kind").and_then(Value::as_str).unwrap_or_default(),
            name_of(cp)
        ),
        None => format!("Cluster/{}", t.name),
    };
    observed.get(&key)
}
