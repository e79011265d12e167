//! The kubeconfig files of the user, handled the way kubectl would want them: a fetched
//! kubeconfig merged in by name (existing entries are never overwritten unless forced), the
//! file replaced atomically with mode 0600 (a temporary file next to it, then a rename), and
//! the previous version kept as `<file>.bak`. Both plugins' `kubeconfig` verbs and `delete` use
//! this module; it is the only writer of kubeconfig files.
//!
//! Works on the kubeconfig as JSON values, so fields this code does not know (exec plugins,
//! extensions, preferences) survive.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::error::Error;

mod client;
mod deliver;
mod file;
mod load;
mod validate;

pub use client::client_of;
pub use deliver::{CONFLICT_HINT, Delivery, KubeconfigFormat, deliver, merge_message, merge_names};
pub use file::backup_path;
use file::{FileLock, read_writable, replace_file};
pub use load::{load_error, load_file};
pub use validate::{loadable, usable};

/// Fault injection for tests only: fail after the temporary file is written, before the rename.
pub const FAIL_BEFORE_RENAME_ENV: &str = "KUBECTL_CAPI_TEST_FAIL_BEFORE_RENAME";

/// The mode of a new kubeconfig: private, as kubectl and clusterctl write them.
const NEW_FILE_MODE: u32 = 0o600;

/// The lists of a kubeconfig, with the key of an entry's body.
const LISTS: [(&str, &str); 3] = [
    ("clusters", "cluster"),
    ("users", "user"),
    ("contexts", "context"),
];

/// What a merge did. Entries read `cluster "prod"`.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MergeReport {
    pub file: String,
    /// The merged context (the fetched kubeconfig's current context, else its first).
    pub context: String,
    pub added: Vec<String>,
    /// Entries replaced (with `--force`).
    pub replaced: Vec<String>,
    /// Entries already identical.
    pub unchanged: Vec<String>,
    /// The backup of the previous file, if there was one and it changed.
    pub backup: Option<String>,
    /// Whether `current-context` now names [`MergeReport::context`].
    pub current_context_set: bool,
}

fn parse_error(what: &str, e: impl std::fmt::Display) -> Error {
    Error::Other {
        message: format!("{what} is not a kubeconfig ({e})"),
        hint: Some("check the file with kubectl config view".into()),
    }
}

/// Parses kubeconfig YAML (or JSON) text; empty text is an empty kubeconfig.
pub fn parse(text: &str, what: &str) -> Result<Value, Error> {
    if text.trim().is_empty() {
        return Ok(json!({"apiVersion": "v1", "kind": "Config"}));
    }
    let v: Value = serde_saphyr::from_str(text).map_err(|e| {
        let first = e.to_string();
        parse_error(what, first.lines().next().unwrap_or_default())
    })?;
    if !v.is_object() {
        return Err(parse_error(what, "not a YAML mapping"));
    }
    Ok(v)
}

/// Checks that a fetched kubeconfig can be used: non-empty clusters, users and contexts, every
/// entry named. The error says what is missing.
pub fn check_entries(v: &Value) -> Result<(), String> {
    for (key, _) in LISTS {
        match v.get(key).and_then(Value::as_array) {
            Some(a) if !a.is_empty() => {
                if a.iter()
                    .any(|e| e.get("name").and_then(Value::as_str).is_none())
                {
                    return Err(format!("an entry of \"{key}\" has no name"));
                }
            }
            _ => return Err(format!("the kubeconfig has no {key}")),
        }
    }
    Ok(())
}

