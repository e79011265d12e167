//! `kubectl capi kubeconfig CLUSTER [--output FILE] [--merge [--force] [--switch]]`: the
//! workload cluster's kubeconfig from Secret `<cluster>-kubeconfig` (key `value`), printed,
//! written to a file, or merged into the user's kubeconfig.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Args as ClapArgs;
use cli::KubeFlags;
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use serde_json::{Value, json};
use shared::discovery::ServerApis;
use shared::error::{Error, Op};

/// Fault injection for tests only: fail after the temporary file is written, before the rename.
const FAIL_BEFORE_RENAME_ENV: &str = "KUBECTL_CAPI_TEST_FAIL_BEFORE_RENAME";

#[derive(ClapArgs, Clone, Debug)]
#[command(
    after_help = "Without --output or --merge the kubeconfig is printed on stdout.\n\n--merge adds the cluster, user and context to your kubeconfig (--merge-into, else the first file of KUBECONFIG, else ~/.kube/config): the file is replaced atomically, the previous version is kept as <file>.bak, and existing entries with the same names are never overwritten unless --force.\n\nExamples:\n  kubectl capi kubeconfig prod > prod.kubeconfig\n  kubectl capi kubeconfig prod --output ~/prod.kubeconfig\n  kubectl capi kubeconfig prod --merge --switch"
)]
pub struct Args {
    /// The cluster
    #[arg(value_name = "CLUSTER")]
    pub cluster: String,
    /// Write the kubeconfig to FILE (mode 0600) instead of printing it
    #[arg(long, value_name = "FILE", value_hint = clap::ValueHint::FilePath, conflicts_with = "merge")]
    pub output: Option<PathBuf>,
    /// Add the cluster as a new context to your kubeconfig
    #[arg(long)]
    pub merge: bool,
    /// The kubeconfig to merge into (default: the first file of KUBECONFIG, else ~/.kube/config)
    #[arg(long, value_name = "FILE", requires = "merge", value_hint = clap::ValueHint::FilePath)]
    pub merge_into: Option<PathBuf>,
    /// With --merge: replace existing clusters, users and contexts of the same names
    #[arg(long, requires = "merge")]
    pub force: bool,
    /// With --merge: make the new context the current one
    #[arg(long, requires = "merge")]
    pub switch: bool,
    #[command(flatten)]
    pub kube: KubeFlags,
}

/// Reads the kubeconfig of `cluster` from its secret, with clear errors when it is missing
/// (control plane not initialized yet) or malformed.
async fn fetch(args: &Args) -> Result<(String, Value), Error> {
    let conn = args.kube.connect().await?;
    let ns = conn.namespace.clone();
    let secret_name = format!("{}-kubeconfig", args.cluster);
    let api: Api<Secret> = Api::namespaced(conn.client.clone(), &ns);
    let op = Op::new("get", "", "secrets", "Secret")
        .in_namespace(Some(&ns))
        .named(&secret_name);
    let secret = api
        .get_opt(&secret_name)
        .await
        .map_err(|e| conn.error(e, &op))?;
    let Some(secret) = secret else {
        // Tell a missing cluster from one whose control plane is not up yet.
        let apis = ServerApis::discover(&conn).await?;
        let cluster_ar = apis.cluster()?;
        let cluster = shared::api::get_or_suggest(&conn, &cluster_ar, &ns, &args.cluster).await?;
        let json = shared::discovery::fields::object_json(&cluster);
        let initialized = shared::discovery::fields::cluster_control_plane_initialized(&json);
        let message = if initialized {
            format!(
                "cluster \"{}\" has no kubeconfig: Secret {ns}/{secret_name} not found, although its control plane reports initialized",
                args.cluster
            )
        } else {
            format!(
                "cluster \"{}\" has no kubeconfig yet: its control plane is not initialized (Secret {ns}/{secret_name} not found)",
                args.cluster
            )
        };
        return Err(Error::Other {
            message,
            hint: Some(format!(
                "wait for the control plane (kubectl capi describe {} -n {ns}), then run this again",
                args.cluster
            )),
        });
    };
    let malformed = |why: &str| Error::Other {
        message: format!("Secret {ns}/{secret_name} is malformed: {why}"),
        hint: Some(format!(
            "the control-plane provider writes it; check it with kubectl get secret {secret_name} -n {ns} -o yaml"
        )),
    };
    let data = secret
        .data
        .as_ref()
        .and_then(|d| d.get("value"))
        .map(|b| b.0.clone())
        .ok_or_else(|| malformed("it has no key \"value\""))?;
    let text = String::from_utf8(data).map_err(|_| malformed("\"value\" is not UTF-8 text"))?;
    let parsed = parse_kubeconfig(&text).map_err(|e| malformed(&e))?;
    Ok((text, parsed))
}

