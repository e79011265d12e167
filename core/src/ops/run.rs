//! The pure side of carrying out a ClusterUpgrade: the plan in status form, what to do next
//! given what runs, and the status changes each decision makes. The reconciler reads, calls
//! [`decide`], writes the status, then patches; nothing here touches the API.
//!
//! Why no step runs twice: a step is started only when the observed versions say it is not
//! done, the step numbers under way are written to status *before* any patch is sent, and a
//! restarted reconciler finds them there. It then re-sends only a patch that did not land (the
//! object's spec does not hold the step's values yet) and otherwise waits.

use std::collections::BTreeMap;

use serde_json::Value;

use super::api::{
    ClusterUpgradeSpec, ClusterUpgradeStatus, Condition, HistoryEntry, PlanFinding, PlannedClone,
    PlannedPatch, PlannedStep, StepStatus,
};
use super::phase;
use crate::plan::Severity;
use crate::plan::upgrade::{
    Observed, StepRole, UpgradeError, UpgradePlan, UpgradeRequest, step_reached,
};
use crate::version::releases::{ReleaseSource, Releases};
use crate::version::{KubeVersion, parse_version};

/// At most this many earlier upgrades are kept in `status.history`.
pub(crate) const MAX_HISTORY: usize = 10;

/// The request the plan is made from: the patch releases the ClusterUpgrade recorded over the
/// shipped table. Refused when `spec.version` is no Kubernetes version ([`parse_version`]).
pub fn request(spec: &ClusterUpgradeSpec) -> Result<UpgradeRequest, UpgradeError> {
    Ok(UpgradeRequest {
        control_plane_only: spec.control_plane_only,
        workers_only: spec.workers_only,
        force: spec.force,
        releases: Releases::shipped().with(&spec.patch_releases, ReleaseSource::Recorded),
        ..UpgradeRequest::new(parse_version(&spec.version)?)
    })
}

fn role_name(r: StepRole) -> String {
    match r {
        StepRole::ControlPlane => "ControlPlane",
        StepRole::Workers => "Workers",
        StepRole::Topology => "Topology",
    }
    .to_string()
}

fn role_of(s: &PlannedStep) -> StepRole {
    match s.role.as_str() {
        "ControlPlane" => StepRole::ControlPlane,
        "Topology" => StepRole::Topology,
        _ => StepRole::Workers,
    }
}

/// The plan as status holds it: the steps `--plan` prints, with their patches and clones.
pub(crate) fn planned_steps(plan: &UpgradePlan) -> Vec<PlannedStep> {
    plan.steps
        .iter()
        .map(|s| PlannedStep {
            number: u32::try_from(s.number).unwrap_or(u32::MAX),
            role: role_name(s.role),
            target: s.target.clone(),
            from_version: s.from_version.to_string(),
            to_version: s.to_version.to_string(),
            via: s.via.iter().map(ToString::to_string).collect(),
            stepped_by_reconciler: s.stepped_by_reconciler,
            wait_for: s.wait_for.clone(),
            patch: PlannedPatch {
                api_version: s.patch.api_version.clone(),
                kind: s.patch.kind.clone(),
                name: s.patch.name.clone(),
                json_patch: s.patch.json_patch.clone(),
            },
            clone_templates: s
                .clone_templates
                .iter()
                .map(|c| PlannedClone {
                    kind: c.kind.clone(),
                    source_name: c.source_name.clone(),
                    new_name: c.new_name.clone(),
                    object: c.object.clone(),
                })
                .collect(),
        })
        .collect()
}

/// A fresh status for a new plan of `generation`, keeping the history (and the upgrade this
/// one replaces, if it had started).
pub fn fresh_status(
    plan: &UpgradePlan,
    generation: Option<i64>,
    previous: Option<&ClusterUpgradeStatus>,
    target: &str,
    now: &str,
) -> ClusterUpgradeStatus {
    let mut history = previous.map(|p| p.history.clone()).unwrap_or_default();
    if let Some(p) = previous
        && p.started_at.is_some()
        && let Some(version) = p.path.last()
    {
        history.push(HistoryEntry {
            version: version.clone(),
            from_version: p.from_version.clone(),
            phase: p.phase.clone().unwrap_or_default(),
            started_at: p.started_at.clone(),
            completed_at: p.completed_at.clone(),
            message: p.message.clone(),
        });
    }
    let excess = history.len().saturating_sub(MAX_HISTORY);
    history.drain(..excess);
    let steps = planned_steps(plan);
    let mut st = ClusterUpgradeStatus {
        observed_generation: generation,
        phase: Some(phase::PENDING.into()),
        from_version: Some(plan.from_version.to_string()),
        path: plan.path.iter().map(ToString::to_string).collect(),
        findings: plan
            .findings
            .iter()
            .map(|f| PlanFinding {
                severity: match f.severity {
                    Severity::Info => "info",
                    Severity::Warning => "warning",
                    Severity::Error => "error",
                }
                .into(),
                message: f.message.clone(),
            })
            .collect(),
        steps: steps
            .iter()
            .map(|s| StepStatus {
                number: s.number,
                phase: "Pending".into(),
                ..Default::default()
            })
            .collect(),
        plan: steps,
        started_at: Some(now.to_string()),
        history,
        ..Default::default()
    };
    if plan.blocked {
        let blocking = plan.blocking();
        st.finish(
            phase::FAILED,
            super::reason::PREFLIGHT_FAILED,
            &format!(
                "the upgrade preflight failed: {}; set spec.force to go ahead anyway",
                blocking.join("; ")
            ),
            now,
        );
    } else {
        st.set_progressing(
            "Planned",
            &format!("upgrading {target} to {}", plan.to_version),
            now,
        );
    }
    st
}

