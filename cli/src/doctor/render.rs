//! The doctor's report: `-o json|yaml`'s schema, and the table.

use std::collections::BTreeMap;

use kclient::render::{Cell, Human, Render, Table, Tone};
use kcore::doctor::{Counts, NotChecked, Problem};
use kcore::plan::Severity;
use serde::Serialize;

/// The report `-o json|yaml` prints (schema in the README, "kubectl capi doctor").
#[derive(Serialize, Debug)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// Worst first.
    pub findings: Vec<Problem>,
    pub counts: Counts,
    /// How many objects of each kind were read.
    pub checked: BTreeMap<&'static str, usize>,
    /// What could not be checked, and why, one line each (the lines of `not_checked_sections`
    /// first).
    pub not_checked: Vec<String>,
    /// Per section, the checks a read the API server refused kept from running or narrowed,
    /// and the permissions lacking (`kubectl auth can-i` form).
    pub not_checked_sections: Vec<NotChecked>,
}

fn tone(s: Severity) -> Tone {
    match s {
        Severity::Error => Tone::Bad,
        Severity::Warning => Tone::Warn,
        Severity::Info => Tone::Dim,
    }
}

impl Render for Report {
    fn human(&self) -> Human {
        if self.findings.is_empty() {
            // A report with sections not checked is no clean bill of health.
            let found = if self.not_checked_sections.is_empty() {
                "No problems found"
            } else {
                "No problems found in what could be read"
            };
            let mut text = format!("{found} ({}).", self.read());
            for n in &self.not_checked {
                text.push_str(&format!("\nNot checked: {n}"));
            }
            return Human::Text(text);
        }
        let mut t = Table::new(["SEVERITY", "SECTION", "OBJECT", "CAUSE", "FIX"]).wide(["CHECK"]);
        for f in &self.findings {
            let o = &f.object;
            let object = if o.namespace.is_empty() {
                format!("{}/{}", o.kind, o.name)
            } else {
                format!("{}/{}/{}", o.kind, o.namespace, o.name)
            };
            t.row([
                Cell::new(format!("{:?}", f.severity), tone(f.severity)),
                Cell::from(f.section.as_str()),
                Cell::from(object),
                Cell::from(f.cause.as_str()),
                Cell::from(f.fix.as_str()),
                Cell::from(format!("{:?}", f.check)),
            ]);
        }
        Human::Table(t)
    }
    fn footer(&self) -> Option<String> {
        let Counts {
            error,
            warning,
            info,
        } = self.counts;
        let read = self.read();
        let mut s = format!("{error} error(s), {warning} warning(s), {info} info ({read}).");
        for n in &self.not_checked {
            s.push_str(&format!("\nNot checked: {n}"));
        }
        Some(s)
    }
}

impl Report {
    /// "read 3 clusters, 12 machines, ..."
    fn read(&self) -> String {
        let parts: Vec<String> = self
            .checked
            .iter()
            .map(|(k, n)| format!("{n} {k}"))
            .collect();
        if parts.is_empty() {
            return "nothing could be read".into();
        }
        format!("read {}", parts.join(", "))
    }
}
