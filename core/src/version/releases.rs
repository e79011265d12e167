//! The patch releases an upgrade steps through. Kubernetes' advice for upgrades (kubernetes.io,
//! "Version Skew Policy" and "Upgrading kubeadm clusters") is to reach the newest patch of the
//! current minor first, then each next minor at its newest patch: [`Releases::walk`] is that
//! walk, the one `kubectl capi upgrade`, `kubectl kamaji upgrade`, the ClusterUpgrade reconciler
//! and the KamajiControlPlane reconciler all take.
//!
//! Where the newest patches come from ([`ReleaseSource`]): Kubernetes' published stable-release markers
//! (`stable-1.N.txt` under `https://dl.k8s.io/release`; the client reads them, bounded and timed),
//! the versions a ClusterClass lists, the versions the planning command recorded on the object it
//! changed ([`PATCH_RELEASES_ANNOTATION`], so the reconcilers step through what the user was
//! shown), or the table shipped with this release ([`Releases::shipped`]).

use std::collections::BTreeMap;

use serde::Serialize;

use super::{KubeVersion, minor_steps};

/// On a KamajiControlPlane (and in a ClusterUpgrade's plan), the patch releases the planning
/// command resolved, comma-separated (`v1.33.6,v1.34.4`): the reconciler steps through these
/// rather than its shipped table, so it walks the path the user was shown.
pub const PATCH_RELEASES_ANNOTATION: &str = "capi-kamaji.io/patch-releases";

/// The most patch releases one annotation or list is read for: one per minor of a walk, and a
/// walk of more than 32 minors is a typo.
pub(crate) const MAX_LISTED: usize = 32;

/// The newest patch release of each minor known when this table was written (2026-12-02): each
/// one is a published release; a newer patch may exist since, which the markers find. Ordered
/// by minor.
const SHIPPED: &[(u64, u64, u64)] = &[
    (1, 29, 15),
    (1, 30, 14),
    (1, 31, 14),
    (1, 32, 10),
    (1, 33, 6),
    (1, 34, 4),
    (1, 35, 4),
    (1, 36, 6),
    (1, 37, 2),
];

/// Where a walk's patch releases came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ReleaseSource {
    /// Kubernetes' stable-release markers (`stable-1.N.txt`).
    Markers,
    /// The versions the cluster's ClusterClass lists (`status.kubernetesVersions`).
    ClusterClass,
    /// The versions the planning command recorded ([`PATCH_RELEASES_ANNOTATION`]).
    Recorded,
    /// The table shipped with this release.
    Shipped,
}

impl ReleaseSource {
    /// What a plan says about where its intermediate versions came from.
    pub(crate) fn describe(self) -> &'static str {
        match self {
            ReleaseSource::Markers => "Kubernetes' stable-release markers",
            ReleaseSource::ClusterClass => "the versions the ClusterClass lists",
            ReleaseSource::Recorded => "the patch releases recorded when the upgrade was planned",
            ReleaseSource::Shipped => "the table of patch releases shipped with this release",
        }
    }
}

/// The newest known patch release of each minor, and where each came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Releases {
    newest: BTreeMap<(u64, u64), (KubeVersion, ReleaseSource)>,
}

/// A walk from one version to another: the versions in order, the last one the target.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Walk {
    pub(crate) steps: Vec<KubeVersion>,
    /// Intermediate minors no source knew a patch of: stepped at `.0`.
    pub(crate) guessed: Vec<KubeVersion>,
    /// Where the intermediate versions came from (none when the walk is one step).
    pub(crate) sources: Vec<ReleaseSource>,
}

impl Default for Releases {
    fn default() -> Self {
        Releases::shipped()
    }
}

impl Releases {
    /// The table shipped with this release.
    pub fn shipped() -> Releases {
        let newest = SHIPPED
            .iter()
            .map(|&(ma, mi, p)| {
                (
                    (ma, mi),
                    (KubeVersion::new(ma, mi, p), ReleaseSource::Shipped),
                )
            })
            .collect();
        Releases { newest }
    }

    /// No known release: every intermediate minor at `.0` (what a ClusterClass that lists no
    /// version gives, before the shipped table is laid under it).
    pub fn none() -> Releases {
        Releases {
            newest: BTreeMap::new(),
        }
    }

