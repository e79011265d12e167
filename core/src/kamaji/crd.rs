//! The KamajiControlPlane and KamajiControlPlaneTemplate CRDs, generated from the Rust types:
//! both versions in one CRD (v1alpha2 storage, no conversion webhook), with CACPPK's contract
//! labels ([`crate::labels::contract_labels`]).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

use super::api::{v1alpha1, v1alpha2};
use crate::crd::for_the_api_server;
use crate::labels::contract_labels;

fn merge(
    storage: CustomResourceDefinition,
    other: CustomResourceDefinition,
) -> Result<CustomResourceDefinition, crate::Error> {
    let mut crd = kube::core::crd::merge_crds(vec![storage, other], "v1alpha2").map_err(|e| {
        crate::Error::other(format!(
            "generating the KamajiControlPlane CRDs failed: {e}"
        ))
    })?;
    crd.metadata.labels = Some(contract_labels());
    Ok(for_the_api_server(crd))
}

/// The KamajiControlPlane and KamajiControlPlaneTemplate CRDs.
pub fn try_crds() -> Result<Vec<CustomResourceDefinition>, crate::Error> {
    Ok(vec![
        merge(
            v1alpha2::KamajiControlPlane::crd(),
            v1alpha1::KamajiControlPlane::crd(),
        )?,
        merge(
            v1alpha2::KamajiControlPlaneTemplate::crd(),
            v1alpha1::KamajiControlPlaneTemplate::crd(),
        )?,
    ])
}

/// The KamajiControlPlane and KamajiControlPlaneTemplate CRDs. The two versions of each kind
/// are generated from types in this crate with identical names, groups and scopes, the only
/// things `merge_crds` checks, so merging cannot fail; a failure would be a build defect and
/// is covered by the unit tests. It yields an empty list rather than panicking.
pub fn crds() -> Vec<CustomResourceDefinition> {
    try_crds().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_versions_one_storage_contract_labels_and_names() {
        let crds = try_crds().unwrap();
        assert_eq!(crds.len(), 2);
        for c in &crds {
            let l = c.metadata.labels.clone().unwrap();
            assert_eq!(l["cluster.x-k8s.io/v1beta2"], "v1alpha2");
            assert_eq!(l["cluster.x-k8s.io/v1beta1"], "v1alpha1");
            let v: Vec<(&str, bool, bool)> = c
                .spec
                .versions
                .iter()
                .map(|v| (v.name.as_str(), v.served, v.storage))
                .collect();
            assert!(v.contains(&("v1alpha2", true, true)), "{v:?}");
            assert!(v.contains(&("v1alpha1", true, false)), "{v:?}");
            assert!(c.spec.conversion.is_none());
            assert_eq!(
                c.spec.names.categories,
                Some(vec!["cluster-api".into(), "kamaji".into()])
            );
        }
        assert_eq!(crds[0].spec.names.short_names, Some(vec!["ktcp".into()]));
        assert_eq!(crds[1].spec.names.short_names, Some(vec!["ktcpt".into()]));
        let v2 = crds[0]
            .spec
            .versions
            .iter()
            .find(|v| v.name == "v1alpha2")
            .unwrap();
        let scale = v2.subresources.as_ref().unwrap().scale.as_ref().unwrap();
        assert_eq!(scale.spec_replicas_path, ".spec.replicas");
        assert_eq!(
            scale.label_selector_path.as_deref(),
            Some(".status.selector")
        );
        let cols: Vec<&str> = v2
            .additional_printer_columns
            .iter()
            .flatten()
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(cols, ["Version", "Initialized", "Ready", "Age"]);
        let s = serde_json::to_value(v2.schema.as_ref().unwrap()).unwrap();
        let spec = &s["openAPIV3Schema"]["properties"]["spec"];
        assert_eq!(
            spec["properties"]["controlPlaneEndpoint"]["minProperties"],
            1
        );
        assert_eq!(spec["required"], serde_json::json!(["version"]));
        assert!(
            spec["properties"]["network"]["x-kubernetes-validations"]
                .as_array()
                .is_some_and(|a| a.len() == 2)
        );
    }
}
