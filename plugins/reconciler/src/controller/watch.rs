//! Start-up and the watches: each watched object is mapped back to the KamajiControlPlanes whose
//! outcome it can change, so that nothing is polled.

use std::time::Duration;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use futures::channel::mpsc::UnboundedReceiver;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::core::{DynamicResourceScope, NamespaceResourceScope, PartialObjectMeta};
use kube::runtime::controller::Controller;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{PredicateConfig, WatchStreamExt, reflector, watcher};
use kube::{Client, Resource};

use super::cache::{keep_cluster, keep_tcp, resource_version};
use super::reconcile::{error_policy, reconcile};
use super::stored::StoredKcp;
use super::{CLUSTER_NAME_LABEL, Config, KcpCtx, discover};
use crate::Error;
use crate::api::v1alpha2::KamajiControlPlane;
use crate::metrics::Metrics;
use crate::skeleton::{Base, Retries, drive};

/// Runs the controller until a shutdown signal. `ready` is set once the watches are running.
///
/// With watched namespaces (`Config::namespaces`) it runs one controller per namespace, each with
/// its own watches and caches, so that no watch or list spans the cluster: a reconciler granted
/// Roles in those namespaces only is refused nothing. The certificate scan's triggers go to the
/// controller of the KamajiControlPlane's namespace.
pub async fn run(
    client: Client,
    cfg: Config,
    metrics: Arc<Metrics>,
    ready: Arc<AtomicBool>,
) -> Result<(), Error> {
    let disc = discover(&client, &cfg).await?;
    tracing::info!(
        contract = ?disc.contract,
        tcp_version = %disc.tcp.version,
        infra_kinds = ?disc.infra.keys().collect::<Vec<_>>(),
        namespaces = ?cfg.namespaces,
        "discovered"
    );
    let mut routes = Vec::new();
    let mut controllers = Vec::new();
    for scope in cfg.scopes() {
        let seen = super::Seen {
            infra: (disc.infra.keys())
                .map(|k| (k.clone(), Default::default()))
                .collect(),
            ..Default::default()
        };
        let (tx, rx) = futures::channel::mpsc::unbounded();
        let ctx = Arc::new(KcpCtx {
            base: Base::new(client.clone(), metrics.clone()),
            cfg: cfg.clone(),
            disc: disc.clone(),
            clusters: Mutex::new(HashMap::new()),
            retries: Retries::doubling(),
            written: Mutex::new(HashMap::new()),
            seen,
            remote: super::remote::RemoteWatches::new(tx.clone()),
        });
        let controller = watches(&ctx, scope.clone(), rx);
        routes.push((scope, tx));
        controllers.push(drive(
            controller,
            reconcile,
            error_policy,
            ctx,
            "KamajiControlPlane",
        ));
    }
    let mut changed = metrics.certificates.triggers();
    let route = async move {
        while let Some((ns, name)) = changed.next().await {
            let to = routes
                .iter()
                .find(|(scope, _)| scope.as_deref().is_none_or(|s| s == ns));
            if let Some((_, tx)) = to {
                let _ = tx.unbounded_send((ns, name));
            }
        }
        // The sender is gone only with the metrics: nothing more to route.
        std::future::pending::<()>().await
    };
    ready.store(true, Ordering::SeqCst);
    futures::future::select(
        Box::pin(futures::future::join_all(controllers)),
        Box::pin(route),
    )
    .await;
    Ok(())
}

/// Every watch of one controller runs in one namespace or in all.
struct Scope {
    client: Client,
    ns: Option<String>,
}

impl Scope {
    fn typed<K>(&self) -> Api<K>
    where
        K: Resource<Scope = NamespaceResourceScope>,
        K::DynamicType: Default,
    {
        match &self.ns {
            Some(n) => Api::namespaced(self.client.clone(), n),
            None => Api::all(self.client.clone()),
        }
    }

    fn dynamic<K>(&self, r: &ApiResource) -> Api<K>
    where
        K: Resource<Scope = DynamicResourceScope, DynamicType = ApiResource>,
    {
        match &self.ns {
            Some(n) => Api::namespaced_with(self.client.clone(), n, r),
            None => Api::all_with(self.client.clone(), r),
        }
    }
}

/// Objects per page of the watches' initial LISTs: the page is held in memory until every object
/// of it has been handed on, so at 1,000 KamajiControlPlanes kube's default of 500 made the
/// start-up the reconciler's peak. A page of 100 costs a few more LISTs, once.
const LIST_PAGE: u32 = 100;

