//! The doctor's reads (`kcore::doctor::read`) through the reconciler's client, for the
//! certificate and findings scans: every LIST in pages (a page is all that is held whole), one
//! read after another (a background scan has no one waiting, and the API server and the memory
//! see one LIST at a time). A refusal is an error, as any other: the scan fails and the last
//! numbers stay on `/metrics`, where counting without the checks it feeds would resolve their
//! alerts.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta;
use kcore::doctor::read::{FleetSource, ListRequest, Pending, Refusal};
use kcore::groups::{
    CAPI_GROUP, CONTROLPLANE_GROUP, INFRASTRUCTURE_GROUP, KAMAJI_GROUP, OPS_GROUP,
};
use kube::api::{Api, DynamicObject};
use kube::discovery::{ApiResource, Discovery};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::Error;

/// Objects per page where the doctor's read names no page size.
const PAGE: u32 = 500;

/// The API groups of the kinds the findings scan reads: discovery asks about these only.
const GROUPS: [&str; 5] = [
    CAPI_GROUP,
    INFRASTRUCTURE_GROUP,
    CONTROLPLANE_GROUP,
    KAMAJI_GROUP,
    OPS_GROUP,
];

/// The cluster the scans read, and (for the findings scan) what it serves.
pub struct ClientReads {
    client: Client,
    /// `None`: no kind is looked up (the certificate scan reads Secrets only).
    discovery: Option<Discovery>,
}

impl ClientReads {
    /// Reads of Secrets only: the certificate scan.
    pub fn new(client: Client) -> ClientReads {
        ClientReads {
            client,
            discovery: None,
        }
    }

    /// Reads of the fleet's kinds, asking what the server serves of them again at every scan:
    /// a provider installed or upgraded since the last one is read at once.
    pub async fn discover(client: Client) -> Result<ClientReads, Error> {
        let discovery = match Discovery::new(client.clone())
            .filter(&GROUPS)
            .run_aggregated()
            .await
        {
            Ok(d) => d,
            // Aggregated discovery (two requests) is served from Kubernetes 1.26 on; before,
            // one request per group version.
            Err(e) => {
                tracing::debug!("findings: aggregated discovery failed ({e}); asking each group");
                Discovery::new(client.clone()).filter(&GROUPS).run().await?
            }
        };
        Ok(ClientReads {
            client,
            discovery: Some(discovery),
        })
    }
}

/// One page of a LIST, its items as `T`.
#[derive(serde::Deserialize)]
#[serde(bound(deserialize = "T: DeserializeOwned"))]
struct Page<T> {
    #[serde(default)]
    metadata: ListMeta,
    /// An empty metadata-only list (PartialObjectMetadataList) comes back as `"items": null`.
    #[serde(default)]
    items: Option<Vec<T>>,
}

impl FleetSource for ClientReads {
    type Error = Error;

    fn refusal(&self, _: &Error) -> Option<Refusal> {
        None
    }

    /// The group's preferred version when it serves `kind`, else the first other that does: a
    /// group several providers share (infrastructure.cluster.x-k8s.io) may prefer a version
    /// one of them (BYOH v0.5.0: v1beta1 only) does not serve.
    fn served(&self, group: &str, kind: &str) -> Option<ApiResource> {
        let g = self.discovery.as_ref()?.get(group)?;
        std::iter::once(g.preferred_version_or_latest())
            .chain(g.versions())
            .find_map(|v| {
                g.versioned_resources(v)
                    .into_iter()
                    .find(|(ar, _)| ar.kind == kind)
                    .map(|(ar, _)| ar)
            })
    }

    async fn list_as<T, U, F>(&self, list: &ListRequest<'_>, keep: F) -> Result<Vec<U>, Error>
    where
        T: DeserializeOwned + 'static,
        U: Send + 'static,
        F: Fn(T) -> U + Send + 'static,
    {
        let url = DynamicObject::url_path(list.resource, list.namespace);
        let mut lp = list.params.clone();
        lp.limit = Some(lp.limit.unwrap_or(PAGE));
        let mut out = Vec::new();
        loop {
            let request = kube::core::Request::new(url.as_str());
            let request = match list.metadata_only {
                true => request.list_metadata(&lp),
                false => request.list(&lp),
            }
            .map_err(kube::Error::BuildRequest)?;
            let page: Page<T> = self.client.request(request).await?;
            out.extend(page.items.unwrap_or_default().into_iter().map(&keep));
            match page.metadata.continue_ {
                Some(c) if !c.is_empty() => lp = lp.continue_token(&c),
                _ => return Ok(out),
            }
        }
    }

    async fn get(&self, ar: &ApiResource, ns: &str, name: &str) -> Result<Option<Value>, Error> {
        let api: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), ns, ar);
        match api.get_opt(name).await? {
            Some(o) => serde_json::to_value(o)
                .map(Some)
                .map_err(|e| Error::Other(format!("an object as JSON: {e}"))),
            None => Ok(None),
        }
    }

    async fn all<'a>(&'a self, reads: Vec<Pending<'a, Error>>, _: usize) -> Result<(), Error> {
        for read in reads {
            read.await?;
        }
        Ok(())
    }
}
