//! One tenant's backup, as `kubectl kamaji backup` writes it and `kubectl kamaji restore` reads
//! it: the file's lines, what they must add up to, the objects carried and how a restore renames
//! them. No I/O here: the plugin reads the DataStore and the API, and compresses.
//!
//! The file is gzip-compressed JSON Lines. Every line but the last is either one key of the
//! tenant's etcd prefix, read at one revision in key order (`{"key":{"k":B64,"v":B64}}`), or
//! one object that brings the tenant back (`{"object":{...}}`). The last line is the
//! [`BackupManifest`] (`{"manifest":{...}}`): written once the counts and the checksum are known, so a
//! file cut short has none, and its `sha256` covers every byte before it, so an edited line is
//! caught. Lines are bounded ([`MAX_LINE`]), so reading or writing any size of tenant holds one
//! line at a time.
//!
//! Why etcd keys and not API objects: the tenant's whole state (every object of every kind,
//! CRDs and their custom resources, ServiceAccount tokens' signing key aside) is the keys under
//! its prefix, which its API server reads back as they were. Kamaji's maintainers note that etcd
//! cannot snapshot one prefix (clastix/kamaji#278); a range read at one revision is that
//! prefix's consistent snapshot.

use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::error::Error;

/// The manifest's `format`: a reader refuses any other.
pub const FORMAT: &str = "capi-kamaji.io/tenant-backup/v1";

/// The longest line read or written. etcd refuses requests over 1.5 MiB by default
/// (`--max-request-bytes`), so a value is at most that; base64 makes it 2 MiB.
pub const MAX_LINE: usize = 4 << 20;

/// Keys asked of etcd per range read: a page's memory is bounded by this times etcd's largest
/// value.
pub const PAGE: u32 = 200;

/// The annotation a restore puts on each object it creates: the backup's checksum, so a re-run
/// of the same restore knows the objects are its own and finishes the job.
pub const RESTORED_FROM: &str = "capi-kamaji.io/restored-from";

/// On the origin's control plane while `kubectl kamaji move` runs: the API server of the
/// management cluster it moves to. With it, a re-run of the move knows the origin sleeps for it.
pub const MOVING_TO: &str = "capi-kamaji.io/moving-to";

/// On the origin's control plane while it moves: its replicas before the move put it to sleep
/// (0, so that no write lands on the origin after the backup). A restore gives them back.
pub const MOVING_REPLICAS: &str = "capi-kamaji.io/moving-replicas";

/// The Secrets carried besides the control plane's objects: the tenant's identity, which Kamaji
/// v1.0.0 adopts when it finds them valid (`internal/resources/ca_certificate.go`,
/// `front_proxy_ca_certificate.go`, `sa_certificate.go`: an existing Secret with a valid pair is
/// kept). Every other certificate and kubeconfig is derived from these and is issued again.
/// Keeping them is what lets kubelets, kubeconfigs and ServiceAccount tokens issued before the
/// backup work after the restore.
pub const CARRIED_SECRETS: [&str; 3] = ["ca", "front-proxy-ca-certificate", "sa-certificate"];

/// One line of the file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub enum Line {
    Key(KeyValue),
    Object(Value),
    Manifest(Box<BackupManifest>),
}

/// An etcd key and its value, base64.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyValue {
    pub k: String,
    pub v: String,
}

/// The control plane a backup holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TenantRef {
    /// `KamajiControlPlane` (with its Cluster) or a standalone `TenantControlPlane`.
    pub kind: String,
    pub namespace: String,
    pub name: String,
}

/// The last line: what the file holds and its checksum.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BackupManifest {
    pub format: String,
    pub tenant: TenantRef,
    /// The TenantControlPlane's name (the KamajiControlPlane's, unless standalone).
    pub tenant_control_plane: String,
    pub kubernetes_version: String,
    pub data_store: String,
    /// The etcd prefix the keys were read from (`/<schema>/`).
    pub prefix: String,
    /// The etcd revision every key was read at.
    pub revision: i64,
    pub keys: u64,
    /// The keys' and values' bytes, before base64.
    pub key_bytes: u64,
    /// Each object, as `Kind/name`, in file order.
    pub objects: Vec<String>,
    /// The tenant's `kube-system` Namespace uid, read through its API server at backup time;
    /// a restore reads it back to prove the data is the tenant's own. `None` when the tenant's
    /// API server could not be reached from where the backup ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub witness: Option<String>,
    /// When the backup was taken (RFC 3339) and by what.
    pub created: String,
    pub created_by: String,
    /// Lowercase hex SHA-256 of every byte before the manifest's line.
    pub sha256: String,
}