/// What of a KamajiControlPlane can change a reconcile's outcome: everything but its status,
/// which only this controller writes. Its own status writes therefore trigger no reconcile; the
/// store still gets them, so the next reconcile compares against them.
fn kcp_trigger(k: &StoredKcp) -> Option<u64> {
    use std::hash::{Hash, Hasher};
    let m = k.meta();
    let mut h = std::collections::hash_map::DefaultHasher::new();
    m.uid.hash(&mut h);
    m.generation.hash(&mut h);
    m.labels.hash(&mut h);
    m.annotations.hash(&mut h);
    m.finalizers.hash(&mut h);
    m.deletion_timestamp
        .as_ref()
        .map(|t| t.0.as_second())
        .hash(&mut h);
    for o in m.owner_references.iter().flatten() {
        (&o.api_version, &o.kind, &o.name, &o.uid, o.controller).hash(&mut h);
    }
    Some(h.finish())
}

/// A watch event of a KamajiControlPlane, as the store keeps it (`stored`).
fn stored(ev: watcher::Event<KamajiControlPlane>) -> watcher::Event<StoredKcp> {
    use watcher::Event as E;
    match ev {
        E::Apply(k) => E::Apply(StoredKcp::new(k)),
        E::Delete(k) => E::Delete(StoredKcp::new(k)),
        E::Init => E::Init,
        E::InitApply(k) => E::InitApply(StoredKcp::new(k)),
        E::InitDone => E::InitDone,
    }
}

/// The KamajiControlPlane controller with its watches: KamajiControlPlanes in a store of their
/// own (`StoredKcp`: without managedFields and kubectl's last-applied annotation, which the
/// reconcile never reads, and all but the metadata as JSON text); TenantControlPlanes and Clusters
/// whole, kept as the fields the reconcile reads (`cache`); Secrets and infrastructure clusters
/// as metadata only, the resourceVersions of the Secrets a KCP or a TCP owns kept.
fn watches(
    ctx: &Arc<KcpCtx>,
    ns: Option<String>,
    changed: UnboundedReceiver<(String, String)>,
) -> Controller<StoredKcp> {
    let scope = Scope {
        client: ctx.base.client.clone(),
        ns,
    };
    let disc = &ctx.disc;
    let wc = watcher::Config::default()
        .any_semantic()
        .page_size(LIST_PAGE);
    let writer = reflector::store::Writer::<StoredKcp>::default();
    let reader = writer.as_reader();
    let kcps = watcher::watcher(scope.typed::<KamajiControlPlane>(), wc.clone())
        .map_ok(stored)
        .reflect(writer)
        .applied_objects()
        .predicate_filter(kcp_trigger, PredicateConfig::default());
    let mut controller = Controller::for_stream(kcps, reader)
        .with_config(
            kube::runtime::controller::Config::default().concurrency(ctx.cfg.concurrency.max(1)),
        )
        .trigger_backoff(kube::runtime::utils::ResetTimerBackoff::new(
            WatchBackoff::default(),
            Duration::from_secs(30),
        ));

    // Each cache takes in its watch's events before they trigger a reconcile.
    // TenantControlPlanes (owned: controller ownerReference to the KCP).
    let ctx_t = ctx.clone();
    let tcps = watcher::watcher(scope.dynamic::<DynamicObject>(&disc.tcp), wc.clone())
        .map_ok(move |ev| {
            ctx_t.seen.tcps.observe(&ev, keep_tcp);
            ev
        })
        .touched_objects();
    controller =
        controller.watches_stream_with(tcps, |o| owner_kcp(o.meta()).into_iter(), disc.tcp.clone());

    // Secrets: our copies (owned by the KCP) and Kamaji's sources (owned by the TCP, whose name
    // is the KCP's).
    let ctx_s = ctx.clone();
    let secrets = watcher::watcher(scope.typed::<PartialObjectMeta<Secret>>(), wc.clone())
        .map_ok(move |ev| {
            let ours = |s: &PartialObjectMeta<Secret>| {
                (!secret_kcps(s.meta()).is_empty())
                    .then(|| resource_version(s))
                    .flatten()
            };
            ctx_s.seen.secrets.observe(&ev, ours);
            ev
        })
        .touched_objects();
    controller = controller.watches_stream(secrets, |s| secret_kcps(s.meta()).into_iter());

    // Clusters: map to the KCP they own (learnt by the reconcile from the KCP's ownerReference;
    // a KCP is reconciled when it gets that ownerReference, so nothing is missed before).
    let ctx_c = ctx.clone();
    let ctx_k = ctx.clone();
    let clusters = watcher::watcher(scope.dynamic::<DynamicObject>(&disc.cluster), wc.clone())
        .map_ok(move |ev| {
            ctx_k.seen.clusters.observe(&ev, keep_cluster);
            ev
        })
        .touched_objects();
    controller = controller.watches_stream_with(
        clusters,
        move |c| cluster_kcp(&ctx_c, c.meta()).into_iter(),
        disc.cluster.clone(),
    );

    // The certificate scan: the KCPs whose CertificatesExpiring condition changed (the
    // condition is written from the last scan; see crate::certificates); and the watches of
    // TenantControlPlanes in other clusters (`remote`).
    controller =
        controller.reconcile_on(changed.map(|(ns, name)| ObjectRef::new(&name).within(&ns)));

    // Infrastructure clusters: map through their Cluster (ownerReference or label).
    if !ctx.cfg.skip_infra_patch {
        for (kind, res) in &disc.infra {
            let ctx_i = ctx.clone();
            let ctx_v = ctx.clone();
            let kind = kind.clone();
            let objs = scope.dynamic::<PartialObjectMeta<DynamicObject>>(res);
            let objs = watcher::watcher(objs, wc.clone())
                .map_ok(move |ev| {
                    if let Some(c) = ctx_v.seen.infra.get(&kind) {
                        c.observe(&ev, resource_version);
                    }
                    ev
                })
                .touched_objects();
            controller = controller.watches_stream_with(
                objs,
                move |o| infra_kcp(&ctx_i, o.meta()).into_iter(),
                res.clone(),
            );
        }
    }
    controller
}

