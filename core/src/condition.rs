//! The one condition model: CAPI's v1beta1 conditions (with severity) and `metav1.Condition`
//! (v1beta2 contract, Kamaji, BYOH), where each contract keeps them, and which ones are bad when
//! True.
//!
//! Where conditions live (CAPI v1.14 API types, `api/core/v1beta2` and `api/core/v1beta1`):
//! - current style: `status.conditions` on v1beta2 objects; `status.v1beta2.conditions` on
//!   objects served at v1beta1 by CAPI 1.9 and 1.10 (and transitional providers);
//! - legacy style (v1beta1, with severity): `status.deprecated.v1beta1.conditions` on v1beta2
//!   objects, `status.conditions` on everything else.

use serde::Serialize;
use serde_json::Value;

use crate::groups::CapiVersion;
use crate::json::at;

/// Condition types whose normal state is False, so True is the abnormal one. clusterctl's set
/// (CAPI v1.14, `internal/util/tree/tree.go`, `negativePolarityConditions`: Paused, Deleting,
/// RollingOut, ScalingUp, ScalingDown, Updating, Remediating), plus two that report work in
/// progress the same way, our reconciler's `VersionUpgrade` (True while it steps minors) and
/// `MachinesUpdating`, and our reconciler's [`CERTIFICATES_EXPIRING`] (True while a certificate
/// of the tenant has expired or is about to).
pub const NEGATIVE_POLARITY: [&str; 10] = [
    "Paused",
    "Deleting",
    "RollingOut",
    "ScalingUp",
    "ScalingDown",
    "Updating",
    "Remediating",
    "VersionUpgrade",
    "MachinesUpdating",
    CERTIFICATES_EXPIRING,
];

/// The condition type kamaji-reconciler sets on a KamajiControlPlane: `True` while a certificate
/// of its TenantControlPlane has expired or expires within the reconciler's `--cert-warn`
/// (`kubectl capi doctor`'s check where the work lives; `crate::doctor::certificates_condition`).
pub const CERTIFICATES_EXPIRING: &str = "CertificatesExpiring";

/// One condition of either style; `severity` only in v1beta1 CAPI conditions.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub severity: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<String>,
}

impl Condition {
    /// Parses one condition object; `None` when it has no type. A missing status is `Unknown`.
    pub(crate) fn from_json(v: &Value) -> Option<Condition> {
        let s = |k: &str| {
            v.get(k)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
        };
        Some(Condition {
            type_: s("type")?,
            status: s("status").unwrap_or_else(|| "Unknown".to_string()),
            reason: s("reason"),
            message: s("message"),
            last_transition_time: s("lastTransitionTime"),
            severity: s("severity"),
        })
    }
    pub fn is_true(&self) -> bool {
        self.status == "True"
    }
    pub(crate) fn is_false(&self) -> bool {
        self.status == "False"
    }
    /// Whether True is the abnormal state of this type ([`NEGATIVE_POLARITY`]).
    pub(crate) fn is_negative_polarity(&self) -> bool {
        NEGATIVE_POLARITY.contains(&self.type_.as_str())
    }
    /// False on a positive-polarity condition: something is not as it should be. (False on
    /// `Paused` or `VersionUpgrade` is the healthy state.)
    pub fn is_problem(&self) -> bool {
        self.is_false() && !self.is_negative_polarity()
    }
}

/// The conditions in the list at `path`.
pub fn conditions_at(v: &Value, path: &[&str]) -> Vec<Condition> {
    at(v, path)
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Condition::from_json).collect())
        .unwrap_or_default()
}

/// The condition of type `type_` in the list at `path`. Only that one is parsed: a tree of
/// thousands of Machines asks each for two or three types, and parsing every condition for
/// each question was a fifth of `describe`'s CPU.
pub(crate) fn find_at(v: &Value, path: &[&str], type_: &str) -> Option<Condition> {
    at(v, path)?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(type_))
        .and_then(Condition::from_json)
}

const CURRENT_IN_V1BETA2: &[&str] = &["status", "v1beta2", "conditions"];
const STATUS_CONDITIONS: &[&str] = &["status", "conditions"];
const LEGACY_IN_DEPRECATED: &[&str] = &["status", "deprecated", "v1beta1", "conditions"];

/// Where the current-style conditions are, as clusterctl reads them: `status.v1beta2.conditions`
/// when present, else `status.conditions`.
fn current_path(obj: &Value) -> &'static [&'static str] {
    match at(obj, CURRENT_IN_V1BETA2) {
        Some(_) => CURRENT_IN_V1BETA2,
        None => STATUS_CONDITIONS,
    }
}

/// Where the legacy (v1beta1, with severity) conditions are: `status.deprecated.v1beta1.conditions`
/// when present; nowhere on a CAPI core object served at v1beta2 without that block (its
/// `status.conditions` are current-style); else `status.conditions` (objects at v1beta1, and
/// providers' objects, which carry one list).
fn legacy_path(obj: &Value) -> Option<&'static [&'static str]> {
    if at(obj, LEGACY_IN_DEPRECATED).is_some() {
        return Some(LEGACY_IN_DEPRECATED);
    }
    let core_v1beta2 = obj
        .get("apiVersion")
        .and_then(Value::as_str)
        .is_some_and(|av| {
            av.starts_with(crate::groups::CAPI_GROUP)
                && CapiVersion::of_api_version(av) == Some(CapiVersion::V1Beta2)
        });
    if core_v1beta2 && at(obj, &["status", "v1beta2"]).is_none() {
        return None;
    }
    Some(STATUS_CONDITIONS)
}

