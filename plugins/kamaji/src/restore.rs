//! `kubectl kamaji restore FILE [--new-name NAME] [--datastore D] [-n NS]`: a tenant back from
//! what `kubectl kamaji backup` wrote, into this management cluster or another one.
//!
//! parse → read the whole file once (every line checked, the counts and the checksum against
//! its manifest; nothing is written from a file that is not whole) → preflight (the namespace,
//! the kinds served, the names free, the DataStore answers and holds nothing under the target
//! prefix) → write the keys (a second read of the file) → apply the objects, identity Secrets
//! first and the Cluster last → wait until the tenant answers → verify (its key count, its
//! `/version`, the `kube-system` Namespace the backup read). Every object carries the backup's
//! checksum (`capi-kamaji.io/restored-from`), so a re-run of a restore that stopped after its
//! keys finishes the job instead of refusing.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Args as ClapArgs;
use cli::{Conn, DryRunFlag, KubeFlags, parse_duration};
use k8s_openapi::api::core::v1::Namespace;
use kclient::backup_file::BackupReader;
use kclient::discovery::ServerApis;
use kclient::error::Error;
use kclient::render::{self, Poll};
use kcore::kamaji::backup::{
    self as plan, BackupManifest, Item, RESTORED_FROM, Reader, RestoreTarget,
};
use kube::api::Api;
use serde_json::Value;

use crate::common::control_plane::{self, ControlPlane};
use crate::common::datastores::{datastores, dial};
use crate::common::tenant_kubeconfig::tenant_admin;
use crate::common::tenant_status::tcp_phase;
use crate::common::writes;

/// The most objects a backup may carry (it writes a handful).
const MAX_OBJECTS: usize = 64;

#[derive(ClapArgs, Clone, Debug)]
#[command(
    after_help = "The whole file is checked before anything is written: a file cut short or changed after it was written is refused, naming the file. The restore is refused, with nothing written, when an object of the tenant already exists or the DataStore already holds keys under the tenant's prefix. A restore that stopped after writing the keys is finished by running it again.

Examples:
  kubectl kamaji restore prod.kamaji-backup
  kubectl kamaji restore prod.kamaji-backup -n team-b --new-name prod-copy --datastore dedicated
  kubectl kamaji restore prod.kamaji-backup --dry-run=client"
)]
#[command(mut_arg("dry-run", |a| a.help("client: check the file and the preflight, say what would be restored, change nothing")))]
pub struct Args {
    /// The file kubectl kamaji backup wrote
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Restore under another name (the backup's by default)
    #[arg(long, value_name = "NAME")]
    pub new_name: Option<String>,
    /// The DataStore to write the keys to and to name in the control plane (the backup's by default)
    #[arg(long, value_name = "DATASTORE")]
    pub datastore: Option<String>,
    /// How long to wait for the restored tenant to answer
    #[arg(long, value_parser = parse_duration, default_value = "10m", value_name = "DURATION")]
    pub timeout: Duration,
    #[command(flatten)]
    pub dry_run: DryRunFlag,
    #[command(flatten)]
    pub kube: KubeFlags,
}

pub async fn run(args: &Args) -> Result<(), Error> {
    if let Some(n) = &args.new_name {
        kcore::names::check_object_name("--new-name", n)?;
    }
    if let Some(d) = &args.datastore {
        kcore::names::check_object_name("DataStore", d)?;
    }
    if args.dry_run.mode == cli::DryRun::Server {
        return Err(Error::Usage {
            message: "restore --dry-run=server: keys cannot be written to a DataStore in a dry run"
                .into(),
            hint: Some("use --dry-run=client to check the file and the preflight".into()),
        });
    }
    let (manifest, objects) = verify(&args.file)?;
    let target = RestoreTarget::of(
        &manifest,
        args.kube.namespace.as_deref(),
        args.new_name.as_deref(),
        args.datastore.as_deref(),
    );
    let conn = args.kube.connect().await?;
    let apis = ServerApis::discover(&conn).await?;
    let mut objects: Vec<Value> = objects
        .iter()
        .map(|o| target.object(&manifest, o))
        .collect();
    objects.sort_by_key(plan::restore_rank);
    let pre = preflight(&conn, &apis, &manifest, &target, &objects).await?;
    let prefix = target.prefix(&manifest);
    for line in plan::describe(&manifest) {
        render::line(&line);
    }
    if args.dry_run.is_dry() {
        render::line(&format!(
            "would restore {} as {}/{} on DataStore {} under {prefix} (dry run)",
            manifest.tenant.name, target.namespace, target.name, target.data_store
        ));
        return Ok(());
    }
    let started = Instant::now();
    if pre.resuming {
        render::info(&format!(
            "{}/{} was restored from this file up to its objects: finishing",
            target.namespace, target.name
        ));
    } else {
        let written = write_keys(&args.file, &manifest, &target, &pre.etcd).await?;
        render::info(&format!(
            "{written} keys written to DataStore {} under {prefix}",
            target.data_store
        ));
    }
    for o in &objects {
        writes::apply(&conn, &apis, o, false, true).await?;
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
    let version = wait_answers(&conn, &apis, &target, &manifest, args.timeout).await?;
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
    render::line(&format!(
        "{}/{} restored: {} answers with Kubernetes {version}, {keys} keys under {prefix}{} ({}s)",
        target.namespace,
        target.name,
        target.name,
        if manifest.witness.is_some() {
            ", its kube-system Namespace is the one backed up"
        } else {
            ""
        },
        started.elapsed().as_secs()
    ));
    Ok(())
}

/// Reads the whole file: every line checked, the manifest matched. Returns the manifest and the
/// objects (the keys are read again when written).
fn verify(path: &std::path::Path) -> Result<(BackupManifest, Vec<Value>), Error> {
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
struct Preflight {
    etcd: kclient::etcd::Etcd,
    resuming: bool,
}

async fn preflight(
    conn: &Conn,
    apis: &ServerApis,
    m: &BackupManifest,
    target: &RestoreTarget,
    objects: &[Value],
) -> Result<Preflight, Error> {
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
    Ok(Preflight { etcd, resuming })
}

/// Writes the backup's keys under the target's prefix (a second read of the file, checked as
/// the first was); returns how many.
async fn write_keys(
    path: &std::path::Path,
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