/// What a manifest is made of besides the running counts.
#[derive(Clone, Debug)]
pub struct Head {
    pub tenant: TenantRef,
    pub tenant_control_plane: String,
    pub kubernetes_version: String,
    pub data_store: String,
    pub prefix: String,
    pub revision: i64,
    pub witness: Option<String>,
    pub created: String,
    pub created_by: String,
}

/// The running checksum and counts, shared by writing and reading so both add up the same way.
#[derive(Default)]
struct Tally {
    hasher: Sha256,
    keys: u64,
    key_bytes: u64,
    objects: Vec<String>,
}

impl Tally {
    fn feed(&mut self, line: &[u8]) {
        self.hasher.update(line);
    }
    /// A line read without its newline.
    fn feed_line(&mut self, line: &[u8]) {
        self.hasher.update(line);
        self.hasher.update(b"\n");
    }
    fn hex(self) -> (String, u64, u64, Vec<String>) {
        let digest = self.hasher.finalize();
        let hex = digest.iter().map(|b| format!("{b:02x}")).collect();
        (hex, self.keys, self.key_bytes, self.objects)
    }
}

/// `Kind/name` of an object.
pub fn object_label(obj: &Value) -> String {
    format!(
        "{}/{}",
        obj["kind"].as_str().unwrap_or("?"),
        obj["metadata"]["name"].as_str().unwrap_or("?")
    )
}

/// Builds the file's lines (each with its newline) and the manifest that closes them.
#[derive(Default)]
pub struct Writer {
    tally: Tally,
}

impl Writer {
    pub fn new() -> Writer {
        Writer::default()
    }

    fn emit(&mut self, line: &Line) -> Result<Vec<u8>, Error> {
        let mut bytes = serde_json::to_vec(line).map_err(|e| Error::Other {
            message: format!("cannot encode a backup line: {e}"),
            hint: None,
        })?;
        bytes.push(b'\n');
        if bytes.len() > MAX_LINE {
            return Err(Error::Other {
                message: format!(
                    "a backup line would be {} bytes, more than the {MAX_LINE} a restore reads",
                    bytes.len()
                ),
                hint: Some("a value this large is not one etcd accepts by default".into()),
            });
        }
        self.tally.feed(&bytes);
        Ok(bytes)
    }

    /// One key of the tenant's prefix.
    pub fn key(&mut self, key: &[u8], value: &[u8]) -> Result<Vec<u8>, Error> {
        let line = Line::Key(KeyValue {
            k: STANDARD.encode(key),
            v: STANDARD.encode(value),
        });
        let bytes = self.emit(&line)?;
        self.tally.keys = self.tally.keys.saturating_add(1);
        let n = u64::try_from(key.len().saturating_add(value.len())).unwrap_or(u64::MAX);
        self.tally.key_bytes = self.tally.key_bytes.saturating_add(n);
        Ok(bytes)
    }

    /// One object (already [`carried`]).
    pub fn object(&mut self, obj: &Value) -> Result<Vec<u8>, Error> {
        let bytes = self.emit(&Line::Object(obj.clone()))?;
        self.tally.objects.push(object_label(obj));
        Ok(bytes)
    }

    /// The manifest's line, which closes the file, and the manifest.
    pub fn finish(self, head: Head) -> Result<(Vec<u8>, BackupManifest), Error> {
        let (sha256, keys, key_bytes, objects) = self.tally.hex();
        let manifest = BackupManifest {
            format: FORMAT.into(),
            tenant: head.tenant,
            tenant_control_plane: head.tenant_control_plane,
            kubernetes_version: head.kubernetes_version,
            data_store: head.data_store,
            prefix: head.prefix,
            revision: head.revision,
            keys,
            key_bytes,
            objects,
            witness: head.witness,
            created: head.created,
            created_by: head.created_by,
            sha256,
        };
        let mut bytes =
            serde_json::to_vec(&Line::Manifest(Box::new(manifest.clone()))).map_err(|e| {
                Error::Other {
                    message: format!("cannot encode the backup's manifest: {e}"),
                    hint: None,
                }
            })?;
        bytes.push(b'\n');
        Ok((bytes, manifest))
    }
}

