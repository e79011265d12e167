//! The layering rules of ARCHITECTURE.md, checked on the real dependency graph and sources:
//! - `capi-kamaji-core` (kcore) is pure: no tokio, no kube client, no hyper, no clap;
//! - `kubectl-kamaji` does not link the reconciler; the reconciler uses no library with clap
//!   (its own binary's flags aside) and no plugin crate;
//! - clap appears in library code only in the `cli` crate;
//! - one definition each of the concepts that used to exist in several copies.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
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

/// Asserts that `deps`, the dependencies of `who`, hold none of `banned`.
fn assert_none_of(deps: &[String], banned: &[&str], who: &str) {
    for b in banned {
        assert!(!deps.iter().any(|n| n == b), "{who} depends on {b}");
    }
}

#[test]
fn the_core_is_pure() {
    let d = deps("capi-kamaji-core");
    assert!(d.iter().any(|n| n == "serde_json"), "sanity: {d:?}");
    let banned = [
        "tokio",
        "hyper",
        "clap",
        "kube-client",
        "tower",
        "comfy-table",
        "indicatif",
    ];
    assert_none_of(&d, &banned, "capi-kamaji-core");
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
    let banned = [
        "capi-kamaji-cli",
        "capi-kamaji-client",
        "kubectl-capi",
        "kubectl-kamaji",
    ];
    assert_none_of(&reconciler, &banned, "the reconciler");
    // The etcd client both link prints nothing and parses no flags.
    let etcd = deps("capi-kamaji-etcd");
    assert!(
        etcd.iter().any(|n| n == "capi-kamaji-core"),
        "sanity: {etcd:?}"
    );
    assert_none_of(
        &etcd,
        &["clap", "comfy-table", "indicatif", "capi-kamaji-client"],
        "capi-kamaji-etcd",
    );
    let shared = deps("capi-kamaji-client");
    assert!(
        !shared.iter().any(|n| n == "clap"),
        "the client layer depends on clap"
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

/// Every `.rs` file of the product: the core, client, cli and plugin crates (their tests too).
fn product_sources() -> Vec<PathBuf> {
    let mut files = Vec::new();
    for dir in ["core/src", "client/src", "cli/src", "plugins"] {
        sources(&workspace().join(dir), &mut files);
    }
    files
}

/// `f` relative to the workspace, for a message.
fn rel(f: &Path) -> String {
    f.strip_prefix(workspace())
        .unwrap_or(f)
        .display()
        .to_string()
}

/// The files (relative to the workspace) of the library and binary sources whose lines match.
fn defining(matches: impl Fn(&str) -> bool) -> Vec<String> {
    let mut out: Vec<String> = product_sources()
        .iter()
        .filter(|f| !f.components().any(|c| c.as_os_str() == "tests"))
        .filter(|f| {
            std::fs::read_to_string(f)
                .unwrap_or_default()
                .lines()
                .any(|l| matches(l.trim_start()))
        })
        .map(|f| rel(f))
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
        .filter(|f| !f.starts_with("core/src/kamaji/api/"))
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
        "client/src/kubeconfig.rs",
    );
    // Concepts a line starting with a prefix defines.
    for (what, prefix, want) in [
        (
            "the atomic file writer",
            "pub fn write_atomic(",
            "client/src/kubeconfig.rs",
        ),
        ("confirm", "pub fn confirm(", "client/src/render/mod.rs"),
        (
            "the cluster name label",
            "pub const CLUSTER_NAME_LABEL",
            "core/src/labels.rs",
        ),
        (
            "the admission-controller list",
            "pub const ADMISSION_CONTROLLERS",
            "core/src/kamaji/api/common.rs",
        ),
        ("--dry-run", "pub enum DryRun", "cli/src/flags.rs"),
        (
            "the teardown",
            "pub async fn execute(",
            "client/src/teardown.rs",
        ),
    ] {
        one(what, defining(|l| l.starts_with(prefix)), want);
    }
}

#[test]
fn clap_only_in_the_cli_crate_and_the_binaries() {
    let users = defining(|l| l.starts_with("use clap") || l.contains("clap::"));
    let libraries: Vec<&String> = users
        .iter()
        .filter(|f| f.starts_with("core/") || f.starts_with("client/"))
        .collect();
    assert!(libraries.is_empty(), "clap in library code: {libraries:?}");
    assert!(
        users.iter().any(|f| f.starts_with("cli/")),
        "sanity: {users:?}"
    );
}

/// The string constants the core defines publicly (`pub const NAME: &str = "value";`), by value,
/// with the file that defines each.
fn core_string_constants() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for f in &core_library_sources() {
        for l in std::fs::read_to_string(f).unwrap_or_default().lines() {
            if let Some(v) =
                string_const(l.trim_start()).filter(|_| l.trim_start().starts_with("pub const"))
            {
                out.push((v, rel(f)));
            }
        }
    }
    out
}

