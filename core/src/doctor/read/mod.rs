//! The doctor's reads of the cluster, written once for `kubectl capi doctor` (and `kubectl
//! kamaji doctor`) and kamaji-reconciler's findings and certificate scans: what to read, in
//! which order, where Secrets are read again when the API server refuses them in every
//! namespace, what a refusal keeps from being checked, and the [`Fleet`] they make.
//!
//! Sans-IO, as kube-rs' core is: this module sends nothing. Each caller implements [`FleetSource`]
//! on its own client (the CLI on `kclient`'s connection, the reconciler on its `kube::Client`):
//! which version of a kind the server serves, a LIST, a GET, and how many reads go at once.
//! A read the API server refuses (HTTP 403, [`FleetSource::refusal`]) is noted as [`Unread`], with
//! the permission lacking, and the rest goes on: the checks that need it say "not checked"
//! ([`super::not_checked`]). A source that calls no error a refusal (the reconciler, whose
//! counting without a check would resolve its alert) fails on it instead.

mod crd;
#[cfg(test)]
mod tests;

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::pin::Pin;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::core::ApiResource;
use kube::core::params::ListParams;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{
    ComponentState, CrdInfo, Fleet, FleetRead, HostEvent, LeaseInfo, MachineFacts,
    TenantCertificate, Unread,
};
use crate::groups::{
    CAPI_GROUP, CONTROLPLANE_GROUP, INFRASTRUCTURE_GROUP, KAMAJI_GROUP, OPS_GROUP,
};
use crate::json;
use crate::labels::{CACPPK_LEASE, CLUSTER_NAME_LABEL, RECONCILER_LEASE};
use crate::plan::hosts::HostFacts;
use crate::plan::teardown::{KAMAJI_NAME_LABEL, KAMAJI_PROJECT_SELECTOR};
use crd::NarrowCrd;

/// Objects per page where a LIST is read in pages: a page is all that is held whole.
const PAGE: u32 = 500;

/// Kamaji's certificate Secrets per page: a page is held while its certificates are read, and
/// each carries kubeconfigs of a few KiB.
const CERTIFICATE_PAGE: u32 = 100;

/// CRDs per page: each carries its schemas (CAPI's are hundreds of KiB).
const CRD_PAGE: u32 = 20;

/// How many namespaces' Secrets are listed at once when they are read namespace by namespace.
const NAMESPACES_AT_ONCE: usize = 8;

/// The kinds the checks hold as objects ([`super::prune`]d), but Clusters: group, kind, and
/// the read they are.
const OBJECTS: [(&str, &str, FleetRead); 7] = [
    (
        KAMAJI_GROUP,
        "TenantControlPlane",
        FleetRead::TenantControlPlanes,
    ),
    (
        CONTROLPLANE_GROUP,
        "KamajiControlPlane",
        FleetRead::KamajiControlPlanes,
    ),
    (
        INFRASTRUCTURE_GROUP,
        "ByoMachineTemplate",
        FleetRead::ByoMachineTemplates,
    ),
    (
        INFRASTRUCTURE_GROUP,
        "BootstrapKubeconfig",
        FleetRead::BootstrapKubeconfigs,
    ),
    (
        INFRASTRUCTURE_GROUP,
        "K8sInstallerConfigTemplate",
        FleetRead::InstallerTemplates,
    ),
    (OPS_GROUP, "ClusterUpgrade", FleetRead::ClusterUpgrades),
    (OPS_GROUP, "FleetUpgrade", FleetRead::FleetUpgrades),
];

/// One read under way, for [`FleetSource::all`].
pub type Pending<'a, E> = Pin<Box<dyn Future<Output = Result<(), E>> + 'a>>;

/// A request the API server refused (HTTP 403), as the source's error names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// `list`, `get`, `patch`.
    pub verb: String,
    /// `secrets`, `datastores.kamaji.clastix.io`.
    pub resource: String,
    /// The namespace asked about (`None`: every namespace, or a cluster-scoped kind).
    pub namespace: Option<String>,
}

