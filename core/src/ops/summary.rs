//! A ClusterUpgrade in one line, for the views of one cluster (`kubectl capi describe`,
//! `kubectl kamaji status`): where an upgrade under way stands, and the command that shows
//! the whole of it.
//!
//! What is shown: an upgrade not finished (phase Pending, Running or Paused, or a status the
//! reconciler has not yet written for the current spec), and a Failed one, since a failure
//! leaves the cluster between versions until someone acts. A Succeeded or Cancelled upgrade
//! is not shown: nothing is left to do about it, and `kubectl capi upgrade status` keeps its
//! result and history.

use serde::Serialize;
use serde_json::Value;

use super::api::{ClusterUpgradeSpec, ClusterUpgradeStatus};
use super::phase;

/// Characters of the status message shown; a longer one is cut with " ...".
const MESSAGE_CHARS: usize = 120;

/// What the views of a cluster show of its ClusterUpgrade (`upgrade` in `-o json|yaml`).
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct UpgradeSummary {
    /// The ClusterUpgrade's name, which is its cluster's.
    pub name: String,
    /// The version it upgrades to.
    pub version: String,
    /// `status.phase`; Pending while the reconciler has not planned the current spec.
    pub phase: String,
    /// Steps done of the plan (`N/M`), once there is a plan.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub progress: Option<String>,
    /// The steps rolling now.
    pub current_steps: Vec<u32>,
    /// Steps in the plan (0 before it is made).
    pub steps: usize,
    /// The status message, or what the upgrade waits for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// `spec.paused`.
    pub paused: bool,
    /// `spec.cancelled`.
    pub cancelled: bool,
    /// Whether the status is about the current spec (the reconciler has seen it).
    pub observed: bool,
    /// Whether it is still under way (false for a Failed one).
    pub in_flight: bool,
    /// The line, without the `Upgrade: ` label: `to v1.35.2, Running, step 2/4: ...
    /// (kubectl capi upgrade status NAME)`.
    pub summary: String,
}

impl UpgradeSummary {
    /// The line with its label: `Upgrade: to v1.35.2, Running, step 2/4: ...`.
    pub fn line(&self) -> String {
        format!("Upgrade: {}", self.summary)
    }
}

/// The first line of `s`, cut at [`MESSAGE_CHARS`].
fn one_line(s: &str) -> String {
    let first = s.lines().next().unwrap_or("").trim();
    let mut out: String = first.chars().take(MESSAGE_CHARS).collect();
    if s.trim().lines().count() > 1 || first.chars().count() > MESSAGE_CHARS {
        out.push_str(" ...");
    }
    out
}

/// Whether the status is about the spec's generation.
fn is_observed(cu: &Value, st: &ClusterUpgradeStatus) -> bool {
    match (
        st.observed_generation,
        cu["metadata"]["generation"].as_i64(),
    ) {
        (Some(o), Some(g)) => o == g,
        (Some(_), None) => true,
        (None, _) => false,
    }
}

/// Steps in the plan: its length, else the `M` of `N/M`.
fn total_steps(st: &ClusterUpgradeStatus) -> usize {
    if !st.plan.is_empty() {
        return st.plan.len();
    }
    st.progress
        .as_deref()
        .and_then(|p| p.split_once('/'))
        .and_then(|(_, m)| m.trim().parse().ok())
        .unwrap_or(0)
}

/// ", step 2/4", ", steps 2,3/4", ", 1/4 steps done" or nothing.
fn position(s: &UpgradeSummary) -> String {
    let numbers: Vec<String> = s.current_steps.iter().map(u32::to_string).collect();
    match (numbers.as_slice(), &s.progress) {
        ([one], _) => format!(", step {one}/{}", s.steps),
        ([], Some(p)) => format!(", {p} steps done"),
        ([], None) => String::new(),
        (many, _) => format!(", steps {}/{}", many.join(","), s.steps),
    }
}

/// " (cancel requested)" or " (pause requested)" while the status has not caught up.
fn requested(s: &UpgradeSummary) -> &'static str {
    if s.cancelled && s.in_flight {
        " (cancel requested)"
    } else if s.paused && s.in_flight && s.phase != phase::PAUSED {
        " (pause requested)"
    } else {
        ""
    }
}