/// `"value"` of a line `[pub] const NAME: &str = "value";`.
fn string_const(l: &str) -> Option<String> {
    let l = l
        .strip_prefix("pub(crate) ")
        .or_else(|| l.strip_prefix("pub "))
        .unwrap_or(l);
    let rest = l.strip_prefix("const ")?;
    let (_, rest) = rest.split_once(": &str = \"")?;
    let (v, _) = rest.split_once("\";")?;
    Some(v.to_string())
}

fn is_test_source(f: &Path) -> bool {
    f.components().any(|c| c.as_os_str() == "tests") || f.ends_with("tests.rs")
}

/// The core's library sources (test code left out).
fn core_library_sources() -> Vec<PathBuf> {
    let mut files = Vec::new();
    sources(&workspace().join("core/src"), &mut files);
    files.retain(|f| !is_test_source(f));
    files
}

/// A label, annotation or other constant the core defines is used from there, never
/// written again under another (private) name, where it could drift.
#[test]
fn no_private_copy_of_a_core_constant() {
    let core = core_string_constants();
    assert!(
        core.iter()
            .any(|(v, _)| v == "cluster.x-k8s.io/cluster-name"),
        "sanity: {core:?}"
    );
    let mut copies = Vec::new();
    for f in product_sources().iter().filter(|f| !is_test_source(f)) {
        let rel = rel(f);
        for l in std::fs::read_to_string(f).unwrap_or_default().lines() {
            let Some(v) = string_const(l.trim_start()) else {
                continue;
            };
            if let Some((_, home)) = core.iter().find(|(cv, home)| *cv == v && *home != rel) {
                copies.push(format!("{rel}: {} (defined in {home})", l.trim()));
            }
        }
    }
    assert!(
        copies.is_empty(),
        "private copies of core constants:\n{}",
        copies.join("\n")
    );
}

/// The core's public API as a listing, one line per public item, sorted: `kcore::path::Item
/// kind`, the path where the item is written (a private module's name included: the core's
/// `unreachable_pub` lint keeps every `pub` item reachable from outside, through a public
/// module or a re-export, which is then listed as a `use`), methods and associated consts of
/// an inherent `impl` as `Type::name`. Enum variants, struct fields and trait items come with
/// their type. Items a crate-local `macro_rules!` writes are listed in the module that invokes
/// it; what a derive writes is not listed. Test code is left out.
///
/// Read from the sources as rustfmt lays them out (`make lint` checks it): an item starts its
/// line at its nesting's indentation, an `impl`'s items four columns in.
fn core_public_api() -> Vec<String> {
    let src = workspace().join("core/src");
    let files = core_library_sources();
    let texts: Vec<(Vec<String>, String)> = files
        .iter()
        .map(|f| {
            let text = std::fs::read_to_string(f).unwrap_or_default();
            (module_path(&src, f), without_test_items(&text))
        })
        .collect();
    let macros: BTreeMap<String, String> = texts
        .iter()
        .flat_map(|(_, text)| macro_bodies(text))
        .collect();
    let mut out = Vec::new();
    for (module, text) in &texts {
        let mut path = vec!["kcore".to_string()];
        path.extend(module.iter().cloned());
        public_items(text, &path.join("::"), &macros, &mut out);
    }
    out.sort();
    out.dedup();
    out
}

/// The `macro_rules!` of a source text at its top level, by name: each arm's body, moved left
/// to the top level (rustfmt puts an arm's body eight columns in).
fn macro_bodies(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut lines = text.lines();
    while let Some(l) = lines.next() {
        let Some(name) = l.strip_prefix("macro_rules! ") else {
            continue;
        };
        let name = name.trim_end_matches(" {").trim().to_string();
        let body: Vec<&str> = lines
            .by_ref()
            .take_while(|l| *l != "}")
            .filter_map(|l| l.strip_prefix("        "))
            .collect();
        out.push((name, body.join("\n")));
    }
    out
}