impl Refusal {
    /// The permission lacking, as `kubectl auth can-i` takes it: `list secrets -n team-a`,
    /// `list secrets -A` (`across`: a namespaced kind read in every namespace), `list
    /// datastores.kamaji.clastix.io` (cluster-scoped).
    pub fn permission(&self, across: bool) -> String {
        let (verb, resource) = (&self.verb, &self.resource);
        match &self.namespace {
            Some(ns) => format!("{verb} {resource} -n {ns}"),
            None if across => format!("{verb} {resource} -A"),
            None => format!("{verb} {resource}"),
        }
    }
}

/// One LIST: of what, where, with which selectors.
#[derive(Debug, Clone, Copy)]
pub struct ListRequest<'a> {
    pub resource: &'a ApiResource,
    /// `None`: every namespace (or a cluster-scoped kind).
    pub namespace: Option<&'a str>,
    /// The selectors; `limit` is the page size where the source reads in pages.
    pub params: &'a ListParams,
    /// Metadata only (a `PartialObjectMetadataList`).
    pub metadata_only: bool,
    /// A fleet-sized kind the source may read in one response rather than pages: the API
    /// server answers a LIST without `limit` from its watch cache, while `continue` pages may
    /// come from etcd.
    pub whole: bool,
}

impl<'a> ListRequest<'a> {
    /// Whole objects, in pages.
    fn paged(
        resource: &'a ApiResource,
        namespace: Option<&'a str>,
        params: &'a ListParams,
    ) -> ListRequest<'a> {
        ListRequest {
            resource,
            namespace,
            params,
            metadata_only: false,
            whole: false,
        }
    }

    /// The same LIST of a fleet-sized kind, which may come in one response (`metadata_only`:
    /// metadata alone).
    fn whole(self, metadata_only: bool) -> ListRequest<'a> {
        ListRequest {
            metadata_only,
            whole: true,
            ..self
        }
    }
}

/// What the doctor reads through: a client of one cluster.
pub trait FleetSource {
    type Error;

    /// The permission `error` says is lacking, when it is the API server's refusal (HTTP
    /// 403); `None` for any other error, which ends the read.
    fn refusal(&self, error: &Self::Error) -> Option<Refusal>;

    /// The version of `kind` of `group` to read (`None`: not served, read as none).
    fn served(&self, group: &str, kind: &str) -> Option<ApiResource>;

    /// Every object of `list`, each turned by `keep` into what is kept of it as it arrives.
    /// The objects are JSON as the server sent them (`managedFields`, which no check reads,
    /// may be left out).
    fn list<U: Send + 'static>(
        &self,
        list: &ListRequest<'_>,
        keep: fn(Value) -> U,
    ) -> impl Future<Output = Result<Vec<U>, Self::Error>> {
        self.list_as(list, keep)
    }

    /// Like [`FleetSource::list`], each object parsed as `T` (a narrow `T` skips what it does not
    /// name while parsing).
    fn list_as<T, U, F>(
        &self,
        list: &ListRequest<'_>,
        keep: F,
    ) -> impl Future<Output = Result<Vec<U>, Self::Error>>
    where
        T: DeserializeOwned + 'static,
        U: Send + 'static,
        F: Fn(T) -> U + Send + 'static;

    /// One object of a namespaced kind (`None`: it does not exist).
    fn get(
        &self,
        resource: &ApiResource,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<Option<Value>, Self::Error>>;

    /// Runs `reads` to the first error, at most `at_once` of them at a time: a source a user
    /// waits on runs them together, a background scan may run one after another.
    fn all<'a>(
        &'a self,
        reads: Vec<Pending<'a, Self::Error>>,
        at_once: usize,
    ) -> impl Future<Output = Result<(), Self::Error>> + 'a;
}

/// What a read of the fleet covers.
#[derive(Debug, Clone, Copy, Default)]
pub struct Ask<'a> {
    /// The namespaces read, each on its own, so that Roles in them suffice (every namespace at
    /// once when empty).
    pub namespaces: &'a [String],
    /// A label selector over Clusters: only those Clusters are read (`-l`).
    pub selector: Option<&'a str>,
    /// Kamaji's certificate Secrets (the reconciler brings those its certificate scan read).
    pub certificates: bool,
    /// BYOH's BootstrapKubeconfigs (their status holds a host's bootstrap token: the
    /// reconciler's role does not read them).
    pub bootstrap_kubeconfigs: bool,
    /// Kamaji's DataStores and the Secrets they name (cluster-scoped: the reconciler watches
    /// namespaces).
    pub datastores: bool,
    /// The CRDs of the fleet's APIs (cluster-scoped).
    pub crds: bool,
    /// The Warning Events about ByoHosts, which tell a host whose bootstrap fails again and
    /// again (the reconciler's role does not read Events).
    pub host_events: bool,
    /// The controller Deployment of each component `kubectl capi init` installs (in their own
    /// namespaces, which the reconciler does not watch).
    pub components: bool,
}

