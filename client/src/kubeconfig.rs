//! The kubeconfig files of the user, handled the way kubectl would want them: a fetched
//! kubeconfig merged in by name (existing entries are never overwritten unless forced), the
//! file replaced atomically with mode 0600 (a temporary file next to it, then a rename), and
//! the previous version kept as `<file>.bak`. Both plugins' `kubeconfig` verbs and `delete`, and
//! `kubectl kamaji create --merge-kubeconfig`, use this module; it is the only writer of
//! kubeconfig files.
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
mod remove;
mod validate;

pub use client::client_of;
pub use deliver::{
    CONFLICT_HINT, Delivery, KubeconfigFormat, deliver, merge_fetched, merge_file, merge_message,
    merge_names,
};
pub use file::backup_path;
use file::{FileLock, read_writable, replace_file};
pub use load::{load_error, load_file};
pub use remove::{Added, ContextRemoval, remove_context, remove_context_from_file};
pub use validate::{loadable, usable};

/// Fault injection for tests only: fail after the temporary file is written, before the rename.
pub const FAIL_BEFORE_RENAME_ENV: &str = "KUBECTL_CAPI_TEST_FAIL_BEFORE_RENAME";

/// The mode of a new kubeconfig: private, as kubectl and clusterctl write them.
pub const NEW_FILE_MODE: u32 = 0o600;

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
    // A merge never leaves a file kubectl cannot load: the text about to be written is
    // checked the way kubectl reads it.
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
    let mut tmp = AtomicFile::create(path, create_dir, mode)?;
    tmp.file
        .write_all(bytes)
        .map_err(|e| write_error(path, "writing", e))?;
    tmp.commit()
}

fn write_error(path: &Path, what: &str, e: std::io::Error) -> Error {
    Error::Other {
        message: format!("cannot write {}: {what}: {e}", path.display()),
        hint: Some("check the path and its permissions".into()),
    }
}

/// A file being written in place of `path`: a temporary file with an unpredictable name in the
/// same directory, renamed over `path` by [`AtomicFile::commit`] once flushed to disk. Dropped
/// without a commit, it is removed and `path` is left as it was.
pub struct AtomicFile {
    path: PathBuf,
    pub file: tempfile::NamedTempFile,
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.file.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

impl AtomicFile {
    pub fn create(path: &Path, create_dir: bool, mode: u32) -> Result<AtomicFile, Error> {
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
        let file = tempfile::Builder::new()
            .prefix(&prefix)
            .suffix(".tmp")
            .tempfile_in(&dir)
            .map_err(|e| write_error(path, "creating a temporary file", e))?;
        set_mode(file.as_file(), mode).map_err(|e| write_error(path, "setting its mode", e))?;
        Ok(AtomicFile {
            path: path.to_path_buf(),
            file,
        })
    }

    /// Flushes the file to disk and renames it over the path.
    pub fn commit(self) -> Result<(), Error> {
        let path = self.path;
        self.file
            .as_file()
            .sync_all()
            .map_err(|e| write_error(&path, "syncing", e))?;
        if std::env::var_os(FAIL_BEFORE_RENAME_ENV).is_some() {
            return Err(Error::other(format!(
                "cannot write {}: simulated failure before the rename ({FAIL_BEFORE_RENAME_ENV})",
                path.display()
            )));
        }
        self.file
            .persist(&path)
            .map_err(|e| write_error(&path, "replacing it", e.error))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests;
