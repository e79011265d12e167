//! The one Kubernetes version type: `vMAJOR.MINOR.PATCH[-pre][+build]` (semver with a leading
//! `v`, as Kubernetes, CAPI and Kamaji write it), ordered by semver's rules, and the walk one
//! minor at a time that Kubernetes' version skew policy and Kamaji require (a control plane
//! never skips a minor).

pub mod releases;

use std::fmt;
use std::ops::Deref;
use std::str::FromStr;

/// The most digits one version component may have: real versions have at most three, and the
/// bound keeps a typo like `v1.99999999999.0` from turning into a walk of billions of minors.
const MAX_COMPONENT_DIGITS: usize = 6;

/// The highest minor a Kubernetes version may have: 1.36 is current (2026) and upstream
/// releases three a year, so 99 leaves decades; `v1.999999.0` is a typo, and a walk to it would
/// be a million steps.
pub(crate) const MAX_MINOR: u64 = 99;

/// A Kubernetes version. Derefs to [`semver::Version`] for `major`, `minor`, `patch`, `pre`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KubeVersion(semver::Version);

/// What a refused version is told to look like.
pub const VERSION_HINT: &str = "use vMAJOR.MINOR.PATCH, e.g. v1.35.0";

/// Why a string is not a Kubernetes version.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VersionError {
    /// Only the leading `v` is missing (`1.33.1`), where one is required
    /// ([`KubeVersion::parse_v`]).
    #[error("version {0:?} must start with v, e.g. v{0}")]
    MissingV(String),
    #[error("invalid Kubernetes version {input:?}: {reason}")]
    Malformed { input: String, reason: String },
    /// A version of another major than Kubernetes' ([`parse_version`]).
    #[error("invalid Kubernetes version {0:?}: only Kubernetes 1.x is released")]
    NotKubernetes1(String),
}

/// A refused version is a usage error of the pure layer, with the hint of what to type.
impl From<VersionError> for crate::Error {
    fn from(e: VersionError) -> crate::Error {
        crate::error::usage(e.to_string(), VERSION_HINT)
    }
}

/// Parses a Kubernetes version as it is typed (`--to`, `--kubernetes-version`, a spec's
/// `version`) and as objects hold it: `v1.35.0` or `1.35.0` (the `v` is added, as Kamaji and
/// the Kamaji control-plane provider add it), pre-releases and builds too (`v1.35.0-rc.1`,
/// `v1.30.4+rke2r1`, which CAPI's version fields take), of Kubernetes 1.x (there is no other).
/// The one rule set of every command and of the reconciler's plans.
pub fn parse_version(s: &str) -> Result<KubeVersion, VersionError> {
    let v = KubeVersion::parse(s)?;
    if v.major != 1 {
        return Err(VersionError::NotKubernetes1(s.to_string()));
    }
    Ok(v)
}

impl KubeVersion {
    pub fn new(major: u64, minor: u64, patch: u64) -> KubeVersion {
        KubeVersion(semver::Version::new(major, minor, patch))
    }

    /// Parses `v1.33.1` or `1.33.1` (the `v` is optional), with pre-release and build suffixes
    /// (`v1.33.1-rc.0`, `v1.30.4+rke2r1`).
    pub fn parse(s: &str) -> Result<KubeVersion, VersionError> {
        let t = s.trim();
        Self::parse_semver(s, t.strip_prefix('v').unwrap_or(t))
    }

    /// Like [`KubeVersion::parse`], but the leading `v` is required (what CAPI's fields and
    /// clusterctl's `KUBERNETES_VERSION` take).
    pub fn parse_v(s: &str) -> Result<KubeVersion, VersionError> {
        let t = s.trim();
        match t.strip_prefix('v') {
            Some(rest) => Self::parse_semver(s, rest),
            None => {
                let bare = t.trim_start_matches('V');
                if Self::parse_semver(s, bare).is_ok() {
                    Err(VersionError::MissingV(bare.to_string()))
                } else {
                    Err(VersionError::Malformed {
                        input: s.to_string(),
                        reason: "expected a leading v".into(),
                    })
                }
            }
        }
    }

    fn parse_semver(input: &str, rest: &str) -> Result<KubeVersion, VersionError> {
        let malformed = |reason: String| VersionError::Malformed {
            input: input.to_string(),
            reason,
        };
        let numbers = rest.split(['-', '+']).next().unwrap_or_default();
        if numbers.split('.').any(|c| c.len() > MAX_COMPONENT_DIGITS) {
            return Err(malformed(format!(
                "a version number has more than {MAX_COMPONENT_DIGITS} digits"
            )));
        }
        let v = semver::Version::parse(rest).map_err(|e| {
            malformed(format!(
                "not semver (vMAJOR.MINOR.PATCH, e.g. v1.35.0): {e}"
            ))
        })?;
        if v.minor > MAX_MINOR {
            return Err(malformed(format!(
                "minor {} is beyond any Kubernetes release (at most {MAX_MINOR})",
                v.minor
            )));
        }
        Ok(KubeVersion(v))
    }

    /// A release, not a pre-release or a build (`v1.33.1`, not `v1.33.1-rc.0`).
    pub(crate) fn is_release(&self) -> bool {
        self.0.pre.is_empty() && self.0.build.is_empty()
    }

    /// `vMAJOR.(MINOR+1).0`.
    pub(crate) fn next_minor(&self) -> KubeVersion {
        KubeVersion::new(self.0.major, self.0.minor.saturating_add(1), 0)
    }

    /// The same major and minor.
    pub(crate) fn same_minor(&self, other: &KubeVersion) -> bool {
        self.0.major == other.0.major && self.0.minor == other.0.minor
    }
}

