//! One tenant's backup taken and restored: what `backup`, `restore` and `move` share. The file's
//! format and the renaming are `kcore::kamaji::backup`'s; the file's I/O is
//! `kclient::backup_file`'s; this reads the cluster and the DataStore, writes them back, and waits.

use std::path::Path;
use std::time::{Duration, Instant};

use cli::Conn;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kclient::backup_file::{BackupReader, BackupWriter};
use kclient::discovery::ServerApis;
use kclient::error::Error;
use kclient::render::{self, Poll};
use kcore::fields::{self, object_json};
use kcore::kamaji::backup::{
    self as plan, BackupManifest, CARRIED_SECRETS, Head, Item, RESTORED_FROM, Reader,
    RestoreTarget, TenantRef, Writer, carried,
};
use kcore::kamaji::migrate::{DataStore, data_store_of, etcd_prefix};
use kcore::labels::CLUSTER_NAME_LABEL;
use kube::api::{Api, ApiResource};
use serde_json::Value;

use super::control_plane::{self, ControlPlane};
use super::datastores::{datastores, dial};
use super::tenant_kubeconfig::tenant_admin;
use super::tenant_status::tcp_phase;
use super::writes;

/// The most objects a backup may carry (it writes a handful).
const MAX_OBJECTS: usize = 64;

/// What a backup of `cp` reads before its keys: the TenantControlPlane, its DataStore
/// (dialled), the objects carried and the witness.
struct Source {
    tcp: Value,
    store: DataStore,
    objects: Vec<Value>,
}

impl Source {
    async fn read(conn: &Conn, apis: &ServerApis, cp: &ControlPlane) -> Result<Source, Error> {
        let tcp = cp.tcp.clone().ok_or_else(|| Error::Other {
            message: format!(
                "{} has no TenantControlPlane yet: there is nothing to back up",
                cp.name
            ),
            hint: Some(format!(
                "kubectl kamaji status {} shows where it stands",
                cp.name
            )),
        })?;
        let store = datastore_of(conn, apis, cp, &tcp).await?;
        let objects = objects(conn, apis, cp).await?;
        Ok(Source {
            tcp,
            store,
            objects,
        })
    }

