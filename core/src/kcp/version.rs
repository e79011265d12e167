//! Kubernetes version stepping: Kamaji refuses to skip a minor, so a KamajiControlPlane whose
//! `spec.version` is more than one minor ahead is walked there one minor at a time.

use crate::version::KubeVersion;

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
/// exists), `ready_at_current` whether the TCP reports that version Ready.
pub fn next_step(desired: &str, current: Option<&str>, ready_at_current: bool) -> Step {
    let want = crate::kcp::tcp::v_prefixed(desired);
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
    let remaining = d.minor - c.minor;
    if !ready_at_current {
        return Step::Wait {
            version: cur_s.to_string(),
            remaining,
        };
    }
    if remaining == 1 {
        return Step::Desired(want);
    }
    Step::Intermediate {
        version: c.next_minor().to_string(),
        remaining: remaining - 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creation_patch_and_single_minor_go_straight() {
        assert_eq!(
            next_step("1.33.1", None, false),
            Step::Desired("v1.33.1".into())
        );
        assert_eq!(
            next_step("v1.33.4", Some("v1.33.1"), false),
            Step::Desired("v1.33.4".into())
        );
        assert_eq!(
            next_step("v1.34.2", Some("v1.33.1"), true),
            Step::Desired("v1.34.2".into())
        );
    }

    #[test]
    fn two_minors_are_stepped_and_each_step_waits_for_ready() {
        assert_eq!(
            next_step("v1.35.0", Some("v1.33.1"), true),
            Step::Intermediate {
                version: "v1.34.0".into(),
                remaining: 1
            }
        );
        assert_eq!(
            next_step("v1.35.0", Some("v1.33.1"), false),
            Step::Wait {
                version: "v1.33.1".into(),
                remaining: 2
            }
        );
        // At the intermediate step, not yet Ready: keep it.
        assert_eq!(
            next_step("v1.35.0", Some("v1.34.0"), false),
            Step::Wait {
                version: "v1.34.0".into(),
                remaining: 1
            }
        );
        // Intermediate Ready: the final version.
        assert_eq!(
            next_step("v1.35.0", Some("v1.34.0"), true),
            Step::Desired("v1.35.0".into())
        );
        // Already at the final version, rolling out: keep writing it.
        assert_eq!(
            next_step("v1.35.0", Some("v1.35.0"), false),
            Step::Desired("v1.35.0".into())
        );
    }

    #[test]
    fn downgrades_and_major_changes_are_refused() {
        assert!(
            matches!(next_step("v1.32.0", Some("v1.33.0"), true), Step::Refused(m) if m.contains("downgrading"))
        );
        assert!(matches!(
            next_step("v2.0.0", Some("v1.33.0"), true),
            Step::Refused(_)
        ));
    }
}