/// Parses and checks a kubeconfig: YAML, `kind: Config`-shaped, with clusters, users, contexts.
pub fn parse_kubeconfig(text: &str) -> Result<Value, String> {
    let v: Value = serde_saphyr::from_str(text).map_err(|e| {
        let first = e.to_string();
        format!(
            "\"value\" is not a kubeconfig (YAML error: {})",
            first.lines().next().unwrap_or("")
        )
    })?;
    if !v.is_object() {
        return Err("\"value\" is not a kubeconfig (not a YAML mapping)".into());
    }
    for key in ["clusters", "users", "contexts"] {
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
    Ok(v)
}

pub async fn run(args: &Args) -> Result<(), Error> {
    let (text, parsed) = fetch(args).await?;
    if let Some(path) = &args.output {
        write_atomic(path, text.as_bytes(), false)?;
        shared::render::info(&format!(
            "wrote the kubeconfig of cluster {} to {}",
            args.cluster,
            path.display()
        ));
        return Ok(());
    }
    if !args.merge {
        shared::render::raw(text.as_bytes());
        return Ok(());
    }
    let target = match &args.merge_into {
        Some(p) => p.clone(),
        None => default_target()?,
    };
    let outcome = merge_into_file(&target, &parsed, args.force, args.switch)?;
    shared::render::info(&outcome.message(&target));
    Ok(())
}

/// The first file of KUBECONFIG (as kubectl writes to it), else ~/.kube/config.
fn default_target() -> Result<PathBuf, Error> {
    if let Some(v) = std::env::var_os("KUBECONFIG")
        && let Some(first) = std::env::split_paths(&v).find(|p| !p.as_os_str().is_empty())
    {
        return Ok(first);
    }
    std::env::var_os("HOME")
        .map(|h| PathBuf::from(h).join(".kube").join("config"))
        .ok_or_else(|| Error::Usage {
            message: "cannot tell where your kubeconfig is: neither KUBECONFIG nor HOME is set"
                .into(),
            hint: Some("pass --merge-into FILE".into()),
        })
}

/// What a merge did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct MergeOutcome {
    pub added: Vec<String>,
    pub replaced: Vec<String>,
    pub unchanged: Vec<String>,
    pub context: String,
    pub switched: bool,
    pub backup: Option<PathBuf>,
}

impl MergeOutcome {
    fn message(&self, target: &Path) -> String {
        let mut parts = Vec::new();
        if !self.added.is_empty() {
            parts.push(format!("added {}", self.added.join(", ")));
        }
        if !self.replaced.is_empty() {
            parts.push(format!("replaced {}", self.replaced.join(", ")));
        }
        if parts.is_empty() {
            parts.push("already up to date".into());
        }
        let mut s = format!(
            "merged context \"{}\" into {}: {}",
            self.context,
            target.display(),
            parts.join("; ")
        );
        if let Some(b) = &self.backup {
            s.push_str(&format!(" (previous file kept as {})", b.display()));
        }
        if self.switched {
            s.push_str(&format!("; current context is now \"{}\"", self.context));
        } else {
            s.push_str(&format!(
                "; use it with kubectl config use-context {}",
                self.context
            ));
        }
        s
    }
}