fn summary_text(s: &UpgradeSummary) -> String {
    let message = s
        .message
        .as_deref()
        .map(|m| format!(": {m}"))
        .unwrap_or_default();
    format!(
        "to {}, {}{}{}{message} (kubectl capi upgrade status {})",
        s.version,
        s.phase,
        requested(s),
        position(s),
        s.name
    )
}

/// The summary of a ClusterUpgrade as the API server returns it; `None` when it is not shown
/// (Succeeded or Cancelled, for its current spec: see the module comment).
pub fn summarize(cu: &Value) -> Option<UpgradeSummary> {
    let spec: ClusterUpgradeSpec = serde_json::from_value(cu["spec"].clone()).unwrap_or_default();
    let st: ClusterUpgradeStatus = serde_json::from_value(cu["status"].clone()).unwrap_or_default();
    let observed = is_observed(cu, &st);
    let recorded = st.phase.clone().unwrap_or_else(|| phase::PENDING.into());
    // A status about an earlier spec still tells where a rollout under way stands (a pause or
    // cancel just asked for); a finished one is about another upgrade, which has not begun.
    let current = observed || !phase::is_terminal(&recorded);
    if observed && matches!(recorded.as_str(), phase::SUCCEEDED | phase::CANCELLED) {
        return None;
    }
    let mut s = UpgradeSummary {
        name: cu["metadata"]["name"].as_str().unwrap_or_default().into(),
        version: spec.version,
        phase: if current {
            recorded
        } else {
            phase::PENDING.into()
        },
        progress: st.progress.clone().filter(|_| current),
        current_steps: if current {
            st.current_steps.clone()
        } else {
            vec![]
        },
        steps: if current { total_steps(&st) } else { 0 },
        message: st.message.as_deref().filter(|_| current).map(one_line),
        paused: spec.paused,
        cancelled: spec.cancelled,
        observed,
        in_flight: !(observed && phase::is_terminal(&st.phase.unwrap_or_default())),
        summary: String::new(),
    };
    if !observed && s.message.is_none() {
        s.message = Some("waiting for the reconciler to take it up".into());
    }
    s.summary = summary_text(&s);
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cu(generation: i64, status: Value) -> Value {
        json!({
            "apiVersion": "ops.capi-kamaji.io/v1alpha1", "kind": "ClusterUpgrade",
            "metadata": {"name": "prod", "namespace": "default", "generation": generation},
            "spec": {"clusterName": "prod", "version": "v1.35.2"},
            "status": status,
        })
    }

    fn plan(n: u32) -> Value {
        (1..=n)
            .map(|i| {
                json!({"number": i, "role": "ControlPlane", "target": format!("X/{i}"),
                "fromVersion": "v1.33.0", "toVersion": "v1.35.2", "waitFor": "",
                "patch": {"apiVersion": "v1", "kind": "X", "name": "x", "jsonPatch": []}})
            })
            .collect()
    }

    #[test]
    fn a_running_step() {
        let s = summarize(&cu(
            1,
            json!({"observedGeneration": 1, "phase": "Running", "progress": "1/4",
                "currentSteps": [2], "plan": plan(4),
                "message": "KubeadmControlPlane/prod: 2/3 machines at v1.34.5"}),
        ))
        .unwrap();
        assert_eq!(
            s.line(),
            "Upgrade: to v1.35.2, Running, step 2/4: KubeadmControlPlane/prod: 2/3 machines at v1.34.5 (kubectl capi upgrade status prod)"
        );
        assert!(s.in_flight && s.observed);
        assert_eq!((s.steps, s.current_steps.clone()), (4, vec![2]));
    }

    #[test]
    fn parallel_steps_and_a_total_from_progress() {
        let s = summarize(&cu(
            2,
            json!({"observedGeneration": 2, "phase": "Running", "progress": "2/6",
                "currentSteps": [3, 4]}),
        ))
        .unwrap();
        assert_eq!(
            s.summary,
            "to v1.35.2, Running, steps 3,4/6 (kubectl capi upgrade status prod)"
        );
    }

    #[test]
    fn not_yet_taken_up() {
        let s = summarize(&cu(1, Value::Null)).unwrap();
        assert_eq!(
            s.summary,
            "to v1.35.2, Pending: waiting for the reconciler to take it up (kubectl capi upgrade status prod)"
        );
        assert!(s.in_flight && !s.observed);
        assert_eq!((s.progress.clone(), s.steps), (None, 0));
    }

    #[test]
    fn succeeded_and_cancelled_are_not_shown_failed_is() {
        for p in ["Succeeded", "Cancelled"] {
            let v = cu(
                3,
                json!({"observedGeneration": 3, "phase": p, "progress": "4/4"}),
            );
            assert_eq!(summarize(&v), None, "{p}");
        }
        let s = summarize(&cu(
            3,
            json!({"observedGeneration": 3, "phase": "Failed", "progress": "1/4",
                "message": "the upgrade preflight failed: no spare host"}),
        ))
        .unwrap();
        assert!(!s.in_flight);
        assert_eq!(
            s.summary,
            "to v1.35.2, Failed, 1/4 steps done: the upgrade preflight failed: no spare host (kubectl capi upgrade status prod)"
        );
    }

    #[test]
    fn a_finished_upgrade_given_a_new_version_is_pending() {
        let s = summarize(&cu(
            4,
            json!({"observedGeneration": 3, "phase": "Succeeded", "progress": "4/4",
                "message": "upgraded to v1.34.5"}),
        ))
        .unwrap();
        assert_eq!(
            s.summary,
            "to v1.35.2, Pending: waiting for the reconciler to take it up (kubectl capi upgrade status prod)"
        );
        assert!(s.in_flight);
    }

    #[test]
    fn pause_and_cancel_asked_for_but_not_yet_seen() {
        let mut v = cu(
            5,
            json!({"observedGeneration": 4, "phase": "Running", "progress": "1/2",
                "currentSteps": [2], "message": "rolling"}),
        );
        v["spec"]["paused"] = json!(true);
        let s = summarize(&v).unwrap();
        assert_eq!(
            s.summary,
            "to v1.35.2, Running (pause requested), step 2/2: rolling (kubectl capi upgrade status prod)"
        );
        v["spec"]["cancelled"] = json!(true);
        assert!(
            summarize(&v)
                .unwrap()
                .summary
                .starts_with("to v1.35.2, Running (cancel requested), step 2/2")
        );
        // Once paused, the phase says it.
        v["spec"]["cancelled"] = json!(false);
        v["status"]["observedGeneration"] = json!(5);
        v["status"]["phase"] = json!("Paused");
        v["status"]["currentSteps"] = json!([]);
        v["status"]["message"] = json!("paused: no further step starts");
        assert_eq!(
            summarize(&v).unwrap().summary,
            "to v1.35.2, Paused, 1/2 steps done: paused: no further step starts (kubectl capi upgrade status prod)"
        );
    }

    #[test]
    fn a_long_or_multi_line_message_is_cut() {
        let long = "x".repeat(200);
        let s = summarize(&cu(
            1,
            json!({"observedGeneration": 1, "phase": "Running", "message": long}),
        ))
        .unwrap();
        assert_eq!(s.message, Some(format!("{} ...", "x".repeat(120))));
        let s = summarize(&cu(
            1,
            json!({"observedGeneration": 1, "phase": "Running", "message": "first\nsecond"}),
        ))
        .unwrap();
        assert_eq!(s.message.as_deref(), Some("first ..."));
    }

    #[test]
    fn serialized_fields() {
        let s = summarize(&cu(1, json!({"observedGeneration": 1, "phase": "Pending"}))).unwrap();
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(v["phase"], "Pending");
        assert_eq!(v["inFlight"], true);
        assert_eq!(v["currentSteps"], json!([]));
        assert!(v.get("progress").is_none());
        assert!(
            v["summary"]
                .as_str()
                .unwrap()
                .starts_with("to v1.35.2, Pending")
        );
    }
}