/// Checks a file line by line as it is read: each line parses, keys lie under the manifest's
/// prefix, and at the end the counts and the checksum match the manifest.
#[derive(Default)]
pub struct Reader {
    tally: Tally,
    lines: u64,
    manifest: Option<BackupManifest>,
    /// Keys are checked against the prefix once the manifest is known: the first key's
    /// top-level prefix is the one every key must share, and the manifest must name it.
    key_prefix: Option<String>,
    /// The line of the first key outside `key_prefix` (or with none).
    stray_key: Option<u64>,
}

/// A line that was read: a key (decoded) or an object. The manifest is kept by the reader.
#[derive(Debug, PartialEq)]
pub enum Item {
    Key(Vec<u8>, Vec<u8>),
    Object(Value),
    Manifest,
}

fn corrupt(message: String) -> Error {
    Error::Other {
        message,
        hint: Some("take the backup again, or use an intact copy of the file".into()),
    }
}

impl Reader {
    pub fn new() -> Reader {
        Reader::default()
    }

    /// One line, with or without its newline (the checksum counts one either way, as the
    /// writer wrote it).
    pub fn line(&mut self, raw: &[u8]) -> Result<Item, Error> {
        let raw = raw.strip_suffix(b"\n").unwrap_or(raw);
        self.lines = self.lines.saturating_add(1);
        let n = self.lines;
        if self.manifest.is_some() {
            return Err(corrupt(format!("line {n} follows the manifest")));
        }
        if raw.len() > MAX_LINE {
            return Err(corrupt(format!("line {n} is longer than {MAX_LINE} bytes")));
        }
        let parsed: Line = serde_json::from_slice(raw)
            .map_err(|e| corrupt(format!("line {n} is not a backup line: {e}")))?;
        let decode = |what: &str, s: &str| {
            STANDARD
                .decode(s)
                .map_err(|e| corrupt(format!("line {n}: the {what} is not base64: {e}")))
        };
        match parsed {
            Line::Key(kv) => {
                self.tally.feed_line(raw);
                let (k, v) = (decode("key", &kv.k)?, decode("value", &kv.v)?);
                self.tally.keys = self.tally.keys.saturating_add(1);
                let len = u64::try_from(k.len().saturating_add(v.len())).unwrap_or(u64::MAX);
                self.tally.key_bytes = self.tally.key_bytes.saturating_add(len);
                let top = super::orphans::top_prefix(&k);
                if self.key_prefix.is_none() && self.stray_key.is_none() {
                    self.key_prefix = top.clone();
                }
                if (top.is_none() || top != self.key_prefix) && self.stray_key.is_none() {
                    self.stray_key = Some(n);
                }
                Ok(Item::Key(k, v))
            }
            Line::Object(o) => {
                self.tally.feed_line(raw);
                if !o["kind"].is_string() || !o["metadata"]["name"].is_string() {
                    return Err(corrupt(format!("line {n}: an object without kind or name")));
                }
                self.tally.objects.push(object_label(&o));
                Ok(Item::Object(o))
            }
            Line::Manifest(m) => {
                self.manifest = Some(*m);
                Ok(Item::Manifest)
            }
        }
    }

    /// The manifest, once every line was read and everything adds up.
    pub fn finish(self) -> Result<BackupManifest, Error> {
        let Some(m) = self.manifest else {
            return Err(corrupt(format!(
                "it ends after {} lines without its manifest: the file is incomplete",
                self.lines
            )));
        };
        if m.format != FORMAT {
            return Err(Error::Other {
                message: format!(
                    "it is a {} backup; this kubectl-kamaji reads {FORMAT}",
                    m.format
                ),
                hint: Some("restore it with the kubectl-kamaji release that wrote it".into()),
            });
        }
        let (sha, keys, key_bytes, objects) = self.tally.hex();
        if sha != m.sha256 {
            return Err(corrupt(format!(
                "its checksum is {sha}, its manifest says {}: the file was changed after it was written",
                m.sha256
            )));
        }
        if keys != m.keys || key_bytes != m.key_bytes || objects != m.objects {
            return Err(corrupt(format!(
                "it holds {keys} keys and {} objects, its manifest says {} and {}",
                objects.len(),
                m.keys,
                m.objects.len()
            )));
        }
        let stray = self
            .stray_key
            .or(self.key_prefix.filter(|p| *p != m.prefix).map(|_| 1));
        if let Some(line) = stray {
            return Err(corrupt(format!(
                "the key on line {line} lies outside the tenant's prefix {}",
                m.prefix
            )));
        }
        Ok(m)
    }
}

