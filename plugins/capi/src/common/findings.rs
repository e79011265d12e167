//! A plan's findings on the terminal.

use kcore::plan::{Finding, Severity};

/// Prints the plan's findings: warnings as `Warning:`, the rest as notes.
pub fn show_findings(findings: &[Finding]) {
    for f in findings {
        match f.severity {
            Severity::Info => kclient::render::info(&f.message),
            Severity::Warning | Severity::Error => kclient::render::warn(&f.message),
        }
    }
}
