//! Merging a fetched kubeconfig into a kubeconfig file, safely: entries are renamed after the
//! cluster, existing entries are never overwritten unless forced, the file is written
//! atomically with mode 0600, and the previous file is kept as `<file>.bak`.
//!
//! Works on the kubeconfig as JSON values, so fields this code does not know (exec plugins,
//! extensions, preferences) survive.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::error::Error;

/// What a merge did.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MergeReport {
    pub file: String,
    pub context: String,
    /// `cluster/<name>`, `user/<name>`, `context/<name>` entries added.
    pub added: Vec<String>,
    /// Entries replaced (with `--force`).
    pub replaced: Vec<String>,
    /// Entries already identical.
    pub unchanged: Vec<String>,
    /// The backup of the previous file, if there was one.
    pub backup: Option<String>,
    pub current_context_set: bool,
}

fn parse_error(what: &str, e: impl std::fmt::Display) -> Error {
    Error::Other {
        message: format!("{what} is not a valid kubeconfig: {e}"),
        hint: Some("check the file with kubectl config view".into()),
    }
}

/// Parses kubeconfig YAML (or JSON) text.
pub fn parse(text: &str, what: &str) -> Result<Value, Error> {
    if text.trim().is_empty() {
        return Ok(json!({"apiVersion": "v1", "kind": "Config"}));
    }
    let v: Value = serde_saphyr::from_str(text).map_err(|e| parse_error(what, e))?;
    if !v.is_object() {
        return Err(parse_error(what, "not a map"));
    }
    Ok(v)
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

/// Merges `add` (from [`rename`]) into `base`. An entry with the same name and different
/// content is a conflict unless `force`. Returns the merged config and the report (without
/// file details).
pub fn merge(
    base: &Value,
    add: &Value,
    force: bool,
    set_current: bool,
) -> Result<(Value, MergeReport), Error> {
    let mut out = base.clone();
    if !out.is_object() {
        out = json!({});
    }
    if out.get("apiVersion").is_none() {
        out["apiVersion"] = json!("v1");
    }
    if out.get("kind").is_none() {
        out["kind"] = json!("Config");
    }
    let mut report = MergeReport::default();
    let mut conflicts = Vec::new();
    for list in ["clusters", "users", "contexts"] {
        let singular = &list[..list.len() - 1];
        for entry in add[list].as_array().cloned().unwrap_or_default() {
            let name = entry["name"].as_str().unwrap_or_default().to_string();
            let id = format!("{singular}/{name}");
            if !out[list].is_array() {
                out[list] = json!([]);
            }
            let Some(items) = out[list].as_array_mut() else {
                continue;
            };
            match items.iter().position(|x| x["name"] == entry["name"]) {
                None => {
                    items.push(entry);
                    report.added.push(id);
                }
                Some(i) if items[i] == entry => report.unchanged.push(id),
                Some(i) => {
                    if force {
                        items[i] = entry;
                        report.replaced.push(id);
                    } else {
                        conflicts.push(id);
                    }
                }
            }
        }
    }
    if !conflicts.is_empty() {
        return Err(Error::Other {
            message: format!(
                "the kubeconfig already has different entries named {}",
                conflicts.join(", ")
            ),
            hint: Some(
                "pass --force to replace them, or --context-name to merge under another name"
                    .into(),
            ),
        });
    }
    report.context = add["current-context"].as_str().unwrap_or_default().into();
    if set_current || out["current-context"].as_str().is_none_or(str::is_empty) {
        out["current-context"] = json!(report.context);
        report.current_context_set = true;
    }
    Ok((out, report))
}

/// The file `--merge` writes to: `KUBECONFIG`'s first entry, else `~/.kube/config`.
pub fn default_merge_file() -> Option<PathBuf> {
    if let Some(v) = std::env::var_os("KUBECONFIG")
        && let Some(first) = std::env::split_paths(&v).find(|p| !p.as_os_str().is_empty())
    {
        return Some(first);
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".kube").join("config"))
}