/// Renames the single context of `fetched` (its cluster and user too) to
/// `cluster=<cluster>`, `user=<user>`, `context=<context>`. Uses the current context, else the
/// first one.
pub fn rename(fetched: &Value, cluster: &str, user: &str, context: &str) -> Result<Value, Error> {
    let contexts = fetched["contexts"].as_array().cloned().unwrap_or_default();
    let current = fetched["current-context"].as_str().unwrap_or_default();
    let ctx = contexts
        .iter()
        .find(|c| c["name"] == current)
        .or_else(|| contexts.first())
        .ok_or_else(|| parse_error("the fetched kubeconfig", "it has no context"))?;
    let find = |list: &str, name: &Value| -> Result<Value, Error> {
        fetched[list]
            .as_array()
            .and_then(|l| l.iter().find(|x| x["name"] == *name))
            .map(|x| x[&list[..list.len() - 1]].clone())
            .ok_or_else(|| {
                parse_error(
                    "the fetched kubeconfig",
                    format!("{list} has no entry {name}"),
                )
            })
    };
    let cl = find("clusters", &ctx["context"]["cluster"])?;
    let us = find("users", &ctx["context"]["user"])?;
    let mut c = ctx["context"].clone();
    c["cluster"] = json!(cluster);
    c["user"] = json!(user);
    Ok(json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster, "cluster": cl}],
        "users": [{"name": user, "user": us}],
        "contexts": [{"name": context, "context": c}],
        "current-context": context,
    }))
}

/// How to merge.
#[derive(Clone, Copy, Debug, Default)]
pub struct MergeOptions<'a> {
    /// Replace entries of the same name with other content.
    pub force: bool,
    /// Make the merged context the current one (it also becomes current when the file has none).
    pub set_current: bool,
    /// What to do about a conflict, in the calling verb's flags.
    pub conflict_hint: &'a str,
}

fn entry_name(e: &Value) -> &str {
    e.get("name").and_then(Value::as_str).unwrap_or_default()
}

/// Merges the entries of `add` into `base` (pure). Every conflict is found before anything
/// changes: an entry with the same name and other content fails the merge unless forced.
pub fn merge(base: &Value, add: &Value, opts: MergeOptions) -> Result<(Value, MergeReport), Error> {
    let mut out = if base.is_object() {
        base.clone()
    } else {
        json!({"apiVersion": "v1", "kind": "Config", "preferences": {}})
    };
    for (k, v) in [("apiVersion", "v1"), ("kind", "Config")] {
        if out.get(k).is_none() {
            out[k] = json!(v);
        }
    }
    let conflicts: Vec<String> = LISTS
        .iter()
        .flat_map(|(key, singular)| {
            let have = out[*key].as_array().cloned().unwrap_or_default();
            add[*key]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .filter(move |e| {
                    have.iter()
                        .any(|h| entry_name(h) == entry_name(e) && h != e)
                })
                .map(move |e| format!("{singular} \"{}\"", entry_name(&e)))
        })
        .collect();
    if !conflicts.is_empty() && !opts.force {
        return Err(Error::Other {
            message: format!(
                "your kubeconfig already has {} with other settings; nothing was changed",
                conflicts.join(", ")
            ),
            hint: Some(opts.conflict_hint.to_string()),
        });
    }
    let mut report = MergeReport::default();
    for (key, singular) in LISTS {
        if !out[key].is_array() {
            out[key] = json!([]);
        }
        let Some(items) = out[key].as_array_mut() else {
            continue;
        };
        for e in add[key].as_array().into_iter().flatten() {
            let label = format!("{singular} \"{}\"", entry_name(e));
            match items.iter_mut().find(|h| entry_name(h) == entry_name(e)) {
                Some(old) if old == e => report.unchanged.push(label),
                Some(old) => {
                    *old = e.clone();
                    report.replaced.push(label);
                }
                None => {
                    items.push(e.clone());
                    report.added.push(label);
                }
            }
        }
    }
    report.context = add["current-context"]
        .as_str()
        .filter(|c| !c.is_empty())
        .or_else(|| add["contexts"][0]["name"].as_str())
        .unwrap_or_default()
        .to_string();
    if opts.set_current || out["current-context"].as_str().is_none_or(str::is_empty) {
        out["current-context"] = json!(report.context);
        report.current_context_set = true;
    }
    Ok((out, report))
}

/// The file a merge writes to by default, as kubectl does: `KUBECONFIG`'s first entry, else
/// `~/.kube/config`.
pub fn default_merge_file() -> Option<PathBuf> {
    if let Some(v) = std::env::var_os("KUBECONFIG")
        && let Some(first) = std::env::split_paths(&v).find(|p| !p.as_os_str().is_empty())
    {
        return Some(first);
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".kube").join("config"))
}

