//! The documentation against the binaries it documents:
//! - every verb and sub-verb that `--help` lists has its page `docs/commands/<plugin>-<verb...>.md`,
//!   and every page there names a verb that exists;
//! - every `kubectl capi ...` / `kubectl kamaji ...` line of a ```sh block in those pages, README.md
//!   and docs/*.md parses with the real binary (clap checks the flags and values seen before a
//!   trailing `--help`, and exits 0 only when they are valid);
//! - README.md stays a front door: at most 250 lines, the install section within its first 60;
//!   every local link in it and in the docs leads to a file (and to a heading of it, for an anchor).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

const PLUGINS: [&str; 2] = ["capi", "kamaji"];
const README_MAX_LINES: usize = 250;
const INSTALL_WITHIN: usize = 60;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the workspace")
        .to_path_buf()
}

/// `target/<profile>/kubectl-<plugin>`, built if `make test` has not built it: this test binary
/// lives in `target/<profile>/deps/`, so the plugins are found under the same target directory,
/// whatever `CARGO_TARGET_DIR` says.
fn binary(plugin: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let deps = exe
        .parent()
        .expect("the test binary sits in target/<profile>/deps");
    let name = format!("kubectl-{plugin}");
    testbed::workspace_binary(&deps.to_string_lossy(), &name, &name)
}