/// The number of leading spaces of `l`.
fn indent(l: &str) -> usize {
    l.len() - l.trim_start_matches(' ').len()
}

/// `text` without its test code: each item marked `#[cfg(test)]` (a `mod tests;` line, a
/// `mod tests { .. }` block, a test-only function) and every comment line.
fn without_test_items(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let l = lines[i];
        if l.trim() != "#[cfg(test)]" {
            if !l.trim_start().starts_with("//") {
                out.push(l);
            }
            i += 1;
            continue;
        }
        // The item after the attribute (and any other attributes) at the same indentation ends
        // on its own line (`mod tests;`, `fn f() {}`) or at the `}` that closes it there.
        let at = indent(l);
        i += 1;
        while i < lines.len() && (indent(lines[i]) != at || lines[i].trim_start().starts_with('#'))
        {
            i += 1;
        }
        let one_line = lines
            .get(i)
            .is_some_and(|l| l.ends_with(';') || l.ends_with('}'));
        if !one_line {
            i += 1;
            while i < lines.len()
                && !(indent(lines[i]) == at && lines[i].trim_start().starts_with('}'))
            {
                i += 1;
            }
        }
        i += 1;
    }
    out.join("\n")
}

/// The type an inherent `impl` header names (`impl<'a> RowJoin<'a> {`: `RowJoin`), or `None`
/// for a trait's `impl .. for ..`.
fn inherent_impl_type(header: &str) -> Option<String> {
    let mut rest = header.strip_prefix("impl")?.trim_start();
    if rest.starts_with('<') {
        let mut depth = 0;
        let end = rest.char_indices().find_map(|(i, c)| {
            match c {
                '<' => depth += 1,
                '>' => depth -= 1,
                _ => {}
            }
            (depth == 0).then_some(i + 1)
        })?;
        rest = &rest[end..];
    }
    if rest.contains(" for ") {
        return None;
    }
    let ty: String = rest
        .trim_start()
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
        .collect();
    ty.rsplit("::").next().map(str::to_string)
}

/// The public items of one module's text (test code already out), as `module::Item kind` lines.
fn public_items(
    text: &str,
    module: &str,
    macros: &BTreeMap<String, String>,
    out: &mut Vec<String>,
) {
    let lines: Vec<&str> = text.lines().collect();
    let mut inherent: Option<String> = None;
    let mut i = 0;
    while i < lines.len() {
        let l = lines[i];
        i += 1;
        if l.starts_with('}') {
            inherent = None;
        } else if l.starts_with("impl") {
            // A header may run over several lines (a `where` clause) up to its `{`.
            let mut header = l.to_string();
            while !header.ends_with('{') && i < lines.len() {
                header.push(' ');
                header.push_str(lines[i].trim());
                i += 1;
            }
            inherent = inherent_impl_type(&header);
        } else if let Some(rest) = l.strip_prefix("pub ") {
            if let Some(tree) = rest.strip_prefix("use ") {
                let mut tree = tree.to_string();
                while !tree.ends_with(';') && i < lines.len() {
                    tree.push_str(lines[i].trim());
                    i += 1;
                }
                let mut leaves = Vec::new();
                use_leaves(tree.trim_end_matches(';'), &[], &mut leaves);
                for (path, name) in leaves {
                    let name = name.unwrap_or_else(|| format!("{}::*", path.join("::")));
                    out.push(format!("{module}::{name} use"));
                }
            } else if let Some((kind, name)) = item_kind(rest) {
                out.push(format!("{module}::{name} {kind}"));
                if kind == "mod" && l.ends_with('{') {
                    // An inline module: its lines, moved left to the top level.
                    let mut body = Vec::new();
                    while i < lines.len() && !lines[i].starts_with('}') {
                        body.push(lines[i].strip_prefix("    ").unwrap_or(lines[i]));
                        i += 1;
                    }
                    i += 1;
                    public_items(&body.join("\n"), &format!("{module}::{name}"), macros, out);
                }
            }
        } else if let Some(ty) = &inherent {
            if let Some((kind, name)) = l.strip_prefix("    pub ").and_then(item_kind) {
                out.push(format!("{module}::{ty}::{name} {kind}"));
            }
        } else if let Some(body) = l.split_once('!').and_then(|(name, _)| macros.get(name)) {
            public_items(body, module, macros, out);
        }
    }
}

