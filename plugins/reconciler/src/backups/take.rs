//! One run of a TenantBackup: the tenant's objects and DataStore read, its keys read page by page
//! at one revision (`ketcd`) into the file's lines (`kcore::kamaji::backup::Writer`, the format
//! `kubectl kamaji restore` reads), gzip-compressed into the target as they come, so memory is
//! one page and one upload part whatever the tenant's size; then the oldest files past the
//! retention are removed.

use std::io::Write as _;

use flate2::Compression;
use flate2::write::GzEncoder;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Secret;
use kcore::fields::{self, object_json};
use kcore::groups::{CAPI_GROUP, CONTROLPLANE_GROUP, KAMAJI_GROUP};
use kcore::kamaji::backup::{CARRIED_SECRETS, Head, PAGE, TenantRef, Writer, carried};
use kcore::kamaji::migrate::{DataStore, Reach, data_store_of, etcd_prefix};
use kcore::ops::backup::{
    BackupRecord, DEFAULT_RETENTION, TenantBackup, file_name, folder, to_prune,
};
use kube::api::{Api, ApiResource, DynamicObject};
use kube::{Client, ResourceExt};
use serde_json::Value;

use super::Volumes;
use super::destination::{Destination, Sink};
use crate::Error;

/// Compressed bytes handed to the target at a time.
const CHUNK: usize = 256 << 10;

/// A run's outcome.
pub struct Taken {
    pub record: BackupRecord,
    /// Older backups removed past the retention.
    pub pruned: usize,
}

fn other(e: impl std::fmt::Display) -> Error {
    Error::Other(e.to_string())
}

/// Takes the backup scheduled at `scheduled`.
pub async fn take(
    client: &Client,
    tb: &TenantBackup,
    volumes: &Volumes,
    scheduled: Timestamp,
) -> Result<Taken, Error> {
    let ns = tb.namespace().unwrap_or_default();
    let tenant = tb.spec.tenant.as_str();
    kcore::names::check_object_name("tenant", tenant).map_err(other)?;
    let source = Source::read(client, &ns, tenant).await?;
    let store = datastore(client, &source.tcp, tenant).await?;
    let creds = ketcd::credentials(client, &store)
        .await
        .map_err(other)?
        .ok_or_else(|| {
            Error::Other(format!(
                "DataStore {} has no tlsConfig to dial it with",
                store.name
            ))
        })?;
    let etcd = ketcd::dial(&store.endpoints, &creds).await.map_err(|r| {
        let why = match r {
            Reach::Failed(e) | Reach::NotFromHere(e) => e,
            _ => "it does not answer".into(),
        };
        Error::Other(format!(
            "DataStore {} cannot be read from the reconciler: {why}",
            store.name
        ))
    })?;
    let target = Destination::open(client, &ns, &tb.spec.target, volumes).await?;
    let dir = folder(
        tb.spec.target.s3.as_ref().and_then(|s| s.prefix.as_deref()),
        &ns,
        tenant,
    );
    let key = format!("{dir}{}", file_name(tenant, scheduled));
    let mut sink = target.upload(&key).await?;
    let written = match write(&etcd, &source, &store, &mut sink).await {
        Ok(w) => w,
        Err(e) => {
            sink.abort().await;
            return Err(e);
        }
    };
    let bytes = sink.finish().await?;
    let keep = tb.spec.retention.unwrap_or(DEFAULT_RETENTION);
    let names = target.list(&dir).await?;
    let gone = to_prune(tenant, &names, keep);
    for n in &gone {
        target.delete(&format!("{dir}{n}")).await?;
    }
    Ok(Taken {
        record: BackupRecord {
            location: target.location(&key),
            keys: i64::try_from(written.keys).unwrap_or(i64::MAX),
            objects: i64::try_from(written.objects).unwrap_or(i64::MAX),
            bytes: i64::try_from(bytes).unwrap_or(i64::MAX),
            revision: written.revision,
        },
        pruned: gone.len(),
    })
}

/// What the lines held.
struct Written {
    keys: u64,
    objects: u64,
    revision: i64,
}

/// Writes the file's lines into `sink`: keys, objects, the manifest.
async fn write(
    etcd: &ketcd::Etcd,
    source: &Source,
    store: &DataStore,
    sink: &mut Sink<'_>,
) -> Result<Written, Error> {
    let prefix = etcd_prefix(&source.tcp);
    let mut gz = GzEncoder::new(Vec::with_capacity(CHUNK), Compression::default());
    let mut lines = Writer::new();
    let mut from = prefix.as_bytes().to_vec();
    let mut revision = 0;
    loop {
        let page = etcd
            .range_page(&prefix, &from, revision, PAGE)
            .await
            .map_err(other)?;
        revision = page.revision;
        for (k, v) in &page.kvs {
            gz.write_all(&lines.key(k, v).map_err(other)?)
                .map_err(other)?;
        }
        if gz.get_ref().len() >= CHUNK {
            sink.write(&std::mem::take(gz.get_mut())).await?;
        }
        match page.kvs.last() {
            Some((k, _)) if page.more => {
                from = k.clone();
                from.push(0);
            }
            _ => break,
        }
    }
    for o in &source.objects {
        gz.write_all(&lines.object(o).map_err(other)?)
            .map_err(other)?;
    }
    let (last, manifest) = lines.finish(source.head(store, revision)).map_err(other)?;
    if manifest.keys == 0 {
        return Err(Error::Other(format!(
            "DataStore {} holds no key under {}: the tenant has no data to back up",
            store.name, manifest.prefix
        )));
    }
    gz.write_all(&last).map_err(other)?;
    let rest = gz.finish().map_err(other)?;
    sink.write(&rest).await?;
    Ok(Written {
        keys: manifest.keys,
        objects: u64::try_from(manifest.objects.len()).unwrap_or(u64::MAX),
        revision,
    })
}