/// An object as a backup carries it: what its controllers and the API server set (identity,
/// versions, owners, finalizers, status) removed, so it can be created anew anywhere.
pub fn carried(obj: &Value) -> Value {
    let mut out = obj.clone();
    if let Some(o) = out.as_object_mut() {
        o.remove("status");
    }
    if let Some(meta) = out["metadata"].as_object_mut() {
        for f in [
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "generation",
            "managedFields",
            "ownerReferences",
            "finalizers",
            "selfLink",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generateName",
        ] {
            meta.remove(f);
        }
        if let Some(a) = meta.get_mut("annotations").and_then(Value::as_object_mut) {
            a.remove("kubectl.kubernetes.io/last-applied-configuration");
            a.remove(RESTORED_FROM);
        }
    }
    out
}

/// Where a control plane's replicas are: a KamajiControlPlane's `spec.replicas`, a
/// TenantControlPlane's `spec.controlPlane.deployment.replicas`.
fn replicas_path(obj: &Value) -> &'static [&'static str] {
    match obj["kind"].as_str() {
        Some("TenantControlPlane") => &["spec", "controlPlane", "deployment", "replicas"],
        _ => &["spec", "replicas"],
    }
}

/// A control plane's replicas (Kamaji's default when unset).
pub fn replicas(obj: &Value) -> i64 {
    crate::fields::at(obj, replicas_path(obj))
        .and_then(Value::as_i64)
        .unwrap_or(super::api::DEFAULT_REPLICAS.into())
}

/// The merge patch that puts a control plane to sleep for a move to `to` (an API server URL):
/// replicas 0, and the replicas to give back kept in [`MOVING_REPLICAS`] (the first run's, on
/// a re-run).
pub fn sleep_patch(obj: &Value, to: &str) -> Value {
    let kept = obj["metadata"]["annotations"][MOVING_REPLICAS]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| replicas(obj).to_string());
    let mut patch = json!({"metadata": {"annotations": {MOVING_TO: to, MOVING_REPLICAS: kept}}});
    let path = replicas_path(obj);
    let mut at = &mut patch;
    for p in &path[..path.len() - 1] {
        at = &mut at[*p];
    }
    at[path[path.len() - 1]] = json!(0);
    patch
}

/// Whether a control plane sleeps for a move, and to where.
pub fn moving_to(obj: &Value) -> Option<&str> {
    obj["metadata"]["annotations"][MOVING_TO].as_str()
}

/// A control plane as it was before a move put it to sleep: its replicas back, the move's
/// annotations gone. Anything else is returned as it is.
pub fn woken(obj: &Value) -> Value {
    let mut out = obj.clone();
    let Some(kept) = obj["metadata"]["annotations"][MOVING_REPLICAS]
        .as_str()
        .and_then(|r| r.parse::<i64>().ok())
    else {
        return out;
    };
    let path = replicas_path(obj);
    let mut at = &mut out;
    for p in &path[..path.len() - 1] {
        at = &mut at[*p];
    }
    at[path[path.len() - 1]] = json!(kept);
    if let Some(a) = out["metadata"]["annotations"].as_object_mut() {
        a.remove(MOVING_TO);
        a.remove(MOVING_REPLICAS);
    }
    out
}

/// Where a restore puts the tenant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RestoreTarget {
    pub namespace: String,
    pub name: String,
    /// The DataStore the restored control plane names (and the keys go to).
    pub data_store: String,
}

impl RestoreTarget {
    /// From the manifest and the flags `-n`, `--as` and `--datastore`.
    pub fn of(
        m: &BackupManifest,
        namespace: Option<&str>,
        name: Option<&str>,
        data_store: Option<&str>,
    ) -> RestoreTarget {
        RestoreTarget {
            namespace: namespace.unwrap_or(&m.tenant.namespace).to_string(),
            name: name.unwrap_or(&m.tenant.name).to_string(),
            data_store: data_store.unwrap_or(&m.data_store).to_string(),
        }
    }

    /// The etcd prefix the restored tenant's API server will read: Kamaji's default schema
    /// for the TenantControlPlane's new namespace and name ([`super::migrate::etcd_prefix`]).
    pub fn prefix(&self, m: &BackupManifest) -> String {
        let tcp = self.renamed(&m.tenant.name, &m.tenant_control_plane);
        super::migrate::etcd_prefix(
            &json!({"metadata": {"namespace": self.namespace, "name": tcp}}),
        )
    }

