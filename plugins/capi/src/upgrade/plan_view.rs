//! The plan `kubectl capi upgrade CLUSTER --to VERSION --plan` prints: the steps, their
//! patches and template clones, the spare-host preflight, and which steps are already done.

use kclient::render::{Human, Render};
use kcore::plan::Severity;
use kcore::plan::upgrade::UpgradePlan;
use kcore::version::KubeVersion;
use serde::Serialize;

use crate::common::names::display_name;

/// The plan with which steps are already done.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct PlanView {
    #[serde(flatten)]
    pub(super) plan: UpgradePlan,
    /// Numbers of the steps already done (what a re-run skips).
    pub(super) done_steps: Vec<usize>,
}

impl Render for PlanView {
    fn human(&self) -> Human {
        let p = &self.plan;
        let mut s = format!(
            "Upgrade plan for cluster {}/{}: {} -> {} (path: {})\n",
            p.namespace,
            p.cluster,
            p.from_version,
            p.to_version,
            joined(&p.path)
        );
        if p.steps.is_empty() {
            s.push_str("Nothing to do: the cluster already runs that version.\n");
        }
        for st in &p.steps {
            let state = if self.done_steps.contains(&st.number) {
                "done"
            } else {
                "to do"
            };
            s.push_str(&format!(
                "\nStep {}/{} [{state}]: {} {} -> {}{}\n",
                st.number,
                p.steps.len(),
                st.target,
                st.from_version,
                st.to_version,
                if st.stepped_by_reconciler && !st.via.is_empty() {
                    format!(" (the reconciler steps through {})", joined(&st.via))
                } else {
                    String::new()
                }
            ));
            for c in &st.clone_templates {
                s.push_str(&format!(
                    "  clone {} {} -> {} (templates are immutable)\n",
                    c.kind, c.source_name, c.new_name
                ));
                for ch in &c.changes {
                    s.push_str(&format!("    {}: {} -> {}\n", ch.path, ch.from, ch.to));
                }
            }
            s.push_str(&format!(
                "  patch {}:\n",
                display_name(&st.patch.kind, &st.patch.api_version, &st.patch.name)
            ));
            for ch in &st.patch.changes {
                s.push_str(&format!("    {}: {} -> {}\n", ch.path, ch.from, ch.to));
            }
            for h in &st.spare_hosts {
                s.push_str(&format!(
                    "  spare hosts: needs {} matching {{{}}}; {} available{}\n",
                    h.needed,
                    h.selector,
                    h.available,
                    if h.ok { "" } else { " - SHORT" }
                ));
                if !h.ok {
                    for w in &h.ways_out {
                        s.push_str(&format!("    way out: {w}\n"));
                    }
                }
            }
            s.push_str(&format!("  wait for: {}\n", st.wait_for));
        }
        if !p.findings.is_empty() {
            s.push_str("\nPreflight:\n");
            for f in &p.findings {
                let sev = match f.severity {
                    Severity::Info => "info",
                    Severity::Warning => "warning",
                    Severity::Error => "BLOCKING",
                };
                s.push_str(&format!("  {sev}: {}\n", f.message));
            }
        }
        Human::Text(s)
    }
}

/// `v1.33.6, v1.34.4`.
fn joined(versions: &[KubeVersion]) -> String {
    let texts: Vec<String> = versions.iter().map(ToString::to_string).collect();
    texts.join(", ")
}
