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

    /// Every property path under `schema` (`a.b[].c`), `prefix` first.
    fn paths(schema: &serde_json::Value, prefix: &str, out: &mut Vec<String>) {
        if let Some(props) = schema["properties"].as_object() {
            for (k, v) in props {
                let p = format!("{prefix}.{k}");
                out.push(p.clone());
                paths(v, &p, out);
            }
        }
        if schema["items"].is_object() {
            paths(&schema["items"], &format!("{prefix}[]"), out);
        }
    }

    /// The v1alpha1 view has no conversion webhook: what is written through it is stored as
    /// v1alpha2 and pruned by v1alpha2's schema. So every field of the v1alpha1 spec and status
    /// (the v1beta1 contract's `initialized`, its counters, its conditions' `severity`) must
    /// have a place in v1alpha2's, or it is silently lost.
    #[test]
    fn the_storage_version_keeps_every_field_of_the_v1alpha1_view() {
        let crds = try_crds().unwrap();
        for c in &crds {
            let schema = |name: &str| {
                let v = c.spec.versions.iter().find(|v| v.name == name).unwrap();
                let s = serde_json::to_value(v.schema.as_ref().unwrap()).unwrap();
                s["openAPIV3Schema"].clone()
            };
            let (mut old, mut storage) = (Vec::new(), Vec::new());
            paths(&schema("v1alpha1"), "", &mut old);
            paths(&schema("v1alpha2"), "", &mut storage);
            let lost: Vec<&String> = old.iter().filter(|p| !storage.contains(p)).collect();
            assert!(
                lost.is_empty(),
                "{}: v1alpha2 prunes {lost:?}",
                c.spec.names.kind
            );
            if c.spec.names.kind == "KamajiControlPlane" {
                assert!(old.contains(&".status.conditions[].severity".to_string()));
            }
        }
    }

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
