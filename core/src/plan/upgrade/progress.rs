//! Whether a step has reached its version: the one test both `kubectl capi upgrade` (waiting in
//! the terminal) and the reconciler (carrying out a ClusterUpgrade) apply.

use serde_json::Value;

use super::StepRole;
use crate::fields::{self, Replicas};
use crate::version::KubeVersion;

/// The step object's replicas: a ClusterClass cluster's control plane and workers together.
fn step_replicas(role: StepRole, o: &Value) -> Replicas {
    if role != StepRole::Topology {
        return fields::replicas(o);
    }
    let cp = fields::cluster_control_plane_replicas(o);
    let w = fields::cluster_worker_replicas(o);
    let sum = |a: Option<i64>, b: Option<i64>| a.unwrap_or(0).saturating_add(b.unwrap_or(0));
    Replicas {
        desired: Some(sum(cp.desired, w.desired)),
        current: Some(sum(cp.current, w.current)),
        ready: Some(sum(cp.ready, w.ready)),
        available: None,
        up_to_date: Some(sum(cp.up_to_date, w.up_to_date)),
    }
}

/// Whether the step is reached (the observed version is at least `to`, every replica current,
/// ready and up to date), and where it stands in words.
pub fn step_reached(
    role: StepRole,
    target: &str,
    obj: Option<&Value>,
    observed: Option<&KubeVersion>,
    to: &KubeVersion,
) -> (bool, String) {
    let Some(o) = obj else {
        return (false, format!("{target} not found"));
    };
    let r = step_replicas(role, o);
    let desired = r.desired.unwrap_or(0);
    let version_ok = match observed {
        Some(v) => v >= to,
        // Nothing runs to observe: only an empty deployment is trivially done; a
        // ClusterClass cluster must report its versions first.
        None => desired == 0 && role != StepRole::Topology,
    };
    let settled = r.current.unwrap_or(desired) == desired
        && r.ready.unwrap_or(desired) == desired
        && r.up_to_date.unwrap_or(desired) == desired;
    (
        version_ok && settled,
        format!(
            "runs {}, {}/{desired} up to date, {} ready",
            observed
                .map(|v| v.to_string())
                .unwrap_or_else(|| "?".into()),
            r.up_to_date.unwrap_or(0),
            r.ready.unwrap_or(0)
        ),
    )
}
