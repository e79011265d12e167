//! The API groups we read and write, the CAPI contract levels (v1beta1, v1beta2), and the
//! contract labels on provider CRDs that say which provider API version serves which contract.

use std::collections::BTreeMap;

use serde::Serialize;

pub const CAPI_GROUP: &str = "cluster.x-k8s.io";
pub const CONTROLPLANE_GROUP: &str = "controlplane.cluster.x-k8s.io";
pub const INFRASTRUCTURE_GROUP: &str = "infrastructure.cluster.x-k8s.io";
pub const BOOTSTRAP_GROUP: &str = "bootstrap.cluster.x-k8s.io";
pub const KAMAJI_GROUP: &str = "kamaji.clastix.io";
/// Cluster API's addons group (ClusterResourceSet).
pub const ADDONS_GROUP: &str = "addons.cluster.x-k8s.io";
/// The label prefix of contract labels on provider CRDs (`cluster.x-k8s.io/v1beta2: v1alpha2`).
pub(crate) const CONTRACT_LABEL_PREFIX: &str = "cluster.x-k8s.io/";

/// Our own API group: long operations the reconciler carries out (`kcore::ops`).
pub const OPS_GROUP: &str = "ops.capi-kamaji.io";
/// cert-manager's API: the providers' webhook certificates (`doctor` checks it is served).
pub const CERT_MANAGER_GROUP: &str = "cert-manager.io";

/// The groups discovery looks at.
pub const GROUPS: [&str; 8] = [
    CAPI_GROUP,
    CONTROLPLANE_GROUP,
    INFRASTRUCTURE_GROUP,
    BOOTSTRAP_GROUP,
    KAMAJI_GROUP,
    ADDONS_GROUP,
    OPS_GROUP,
    CERT_MANAGER_GROUP,
];

/// The group and version of an `apiVersion`: `cluster.x-k8s.io/v1beta2` is
/// `("cluster.x-k8s.io", "v1beta2")`, and a core kind's `v1` is `("", "v1")`.
pub fn split_api_version(api_version: &str) -> (&str, &str) {
    api_version.rsplit_once('/').unwrap_or(("", api_version))
}

/// Whether an `apiVersion` is of `group` (`cluster.x-k8s.io/v1beta2` is of [`CAPI_GROUP`]).
pub fn in_group(api_version: &str, group: &str) -> bool {
    split_api_version(api_version).0 == group
}

/// The CAPI core API version a management cluster serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum CapiVersion {
    /// CAPI 1.10 and earlier.
    #[serde(rename = "v1beta1")]
    V1Beta1,
    /// CAPI 1.11 and later.
    #[serde(rename = "v1beta2")]
    V1Beta2,
}

impl CapiVersion {
    pub fn as_str(self) -> &'static str {
        match self {
            CapiVersion::V1Beta1 => "v1beta1",
            CapiVersion::V1Beta2 => "v1beta2",
        }
    }
    pub fn parse(s: &str) -> Option<CapiVersion> {
        match s {
            "v1beta1" => Some(CapiVersion::V1Beta1),
            "v1beta2" => Some(CapiVersion::V1Beta2),
            _ => None,
        }
    }
    /// `cluster.x-k8s.io/<v>`: the apiVersion of CAPI's core kinds at this version.
    pub fn api_version(self) -> String {
        format!("{CAPI_GROUP}/{}", self.as_str())
    }
    /// The version of a `cluster.x-k8s.io/<v>` apiVersion.
    pub fn of_api_version(api_version: &str) -> Option<CapiVersion> {
        CapiVersion::parse(split_api_version(api_version).1)
    }
    /// The CAPI core version to use among the served ones: v1beta2 when served.
    pub fn choose<'a>(served: impl IntoIterator<Item = &'a str>) -> Option<CapiVersion> {
        served.into_iter().filter_map(CapiVersion::parse).max()
    }
}

/// The contract labels of one CRD: contract (`v1beta2`) → API versions (`v1alpha1`, `v1alpha2`).
pub type ContractLabels = BTreeMap<String, Vec<String>>;

/// Parses `cluster.x-k8s.io/<contract>: <v1>_<v2>` labels (other labels are ignored).
pub fn contract_labels(labels: &BTreeMap<String, String>) -> ContractLabels {
    let mut out = ContractLabels::new();
    for (k, v) in labels {
        let Some(contract) = k.strip_prefix(CONTRACT_LABEL_PREFIX) else {
            continue;
        };
        if !is_kube_version(contract) {
            continue;
        }
        let versions: Vec<String> = v
            .split('_')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect();
        if !versions.is_empty() {
            out.insert(contract.to_string(), versions);
        }
    }
    out
}

