//! How `status` lays a control plane out for people: sections of fields and tables, each
//! with a line saying what an empty one means.

use kclient::render::{Fields, Human, Render, Table};
use kcore::fields::Condition;
use kcore::ops::summary::UpgradeSummary;

use super::{AddonRow, CertRow, PodRow, Status, Summary, WorkerRow};

fn section(out: &mut String, title: &str) {
    if !out.is_empty() {
        out.push('\n');
    }
    out.push_str(title);
    out.push('\n');
}

/// A section's table, or `empty` (an indented line) when it has no rows.
fn table_or(out: &mut String, t: Option<Table>, empty: &str) {
    match t {
        Some(t) => out.push_str(&t.render(false, true, false)),
        None => out.push_str(empty),
    }
}

/// "v1.30.2", "v1.30.2 (upgrading to v1.31.0)" or "v1.31.0 (not running yet)".
fn version_text(s: &Summary) -> String {
    match (&s.version, &s.desired_version) {
        (Some(v), Some(d)) if v != d => format!("{v} (upgrading to {d})"),
        (Some(v), _) => v.clone(),
        (None, Some(d)) => format!("{d} (not running yet)"),
        (None, None) => String::new(),
    }
}

fn summary_fields(s: &Summary, upgrade: Option<&UpgradeSummary>) -> String {
    let or = |v: &Option<String>, none: &str| v.clone().unwrap_or_else(|| none.into());
    let mut f = Fields::new();
    f.add("Name", format!("{}/{}", s.namespace, s.name));
    f.add("Cluster", or(&s.cluster, "<none>"));
    f.add(
        "TenantControlPlane",
        or(&s.tenant_control_plane, "<not created>"),
    );
    f.add("Version", version_text(s));
    if let Some(u) = upgrade {
        f.add("Upgrade", u.summary.as_str());
    }
    f.add("Status", or(&s.status, "Unknown"));
    f.add(
        "Replicas",
        format!("{}/{} ready", s.ready_replicas, s.desired_replicas),
    );
    f.add("Endpoint", or(&s.endpoint, "<not assigned>"));
    f.add("DataStore", or(&s.datastore, "<Kamaji default>"));
    f.add("Infrastructure", or(&s.infrastructure, "<none>"));
    f.add("Age", s.age.as_str());
    f.render(false)
}

fn pods_table(pods: &[PodRow]) -> Option<Table> {
    Table::of(
        &["name", "status", "ready", "restarts", "node"],
        pods,
        |p| {
            [
                p.name.clone(),
                p.phase.clone(),
                p.ready.clone(),
                p.restarts.to_string(),
                p.node.clone(),
            ]
        },
    )
}

fn conditions_table(conditions: &[Condition]) -> Option<Table> {
    Table::of(&["type", "status", "reason", "message"], conditions, |c| {
        [
            c.type_.clone(),
            c.status.clone(),
            c.reason.clone().unwrap_or_default(),
            c.message.clone().unwrap_or_default(),
        ]
    })
}

fn addons_table(addons: &[AddonRow]) -> Table {
    let mut t = Table::new(["addon", "enabled", "details"]);
    for a in addons {
        t.row([
            a.name.clone(),
            if a.enabled { "yes" } else { "no" }.to_string(),
            a.details.clone(),
        ]);
    }
    t
}

fn certificates_table(certificates: &[CertRow]) -> Option<Table> {
    let headers = ["secret", "key", "subject", "expires", "days left"];
    Table::of(&headers, certificates, |c| {
        [
            c.secret.clone(),
            c.key.clone(),
            c.subject.clone(),
            c.not_after.clone(),
            c.days_left.to_string(),
        ]
    })
}

fn workers_table(workers: &[WorkerRow]) -> Option<Table> {
    let headers = ["machinedeployment", "ready/desired", "version"];
    Table::of(&headers, workers, |w| {
        let ready = format!("{}/{}", w.ready, w.desired);
        [w.machine_deployment.clone(), ready, w.version.clone()]
    })
}

impl Render for Status {
    fn human(&self) -> Human {
        let mut out = String::new();
        section(&mut out, "Control plane");
        out.push_str(&summary_fields(&self.summary, self.upgrade.as_ref()));
        section(&mut out, "Control-plane pods");
        table_or(&mut out, pods_table(&self.pods), "  none found\n");
        section(&mut out, "Conditions");
        table_or(
            &mut out,
            conditions_table(&self.conditions),
            "  none reported\n",
        );
        section(&mut out, "Addons");
        out.push_str(&addons_table(&self.addons).render(false, true, false));
        section(&mut out, "Certificates");
        table_or(
            &mut out,
            certificates_table(&self.certificates),
            "  none found\n",
        );
        section(&mut out, "Workers");
        table_or(
            &mut out,
            workers_table(&self.workers),
            "  no MachineDeployments (join workers with kubectl kamaji token join)\n",
        );
        if !self.hints.is_empty() {
            section(&mut out, "Hints");
            for h in &self.hints {
                out.push_str(&format!("  - {h}\n"));
            }
        }
        Human::Text(out)
    }
}