/// Reads `path` (missing = empty), merges `add` and, when anything changed, backs up the
/// previous file and replaces it atomically, keeping its mode. A symlinked kubeconfig is written
/// where it points. The file is locked the way kubectl locks it (client-go's `<file>.lock`), so
/// concurrent merges (and kubectl's own writes) all land; a read-only file is refused, as
/// kubectl refuses it.
pub fn merge_into_file(path: &Path, add: &Value, opts: MergeOptions) -> Result<MergeReport, Error> {
    let target = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let _lock = FileLock::acquire(&target)?;
    let (old_text, mode) = read_writable(&target)?;
    let base = parse(
        old_text.as_deref().unwrap_or_default(),
        &target.display().to_string(),
    )?;
    let (merged, mut report) = merge(&base, add, opts)?;
    report.file = path.display().to_string();
    let text = crate::render::to_yaml(&merged)?;
    // A merge never leaves a file kubectl cannot load (issue 24): the text about to be
    // written is checked the way kubectl reads it.
    if let Err(why) = validate::loadable(&text) {
        let already = old_text
            .as_deref()
            .is_some_and(|t| validate::loadable(t).is_err());
        return Err(Error::Other {
            message: if already {
                format!(
                    "{} does not load in kubectl: {why}; nothing was changed",
                    path.display()
                )
            } else {
                format!(
                    "merging into {} would leave a kubeconfig kubectl cannot load: {why}; nothing was changed",
                    path.display()
                )
            },
            hint: Some(format!(
                "check it with kubectl config view --kubeconfig {}",
                path.display()
            )),
        });
    }
    if old_text.as_deref() == Some(text.as_str()) {
        return Ok(report);
    }
    report.backup =
        replace_file(&target, old_text.as_deref(), &text, mode)?.map(|b| b.display().to_string());
    Ok(report)
}

/// Removes `context` from a kubeconfig document, with its cluster and user when no other context
/// uses them. Returns whether it was there and whether it was the current context.
pub fn remove_context(doc: &mut Value, context: &str) -> (bool, bool) {
    let Some(contexts) = doc.get_mut("contexts").and_then(Value::as_array_mut) else {
        return (false, false);
    };
    let Some(i) = contexts.iter().position(|c| c["name"] == context) else {
        return (false, false);
    };
    let removed = contexts.remove(i);
    let used = |key: &str, name: &Value, contexts: &[Value]| {
        contexts.iter().any(|c| &c["context"][key] == name)
    };
    let remaining = contexts.clone();
    for (list, key) in [("clusters", "cluster"), ("users", "user")] {
        let name = removed["context"][key].clone();
        if name.is_null() || used(key, &name, &remaining) {
            continue;
        }
        if let Some(items) = doc.get_mut(list).and_then(Value::as_array_mut) {
            items.retain(|x| x["name"] != name);
        }
    }
    let was_current = doc["current-context"] == context;
    if was_current && let Some(m) = doc.as_object_mut() {
        m.insert("current-context".into(), Value::String(String::new()));
    }
    (true, was_current)
}

/// What [`remove_context_from_file`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContextRemoval {
    /// The file or the context does not exist.
    Absent,
    /// The context points at another server, or holds other credentials: someone else's, kept.
    NotOurs,
    Removed {
        was_current: bool,
    },
}

/// The server of `context`'s cluster in `doc`.
fn context_server<'a>(doc: &'a Value, context: &str) -> Option<&'a str> {
    let contexts = doc["contexts"].as_array()?;
    let ctx = contexts.iter().find(|c| c["name"] == context)?;
    let cluster = &ctx["context"]["cluster"];
    doc["clusters"]
        .as_array()?
        .iter()
        .find(|c| c["name"] == *cluster)?["cluster"]["server"]
        .as_str()
}

/// What a merge added for a cluster, to recognise it when it is removed: the API servers, and
/// the user entries (credentials) when they are known (empty: the server alone decides).
#[derive(Clone, Debug, Default)]
pub struct Added {
    pub servers: Vec<String>,
    pub users: Vec<Value>,
}