/// The fleet as the checks read it, as `ask` says: each kind where it is served (one not served
/// reads as none), all at once as far as `source` runs them. What the API server refuses is
/// in [`Fleet::unread`]. The caller adds what takes more than a read (the CLI's probes of
/// conversion webhooks and of Kamaji's webhook).
pub async fn fleet<S: FleetSource>(source: &S, ask: &Ask<'_>) -> Result<Fleet, S::Error> {
    let scopes = scopes(ask.namespaces);
    let r = Reader {
        source,
        scopes: &scopes,
        notes: RefCell::default(),
    };
    let mut fleet = Fleet {
        capi_served: source.served(CAPI_GROUP, "Cluster").is_some(),
        ..Fleet::default()
    };
    let all = ListParams::default().limit(PAGE);
    let mut clusters_params = all.clone();
    if let Some(s) = ask.selector {
        clusters_params = clusters_params.labels(s);
    }
    // Secrets refused in every namespace: read again where the fleet is, below.
    let (secrets_by_ns, certificates_by_ns) = (Cell::new(false), Cell::new(false));
    // The kinds of [`OBJECTS`], in its order.
    let mut objects: [Vec<Value>; 7] = Default::default();
    {
        let Fleet {
            clusters,
            machines,
            byo_hosts,
            host_events,
            byo_machines,
            cluster_secrets,
            certificates,
            leases,
            datastores,
            datastore_secrets,
            crds,
            components,
            ..
        } = &mut fleet;
        let (r, all) = (&r, &all);
        let mut reads: Vec<Pending<'_, S::Error>> = vec![
            r.read_into(
                clusters,
                (CAPI_GROUP, "Cluster", FleetRead::Clusters),
                &clusters_params,
            ),
            Box::pin(async {
                let key = (CAPI_GROUP, "Machine", FleetRead::Machines);
                *machines = r.kept(key, all, false, |m| MachineFacts::of(&m)).await?;
                Ok(())
            }),
            Box::pin(async {
                let key = (INFRASTRUCTURE_GROUP, "ByoHost", FleetRead::ByoHosts);
                *byo_hosts = r.kept(key, all, false, |h| HostFacts::of(&h)).await?;
                Ok(())
            }),
            Box::pin(async {
                let key = (INFRASTRUCTURE_GROUP, "ByoMachine", FleetRead::ByoMachines);
                let keys = r.kept(key, all, true, |b| super::object_key(&b)).await?;
                *byo_machines = keys.into_iter().collect();
                Ok(())
            }),
        ];
        if ask.host_events {
            reads.push(Box::pin(async {
                *host_events = r.host_events().await?;
                Ok(())
            }));
        }
        for (slot, key) in objects.iter_mut().zip(OBJECTS) {
            if key.2 != FleetRead::BootstrapKubeconfigs || ask.bootstrap_kubeconfigs {
                reads.push(r.read_into(slot, key, all));
            }
        }
        reads.push(Box::pin(async {
            if r.cluster_secrets(cluster_secrets).await? {
                secrets_by_ns.set(true);
            }
            Ok(())
        }));
        if ask.certificates {
            reads.push(Box::pin(async {
                match r.certificates().await? {
                    Some(c) => *certificates = c,
                    None => certificates_by_ns.set(true),
                }
                Ok(())
            }));
        }
        reads.push(Box::pin(async {
            if let Some(l) = r.noted(r.leases().await, FleetRead::Leases, true, false)? {
                *leases = l;
            }
            Ok(())
        }));
        if ask.datastores {
            reads.push(Box::pin(async {
                *datastores = r.datastores().await?;
                *datastore_secrets = r.datastore_secrets(datastores).await?;
                Ok(())
            }));
        }
        if ask.crds {
            reads.push(Box::pin(async {
                *crds = r.crds().await?;
                Ok(())
            }));
        }
        if ask.components {
            reads.push(Box::pin(async {
                *components = r.components().await?;
                Ok(())
            }));
        }
        let n = reads.len();
        source.all(reads, n).await?;
    }
    let [
        tcps,
        kcps,
        machine_templates,
        bootstraps,
        installers,
        cluster_ups,
        fleet_ups,
    ] = objects;
    fleet.tenant_control_planes = tcps;
    fleet.kamaji_control_planes = kcps;
    fleet.byo_machine_templates = machine_templates;
    fleet.bootstrap_kubeconfigs = bootstraps;
    fleet.installer_templates = installers;
    fleet.cluster_upgrades = cluster_ups;
    fleet.fleet_upgrades = fleet_ups;
    if secrets_by_ns.get() {
        r.cluster_secrets_by_namespace(&mut fleet).await?;
    }
    if certificates_by_ns.get() {
        r.certificates_by_namespace(&mut fleet).await?;
    }
    fleet.unread = r.notes.into_inner();
    Ok(fleet)
}

