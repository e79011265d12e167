//! The habits CONTRIBUTING.md asks for, checked on the repository itself:
//! - a commit's subject says what changed in at most 72 characters, with a blank line before the
//!   body (from the commit that adopted the rule on; `make hooks` checks it as you commit);
//! - comments and docs say why in the tree's own words, not by pointing at a tracker that is not
//!   in the repository ("issue N");
//! - each plugin's test folders are named by what they run against, the same in every plugin.

use std::path::{Path, PathBuf};
use std::process::Command;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the workspace")
        .to_path_buf()
}

fn git(args: &[&str]) -> std::process::Output {
    Command::new("git")
        .args(args)
        .current_dir(workspace())
        .output()
        .expect("git runs")
}

/// The commit that adopted the 72-character rule: every commit after it keeps it.
const RULE_ADOPTED: &str = "582c87fa7c88c42a728507341526b5d1153bfd85";
const MAX_SUBJECT: usize = 72;

/// What is wrong with a commit message, if anything.
fn message_fault(message: &str) -> Option<String> {
    let mut lines = message.lines();
    let subject = lines.next().unwrap_or_default();
    let chars = subject.chars().count();
    if subject.trim().is_empty() {
        return Some("an empty subject".into());
    }
    if chars > MAX_SUBJECT {
        return Some(format!(
            "a subject of {chars} characters (at most {MAX_SUBJECT})"
        ));
    }
    if lines.next().is_some_and(|l| !l.trim().is_empty()) {
        return Some("no blank line between the subject and the body".into());
    }
    None
}

#[test]
fn the_message_rule_catches_what_it_should() {
    assert_eq!(message_fault("kamaji: one field manager\n\nwhy\n"), None);
    assert!(message_fault(&"x".repeat(73)).is_some());
    assert!(message_fault("subject\nbody right under it").is_some());
    assert!(message_fault("\n\nbody").is_some());
}

#[test]
fn commit_subjects_since_the_rule_are_short() {
    // A shallow clone may not hold the commit that adopted the rule: then only HEAD is checked.
    let has_base = git(&["cat-file", "-e", &format!("{RULE_ADOPTED}^{{commit}}")])
        .status
        .success();
    let range = if has_base {
        format!("{RULE_ADOPTED}..HEAD")
    } else {
        "-1".to_string()
    };
    let out = git(&["log", "--format=%H%x00%B%x01", &range]);
    assert!(out.status.success(), "git log {range}");
    let text = String::from_utf8_lossy(&out.stdout);
    let faults: Vec<String> = text
        .split('\u{1}')
        .filter_map(|entry| {
            let (hash, message) = entry.trim_start_matches('\n').split_once('\0')?;
            message_fault(message).map(|f| format!("{}: {f}", &hash[..hash.len().min(12)]))
        })
        .collect();
    assert!(
        faults.is_empty(),
        "commits that break CONTRIBUTING.md's message rule (`make hooks` checks as you commit):\n{}",
        faults.join("\n")
    );
}

/// Whether `line` points at a tracker's issue by number: the word, a space or `#`, digits.
fn names_an_issue_number(line: &str) -> bool {
    let lower = line.to_ascii_lowercase();
    let mut rest = lower.as_str();
    while let Some(at) = rest.find("issue") {
        let before = rest[..at].chars().next_back();
        let after = rest[at + "issue".len()..].trim_start_matches([' ', '#']);
        let word_start = before.is_none_or(|c| !c.is_ascii_alphanumeric());
        let spaced = rest[at + "issue".len()..].starts_with([' ', '#']);
        if word_start && spaced && after.starts_with(|c: char| c.is_ascii_digit()) {
            return true;
        }
        rest = &rest[at + "issue".len()..];
    }
    false
}

#[test]
fn the_issue_finder_finds_what_it_should() {
    // Built, so that this file does not itself cite a number.
    let cited = format!("// {} 24: a FIFO nobody writes to", "Issue");
    assert!(names_an_issue_number(&cited));
    assert!(names_an_issue_number("fleet sizes (issue #16)"));
    assert!(!names_an_issue_number(
        "see kubernetes-sigs/cluster-api#11954"
    ));
    assert!(!names_an_issue_number("issues 3 ways"));
    assert!(!names_an_issue_number("the issue is 3 hosts short"));
}

#[test]
fn sources_say_why_without_a_tracker_number() {
    let out = git(&["ls-files", "-z"]);
    assert!(out.status.success());
    let mut found = Vec::new();
    for file in String::from_utf8_lossy(&out.stdout).split('\0') {
        let text_like = [".rs", ".md", ".sh", ".py", ".yaml", ".toml", "Makefile"]
            .iter()
            .any(|ext| file.ends_with(ext));
        // This file holds the examples its finder is tested on.
        if !text_like || file.is_empty() || file == "tests/tests/habits.rs" {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(workspace().join(file)) else {
            continue;
        };
        for (n, line) in text.lines().enumerate() {
            if names_an_issue_number(line) {
                found.push(format!("{file}:{}: {}", n + 1, line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "say why in the tree's own words (name an upstream issue as owner/repo#N):\n{}",
        found.join("\n")
    );
}

/// The test folders of each plugin: one test binary per kind of testbed, named by what it runs
/// against, the same names in every plugin.
const TEST_FOLDERS: [&str; 4] = ["apiserver", "controllers", "common", "data"];

#[test]
fn test_folders_are_named_by_what_they_run_against() {
    let mut odd = Vec::new();
    for plugin in ["capi", "kamaji", "reconciler"] {
        let dir = workspace().join("plugins").join(plugin).join("tests");
        for entry in std::fs::read_dir(&dir)
            .expect("a plugin has tests")
            .flatten()
        {
            let name = entry.file_name().to_string_lossy().to_string();
            if entry.path().is_dir() && !TEST_FOLDERS.contains(&name.as_str()) {
                odd.push(format!("plugins/{plugin}/tests/{name}/"));
            }
        }
    }
    assert!(
        odd.is_empty(),
        "test folders are one of {TEST_FOLDERS:?} (the API server with the objects the test \
         writes, or the real controllers): {odd:?}"
    );
}

/// A production source a reader can hold: at most this many lines (tests apart).
const MAX_SOURCE_LINES: usize = 800;

fn production_sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("a source folder").flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().to_string();
        if path.is_dir() {
            if name != "tests" {
                production_sources(&path, out);
            }
        } else if name.ends_with(".rs") && name != "tests.rs" && !name.ends_with("_tests.rs") {
            out.push(path);
        }
    }
}

#[test]
fn production_files_are_short_enough_to_hold() {
    let mut files = Vec::new();
    for dir in ["core/src", "client/src", "cli/src", "image/src"] {
        production_sources(&workspace().join(dir), &mut files);
    }
    for plugin in ["capi", "kamaji", "reconciler"] {
        production_sources(
            &workspace().join("plugins").join(plugin).join("src"),
            &mut files,
        );
    }
    assert!(files.len() > 100, "sanity: {} files", files.len());
    let mut long: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let lines = std::fs::read_to_string(f).ok()?.lines().count();
            (lines > MAX_SOURCE_LINES).then(|| {
                let rel = f.strip_prefix(workspace()).unwrap_or(f);
                format!("{} ({lines} lines)", rel.display())
            })
        })
        .collect();
    long.sort();
    assert!(
        long.is_empty(),
        "production files of more than {MAX_SOURCE_LINES} lines: split them by subject: {long:?}"
    );
}
