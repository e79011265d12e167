//! Applying a step: its template clones (server-side apply, idempotent), then its version patch
//! (an RFC 6902 patch that sets values, so sending it twice changes nothing the second time).

use kcore::ops::ClusterUpgrade;
use kcore::ops::api::{ClusterUpgradeStatus, PlannedStep};
use kube::ResourceExt;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::Value;

use super::UpgradeCtx;
use super::world::resource;
use crate::Error;
use crate::skeleton::MANAGER;

fn group_version(api_version: &str) -> (&str, Option<&str>) {
    let (g, v) = kcore::groups::split_api_version(api_version);
    (g, Some(v))
}

async fn apply_step(ctx: &UpgradeCtx, ns: &str, s: &PlannedStep) -> Result<(), Error> {
    for c in &s.clone_templates {
        let av = c.object["apiVersion"].as_str().unwrap_or_default();
        let (g, v) = group_version(av);
        let res = resource(ctx, g, v, &c.kind).await?;
        let api: Api<DynamicObject> = Api::namespaced_with(ctx.base.client.clone(), ns, &res);
        let mut body = c.object.clone();
        if let Some(meta) = body.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.retain(|k, _| matches!(k.as_str(), "name" | "labels" | "annotations"));
            meta.insert("name".into(), Value::from(c.new_name.clone()));
        }
        if let Some(o) = body.as_object_mut() {
            o.remove("status");
        }
        api.patch(
            &c.new_name,
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(body),
        )
        .await?;
    }
    let p = &s.patch;
    let (g, v) = group_version(&p.api_version);
    let res = resource(ctx, g, v, &p.kind).await?;
    let api: Api<DynamicObject> = Api::namespaced_with(ctx.base.client.clone(), ns, &res);
    let ops: json_patch::Patch = serde_json::from_value(p.json_patch.clone()).map_err(|e| {
        Error::Other(format!(
            "step {}: a malformed patch in status: {e}",
            s.number
        ))
    })?;
    api.patch(&p.name, &PatchParams::default(), &Patch::<()>::Json(ops))
        .await?;
    tracing::info!(step = s.number, target = %s.target, to = %s.to_version, "applied");
    Ok(())
}

/// Applies the steps `numbers` of the status plan.
pub(super) async fn steps(
    ctx: &UpgradeCtx,
    cu: &ClusterUpgrade,
    st: &ClusterUpgradeStatus,
    numbers: &[u32],
) -> Result<(), Error> {
    let ns = cu.namespace().unwrap_or_default();
    for n in numbers {
        if let Some(s) = st.plan.iter().find(|s| s.number == *n) {
            apply_step(ctx, &ns, s).await?;
        }
    }
    Ok(())
}
