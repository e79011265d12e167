//! The pure side of a FleetUpgrade: who goes in which wave, and what to do next given the
//! phases of the members' ClusterUpgrades.

use super::api::{ClusterUpgradeSpec, FleetMember, FleetUpgradeSpec, FleetUpgradeStatus};
use super::phase;

/// The label that ties a ClusterUpgrade to the FleetUpgrade that created it.
pub const FLEET_LABEL: &str = "ops.capi-kamaji.io/fleet-upgrade";

/// The members in wave order: `canary` clusters alone in wave 1, then groups of `max_parallel`.
/// `clusters` are sorted first, so the waves do not depend on the server's list order.
pub fn waves(mut clusters: Vec<String>, canary: u32, max_parallel: u32) -> Vec<FleetMember> {
    clusters.sort();
    clusters.dedup();
    let canary = canary as usize;
    let width = max_parallel.max(1) as usize;
    clusters
        .into_iter()
        .enumerate()
        .map(|(i, name)| {
            let wave = if i < canary {
                1
            } else {
                let first = usize::from(canary > 0);
                first + (i - canary) / width + 1
            };
            FleetMember {
                name,
                wave: u32::try_from(wave).unwrap_or(u32::MAX),
                phase: "Pending".into(),
                message: String::new(),
            }
        })
        .collect()
}

/// The ClusterUpgrade a fleet asks for one cluster.
pub fn member_spec(fleet: &FleetUpgradeSpec, cluster: &str) -> ClusterUpgradeSpec {
    ClusterUpgradeSpec {
        cluster_name: cluster.to_string(),
        version: fleet.version.clone(),
        max_parallel_machine_deployments: fleet.max_parallel_machine_deployments,
        force: fleet.force,
        patch_releases: fleet.patch_releases.clone(),
        ..Default::default()
    }
}

/// What the fleet does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FleetDecision {
    /// Create (or renew) the ClusterUpgrades of these members.
    Start(Vec<String>),
    /// Members are upgrading; wait.
    Wait,
    /// Paused: start nothing.
    Paused,
    /// A member failed: stop the waves.
    Failed { cluster: String, message: String },
    /// Every member succeeded.
    Succeeded,
}

/// Decides from the members' phases (already updated from their ClusterUpgrades). The next
/// wave starts only when every member of the earlier waves succeeded.
pub fn decide(status: &FleetUpgradeStatus, paused: bool) -> FleetDecision {
    if let Some(m) = status
        .clusters
        .iter()
        .find(|m| m.phase == phase::FAILED || m.phase == phase::CANCELLED)
    {
        return FleetDecision::Failed {
            cluster: m.name.clone(),
            message: m.message.clone(),
        };
    }
    let Some(wave) = status
        .clusters
        .iter()
        .filter(|m| m.phase != phase::SUCCEEDED)
        .map(|m| m.wave)
        .min()
    else {
        return FleetDecision::Succeeded;
    };
    let pending: Vec<String> = status
        .clusters
        .iter()
        .filter(|m| m.wave == wave && m.phase == "Pending")
        .map(|m| m.name.clone())
        .collect();
    if pending.is_empty() {
        FleetDecision::Wait
    } else if paused {
        FleetDecision::Paused
    } else {
        FleetDecision::Start(pending)
    }
}

/// Checks `spec.selector` before it is sent: the reconciler reports a malformed one on the
/// FleetUpgrade instead of retrying a LIST the API server refuses.
pub fn check_selector(selector: &str) -> Result<(), String> {
    crate::plan::selector::LabelSelector::parse(selector)
        .map(|_| ())
        .map_err(|e| {
            format!(
                "spec.selector: {e}; use kubectl -l syntax (env=staging,tier in (web,api),!canary) and edit the FleetUpgrade"
            )
        })
}

impl FleetUpgradeStatus {
    /// A FleetUpgrade that cannot start for `reason` (see [`super::reason`]): Failed for this
    /// generation, with no cluster picked, so a new generation (a fixed spec) picks again.
    pub fn cannot_act(generation: Option<i64>, reason: &str, message: &str, now: &str) -> Self {
        let mut st = FleetUpgradeStatus {
            observed_generation: generation,
            phase: Some(phase::FAILED.into()),
            message: Some(message.to_string()),
            ..Default::default()
        };
        super::run::set_condition(
            &mut st.conditions,
            generation,
            "Ready",
            false,
            (reason, message),
            now,
        );
        st
    }