/// The kind and name of an item from what follows its `pub `: `async fn f(..`: (`fn`, `f`).
fn item_kind(rest: &str) -> Option<(&'static str, String)> {
    let rest = rest
        .trim_start_matches("async ")
        .trim_start_matches("unsafe ");
    let rest = rest.strip_prefix("const fn ").map_or(rest, |r| r);
    let (kind, rest) = [
        ("fn", "fn "),
        ("struct", "struct "),
        ("enum", "enum "),
        ("trait", "trait "),
        ("type", "type "),
        ("mod", "mod "),
        ("const", "const "),
        ("static", "static "),
    ]
    .into_iter()
    .find_map(|(kind, prefix)| rest.strip_prefix(prefix).map(|r| (kind, r)))?;
    let name: String = rest
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    (!name.is_empty()).then_some((kind, name))
}

/// The core's public API is the checked-in listing `core/public-api.txt`: a change to it shows
/// in review as a change to that file. Make what only the core uses `pub(crate)`; for an item
/// another crate needs, accept the new listing with the command the failure prints.
#[test]
fn the_core_public_api_is_the_listing() {
    const LISTING: &str = "core/public-api.txt";
    const ACCEPT: &str = "UPDATE_PUBLIC_API=1 cargo test -p e2e --test layers";
    let mut want = vec![
        "# The public items of capi-kamaji-core (kcore): path kind. Generated by tests/tests/layers.rs;"
            .to_string(),
        format!("# after changing the core's public items, accept them with `{ACCEPT}`."),
    ];
    let items = core_public_api();
    assert!(items.len() > 300, "sanity: {} items", items.len());
    assert!(
        items
            .iter()
            .any(|l| l == "kcore::version::KubeVersion struct"),
        "sanity: {items:?}"
    );
    want.extend(items);
    let file = workspace().join(LISTING);
    if std::env::var_os("UPDATE_PUBLIC_API").is_some() {
        std::fs::write(&file, want.join("\n") + "\n").expect("core/public-api.txt is writable");
        return;
    }
    let have = std::fs::read_to_string(&file).unwrap_or_default();
    let have: Vec<&str> = have.lines().collect();
    if have == want {
        return;
    }
    let gone: Vec<String> = have
        .iter()
        .filter(|l| !want.iter().any(|w| w == *l))
        .map(|l| format!("- {l}"))
        .collect();
    let new: Vec<String> = want
        .iter()
        .filter(|w| !have.contains(&w.as_str()))
        .map(|w| format!("+ {w}"))
        .collect();
    panic!(
        "the core's public items differ from {LISTING} (- listed, not in the sources; + in the \
         sources, not listed):\n{}\n{}\nMake what only the core uses pub(crate); if another crate \
         needs the change, accept it: {ACCEPT}",
        gone.join("\n"),
        new.join("\n"),
    );
}

/// In each plugin, every module of `src/` but `main.rs` and `common/` is a verb (a file
/// or a folder), and a verb reads only `crate::common` and its own parts, never another verb:
/// what two verbs share lives in a named module of `common/`.
#[test]
fn no_verb_imports_another_verb() {
    let root = workspace();
    let mut checked = 0;
    let mut crossings = Vec::new();
    for plugin in ["plugins/capi/src", "plugins/kamaji/src"] {
        let dir = root.join(plugin);
        let verbs: Vec<String> = std::fs::read_dir(&dir)
            .expect("readable plugin source")
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().to_string();
                let module = name.strip_suffix(".rs").unwrap_or(&name).to_string();
                (module != "main" && module != "common").then_some(module)
            })
            .collect();
        assert!(
            dir.join("common").is_dir(),
            "{plugin}: shared modules live in common/"
        );
        for verb in &verbs {
            let mut files = Vec::new();
            let folder = dir.join(verb);
            if folder.is_dir() {
                sources(&folder, &mut files);
            }
            let file = dir.join(format!("{verb}.rs"));
            if file.is_file() {
                files.push(file);
            }
            for f in files {
                checked += 1;
                let text = std::fs::read_to_string(&f).unwrap_or_default();
                for other in verbs.iter().filter(|o| *o != verb) {
                    let path = format!("crate::{other}");
                    let crosses = text.match_indices(&path).any(|(i, _)| {
                        !text[i + path.len()..]
                            .starts_with(|c: char| c.is_alphanumeric() || c == '_')
                    });
                    if crosses {
                        crossings.push(format!("{} uses {path}", rel(&f)));
                    }
                }
            }
        }
    }
    assert!(checked > 30, "sanity: {checked} verb files");
    assert!(
        crossings.is_empty(),
        "verbs importing other verbs (move what they share to common/):\n{}",
        crossings.join("\n")
    );
}