/// Runs `bin args...` and returns (exit code, stdout, stderr).
fn run(bin: &Path, args: &[String]) -> (Option<i32>, String, String) {
    let out = Command::new(bin)
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", bin.display()));
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The sub-commands a `--help` text lists under `Commands:` (their names are indented by two
/// spaces; a wrapped description line is indented further), without clap's `help`.
fn listed_commands(help: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut inside = false;
    for line in help.lines() {
        if line == "Commands:" {
            inside = true;
            continue;
        }
        if !inside {
            continue;
        }
        if !line.starts_with(' ') {
            break;
        }
        let rest = &line[2..];
        if rest.starts_with(|c: char| c.is_ascii_lowercase()) {
            let name = rest.split_whitespace().next().unwrap_or_default();
            if name != "help" {
                names.push(name.to_string());
            }
        }
    }
    names
}

/// Every verb path of `plugin` that `--help` shows, walked recursively: `["hosts"]`,
/// `["hosts", "add"]`, ...
fn verbs(plugin: &str) -> Vec<Vec<String>> {
    let bin = binary(plugin);
    let mut found = Vec::new();
    let mut todo: Vec<Vec<String>> = vec![Vec::new()];
    while let Some(path) = todo.pop() {
        let mut args = path.clone();
        args.push("--help".into());
        let (code, help, err) = run(&bin, &args);
        assert_eq!(
            code,
            Some(0),
            "kubectl {plugin} {} failed: {err}",
            args.join(" ")
        );
        for sub in listed_commands(&help) {
            let mut p = path.clone();
            p.push(sub);
            found.push(p.clone());
            todo.push(p);
        }
    }
    assert!(
        found.len() > 5,
        "kubectl {plugin} --help lists too few verbs: {found:?}"
    );
    found
}

fn page_name(plugin: &str, verb: &[String]) -> String {
    format!("{plugin}-{}.md", verb.join("-"))
}

fn commands_dir() -> PathBuf {
    workspace().join("docs").join("commands")
}

/// The pages of docs/commands/ (their file names), the index README.md aside.
fn pages() -> BTreeSet<String> {
    let dir = commands_dir();
    std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md") && n != "README.md")
        .collect()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

#[test]
fn every_verb_has_its_page_and_every_page_a_verb() {
    let mut expected = BTreeSet::new();
    for plugin in PLUGINS {
        for verb in verbs(plugin) {
            expected.insert(page_name(plugin, &verb));
        }
    }
    let pages = pages();
    let missing: Vec<_> = expected.difference(&pages).collect();
    let stale: Vec<_> = pages.difference(&expected).collect();
    assert!(
        missing.is_empty(),
        "verbs without a page in docs/commands/: {missing:?}"
    );
    assert!(
        stale.is_empty(),
        "pages in docs/commands/ for verbs --help does not list: {stale:?}"
    );
    for page in &pages {
        let text = read(&commands_dir().join(page));
        for heading in ["## Synopsis", "## Examples", "## Exit codes"] {
            assert!(
                text.lines().any(|l| l.trim_end() == heading),
                "docs/commands/{page} has no `{heading}` section"
            );
        }
        // Its examples show its own verb: `kubectl capi hosts add ...` for capi-hosts-add.md.
        let command = format!(
            "kubectl {}",
            page.trim_end_matches(".md").replacen('-', " ", usize::MAX)
        );
        assert!(
            sh_command_lines(&text)
                .iter()
                .any(|l| l == &command || l.starts_with(&format!("{command} "))),
            "docs/commands/{page} has no example of `{command}` in a ```sh block"
        );
    }
}

/// The command lines of the ```sh blocks of a Markdown text: a leading `$ ` dropped, lines
/// ending in `\` joined to the next.
fn sh_command_lines(markdown: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut in_sh = false;
    let mut pending = String::new();
    for line in markdown.lines() {
        let t = line.trim();
        if let Some(fence) = t.strip_prefix("```") {
            in_sh = !in_sh && matches!(fence.trim(), "sh" | "bash" | "shell" | "console");
            pending.clear();
            continue;
        }
        if !in_sh {
            continue;
        }
        let t = if pending.is_empty() {
            t.strip_prefix("$ ").unwrap_or(t)
        } else {
            t
        };
        if let Some(head) = t.strip_suffix('\\') {
            pending.push_str(head.trim_end());
            pending.push(' ');
            continue;
        }
        pending.push_str(t);
        lines.push(std::mem::take(&mut pending).trim().to_string());
    }
    lines
}

/// A shell line split into words as `sh` would, up to the end of the first simple command (an
/// unquoted `|`, `;`, `&`, `>`, `<`, `#` or `)` ends it). Single and double quotes and
/// backslashes are honoured; nothing is expanded.
fn shell_words(line: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut redirect = false;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => word.push(c),
                        None => return Err(format!("unterminated ' in: {line}")),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\' | '$' | '`')) => word.push(c),
                            Some(c) => {
                                word.push('\\');
                                word.push(c);
                            }
                            None => return Err(format!("unterminated \" in: {line}")),
                        },
                        Some(c) => word.push(c),
                        None => return Err(format!("unterminated \" in: {line}")),
                    }
                }
            }
            '\\' => {
                in_word = true;
                if let Some(c) = chars.next() {
                    word.push(c);
                }
            }
            '|' | ';' | '&' | '>' | '<' | ')' => {
                redirect = matches!(c, '>' | '<');
                break;
            }
            '#' if !in_word => break,
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    // `2>file`: the redirection's file descriptor is not a word of the command.
    if in_word && !(redirect && word.chars().all(|c| c.is_ascii_digit())) {
        words.push(word);
    }
    Ok(words)
}

/// Every Markdown file whose examples and links are checked: README.md, bench/README.md, docs/*.md and
/// the command pages.
fn documents() -> Vec<PathBuf> {
    let mut docs = vec![
        workspace().join("README.md"),
        workspace().join("bench").join("README.md"),
    ];
    for dir in [workspace().join("docs"), commands_dir()] {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut found: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "md"))
            .collect();
        found.sort();
        docs.extend(found);
    }
    docs
}

#[test]
fn every_example_parses_with_the_real_binary() {
    let bins: Vec<(&str, PathBuf)> = PLUGINS.iter().map(|p| (*p, binary(p))).collect();
    let mut checked = 0;
    let mut failures = Vec::new();
    for doc in documents() {
        let shown = doc
            .strip_prefix(workspace())
            .unwrap_or(&doc)
            .display()
            .to_string();
        for line in sh_command_lines(&read(&doc)) {
            let Some((plugin, bin)) = bins
                .iter()
                .find(|(p, _)| line.starts_with(&format!("kubectl {p} ")))
            else {
                continue;
            };
            let words = match shell_words(&line) {
                Ok(w) => w,
                Err(e) => {
                    failures.push(format!("{shown}: {e}"));
                    continue;
                }
            };
            let mut args: Vec<String> = words.into_iter().skip(2).collect();
            args.push("--help".into());
            let (code, _, err) = run(bin, &args);
            checked += 1;
            if code != Some(0) {
                failures.push(format!(
                    "{shown}: `{line}` does not parse with kubectl-{plugin} (exit {code:?}): {}",
                    err.trim()
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} example(s) fail:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(checked > 50, "only {checked} example lines found");
}

/// The local Markdown links `[text](target#anchor)` of a text, as (target, anchor): an empty target
/// is the text itself; external links are left out.
fn local_links(markdown: &str) -> Vec<(String, Option<String>)> {
    let mut links = Vec::new();
    let mut rest = markdown;
    while let Some(i) = rest.find("](") {
        rest = &rest[i + 2..];
        let Some(end) = rest.find(')') else { break };
        let link = rest[..end].trim();
        if !link.contains("://") && !link.starts_with("mailto:") && !link.contains(' ') {
            let (target, anchor) = match link.split_once('#') {
                Some((t, a)) => (t, Some(a.to_string())),
                None => (link, None),
            };
            links.push((target.to_string(), anchor));
        }
        rest = &rest[end..];
    }
    links
}

/// The anchors GitHub gives the headings of a Markdown text (those outside code blocks): lower
/// case, spaces to `-`, punctuation other than `-` and `_` dropped.
fn anchors(markdown: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut in_code = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code || !line.starts_with('#') {
            continue;
        }
        let title = line.trim_start_matches('#').trim();
        let slug: String = title
            .to_lowercase()
            .chars()
            .filter_map(|c| match c {
                ' ' => Some('-'),
                c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
                _ => None,
            })
            .collect();
        found.push(slug);
    }
    found
}

#[test]
fn the_readme_is_short_installs_early_and_its_links_resolve() {
    let readme = read(&workspace().join("README.md"));
    let lines: Vec<&str> = readme.lines().collect();
    assert!(
        lines.len() <= README_MAX_LINES,
        "README.md has {} lines; at most {README_MAX_LINES} (details go to docs/)",
        lines.len()
    );
    let install = lines
        .iter()
        .position(|l| l.starts_with('#') && l.to_ascii_lowercase().contains("install"));
    assert!(
        install.is_some_and(|i| i < INSTALL_WITHIN),
        "README.md's install heading must be within its first {INSTALL_WITHIN} lines (found at {:?})",
        install.map(|i| i + 1)
    );
    let mut broken = Vec::new();
    for doc in documents() {
        let text = read(&doc);
        let base = doc.parent().unwrap_or(Path::new("."));
        for (target, anchor) in local_links(&text) {
            let path = if target.is_empty() {
                doc.clone()
            } else {
                base.join(&target)
            };
            if !path.exists() {
                broken.push(format!("{}: {target}", doc.display()));
            } else if let Some(anchor) = anchor
                && path.extension().is_some_and(|x| x == "md")
                && !anchors(&read(&path)).contains(&anchor)
            {
                broken.push(format!("{}: {target}#{anchor}", doc.display()));
            }
        }
    }
    assert!(
        broken.is_empty(),
        "links to no file or no heading: {broken:?}"
    );
    // Every verb page is reachable from the README.
    for page in pages() {
        assert!(
            readme.contains(&format!("docs/commands/{page}")),
            "README.md does not link docs/commands/{page}"
        );
    }
}

#[test]
fn the_example_splitter_splits_as_sh() {
    let w = |s| shell_words(s).expect("splits");
    assert_eq!(
        w("kubectl capi hosts -o jsonpath='{.items[*].name}' | head"),
        [
            "kubectl",
            "capi",
            "hosts",
            "-o",
            "jsonpath={.items[*].name}"
        ]
    );
    assert_eq!(
        w(r#"kubectl kamaji create a --label "x=y z" > out.yaml"#),
        ["kubectl", "kamaji", "create", "a", "--label", "x=y z"]
    );
    assert_eq!(
        w("kubectl capi doctor   # the fleet"),
        ["kubectl", "capi", "doctor"]
    );
    assert_eq!(
        w("kubectl capi list 2>/dev/null"),
        ["kubectl", "capi", "list"]
    );
    assert_eq!(w("kubectl capi a\\ b"), ["kubectl", "capi", "a b"]);
    assert!(shell_words("kubectl capi 'open").is_err());
    assert_eq!(
        sh_command_lines("```sh\n$ kubectl capi scale prod \\\n  --workers 3\n```\n"),
        ["kubectl capi scale prod --workers 3"]
    );
}
