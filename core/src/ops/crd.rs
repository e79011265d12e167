//! The ClusterUpgrade CRD, generated from the Rust types, with the rules the API server enforces.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, ValidationRule,
};
use kube::CustomResourceExt;

use super::api::{ClusterUpgrade, FleetUpgrade};
use super::backup::TenantBackup;
use crate::crd::{for_the_api_server, root_schema_mut};
use crate::groups::CONTRACT_LABEL_PREFIX;

/// The CRD rules no schema can state: a ClusterUpgrade is named after its cluster, so the API
/// server refuses a second one for the same cluster (AlreadyExists), and the cluster it names
/// never changes. Root-level CEL rules may read `metadata.name` (Kubernetes CRD validation
/// rules, `x-kubernetes-validations`; GA since 1.29).
fn root_rules() -> Vec<ValidationRule> {
    vec![
        ValidationRule {
            rule: "self.metadata.name == self.spec.clusterName".into(),
            message: Some(
                "a ClusterUpgrade is named after its cluster (metadata.name must equal spec.clusterName): one per cluster"
                    .into(),
            ),
            ..Default::default()
        },
        ValidationRule {
            rule: "!has(oldSelf.spec) || self.spec.clusterName == oldSelf.spec.clusterName".into(),
            message: Some("spec.clusterName is immutable".into()),
            ..Default::default()
        },
    ]
}

fn labelled(mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
    let mut labels = crate::labels::contract_labels();
    // Part of the provider's components (the provider and clusterctl labels stay, so
    // `clusterctl move` carries upgrades along) but not a CAPI contract type: no contract labels.
    labels.retain(|k, _| !k.starts_with(&format!("{CONTRACT_LABEL_PREFIX}v1beta")));
    crd.metadata.labels = Some(labels);
    crd
}

/// The ClusterUpgrade, FleetUpgrade and TenantBackup CRDs.
pub fn try_crds() -> Result<Vec<CustomResourceDefinition>, crate::Error> {
    let mut crd = ClusterUpgrade::crd();
    for v in &mut crd.spec.versions {
        let root = root_schema_mut(v)
            .ok_or_else(|| crate::Error::other("the ClusterUpgrade CRD has no schema"))?;
        root.x_kubernetes_validations = Some(root_rules());
    }
    Ok(vec![
        labelled(crd),
        labelled(FleetUpgrade::crd()),
        labelled(TenantBackup::crd()),
    ]
    .into_iter()
    .map(for_the_api_server)
    .collect())
}

/// [`try_crds`], empty if generation failed (it cannot with these types; tests hold it).
pub fn crds() -> Vec<CustomResourceDefinition> {
    try_crds().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_crd_names_the_cluster_rule_and_a_status_subresource() {
        let crds = try_crds().unwrap();
        assert_eq!(crds.len(), 3);
        assert_eq!(crds[2].spec.names.kind, "TenantBackup");
        assert_eq!(crds[1].spec.names.kind, "FleetUpgrade");
        let crd = &crds[0];
        assert_eq!(crd.spec.group, "ops.capi-kamaji.io");
        assert_eq!(crd.spec.names.kind, "ClusterUpgrade");
        let v = &crd.spec.versions[0];
        assert!(v.subresources.as_ref().unwrap().status.is_some());
        let root = crate::crd::root_schema(v).unwrap();
        let rules = root.x_kubernetes_validations.as_ref().unwrap();
        assert!(
            rules[0]
                .rule
                .contains("self.metadata.name == self.spec.clusterName")
        );
        let json = serde_json::to_string(crd).unwrap();
        assert!(
            json.contains("x-kubernetes-preserve-unknown-fields"),
            "{json}"
        );
        assert!(
            !crd.metadata
                .labels
                .as_ref()
                .unwrap()
                .contains_key("cluster.x-k8s.io/v1beta2")
        );
    }
}