/// One meaning per name. A public type's name is unique across the workspace's
/// libraries and binaries, but for each crate's `Error`, a verb's `…Args` (clap's, one per
/// verb), and the KamajiControlPlane API's versions (`core/src/kamaji/api/`: one kind in two
/// versions).
#[test]
fn public_type_names_are_unique() {
    let mut seen: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for f in product_sources().iter().filter(|f| !is_test_source(f)) {
        let rel = rel(f);
        if rel.starts_with("core/src/kamaji/api/") {
            continue;
        }
        for l in std::fs::read_to_string(f).unwrap_or_default().lines() {
            let l = l.trim_start();
            let Some(rest) = ["pub struct ", "pub enum ", "pub trait ", "pub type "]
                .iter()
                .find_map(|p| l.strip_prefix(p))
            else {
                continue;
            };
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if name == "Error" || name.ends_with("Args") {
                continue;
            }
            seen.entry(name).or_default().push(rel.clone());
        }
    }
    assert!(seen.len() > 100, "sanity: {} names", seen.len());
    let twice: Vec<String> = seen
        .iter()
        .filter(|(_, at)| at.len() > 1)
        .map(|(n, at)| format!("{n}: {}", at.join(", ")))
        .collect();
    assert!(
        twice.is_empty(),
        "public types named alike:\n{}",
        twice.join("\n")
    );
}

/// Every infrastructure provider file is in the registry that `create`, `generate
/// clusterclass`, completion and the reconciler read (the registry's own test then checks each
/// entry is complete).
#[test]
fn every_provider_file_is_registered() {
    let dir = workspace().join("core/src/kamaji/create/providers");
    let registry = std::fs::read_to_string(dir.join("mod.rs")).expect("providers/mod.rs");
    let table = registry
        .split_once("const REGISTRY")
        .map(|(_, t)| t.split_once("];").map_or(t, |(t, _)| t))
        .expect("a REGISTRY in providers/mod.rs");
    let files: Vec<String> = std::fs::read_dir(&dir)
        .expect("providers/")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter_map(|n| n.strip_suffix(".rs").map(str::to_string))
        .filter(|n| n != "mod" && n != "tests")
        .collect();
    assert!(files.len() >= 5, "sanity: {files:?}");
    let missing: Vec<&String> = files
        .iter()
        .filter(|n| !registry.contains(&format!("mod {n};")) || !table.contains(&format!("&{n}::")))
        .collect();
    assert!(
        missing.is_empty(),
        "provider files not in providers/mod.rs's REGISTRY: {missing:?}"
    );
}

/// The module path of a source file under `src` (`kamaji/plan/topology.rs`:
/// `kamaji::plan::topology`; `kamaji/mod.rs`: `kamaji`; `lib.rs`, `main.rs`: the crate).
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap_or(file);
    let mut parts: Vec<String> = rel
        .iter()
        .map(|c| c.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    let root = parts.len() == 1 && matches!(parts[0].as_str(), "lib" | "main");
    if root || parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

/// The leaves of a `use` tree (`a::{b, c::{d as e}, self}`) under `prefix`: each path with the
/// name it binds (`None` for a glob or `_`).
fn use_leaves(tree: &str, prefix: &[String], out: &mut Vec<(Vec<String>, Option<String>)>) {
    let segments = |s: &str| -> Vec<String> {
        s.split("::")
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect()
    };
    let tree = tree.trim();
    let mut path = prefix.to_vec();
    if let Some(open) = tree.find('{') {
        path.extend(segments(&tree[..open]));
        let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
        let (mut depth, mut start) = (0, 0);
        for (i, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    use_leaves(&inner[start..i], &path, out);
                    start = i + 1;
                }
                _ => {}
            }
        }
        use_leaves(&inner[start..], &path, out);
        return;
    }
    let (named, alias) = match tree.split_once(" as ") {
        Some((p, a)) => (p, Some(a.trim().to_string())),
        None => (tree, None),
    };
    if named.is_empty() {
        return;
    }
    path.extend(segments(named));
    if path.last().is_some_and(|s| s == "*") {
        path.pop();
        out.push((path, None));
        return;
    }
    if path.last().is_some_and(|s| s == "self") {
        path.pop();
    }
    let name = alias.or_else(|| path.last().cloned()).filter(|n| n != "_");
    out.push((path, name));
}

