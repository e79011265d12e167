//! Input the upgrade controllers cannot act on (a ClusterUpgrade's missing Cluster, a
//! FleetUpgrade's malformed selector, a plan that cannot be made): reported once as a condition
//! on the object's status and a Warning Event on it, then the controller waits for a change
//! (watch-driven) instead of retrying with back-off: retrying cannot fix an input.
//!
//! Also the ClusterUpgrade's ownership: owned by its Cluster, so the garbage collector deletes it
//! with the Cluster.

use k8s_openapi::api::core::v1::ObjectReference;
use kcore::ops::ClusterUpgrade;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::events::{Event, EventType};
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};

use super::UpgradeCtx;
use crate::Error;

/// Publishes a Warning Event on `regarding`. A failure is logged, not returned: the condition
/// on the object's status already says the same.
pub(super) async fn warn(ctx: &UpgradeCtx, regarding: &ObjectReference, reason: &str, note: &str) {
    let ev = Event {
        type_: EventType::Warning,
        reason: reason.into(),
        // events.k8s.io/v1 refuses a note over 1 kB.
        note: Some(note.chars().take(1000).collect()),
        action: "Reconcile".into(),
        secondary: None,
    };
    if let Err(e) = ctx.base.recorder.publish(&ev, regarding).await {
        tracing::warn!("publishing an event failed: {e}");
    }
}

/// The Cluster, as the owner reference the garbage collector follows. Not the controller (a
/// FleetUpgrade may be), and no blockOwnerDeletion: setting it needs rights on the Cluster's
/// finalizers (the OwnerReferencesPermissionEnforcement admission plugin).
pub(super) fn cluster_owner(cluster: &Value) -> Option<Value> {
    let uid = cluster["metadata"]["uid"].as_str()?;
    Some(json!({
        "apiVersion": cluster["apiVersion"],
        "kind": "Cluster",
        "name": cluster["metadata"]["name"],
        "uid": uid,
    }))
}

fn is_cluster_ref(o: &Value) -> bool {
    o["kind"] == "Cluster"
        && o["apiVersion"]
            .as_str()
            .is_some_and(|a| kcore::groups::in_group(a, kcore::groups::CAPI_GROUP))
}

/// Makes the Cluster an owner of its ClusterUpgrade, unless it is already (whoever created the
/// ClusterUpgrade may have set it). A merge patch of the whole list, guarded by the
/// resourceVersion read, so an owner someone else adds meanwhile is not lost (a conflict is
/// retried). An owner reference to an earlier Cluster of the same name is replaced.
pub(super) async fn own(
    ctx: &UpgradeCtx,
    cu: &ClusterUpgrade,
    cluster: &Value,
) -> Result<(), Error> {
    let Some(owner) = cluster_owner(cluster) else {
        return Ok(());
    };
    let mut refs: Vec<Value> = cu
        .owner_references()
        .iter()
        .filter_map(|o| serde_json::to_value(o).ok())
        .collect();
    if refs.iter().any(|o| o["uid"] == owner["uid"]) {
        return Ok(());
    }
    refs.retain(|o| !is_cluster_ref(o));
    refs.push(owner);
    let body = json!({"metadata": {
        "resourceVersion": cu.resource_version(),
        "ownerReferences": refs,
    }});
    let api: Api<ClusterUpgrade> =
        Api::namespaced(ctx.base.client.clone(), &cu.namespace().unwrap_or_default());
    api.patch(&cu.name_any(), &PatchParams::default(), &Patch::Merge(body))
        .await?;
    Ok(())
}

/// The message for a ClusterUpgrade whose Cluster is missing.
pub(super) fn cluster_not_found(cu: &ClusterUpgrade) -> String {
    let ns = cu.namespace().unwrap_or_default();
    format!(
        "Cluster {ns}/{} not found: a ClusterUpgrade upgrades the Cluster of its own name in its own namespace; nothing happens until that Cluster exists (create it, or delete this ClusterUpgrade)",
        cu.spec.cluster_name
    )
}

/// The reference an Event is about: the object, not one version of it. kube-runtime's
/// Recorder (kube-runtime 5.0.0, `events.rs`) keys its cache by this reference, so the same
/// warning about the same object (say, a second generation that names the same missing Cluster)
/// becomes one Event with a series count (a PATCH) rather than a new Event per resourceVersion.
pub(super) fn reference<K: Resource<DynamicType = ()>>(o: &K) -> ObjectReference {
    let mut r = o.object_ref(&());
    r.resource_version = None;
    r
}
