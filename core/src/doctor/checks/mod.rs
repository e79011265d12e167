//! The checks, one function per kind of problem, one file per [`Section`]: each file's
//! `CHECKS` says what every check function reports and reads.

mod control_planes;
mod leftovers;
mod management;
mod operations;
mod workers;

use super::{Check, FleetRead, Problem, Section, Subject, Thresholds};
use crate::json::str_at;
use crate::plan::Severity;
use serde_json::Value;

pub(super) struct Ctx<'a> {
    pub fleet: &'a super::Fleet,
    pub thresholds: &'a Thresholds,
    /// Unix seconds.
    pub now: i64,
}
impl Ctx<'_> {
    /// Seconds since an RFC 3339 time at `path`, if set and readable.
    fn since(&self, obj: &Value, path: &[&str]) -> Option<i64> {
        let t = str_at(obj, path)?;
        let ts: jiff::Timestamp = t.parse().ok()?;
        Some(self.now.saturating_sub(ts.as_second()))
    }
    fn stuck(&self, seconds: i64) -> bool {
        seconds > self.thresholds.stuck_after_seconds
    }
}

/// One finding of `check`, in the section that lists it.
fn finding(
    severity: Severity,
    check: Check,
    object: Subject,
    cause: String,
    fix: String,
) -> Problem {
    let section = SECTIONS
        .iter()
        .find(|(_, entries)| entries.iter().any(|e| e.checks.contains(&check)))
        .map_or(Section::Management, |(s, _)| *s);
    Problem {
        section,
        severity,
        check,
        object,
        cause,
        fix,
    }
}

/// `-n NS` for a fix line.
fn ns_flag(ns: &str) -> String {
    if ns.is_empty() {
        String::new()
    } else {
        format!(" -n {ns}")
    }
}

/// One check function: the codes it reports, the inputs it cannot run without (refused whole,
/// it does not run: an empty list would read as "nothing wrong", or as everything orphaned)
/// and those it runs without, finding less.
struct Entry {
    checks: &'static [Check],
    needs: &'static [FleetRead],
    uses: &'static [FleetRead],
    run: fn(&Ctx, &mut Vec<Problem>),
}

/// An [`Entry`], one line each: `run: [codes] needs [inputs] uses [inputs]`.
macro_rules! entry {
    ($run:ident: [$($check:ident),*] needs [$($need:ident),*] uses [$($use:ident),*]) => {
        Entry {
            checks: &[$($crate::doctor::Check::$check),*],
            needs: &[$($crate::doctor::FleetRead::$need),*],
            uses: &[$($crate::doctor::FleetRead::$use),*],
            run: $run,
        }
    };
}
use entry;

/// Every check, in report order.
const SECTIONS: [(Section, &[Entry]); 5] = [
    (Section::Management, management::CHECKS),
    (Section::ControlPlanes, control_planes::CHECKS),
    (Section::Workers, workers::CHECKS),
    (Section::Leftovers, leftovers::CHECKS),
    (Section::Operations, operations::CHECKS),
];

/// Whether a read the check cannot run without was refused whole.
fn skipped(e: &Entry, fleet: &super::Fleet) -> bool {
    fleet
        .unread
        .iter()
        .any(|u| !u.partial && e.needs.contains(&u.input))
}

/// The findings of one section.
pub(super) fn run(section: Section, c: &Ctx) -> Vec<Problem> {
    let mut out = Vec::new();
    for (_, entries) in SECTIONS.iter().filter(|(s, _)| *s == section) {
        for e in entries.iter().filter(|e| !skipped(e, c.fleet)) {
            (e.run)(c, &mut out);
        }
    }
    out
}

/// Each check a refused read kept from running or narrowed, with its section and the
/// permissions missing, in report order.
pub(super) fn affected(fleet: &super::Fleet) -> Vec<(Section, Check, Vec<String>)> {
    let mut out = Vec::new();
    for (section, e) in SECTIONS
        .iter()
        .flat_map(|(s, entries)| entries.iter().map(move |e| (*s, e)))
    {
        let missing: Vec<String> = fleet
            .unread
            .iter()
            .filter(|u| e.needs.contains(&u.input) || e.uses.contains(&u.input))
            .map(|u| u.missing.clone())
            .collect();
        if missing.is_empty() {
            continue;
        }
        for check in e.checks {
            out.push((section, *check, missing.clone()));
        }
    }
    out
}
