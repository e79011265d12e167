//! The Kubernetes releases Kamaji runs, and the walk one minor at a time it requires: Kamaji
//! refuses to skip a minor, so a control plane is walked to a later minor through the newest
//! patch of its own minor and of every minor between ([`Releases::walk`]). `kubectl kamaji
//! upgrade` shows the walk ([`upgrade_steps`]); the reconciler takes it step by step
//! ([`next_step`]), through the patch releases the command recorded on the KamajiControlPlane.

use crate::Error;
use crate::error::usage;
use crate::version::KubeVersion;
use crate::version::releases::{Releases, Walk};

/// `v`-prefixes a version (`1.33.0` → `v1.33.0`).
pub fn v_prefixed(version: &str) -> String {
    let v = version.trim();
    if v.starts_with('v') {
        v.to_string()
    } else {
        format!("v{v}")
    }
}

/// The walk of an upgrade ([`Releases::walk`]): the steps end at the target; none when already
/// there.
pub(crate) fn upgrade_steps(
    f: &KubeVersion,
    t: &KubeVersion,
    releases: &Releases,
) -> Result<Walk, Error> {
    if t < f {
        return Err(usage(
            format!("cannot downgrade from {f} to {t}"),
            "Kamaji does not support downgrades; pick a version at or above the current one",
        ));
    }
    Ok(releases.walk(f, t))
}

/// What to write into the TenantControlPlane's `spec.kubernetes.version` now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Write the desired version (creation, a patch change, or the last minor step).
    Desired(String),
    /// A multi-minor upgrade: write this intermediate version; `remaining` minors to go after it.
    Intermediate { version: String, remaining: u64 },
    /// The current version is still rolling out: keep it; `remaining` minors to go.
    Wait { version: String, remaining: u64 },
    /// Refused: a downgrade of the minor, or a different major.
    Refused(String),
}

/// Decides the next version. `current` is the TCP's `spec.kubernetes.version` (None before it
/// exists), `ready_at_current` whether the TCP reports that version Ready; a later minor is
/// reached through `releases`' walk.
pub fn next_step(
    desired: &str,
    current: Option<&str>,
    ready_at_current: bool,
    releases: &Releases,
) -> Step {
    let want = v_prefixed(desired);
    let Some(cur_s) = current else {
        return Step::Desired(want);
    };
    let (Some(d), Some(c)) = (
        KubeVersion::parse(&want).ok(),
        KubeVersion::parse(cur_s).ok(),
    ) else {
        return Step::Desired(want);
    };
    if d.major != c.major {
        return Step::Refused(format!(
            "changing the major version ({c} to {d}) is not supported"
        ));
    }
    if d.minor < c.minor {
        return Step::Refused(format!(
            "downgrading the minor version ({c} to {d}) is not supported by Kamaji; set spec.version to v{}.{} or later",
            c.major, c.minor
        ));
    }
    if d.minor == c.minor {
        return Step::Desired(want);
    }
    // A later minor of the same major: the newest patch of `c`'s minor, every minor after it,
    // up to `d`.
    let steps = releases.walk(&c, &d).steps;
    if !ready_at_current {
        return Step::Wait {
            version: cur_s.to_string(),
            remaining: steps.len() as u64,
        };
    }
    match steps.as_slice() {
        [first, rest @ ..] if !rest.is_empty() => Step::Intermediate {
            version: first.to_string(),
            remaining: rest.len() as u64,
        },
        _ => Step::Desired(want),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::version::parse_version;
    use crate::version::releases::ReleaseSource;

    fn v(s: &str) -> KubeVersion {
        parse_version(s).unwrap()
    }

    /// The releases the cases know: 1.33.6 and 1.34.4 are the newest patches.
    fn known() -> Releases {
        Releases::none().with(["v1.33.6", "v1.34.4"], ReleaseSource::Recorded)
    }

    /// Each case: the desired version, the TenantControlPlane's, whether it is Ready at it, and
    /// the step: creation and a patch change go straight; a later minor is reached through the
    /// newest patch of the current minor and of each minor between, each step waiting for Ready.
    #[test]
    fn the_newest_patch_first_then_one_minor_at_a_time_each_step_waiting_for_ready() {
        let desired = |v: &str| Step::Desired(v.into());
        let wait = |v: &str, remaining| Step::Wait {
            version: v.into(),
            remaining,
        };
        let step = |v: &str, remaining| Step::Intermediate {
            version: v.into(),
            remaining,
        };
        let cases = [
            ("1.33.1", None, false, desired("v1.33.1")),
            ("v1.33.4", Some("v1.33.1"), false, desired("v1.33.4")),
            ("v1.34.2", Some("v1.33.1"), true, step("v1.33.6", 1)),
            ("v1.34.2", Some("v1.33.6"), true, desired("v1.34.2")),
            ("v1.35.0", Some("v1.33.1"), true, step("v1.33.6", 2)),
            ("v1.35.0", Some("v1.33.1"), false, wait("v1.33.1", 3)),
            ("v1.35.0", Some("v1.33.6"), true, step("v1.34.4", 1)),
            // At the intermediate step, not yet Ready: keep it.
            ("v1.35.0", Some("v1.34.4"), false, wait("v1.34.4", 1)),
            // Intermediate Ready: the final version.
            ("v1.35.0", Some("v1.34.4"), true, desired("v1.35.0")),
            // Already at the final version, rolling out: keep writing it.
            ("v1.35.0", Some("v1.35.0"), false, desired("v1.35.0")),
            // No release of 1.36 known: .0.
            ("v1.37.1", Some("v1.35.0"), true, step("v1.36.0", 1)),
        ];
        for (to, current, ready, want) in cases {
            assert_eq!(
                next_step(to, current, ready, &known()),
                want,
                "{to} from {current:?}, ready: {ready}"
            );
        }
    }

    #[test]
    fn downgrades_and_major_changes_are_refused() {
        let r = known();
        assert!(
            matches!(next_step("v1.32.0", Some("v1.33.0"), true, &r), Step::Refused(m) if m.contains("downgrading"))
        );
        assert!(matches!(
            next_step("v2.0.0", Some("v1.33.0"), true, &r),
            Step::Refused(_)
        ));
    }

    #[test]
    fn upgrade_steps_walk_one_minor_at_a_time() {
        let s = |from: &str, to: &str| -> Vec<String> {
            let w = upgrade_steps(&v(from), &v(to), &known()).unwrap();
            w.steps.iter().map(ToString::to_string).collect()
        };
        assert_eq!(s("v1.33.2", "v1.35.1"), ["v1.33.6", "v1.34.4", "v1.35.1"]);
        assert_eq!(s("v1.33.2", "1.33.5"), ["v1.33.5"]);
        assert!(s("v1.35.0", "v1.35.0").is_empty());
        assert!(upgrade_steps(&v("v1.35.0"), &v("v1.34.0"), &known()).is_err());
    }
}
