//! How far a Deployment's rollout has come, read the way `kubectl rollout status` reads it
//! (kubectl v1.35, `pkg/polymorphichelpers/rollout_status.go`, its Deployment viewer): the
//! controller must have seen the current spec, every replica must run the current template,
//! old ones must be gone and the new ones available. A Deployment whose Progressing condition
//! says its deadline passed will not finish by waiting longer.

use serde_json::Value;

use crate::condition;
use crate::json::{i64_at, str_at};

/// A Deployment's rollout, as one reading of the object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeploymentRollout {
    /// Every replica runs the current template and is available.
    Done,
    /// Still under way: what it waits for, in a few words.
    Waiting(String),
    /// Its progress deadline passed (the Progressing condition's `ProgressDeadlineExceeded`).
    Stalled(String),
}

/// Reads the rollout of the Deployment `d` as the API server returned it.
pub fn deployment_rollout(d: &Value) -> DeploymentRollout {
    let generation = i64_at(d, &["metadata", "generation"]).unwrap_or(0);
    let observed = i64_at(d, &["status", "observedGeneration"]).unwrap_or(0);
    if observed < generation {
        return DeploymentRollout::Waiting(
            "the deployment controller has not seen the new spec yet".into(),
        );
    }
    let progressing = condition::conditions_at(d, &["status", "conditions"])
        .into_iter()
        .find(|c| c.type_ == "Progressing");
    if let Some(c) = progressing.filter(|c| c.reason.as_deref() == Some("ProgressDeadlineExceeded"))
    {
        let name = str_at(d, &["metadata", "name"]).unwrap_or("the deployment");
        let why = c.message.unwrap_or_else(|| "no progress".into());
        return DeploymentRollout::Stalled(format!("{name} exceeded its progress deadline: {why}"));
    }
    // A Deployment without spec.replicas runs the API server's default of 1.
    let wanted = i64_at(d, &["spec", "replicas"]).unwrap_or(1);
    let status = |k: &str| i64_at(d, &["status", k]).unwrap_or(0);
    let (replicas, updated, available) = (
        status("replicas"),
        status("updatedReplicas"),
        status("availableReplicas"),
    );
    if updated < wanted {
        DeploymentRollout::Waiting(format!("{updated} of {wanted} new replicas updated"))
    } else if replicas > updated {
        DeploymentRollout::Waiting(format!(
            "{} old replicas pending termination",
            replicas.saturating_sub(updated)
        ))
    } else if available < updated {
        DeploymentRollout::Waiting(format!(
            "{available} of {updated} updated replicas available"
        ))
    } else {
        DeploymentRollout::Done
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deployment(generation: i64, observed: i64, wanted: i64, status: [i64; 3]) -> Value {
        json!({
            "metadata": {"name": "kamaji-reconciler", "generation": generation},
            "spec": {"replicas": wanted},
            "status": {
                "observedGeneration": observed,
                "replicas": status[0], "updatedReplicas": status[1], "availableReplicas": status[2],
            }
        })
    }

    #[test]
    fn a_rollout_is_done_when_every_replica_is_new_and_available() {
        assert_eq!(
            deployment_rollout(&deployment(2, 2, 2, [2, 2, 2])),
            DeploymentRollout::Done
        );
    }

    #[test]
    fn each_stage_of_a_rollout_says_what_it_waits_for() {
        let waits = |d: Value| match deployment_rollout(&d) {
            DeploymentRollout::Waiting(w) => w,
            other => panic!("{other:?}"),
        };
        assert!(waits(deployment(3, 2, 2, [2, 2, 2])).contains("not seen the new spec"));
        assert_eq!(
            waits(deployment(2, 2, 2, [3, 1, 2])),
            "1 of 2 new replicas updated"
        );
        assert_eq!(
            waits(deployment(2, 2, 2, [3, 2, 2])),
            "1 old replicas pending termination"
        );
        assert_eq!(
            waits(deployment(2, 2, 2, [2, 2, 1])),
            "1 of 2 updated replicas available"
        );
        // A Deployment the controller has not written a status for yet.
        let fresh = json!({"metadata": {"name": "r", "generation": 1}, "spec": {}});
        assert!(waits(fresh).contains("not seen the new spec"));
    }

    #[test]
    fn a_passed_progress_deadline_is_a_stall_not_a_wait() {
        let mut d = deployment(2, 2, 1, [1, 1, 0]);
        d["status"]["conditions"] = json!([{
            "type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded",
            "message": "ReplicaSet \"r-1\" has timed out progressing."
        }]);
        match deployment_rollout(&d) {
            DeploymentRollout::Stalled(s) => {
                assert!(s.starts_with("kamaji-reconciler exceeded"), "{s}")
            }
            other => panic!("{other:?}"),
        }
    }
}
