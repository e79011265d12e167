//! The doctor's reads (`kcore::doctor::read`) through `kclient`'s connection: a fleet-sized
//! kind in one LIST response, parsed as it streams in (`kclient::api::whole`), the others in
//! pages; every read at once, since a user waits.

use futures::{StreamExt, TryStreamExt};
use kclient::discovery::ServerApis;
use kclient::error::Error;
use kcore::doctor::read::{FleetSource, ListRequest, Pending, Refusal};
use kcore::groups::{CAPI_GROUP, KAMAJI_GROUP};
use kube::api::ListParams;
use kube::discovery::ApiResource;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// What every `kclient` LIST takes of a [`ListRequest`]: kind, namespace, selectors, metadata only.
fn parts<'a>(list: &ListRequest<'a>) -> (&'a ApiResource, Option<&'a str>, &'a ListParams, bool) {
    (
        list.resource,
        list.namespace,
        list.params,
        list.metadata_only,
    )
}

/// The cluster `doctor` reads: the connection, and what discovery found served.
pub(super) struct Reads<'a> {
    pub conn: &'a crate::Conn,
    pub apis: &'a ServerApis,
}

impl FleetSource for Reads<'_> {
    type Error = Error;

    fn refusal(&self, error: &Error) -> Option<Refusal> {
        match error {
            Error::Forbidden {
                verb,
                resource,
                namespace,
                ..
            } => Some(Refusal {
                verb: verb.clone(),
                resource: resource.clone(),
                namespace: namespace.clone(),
            }),
            _ => None,
        }
    }

    /// Cluster API's kinds at the core version the CLI speaks, Kamaji's at their preferred
    /// version, the providers' at the version their contract labels name.
    fn served(&self, group: &str, kind: &str) -> Option<ApiResource> {
        match group {
            CAPI_GROUP => self.apis.capi_kind(kind).ok(),
            KAMAJI_GROUP => self.apis.kind(group, kind).map(|k| k.resource(k.version())),
            _ => self.apis.provider_kind(group, kind),
        }
    }

    /// One response per fleet-sized LIST, not pages: `make bench` saw doctor take 20 s over
    /// 16,000 Machines, 16,000 ByoHosts and their ByoMachines paged by 100 (160 pages each)
    /// where the raw LISTs of its kinds took 6 s.
    async fn list<U: Send + 'static>(
        &self,
        list: &ListRequest<'_>,
        keep: fn(Value) -> U,
    ) -> Result<Vec<U>, Error> {
        let (ar, ns, lp, metadata) = parts(list);
        match list.whole {
            true => kclient::api::list_json_whole(self.conn, ar, ns, lp, metadata, keep).await,
            false => {
                let mut out = Vec::new();
                let each = |v| out.push(keep(v));
                kclient::api::list_json_each(self.conn, ar, ns, lp, metadata, each).await?;
                Ok(out)
            }
        }
    }

    async fn list_as<T, U, F>(&self, list: &ListRequest<'_>, keep: F) -> Result<Vec<U>, Error>
    where
        T: DeserializeOwned + 'static,
        U: Send + 'static,
        F: Fn(T) -> U + Send + 'static,
    {
        let (ar, ns, lp, metadata) = parts(list);
        if list.whole {
            return kclient::api::list_whole(self.conn, ar, ns, lp, metadata, keep).await;
        }
        let all: Vec<T> = kclient::api::list_as(self.conn, ar, ns, lp, metadata).await?;
        Ok(all.into_iter().map(keep).collect())
    }

    async fn get(&self, ar: &ApiResource, ns: &str, name: &str) -> Result<Option<Value>, Error> {
        kclient::api::get_json_opt(self.conn, ar, Some(ns), name).await
    }

    async fn all<'a>(
        &'a self,
        reads: Vec<Pending<'a, Error>>,
        at_once: usize,
    ) -> Result<(), Error> {
        futures::stream::iter(reads)
            .buffer_unordered(at_once.max(1))
            .try_collect::<Vec<()>>()
            .await
            .map(drop)
    }
}