/// Every certificate of Kamaji's Secrets in `namespaces` (one LIST by its project label in
/// each; every namespace at once when empty): the reconciler's certificate scan.
pub async fn certificates<S: FleetSource>(
    source: &S,
    namespaces: &[String],
) -> Result<Vec<TenantCertificate>, S::Error> {
    let mut out = Vec::new();
    for ns in scopes(namespaces) {
        out.extend(certificates_in(source, ns).await?);
    }
    Ok(out)
}

/// Each of `namespaces`, or (`None`) every namespace at once when there are none.
fn scopes(namespaces: &[String]) -> Vec<Option<&str>> {
    if namespaces.is_empty() {
        vec![None]
    } else {
        namespaces.iter().map(|n| Some(n.as_str())).collect()
    }
}

/// Kamaji's certificate Secrets in `namespace`, as certificates per tenant: each Secret cut to
/// its certificates' dates as it is parsed, so that a fleet's certificate Secrets (several per
/// tenant, keys and all) are never held together.
async fn certificates_in<S: FleetSource>(
    source: &S,
    namespace: Option<&str>,
) -> Result<Vec<TenantCertificate>, S::Error> {
    let ar = ApiResource::erase::<Secret>(&());
    let params = ListParams::default()
        .labels(KAMAJI_PROJECT_SELECTOR)
        .limit(CERTIFICATE_PAGE);
    let list = ListRequest::paged(&ar, namespace, &params).whole(false);
    let per_secret = source.list_as(&list, tenant_certificates).await?;
    Ok(per_secret.into_iter().flatten().collect())
}

/// The certificates of one of Kamaji's Secrets ([`crate::build::pki::secret_certificates`]),
/// for the tenant its `kamaji.clastix.io/name` label names (none without that label).
fn tenant_certificates(s: Secret) -> Vec<TenantCertificate> {
    let (Some(name), Some(ns)) = (s.metadata.name, s.metadata.namespace) else {
        return Vec::new();
    };
    let Some(tenant) = s
        .metadata
        .labels
        .and_then(|mut l| l.remove(KAMAJI_NAME_LABEL))
    else {
        return Vec::new();
    };
    let data: BTreeMap<String, Vec<u8>> = s
        .data
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, v.0))
        .collect();
    crate::build::pki::secret_certificates(&data)
        .into_iter()
        .map(|(key, c)| TenantCertificate {
            namespace: ns.clone(),
            tenant: tenant.clone(),
            secret: name.clone(),
            key,
            not_after: c.not_after,
            not_after_unix: c.not_after_unix,
        })
        .collect()
}

/// The namespaces `objects` are in.
fn namespaces_of(objects: &[Value]) -> BTreeSet<String> {
    objects
        .iter()
        .map(|o| json::namespace(o).to_string())
        .filter(|ns| !ns.is_empty())
        .collect()
}

/// Counts Cluster API's Secrets per `(namespace, cluster)` their label names.
fn count_cluster_secrets(
    into: &mut BTreeMap<(String, String), usize>,
    keys: Vec<Option<(String, String)>>,
) {
    for key in keys.into_iter().flatten() {
        let n = into.entry(key).or_default();
        *n = n.saturating_add(1);
    }
}