/// One module of a crate, as the circle finder reads it.
struct Module {
    file: PathBuf,
    /// The paths it names, absolute (`crate::` left off), each with the text that names it.
    named: Vec<(Vec<String>, String)>,
    /// What its `use` items bind (a private `use` of a parent is seen by its children too).
    binds: BTreeMap<String, Vec<String>>,
    /// The modules its `use .. ::*` items bring in.
    globs: Vec<Vec<String>>,
    code: String,
}

/// The modules of the crate whose sources are under `src`, by path (a binary's `main.rs` beside
/// a `lib.rs` is a crate of its own, which names the library by its name, and is left out).
/// Comments and test code are left out.
fn crate_modules(src: &Path) -> BTreeMap<Vec<String>, Module> {
    let mut files = Vec::new();
    sources(src, &mut files);
    let has_lib = src.join("lib.rs").is_file();
    files.retain(|f| {
        let rel = f.strip_prefix(src).unwrap_or(f);
        !(is_test_source(rel) || has_lib && rel == Path::new("main.rs"))
    });
    let paths: BTreeSet<Vec<String>> = files.iter().map(|f| module_path(src, f)).collect();
    // `crate::a`, `super::a`, `self::a`, or `a` for a child module of `module`: absolute.
    let absolute = |path: &[String], module: &[String]| -> Option<Vec<String>> {
        let (first, rest) = path.split_first()?;
        let mut base = module.to_vec();
        let mut rest = rest;
        match first.as_str() {
            "crate" => base.clear(),
            "self" => {}
            "super" => {
                base.pop()?;
                while rest.first().is_some_and(|s| s == "super") {
                    base.pop()?;
                    rest = &rest[1..];
                }
            }
            _ => {
                base.push(first.clone());
                if !paths.contains(&base) {
                    return None;
                }
            }
        }
        base.extend(rest.iter().cloned());
        Some(base)
    };
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut modules = BTreeMap::new();
    for f in files {
        let module = module_path(src, &f);
        let code = without_test_items(&std::fs::read_to_string(&f).unwrap_or_default());
        let (mut named, mut binds, mut globs) = (Vec::new(), BTreeMap::new(), Vec::new());
        // `use` items, however they are grouped.
        let mut lines = code.lines();
        while let Some(l) = lines.next() {
            let mut l = l.trim_start();
            if let Some(vis) = l.strip_prefix("pub(") {
                l = vis.split_once(") ").map_or("", |(_, r)| r);
            }
            let Some(tree) = l
                .strip_prefix("pub use ")
                .or_else(|| l.strip_prefix("use "))
            else {
                continue;
            };
            let mut tree = tree.to_string();
            while !tree.ends_with(';') {
                let Some(next) = lines.next() else { break };
                tree.push_str(next.trim());
            }
            let mut leaves = Vec::new();
            use_leaves(tree.trim_end_matches(';'), &[], &mut leaves);
            for (path, name) in leaves {
                let Some(abs) = absolute(&path, &module) else {
                    continue;
                };
                named.push((abs.clone(), format!("use {}", path.join("::"))));
                match name {
                    Some(n) => {
                        binds.entry(n).or_insert(abs);
                    }
                    None => globs.push(abs),
                }
            }
        }
        // Paths written in place: `crate::a::b(..)`, `super::C`.
        for start in ["crate::", "super::", "self::"] {
            for (i, _) in code.match_indices(start) {
                if code[..i].ends_with(ident) || code[..i].ends_with("::") {
                    continue; // `super::super::x` is read from its first `super`
                }
                let text: String = code[i..]
                    .chars()
                    .take_while(|c| ident(*c) || *c == ':')
                    .collect();
                let path: Vec<String> = text
                    .split("::")
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect();
                if let Some(abs) = absolute(&path, &module) {
                    named.push((abs, text.trim_end_matches(':').to_string()));
                }
            }
        }
        modules.insert(
            module,
            Module {
                file: f,
                named,
                binds,
                globs,
                code,
            },
        );
    }
    modules
}

