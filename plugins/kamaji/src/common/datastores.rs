//! Kamaji's DataStores as `migrate` and `datastores` read them: the objects, the PEM texts their
//! tlsConfig names (inline or in Secrets), and an etcd DataStore dialled from here
//! (`kclient::etcd`).

use cli::Conn;
use kclient::discovery::ServerApis;
use kclient::error::Error;
use kclient::etcd::{self, Etcd, EtcdCredentials};
use kcore::fields::object_json;
use kcore::groups::KAMAJI_GROUP;
use kcore::kamaji::migrate::{DataStore, Reach};

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

/// The PEM texts an etcd DataStore's tlsConfig names (`None` for other drivers).
pub async fn credentials(conn: &Conn, d: &DataStore) -> Result<Option<EtcdCredentials>, Error> {
    Ok(etcd::credentials(&conn.client, d).await?)
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
