//! A CustomResourceDefinition as the doctor reads it.

use crate::doctor::CrdInfo;

/// A CRD as the management checks read it: everything else (the schemas, which make CRDs
/// megabytes each) is skipped while parsing.
#[derive(serde::Deserialize, Default)]
#[serde(default)]
pub(super) struct NarrowCrd {
    metadata: NarrowName,
    spec: NarrowCrdSpec,
    status: NarrowCrdStatus,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct NarrowName {
    name: String,
    labels: std::collections::BTreeMap<String, String>,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct NarrowCrdSpec {
    group: String,
    names: NarrowCrdNames,
    versions: Vec<NarrowCrdVersion>,
    conversion: Option<NarrowConversion>,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct NarrowCrdNames {
    kind: String,
    plural: String,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct NarrowCrdVersion {
    name: String,
    served: bool,
    storage: bool,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct NarrowConversion {
    strategy: String,
}

#[derive(serde::Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct NarrowCrdStatus {
    stored_versions: Vec<String>,
}

impl NarrowCrd {
    pub(super) fn info(self) -> CrdInfo {
        let c = self;
        let storage = c.spec.versions.iter().find(|v| v.storage);
        CrdInfo {
            name: c.metadata.name,
            group: c.spec.group,
            kind: c.spec.names.kind,
            plural: c.spec.names.plural,
            storage_version: storage.map(|v| v.name.clone()).unwrap_or_default(),
            other_served: c
                .spec
                .versions
                .iter()
                .filter(|v| v.served && !v.storage)
                .map(|v| v.name.clone())
                .collect(),
            stored_versions: c.status.stored_versions,
            webhook_conversion: c
                .spec
                .conversion
                .as_ref()
                .is_some_and(|x| x.strategy == "Webhook"),
            conversion_failure: None,
            contracts: c
                .metadata
                .labels
                .keys()
                .filter_map(|k| k.strip_prefix(crate::groups::CONTRACT_LABEL_PREFIX))
                .filter(|v| v.starts_with('v'))
                .map(str::to_string)
                .collect(),
            provider: c
                .metadata
                .labels
                .get(crate::labels::PROVIDER_LABEL)
                .cloned()
                .unwrap_or_default(),
        }
    }
}