/// The module that defines what `path` names: the longest prefix that is a module, followed
/// through what that module binds with `use` (a re-export, or a parent's import its children
/// use) to where the item is written.
fn defining_module(
    modules: &BTreeMap<Vec<String>, Module>,
    path: &[String],
    hops: usize,
) -> Vec<String> {
    let mut k = path.len();
    while k > 0 && !modules.contains_key(&path[..k]) {
        k -= 1;
    }
    let (module, item) = (&path[..k], path.get(k));
    let (Some(m), Some(item), true) = (modules.get(module), item, hops < 8) else {
        return module.to_vec();
    };
    let follow = |mut to: Vec<String>| {
        to.extend(path[k + 1..].iter().cloned());
        defining_module(modules, &to, hops + 1)
    };
    if let Some(to) = m.binds.get(item) {
        return follow(to.clone());
    }
    // A glob brings in the item when the module it names writes it.
    let defines = |code: &str| {
        [
            "fn", "struct", "enum", "trait", "type", "const", "static", "mod",
        ]
        .iter()
        .any(|k| code.contains(&format!("{k} {item}")))
    };
    for g in &m.globs {
        if modules
            .get(g)
            .is_some_and(|gm| defines(&gm.code) || gm.binds.contains_key(item))
        {
            let mut to = g.clone();
            to.push(item.clone());
            return follow(to);
        }
    }
    module.to_vec()
}

/// A circle of imports among the child modules of one module.
#[derive(Debug)]
struct Circle {
    /// The module whose children import each other (empty: the crate).
    parent: Vec<String>,
    /// The children, the first again last: `a → b → c → a`.
    path: Vec<String>,
    /// For each step, a file and what it names.
    why: Vec<String>,
    /// Every child in the circles through the first (when more than `path` shows).
    group: Vec<String>,
}

impl std::fmt::Display for Circle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parent = vec!["crate".to_string()];
        parent.extend(self.parent.iter().cloned());
        write!(f, "{}: {}", parent.join("::"), self.path.join(" → "))?;
        if self.group.len() + 1 > self.path.len() {
            write!(
                f,
                "\n    (in circles with each other: {})",
                self.group.join(", ")
            )?;
        }
        for w in &self.why {
            write!(f, "\n    {w}")?;
        }
        Ok(())
    }
}

/// The circles of imports among the modules of the crate whose sources are under `src` (test
/// code left out). An import is an edge from the module that writes it to the module that
/// defines what it names (through re-exports); a module reaching into a descendant (a parent
/// using its children, `mod` items) is not an edge, and an edge between two modules counts
/// between the two children of their nearest common ancestor that hold them, so a circle is
/// reported once, at the level where it closes: one circle per group of modules that reach
/// each other, the shortest from the group's first module.
fn module_circles(src: &Path) -> Vec<Circle> {
    type Edges = BTreeMap<Vec<String>, BTreeMap<String, BTreeMap<String, String>>>;
    let modules = crate_modules(src);
    // parent -> child -> child it reaches -> why (the first file and path that make the edge).
    let mut edges: Edges = BTreeMap::new();
    for (from, m) in &modules {
        for (path, text) in &m.named {
            let to = defining_module(&modules, path, 0);
            if to.starts_with(from) {
                continue; // itself or a descendant
            }
            let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
            if common == to.len() {
                continue; // an ancestor's own items
            }
            edges
                .entry(from[..common].to_vec())
                .or_default()
                .entry(from[common].clone())
                .or_default()
                .entry(to[common].clone())
                .or_insert_with(|| format!("{} names {text}", rel(&m.file)));
        }
    }
    let mut circles = Vec::new();
    for (parent, graph) in &edges {
        let reach = |from: &String| -> BTreeSet<String> {
            let mut seen = BTreeSet::new();
            let mut todo = vec![from.clone()];
            while let Some(n) = todo.pop() {
                for next in graph.get(&n).into_iter().flat_map(|e| e.keys()) {
                    if seen.insert(next.clone()) {
                        todo.push(next.clone());
                    }
                }
            }
            seen
        };
        let mut done = BTreeSet::new();
        for start in graph.keys() {
            if done.contains(start) || !reach(start).contains(start) {
                continue;
            }
            // Its group: the children it reaches that reach it back.
            let group: BTreeSet<String> = reach(start)
                .into_iter()
                .filter(|n| reach(n).contains(start))
                .collect();
            done.extend(group.iter().cloned());
            // The shortest way round from `start`, breadth first within the group.
            let mut back: BTreeMap<String, String> = BTreeMap::new();
            let mut queue = VecDeque::from([start.clone()]);
            'search: while let Some(n) = queue.pop_front() {
                for next in graph[&n].keys().filter(|k| group.contains(*k)) {
                    if next == start {
                        back.insert(start.clone(), n.clone());
                        break 'search;
                    }
                    if !back.contains_key(next) {
                        back.insert(next.clone(), n.clone());
                        queue.push_back(next.clone());
                    }
                }
            }
            let mut path = vec![start.clone()];
            let mut at = back[start].clone();
            while at != *start {
                path.push(at.clone());
                at = back[&at].clone();
            }
            path.push(start.clone());
            path.reverse();
            let why = path
                .windows(2)
                .map(|w| format!("{} → {}: {}", w[0], w[1], graph[&w[0]][&w[1]]))
                .collect();
            circles.push(Circle {
                parent: parent.clone(),
                path,
                why,
                group: group.into_iter().collect(),
            });
        }
    }
    circles
}

