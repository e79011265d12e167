//! The infrastructure cluster named by the Cluster's `spec.infrastructureRef`: its control-plane
//! endpoint set (or checked) as its kind needs (see `kcore::kamaji::infra`).

use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};

use super::cache::{Cached, version};
use super::{Cond, KcpCtx};
use crate::Error;
use crate::api::v1alpha2::KamajiControlPlane;
use crate::endpoint::{self, Endpoint};
use crate::infra::{self, Plan};

const C: &str = "InfrastructureClusterPatched";

/// The `InfrastructureClusterPatched` condition, after patching the infrastructure cluster if
/// its kind wants the endpoint.
pub(super) async fn infra_step(
    kcp: &KamajiControlPlane,
    ctx: &KcpCtx,
    cluster: &Value,
    ns: &str,
    ep: &Endpoint,
) -> Result<Cond, Error> {
    let r = &cluster["spec"]["infrastructureRef"];
    let kind = r["kind"].as_str().unwrap_or_default();
    let name = r["name"].as_str().unwrap_or_default();
    if kind.is_empty() || name.is_empty() {
        return Ok(Cond::yes(C, "NoInfrastructureCluster"));
    }
    // v1beta2 references carry `apiGroup`, v1beta1 ones `apiVersion`.
    let group = r["apiGroup"]
        .as_str()
        .map(str::to_string)
        .or_else(|| {
            r["apiVersion"]
                .as_str()
                .map(|av| kcore::groups::split_api_version(av).0.to_string())
        })
        .unwrap_or_default();
    let Some(action) = infra::action_for(kind, &ctx.cfg.extra_infra_kinds) else {
        return Ok(Cond::no(
            C,
            "UnsupportedInfrastructureProvider",
            format!(
                "unsupported infrastructure provider kind {kind}; start the reconciler with --dynamic-infrastructure-clusters {kind} to set its spec.controlPlaneEndpoint"
            ),
        ));
    };
    let Some(res) = infra_resource(ctx, kind, &group).await else {
        return Ok(Cond::no(
            C,
            "InfrastructureKindNotServed",
            format!("{kind}.{group} is not served by the API server; install its provider"),
        ));
    };
    // Found with (or patched to) this endpoint, and not changed since: nothing to read.
    let seen = ctx
        .seen
        .infra
        .get(kind)
        .filter(|_| ctx.disc.infra.get(kind).is_some_and(|a| a.group == group));
    let done = super::hash_of((kind, name, ep.to_string()));
    if let (Some((d, rv)), Some(seen)) = (ctx.written(kcp).infra, seen)
        && d == done
        && seen.get(ns, name) == Cached::Present(rv)
    {
        return Ok(Cond::yes(C, "Succeeded"));
    }
    let remember = |rv: Option<String>| {
        ctx.set_written(kcp, |w| w.infra = rv.map(|rv| (done, version(&rv))));
    };
    let api: Api<DynamicObject> = Api::namespaced_with(ctx.base.client.clone(), ns, &res);
    let Some(obj) = api.get_opt(name).await? else {
        return Ok(Cond::no(
            C,
            "WaitingForInfrastructureCluster",
            format!("{kind} {ns}/{name} does not exist yet"),
        ));
    };
    let obj_v = serde_json::to_value(&obj).unwrap_or(Value::Null);
    match infra::plan(action, kind, &obj_v, ep) {
        Plan::UpToDate => {
            remember(obj.metadata.resource_version.clone());
            Ok(Cond::yes(C, "Succeeded"))
        }
        Plan::Mismatch(m) => Ok(Cond::no(C, "ControlPlaneEndpointMismatch", m)),
        Plan::Patch { spec, status_ready } => {
            let rv = patch_infra(&api, name, action, spec, status_ready).await?;
            remember(rv);
            Ok(Cond::yes(C, "Succeeded"))
        }
    }
}

/// The kind's API resource: discovered at start-up, else resolved now (a CRD installed after
/// start-up; its changes are not watched until a restart).
async fn infra_resource(ctx: &KcpCtx, kind: &str, group: &str) -> Option<ApiResource> {
    if let Some(a) = ctx.disc.infra.get(kind).filter(|a| a.group == group) {
        return Some(a.clone());
    }
    kube::discovery::group(&ctx.base.client, group)
        .await
        .ok()
        .and_then(|g| {
            g.resources_by_stability()
                .into_iter()
                .find(|(a, _)| a.kind == kind)
                .map(|(a, _)| a)
        })
}

/// Merge-patches the planned `spec` (if any) and `status.ready=true` (if planned); returns the
/// resourceVersion the last patch left (none when nothing was patched).
async fn patch_infra(
    api: &Api<DynamicObject>,
    name: &str,
    action: endpoint::EndpointPatch,
    spec: Value,
    status_ready: bool,
) -> Result<Option<String>, Error> {
    let mut rv = None;
    if spec.as_object().is_some_and(|o| !o.is_empty()) {
        let mut body = json!({"spec": spec});
        if action == endpoint::EndpointPatch::EndpointAndReady {
            body["metadata"] = json!({"annotations": {"cluster.x-k8s.io/managed-by": "kamaji"}});
        }
        let o = api
            .patch(name, &PatchParams::default(), &Patch::Merge(&body))
            .await?;
        rv = o.metadata.resource_version;
    }
    if status_ready {
        let body = json!({"status": {"ready": true}});
        let o = match api
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&body))
            .await
        {
            Ok(o) => o,
            // No status subresource: status is part of the main resource.
            Err(kube::Error::Api(e)) if e.code == 404 => {
                api.patch(name, &PatchParams::default(), &Patch::Merge(&body))
                    .await?
            }
            Err(e) => return Err(e.into()),
        };
        rv = o.metadata.resource_version;
    }
    Ok(rv)
}
