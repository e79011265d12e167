//! The path of an upgrade: the minors to pass through ([`minor_path`]), and the walk of a
//! control plane with its MachineDeployments along it, in lockstep or within the kubelet skew
//! (Kubernetes version-skew policy: a kubelet at most [`MAX_KUBELET_SKEW`] minors older than the
//! API server, never newer).

use serde_json::Value;

use super::{CpKind, MAX_KUBELET_SKEW, Planner, WorkerStrategy, key};
use crate::plan::Finding;
use crate::version::KubeVersion;
use crate::version::releases::Releases;

/// The versions to pass through ([`Releases::walk`]): the newest patch of `from`'s minor
/// first, each minor after it at its newest known patch, ending at `to`; where the intermediate
/// versions came from is an info finding.
pub(super) fn minor_path(
    from: &KubeVersion,
    to: &KubeVersion,
    releases: &Releases,
    findings: &mut Vec<Finding>,
) -> Vec<KubeVersion> {
    let walk = releases.walk(from, to);
    if let Some(line) = walk.provenance() {
        findings.push(Finding::info(line));
    }
    walk.steps
}

/// Where a control plane and its MachineDeployments stand as the walk plans their steps.
struct WalkState<'m, 'v> {
    /// The MachineDeployments, with their versions at the start.
    mds: &'m [(&'v Value, KubeVersion)],
    /// Each MachineDeployment's version once the steps so far are applied.
    md_versions: Vec<KubeVersion>,
    /// The control plane's version once the steps so far are applied.
    cp_now: KubeVersion,
    strategy: WorkerStrategy,
    /// The workers move too (not `--control-plane-only`).
    workers: bool,
}

impl Planner<'_, '_> {
    /// The steps of a control plane `cp` at `cp_version` and its MachineDeployments `mds` along
    /// `path` to `to`: each control-plane minor (one reconciler step for Kamaji), the workers
    /// after it in lockstep or when the next minor would put them out of skew, and at the end.
    pub(super) fn plan_walk(
        &mut self,
        cp: &Value,
        kind: CpKind,
        cp_version: &KubeVersion,
        to: &KubeVersion,
        mds: &[(&Value, KubeVersion)],
        path: &[KubeVersion],
    ) {
        let strategy = match self.req.worker_strategy {
            WorkerStrategy::Auto if kind == CpKind::Kamaji => WorkerStrategy::WithinSkew,
            WorkerStrategy::Auto => WorkerStrategy::Lockstep,
            s => s,
        };
        let mut w = WalkState {
            mds,
            md_versions: mds.iter().map(|(_, v)| v.clone()).collect(),
            cp_now: cp_version.clone(),
            strategy,
            workers: !self.req.control_plane_only,
        };
        if strategy == WorkerStrategy::Lockstep && w.workers {
            // Workers behind the control plane (e.g. an apply interrupted mid-way) catch up first.
            self.catch_up(&mut w);
        }
        let mut i = 0;
        while i < path.len() {
            let Some(j) = segment_end(&w, path, i) else {
                // Already out of skew: bring the workers up to the control plane first.
                self.catch_up(&mut w);
                continue;
            };
            let segment = &path[i..=j];
            if kind == CpKind::Kamaji {
                self.cp_step(cp, kind, &w.cp_now, segment);
            } else {
                for v in segment {
                    self.cp_step(cp, kind, &w.cp_now, std::slice::from_ref(v));
                    w.cp_now = v.clone();
                }
            }
            w.cp_now = path[j].clone();
            i = j + 1;
            if w.workers {
                self.follow(&mut w, path.get(i));
            }
        }
        if w.workers {
            // Whatever is still behind ends at the control plane's version (the target).
            self.catch_up(&mut w);
        } else {
            self.skew_findings(mds, to);
        }
    }

    /// Every MachineDeployment behind the control plane moves to its version.
    fn catch_up(&mut self, w: &mut WalkState) {
        for (k, (m, _)) in w.mds.iter().enumerate() {
            if w.md_versions[k] < w.cp_now {
                self.md_step(m, &w.md_versions[k].clone(), &w.cp_now);
                w.md_versions[k] = w.cp_now.clone();
            }
        }
    }

    /// After a control-plane segment, the MachineDeployments that must follow: all in lockstep;
    /// within skew, those the `next` minor would leave too far behind, and all at the end.
    fn follow(&mut self, w: &mut WalkState, next: Option<&KubeVersion>) {
        let last = next.is_none();
        for (k, (m, _)) in w.mds.iter().enumerate() {
            let must = match w.strategy {
                WorkerStrategy::Lockstep => true,
                _ => {
                    last || next
                        .is_some_and(|next| next.minor > w.md_versions[k].minor + MAX_KUBELET_SKEW)
                }
            };
            if must && w.md_versions[k] < w.cp_now {
                self.md_step(m, &w.md_versions[k].clone(), &w.cp_now);
                w.md_versions[k] = w.cp_now.clone();
            }
        }
    }

    /// With the workers left where they are (`--control-plane-only`), those `to` would put out
    /// of skew.
    fn skew_findings(&mut self, mds: &[(&Value, KubeVersion)], to: &KubeVersion) {
        for (m, v) in mds {
            if to.minor > v.minor + MAX_KUBELET_SKEW {
                self.findings.push(Finding::error(format!(
                    "{} at {} would be {} minors behind {}: the version-skew policy allows {MAX_KUBELET_SKEW}; upgrade the workers too, or stop the control plane at v{}.{}",
                    key(m),
                    v,
                    to.minor - v.minor,
                    to,
                    to.major,
                    v.minor + MAX_KUBELET_SKEW
                )));
            }
        }
    }
}

/// How far along `path` from `i` the control plane may go before the workers must catch up;
/// `None` when they are already out of skew.
fn segment_end(w: &WalkState, path: &[KubeVersion], i: usize) -> Option<usize> {
    match w.strategy {
        WorkerStrategy::Lockstep if w.workers => Some(i),
        _ if !w.workers || w.md_versions.is_empty() => Some(path.len() - 1),
        _ => {
            let min_w = w
                .md_versions
                .iter()
                .min()
                .map(|v| v.minor)
                .unwrap_or(w.cp_now.minor);
            path[i..]
                .iter()
                .rposition(|v| v.minor <= min_w + MAX_KUBELET_SKEW)
                .map(|k| i + k)
        }
    }
}