/// What runs, for [`decide`].
pub struct Observation<'a> {
    pub observed: &'a Observed,
    /// The Cluster, its control plane and MachineDeployments, by `Kind/name`.
    pub objects: BTreeMap<String, &'a Value>,
}

/// The next thing to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Every step is done.
    Finished,
    /// Start these steps: record them as running in status, then apply them.
    Start(Vec<u32>),
    /// These running steps' patches have not landed (an interrupted apply): send them again.
    Apply(Vec<u32>),
    /// These running steps have reached their version everywhere.
    Completed(Vec<u32>),
    /// Steps are rolling out; nothing to do until something changes.
    Wait(String),
}

fn step(plan: &[PlannedStep], n: u32) -> Option<&PlannedStep> {
    plan.iter().find(|s| s.number == n)
}

/// Whether every value of the step's patch is in place on its object (the patch landed).
pub fn applied(s: &PlannedStep, obj: Option<&Value>) -> bool {
    let Some(obj) = obj else { return false };
    s.patch
        .json_patch
        .as_array()
        .into_iter()
        .flatten()
        .all(|op| match (op["path"].as_str(), op.get("value")) {
            (Some(path), Some(v)) => obj.pointer(path) == Some(v),
            _ => true,
        })
}

fn done_by_observed(s: &PlannedStep, observed: &Observed) -> bool {
    let to = parse_version(&s.to_version).ok();
    matches!((observed.get(&s.target), to), (Some(o), Some(t)) if o >= t)
}

/// What to do next. `current` are the steps recorded as running, `completed` those recorded
/// done (an empty MachineDeployment has no Machines to observe, so its steps are never "done"
/// by observation alone); `max_parallel` is how many MachineDeployments of one minor roll at
/// once.
pub fn decide(
    plan: &[PlannedStep],
    current: &[u32],
    completed: &[u32],
    obs: &Observation,
    max_parallel: u32,
) -> Decision {
    if !current.is_empty() {
        let mut waiting = Vec::new();
        let mut resend = Vec::new();
        for &n in current {
            let Some(s) = step(plan, n) else { continue };
            let obj = obs.objects.get(&s.target).copied();
            let to = parse_version(&s.to_version).unwrap_or_else(|_| KubeVersion::new(0, 0, 0));
            let (reached, words) = step_reached(
                role_of(s),
                &s.target,
                obj,
                obs.observed.get(&s.target).as_ref(),
                &to,
            );
            if reached {
                continue;
            }
            if !applied(s, obj) && obj.is_some() {
                resend.push(n);
            }
            waiting.push(format!(
                "step {n} ({} -> {}): {words}",
                s.target, s.to_version
            ));
        }
        if !resend.is_empty() {
            return Decision::Apply(resend);
        }
        if waiting.is_empty() {
            return Decision::Completed(current.to_vec());
        }
        return Decision::Wait(waiting.join("; "));
    }
    let remaining: Vec<&PlannedStep> = plan
        .iter()
        .filter(|s| !completed.contains(&s.number) && !done_by_observed(s, obs.observed))
        .collect();
    let Some(first) = remaining.first() else {
        return Decision::Finished;
    };
    let mut batch = vec![first.number];
    if role_of(first) == StepRole::Workers {
        for s in remaining.iter().skip(1) {
            if batch.len() >= max_parallel.max(1) as usize
                || role_of(s) != StepRole::Workers
                || s.to_version != first.to_version
            {
                break;
            }
            batch.push(s.number);
        }
    }
    Decision::Start(batch)
}

impl ClusterUpgradeStatus {
    fn step_mut(&mut self, n: u32) -> Option<&mut StepStatus> {
        self.steps.iter_mut().find(|s| s.number == n)
    }

    /// The steps recorded done.
    pub fn completed_steps(&self) -> Vec<u32> {
        self.steps
            .iter()
            .filter(|s| s.phase == "Succeeded")
            .map(|s| s.number)
            .collect()
    }

    fn done_count(&self) -> usize {
        self.steps.iter().filter(|s| s.phase == "Succeeded").count()
    }

