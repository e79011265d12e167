//! Kamaji's DataStores as `migrate` and `datastores` read them: the objects, the PEM texts their
//! tlsConfig names (inline or in Secrets), and an etcd DataStore dialled from here
//! (`kclient::etcd`).

use base64::Engine;
use cli::Conn;
use kclient::discovery::ServerApis;
use kclient::error::Error;
use kclient::etcd::{self, Etcd, EtcdCredentials};
use kcore::fields::object_json;
use kcore::groups::KAMAJI_GROUP;
use kcore::kamaji::migrate::{Content, DataStore, Reach};

use super::secrets::secret_data;

/// Every DataStore (Kamaji's cluster-scoped kind), as `kcore::kamaji::migrate::DataStore`.
pub async fn datastores(conn: &Conn, apis: &ServerApis) -> Result<Vec<DataStore>, Error> {
    let list = kclient::api::list(conn, &resource(apis)?, None, None).await?;
    Ok(list
        .iter()
        .map(|d| DataStore::of(&object_json(d)))
        .collect())
}

/// Kamaji's DataStore kind at the version the server serves; without Kamaji, one line that
/// says how to install it.
pub fn resource(apis: &ServerApis) -> Result<kube::discovery::ApiResource, Error> {
    let k = apis.kind(KAMAJI_GROUP, "DataStore").ok_or_else(|| {
        apis.not_installed(
            "Kamaji",
            KAMAJI_GROUP,
            "install Kamaji (helm install kamaji clastix/kamaji)",
        )
    })?;
    Ok(k.resource(k.version()))
}

/// One value of a DataStore's tlsConfig, as PEM bytes.
async fn content(conn: &Conn, store: &str, c: &Content) -> Result<Vec<u8>, Error> {
    let b64 = |s: &str| {
        base64::engine::general_purpose::STANDARD
            .decode(s.trim())
            .map_err(|e| {
                Error::other(format!(
                    "DataStore {store}: a tlsConfig content is not base64: {e}"
                ))
            })
    };
    match c {
        Content::Inline(s) => b64(s),
        Content::Secret {
            namespace,
            name,
            key,
        } => {
            let Some((_, data)) = secret_data(conn, namespace, name).await? else {
                return Err(Error::Other {
                    message: format!(
                        "DataStore {store} names Secret {namespace}/{name}, which does not exist"
                    ),
                    hint: Some("fix the DataStore's tlsConfig".into()),
                });
            };
            data.get(key).cloned().ok_or_else(|| Error::Other {
                message: format!("DataStore {store}: Secret {namespace}/{name} has no key {key:?}"),
                hint: Some("fix the DataStore's tlsConfig".into()),
            })
        }
    }
}

/// The PEM texts an etcd DataStore's tlsConfig names (`None` for other drivers).
pub async fn credentials(conn: &Conn, d: &DataStore) -> Result<Option<EtcdCredentials>, Error> {
    let Some(tls) = d.tls.as_ref().filter(|_| d.is_etcd()) else {
        return Ok(None);
    };
    Ok(Some(EtcdCredentials {
        ca: content(conn, &d.name, &tls.ca).await?,
        cert: content(conn, &d.name, &tls.cert).await?,
        key: content(conn, &d.name, &tls.key).await?,
    }))
}

/// What a DataStore says about a tenant's prefix, dialled from here (not an etcd DataStore,
/// or none: `NotChecked`).
pub async fn reach(conn: &Conn, d: Option<&DataStore>, prefix: &str) -> Result<Reach, Error> {
    let Some(d) = d else {
        return Ok(Reach::NotChecked);
    };
    Ok(match credentials(conn, d).await? {
        Some(creds) => etcd::reach(&d.endpoints, &creds, prefix).await,
        None => Reach::NotChecked,
    })
}

/// The DataStore dialled from here with the client certificate it names.
pub async fn dial(conn: &Conn, store: &DataStore, tenant: &str) -> Result<Etcd, Error> {
    let Some(creds) = credentials(conn, store).await? else {
        return Err(Error::Other {
            message: format!("DataStore {} has no tlsConfig to dial it with", store.name),
            hint: Some("give the DataStore its client certificate (spec.tlsConfig)".into()),
        });
    };
    etcd::dial(&store.endpoints, &creds).await.map_err(|r| {
        let why = match r {
            Reach::Failed(e) | Reach::NotFromHere(e) => e,
            _ => "it does not answer".into(),
        };
        Error::Other {
            message: format!("DataStore {} cannot be read from here: {why}", store.name),
            hint: Some(format!(
                "run the command where {} is reachable (kubectl port-forward to the etcd Service, or from a pod in the cluster); {} is left as it was",
                store.endpoints.join(", "),
                tenant
            )),
        }
    })
}
