//! Observe: what one reconcile of a KamajiControlPlane reads, as typed facts
//! ([`kcore::kamaji::reconcile::Found`]), from the watches' caches, and from the API server only
//! what a cache cannot answer. Nothing here writes; the reading stops at the first fact that
//! leaves nothing more to read.

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DynamicObject};
use kube::{Client, Resource, ResourceExt};
use serde_json::Value;

use super::cache::{self, Cached};
use super::{KcpCtx, TcpPlace, kcp_ns};
use crate::Error;
use crate::api::ExternalClusterReference;
use crate::api::v1alpha2::KamajiControlPlane;
use kcore::kamaji::reconcile::{self, ECR_FINALIZER, Found};

/// What a reconcile found: where the TenantControlPlane lives is reached through a
/// [`TcpPlace`]; an external cluster that cannot be reached is an [`Error`].
pub(super) type Seen = Found<TcpPlace, Error>;

/// Reads, in order: deletion, the owning Cluster, the pause, where the TenantControlPlane
/// lives, the TenantControlPlane. An error is a read that failed (the reconcile backs off).
pub(super) async fn observe(kcp: &KamajiControlPlane, ctx: &KcpCtx) -> Result<Seen, Error> {
    if kcp.meta().deletion_timestamp.is_some() {
        return Ok(deleting(kcp, ctx).await);
    }
    let cluster = match owning_cluster(kcp, ctx).await? {
        Ok(c) => c,
        Err(found) => return Ok(found),
    };
    if reconcile::paused(&cluster, kcp) {
        return Ok(Found::Paused);
    }
    let place = match tcp_place(kcp, ctx).await {
        Ok(p) => p,
        Err(found) => return Ok(found),
    };
    Ok(match read_tcp(kcp, ctx, &place).await? {
        TcpRead::Is(tcp) => Found::All {
            cluster,
            place,
            tcp,
        },
        TcpRead::Behind => Found::TcpBehind,
    })
}

/// A deleted KamajiControlPlane: whether it carries our finalizer and, when that finalizer is
/// there for a TenantControlPlane in another cluster, that cluster.
async fn deleting(kcp: &KamajiControlPlane, ctx: &KcpCtx) -> Seen {
    let finalizer = kcp.finalizers().iter().any(|f| f == ECR_FINALIZER);
    let remote = match reconcile::external_reference(kcp) {
        // Watched until the remote TenantControlPlane is gone and the finalizer released.
        Some(r) if finalizer && ctx.cfg.external_cluster_reference => Some(
            remote_client(kcp, r, ctx)
                .await
                .map(|(c, kubeconfig)| remote_place(kcp, ctx, c, &kubeconfig)),
        ),
        _ => {
            ctx.remote.stop(&kcp_key(kcp));
            None
        }
    };
    Found::Deleting { finalizer, remote }
}

/// The owning Cluster as JSON (kind and group checked, not just the first ownerReference),
/// remembered for the Cluster and infrastructure-cluster watches; from the watch's cache, read
/// from the API server only when the cache has none. `Err`: the reading stops there.
async fn owning_cluster(
    kcp: &KamajiControlPlane,
    ctx: &KcpCtx,
) -> Result<Result<Value, Seen>, Error> {
    let ns = kcp_ns(kcp);
    let owner = kcp.owner_references().iter().find(|o| {
        o.kind == "Cluster" && kcore::groups::in_group(&o.api_version, kcore::groups::CAPI_GROUP)
    });
    let Some(owner) = owner else {
        return Ok(Err(Found::NoClusterOwner));
    };
    // Remembered before the read, so that a change of the Cluster from now on is seen.
    if let Ok(mut m) = ctx.clusters.lock() {
        m.insert((ns.clone(), owner.name.clone()), kcp.name_any());
    }
    let cached = match ctx.seen.clusters.get(&ns, &owner.name) {
        Cached::Present(k) => cache::parse::<DynamicObject>(&k),
        Cached::Absent | Cached::Unknown => None,
    };
    let cluster = match cached {
        Some(c) => Some(c),
        None => {
            let clusters: Api<DynamicObject> =
                Api::namespaced_with(ctx.base.client.clone(), &ns, &ctx.disc.cluster);
            clusters.get_opt(&owner.name).await?
        }
    };
    Ok(match cluster {
        Some(c) => Ok(serde_json::to_value(&c).unwrap_or(Value::Null)),
        None => Err(Found::ClusterMissing {
            namespace: ns,
            name: owner.name.clone(),
        }),
    })
}

/// Where the TenantControlPlane lives: next to the KCP, or in the cluster the external cluster
/// reference points to (which needs `--external-cluster-reference`). `Err`: the reading stops
/// there.
async fn tcp_place(kcp: &KamajiControlPlane, ctx: &KcpCtx) -> Result<TcpPlace, Seen> {
    let Some(r) = reconcile::external_reference(kcp) else {
        ctx.remote.stop(&kcp_key(kcp));
        return Ok(place(kcp, ctx, ctx.base.client.clone()));
    };
    if !ctx.cfg.external_cluster_reference {
        ctx.remote.stop(&kcp_key(kcp));
        return Err(Found::ExternalReferenceDisabled);
    }
    match remote_client(kcp, r, ctx).await {
        Ok((c, kubeconfig)) => Ok(remote_place(kcp, ctx, c, &kubeconfig)),
        Err(e) => Err(Found::ExternalClusterUnreachable(e)),
    }
}