    /// These releases with `versions` from `source` laid over them: for each minor listed, the
    /// newest listed release replaces what was known. Pre-releases, builds and text that is no
    /// version are skipped; at most [`MAX_LISTED`] entries are read.
    pub fn with<S: AsRef<str>>(
        mut self,
        versions: impl IntoIterator<Item = S>,
        source: ReleaseSource,
    ) -> Releases {
        let mut listed: BTreeMap<(u64, u64), KubeVersion> = BTreeMap::new();
        for v in versions.into_iter().take(MAX_LISTED) {
            let Ok(v) = KubeVersion::parse(v.as_ref()) else {
                continue;
            };
            if !v.is_release() {
                continue;
            }
            let e = listed
                .entry((v.major, v.minor))
                .or_insert_with(|| v.clone());
            if v > *e {
                *e = v;
            }
        }
        for (k, v) in listed {
            self.newest.insert(k, (v, source));
        }
        self
    }

    /// The versions recorded in [`PATCH_RELEASES_ANNOTATION`]'s format laid over these.
    pub fn with_recorded(self, annotation: Option<&str>) -> Releases {
        match annotation {
            Some(a) => self.with(a.split(',').map(str::trim), ReleaseSource::Recorded),
            None => self,
        }
    }

    /// These releases without `v`'s minor: a reconciler that walks an upgrade nobody planned
    /// (no [`PATCH_RELEASES_ANNOTATION`]) does not add a step within the current minor, which a
    /// ClusterClass may not list.
    pub fn without_minor_of(mut self, v: &KubeVersion) -> Releases {
        self.newest.remove(&(v.major, v.minor));
        self
    }

    /// The walk from `from` to `to`: when `to` is a later minor, first the newest patch of
    /// `from`'s minor (when newer than `from`), then each minor between at its newest known
    /// patch (`.0` when none is known), then `to`. A patch change is one step; empty when `to`
    /// is not newer.
    pub(crate) fn walk(&self, from: &KubeVersion, to: &KubeVersion) -> Walk {
        let mut w = Walk::default();
        let mut bare = minor_steps(from, to);
        let Some(last) = bare.pop() else {
            return w;
        };
        if !to.same_minor(from)
            && let Some((v, s)) = self.newest.get(&(from.major, from.minor))
            && v > from
        {
            w.steps.push(v.clone());
            w.sources.push(*s);
        }
        for step in bare {
            match self.newest.get(&(step.major, step.minor)) {
                Some((v, s)) => {
                    w.steps.push(v.clone());
                    w.sources.push(*s);
                }
                None => {
                    w.guessed.push(step.clone());
                    w.steps.push(step);
                }
            }
        }
        w.steps.push(last);
        w.sources.sort();
        w.sources.dedup();
        w
    }

    /// The newest known release of each minor a walk from `from` to `to` may step through
    /// (those of [`Releases::marker_minors`]), to record for a reconciler that walks later.
    pub fn recorded(&self, from: &KubeVersion, to: &KubeVersion) -> Vec<String> {
        Releases::marker_minors(from, to)
            .iter()
            .filter_map(|k| self.newest.get(k))
            .map(|(v, _)| v.to_string())
            .collect()
    }

    /// The minors whose stable-release markers a walk from `from` to `to` reads: `from`'s and
    /// every one before `to`'s (`to` itself is given). Empty for a patch change.
    pub fn marker_minors(from: &KubeVersion, to: &KubeVersion) -> Vec<(u64, u64)> {
        if to <= from || to.major != from.major {
            return Vec::new();
        }
        (from.minor..to.minor).map(|m| (from.major, m)).collect()
    }
}

impl Walk {
    /// One line on where the intermediate versions came from, and which minors had to be
    /// guessed; `None` for a walk of one step.
    pub(crate) fn provenance(&self) -> Option<String> {
        if self.steps.len() < 2 {
            return None;
        }
        let from: Vec<&str> = self.sources.iter().map(|s| s.describe()).collect();
        let mut line = if from.is_empty() {
            "intermediate versions: no patch release known".to_string()
        } else {
            format!("intermediate versions from {}", from.join(" and "))
        };
        if !self.guessed.is_empty() {
            let g: Vec<String> = self.guessed.iter().map(ToString::to_string).collect();
            line.push_str(&format!(
                "; {} stepped at .0 (no patch release of that minor known)",
                g.join(", ")
            ));
        }
        Some(line)
    }
}

/// The file name of a minor's stable-release marker (`stable-1.34.txt`).
pub fn marker_name(major: u64, minor: u64) -> String {
    format!("stable-{major}.{minor}.txt")
}