fn io_error(path: &Path, e: std::io::Error) -> Error {
    Error::Other {
        message: format!("cannot write {}: {e}", path.display()),
        hint: Some("check the path and its permissions".into()),
    }
}

/// Writes `text` to `path` atomically (a temporary file in the same directory, then a
/// rename), with mode 0600. Keeps the previous file as `<path>.bak`; returns its path.
pub fn write_atomic(path: &Path, text: &str) -> Result<Option<PathBuf>, Error> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| io_error(dir, e))?;
    let backup = if path.exists() {
        let mut b = path.as_os_str().to_owned();
        b.push(".bak");
        let b = PathBuf::from(b);
        std::fs::copy(path, &b).map_err(|e| io_error(&b, e))?;
        std::fs::set_permissions(&b, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .map_err(|e| io_error(&b, e))?;
        Some(b)
    } else {
        None
    };
    let file_name = path
        .file_name()
        .map(|f| f.to_string_lossy().to_string())
        .unwrap_or_else(|| "kubeconfig".into());
    let tmp = dir.join(format!(".{file_name}.tmp-{}", std::process::id()));
    let result = (|| {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(io_error(path, e));
    }
    Ok(backup)
}

/// Reads `path` (missing = empty), merges `add` and writes it back atomically.
pub fn merge_into_file(
    path: &Path,
    add: &Value,
    force: bool,
    set_current: bool,
) -> Result<MergeReport, Error> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => {
            return Err(Error::Other {
                message: format!("cannot read {}: {e}", path.display()),
                hint: Some("check the path and its permissions".into()),
            });
        }
    };
    let base = parse(&text, &path.display().to_string())?;
    let (merged, mut report) = merge(&base, add, force, set_current)?;
    report.file = path.display().to_string();
    if report.added.is_empty() && report.replaced.is_empty() && !report.current_context_set {
        return Ok(report);
    }
    let yaml = crate::render::to_yaml(&merged)?;
    report.backup = write_atomic(path, &yaml)?.map(|b| b.display().to_string());
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let (merged, r) = merge(&base, &add, false, false).unwrap();
        assert_eq!(r.added.len(), 3);
        assert_eq!(merged["current-context"], "mgmt");
        assert_eq!(merged["contexts"].as_array().unwrap().len(), 2);
        let (_, r2) = merge(&merged, &add, false, false).unwrap();
        assert!(r2.added.is_empty());
        assert_eq!(r2.unchanged.len(), 3);
    }

    #[test]
    fn different_entries_conflict_unless_forced() {
        let add = rename(&fetched(), "prod", "prod-admin", "prod-admin@prod").unwrap();
        let (merged, _) = merge(&json!({}), &add, false, false).unwrap();
        let mut other = add.clone();
        other["clusters"][0]["cluster"]["server"] = json!("https://10.9.9.9:6443");
        let e = merge(&merged, &other, false, false).unwrap_err();
        assert_eq!(
            e.to_string(),
            "the kubeconfig already has different entries named cluster/prod"
        );
        let (m, r) = merge(&merged, &other, true, false).unwrap();
        assert_eq!(r.replaced, ["cluster/prod"]);
        assert_eq!(
            m["clusters"][0]["cluster"]["server"],
            "https://10.9.9.9:6443"
        );
    }

    #[test]
    fn file_merge_is_atomic_private_and_backed_up() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config");
        std::fs::write(&path, "apiVersion: v1\nkind: Config\ncurrent-context: mgmt\ncontexts:\n- name: mgmt\n  context: {cluster: mgmt, user: me}\n").unwrap();
        let add = rename(&fetched(), "prod", "prod-admin", "prod-admin@prod").unwrap();
        let r = merge_into_file(&path, &add, false, true).unwrap();
        assert!(r.backup.is_some());
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let back = parse(&std::fs::read_to_string(&path).unwrap(), "x").unwrap();
        assert_eq!(back["current-context"], "prod-admin@prod");
        assert_eq!(back["contexts"].as_array().unwrap().len(), 2);
        let bak = std::fs::read_to_string(dir.path().join("config.bak")).unwrap();
        assert!(bak.contains("current-context: mgmt"));
    }
}
