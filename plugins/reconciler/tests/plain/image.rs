//! The reconciler image's build inputs agree with each other: `.dockerignore` sends the
//! workspace's sources and the release workflow's prebuilt binaries as build context and leaves
//! out build output (a checkout's `target/` is gigabytes), every workspace member is in the
//! context (cargo needs them all to load the workspace), and the Dockerfile's `release` stage
//! reads the binaries where the release workflow lays them out.
//!
//! There is no Docker daemon here, so `.dockerignore` is evaluated by the rules Docker documents
//! for it ("Exclude with .dockerignore" in Docker's build reference; moby/patternmatcher): patterns
//! in order, the last one that matches a path or one of its parent directories decides, `!`
//! re-includes, `**` spans any number of directories, and a trailing `/` is dropped.

use std::path::Path;
use testbed::fixtures::run::assert_contains;

fn repo() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// One segment against one pattern segment: `*` any run of characters, `?` one character.
fn segment_matches(pat: &[u8], s: &[u8]) -> bool {
    match (pat.first(), s.first()) {
        (None, None) => true,
        (Some(b'*'), _) => {
            segment_matches(&pat[1..], s) || (!s.is_empty() && segment_matches(pat, &s[1..]))
        }
        (Some(b'?'), Some(_)) => segment_matches(&pat[1..], &s[1..]),
        (Some(p), Some(c)) if p == c => segment_matches(&pat[1..], &s[1..]),
        _ => false,
    }
}

fn segments_match(pat: &[&str], path: &[&str]) -> bool {
    match pat.first() {
        None => path.is_empty(),
        Some(&"**") => (0..=path.len()).any(|i| segments_match(&pat[1..], &path[i..])),
        Some(p) => {
            !path.is_empty()
                && segment_matches(p.as_bytes(), path[0].as_bytes())
                && segments_match(&pat[1..], &path[1..])
        }
    }
}

/// Whether Docker sends `path` (relative, `/`-separated) in the build context.
fn included(rules: &[(bool, Vec<String>)], path: &str) -> bool {
    let parts: Vec<&str> = path.split('/').collect();
    let mut keep = true;
    for (negated, pat) in rules {
        let pat: Vec<&str> = pat.iter().map(String::as_str).collect();
        if (1..=parts.len()).any(|n| segments_match(&pat, &parts[..n])) {
            keep = *negated;
        }
    }
    keep
}

fn rules() -> Vec<(bool, Vec<String>)> {
    let text = std::fs::read_to_string(repo().join(".dockerignore")).expect(".dockerignore");
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (neg, pat) = match l.strip_prefix('!') {
                Some(p) => (true, p),
                None => (false, l),
            };
            let pat = pat.trim_end_matches('/');
            (neg, pat.split('/').map(str::to_string).collect())
        })
        .collect()
}

fn workspace_members() -> Vec<String> {
    let cargo = std::fs::read_to_string(repo().join("Cargo.toml")).unwrap();
    let line = cargo
        .lines()
        .find(|l| l.starts_with("members"))
        .expect("members line");
    line.split('"')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

#[test]
fn the_matcher_follows_dockers_rules() {
    let r = |lines: &[&str]| -> Vec<(bool, Vec<String>)> {
        lines
            .iter()
            .map(|l| match l.strip_prefix('!') {
                Some(p) => (true, p.split('/').map(str::to_string).collect()),
                None => (false, l.split('/').map(str::to_string).collect()),
            })
            .collect()
    };
    let rules = r(&["*", "!src", "**/target", "!src/keep/target"]);
    assert!(!included(&rules, "README.md"));
    assert!(included(&rules, "src/main.rs"));
    assert!(!included(&rules, "src/target/x"), "** spans directories");
    assert!(
        included(&rules, "src/keep/target/x"),
        "the last match decides"
    );
    assert!(included(&r(&["*.md"]), "a/b.md") && !included(&r(&["*.md"]), "b.md"));
}

#[test]
fn dockerignore_sends_sources_and_prebuilt_binaries_only() {
    let rules = rules();
    let mut want_in = vec![
        "Cargo.toml".to_string(),
        "Cargo.lock".into(),
        "LICENSE".into(),
        "plugins/reconciler/src/main.rs".into(),
        "dist/image/linux-amd64/kamaji-reconciler".into(),
        "dist/image/linux-arm64/kamaji-reconciler".into(),
    ];
    for m in workspace_members() {
        assert!(repo().join(&m).join("Cargo.toml").is_file(), "member {m}");
        want_in.push(format!("{m}/Cargo.toml"));
        want_in.push(format!("{m}/src/lib.rs"));
    }
    for p in &want_in {
        assert!(included(&rules, p), "{p} must be in the build context");
    }
    for p in [
        "target/release/kamaji-reconciler",
        "target/debug/deps/x.rlib",
        "plugins/reconciler/target/x",
        "dist/kubectl-capi_v0.1.0_linux_amd64.tar.gz",
        "dist/capi.yaml",
        ".git/config",
        ".sandbox/kubeconfig",
        ".demo/x",
        "fuzz/target/x",
        "bench/bench.py",
        "README.md",
    ] {
        assert!(
            !included(&rules, p),
            "{p} must stay out of the build context"
        );
    }
}

#[test]
fn release_stage_reads_the_binaries_where_the_workflow_puts_them() {
    let dockerfile = std::fs::read_to_string(repo().join("plugins/reconciler/Dockerfile")).unwrap();
    let workflow = std::fs::read_to_string(repo().join(".github/workflows/release.yml")).unwrap();
    assert!(dockerfile.contains("AS release"));
    assert!(dockerfile.contains("ARG TARGETARCH"));
    assert_contains(
        &dockerfile,
        "COPY dist/image/linux-${TARGETARCH}/kamaji-reconciler ",
    );
    // The release stage has no libc: the workflow builds static musl binaries for it.
    assert!(dockerfile.contains("FROM gcr.io/distroless/static-debian12:nonroot AS release"));
    for target in ["x86_64-unknown-linux-musl", "aarch64-unknown-linux-musl"] {
        assert!(workflow.contains(target), "workflow builds {target}");
    }
    assert!(workflow.contains("dist/image/linux-$arch"));
    assert!(workflow.contains("--platform linux/amd64,linux/arm64"));
    assert!(workflow.contains("--target release"));
}
