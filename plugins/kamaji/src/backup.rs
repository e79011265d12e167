//! `kubectl kamaji backup CONTROL_PLANE [-o FILE]`: one tenant's data and what brings it back,
//! in one file (`kcore::kamaji::backup` says what the file holds and why).
//!
//! parse → read (the control plane, its Cluster and infrastructure cluster, the identity
//! Secrets, the DataStore dialled from here) → write (the keys page by page at one revision,
//! the objects, the manifest; gzip into a 0600 temporary file renamed into place when whole) →
//! say what was written. Nothing on the cluster changes.

use std::path::PathBuf;

use clap::Args as ClapArgs;
use cli::{Conn, KubeFlags};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kclient::backup_file::BackupWriter;
use kclient::discovery::ServerApis;
use kclient::error::Error;
use kclient::render;
use kcore::fields::{self, object_json};
use kcore::kamaji::backup::{self as plan, CARRIED_SECRETS, Head, TenantRef, Writer, carried};
use kcore::kamaji::migrate::{DataStore, etcd_prefix};
use kcore::labels::CLUSTER_NAME_LABEL;
use kube::api::{Api, ApiResource};
use serde_json::Value;

use crate::common::control_plane::{self, ControlPlane};
use crate::common::datastores::{datastores, dial};
use crate::common::tenant_kubeconfig::tenant_admin;

#[derive(ClapArgs, Clone, Debug)]
#[command(
    after_help = "The file holds the tenant's keys read from its etcd DataStore at one revision, the KamajiControlPlane with its Cluster and infrastructure cluster (or the standalone TenantControlPlane), and the tenant's CA, front-proxy CA and ServiceAccount key Secrets; it is written with mode 0600 and appears only when complete. Workers (MachineDeployments, Machines) are not carried. kubectl kamaji restore FILE brings the tenant back, here or on another management cluster.

Examples:
  kubectl kamaji backup prod -n team-a -o prod.kamaji-backup
  kubectl kamaji restore prod.kamaji-backup"
)]
pub struct Args {
    /// The KamajiControlPlane, or a standalone TenantControlPlane
    #[arg(value_name = "CONTROL_PLANE")]
    pub name: String,
    /// The file to write (default: CONTROL_PLANE.kamaji-backup in the current directory)
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub file: Option<PathBuf>,
    #[command(flatten)]
    pub kube: KubeFlags,
}

/// `-o` here names a file: an output format typed out of habit is refused rather than written
/// to a file called `json`.
fn file_of(args: &Args) -> Result<PathBuf, Error> {
    let Some(file) = &args.file else {
        return Ok(PathBuf::from(format!("{}.kamaji-backup", args.name)));
    };
    let text = file.to_string_lossy();
    let format = ["json", "yaml", "wide", "name", "table"].contains(&text.as_ref())
        || text.starts_with("jsonpath");
    if format {
        return Err(Error::Usage {
            message: format!(
                "-o {text}: backup's -o names the file to write, not an output format"
            ),
            hint: Some(format!(
                "pass a file name (-o ./{text} to really call it that)"
            )),
        });
    }
    Ok(file.clone())
}

pub async fn run(args: &Args) -> Result<(), Error> {
    let path = file_of(args)?;
    let conn = args.kube.connect().await?;
    let apis = ServerApis::discover(&conn).await?;
    let cp = control_plane::resolve(&conn, &apis, &args.name).await?;
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
    let store = datastore_of(&conn, &apis, &cp, &tcp).await?;
    let etcd = dial(&conn, &store, &cp.name).await?;
    let objects = objects(&conn, &apis, &cp).await?;
    let witness = witness(&conn, &cp).await;
    let prefix = etcd_prefix(&tcp);

    let mut out = BackupWriter::create(&path)?;
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
    for o in &objects {
        out.write(&lines.object(o)?)?;
    }
    let head = Head {
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
        kubernetes_version: tcp["spec"]["kubernetes"]["version"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        data_store: store.name.clone(),
        prefix,
        revision,
        witness,
        created: jiff::Timestamp::now().to_string(),
        created_by: format!("kubectl-kamaji {}", env!("CARGO_PKG_VERSION")),
    };
    let (last, manifest) = lines.finish(head)?;
    if manifest.keys == 0 {
        return Err(Error::Other {
            message: format!(
                "DataStore {} holds no key under {}: {} has no data to back up",
                store.name, manifest.prefix, cp.name
            ),
            hint: Some(format!(
                "kubectl kamaji status {} shows where it stands",
                cp.name
            )),
        });
    }
    out.write(&last)?;
    out.commit()?;
    for line in plan::describe(&manifest) {
        render::line(&line);
    }
    render::line(&format!(
        "backup of {} written to {}",
        cp.name,
        path.display()
    ));
    Ok(())
}

/// The etcd DataStore the tenant's data is on.
async fn datastore_of(
    conn: &Conn,
    apis: &ServerApis,
    cp: &ControlPlane,
    tcp: &Value,
) -> Result<DataStore, Error> {
    let name = fields::at(tcp, &["status", "storage", "dataStoreName"])
        .or_else(|| fields::at(tcp, &["spec", "dataStore"]))
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .unwrap_or("default")
        .to_string();
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
async fn witness(conn: &Conn, cp: &ControlPlane) -> Option<String> {
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