/// `v1`, `v1beta2`, `v1alpha1`, ...
pub(crate) fn is_kube_version(s: &str) -> bool {
    matches!(
        kube::core::Version::parse(s),
        kube::core::Version::Stable(_)
            | kube::core::Version::Beta(_, _)
            | kube::core::Version::Alpha(_, _)
    )
}

/// Sorts API versions best first (v1 > v1beta2 > v1beta1 > v1alpha2 ...).
pub fn sort_versions(versions: &mut [String]) {
    versions.sort_by_cached_key(|v| std::cmp::Reverse(kube::core::Version::parse(v).priority()));
}

/// The newest contract in a CRD's labels, with its newest API version.
pub fn latest_contract(labels: &ContractLabels) -> Option<(String, String)> {
    let mut contracts: Vec<String> = labels.keys().cloned().collect();
    sort_versions(&mut contracts);
    let contract = contracts.into_iter().next()?;
    let mut versions = labels.get(&contract)?.clone();
    sort_versions(&mut versions);
    Some((contract.clone(), versions.into_iter().next()?))
}

/// The API version to use for a provider kind under `contract`, as clusterctl does
/// (`GetLatestContractAndAPIVersionFromContract`): the newest version listed for that contract,
/// else for an older contract the core still tolerates (v1beta1 under v1beta2).
pub fn api_version_for_contract(labels: &ContractLabels, contract: &str) -> Option<String> {
    let mut candidates = vec![contract.to_string()];
    if contract == "v1beta2" {
        candidates.push("v1beta1".into());
    }
    for c in candidates {
        if let Some(vs) = labels.get(&c) {
            let mut vs = vs.clone();
            sort_versions(&mut vs);
            if let Some(v) = vs.into_iter().next() {
                return Some(v);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The contract labels of an object labelled `pairs`.
    fn contract_of(pairs: &[(&str, &str)]) -> ContractLabels {
        let labels = pairs.iter().map(|&(k, v)| (k.into(), v.into())).collect();
        contract_labels(&labels)
    }

    #[test]
    fn contract_labels_split_on_underscore_and_skip_other_labels() {
        let l = contract_of(&[
            ("cluster.x-k8s.io/v1beta2", "v1alpha1_v1alpha2"),
            ("cluster.x-k8s.io/v1beta1", "v1alpha1"),
            ("cluster.x-k8s.io/provider", "control-plane-kamaji"),
            ("app", "x"),
        ]);
        assert_eq!(l.len(), 2);
        assert_eq!(l["v1beta2"], vec!["v1alpha1", "v1alpha2"]);
        assert_eq!(
            latest_contract(&l),
            Some(("v1beta2".into(), "v1alpha2".into()))
        );
        assert_eq!(
            api_version_for_contract(&l, "v1beta2").as_deref(),
            Some("v1alpha2")
        );
        assert_eq!(
            api_version_for_contract(&l, "v1beta1").as_deref(),
            Some("v1alpha1")
        );
    }

    #[test]
    fn v1beta1_providers_are_tolerated_under_v1beta2() {
        let byoh = contract_of(&[("cluster.x-k8s.io/v1beta1", "v1beta1")]);
        assert_eq!(
            api_version_for_contract(&byoh, "v1beta2").as_deref(),
            Some("v1beta1")
        );
        assert_eq!(
            api_version_for_contract(&byoh, "v1beta1").as_deref(),
            Some("v1beta1")
        );
        let new_only = contract_of(&[("cluster.x-k8s.io/v1beta2", "v1alpha2")]);
        assert_eq!(api_version_for_contract(&new_only, "v1beta1"), None);
    }

    #[test]
    fn core_version_prefers_v1beta2() {
        assert_eq!(
            CapiVersion::choose(["v1beta1", "v1beta2"]),
            Some(CapiVersion::V1Beta2)
        );
        assert_eq!(CapiVersion::choose(["v1beta1"]), Some(CapiVersion::V1Beta1));
        assert_eq!(CapiVersion::choose(["v1alpha4"]), None);
        assert_eq!(
            CapiVersion::of_api_version("cluster.x-k8s.io/v1beta1"),
            Some(CapiVersion::V1Beta1)
        );
    }

    #[test]
    fn versions_sort_best_first() {
        let mut v = vec![
            "v1alpha1".to_string(),
            "v1beta1".into(),
            "v1".into(),
            "v1beta2".into(),
        ];
        sort_versions(&mut v);
        assert_eq!(v, vec!["v1", "v1beta2", "v1beta1", "v1alpha1"]);
    }
}