fn place(kcp: &KamajiControlPlane, ctx: &KcpCtx, client: Client) -> TcpPlace {
    let at = reconcile::tcp_at(kcp);
    TcpPlace::new(ctx, client, at.namespace, at.name, at.remote)
}

/// The place of a TenantControlPlane in another cluster, which is then watched there.
fn remote_place(
    kcp: &KamajiControlPlane,
    ctx: &KcpCtx,
    client: Client,
    kubeconfig: &str,
) -> TcpPlace {
    let p = place(kcp, ctx, client);
    ctx.remote.ensure(
        &kcp_key(kcp),
        super::remote::Target {
            kubeconfig,
            client: p.client.clone(),
            tcp: &ctx.disc.tcp,
            namespace: &p.ns,
            name: &p.name,
        },
    );
    p
}

fn kcp_key(kcp: &KamajiControlPlane) -> super::remote::KcpKey {
    (kcp_ns(kcp), kcp.name_any())
}

/// A client for the external cluster, from the kubeconfig Secret the reference names (in the
/// KCP's namespace unless cross-namespace references are allowed), and the kubeconfig's text.
async fn remote_client(
    kcp: &KamajiControlPlane,
    r: &ExternalClusterReference,
    ctx: &KcpCtx,
) -> Result<(Client, String), Error> {
    let ns = if r.kubeconfig_secret_namespace.is_empty() {
        kcp_ns(kcp)
    } else {
        if r.kubeconfig_secret_namespace != kcp_ns(kcp)
            && !ctx.cfg.external_cluster_reference_cross_namespace
        {
            return Err(Error::Other(format!(
                "externalClusterReference.kubeconfigSecretNamespace {:?} differs from the KamajiControlPlane's namespace; start the reconciler with --external-cluster-reference-cross-namespace to allow it",
                r.kubeconfig_secret_namespace
            )));
        }
        r.kubeconfig_secret_namespace.clone()
    };
    let secrets: Api<Secret> = Api::namespaced(ctx.base.client.clone(), &ns);
    let s = secrets
        .get_opt(&r.kubeconfig_secret_name)
        .await?
        .ok_or_else(|| {
            Error::Other(format!(
                "external cluster kubeconfig Secret {ns}/{} not found",
                r.kubeconfig_secret_name
            ))
        })?;
    let data = s
        .data
        .as_ref()
        .and_then(|d| d.get(&r.kubeconfig_secret_key))
        .ok_or_else(|| {
            Error::Other(format!(
                "Secret {ns}/{} has no key {:?}",
                r.kubeconfig_secret_name, r.kubeconfig_secret_key
            ))
        })?;
    let text = String::from_utf8_lossy(&data.0).to_string();
    let kc = kube::config::Kubeconfig::from_yaml(&text)
        .map_err(|e| Error::Other(format!("external cluster kubeconfig: {e}")))?;
    let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .map_err(|e| Error::Other(format!("external cluster kubeconfig: {e}")))?;
    Ok((Client::try_from(cfg)?, text))
}

/// The TenantControlPlane as it is, or `Behind` when the watch has not yet brought what this
/// process last applied to it.
enum TcpRead {
    Is(Option<Value>),
    Behind,
}

/// The TenantControlPlane from the watch's cache; read from the API server only when it is in
/// another cluster (watched there, not cached: `remote`), when the watch has not listed yet, or when the cache has none
/// although this process applied one (created too recently for the watch to have brought it).
async fn read_tcp(
    kcp: &KamajiControlPlane,
    ctx: &KcpCtx,
    place: &TcpPlace,
) -> Result<TcpRead, Error> {
    let applied = ctx.written(kcp).tcp;
    if !place.remote {
        match ctx.seen.tcps.get(&place.ns, &place.name) {
            Cached::Present(k) => {
                if let Some(t) = cache::parse::<Value>(&k) {
                    let behind = applied.as_ref().is_some_and(|(_, uid, generation)| {
                        t["metadata"]["uid"] == *uid.as_str()
                            && t["metadata"]["generation"]
                                .as_i64()
                                .is_some_and(|g| g < *generation)
                    });
                    return Ok(if behind {
                        TcpRead::Behind
                    } else {
                        TcpRead::Is(Some(t))
                    });
                }
            }
            Cached::Absent if applied.is_none() => return Ok(TcpRead::Is(None)),
            Cached::Absent | Cached::Unknown => {}
        }
    }
    let t = place.api.get_opt(&place.name).await?;
    Ok(TcpRead::Is(
        t.map(|t| serde_json::to_value(t).unwrap_or(Value::Null)),
    ))
}