/// The user entry (`user:` body) of `context` in `doc`.
fn context_user<'a>(doc: &'a Value, context: &str) -> Option<&'a Value> {
    let ctx = doc["contexts"]
        .as_array()?
        .iter()
        .find(|c| c["name"] == context)?;
    let user = &ctx["context"]["user"];
    doc["users"]
        .as_array()?
        .iter()
        .find(|u| u["name"] == *user)
        .map(|u| &u["user"])
}

/// Removes `context` from the kubeconfig file at `path` (see [`remove_context`]) when it is what
/// a merge added ([`Added`]: its cluster's server, and its user's credentials when known),
/// replacing the file atomically under kubectl's lock and keeping the previous one as
/// `<file>.bak`.
pub fn remove_context_from_file(
    path: &Path,
    context: &str,
    added: &Added,
) -> Result<ContextRemoval, Error> {
    let servers = &added.servers;
    let target = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    if !target.exists() {
        return Ok(ContextRemoval::Absent);
    }
    let _lock = FileLock::acquire(&target)?;
    let (Some(old), mode) = read_writable(&target)? else {
        return Ok(ContextRemoval::Absent);
    };
    let mut doc = parse(&old, &target.display().to_string())?;
    match context_server(&doc, context) {
        Some(server)
            if !servers
                .iter()
                .any(|s| s.trim_end_matches('/') == server.trim_end_matches('/')) =>
        {
            return Ok(ContextRemoval::NotOurs);
        }
        _ => {}
    }
    if !added.users.is_empty()
        && let Some(user) = context_user(&doc, context)
        && !added.users.contains(user)
    {
        return Ok(ContextRemoval::NotOurs);
    }
    let (found, was_current) = remove_context(&mut doc, context);
    if !found {
        return Ok(ContextRemoval::Absent);
    }
    replace_file(&target, Some(&old), &crate::render::to_yaml(&doc)?, mode)?;
    Ok(ContextRemoval::Removed { was_current })
}

/// Sets a file's permission bits (a no-op on Windows, where the user profile's ACLs keep a
/// kubeconfig private, as kubectl relies on there).
fn set_mode(file: &std::fs::File, mode: u32) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        file.set_permissions(std::fs::Permissions::from_mode(mode))
    }
    #[cfg(not(unix))]
    {
        let _ = (file, mode);
        Ok(())
    }
}

/// Creates `dir` and its missing parents with mode 0700 whatever the umask: what we write there
/// (kubeconfigs, scripts a host runs as root) is for the user alone, and under `umask 000` a
/// directory made with the default mode would let anyone swap the files in it. Directories
/// that already exist are left as they are.
pub fn create_private_dir(dir: &Path) -> Result<(), Error> {
    let mut b = std::fs::DirBuilder::new();
    b.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        b.mode(0o700);
    }
    b.create(dir).map_err(|e| Error::Other {
        message: format!("cannot create the directory {}: {e}", dir.display()),
        hint: Some("check the path and its permissions".into()),
    })
}

/// Writes `bytes` to `path` with mode 0600 atomically: a temporary file with an unpredictable
/// name in the same directory, flushed to disk, then renamed over `path`. On any failure `path`
/// is left as it was and the temporary file is removed.
pub fn write_atomic(path: &Path, bytes: &[u8], create_dir: bool) -> Result<(), Error> {
    write_atomic_mode(path, bytes, create_dir, NEW_FILE_MODE)
}