/// One read of the fleet: the source, the namespaces read, and the reads refused so far.
struct Reader<'a, S> {
    source: &'a S,
    scopes: &'a [Option<&'a str>],
    notes: RefCell<Vec<Unread>>,
}

impl<S: FleetSource> Reader<'_, S> {
    /// `r`'s value, or `None` when the API server refused it, noted as `input` not read
    /// (`across`: a namespaced kind read in every namespace; `partial`: one of several reads
    /// of it). Any other error ends the read.
    fn noted<T>(
        &self,
        r: Result<T, S::Error>,
        input: FleetRead,
        across: bool,
        partial: bool,
    ) -> Result<Option<T>, S::Error> {
        match r {
            Ok(v) => Ok(Some(v)),
            Err(e) => match self.source.refusal(&e) {
                Some(refusal) => {
                    self.note(input, refusal.permission(across), partial);
                    Ok(None)
                }
                None => Err(e),
            },
        }
    }

    fn note(&self, input: FleetRead, missing: String, partial: bool) {
        self.notes.borrow_mut().push(Unread {
            input,
            missing,
            partial,
        });
    }

    /// Whether nothing of `input` could be read.
    fn whole_unread(&self, input: FleetRead) -> bool {
        self.notes
            .borrow()
            .iter()
            .any(|u| u.input == input && !u.partial)
    }

    /// A kind the checks hold as objects, [`super::prune`]d as each arrives.
    async fn objects(
        &self,
        group: &str,
        kind: &str,
        input: FleetRead,
        params: &ListParams,
    ) -> Result<Vec<Value>, S::Error> {
        self.kept((group, kind, input), params, false, super::prune)
            .await
    }

    /// [`Reader::objects`] into `slot`, as a read to run with the others.
    fn read_into<'s>(
        &'s self,
        slot: &'s mut Vec<Value>,
        (group, kind, input): (&'static str, &'static str, FleetRead),
        params: &'s ListParams,
    ) -> Pending<'s, S::Error> {
        Box::pin(async move {
            *slot = self.objects(group, kind, input, params).await?;
            Ok(())
        })
    }

    /// `kind` of `group` in each namespace read, each object turned into what the checks keep
    /// of it (`keep`) as it arrives; a refusal is noted as `input` not read.
    async fn kept<U: Send + 'static>(
        &self,
        (group, kind, input): (&str, &str, FleetRead),
        params: &ListParams,
        metadata_only: bool,
        keep: fn(Value) -> U,
    ) -> Result<Vec<U>, S::Error> {
        let Some(ar) = self.source.served(group, kind) else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for ns in self.scopes {
            let list = ListRequest::paged(&ar, *ns, params).whole(metadata_only);
            let r = self.source.list(&list, keep).await;
            let partial = self.scopes.len() > 1;
            if let Some(v) = self.noted(r, input, ns.is_none(), partial)? {
                out.extend(v);
            }
        }
        Ok(out)
    }

    /// Cluster API's Secrets (by its cluster-name label), metadata only, counted into `out`.
    /// `true`: refused in every namespace, to read again namespace by namespace.
    async fn cluster_secrets(
        &self,
        out: &mut BTreeMap<(String, String), usize>,
    ) -> Result<bool, S::Error> {
        for ns in self.scopes {
            let r = self.cluster_secrets_in(*ns).await;
            if ns.is_none() && r.as_ref().is_err_and(|e| self.source.refusal(e).is_some()) {
                return Ok(true);
            }
            let partial = self.scopes.len() > 1;
            if let Some(keys) = self.noted(r, FleetRead::ClusterSecrets, false, partial)? {
                count_cluster_secrets(out, keys);
            }
        }
        Ok(false)
    }

    async fn cluster_secrets_in(
        &self,
        namespace: Option<&str>,
    ) -> Result<Vec<Option<(String, String)>>, S::Error> {
        let ar = ApiResource::erase::<Secret>(&());
        let params = ListParams::default().labels(CLUSTER_NAME_LABEL).limit(PAGE);
        let list = ListRequest::paged(&ar, namespace, &params).whole(true);
        self.source.list(&list, |s| super::secret_cluster(&s)).await
    }

    /// Kamaji's certificates in each namespace read (`None`: refused in every namespace, to
    /// read again namespace by namespace).
    async fn certificates(&self) -> Result<Option<Vec<TenantCertificate>>, S::Error> {
        let mut out = Vec::new();
        for ns in self.scopes {
            let r = certificates_in(self.source, *ns).await;
            if ns.is_none() && r.as_ref().is_err_and(|e| self.source.refusal(e).is_some()) {
                return Ok(None);
            }
            let partial = self.scopes.len() > 1;
            if let Some(c) = self.noted(r, FleetRead::Certificates, false, partial)? {
                out.extend(c);
            }
        }
        Ok(Some(out))
    }

    /// `read` in each namespace `objects` are in, [`NAMESPACES_AT_ONCE`] at a time, each
    /// answer handed to `take` unless refused, which is noted as `input` read in part.
    async fn in_namespaces_of<T, A>(
        &self,
        objects: &[Value],
        input: FleetRead,
        read: impl Fn(String) -> A,
        take: impl Fn(T),
    ) -> Result<(), S::Error>
    where
        A: Future<Output = Result<T, S::Error>>,
    {
        let take = &take;
        let reads: Vec<Pending<'_, S::Error>> = namespaces_of(objects)
            .into_iter()
            .map(|ns| -> Pending<'_, S::Error> {
                let answer = read(ns);
                Box::pin(async move {
                    if let Some(v) = self.noted(answer.await, input, false, true)? {
                        take(v);
                    }
                    Ok(())
                })
            })
            .collect();
        self.source.all(reads, NAMESPACES_AT_ONCE).await
    }

    /// When the user may not list Secrets in every namespace: Cluster API's, read in the
    /// namespaces of the Clusters, one LIST by label each; a site can grant Secrets there only
    /// (`capi-kamaji-doctor-secrets` bound by RoleBindings, `--print-role`). What is refused
    /// there is noted per namespace.
    async fn cluster_secrets_by_namespace(&self, fleet: &mut Fleet) -> Result<(), S::Error> {
        let counts = RefCell::new(std::mem::take(&mut fleet.cluster_secrets));
        let read = |ns: String| async move { self.cluster_secrets_in(Some(&ns)).await };
        let take = |keys| count_cluster_secrets(&mut counts.borrow_mut(), keys);
        let input = FleetRead::ClusterSecrets;
        self.in_namespaces_of(&fleet.clusters, input, read, take)
            .await?;
        fleet.cluster_secrets = counts.into_inner();
        // Secrets left in a namespace no Cluster is in any more are not seen.
        self.note(FleetRead::ClusterSecrets, "list secrets -A".into(), true);
        Ok(())
    }

    /// Likewise Kamaji's certificates, next to their TenantControlPlanes.
    async fn certificates_by_namespace(&self, fleet: &mut Fleet) -> Result<(), S::Error> {
        if self.whole_unread(FleetRead::TenantControlPlanes) {
            // Where Kamaji's Secrets are is not known either.
            self.note(FleetRead::Certificates, "list secrets -A".into(), false);
            return Ok(());
        }
        let found = RefCell::new(std::mem::take(&mut fleet.certificates));
        let read = |ns: String| async move { certificates_in(self.source, Some(&ns)).await };
        let take = |c| found.borrow_mut().extend(c);
        let input = FleetRead::Certificates;
        self.in_namespaces_of(&fleet.tenant_control_planes, input, read, take)
            .await?;
        fleet.certificates = found.into_inner();
        Ok(())
    }

    /// The providers' Leases, ours and CACPPK's, in every namespace whatever is read
    /// otherwise (they live in the providers' namespaces, not the clusters'): one LIST per name
    /// (a field selector), so that no other Lease (the nodes', one each) is read.
    async fn leases(&self) -> Result<Vec<LeaseInfo>, S::Error> {
        let ar = ApiResource::erase::<Lease>(&());
        let mut out = Vec::new();
        for name in [RECONCILER_LEASE, CACPPK_LEASE] {
            let params = ListParams::default()
                .fields(&format!("metadata.name={name}"))
                .limit(PAGE);
            let list = ListRequest::paged(&ar, None, &params);
            out.extend(self.source.list_as(&list, LeaseInfo::of).await?);
        }
        Ok(out)
    }

    /// The Warning Events about ByoHosts in each namespace read, by field selector, those of
    /// their agents' failures kept ([`HostEvent`]); none where ByoHosts are not served.
    async fn host_events(&self) -> Result<Vec<HostEvent>, S::Error> {
        if self
            .source
            .served(INFRASTRUCTURE_GROUP, "ByoHost")
            .is_none()
        {
            return Ok(Vec::new());
        }
        let ar = ApiResource::erase::<Event>(&());
        let params = ListParams::default()
            .fields("involvedObject.kind=ByoHost,type=Warning")
            .limit(PAGE);
        let mut out = Vec::new();
        for ns in self.scopes {
            let list = ListRequest::paged(&ar, *ns, &params);
            let r = self.source.list(&list, |e| HostEvent::of(&e)).await;
            let partial = self.scopes.len() > 1;
            if let Some(v) = self.noted(r, FleetRead::HostEvents, ns.is_none(), partial)? {
                out.extend(v.into_iter().flatten());
            }
        }
        Ok(out)
    }

    /// Kamaji's DataStores, whole (the checks walk their spec); they are few.
    async fn datastores(&self) -> Result<Vec<Value>, S::Error> {
        let Some(ar) = self.source.served(KAMAJI_GROUP, "DataStore") else {
            return Ok(Vec::new());
        };
        let params = ListParams::default().limit(PAGE);
        let list = ListRequest::paged(&ar, None, &params);
        let r = self.source.list(&list, |d| d).await;
        Ok(self
            .noted(r, FleetRead::DataStores, false, false)?
            .unwrap_or_default())
    }

    /// The data keys of each Secret the DataStores reference (`None`: it does not exist). One
    /// GET per Secret: DataStores are few, and their Secrets are not labelled for a LIST.
    async fn datastore_secrets(
        &self,
        datastores: &[Value],
    ) -> Result<BTreeMap<String, Option<Vec<String>>>, S::Error> {
        let ar = ApiResource::erase::<Secret>(&());
        let wanted: BTreeSet<(String, String)> = datastores
            .iter()
            .flat_map(crate::kamaji::plan::datastore_secret_keys)
            .filter(|k| !k.namespace.is_empty())
            .map(|k| (k.namespace, k.name))
            .collect();
        let mut out = BTreeMap::new();
        for (ns, name) in wanted {
            // A Secret the user may not read is left out: its DataStore is then not judged on it.
            let r = self.source.get(&ar, &ns, &name).await;
            let Some(secret) = self.noted(r, FleetRead::DataStoreSecrets, false, true)? else {
                continue;
            };
            let keys = secret.map(|s| {
                s.get("data")
                    .and_then(Value::as_object)
                    .map(|d| d.keys().cloned().collect())
                    .unwrap_or_default()
            });
            out.insert(format!("{ns}/{name}"), keys);
        }
        Ok(out)
    }

    /// Each component's controller Deployment, one GET each (seven); `None` when any was
    /// refused, so that the checks do not take a refusal for a missing component.
    async fn components(&self) -> Result<Option<Vec<ComponentState>>, S::Error> {
        let ar = ApiResource::erase::<k8s_openapi::api::apps::v1::Deployment>(&());
        let mut out = Vec::new();
        for c in crate::init::set::COMPONENTS {
            let r = self.source.get(&ar, c.namespace, c.deployment).await;
            let Some(deployment) = self.noted(r, FleetRead::Components, false, false)? else {
                return Ok(None);
            };
            out.push(ComponentState {
                component: c,
                deployment,
                served: self.source.served(c.api.0, c.api.1).is_some(),
            });
        }
        Ok(Some(out))
    }

    /// The CRDs of the fleet's APIs ([`CrdInfo::is_fleet_api`]); reading CRDs is a
    /// cluster-wide right a namespace's user may lack.
    async fn crds(&self) -> Result<Vec<CrdInfo>, S::Error> {
        let ar = ApiResource::erase::<CustomResourceDefinition>(&());
        let params = ListParams::default().limit(CRD_PAGE);
        let list = ListRequest::paged(&ar, None, &params);
        let r = self.source.list_as(&list, NarrowCrd::info).await;
        let all = self.noted(r, FleetRead::Crds, false, false)?;
        Ok(all
            .unwrap_or_default()
            .into_iter()
            .filter(CrdInfo::is_fleet_api)
            .collect())
    }
}