    /// Whether the clusters must be picked (again): none picked yet, or none picked for an
    /// earlier generation (its selector was malformed or picked nothing; the spec changed).
    pub fn needs_pick(&self, generation: Option<i64>) -> bool {
        self.clusters.is_empty() && (self.phase.is_none() || self.observed_generation != generation)
    }

    /// Whether the `Ready` condition already reports `reason` for `generation` (its Event was
    /// published).
    pub fn reports(&self, generation: Option<i64>, reason: &str) -> bool {
        self.conditions.iter().any(|c| {
            c.type_ == "Ready" && c.reason == reason && c.observed_generation == generation
        })
    }

    /// `N/M` clusters done.
    pub fn update_progress(&mut self) {
        let done = self
            .clusters
            .iter()
            .filter(|m| m.phase == phase::SUCCEEDED)
            .count();
        self.progress = Some(format!("{done}/{}", self.clusters.len()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("c{i}")).collect()
    }

    #[test]
    fn canary_alone_then_waves_of_max_parallel() {
        let w = waves(names(4), 1, 2);
        let got: Vec<(&str, u32)> = w.iter().map(|m| (m.name.as_str(), m.wave)).collect();
        assert_eq!(got, [("c0", 1), ("c1", 2), ("c2", 2), ("c3", 3)]);
        let w = waves(names(3), 0, 2);
        let got: Vec<u32> = w.iter().map(|m| m.wave).collect();
        assert_eq!(got, [1, 1, 2]);
        assert!(waves(vec![], 1, 2).is_empty());
        // Unsorted, duplicated input: the same waves.
        let w = waves(vec!["b".into(), "a".into(), "b".into()], 1, 1);
        assert_eq!(w.len(), 2);
        assert_eq!(w[0].name, "a");
    }

    #[test]
    fn the_next_wave_waits_for_the_last_and_a_failure_stops_all() {
        let mut st = FleetUpgradeStatus {
            clusters: waves(names(4), 1, 2),
            ..Default::default()
        };
        assert_eq!(decide(&st, false), FleetDecision::Start(vec!["c0".into()]));
        assert_eq!(decide(&st, true), FleetDecision::Paused);
        st.clusters[0].phase = phase::RUNNING.into();
        assert_eq!(decide(&st, false), FleetDecision::Wait);
        st.clusters[0].phase = phase::SUCCEEDED.into();
        assert_eq!(
            decide(&st, false),
            FleetDecision::Start(vec!["c1".into(), "c2".into()])
        );
        st.clusters[1].phase = phase::SUCCEEDED.into();
        st.clusters[2].phase = phase::RUNNING.into();
        assert_eq!(decide(&st, false), FleetDecision::Wait, "c3 waits for c2");
        st.clusters[2].phase = phase::FAILED.into();
        st.clusters[2].message = "no spare host".into();
        assert_eq!(
            decide(&st, false),
            FleetDecision::Failed {
                cluster: "c2".into(),
                message: "no spare host".into()
            }
        );
        st.clusters[2].phase = phase::SUCCEEDED.into();
        st.clusters[3].phase = phase::SUCCEEDED.into();
        assert_eq!(decide(&st, false), FleetDecision::Succeeded);
        st.update_progress();
        assert_eq!(st.progress.as_deref(), Some("4/4"));
    }

    #[test]
    fn a_malformed_selector_is_refused_and_a_new_generation_picks_again() {
        let e = check_selector("a in (b").unwrap_err();
        assert!(e.contains("spec.selector") && e.contains("a in (b"), "{e}");
        check_selector("env=staging,tier in (web,api),!canary").unwrap();
        let st = FleetUpgradeStatus::cannot_act(Some(2), "InvalidSelector", &e, "t");
        assert_eq!(st.phase.as_deref(), Some(phase::FAILED));
        assert!(st.reports(Some(2), "InvalidSelector"));
        assert!(!st.reports(Some(3), "InvalidSelector"));
        assert!(
            !st.needs_pick(Some(2)),
            "the same generation waits for a change"
        );
        assert!(st.needs_pick(Some(3)), "a fixed spec picks again");
        assert!(FleetUpgradeStatus::default().needs_pick(Some(1)));
    }
}