/// Merges the entries of `new` into `existing` (pure). Fails when a name exists with other
/// content, unless `force`.
pub fn merge(
    existing: &mut Value,
    new: &Value,
    force: bool,
    switch: bool,
) -> Result<MergeOutcome, Error> {
    if existing.is_null() {
        *existing = json!({"apiVersion": "v1", "kind": "Config", "preferences": {}});
    }
    let Some(obj) = existing.as_object_mut() else {
        return Err(Error::other(
            "your kubeconfig is not a YAML mapping; fix it or pass --merge-into another file",
        ));
    };
    let mut out = MergeOutcome::default();
    // Check every conflict before changing anything.
    let mut conflicts = Vec::new();
    for (key, singular) in [
        ("clusters", "cluster"),
        ("users", "user"),
        ("contexts", "context"),
    ] {
        let have = obj
            .get(key)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for e in new.get(key).and_then(Value::as_array).into_iter().flatten() {
            let name = e.get("name").and_then(Value::as_str).unwrap_or_default();
            if let Some(old) = have
                .iter()
                .find(|h| h.get("name").and_then(Value::as_str) == Some(name))
                && old != e
            {
                conflicts.push(format!("{singular} \"{name}\""));
            }
        }
    }
    if !conflicts.is_empty() && !force {
        return Err(Error::Other {
            message: format!(
                "your kubeconfig already has {} with other settings; nothing was changed",
                conflicts.join(", ")
            ),
            hint: Some(
                "pass --force to replace them, or --output FILE to write a separate kubeconfig"
                    .into(),
            ),
        });
    }
    for (key, singular) in [
        ("clusters", "cluster"),
        ("users", "user"),
        ("contexts", "context"),
    ] {
        let list = obj.entry(key).or_insert_with(|| json!([]));
        if !list.is_array() {
            *list = json!([]);
        }
        let Some(arr) = list.as_array_mut() else {
            continue;
        };
        for e in new.get(key).and_then(Value::as_array).into_iter().flatten() {
            let name = e.get("name").and_then(Value::as_str).unwrap_or_default();
            let label = format!("{singular} \"{name}\"");
            match arr
                .iter_mut()
                .find(|h| h.get("name").and_then(Value::as_str) == Some(name))
            {
                Some(old) if old == e => out.unchanged.push(label),
                Some(old) => {
                    *old = e.clone();
                    out.replaced.push(label);
                }
                None => {
                    arr.push(e.clone());
                    out.added.push(label);
                }
            }
        }
    }
    out.context = new
        .get("current-context")
        .and_then(Value::as_str)
        .filter(|c| !c.is_empty())
        .or_else(|| {
            new.get("contexts")
                .and_then(Value::as_array)
                .and_then(|a| a.first())
                .and_then(|c| c.get("name"))
                .and_then(Value::as_str)
        })
        .unwrap_or_default()
        .to_string();
    if switch {
        obj.insert("current-context".into(), json!(out.context));
        out.switched = true;
    }
    Ok(out)
}

/// Reads `target` (missing is fine), merges, backs up the previous file and replaces it
/// atomically.
pub fn merge_into_file(
    target: &Path,
    new: &Value,
    force: bool,
    switch: bool,
) -> Result<MergeOutcome, Error> {
    // Follow a symlinked kubeconfig and write where it points.
    let target = std::fs::canonicalize(target).unwrap_or_else(|_| target.to_path_buf());
    let old_text = match std::fs::read_to_string(&target) {
        Ok(t) => Some(t),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            return Err(Error::other(format!(
                "cannot read {}: {e}",
                target.display()
            )));
        }
    };
    let mut existing: Value = match &old_text {
        Some(t) if !t.trim().is_empty() => serde_saphyr::from_str(t).map_err(|e| Error::Other {
            message: format!(
                "cannot merge into {}: it is not valid YAML ({})",
                target.display(),
                e.to_string().lines().next().unwrap_or("")
            ),
            hint: Some("fix the file, or pass --merge-into another file".into()),
        })?,
        _ => Value::Null,
    };
    let mut outcome = merge(&mut existing, new, force, switch)?;
    let text = shared::render::to_yaml(&existing)?;
    if let Some(old) = &old_text {
        if old == &text {
            return Ok(outcome);
        }
        let backup = backup_path(&target);
        write_atomic(&backup, old.as_bytes(), true)?;
        outcome.backup = Some(backup);
    }
    write_atomic(&target, text.as_bytes(), true)?;
    Ok(outcome)
}

