//! The KamajiControlPlane controller: watch-driven (no resync, no polling while it waits).
//!
//! - [`run`] (`watch`): discovery (`discover`), then one watch per kind whose changes can change
//!   a KamajiControlPlane's outcome, and (`remote`) one per TenantControlPlane that lives in
//!   another cluster;
//! - `reconcile`: one reconcile, in one direction: `observe` (what exists, as the typed facts
//!   of `kcore::kamaji::reconcile::Found`, from the caches of `cache`), then
//!   `kcore::kamaji::reconcile::decide` (pure), `act` (the writes: the TenantControlPlane, the
//!   endpoint, `infra_cluster` for the infrastructure cluster, `secrets` for the Secrets CAPI
//!   reads, the finalizer of an external cluster reference), then `status` (one write, in the
//!   served contract's shape).

use std::collections::HashMap;
use std::sync::Mutex;

use kube::api::{Api, DynamicObject};
use kube::{Client, ResourceExt};

use crate::api::v1alpha2::KamajiControlPlane;
use crate::skeleton::{Base, Retries};

mod act;
mod cache;
mod discover;
mod infra_cluster;
mod observe;
mod reconcile;
mod remote;
mod secrets;
mod status;
mod stored;
mod watch;

pub use crate::skeleton::MANAGER;
pub use discover::{Discovered, discover};
pub use watch::run;

use kcore::kamaji::reconcile::Cond;
/// Finalizer used with an external cluster reference.
pub use kcore::kamaji::reconcile::ECR_FINALIZER;
use kcore::labels::CLUSTER_NAME_LABEL;

/// Settings of the controller.
#[derive(Clone, Debug, Default)]
pub struct Config {
    /// Watch only these namespaces (all when empty): each is watched on its own, so that the
    /// reconciler needs no cluster-wide grant on what lives there (`--namespaces`).
    pub namespaces: Vec<String>,
    /// More infrastructure-cluster kinds to patch generically (`spec.controlPlaneEndpoint`).
    pub extra_infra_kinds: Vec<String>,
    /// Do not touch infrastructure clusters at all.
    pub skip_infra_patch: bool,
    /// Allow `deployment.externalClusterReference` (TCP hosted in another cluster).
    pub external_cluster_reference: bool,
    /// Allow the external kubeconfig Secret in another namespace.
    pub external_cluster_reference_cross_namespace: bool,
    /// Concurrent reconciles.
    pub concurrency: u16,
}

impl Config {
    /// Where the watches run: each watched namespace, or (`None`) every namespace at once.
    pub fn scopes(&self) -> Vec<Option<String>> {
        if self.namespaces.is_empty() {
            vec![None]
        } else {
            self.namespaces.iter().cloned().map(Some).collect()
        }
    }
}

struct KcpCtx {
    base: Base,
    cfg: Config,
    disc: Discovered,
    /// (namespace, cluster name) → KamajiControlPlane name, learnt from Cluster events.
    clusters: Mutex<HashMap<(String, String), String>>,
    retries: Retries<stored::StoredKcp>,
    /// (namespace, KCP name) → what this process last wrote for it, to skip writes that would
    /// change nothing when the object read is older than that write.
    written: Mutex<HashMap<(String, String), Written>>,
    /// What the watches delivered (`cache`).
    seen: Seen,
    /// The watches of TenantControlPlanes in other clusters (`remote`).
    remote: remote::RemoteWatches,
}

/// The watches' caches: Clusters and TenantControlPlanes as the fields the reconcile reads, and
/// the resourceVersions of the Secrets owned by a KamajiControlPlane or a TenantControlPlane and
/// of the infrastructure clusters (by kind).
#[derive(Default)]
struct Seen {
    clusters: cache::Cache<cache::Kept>,
    tcps: cache::Cache<cache::Kept>,
    secrets: cache::Cache<u64>,
    infra: HashMap<String, cache::Cache<u64>>,
}