/// The most bytes a marker is read for: one version and a newline.
pub const MAX_MARKER_BYTES: usize = 64;

/// Parses a stable-release marker's body (`v1.34.4\n`): one release of the minor asked for.
pub fn parse_marker(major: u64, minor: u64, body: &str) -> Result<KubeVersion, String> {
    let text = body.trim();
    let v = KubeVersion::parse_v(text).map_err(|e| e.to_string())?;
    if !v.is_release() || v.major != major || v.minor != minor {
        return Err(format!(
            "{} holds {text:?}, not a release of {major}.{minor}",
            marker_name(major, minor)
        ));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> KubeVersion {
        KubeVersion::parse(s).unwrap()
    }

    fn walk(r: &Releases, from: &str, to: &str) -> Vec<String> {
        r.walk(&v(from), &v(to))
            .steps
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn the_walk_takes_the_current_minors_newest_patch_first_then_each_minors_newest() {
        let r = Releases::none().with(
            ["v1.33.6", "v1.33.2", "v1.34.4", "v1.34.5-rc.0", "nonsense"],
            ReleaseSource::Markers,
        );
        assert_eq!(
            walk(&r, "v1.33.1", "v1.35.2"),
            ["v1.33.6", "v1.34.4", "v1.35.2"]
        );
        // At the newest patch already: straight on.
        assert_eq!(walk(&r, "v1.33.6", "v1.34.1"), ["v1.34.1"]);
        // A patch change is one step, whatever is known.
        assert_eq!(walk(&r, "v1.33.1", "v1.33.4"), ["v1.33.4"]);
        assert!(walk(&r, "v1.34.0", "v1.33.9").is_empty());
        // Nothing known of 1.35 or 1.36: .0, and said so.
        let w = r.walk(&v("v1.34.4"), &v("v1.37.1"));
        assert_eq!(w.guessed, [v("v1.35.0"), v("v1.36.0")]);
        let line = w.provenance().unwrap();
        assert!(line.contains("v1.35.0, v1.36.0 stepped at .0"), "{line}");
    }

    #[test]
    fn later_sources_replace_earlier_ones_minor_by_minor_and_the_walk_says_which_it_used() {
        let r = Releases::shipped().with(["v1.34.9"], ReleaseSource::Markers);
        let w = r.walk(&v("v1.33.6"), &v("v1.35.0"));
        assert_eq!(w.steps, [v("v1.34.9"), v("v1.35.0")]);
        assert_eq!(w.sources, [ReleaseSource::Markers]);
        let w = r.walk(&v("v1.32.1"), &v("v1.35.0"));
        assert_eq!(w.sources, [ReleaseSource::Markers, ReleaseSource::Shipped]);
        assert_eq!(
            w.provenance().unwrap(),
            "intermediate versions from Kubernetes' stable-release markers and the table of patch releases shipped with this release"
        );
        // A recorded annotation, as the reconcilers read it.
        let r = Releases::shipped().with_recorded(Some("v1.33.7, v1.34.1,bad"));
        assert_eq!(
            walk(&r, "v1.33.1", "v1.35.0"),
            ["v1.33.7", "v1.34.1", "v1.35.0"]
        );
    }

    #[test]
    fn markers_are_read_strictly_and_only_for_the_minors_a_walk_needs() {
        assert_eq!(parse_marker(1, 34, "v1.34.4\n"), Ok(v("v1.34.4")));
        assert!(parse_marker(1, 34, "v1.35.0").is_err());
        assert!(parse_marker(1, 34, "v1.34.0-rc.1").is_err());
        assert!(parse_marker(1, 34, "<html>").is_err());
        assert_eq!(
            Releases::marker_minors(&v("v1.33.1"), &v("v1.35.2")),
            [(1, 33), (1, 34)]
        );
        assert!(Releases::marker_minors(&v("v1.33.1"), &v("v1.33.2")).is_empty());
        assert_eq!(marker_name(1, 34), "stable-1.34.txt");
        let r = Releases::none().with(["v1.33.6", "v1.35.1"], ReleaseSource::Markers);
        assert_eq!(
            r.recorded(&v("v1.33.1"), &v("v1.36.0")),
            ["v1.33.6", "v1.35.1"]
        );
    }

    #[test]
    fn the_shipped_table_is_ordered_one_release_per_minor() {
        for w in SHIPPED.windows(2) {
            assert!(w[0].1 + 1 == w[1].1 && w[0].0 == w[1].0, "{w:?}");
        }
    }
}
