//! The layering rules of ARCHITECTURE.md, checked on the real dependency graph and sources:
//! - `capi-kamaji-core` (kcore) is pure: no tokio, no kube client, no hyper, no clap;
//! - `kubectl-kamaji` does not link the reconciler; the reconciler uses no library with clap
//!   (its own binary's flags aside) and no plugin crate;
//! - clap appears in library code only in the `cli` crate;
//! - one definition each of the concepts that used to exist in several copies.

use std::path::{Path, PathBuf};
use std::process::Command;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the workspace")
        .to_path_buf()
}

/// The normal (non-dev, non-build) dependencies of `package`, one `name` per line.
fn deps(package: &str) -> Vec<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "tree",
            "--offline",
            "-e",
            "normal",
            "--prefix",
            "none",
            "-p",
            package,
        ])
        .current_dir(workspace())
        .output()
        .expect("cargo tree runs");
    assert!(
        out.status.success(),
        "cargo tree -p {package}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut names: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect();
    names.sort();
    names.dedup();
    names
}

#[test]
fn the_core_is_pure() {
    let d = deps("capi-kamaji-core");
    assert!(d.iter().any(|n| n == "serde_json"), "sanity: {d:?}");
    for banned in [
        "tokio",
        "hyper",
        "clap",
        "kube-client",
        "tower",
        "comfy-table",
        "indicatif",
    ] {
        assert!(
            !d.iter().any(|n| n == banned),
            "capi-kamaji-core depends on {banned}"
        );
    }
}

#[test]
fn the_cli_does_not_link_the_controller_and_the_controller_no_cli_library() {
    let kamaji = deps("kubectl-kamaji");
    assert!(
        kamaji.iter().any(|n| n == "capi-kamaji-core"),
        "sanity: {kamaji:?}"
    );
    assert!(!kamaji.iter().any(|n| n == "kamaji-reconciler"));
    let reconciler = deps("kamaji-reconciler");
    for banned in [
        "capi-kamaji-cli",
        "capi-kamaji-shared",
        "kubectl-capi",
        "kubectl-kamaji",
    ] {
        assert!(
            !reconciler.iter().any(|n| n == banned),
            "the reconciler depends on {banned}"
        );
    }
    let shared = deps("capi-kamaji-shared");
    assert!(
        !shared.iter().any(|n| n == "clap"),
        "shared depends on clap"
    );
}

/// Every `.rs` file under `dir`.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir)
        .expect("readable source dir")
        .flatten()
    {
        let p = e.path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The files (relative to the workspace) of the library and binary sources whose lines match.
fn defining(matches: impl Fn(&str) -> bool) -> Vec<String> {
    let root = workspace();
    let mut files = Vec::new();
    for dir in ["core/src", "shared/src", "cli/src", "plugins"] {
        sources(&root.join(dir), &mut files);
    }
    let mut out: Vec<String> = files
        .iter()
        .filter(|f| !f.components().any(|c| c.as_os_str() == "tests"))
        .filter(|f| {
            std::fs::read_to_string(f)
                .unwrap_or_default()
                .lines()
                .any(|l| matches(l.trim_start()))
        })
        .map(|f| f.strip_prefix(&root).unwrap_or(f).display().to_string())
        .collect();
    out.sort();
    out
}

#[test]
fn one_definition_per_concept() {
    let one = |what: &str, found: Vec<String>, want: &str| {
        assert_eq!(found, [want], "{what} must be defined once, in {want}");
    };
    // The read model of conditions (the KamajiControlPlane API's wire types are its schema).
    let read_models: Vec<String> = defining(|l| l.starts_with("pub struct Condition {"))
        .into_iter()
        .filter(|f| !f.starts_with("core/src/kcp/api/"))
        .collect();
    one("the condition model", read_models, "core/src/condition.rs");
    one(
        "the negative-polarity list",
        defining(|l| l.contains("NEGATIVE_POLARITY: [")),
        "core/src/condition.rs",
    );
    one(
        "the Kubernetes version type",
        defining(|l| {
            [
                "pub struct KubeVersion",
                "pub struct Version {",
                "pub struct Version(",
            ]
            .iter()
            .any(|p| l.starts_with(p))
        }),
        "core/src/version.rs",
    );
    one(
        "the kubeconfig merge",
        defining(|l| l.starts_with("pub fn merge(") && !l.contains("merge(into")),
        "shared/src/kubeconfig.rs",
    );
    one(
        "the atomic file writer",
        defining(|l| l.starts_with("pub fn write_atomic(")),
        "shared/src/kubeconfig.rs",
    );
    one(
        "confirm",
        defining(|l| l.starts_with("pub fn confirm(")),
        "shared/src/render/mod.rs",
    );
    one(
        "the cluster name label",
        defining(|l| l.starts_with("pub const CLUSTER_NAME_LABEL")),
        "core/src/labels.rs",
    );
    one(
        "the admission-controller list",
        defining(|l| l.starts_with("pub const ADMISSION_CONTROLLERS")),
        "core/src/kcp/api/common.rs",
    );
    one(
        "--dry-run",
        defining(|l| l.starts_with("pub enum DryRun")),
        "cli/src/flags.rs",
    );
    one(
        "the teardown",
        defining(|l| l.starts_with("pub async fn execute(")),
        "shared/src/teardown.rs",
    );
}

#[test]
fn clap_only_in_the_cli_crate_and_the_binaries() {
    let users = defining(|l| l.starts_with("use clap") || l.contains("clap::"));
    let libraries: Vec<&String> = users
        .iter()
        .filter(|f| f.starts_with("core/") || f.starts_with("shared/"))
        .collect();
    assert!(libraries.is_empty(), "clap in library code: {libraries:?}");
    assert!(
        users.iter().any(|f| f.starts_with("cli/")),
        "sanity: {users:?}"
    );
}