/// The newest served version of `group`'s `kind`, if served.
async fn kind(client: &Client, group: &str, kind: &str) -> Result<Option<ApiResource>, Error> {
    match kube::discovery::group(client, group).await {
        Ok(g) => Ok(g.recommended_kind(kind).map(|(ar, _)| ar)),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(None),
        Err(e) => Err(e.into()),
    }
}

async fn get(
    client: &Client,
    ar: &ApiResource,
    ns: &str,
    name: &str,
) -> Result<Option<Value>, Error> {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, ar);
    Ok(api
        .get_opt(name)
        .await?
        .map(|o| with_type(object_json(&o), ar)))
}

/// `apiVersion` and `kind` set (a dynamic get may leave them out).
fn with_type(mut v: Value, ar: &ApiResource) -> Value {
    if !v["apiVersion"].is_string() {
        v["apiVersion"] = Value::from(ar.api_version.clone());
    }
    if !v["kind"].is_string() {
        v["kind"] = Value::from(ar.kind.clone());
    }
    v
}

/// The tenant as the file carries it: its TenantControlPlane, and the objects that bring it
/// back (what `kubectl kamaji backup` carries: the CA Secrets, the KamajiControlPlane, its
/// Cluster and infrastructure cluster, or the standalone TenantControlPlane).
struct Source {
    tenant: TenantRef,
    tcp: Value,
    objects: Vec<Value>,
}

impl Source {
    async fn read(client: &Client, ns: &str, name: &str) -> Result<Source, Error> {
        let tcp_ar = kind(client, KAMAJI_GROUP, "TenantControlPlane")
            .await?
            .ok_or_else(|| Error::Other("Kamaji's TenantControlPlane API is not served".into()))?;
        let kcp = match kind(client, CONTROLPLANE_GROUP, "KamajiControlPlane").await? {
            Some(ar) => get(client, &ar, ns, name).await?,
            None => None,
        };
        // The reconciler names a KamajiControlPlane's TenantControlPlane after it.
        let tcp = get(client, &tcp_ar, ns, name).await?.ok_or_else(|| {
            Error::Other(format!(
                "{ns}/{name} has no TenantControlPlane{}: there is nothing to back up",
                if kcp.is_some() { " yet" } else { "" }
            ))
        })?;
        let mut objects = Vec::new();
        let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
        for suffix in CARRIED_SECRETS {
            if let Some(s) = secrets.get_opt(&format!("{name}-{suffix}")).await? {
                let mut v = serde_json::to_value(&s).map_err(other)?;
                v["apiVersion"] = "v1".into();
                v["kind"] = "Secret".into();
                objects.push(carried(&v));
            }
        }
        let kind_name = match &kcp {
            None => {
                objects.push(carried(&tcp));
                "TenantControlPlane"
            }
            Some(kcp) => {
                if let Some(cluster) = owning_cluster(client, ns, kcp).await? {
                    if let Some(r) = fields::cluster_infrastructure_ref(&cluster)
                        && let Some(ar) = kind(client, &r.api_group, &r.kind).await?
                        && let Some(infra) = get(client, &ar, ns, &r.name).await?
                    {
                        objects.push(carried(&infra));
                    }
                    objects.push(carried(kcp));
                    objects.push(carried(&cluster));
                } else {
                    objects.push(carried(kcp));
                }
                "KamajiControlPlane"
            }
        };
        Ok(Source {
            tenant: TenantRef {
                kind: kind_name.into(),
                namespace: ns.into(),
                name: name.into(),
            },
            tcp,
            objects,
        })
    }

    fn head(&self, store: &DataStore, revision: i64) -> Head {
        Head {
            tenant: self.tenant.clone(),
            tenant_control_plane: self.tenant.name.clone(),
            kubernetes_version: self.tcp["spec"]["kubernetes"]["version"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            data_store: store.name.clone(),
            prefix: etcd_prefix(&self.tcp),
            revision,
            // The tenant's API server is not read from the reconciler: a restore checks the key
            // count and that the tenant answers.
            witness: None,
            created: Timestamp::now().to_string(),
            created_by: format!("kamaji-reconciler {}", env!("CARGO_PKG_VERSION")),
        }
    }
}

/// The Cluster that owns the KamajiControlPlane, if any.
async fn owning_cluster(client: &Client, ns: &str, kcp: &Value) -> Result<Option<Value>, Error> {
    let Some(name) = kcp["metadata"]["ownerReferences"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|o| {
            o["kind"] == "Cluster"
                && o["apiVersion"]
                    .as_str()
                    .is_some_and(|a| kcore::groups::in_group(a, CAPI_GROUP))
        })
        .and_then(|o| o["name"].as_str())
    else {
        return Ok(None);
    };
    match kind(client, CAPI_GROUP, "Cluster").await? {
        Some(ar) => get(client, &ar, ns, name).await,
        None => Ok(None),
    }
}

/// The etcd DataStore the tenant's data is on.
async fn datastore(client: &Client, tcp: &Value, tenant: &str) -> Result<DataStore, Error> {
    let name = data_store_of(tcp);
    let ar = kind(client, KAMAJI_GROUP, "DataStore")
        .await?
        .ok_or_else(|| Error::Other("Kamaji's DataStore API is not served".into()))?;
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    let d = api
        .get_opt(&name)
        .await?
        .ok_or_else(|| Error::Other(format!("{tenant}'s DataStore {name} does not exist")))?;
    let store = DataStore::of(&object_json(&d));
    if !store.is_etcd() {
        return Err(Error::Other(format!(
            "{tenant}'s data is on DataStore {name} ({}): scheduled backups read etcd DataStores only",
            store.driver
        )));
    }
    Ok(store)
}
