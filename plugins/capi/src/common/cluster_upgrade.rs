//! A cluster's ClusterUpgrade (`ops.capi-kamaji.io`), the upgrade the reconciler carries out:
//! where its API is served, and what its spec and status say.

use kclient::discovery::ServerApis;
use kclient::error::Error;
use kcore::groups::OPS_GROUP;
use kcore::ops::api::{ClusterUpgradeSpec, ClusterUpgradeStatus};
use kcore::ops::phase;
use kube::discovery::ApiResource;
use serde_json::Value;

/// The ClusterUpgrade resource, where the API is served.
pub fn resource(apis: &ServerApis) -> Option<ApiResource> {
    apis.kind(OPS_GROUP, "ClusterUpgrade")
        .map(|k| k.resource(k.version()))
}

/// The error of a verb that needs the ClusterUpgrade API where it is not served.
pub fn not_installed(apis: &ServerApis) -> Error {
    apis.not_installed(
        "The ClusterUpgrade API",
        OPS_GROUP,
        "install the reconciler with kubectl kamaji install",
    )
}

pub fn status_of(obj: &Value) -> ClusterUpgradeStatus {
    serde_json::from_value(obj["status"].clone()).unwrap_or_default()
}

pub fn spec_of(obj: &Value) -> ClusterUpgradeSpec {
    serde_json::from_value(obj["spec"].clone()).unwrap_or_default()
}

/// Whether the status is about the current spec (the reconciler has seen it).
pub fn current(obj: &Value) -> bool {
    obj["status"]["observedGeneration"].as_i64() == obj["metadata"]["generation"].as_i64()
}

/// `to VERSION (PHASE, step N/M)`.
pub fn in_words(obj: &Value) -> String {
    let st = status_of(obj);
    let spec = spec_of(obj);
    format!(
        "to {} ({}, step {})",
        spec.version,
        st.phase.as_deref().unwrap_or("Pending"),
        st.progress.as_deref().unwrap_or("0/?")
    )
}

/// Whether the upgrade has ended (succeeded, failed or cancelled) for its current spec.
pub fn is_finished(cu: &Value) -> bool {
    current(cu)
        && status_of(cu)
            .phase
            .as_deref()
            .is_some_and(phase::is_terminal)
}
