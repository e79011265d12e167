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

/// Issue 25: a label, annotation or other constant the core defines is used from there, never
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

/// Issue 25: the core's public surface is counted and may not grow unnoticed: 669 public items
/// before the clean-up, 568 before the Kamaji modules became one (`kcore::kamaji`),
/// fewer after (items only the core used became `pub(crate)`, dead ones went). Raise the bound
/// only for an item another crate needs.
#[test]
fn the_core_public_surface_is_bounded() {
    // 536 when issue 25 cut the core down; issue 26: +20 for `doctor`'s API (`prune` among
    // them), +3 for the host pool `create` checks (`PoolCheck`), +5 for the reconciler's
    // certificate scan (`tenant_expiries`, `certificates_condition`), +2 for `--cert-warn`'s
    // one parser (`text::parse_cert_warn`), +2 for the DataStore preflight
    // (`datastore_secret_keys`), +1 for reading a Kamaji Secret's certificates once
    // (`doctor::secret_certificates`), +1 for when a scale step is reached
    // (`ScaleStep::pending`, shared by the wait and its unit test), +1 for the
    // TenantControlPlane `create` asks Kamaji about (`kamaji::tcp::tcp_for`), +2 for the CRDs
    // doctor's management checks read (`doctor::CrdInfo`, `CrdInfo::is_fleet_api`), +1 for
    // one reading of a provider's Lease by the CLI and the reconciler (`LeaseInfo::of`), +15
    // for the patch releases the CLI resolves and the reconcilers walk through
    // (`version::releases`: the table and the markers' parsing the client reads, the walk's
    // sources, what is recorded and read back; `ClusterUpgradeSpec`/`FleetUpgradeSpec`
    // `patch_releases`, `walk_start`, `KamajiUpgradePlan`'s three fields), +6 for the
    // deprecated APIs an upgrade's preflight reads from a tenant's metrics
    // (`plan::upgrade::deprecated`), +12 for the fleet-sized kinds doctor holds as facts
    // (`doctor::MachineFacts` and `plan::hosts::HostFacts`, each with its `of`; `object_key`,
    // `secret_cluster`; the doctor's re-export), a Node that stopped reporting, read by doctor
    // and the hosts table (`fields::node_silence`, `NodeSilence`), `hosts retire`'s release
    // (`plan_agent_release`, `AgentRelease`) and the host preflight (`preflight_script`), +26
    // for `kubectl kamaji migrate` (`kamaji::migrate` and its mod line: a DataStore as a
    // migration reads it, `Content`, `EtcdTls`, `Reach`, `Stage`, `Writes`, `Preflight`,
    // `MigratePlan` and its `lines`, `MigrationProgress` with `of` and `line`, the prefix and
    // its range end, `stage`, `preflight`, the three patches and the nudge, Kamaji's Job name,
    // `complete_first` for Kamaji v1.0.0's Job reading, `FREEZE_WEBHOOK`), +1 for
    // `ScalePlan::grows` (a scale-down reads no host pool), +1 for kubectl's last-applied
    // annotation the reconciler's caches drop (`kamaji::tcp::LAST_APPLIED`, issue 29), +7 for
    // the `hosts` list's narrow join (issue 29: `plan::hosts::HostPart`, `ByoMachineLink`,
    // `MachineLink`, each with its `of`, `RowJoin` with `build` and `row`, and their re-export;
    // `HostRow::age`, `HostFilter::apply` and `Inventory::rows` became test-only), +3 for
    // describe's typed Machine row (issue 29: `plan::tree::TreeMachine`, its re-export and
    // `TreeMachine::narrowed`, which `kubectl capi describe` parses each Machine into), +6 for
    // what `hosts add` writes and checks (`build::byoh::sh_word`, `ControlCharacter`,
    // `agent_script`, `check_host_path`; `names::check_namespace`; `HostFacts::state`), +4 for
    // the doctor's refused reads (`FleetRead`, `Unread`, `NotChecked`, `not_checked`), +1 for the
    // KamajiControlPlane spec's bounds (`out_of_bounds`), +2 for the namespaced install
    // (`install_manifests_watching`, `parse_namespaces`).
    const MAX_PUBLIC_ITEMS: usize = 658;
    let kinds = [
        "fn ",
        "async fn ",
        "struct ",
        "enum ",
        "const ",
        "mod ",
        "type ",
        "trait ",
        "use ",
        "static ",
    ];
    let count = core_library_sources()
        .iter()
        .map(|f| {
            std::fs::read_to_string(f)
                .unwrap_or_default()
                .lines()
                .filter(|l| {
                    l.trim_start()
                        .strip_prefix("pub ")
                        .is_some_and(|r| kinds.iter().any(|k| r.starts_with(k)))
                })
                .count()
        })
        .sum::<usize>();
    assert!(count > 100, "sanity: {count}");
    assert!(
        count <= MAX_PUBLIC_ITEMS,
        "the core has {count} public items (bound {MAX_PUBLIC_ITEMS}): make what only the core uses pub(crate)"
    );
}

/// Issue 25: in each plugin, every module of `src/` but `main.rs` and `common/` is a verb (a file
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

