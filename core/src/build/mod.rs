//! Pure builders: the API objects a verb creates, from its flags. No I/O; unit tested.

pub mod byoh;
pub mod cni;
pub mod kube_proxy;
pub mod pki;

use serde_json::{Value, json};

use crate::groups::ADDONS_GROUP;

/// A ClusterResourceSet named `name` (`addons_version`: `v1beta2` or `v1beta1`) that applies
/// `resources` (`{kind, name}` each) once to the Clusters whose labels match `selector`.
pub(crate) fn cluster_resource_set(
    (name, namespace): (&str, &str),
    labels: &Value,
    addons_version: &str,
    selector: Value,
    resources: Value,
) -> Value {
    json!({
        "apiVersion": format!("{ADDONS_GROUP}/{addons_version}"),
        "kind": "ClusterResourceSet",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "strategy": "ApplyOnce",
            "clusterSelector": {"matchLabels": selector},
            "resources": resources,
        },
    })
}