    fn head(&self, cp: &ControlPlane, revision: i64, witness: Option<String>) -> Head {
        Head {
            tenant: TenantRef {
                kind: if cp.kcp.is_some() {
                    "KamajiControlPlane"
                } else {
                    "TenantControlPlane"
                }
                .into(),
                namespace: cp.namespace.clone(),
                name: cp.name.clone(),
            },
            tenant_control_plane: cp.tcp_name(),
            kubernetes_version: self.tcp["spec"]["kubernetes"]["version"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            data_store: self.store.name.clone(),
            prefix: etcd_prefix(&self.tcp),
            revision,
            witness,
            created: jiff::Timestamp::now().to_string(),
            created_by: format!("kubectl-kamaji {}", env!("CARGO_PKG_VERSION")),
        }
    }
}

/// What a backup of `cp` would carry, before it is taken: a manifest without keys (and with
/// a checksum no restore wrote) and the objects, for a preflight on the target of a move.
pub async fn provisional(
    conn: &Conn,
    apis: &ServerApis,
    cp: &ControlPlane,
) -> Result<(BackupManifest, Vec<Value>), Error> {
    let src = Source::read(conn, apis, cp).await?;
    let (_, manifest) = Writer::new().finish(src.head(cp, 0, None))?;
    Ok((manifest, src.objects))
}

/// Writes the backup of `cp` to `path` (replaced only when whole); returns its manifest.
/// `witness` is [`read_witness`]'s, read before (a move reads it before the tenant sleeps).
pub async fn write_backup(
    conn: &Conn,
    apis: &ServerApis,
    cp: &ControlPlane,
    path: &Path,
    witness: Option<String>,
) -> Result<BackupManifest, Error> {
    let src = Source::read(conn, apis, cp).await?;
    let etcd = dial(conn, &src.store, &cp.name).await?;
    let prefix = etcd_prefix(&src.tcp);

    let mut out = BackupWriter::create(path)?;
    let mut lines = Writer::new();
    let mut from = prefix.as_bytes().to_vec();
    let mut revision = 0;
    loop {
        let page = etcd
            .range_page(&prefix, &from, revision, plan::PAGE)
            .await?;
        revision = page.revision;
        for (k, v) in &page.kvs {
            out.write(&lines.key(k, v)?)?;
        }
        match page.kvs.last() {
            Some((k, _)) if page.more => {
                from = k.clone();
                from.push(0);
            }
            _ => break,
        }
    }
    for o in &src.objects {
        out.write(&lines.object(o)?)?;
    }
    let (last, manifest) = lines.finish(src.head(cp, revision, witness))?;
    if manifest.keys == 0 {
        return Err(Error::Other {
            message: format!(
                "DataStore {} holds no key under {}: {} has no data to back up",
                src.store.name, manifest.prefix, cp.name
            ),
            hint: Some(format!(
                "kubectl kamaji status {} shows where it stands",
                cp.name
            )),
        });
    }
    out.write(&last)?;
    out.commit()?;
    Ok(manifest)
}

/// The etcd DataStore the tenant's data is on.
async fn datastore_of(
    conn: &Conn,
    apis: &ServerApis,
    cp: &ControlPlane,
    tcp: &Value,
) -> Result<DataStore, Error> {
    let name = data_store_of(tcp);
    let store = datastores(conn, apis)
        .await?
        .into_iter()
        .find(|d| d.name == name)
        .ok_or_else(|| Error::Other {
            message: format!("{}'s DataStore {name} does not exist", cp.name),
            hint: Some("kubectl kamaji datastores lists them".into()),
        })?;
    if !store.is_etcd() {
        return Err(Error::Other {
            message: format!(
                "{}'s data is on DataStore {name} ({}): backup reads etcd DataStores only",
                cp.name, store.driver
            ),
            hint: Some("back the database up with its own tools (pg_dump, mysqldump)".into()),
        });
    }
    Ok(store)
}

/// What brings the tenant back besides its keys, as the file carries them.
async fn objects(conn: &Conn, apis: &ServerApis, cp: &ControlPlane) -> Result<Vec<Value>, Error> {
    let secret_ar = ApiResource::erase::<Secret>(&());
    let mut out = Vec::new();
    let tcp_name = cp.tcp_name();
    for suffix in CARRIED_SECRETS {
        let name = format!("{tcp_name}-{suffix}");
        match kclient::api::get_opt(conn, &secret_ar, Some(&cp.namespace), &name).await? {
            Some(s) => out.push(carried(&with_type(object_json(&s), "v1", "Secret"))),
            None => render::warn(&format!(
                "Secret {}/{name} does not exist: Kamaji issues a new one on restore",
                cp.namespace
            )),
        }
    }
    let Some(kcp) = &cp.kcp else {
        if let Some(tcp) = &cp.tcp {
            out.push(carried(tcp));
        }
        return Ok(out);
    };
    if let Some(cluster) = control_plane::owning_cluster(conn, apis, cp).await? {
        if let Some(r) = fields::cluster_infrastructure_ref(&cluster) {
            let ar = apis.resolve_ref(&r)?;
            if let Some(infra) =
                kclient::api::get_opt(conn, &ar, Some(&cp.namespace), &r.name).await?
            {
                out.push(carried(&with_type(
                    object_json(&infra),
                    &ar.api_version,
                    &ar.kind,
                )));
            }
        }
        out.push(carried(kcp));
        let name = cluster["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        out.push(carried(&cluster));
        let workers = match apis.capi_kind("MachineDeployment") {
            Ok(ar) => kclient::api::list(
                conn,
                &ar,
                Some(&cp.namespace),
                Some(&format!("{CLUSTER_NAME_LABEL}={name}")),
            )
            .await?
            .len(),
            Err(_) => 0,
        };
        if workers > 0 {
            render::warn(&format!(
                "Cluster {name}'s {workers} MachineDeployment(s) are not carried: recreate its workers after a restore (kubectl kamaji scale)"
            ));
        }
    } else {
        out.push(carried(kcp));
    }
    Ok(out)
}

/// `apiVersion` and `kind` set (a typed get leaves them out of some answers).
fn with_type(mut v: Value, api_version: &str, kind: &str) -> Value {
    if !v["apiVersion"].is_string() {
        v["apiVersion"] = Value::from(api_version);
    }
    if !v["kind"].is_string() {
        v["kind"] = Value::from(kind);
    }
    v
}

/// The tenant's `kube-system` Namespace uid, read through its API server; `None` (said on
/// stderr) when it cannot be reached from here.
pub async fn read_witness(conn: &Conn, cp: &ControlPlane) -> Option<String> {
    let read = async {
        let admin = tenant_admin(conn, cp).await?;
        let ns: Api<Namespace> = Api::all(admin.client);
        let got = ns
            .get("kube-system")
            .await
            .map_err(|e| Error::other(e.to_string()))?;
        Ok::<_, Error>(got.metadata.uid)
    };
    match tokio::time::timeout(std::time::Duration::from_secs(10), read).await {
        Ok(Ok(uid)) => uid,
        Ok(Err(e)) => {
            render::warn(&format!(
                "{}'s API server cannot be read from here ({e}): the restore will not check the data against it",
                cp.name
            ));
            None
        }
        Err(_) => {
            render::warn(&format!(
                "{}'s API server did not answer within 10s: the restore will not check the data against it",
                cp.name
            ));
            None
        }
    }
}

/// Reads the whole file: every line checked, the manifest matched. Returns the manifest and the
/// objects (the keys are read again when written).
pub fn verify(path: &Path) -> Result<(BackupManifest, Vec<Value>), Error> {
    let mut file = BackupReader::open(path)?;
    let mut reader = Reader::new();
    let mut objects = Vec::new();
    let mut buf = Vec::new();
    while file.next_line(&mut buf)? {
        match reader
            .line(&buf)
            .map_err(|e| file.corrupt(&e.to_string()))?
        {
            Item::Object(o) if objects.len() < MAX_OBJECTS => objects.push(o),
            Item::Object(_) => {
                return Err(file.corrupt(&format!("it carries more than {MAX_OBJECTS} objects")));
            }
            Item::Key(..) | Item::Manifest => {}
        }
    }
    let manifest = reader.finish().map_err(|e| file.corrupt(&e.to_string()))?;
    Ok((manifest, objects))
}

/// What the preflight found: the target DataStore, dialled, and whether this is a re-run.
pub struct RestorePreflight {
    pub etcd: kclient::etcd::Etcd,
    pub resuming: bool,
}

pub async fn preflight(
    conn: &Conn,
    apis: &ServerApis,
    m: &BackupManifest,
    target: &RestoreTarget,
    objects: &[Value],
) -> Result<RestorePreflight, Error> {
    let namespaces: Api<Namespace> = Api::all(conn.client.clone());
    match namespaces.get_opt(&target.namespace).await {
        Ok(Some(ns)) if ns.metadata.deletion_timestamp.is_some() => {
            return Err(Error::Other {
                message: format!("namespace {} is being deleted", target.namespace),
                hint: Some("wait until it is gone, create it again, then restore".into()),
            });
        }
        Ok(Some(_)) => {}
        Ok(None) => {
            return Err(Error::Other {
                message: format!("namespace {} does not exist", target.namespace),
                hint: Some(format!("kubectl create namespace {}", target.namespace)),
            });
        }
        Err(e) => {
            return Err(conn.error(
                e,
                &kclient::error::Op::new("get", "", "namespaces", "Namespace"),
            ));
        }
    }
    // Each kind at the version the backup carries is served here, and each name is free (or
    // holds what an earlier run of this same restore created).
    let ours = plan::restored_from(m);
    let mut existing = 0;
    for o in objects {
        let ar = writes::served(apis, o)?;
        let name = o["metadata"]["name"].as_str().unwrap_or_default();
        if let Some(found) = kclient::api::get_opt(conn, &ar, Some(&target.namespace), name).await?
        {
            let mark = found
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(RESTORED_FROM));
            if mark.map(String::as_str) != Some(ours.as_str()) {
                return Err(Error::Other {
                    message: format!(
                        "{} {}/{name} already exists: the restore would overwrite it",
                        ar.kind, target.namespace
                    ),
                    hint: Some(
                        "restore with --new-name NAME (or -n NAMESPACE), or delete it first".into(),
                    ),
                });
            }
            existing += 1;
        }
    }
    let store = datastores(conn, apis)
        .await?
        .into_iter()
        .find(|d| d.name == target.data_store)
        .ok_or_else(|| Error::Other {
            message: format!("DataStore {} does not exist here", target.data_store),
            hint: Some(
                "create it, or pick one with --datastore (kubectl kamaji datastores lists them)"
                    .into(),
            ),
        })?;
    if !store.is_etcd() {
        return Err(Error::Other {
            message: format!(
                "DataStore {} uses the {} driver: a backup's keys go to an etcd DataStore",
                store.name, store.driver
            ),
            hint: Some("pick an etcd DataStore with --datastore".into()),
        });
    }
    let etcd = dial(conn, &store, &target.name).await?;
    let prefix = target.prefix(m);
    let held = etcd.count(&prefix).await?;
    let resuming = existing > 0;
    if held > 0 && !resuming {
        return Err(Error::Other {
            message: format!(
                "DataStore {} already holds {held} keys under {prefix}: the restore would mix them with the backup's",
                store.name
            ),
            hint: Some("restore with --new-name or --datastore; keys no tenant owns are removed with kubectl kamaji datastores --orphans --prune".into()),
        });
    }
    Ok(RestorePreflight { etcd, resuming })
}

/// Writes the backup's keys under the target's prefix (a second read of the file, checked as
/// the first was); returns how many.
async fn write_keys(
    path: &Path,
    m: &BackupManifest,
    target: &RestoreTarget,
    etcd: &kclient::etcd::Etcd,
) -> Result<u64, Error> {
    let mut file = BackupReader::open(path)?;
    let mut reader = Reader::new();
    let mut buf = Vec::new();
    let mut written = 0u64;
    while file.next_line(&mut buf)? {
        if let Item::Key(k, v) = reader
            .line(&buf)
            .map_err(|e| file.corrupt(&e.to_string()))?
        {
            let key = target.key(m, &k).ok_or_else(|| {
                file.corrupt(&format!(
                    "a key lies outside the tenant's prefix {}",
                    m.prefix
                ))
            })?;
            etcd.put(&key, &v).await?;
            written = written.saturating_add(1);
        }
    }
    let again = reader.finish().map_err(|e| file.corrupt(&e.to_string()))?;
    if again.sha256 != m.sha256 {
        return Err(file.corrupt("it changed while it was being restored"));
    }
    Ok(written)
}

/// Waits until the restored TenantControlPlane is Ready and its API server answers; checks
/// the witness. Returns the version the tenant reports.
async fn wait_answers(
    conn: &Conn,
    apis: &ServerApis,
    target: &RestoreTarget,
    m: &BackupManifest,
    timeout: Duration,
) -> Result<String, Error> {
    let name = target.name.clone();
    let scoped = Conn {
        namespace: target.namespace.clone(),
        namespace_explicit: true,
        ..conn.clone()
    };
    render::wait_until(
        &format!("{}/{} to answer", target.namespace, name),
        timeout,
        Duration::from_secs(2),
        || {
            let (scoped, name) = (&scoped, &name);
            async move {
                let cp = control_plane::resolve(scoped, apis, name).await?;
                let Some(tcp) = cp.tcp.as_ref() else {
                    return Ok(Poll::Pending(format!("{name}: waiting for its TenantControlPlane")));
                };
                let phase = tcp_phase(tcp).unwrap_or_default();
                if phase != "Ready" {
                    return Ok(Poll::Pending(format!("{name}: TenantControlPlane {}", if phase.is_empty() { "provisioning" } else { &phase })));
                }
                match answers(scoped, &cp).await {
                    Ok((version, uid)) => match (&m.witness, uid) {
                        (Some(want), Some(got)) if *want != got => Err(Error::Other {
                            message: format!(
                                "{name} answers, but its kube-system Namespace is {got}, not the backup's {want}: it does not serve the restored data"
                            ),
                            hint: Some("check the TenantControlPlane's DataStore and --etcd-prefix (kubectl kamaji status)".into()),
                        }),
                        _ => Ok(Poll::Ready(version)),
                    },
                    Err(e) => Ok(Poll::Pending(format!("{name}: Ready, its API server does not answer yet ({e})"))),
                }
            }
        },
    )
    .await
}

/// The tenant's `/version` and its `kube-system` Namespace uid, through its admin kubeconfig.
async fn answers(conn: &Conn, cp: &ControlPlane) -> Result<(String, Option<String>), Error> {
    let admin = tenant_admin(conn, cp).await?;
    let version = admin
        .client
        .apiserver_version()
        .await
        .map_err(|e| Error::other(e.to_string()))?;
    let ns: Api<Namespace> = Api::all(admin.client);
    let uid = ns
        .get("kube-system")
        .await
        .map_err(|e| Error::other(e.to_string()))?
        .metadata
        .uid;
    Ok((version.git_version, uid))
}

/// The backup's objects as a restore to `target` creates them, in the order it does.
pub fn targeted(m: &BackupManifest, objects: &[Value], target: &RestoreTarget) -> Vec<Value> {
    let mut out: Vec<Value> = objects.iter().map(|o| target.object(m, o)).collect();
    out.sort_by_key(plan::restore_rank);
    out
}

/// What a restore proved: the version the tenant answers with, the keys under its prefix.
pub struct Restored {
    pub version: String,
    pub keys: u64,
    pub prefix: String,
    pub secs: u64,
}

impl Restored {
    /// The closing line.
    pub fn line(&self, target: &RestoreTarget, m: &BackupManifest) -> String {
        format!(
            "{}/{} restored: {} answers with Kubernetes {}, {} keys under {}{} ({}s)",
            target.namespace,
            target.name,
            target.name,
            self.version,
            self.keys,
            self.prefix,
            if m.witness.is_some() {
                ", its kube-system Namespace is the one backed up"
            } else {
                ""
            },
            self.secs
        )
    }
}

/// After the preflight: the keys (unless a re-run found them written), the objects, the wait
/// until the tenant answers, and the key count.
#[allow(clippy::too_many_arguments)]
pub async fn restore(
    conn: &Conn,
    apis: &ServerApis,
    path: &Path,
    manifest: &BackupManifest,
    objects: &[Value],
    target: &RestoreTarget,
    pre: &RestorePreflight,
    timeout: Duration,
) -> Result<Restored, Error> {
    let prefix = target.prefix(manifest);
    let started = Instant::now();
    if pre.resuming {
        render::info(&format!(
            "{}/{} was restored from this file up to its objects: finishing",
            target.namespace, target.name
        ));
    } else {
        let written = write_keys(path, manifest, target, &pre.etcd).await?;
        render::info(&format!(
            "{written} keys written to DataStore {} under {prefix}",
            target.data_store
        ));
    }
    for o in objects {
        writes::apply(conn, apis, o, false, true).await?;
    }
    render::info(&format!(
        "{} objects applied: {}",
        objects.len(),
        objects
            .iter()
            .map(plan::object_label)
            .collect::<Vec<_>>()
            .join(", ")
    ));
    let version = wait_answers(conn, apis, target, manifest, timeout).await?;
    let keys = pre.etcd.count(&prefix).await?;
    if keys < manifest.keys {
        return Err(Error::Other {
            message: format!(
                "DataStore {} holds {keys} keys under {prefix}, fewer than the {} restored",
                target.data_store, manifest.keys
            ),
            hint: Some("something removed keys while the tenant came up: run the restore again after deleting the tenant".into()),
        });
    }
    Ok(Restored {
        version,
        keys,
        prefix,
        secs: started.elapsed().as_secs(),
    })
}