/// What was last written for one KamajiControlPlane.
#[derive(Clone, Debug, Default, PartialEq)]
struct Written {
    /// The applied TenantControlPlane: hash of the body, and the uid and generation the API
    /// server answered with. While the TCP has that uid and generation, nobody changed its spec
    /// since, and applying the same body again would change nothing.
    tcp: Option<(u64, String, i64)>,
    /// Hash of the last status written (without transition times) and the KCP's uid.
    status: Option<(u64, String)>,
    /// The Secrets copied for CAPI: `<cluster>-kubeconfig`, then `<cluster>-ca` (`secrets`).
    copies: [Option<Copied>; 2],
    /// The infrastructure cluster found with (or patched to) an endpoint: a hash of its kind,
    /// name and the endpoint, and its resourceVersion then (`cache::version`). While its watch
    /// shows that resourceVersion, it needs no reading.
    infra: Option<(u64, u64)>,
    /// The endpoint written to the KCP's spec: a hash of the KCP's uid and the endpoint, and the
    /// KCP's generation after.
    endpoint: Option<(u64, i64)>,
}

/// A Secret copied (or found up to date), as hashes (10,000 KCPs hold two each): of the source's
/// name, of what was written (the copy's name among it), and the resourceVersions of the source
/// read and of the copy after (`cache::version`). While the Secret watch shows both Secrets at
/// those resourceVersions, neither has changed and the copy needs no reading.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Copied {
    src: u64,
    src_rv: u64,
    hash: u64,
    dst_rv: u64,
}

/// A hash of anything hashable (the compact records of [`Written`]).
fn hash_of(v: impl std::hash::Hash) -> u64 {
    use std::hash::Hasher;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    v.hash(&mut h);
    h.finish()
}

/// A hash of a JSON value (serde_json's maps are ordered, so equal values hash alike).
fn json_hash(v: &serde_json::Value) -> u64 {
    hash_of(serde_json::to_vec(v).unwrap_or_default())
}

impl KcpCtx {
    fn written(&self, kcp: &KamajiControlPlane) -> Written {
        let key = (kcp_ns(kcp), kcp.name_any());
        self.written
            .lock()
            .ok()
            .and_then(|m| m.get(&key).cloned())
            .unwrap_or_default()
    }

    fn set_written(&self, kcp: &KamajiControlPlane, f: impl FnOnce(&mut Written)) {
        if let Ok(mut m) = self.written.lock() {
            f(m.entry((kcp_ns(kcp), kcp.name_any())).or_default());
        }
    }

    fn forget_written(&self, kcp: &KamajiControlPlane) {
        if let Ok(mut m) = self.written.lock() {
            m.remove(&(kcp_ns(kcp), kcp.name_any()));
        }
    }
}

/// Where a KamajiControlPlane's TenantControlPlane lives: next to it, or (`remote`) in the
/// cluster its external cluster reference points to.
struct TcpPlace {
    client: Client,
    ns: String,
    name: String,
    remote: bool,
    /// TenantControlPlanes of `ns` through `client`.
    api: Api<DynamicObject>,
}

impl TcpPlace {
    fn new(ctx: &KcpCtx, client: Client, ns: String, name: String, remote: bool) -> TcpPlace {
        let api = Api::namespaced_with(client.clone(), &ns, &ctx.disc.tcp);
        TcpPlace {
            client,
            ns,
            name,
            remote,
            api,
        }
    }
}

fn kcp_ns(kcp: &KamajiControlPlane) -> String {
    kcp.namespace().unwrap_or_default()
}

/// A JSON merge patch of the KamajiControlPlane itself (its finalizers, its endpoint).
async fn patch_kcp(
    kcp: &KamajiControlPlane,
    ctx: &KcpCtx,
    body: &serde_json::Value,
) -> Result<KamajiControlPlane, kube::Error> {
    let api: Api<KamajiControlPlane> = Api::namespaced(ctx.base.client.clone(), &kcp_ns(kcp));
    let pp = kube::api::PatchParams::default();
    api.patch(&kcp.name_any(), &pp, &kube::api::Patch::Merge(body))
        .await
}