/// Issue 25: one meaning per name. A public type's name is unique across the workspace's
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

/// Issue 25: every infrastructure provider file is in the registry that `create`, `generate
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

/// The module path of a source file of the core (`kamaji/plan/topology.rs`: `kamaji::plan::topology`;
/// `kamaji/mod.rs`: `kamaji`; `lib.rs`: the crate).
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap_or(file);
    let mut parts: Vec<String> = rel
        .iter()
        .map(|c| c.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    parts
}

/// The modules a source text names, as absolute paths (`crate::a::b`, or `super::b` seen from
/// `module`), each cut to its first `depth` segments; `{a, b::c}` groups give one path each.
/// Comments and test code (from the first `#[cfg(test)]` on) are left out.
fn imported_modules(text: &str, module: &[String]) -> Vec<Vec<String>> {
    let code: String = text
        .split("#[cfg(test)]")
        .next()
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut out = Vec::new();
    for (i, _) in code
        .match_indices("crate::")
        .chain(code.match_indices("super::"))
    {
        if code[..i].ends_with(ident) || code[..i].ends_with("::") {
            continue; // `super::super::x` is read from its first `super`
        }
        let mut rest = &code[i..];
        let mut base: Vec<String> = if rest.starts_with("crate::") {
            rest = &rest["crate::".len()..];
            Vec::new()
        } else {
            let mut m = module.to_vec();
            while let Some(r) = rest.strip_prefix("super::") {
                m.pop();
                rest = r;
            }
            m
        };
        // `a::b::{c, d}` or `a::b::c`: the named path, then a group's first segments.
        loop {
            let name: String = rest.chars().take_while(|c| ident(*c)).collect();
            if name.is_empty() {
                break;
            }
            base.push(name.clone());
            rest = &rest[name.len()..];
            match rest.strip_prefix("::") {
                Some(r) if !r.starts_with('{') => rest = r,
                _ => break,
            }
        }
        if let Some(group) = rest.strip_prefix("::{") {
            let inner = group.split('}').next().unwrap_or_default();
            for item in inner.split(',') {
                let first: String = item.trim().chars().take_while(|c| ident(*c)).collect();
                if !first.is_empty() && first != "self" {
                    let mut p = base.clone();
                    p.push(first);
                    out.push(p);
                }
            }
        }
        out.push(base);
    }
    out
}

/// The pairs of sibling modules, children of one of `parents` (`[]`: the crate's top-level
/// modules), that import each other, in the core sources under `src` (test code left out).
fn module_cycles(src: &Path, parents: &[&[&str]]) -> Vec<String> {
    let mut files = Vec::new();
    sources(src, &mut files);
    let mut edges = std::collections::BTreeSet::new();
    for f in files.iter().filter(|f| !is_test_source(f)) {
        let module = module_path(src, f);
        let text = std::fs::read_to_string(f).unwrap_or_default();
        for path in imported_modules(&text, &module) {
            for parent in parents {
                let depth = parent.len();
                let under = |p: &[String]| {
                    p.len() > depth && p.iter().zip(parent.iter()).all(|(a, b)| a == b)
                };
                if under(&module) && under(&path) && module[depth] != path[depth] {
                    edges.insert((
                        parent.join("::"),
                        module[depth].clone(),
                        path[depth].clone(),
                    ));
                }
            }
        }
    }
    edges
        .iter()
        .filter(|(p, a, b)| a < b && edges.contains(&(p.clone(), b.clone(), a.clone())))
        .map(|(p, a, b)| {
            format!(
                "crate{}{p}: {a} <-> {b}",
                if p.is_empty() { "" } else { "::" }
            )
        })
        .collect()
}

/// Issue 25: no two modules of the core import each other: neither two top-level modules nor
/// two submodules of `kamaji`, `kamaji::create`, `build`, `plan` or `ops`. What both need sits in a module both
/// can use (a leaf such as `labels`), or above both (as `install` above `kamaji` and `ops`).
/// Test code may reach anywhere. The checker itself is tried on a planted cycle first.
#[test]
fn no_two_core_modules_import_each_other() {
    const LEVELS: &[&[&str]] = &[
        &[],
        &["kamaji"],
        &["kamaji", "create"],
        &["build"],
        &["plan"],
        &["ops"],
    ];
    let planted = std::env::temp_dir().join(format!("layers-cycle-{}", std::process::id()));
    std::fs::create_dir_all(planted.join("a")).expect("a temporary folder");
    std::fs::write(planted.join("lib.rs"), "pub mod a;\npub mod b;\n").expect("writable");
    std::fs::write(planted.join("a/mod.rs"), "use crate::b::{self, X};\n").expect("writable");
    std::fs::write(planted.join("b.rs"), "use super::a::Y;\n").expect("writable");
    let found = module_cycles(&planted, LEVELS);
    std::fs::remove_dir_all(&planted).ok();
    assert_eq!(
        found,
        ["crate: a <-> b"],
        "the checker finds a planted cycle"
    );

    let cycles = module_cycles(&workspace().join("core/src"), LEVELS);
    assert!(
        cycles.is_empty(),
        "modules of the core that import each other (move what both need to a module both can use):\n{}",
        cycles.join("\n")
    );
}