/// [`write_atomic`] with the file's final mode (0755 for an executable shim).
pub fn write_atomic_mode(
    path: &Path,
    bytes: &[u8],
    create_dir: bool,
    mode: u32,
) -> Result<(), Error> {
    let io = |what: &str, e: std::io::Error| Error::Other {
        message: format!("cannot write {}: {what}: {e}", path.display()),
        hint: Some("check the path and its permissions".into()),
    };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if create_dir && !dir.exists() {
        create_private_dir(&dir)?;
    }
    let prefix = format!(
        ".{}.",
        path.file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_else(|| "kubeconfig".into())
    );
    // NamedTempFile creates the file with O_EXCL and mode 0600, and removes it if we fail
    // before persisting.
    let mut tmp = tempfile::Builder::new()
        .prefix(&prefix)
        .suffix(".tmp")
        .tempfile_in(&dir)
        .map_err(|e| io("creating a temporary file", e))?;
    set_mode(tmp.as_file(), mode).map_err(|e| io("setting its mode", e))?;
    tmp.write_all(bytes).map_err(|e| io("writing", e))?;
    tmp.as_file().sync_all().map_err(|e| io("syncing", e))?;
    if std::env::var_os(FAIL_BEFORE_RENAME_ENV).is_some() {
        return Err(Error::other(format!(
            "cannot write {}: simulated failure before the rename ({FAIL_BEFORE_RENAME_ENV})",
            path.display()
        )));
    }
    tmp.persist(path).map_err(|e| io("replacing it", e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A temporary directory (removed when dropped) and its `config`, holding `text` if given.
    fn config_file(text: Option<&str>) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config");
        if let Some(t) = text {
            std::fs::write(&path, t).unwrap();
        }
        (dir, path)
    }

    fn opts(force: bool, set_current: bool) -> MergeOptions<'static> {
        MergeOptions {
            force,
            set_current,
            conflict_hint: "pass --force",
        }
    }

    fn fetched() -> Value {
        json!({
            "apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": "kubernetes", "cluster": {"server": "https://10.0.0.1:6443", "certificate-authority-data": "Q0E="}}],
            "users": [{"name": "kubernetes-admin", "user": {"client-certificate-data": "Y2VydA==", "client-key-data": "a2V5"}}],
            "contexts": [{"name": "kubernetes-admin@kubernetes", "context": {"cluster": "kubernetes", "user": "kubernetes-admin"}}],
            "current-context": "kubernetes-admin@kubernetes",
        })
    }

    #[test]
    fn rename_then_merge_adds_and_is_idempotent() {
        let add = rename(&fetched(), "prod", "prod-admin", "prod-admin@prod").unwrap();
        assert_eq!(add["contexts"][0]["context"]["cluster"], "prod");
        let base = json!({"apiVersion": "v1", "kind": "Config", "current-context": "mgmt",
            "contexts": [{"name": "mgmt", "context": {"cluster": "mgmt", "user": "me"}}]});
        let (merged, r) = merge(&base, &add, opts(false, false)).unwrap();
        assert_eq!(r.added.len(), 3);
        assert_eq!(merged["current-context"], "mgmt");
        assert_eq!(merged["contexts"].as_array().unwrap().len(), 2);
        let (_, r2) = merge(&merged, &add, opts(false, false)).unwrap();
        assert!(r2.added.is_empty());
        assert_eq!(r2.unchanged.len(), 3);
    }

    #[test]
    fn different_entries_conflict_unless_forced() {
        let add = rename(&fetched(), "prod", "prod-admin", "prod-admin@prod").unwrap();
        let (merged, _) = merge(&json!({}), &add, opts(false, false)).unwrap();
        let mut other = add.clone();
        other["clusters"][0]["cluster"]["server"] = json!("https://10.9.9.9:6443");
        let e = merge(&merged, &other, opts(false, false)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "your kubeconfig already has cluster \"prod\" with other settings; nothing was changed"
        );
        let (m, r) = merge(&merged, &other, opts(true, false)).unwrap();
        assert_eq!(r.replaced, ["cluster \"prod\""]);
        assert_eq!(
            m["clusters"][0]["cluster"]["server"],
            "https://10.9.9.9:6443"
        );
    }

    #[test]
    fn file_merge_is_atomic_private_and_backed_up() {
        use std::os::unix::fs::PermissionsExt;
        let (dir, path) = config_file(Some(
            "apiVersion: v1\nkind: Config\ncurrent-context: mgmt\ncontexts:\n- name: mgmt\n  context: {cluster: mgmt, user: me}\n",
        ));
        let add = rename(&fetched(), "prod", "prod-admin", "prod-admin@prod").unwrap();
        let r = merge_into_file(&path, &add, opts(false, true)).unwrap();
        assert!(r.backup.is_some());
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let back = parse(&std::fs::read_to_string(&path).unwrap(), "x").unwrap();
        assert_eq!(back["current-context"], "prod-admin@prod");
        assert_eq!(back["contexts"].as_array().unwrap().len(), 2);
        let bak = std::fs::read_to_string(dir.path().join("config.bak")).unwrap();
        assert!(bak.contains("current-context: mgmt"));
    }

    fn kc(name: &str, server: &str) -> Value {
        parse(&format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: {name}\n  cluster:\n    server: {server}\ncontexts:\n- name: {name}-admin@{name}\n  context:\n    cluster: {name}\n    user: {name}-admin\ncurrent-context: {name}-admin@{name}\nusers:\n- name: {name}-admin\n  user:\n    token: t-{name}\n"
        ), "test")
        .unwrap()
    }

    #[test]
    fn merge_adds_and_refuses_conflicts() {
        let mut existing = kc("a", "https://a");
        existing["preferences"] = json!({"colors": true});
        let before = existing.clone();
        let (merged, out) = merge(&existing, &kc("b", "https://b"), opts(false, false)).unwrap();
        existing = merged;
        assert_eq!(out.added.len(), 3);
        assert_eq!(out.context, "b-admin@b");
        assert_eq!(existing["current-context"], "a-admin@a");
        assert_eq!(existing["preferences"], before["preferences"]);
        assert_eq!(existing["clusters"][0], before["clusters"][0]);
        // Same content again: nothing to do.
        let (merged, out) = merge(&existing, &kc("b", "https://b"), opts(false, true)).unwrap();
        existing = merged;
        assert_eq!(out.unchanged.len(), 3);
        assert_eq!(existing["current-context"], "b-admin@b");
        // Other content under the same names: refused, untouched.
        let snapshot = existing.clone();
        let err = merge(&existing, &kc("b", "https://b2"), opts(false, false)).unwrap_err();
        assert!(err.to_string().contains("cluster \"b\""), "{err}");
        assert_eq!(existing, snapshot);
        let (merged, out) = merge(&existing, &kc("b", "https://b2"), opts(true, false)).unwrap();
        existing = merged;
        assert_eq!(out.replaced, vec!["cluster \"b\"".to_string()]);
        assert_eq!(existing["clusters"][1]["cluster"]["server"], "https://b2");
    }

    #[test]
    fn malformed_kubeconfigs_are_named() {
        let odd = parse("::: not yaml", "x");
        assert!(odd.is_err() || check_entries(&odd.unwrap()).is_err());
        assert!(parse("a: [", "x").is_err());
        let empty = parse("apiVersion: v1\nclusters: []\n", "x").unwrap();
        assert!(check_entries(&empty).unwrap_err().contains("no clusters"));
        assert!(
            parse("- a\n- b\n", "x")
                .unwrap_err()
                .to_string()
                .contains("mapping")
        );
    }

    #[test]
    fn atomic_write_keeps_the_old_file_on_failure() {
        let (dir, p) = config_file(None);
        write_atomic(&p, b"one", false).unwrap();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o600
        );
        write_atomic(&p, b"two", false).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "two");
        assert_eq!(backup_path(&p), dir.path().join("config.bak"));
        // No temporary files are left behind.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn removes_the_merged_context_and_its_unshared_entries() {
        let mut doc = json!({
            "apiVersion": "v1", "kind": "Config", "current-context": "c1-admin@c1",
            "clusters": [{"name": "c1", "cluster": {"server": "https://a"}}, {"name": "mgmt", "cluster": {"server": "https://m"}}],
            "users": [{"name": "c1-admin", "user": {}}, {"name": "me", "user": {}}],
            "contexts": [{"name": "c1-admin@c1", "context": {"cluster": "c1", "user": "c1-admin"}},
                         {"name": "mgmt", "context": {"cluster": "mgmt", "user": "me"}}]
        });
        assert_eq!(remove_context(&mut doc, "c1-admin@c1"), (true, true));
        assert_eq!(doc["contexts"].as_array().unwrap().len(), 1);
        assert_eq!(
            doc["clusters"],
            json!([{"name": "mgmt", "cluster": {"server": "https://m"}}])
        );
        assert_eq!(doc["users"], json!([{"name": "me", "user": {}}]));
        assert_eq!(doc["current-context"], "");
        assert_eq!(remove_context(&mut doc, "c1-admin@c1"), (false, false));
        // A user shared with another context stays.
        let mut doc = json!({
            "contexts": [{"name": "c2-admin@c2", "context": {"cluster": "c2", "user": "shared"}},
                         {"name": "x", "context": {"cluster": "x", "user": "shared"}}],
            "users": [{"name": "shared"}], "clusters": [{"name": "c2"}, {"name": "x"}]
        });
        assert_eq!(remove_context(&mut doc, "c2-admin@c2"), (true, false));
        assert_eq!(doc["users"].as_array().unwrap().len(), 1);
        assert_eq!(doc["clusters"], json!([{"name": "x"}]));
    }

    fn prod(name: &str) -> Value {
        rename(
            &fetched(),
            name,
            &format!("{name}-admin"),
            &format!("{name}-admin@{name}"),
        )
        .unwrap()
    }

    // Issue 13: 20 concurrent merges kept only 11 (capi) and 7 (kamaji) of the 20 contexts.
    #[test]
    fn concurrent_merges_all_land() {
        let (dir, path) = config_file(None);
        let threads: Vec<_> = (0..20)
            .map(|i| {
                let path = path.clone();
                std::thread::spawn(move || {
                    merge_into_file(&path, &prod(&format!("c{i}")), opts(false, false))
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap().unwrap();
        }
        let back = parse(&std::fs::read_to_string(&path).unwrap(), "x").unwrap();
        assert_eq!(back["contexts"].as_array().unwrap().len(), 20);
        // No lock or temporary file is left behind.
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .collect();
        assert!(
            names.iter().all(|n| n == "config" || n == "config.bak"),
            "{names:?}"
        );
    }

    // Issue 13: both plugins overwrote a read-only (0444) kubeconfig that kubectl would refuse.
    #[test]
    fn a_read_only_kubeconfig_is_refused_and_a_mode_is_kept() {
        use std::os::unix::fs::PermissionsExt;
        let (_dir, path) = config_file(Some("apiVersion: v1\nkind: Config\n"));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o444)).unwrap();
        let e = merge_into_file(&path, &prod("p"), opts(false, false)).unwrap_err();
        assert!(e.to_string().contains("read-only"), "{e}");
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "apiVersion: v1\nkind: Config\n"
        );
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        merge_into_file(&path, &prod("p"), opts(false, false)).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(
            mode, 0o600,
            "owner bits kept, credentials not group-readable"
        );
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700)).unwrap();
        merge_into_file(&path, &prod("q"), opts(false, false)).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "the owner's bits are the owner's");
    }

    // Issue 13: a symlink planted at config.bak received the credentials.
    #[test]
    fn a_planted_backup_symlink_is_replaced_not_followed() {
        let (dir, path) = config_file(None);
        let elsewhere = dir.path().join("elsewhere");
        std::fs::write(&path, "apiVersion: v1\nkind: Config\n").unwrap();
        std::fs::write(&elsewhere, "untouched").unwrap();
        std::os::unix::fs::symlink(&elsewhere, dir.path().join("config.bak")).unwrap();
        merge_into_file(&path, &prod("p"), opts(false, false)).unwrap();
        assert_eq!(std::fs::read_to_string(&elsewhere).unwrap(), "untouched");
        assert!(
            !std::fs::symlink_metadata(dir.path().join("config.bak"))
                .unwrap()
                .is_symlink()
        );
    }

    // Issue 13: kamaji's writer used a predictable `.config.tmp-<pid>`: a symlink planted there
    // received the credentials (mode 0644) and `config` itself became a symlink.
    #[test]
    fn a_planted_temporary_symlink_receives_nothing() {
        use std::os::unix::fs::PermissionsExt;
        let (dir, path) = config_file(None);
        let elsewhere = dir.path().join("elsewhere");
        std::fs::write(&elsewhere, "untouched").unwrap();
        for name in [
            format!(".config.tmp-{}", std::process::id()),
            ".config.tmp".into(),
        ] {
            std::os::unix::fs::symlink(&elsewhere, dir.path().join(name)).unwrap();
        }
        merge_into_file(&path, &prod("p"), opts(false, false)).unwrap();
        assert_eq!(std::fs::read_to_string(&elsewhere).unwrap(), "untouched");
        let meta = std::fs::symlink_metadata(&path).unwrap();
        assert!(meta.is_file() && !meta.is_symlink());
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    }

    // Issue 13: `capi delete --yes` removed a context of the same name pointing at another server.
    #[test]
    fn removal_needs_the_server_it_added() {
        let (_dir, path) = config_file(None);
        merge_into_file(&path, &prod("c1"), opts(false, true)).unwrap();
        let before = std::fs::read_to_string(&path).unwrap();
        let other_server = Added {
            servers: vec!["https://10.9.9.9:6443".to_string()],
            users: vec![],
        };
        // The same server, other credentials: someone else's context of that name.
        let other_user = Added {
            servers: vec!["https://10.0.0.1:6443".to_string()],
            users: vec![json!({"token": "someone-else"})],
        };
        for other in [other_server, other_user] {
            assert_eq!(
                remove_context_from_file(&path, "c1-admin@c1", &other).unwrap(),
                ContextRemoval::NotOurs
            );
            assert_eq!(std::fs::read_to_string(&path).unwrap(), before);
        }
        let ours = Added {
            servers: vec!["https://10.0.0.1:6443".to_string()],
            users: fetched()["users"]
                .as_array()
                .unwrap()
                .iter()
                .map(|u| u["user"].clone())
                .collect(),
        };
        assert_eq!(
            remove_context_from_file(&path, "c1-admin@c1", &ours).unwrap(),
            ContextRemoval::Removed { was_current: true }
        );
        assert_eq!(
            remove_context_from_file(&path, "c1-admin@c1", &ours).unwrap(),
            ContextRemoval::Absent
        );
    }

    // Issue 13: on a full disk kamaji's writer left a 0-byte config.bak. A 64 KiB tmpfs filled
    // to the last byte stands in for the full disk (mounting needs root, as the testbed does).
    #[test]
    fn a_full_disk_leaves_the_old_file_and_no_empty_backup() {
        let dir = tempfile::tempdir().unwrap();
        let mount = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=64k", "tmpfs"])
            .arg(dir.path())
            .status()
            .expect("run mount");
        assert!(
            mount.success(),
            "mounting a tmpfs needs root, as the rest of the suite does"
        );
        let path = dir.path().join("config");
        let result = std::panic::catch_unwind(|| {
            let before = "apiVersion: v1\nkind: Config\ncurrent-context: mgmt\n";
            std::fs::write(&path, before).unwrap();
            // Fill the rest of the file system.
            let filler = dir.path().join("filler");
            let mut f = std::fs::File::create(&filler).unwrap();
            let chunk = vec![0u8; 4096];
            while f.write_all(&chunk).is_ok() {}
            let _ = f.write_all(&[0u8]);
            drop(f);
            let e = merge_into_file(&path, &prod("p"), opts(false, false)).unwrap_err();
            assert!(e.to_string().contains("cannot write"), "{e}");
            assert_eq!(std::fs::read_to_string(&path).unwrap(), before);
            let names: Vec<String> = std::fs::read_dir(dir.path())
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
                .collect();
            // The backup is written whole or not at all, and no temporary or lock file stays.
            for n in &names {
                assert!(
                    n == "config" || n == "filler" || n == "config.bak",
                    "{names:?}"
                );
            }
            if names.iter().any(|n| n == "config.bak") {
                assert_eq!(
                    std::fs::read_to_string(dir.path().join("config.bak")).unwrap(),
                    before
                );
            }
        });
        let _ = std::process::Command::new("umount")
            .arg(dir.path())
            .status();
        if let Err(p) = result {
            std::panic::resume_unwind(p);
        }
    }
}
