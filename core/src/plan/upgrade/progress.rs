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

/// Where one step stands, as values: what `kubectl capi upgrade` shows while it waits and
/// what [`step_reached`] decides on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StepProgress {
    /// The step's object was found.
    pub found: bool,
    /// The observed version is at least the step's and every replica is current, ready and
    /// up to date.
    pub reached: bool,
    /// The lowest version the step's object runs, if any runs.
    pub runs: Option<KubeVersion>,
    /// Replicas wanted.
    pub desired: i64,
    /// Replicas on the new machine spec.
    pub up_to_date: i64,
    /// Replicas ready.
    pub ready: i64,
}

impl StepProgress {
    /// Replicas still to replace with the new version.
    pub(crate) fn to_replace(&self) -> i64 {
        self.desired.saturating_sub(self.up_to_date).max(0)
    }
    /// Replicas replaced but not ready yet.
    pub fn not_ready(&self) -> i64 {
        self.desired.saturating_sub(self.ready).max(0)
    }
}

/// Where the step stands: its object (`None`: not found), the version observed on it, and the
/// version it goes to.
pub fn step_progress(
    role: StepRole,
    obj: Option<&Value>,
    observed: Option<&KubeVersion>,
    to: &KubeVersion,
) -> StepProgress {
    let Some(o) = obj else {
        return StepProgress::default();
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
    StepProgress {
        found: true,
        reached: version_ok && settled,
        runs: observed.cloned(),
        desired,
        up_to_date: r.up_to_date.unwrap_or(0),
        ready: r.ready.unwrap_or(0),
    }
}

/// Whether the step is reached (the observed version is at least `to`, every replica current,
/// ready and up to date), and where it stands in words.
pub(crate) fn step_reached(
    role: StepRole,
    target: &str,
    obj: Option<&Value>,
    observed: Option<&KubeVersion>,
    to: &KubeVersion,
) -> (bool, String) {
    let p = step_progress(role, obj, observed, to);
    if !p.found {
        return (false, format!("{target} not found"));
    }
    (
        p.reached,
        format!(
            "runs {}, {}/{} up to date, {} ready",
            p.runs.map(|v| v.to_string()).unwrap_or_else(|| "?".into()),
            p.up_to_date,
            p.desired,
            p.ready
        ),
    )
}

/// The progress line of a step under way, from values: `step 1/2: KamajiControlPlane demo to
/// v1.36.3: 2 of 3 machines to replace; the cluster runs v1.35.4`.
#[derive(Clone, Debug)]
pub struct StepLine<'a> {
    /// The step's number counted against the plan shown at the start, and that plan's length.
    pub number: usize,
    pub total: usize,
    /// `Kind/name` of the step's object.
    pub target: &'a str,
    /// The version the step goes to.
    pub to: &'a KubeVersion,
    pub progress: &'a StepProgress,
    /// The version the cluster's control plane runs.
    pub cluster_runs: Option<&'a KubeVersion>,
}

impl StepLine<'_> {
    /// `step 1/2: KamajiControlPlane demo to v1.36.3`: the step under way.
    pub fn head(&self) -> String {
        let (kind, name) = self.target.split_once('/').unwrap_or(("", self.target));
        let object = if kind.is_empty() {
            name.to_string()
        } else {
            format!("{kind} {name}")
        };
        format!(
            "step {}/{}: {object} to {}",
            self.number,
            self.total.max(self.number),
            self.to
        )
    }
    /// What is left of the step: `2 of 3 machines to replace`.
    pub fn left(&self) -> String {
        let p = self.progress;
        let kind = self.target.split_once('/').map_or("", |(k, _)| k);
        let unit = |n: i64| match (kind == "KamajiControlPlane", n == 1) {
            (true, true) => "replica",
            (true, false) => "replicas",
            (false, true) => "machine",
            (false, false) => "machines",
        };
        if !p.found {
            return format!("{} not found", self.target.replacen('/', " ", 1));
        }
        if p.reached {
            return "done".into();
        }
        if p.to_replace() > 0 {
            return format!(
                "{} of {} {} to replace",
                p.to_replace(),
                p.desired,
                unit(p.desired)
            );
        }
        if p.not_ready() > 0 {
            return format!(
                "{} of {} {} not ready yet",
                p.not_ready(),
                p.desired,
                unit(p.desired)
            );
        }
        format!("waiting for {} to be reported", self.to)
    }
}

impl std::fmt::Display for StepLine<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.head(), self.left())?;
        if let Some(v) = self.cluster_runs {
            write!(f, "; the cluster runs {v}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod line_tests {
    use super::*;

    fn v(s: &str) -> KubeVersion {
        crate::version::parse_version(s).unwrap()
    }

    #[test]
    fn a_step_line_names_the_step_what_is_left_and_what_runs() {
        let p = StepProgress {
            found: true,
            reached: false,
            runs: Some(v("v1.35.4")),
            desired: 3,
            up_to_date: 1,
            ready: 3,
        };
        let runs = v("v1.35.4");
        let to = v("v1.36.3");
        let line = StepLine {
            number: 1,
            total: 2,
            target: "MachineDeployment/demo-md-0",
            to: &to,
            progress: &p,
            cluster_runs: Some(&runs),
        };
        assert_eq!(
            line.to_string(),
            "step 1/2: MachineDeployment demo-md-0 to v1.36.3: 2 of 3 machines to replace; the cluster runs v1.35.4"
        );
        let p = StepProgress {
            up_to_date: 1,
            ready: 0,
            desired: 1,
            ..p.clone()
        };
        let line = StepLine {
            target: "KamajiControlPlane/demo",
            progress: &p,
            cluster_runs: None,
            ..line
        };
        assert_eq!(
            line.to_string(),
            "step 1/2: KamajiControlPlane demo to v1.36.3: 1 of 1 replica not ready yet"
        );
        let gone = StepProgress::default();
        assert_eq!(
            StepLine {
                progress: &gone,
                ..line
            }
            .left(),
            "KamajiControlPlane demo not found"
        );
    }
}