    /// A name of the original tenant, renamed: the tenant's own name, or one it starts
    /// (`<name>-ca`), takes the new name.
    fn renamed(&self, from: &str, name: &str) -> String {
        if name == from {
            return self.name.clone();
        }
        match name.strip_prefix(from).filter(|r| r.starts_with('-')) {
            Some(rest) => format!("{}{rest}", self.name),
            None => name.to_string(),
        }
    }

    /// A key of the backup under the target's prefix; `None` for a key outside the backup's.
    pub fn key(&self, m: &BackupManifest, key: &[u8]) -> Option<Vec<u8>> {
        let rest = key.strip_prefix(m.prefix.as_bytes())?;
        let mut out = self.prefix(m).into_bytes();
        out.extend_from_slice(rest);
        Some(out)
    }

    /// An object of the backup as it is created: in the target's namespace, renamed, pointing
    /// at the renamed objects it points at, naming the target DataStore, and annotated with
    /// the backup it came from.
    pub fn object(&self, m: &BackupManifest, obj: &Value) -> Value {
        let from = m.tenant.name.as_str();
        let mut out = carried(&woken(obj));
        let meta = &mut out["metadata"];
        meta["namespace"] = json!(self.namespace);
        if let Some(n) = meta["name"].as_str() {
            meta["name"] = json!(self.renamed(from, n));
        }
        if let Some(labels) = meta["labels"].as_object_mut() {
            for key in [crate::labels::CLUSTER_NAME_LABEL, "kamaji.clastix.io/name"] {
                if let Some(v) = labels.get(key).and_then(Value::as_str) {
                    let v = self.renamed(from, v);
                    labels.insert(key.into(), json!(v));
                }
            }
        }
        let mut annotations = meta["annotations"].as_object().cloned().unwrap_or_default();
        annotations.insert(RESTORED_FROM.into(), json!(restored_from(m)));
        meta["annotations"] = Value::Object(annotations);
        for r in ["controlPlaneRef", "infrastructureRef"] {
            // `get_mut`, not indexing: indexing a missing key would add it as null.
            let Some(reference) = out
                .get_mut("spec")
                .and_then(|s| s.get_mut(r))
                .and_then(Value::as_object_mut)
            else {
                continue;
            };
            if let Some(n) = reference.get("name").and_then(Value::as_str) {
                let renamed = self.renamed(from, n);
                reference.insert("name".into(), json!(renamed));
                if reference.contains_key("namespace") {
                    reference.insert("namespace".into(), json!(self.namespace));
                }
            }
        }
        match out["kind"].as_str() {
            Some("KamajiControlPlane") => out["spec"]["dataStoreName"] = json!(self.data_store),
            Some("TenantControlPlane") => out["spec"]["dataStore"] = json!(self.data_store),
            _ => {}
        }
        out
    }
}

/// The value of [`RESTORED_FROM`] for a backup: its checksum's first 16 hex digits.
pub fn restored_from(m: &BackupManifest) -> String {
    m.sha256.chars().take(16).collect()
}

/// The order objects are created in: the identity Secrets first (Kamaji adopts them), then the
/// infrastructure cluster and the control plane, the Cluster last, so that when CAPI sees it
/// everything it points at exists.
pub fn restore_rank(obj: &Value) -> u8 {
    match obj["kind"].as_str() {
        Some("Secret") => 0,
        Some("KamajiControlPlane" | "TenantControlPlane") => 2,
        Some("Cluster") => 3,
        _ => 1,
    }
}

/// The summary lines of a manifest, for `restore --dry-run` and the backup's closing lines.
pub fn describe(m: &BackupManifest) -> Vec<String> {
    let mut kinds: BTreeMap<&str, usize> = BTreeMap::new();
    for o in &m.objects {
        let kind = o.split('/').next().unwrap_or("?");
        *kinds.entry(kind).or_default() += 1;
    }
    let objects: Vec<String> = kinds.iter().map(|(k, n)| format!("{n} {k}")).collect();
    vec![
        format!(
            "{} {}/{} (Kubernetes {}), DataStore {}, prefix {} at revision {}",
            m.tenant.kind,
            m.tenant.namespace,
            m.tenant.name,
            m.kubernetes_version,
            m.data_store,
            m.prefix,
            m.revision
        ),
        format!(
            "{} keys ({} bytes), objects: {}; taken {} by {}",
            m.keys,
            m.key_bytes,
            objects.join(", "),
            m.created,
            m.created_by
        ),
    ]
}

#[cfg(test)]
mod tests;