    fn update_progress(&mut self) {
        self.progress = Some(format!("{}/{}", self.done_count(), self.plan.len()));
    }

    /// Records `numbers` as running (before their patches are sent).
    pub fn start(&mut self, numbers: &[u32], now: &str) {
        for &n in numbers {
            if let Some(s) = self.step_mut(n) {
                s.phase = "Running".into();
                s.reason = "Applying".into();
                s.started_at.get_or_insert_with(|| now.to_string());
            }
        }
        self.current_steps = numbers.to_vec();
        self.phase = Some(phase::RUNNING.into());
        self.update_progress();
    }

    /// Notes where the running steps stand.
    pub fn rolling(&mut self, message: &str, now: &str) {
        for n in self.current_steps.clone() {
            if let Some(s) = self.step_mut(n) {
                s.reason = "RollingOut".into();
            }
        }
        self.phase = Some(phase::RUNNING.into());
        self.message = Some(message.to_string());
        self.set_progressing("RollingOut", message, now);
        self.update_progress();
    }

    /// Marks `numbers` done.
    pub fn complete(&mut self, numbers: &[u32], now: &str) {
        for &n in numbers {
            if let Some(s) = self.step_mut(n) {
                s.phase = "Succeeded".into();
                s.reason = "Reached".into();
                s.message.clear();
                s.started_at.get_or_insert_with(|| now.to_string());
                s.completed_at = Some(now.to_string());
            }
        }
        self.current_steps.retain(|n| !numbers.contains(n));
        self.update_progress();
    }

    /// Marks every step not yet done as done by someone else (observed already at its version).
    pub fn complete_all(&mut self, now: &str) {
        let all: Vec<u32> = self
            .steps
            .iter()
            .filter(|s| s.phase != "Succeeded")
            .map(|s| s.number)
            .collect();
        self.complete(&all, now);
    }

    /// Ends the upgrade in a terminal phase.
    pub fn finish(&mut self, phase_: &str, reason: &str, message: &str, now: &str) {
        self.phase = Some(phase_.to_string());
        self.message = Some(message.to_string());
        self.completed_at = Some(now.to_string());
        self.current_steps.clear();
        let ready = phase_ == phase::SUCCEEDED;
        self.set_condition("Ready", ready, reason, message, now);
        self.set_condition("Progressing", false, reason, message, now);
        self.update_progress();
    }

    /// Pauses: no step starts until `spec.paused` is false again.
    pub fn pause(&mut self, now: &str) {
        let m = "paused: no further step starts until spec.paused is false";
        self.phase = Some(phase::PAUSED.into());
        self.message = Some(m.into());
        self.set_condition("Progressing", false, "Paused", m, now);
    }

    fn set_progressing(&mut self, reason: &str, message: &str, now: &str) {
        self.set_condition("Progressing", true, reason, message, now);
        self.set_condition("Ready", false, reason, message, now);
    }

    /// Reports input the reconciler cannot act on (`reason`, see [`super::reason`]): not Ready,
    /// not Progressing, and the phase Pending if nothing started yet. The plan, if any, stays,
    /// so the upgrade goes on once the input is fixed. `true` when this is news (the reason was
    /// not reported already for this generation): the caller then publishes an Event.
    pub fn cannot_act(
        &mut self,
        generation: Option<i64>,
        reason: &str,
        message: &str,
        now: &str,
    ) -> bool {
        let news = !self.conditions.iter().any(|c| {
            c.type_ == "Ready" && c.reason == reason && c.observed_generation == generation
        });
        self.observed_generation = generation;
        if self.phase.is_none() {
            self.phase = Some(phase::PENDING.into());
        }
        self.message = Some(message.to_string());
        self.set_condition("Ready", false, reason, message, now);
        self.set_condition("Progressing", false, reason, message, now);
        news
    }

    fn set_condition(&mut self, type_: &str, ok: bool, reason: &str, message: &str, now: &str) {
        let generation = self.observed_generation;
        set_condition(
            &mut self.conditions,
            generation,
            type_,
            ok,
            (reason, message),
            now,
        );
    }
}

/// Sets the condition `type_` (adding it if missing); its transition time moves only when its
/// status does.
pub(crate) fn set_condition(
    conditions: &mut Vec<Condition>,
    generation: Option<i64>,
    type_: &str,
    ok: bool,
    (reason, message): (&str, &str),
    now: &str,
) {
    let status = if ok { "True" } else { "False" }.to_string();
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(c) => {
            if c.status != status {
                c.last_transition_time = now.to_string();
            }
            c.status = status;
            c.reason = reason.to_string();
            c.message = message.to_string();
            c.observed_generation = generation;
        }
        None => conditions.push(Condition {
            type_: type_.to_string(),
            status,
            observed_generation: generation,
            last_transition_time: now.to_string(),
            reason: reason.to_string(),
            message: message.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests;