impl Deref for KubeVersion {
    type Target = semver::Version;
    fn deref(&self) -> &semver::Version {
        &self.0
    }
}

impl fmt::Display for KubeVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "v{}", self.0)
    }
}

/// On the wire a version is its text, `v` first (`"v1.35.0"`): what the plans and the
/// ClusterUpgrade status always held.
impl serde::Serialize for KubeVersion {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// In tests a version equals the text it prints as (`assert_eq!(plan.path, ["v1.34.0"])`).
#[cfg(test)]
impl PartialEq<&str> for KubeVersion {
    fn eq(&self, text: &&str) -> bool {
        format!("{self}") == *text
    }
}

impl FromStr for KubeVersion {
    type Err = VersionError;
    fn from_str(s: &str) -> Result<KubeVersion, VersionError> {
        KubeVersion::parse(s)
    }
}

/// The versions an upgrade from `from` to `to` passes through, one minor at a time: every
/// intermediate minor at `.0`, then `to` itself. Empty when `to` is not newer. Callers that know
/// better intermediate releases (the newest patch of each minor) substitute them.
pub fn minor_steps(from: &KubeVersion, to: &KubeVersion) -> Vec<KubeVersion> {
    if to <= from {
        return Vec::new();
    }
    let mut steps = Vec::new();
    let mut at = from.clone();
    while at.major == to.major && at.minor.saturating_add(1) < to.minor {
        at = at.next_minor();
        steps.push(at.clone());
    }
    steps.push(to.clone());
    steps
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> KubeVersion {
        KubeVersion::parse(s).unwrap()
    }

    #[test]
    fn parses_with_and_without_v_and_prints_with_v() {
        assert_eq!(v("1.33.2").to_string(), "v1.33.2");
        assert_eq!(v("v1.35.0-rc.1").pre.as_str(), "rc.1");
        assert!(!v("v1.35.0-rc.1").is_release());
        assert!(v("v1.30.4+rke2r1") > v("v1.30.3"));
        assert!(v("v1.35.0-rc.1") < v("v1.35.0"));
        assert!(KubeVersion::parse("latest").is_err());
        assert!(KubeVersion::parse("v1.34").is_err());
        assert_eq!(
            KubeVersion::parse_v("1.33.1"),
            Err(VersionError::MissingV("1.33.1".into()))
        );
        assert!(matches!(
            KubeVersion::parse_v("x1.33"),
            Err(VersionError::Malformed { .. })
        ));
    }

    /// What `kubectl capi upgrade` and `kubectl kamaji` took, where it is a Kubernetes release
    /// or pre-release: the `v` optional (Kamaji's), pre-releases and builds (CAPI's), 1.x only.
    #[test]
    fn one_rule_set_for_typed_versions() {
        for (typed, shown) in [
            ("v1.35.0", "v1.35.0"),
            ("1.35.0", "v1.35.0"),
            (" v1.33.1 ", "v1.33.1"),
            ("v1.35.0-rc.1", "v1.35.0-rc.1"),
            ("v1.30.4+rke2r1", "v1.30.4+rke2r1"),
        ] {
            assert_eq!(parse_version(typed).unwrap().to_string(), shown, "{typed}");
        }
        for bad in [
            "v1.33",
            "1.35",
            "vx",
            "latest",
            "",
            "v1.33.1.2",
            "v01.2.3",
            "V1.33.0",
            "v1.999999.0",
        ] {
            assert!(
                matches!(parse_version(bad), Err(VersionError::Malformed { .. })),
                "{bad}"
            );
        }
        for other in ["v2.0.0", "0.9.0"] {
            assert_eq!(
                parse_version(other),
                Err(VersionError::NotKubernetes1(other.into()))
            );
        }
        assert_eq!(
            parse_version("v2.0.0").unwrap_err().to_string(),
            "invalid Kubernetes version \"v2.0.0\": only Kubernetes 1.x is released"
        );
        let e = parse_version("v1.35").unwrap_err().to_string();
        assert!(
            e.starts_with("invalid Kubernetes version \"v1.35\": not semver (vMAJOR.MINOR.PATCH"),
            "{e}"
        );
        let e = crate::Error::from(parse_version("latest").unwrap_err());
        assert_eq!((e.exit_code(), e.hint()), (2, Some(VERSION_HINT)));
    }

    #[test]
    fn serialized_as_its_text() {
        let v = serde_json::to_value(parse_version("1.35.0-rc.1").unwrap()).unwrap();
        assert_eq!(v, serde_json::json!("v1.35.0-rc.1"));
    }

    #[test]
    fn absurd_numbers_are_refused_before_any_walk() {
        let e = KubeVersion::parse("v1.99999999999.0").unwrap_err();
        assert!(e.to_string().contains("more than 6 digits"), "{e}");
        let e = KubeVersion::parse("v1.999999.0").unwrap_err();
        assert!(
            e.to_string().contains("beyond any Kubernetes release"),
            "{e}"
        );
        assert!(KubeVersion::parse("v1.99.0").is_ok());
    }

    #[test]
    fn steps_walk_one_minor_at_a_time() {
        let s = |from: &str, to: &str| -> Vec<String> {
            minor_steps(&v(from), &v(to))
                .iter()
                .map(ToString::to_string)
                .collect()
        };
        assert_eq!(s("v1.33.2", "v1.36.1"), ["v1.34.0", "v1.35.0", "v1.36.1"]);
        assert_eq!(s("v1.33.2", "v1.34.1"), ["v1.34.1"]);
        assert_eq!(s("v1.33.2", "v1.33.5"), ["v1.33.5"]);
        assert!(s("v1.33.2", "v1.33.2").is_empty());
        assert!(s("v1.34.0", "v1.33.2").is_empty());
    }
}