fn owner_kcp(m: &kube::core::ObjectMeta) -> Vec<ObjectRef<StoredKcp>> {
    let ns = m.namespace.clone().unwrap_or_default();
    m.owner_references
        .iter()
        .flatten()
        .filter(|o| {
            o.kind == "KamajiControlPlane"
                && kcore::groups::in_group(&o.api_version, kcore::groups::CONTROLPLANE_GROUP)
        })
        .map(|o| ObjectRef::new(&o.name).within(&ns))
        .collect()
}

/// A Secret's KCP: its owner, or the TenantControlPlane owning it (named like its KCP).
fn secret_kcps(m: &kube::core::ObjectMeta) -> Vec<ObjectRef<StoredKcp>> {
    let ns = m.namespace.clone().unwrap_or_default();
    let mut out = owner_kcp(m);
    for o in m.owner_references.iter().flatten() {
        if o.kind == "TenantControlPlane"
            && kcore::groups::in_group(&o.api_version, kcore::groups::KAMAJI_GROUP)
        {
            out.push(ObjectRef::new(&o.name).within(&ns));
        }
    }
    out
}

/// A Cluster's KCP, as the reconcile learnt it from the KCP's ownerReference.
fn cluster_kcp(ctx: &KcpCtx, m: &kube::core::ObjectMeta) -> Option<ObjectRef<StoredKcp>> {
    let ns = m.namespace.clone().unwrap_or_default();
    let name = m.name.clone().unwrap_or_default();
    let kcp = ctx
        .clusters
        .lock()
        .ok()
        .and_then(|idx| idx.get(&(ns.clone(), name)).cloned())?;
    Some(ObjectRef::new(&kcp).within(&ns))
}

/// An infrastructure cluster's KCP, through its Cluster (ownerReference, else the cluster-name
/// label) and the Clusters seen so far.
fn infra_kcp(ctx: &KcpCtx, m: &kube::core::ObjectMeta) -> Option<ObjectRef<StoredKcp>> {
    let ns = m.namespace.clone().unwrap_or_default();
    let cluster = m
        .owner_references
        .iter()
        .flatten()
        .find(|r| {
            r.kind == "Cluster"
                && kcore::groups::in_group(&r.api_version, kcore::groups::CAPI_GROUP)
        })
        .map(|r| r.name.clone())
        .or_else(|| {
            m.labels
                .as_ref()
                .and_then(|l| l.get(CLUSTER_NAME_LABEL).cloned())
        });
    let kcp = cluster.and_then(|c| {
        ctx.clusters
            .lock()
            .ok()
            .and_then(|idx| idx.get(&(ns.clone(), c)).cloned())
    });
    kcp.map(|k: String| ObjectRef::new(&k).within(&ns))
}

/// How the watches retry after an error: 0.5 s doubling to at most 8 s, reset after 30 s
/// without one. kube-runtime's default (client-go's: 0.8 s to 30 s, reset after 120 s) left the
/// reconciler blind for minutes after an API server restart, as every watch ends at once and
/// each resumed one may meet a 410 before it relists (tests/restart.rs).
struct WatchBackoff {
    next: Duration,
}

const WATCH_BACKOFF_MIN: Duration = Duration::from_millis(500);
const WATCH_BACKOFF_MAX: Duration = Duration::from_secs(8);

impl Default for WatchBackoff {
    fn default() -> Self {
        WatchBackoff {
            next: WATCH_BACKOFF_MIN,
        }
    }
}

impl Iterator for WatchBackoff {
    type Item = Duration;
    fn next(&mut self) -> Option<Duration> {
        let now = self.next;
        self.next = (self.next * 2).min(WATCH_BACKOFF_MAX);
        Some(now)
    }
}

impl kube::runtime::utils::Backoff for WatchBackoff {
    fn reset(&mut self) {
        self.next = WATCH_BACKOFF_MIN;
    }
}