/// The crates whose modules may not import each other in a circle.
const CRATE_SOURCES: &[&str] = &[
    "core/src",
    "client/src",
    "cli/src",
    "plugins/capi/src",
    "plugins/kamaji/src",
    "plugins/reconciler/src",
];

/// No module imports, directly or through others, a module that imports it, in any crate: what
/// two modules both need sits in a module both can use (a leaf such as `labels`), or above both
/// (as `install` above `kamaji` and `ops`). A parent may use its children; test code may reach
/// anywhere.
#[test]
fn no_modules_import_each_other_in_a_circle() {
    let core = crate_modules(&workspace().join("core/src"));
    assert!(core.len() > 50, "sanity: {} modules", core.len());
    let mut found = Vec::new();
    for src in CRATE_SOURCES {
        let circles = module_circles(&workspace().join(src));
        found.extend(circles.iter().map(|c| format!("{src}: {c}")));
    }
    assert!(
        found.is_empty(),
        "modules that import each other in a circle (move what they share to a module they can all use, so imports go one way):\n{}",
        found.join("\n")
    );
}

/// Writes `files` (path, text) into a fresh temporary folder and returns the circles found there.
fn circles_in(name: &str, files: &[(&str, &str)]) -> Vec<String> {
    let dir = std::env::temp_dir().join(format!("layers-{name}-{}", std::process::id()));
    for (path, text) in files {
        let file = dir.join(path);
        std::fs::create_dir_all(file.parent().expect("a folder")).expect("a temporary folder");
        std::fs::write(&file, text).expect("writable");
    }
    let found = module_circles(&dir)
        .iter()
        .map(|c| c.to_string().lines().next().unwrap_or_default().to_string())
        .collect();
    std::fs::remove_dir_all(&dir).ok();
    found
}

/// The finder sees a circle of three modules, whichever way each import is written (a path
/// from the crate, from the parent, a re-export), and under a module as at the top.
#[test]
fn the_circle_finder_reports_a_three_module_circle() {
    let found = circles_in(
        "circle",
        &[
            (
                "lib.rs",
                "mod a;\nmod b;\nmod c;\npub mod n;\npub use a::Y;\n",
            ),
            ("a.rs", "use crate::b::X;\npub struct Y;\n"),
            ("b/mod.rs", "use super::c::{self, W};\npub struct X;\n"),
            ("c.rs", "pub struct W;\npub struct Z(crate::Y);\n"),
            ("n/mod.rs", "mod p;\nmod q;\nmod r;\n"),
            ("n/p.rs", "pub fn p() { super::q::q() }\n"),
            ("n/q.rs", "pub fn q() { crate::n::r::r() }\n"),
            ("n/r.rs", "use super::p;\npub fn r() { p::p() }\n"),
        ],
    );
    assert_eq!(found, ["crate: a → b → c → a", "crate::n: p → q → r → p"]);
}

/// A chain is no circle: modules using those below them, a parent using its children and its
/// children the parent's own items, test code reaching back.
#[test]
fn the_circle_finder_passes_a_chain() {
    let found = circles_in(
        "chain",
        &[
            (
                "lib.rs",
                "mod a;\nmod b;\nmod c;\npub use a::A;\npub struct Top;\npub fn f() { b::g() }\n",
            ),
            ("a.rs", "use crate::b::{self, B};\npub struct A(B);\n"),
            (
                "b.rs",
                "use super::{Top, c::C};\npub struct B(C, Top);\npub fn g() {}\n",
            ),
            (
                "c.rs",
                "pub struct C;\n#[cfg(test)]\nmod tests {\n    use crate::a::A;\n}\n",
            ),
        ],
    );
    assert!(found.is_empty(), "a chain reported as a circle: {found:?}");
}