/// `<file>.bak`, next to the file.
pub fn backup_path(target: &Path) -> PathBuf {
    let mut name = target
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_else(|| "config".into());
    name.push(".bak");
    target.with_file_name(name)
}

/// Writes `bytes` to `path` with mode 0600 atomically: a temporary file in the same directory,
/// flushed to disk, then renamed over `path`. On any failure `path` is left as it was.
pub fn write_atomic(path: &Path, bytes: &[u8], create_dir: bool) -> Result<(), Error> {
    let io = |what: &str, e: std::io::Error| {
        Error::other(format!("cannot write {}: {what}: {e}", path.display()))
    };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if create_dir && !dir.exists() {
        std::fs::create_dir_all(&dir).map_err(|e| io("creating its directory", e))?;
    }
    let prefix = format!(
        ".{}.",
        path.file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_else(|| "kubeconfig".into())
    );
    // NamedTempFile creates the file with mode 0600 and removes it if we fail before persisting.
    let mut tmp = tempfile::Builder::new()
        .prefix(&prefix)
        .suffix(".tmp")
        .tempfile_in(&dir)
        .map_err(|e| io("creating a temporary file", e))?;
    {
        use std::os::unix::fs::PermissionsExt;
        tmp.as_file()
            .set_permissions(std::fs::Permissions::from_mode(0o600))
            .map_err(|e| io("setting mode 0600", e))?;
    }
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

    fn kc(name: &str, server: &str) -> Value {
        parse_kubeconfig(&format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: {name}\n  cluster:\n    server: {server}\ncontexts:\n- name: {name}-admin@{name}\n  context:\n    cluster: {name}\n    user: {name}-admin\ncurrent-context: {name}-admin@{name}\nusers:\n- name: {name}-admin\n  user:\n    token: t-{name}\n"
        ))
        .unwrap()
    }

    #[test]
    fn merge_adds_and_refuses_conflicts() {
        let mut existing = kc("a", "https://a");
        existing["preferences"] = json!({"colors": true});
        let before = existing.clone();
        let out = merge(&mut existing, &kc("b", "https://b"), false, false).unwrap();
        assert_eq!(out.added.len(), 3);
        assert_eq!(out.context, "b-admin@b");
        assert_eq!(existing["current-context"], "a-admin@a");
        assert_eq!(existing["preferences"], before["preferences"]);
        assert_eq!(existing["clusters"][0], before["clusters"][0]);
        // Same content again: nothing to do.
        let out = merge(&mut existing, &kc("b", "https://b"), false, true).unwrap();
        assert_eq!(out.unchanged.len(), 3);
        assert_eq!(existing["current-context"], "b-admin@b");
        // Other content under the same names: refused, untouched.
        let snapshot = existing.clone();
        let err = merge(&mut existing, &kc("b", "https://b2"), false, false).unwrap_err();
        assert!(err.to_string().contains("cluster \"b\""), "{err}");
        assert_eq!(existing, snapshot);
        let out = merge(&mut existing, &kc("b", "https://b2"), true, false).unwrap();
        assert_eq!(out.replaced, vec!["cluster \"b\"".to_string()]);
        assert_eq!(existing["clusters"][1]["cluster"]["server"], "https://b2");
    }

    #[test]
    fn malformed_kubeconfigs_are_named() {
        assert!(parse_kubeconfig("::: not yaml").is_err());
        assert!(
            parse_kubeconfig("apiVersion: v1\nclusters: []\n")
                .unwrap_err()
                .contains("no clusters")
        );
        assert!(
            parse_kubeconfig("- a\n- b\n")
                .unwrap_err()
                .contains("mapping")
        );
    }

    #[test]
    fn atomic_write_keeps_the_old_file_on_failure() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("config");
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
}
