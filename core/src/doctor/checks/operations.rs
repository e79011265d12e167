//! Paused clusters, failed or paused upgrades.

use serde_json::Value;

use super::{Ctx, Entry, entry, finding, ns_flag};
use crate::doctor::{Check, Problem, Subject};
use crate::json::{self, str_at};
use crate::labels::PAUSED_ANNOTATION;
use crate::plan::Severity;

pub(super) const CHECKS: &[Entry] = &[
    entry!(paused_clusters: [ClusterPaused] needs [Clusters] uses []),
    entry!(upgrades: [UpgradeFailed, UpgradePaused, UpgradeStalled] needs [] uses [ClusterUpgrades, FleetUpgrades]),
];

fn paused_clusters(c: &Ctx, out: &mut Vec<Problem>) {
    for cl in &c.fleet.clusters {
        let paused = json::bool_at(cl, &["spec", "paused"]) == Some(true)
            || json::has_annotation(cl, PAUSED_ANNOTATION);
        if !paused {
            continue;
        }
        out.push(finding(
            Severity::Info,
            Check::ClusterPaused,
            Subject::of("Cluster", cl),
            "paused: Cluster API reconciles none of its objects".into(),
            format!(
                "kubectl capi resume {}{}",
                json::name(cl),
                ns_flag(json::namespace(cl))
            ),
        ));
    }
}

/// The first step of a running ClusterUpgrade that started longer than `--stuck-after` ago, and
/// for how long it has run.
fn stalled_step<'a>(c: &Ctx, u: &'a Value) -> Option<(&'a Value, i64)> {
    if str_at(u, &["status", "phase"]) != Some("Running") {
        return None;
    }
    json::at(u, &["status", "steps"])?
        .as_array()?
        .iter()
        .filter(|s| str_at(s, &["phase"]) == Some("Running"))
        .find_map(|s| {
            let age = c.since(s, &["startedAt"])?;
            c.stuck(age).then_some((s, age))
        })
}

fn upgrades(c: &Ctx, out: &mut Vec<Problem>) {
    let kinds = [
        ("ClusterUpgrade", &c.fleet.cluster_upgrades),
        ("FleetUpgrade", &c.fleet.fleet_upgrades),
    ];
    for (kind, list) in kinds {
        for u in list.iter() {
            let ns = json::namespace(u);
            let name = json::name(u);
            let msg = str_at(u, &["status", "message"])
                .map(|m| format!(": {}", m.replace('\n', " ")))
                .unwrap_or_default();
            let status_cmd = if kind == "ClusterUpgrade" {
                let cluster = str_at(u, &["spec", "clusterName"]).unwrap_or(name);
                format!("kubectl capi upgrade status {cluster}{}", ns_flag(ns))
            } else {
                format!("kubectl{} get fleetupgrade {name} -o yaml", ns_flag(ns))
            };
            if str_at(u, &["status", "phase"]) == Some("Failed") {
                out.push(finding(
                    Severity::Error,
                    Check::UpgradeFailed,
                    Subject::of(kind, u),
                    format!("failed{msg}"),
                    status_cmd,
                ));
            } else if json::bool_at(u, &["spec", "paused"]) == Some(true)
                && json::bool_at(u, &["spec", "cancelled"]) != Some(true)
            {
                out.push(finding(
                    Severity::Info,
                    Check::UpgradePaused,
                    Subject::of(kind, u),
                    "paused: no further step starts".into(),
                    if kind == "ClusterUpgrade" {
                        let cluster = str_at(u, &["spec", "clusterName"]).unwrap_or(name);
                        format!("kubectl capi upgrade resume {cluster}{}", ns_flag(ns))
                    } else {
                        status_cmd
                    },
                ));
            } else if let Some((step, age)) = stalled_step(c, u) {
                let message = str_at(step, &["message"])
                    .map(|m| format!(": {}", m.replace('\n', " ")))
                    .unwrap_or_default();
                out.push(finding(
                    Severity::Warning,
                    Check::UpgradeStalled,
                    Subject::of(kind, u),
                    format!(
                        "step {} has been running for {}{message}",
                        step["number"],
                        crate::text::age(age)
                    ),
                    status_cmd,
                ));
            }
        }
    }
}
