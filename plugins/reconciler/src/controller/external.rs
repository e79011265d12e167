//! External cluster reference: a TenantControlPlane hosted in another cluster, reached through a
//! kubeconfig Secret, named `kcp-<uid>` there, and deleted through a finalizer (ownerReferences
//! do not cross clusters).

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DynamicObject};
use kube::runtime::controller::Action;
use kube::{Client, ResourceExt};
use serde_json::json;

use super::status::write_status_with;
use super::{Cond, ECR_FINALIZER, KcpCtx, TcpPlace, kcp_ns, no, patch_kcp, yes};
use crate::Error;
use crate::api::ExternalClusterReference;
use crate::api::v1alpha2::KamajiControlPlane;

fn external_reference(kcp: &KamajiControlPlane) -> Option<ExternalClusterReference> {
    kcp.spec
        .fields
        .deployment
        .as_ref()
        .and_then(|d| d.external_cluster_reference.clone())
}

fn remote_tcp_name(kcp: &KamajiControlPlane) -> String {
    format!("kcp-{}", kcp.uid().unwrap_or_default())
}

/// Where the TenantControlPlane lives: next to the KCP and named like it, or in the cluster the
/// external cluster reference points to (which needs `--external-cluster-reference`).
pub(super) async fn tcp_place(
    kcp: &KamajiControlPlane,
    ctx: &KcpCtx,
    conds: &mut Vec<Cond>,
) -> Result<Option<TcpPlace>, Error> {
    let Some(r) = external_reference(kcp) else {
        let (client, ns, name) = (ctx.base.client.clone(), kcp_ns(kcp), kcp.name_any());
        return Ok(Some(TcpPlace::new(ctx, client, ns, name, false)));
    };
    if !ctx.cfg.external_cluster_reference {
        let why = "deployment.externalClusterReference is set but the reconciler runs without --external-cluster-reference; restart it with that flag or remove the reference";
        let cond = no("FoundExternalReferenceClient", "FeatureDisabled", why);
        write_status_with(kcp, ctx, None, conds, cond).await?;
        return Ok(None);
    }
    match remote_client(kcp, &r, ctx).await {
        Ok(c) => {
            conds.push(yes("FoundExternalReferenceClient", "Succeeded"));
            ensure_finalizer(kcp, ctx).await?;
            let (ns, name) = (r.deployment_namespace.clone(), remote_tcp_name(kcp));
            Ok(Some(TcpPlace::new(ctx, c, ns, name, true)))
        }
        Err(e) => {
            let cond = no("FoundExternalReferenceClient", "Failed", e.to_string());
            write_status_with(kcp, ctx, None, conds, cond).await?;
            Err(e)
        }
    }
}

async fn ensure_finalizer(kcp: &KamajiControlPlane, ctx: &KcpCtx) -> Result<(), Error> {
    if kcp.finalizers().iter().any(|f| f == ECR_FINALIZER) {
        return Ok(());
    }
    let mut f = kcp.finalizers().to_vec();
    f.push(ECR_FINALIZER.into());
    let body = json!({"metadata": {"finalizers": f, "resourceVersion": kcp.resource_version()}});
    patch_kcp(kcp, ctx, &body).await?;
    Ok(())
}

/// Deletion: local TCPs and Secrets go with ownerReference garbage collection; a remote TCP is
/// deleted here. The external-reference finalizer is always released (also on NotFound).
pub(super) async fn finalize(kcp: &KamajiControlPlane, ctx: &KcpCtx) -> Result<Action, Error> {
    if !kcp.finalizers().iter().any(|f| f == ECR_FINALIZER) {
        return Ok(Action::await_change());
    }
    if let Some(r) = external_reference(kcp)
        && ctx.cfg.external_cluster_reference
    {
        match remote_client(kcp, &r, ctx).await {
            Ok(c) => {
                let api: Api<DynamicObject> =
                    Api::namespaced_with(c, &r.deployment_namespace, &ctx.disc.tcp);
                match api.delete(&remote_tcp_name(kcp), &Default::default()).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(e)) if e.code == 404 => {}
                    Err(e) => return Err(e.into()),
                }
            }
            // The kubeconfig Secret is gone: nothing can be reached any more; release.
            Err(e) => {
                tracing::warn!(kcp = %kcp.name_any(), "remote cluster unreachable, releasing the finalizer: {e}")
            }
        }
    }
    let f: Vec<String> = kcp
        .finalizers()
        .iter()
        .filter(|f| *f != ECR_FINALIZER)
        .cloned()
        .collect();
    let body = json!({"metadata": {"finalizers": f, "resourceVersion": kcp.resource_version()}});
    match patch_kcp(kcp, ctx, &body).await {
        Ok(_) => Ok(Action::await_change()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(Action::await_change()),
        Err(e) => Err(e.into()),
    }
}

/// A client for the external cluster, from the kubeconfig Secret the reference names (in the
/// KCP's namespace unless cross-namespace references are allowed).
async fn remote_client(
    kcp: &KamajiControlPlane,
    r: &ExternalClusterReference,
    ctx: &KcpCtx,
) -> Result<Client, Error> {
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
    Ok(Client::try_from(cfg)?)
}
