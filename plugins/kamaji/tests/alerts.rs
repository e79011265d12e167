//! The alerts and dashboard `kubectl kamaji install` ships (`kcore::install::monitoring`),
//! checked by Prometheus's own promtool (built from the Go module proxy by
//! `testbed/build-bins.sh monitoring`): `check rules` parses every alert and every dashboard
//! query (given to it as recording rules), and `test rules` (plugins/kamaji/tests/data/alerts-test.yaml) fires
//! each alert on the series kamaji-reconciler exports, and not on healthy ones.

use std::path::Path;
use std::process::Command;

use kcore::install::monitoring::{PANELS, rule_groups};
use serde_json::json;

fn promtool(dir: &Path, args: &[&str]) -> String {
    let bins = testbed::build_bins("monitoring").expect("testbed/build-bins.sh monitoring");
    let out = Command::new(bins.join("promtool"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("promtool runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "promtool {args:?}:\n{text}");
    text
}

#[test]
fn promtool_accepts_the_rules_and_the_dashboard_and_the_alerts_fire_as_tested() {
    let dir = tempfile::tempdir().unwrap();
    // JSON is YAML: promtool reads the groups as kamaji install writes them.
    std::fs::write(
        dir.path().join("rules.yaml"),
        json!({"groups": rule_groups()}).to_string(),
    )
    .unwrap();
    let panels: Vec<_> = PANELS
        .iter()
        .enumerate()
        .map(|(i, (_, expr))| json!({"record": format!("dashboard:panel_{i}"), "expr": expr}))
        .collect();
    std::fs::write(
        dir.path().join("dashboard.yaml"),
        json!({"groups": [{"name": "dashboard", "rules": panels}]}).to_string(),
    )
    .unwrap();
    let checked = promtool(
        dir.path(),
        &["check", "rules", "rules.yaml", "dashboard.yaml"],
    );
    assert!(checked.contains("SUCCESS: 7 rules found"), "{checked}");
    assert!(
        checked.contains(&format!("SUCCESS: {} rules found", PANELS.len())),
        "{checked}"
    );
    let tests = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/alerts-test.yaml");
    std::fs::copy(&tests, dir.path().join("alerts-test.yaml")).unwrap();
    let tested = promtool(dir.path(), &["test", "rules", "alerts-test.yaml"]);
    assert!(tested.contains("SUCCESS"), "{tested}");
}