/// The current-style conditions ([`current_path`]).
pub fn conditions(obj: &Value) -> Vec<Condition> {
    conditions_at(obj, current_path(obj))
}

/// The current-style condition of type `type_`.
pub fn current(obj: &Value, type_: &str) -> Option<Condition> {
    find_at(obj, current_path(obj), type_)
}

/// The legacy (v1beta1, with severity) conditions ([`legacy_path`]).
pub(crate) fn legacy_conditions(obj: &Value) -> Vec<Condition> {
    legacy_path(obj)
        .map(|p| conditions_at(obj, p))
        .unwrap_or_default()
}

/// The legacy condition of type `type_`.
pub fn legacy(obj: &Value, type_: &str) -> Option<Condition> {
    find_at(obj, legacy_path(obj)?, type_)
}

/// A condition by type in a list.
pub fn find<'a>(conds: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conds.iter().find(|c| c.type_ == type_)
}

/// One current-style condition by type, falling back to the legacy one.
pub fn condition(obj: &Value, type_: &str) -> Option<Condition> {
    current(obj, type_).or_else(|| legacy(obj, type_))
}

/// The condition that sums an object up, as clusterctl describe picks it: `Available`
/// (v1beta2 Cluster, MachineDeployment, control planes), else `Ready`.
pub fn summary_condition(obj: &Value) -> Option<Condition> {
    condition(obj, "Available").or_else(|| condition(obj, "Ready"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cond(t: &str, s: &str) -> Condition {
        Condition {
            type_: t.into(),
            status: s.into(),
            ..Default::default()
        }
    }

    #[test]
    fn false_is_a_problem_except_on_negative_polarity_conditions() {
        assert!(cond("Available", "False").is_problem());
        assert!(cond("TenantControlPlaneCreated", "False").is_problem());
        assert!(!cond("Paused", "False").is_problem());
        assert!(!cond("VersionUpgrade", "False").is_problem());
        assert!(!cond(CERTIFICATES_EXPIRING, "False").is_problem());
        assert!(!cond("Available", "True").is_problem());
        assert!(cond("RollingOut", "True").is_negative_polarity());
    }

    #[test]
    fn legacy_conditions_of_a_v1beta2_core_object_need_the_deprecated_block() {
        let v = json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
            "status": {"conditions": [{"type": "Available", "status": "True"}]}});
        assert!(legacy_conditions(&v).is_empty());
        let kcp = json!({"apiVersion": "controlplane.cluster.x-k8s.io/v1alpha2",
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}});
        assert_eq!(legacy_conditions(&kcp)[0].type_, "Ready");
    }

    #[test]
    fn conditions_prefer_v1beta2_block_then_status() {
        let v = json!({"status": {"conditions": [{"type": "Ready", "status": "False", "severity": "Warning"}],
            "v1beta2": {"conditions": [{"type": "Available", "status": "True", "reason": "Available"}]}}});
        assert_eq!(conditions(&v)[0].type_, "Available");
        assert_eq!(
            legacy_conditions(&v)[0].severity.as_deref(),
            Some("Warning")
        );
        let v2 = json!({"status": {"conditions": [{"type": "Available", "status": "True"}],
            "deprecated": {"v1beta1": {"conditions": [{"type": "Ready", "status": "True"}]}}}});
        assert_eq!(conditions(&v2)[0].type_, "Available");
        assert_eq!(legacy_conditions(&v2)[0].type_, "Ready");
    }

    #[test]
    fn one_condition_by_type_reads_the_same_list_as_all_of_them() {
        let v = json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
            "status": {"conditions": [{"type": "Ready", "status": "False", "reason": "NotReady"},
                                      {"type": "UpToDate", "status": "True"}, {"status": "True"}],
            "deprecated": {"v1beta1": {"conditions": [{"type": "Ready", "status": "True", "severity": ""}]}}}});
        for t in ["Ready", "UpToDate", "Available", ""] {
            assert_eq!(current(&v, t), find(&conditions(&v), t).cloned(), "{t}");
            assert_eq!(
                legacy(&v, t),
                find(&legacy_conditions(&v), t).cloned(),
                "{t}"
            );
        }
        assert_eq!(
            current(&v, "Ready").unwrap().reason.as_deref(),
            Some("NotReady")
        );
        assert!(legacy(&v, "Ready").unwrap().is_true());
        // No legacy list on a v1beta2 core object without the deprecated block.
        let bare = json!({"apiVersion": "cluster.x-k8s.io/v1beta2",
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}});
        assert_eq!(legacy(&bare, "Ready"), None);
        assert!(condition(&bare, "Ready").unwrap().is_true());
    }
}
