//! Small helpers to read fields out of API objects held as `serde_json::Value`.

use serde::Serialize;
use serde_json::Value;

/// The value at a dotted path of object keys, e.g. `&["spec", "template", "spec", "version"]`.
pub fn at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    let mut cur = v;
    for key in path {
        cur = cur.get(key)?;
    }
    Some(cur)
}

/// A non-empty string at `path`.
pub fn str_at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    at(v, path)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

/// An integer at `path`.
pub fn i64_at(v: &Value, path: &[&str]) -> Option<i64> {
    at(v, path).and_then(Value::as_i64)
}

/// A boolean at `path`.
pub fn bool_at(v: &Value, path: &[&str]) -> Option<bool> {
    at(v, path).and_then(Value::as_bool)
}

/// `metadata.name`, or `""`.
pub fn name(v: &Value) -> &str {
    str_at(v, &["metadata", "name"]).unwrap_or("")
}

/// `metadata.namespace`, or `""`.
pub fn namespace(v: &Value) -> &str {
    str_at(v, &["metadata", "namespace"]).unwrap_or("")
}

/// `kind`, or `""`.
pub fn kind(v: &Value) -> &str {
    str_at(v, &["kind"]).unwrap_or("")
}

/// A label value.
pub fn label<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    at(v, &["metadata", "labels", key]).and_then(Value::as_str)
}

/// Whether an annotation is present (any value, including `""`).
pub fn has_annotation(v: &Value, key: &str) -> bool {
    at(v, &["metadata", "annotations", key]).is_some()
}

/// An annotation value.
pub fn annotation<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    at(v, &["metadata", "annotations", key]).and_then(Value::as_str)
}

/// The labels as a sorted map (non-string values are skipped).
pub fn labels(v: &Value) -> std::collections::BTreeMap<String, String> {
    at(v, &["metadata", "labels"])
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// The controller owner reference (or the first owner of `kind` when none is marked controller).
pub fn owner_of_kind<'a>(v: &'a Value, owner_kind: &str) -> Option<&'a str> {
    let owners = at(v, &["metadata", "ownerReferences"])?.as_array()?;
    let of_kind = || {
        owners
            .iter()
            .filter(|o| o.get("kind").and_then(Value::as_str) == Some(owner_kind))
    };
    of_kind()
        .find(|o| o.get("controller").and_then(Value::as_bool) == Some(true))
        .or_else(|| of_kind().next())
        .and_then(|o| o.get("name").and_then(Value::as_str))
}

/// One condition, in either the v1beta2 (`metav1.Condition`) or the v1beta1 (CAPI, with severity) shape.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
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
    /// Parse one condition object; `None` when it has no type.
    pub fn from_json(v: &Value) -> Option<Self> {
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
            severity: s("severity"),
            last_transition_time: s("lastTransitionTime"),
        })
    }

    /// `status == "True"`.
    pub fn is_true(&self) -> bool {
        self.status == "True"
    }
}

/// The conditions in the list at `path`.
pub fn conditions_at(v: &Value, path: &[&str]) -> Vec<Condition> {
    at(v, path)
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Condition::from_json).collect())
        .unwrap_or_default()
}

/// The current (v1beta2-style) conditions of any object, as clusterctl reads them: objects served
/// at v1beta1 by a transitional provider carry them in `status.v1beta2.conditions`, everything else
/// in `status.conditions`.
pub fn conditions(v: &Value) -> Vec<Condition> {
    if at(v, &["status", "v1beta2", "conditions"]).is_some() {
        return conditions_at(v, &["status", "v1beta2", "conditions"]);
    }
    conditions_at(v, &["status", "conditions"])
}

/// The legacy (v1beta1, with severity) conditions of any object: `status.deprecated.v1beta1.conditions`
/// on objects served at v1beta2, `status.conditions` on objects served at v1beta1.
pub fn v1beta1_conditions(v: &Value) -> Vec<Condition> {
    if at(v, &["status", "deprecated", "v1beta1", "conditions"]).is_some() {
        return conditions_at(v, &["status", "deprecated", "v1beta1", "conditions"]);
    }
    conditions_at(v, &["status", "conditions"])
}

/// A condition by type.
pub fn find_condition<'a>(conds: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conds.iter().find(|c| c.type_ == type_)
}

/// Seconds elapsed from an RFC 3339 timestamp to `now`; `None` when it does not parse.
pub fn seconds_since(timestamp: &str, now: jiff::Timestamp) -> Option<i64> {
    let t: jiff::Timestamp = timestamp.parse().ok()?;
    Some(now.as_second() - t.as_second())
}

/// kubectl's short human duration (`HumanDuration`): `45s`, `5m12s`, `3h`, `3h5m`, `2d3h`, `14d`, `2y10d`.
pub fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".to_string();
    }
    if seconds < 0 {
        return "0s".to_string();
    }
    let s = seconds;
    if s < 60 * 2 {
        return format!("{s}s");
    }
    let m = s / 60;
    if m < 10 {
        let rem = s % 60;
        return if rem == 0 {
            format!("{m}m")
        } else {
            format!("{m}m{rem}s")
        };
    }
    if m < 60 * 3 {
        return format!("{m}m");
    }
    let h = m / 60;
    if h < 8 {
        let rem = m % 60;
        return if rem == 0 {
            format!("{h}h")
        } else {
            format!("{h}h{rem}m")
        };
    }
    if h < 48 {
        return format!("{h}h");
    }
    if h < 24 * 8 {
        let d = h / 24;
        let rem = h % 24;
        return if rem == 0 {
            format!("{d}d")
        } else {
            format!("{d}d{rem}h")
        };
    }
    if h < 24 * 365 * 2 {
        return format!("{}d", h / 24);
    }
    if h < 24 * 365 * 8 {
        let y = h / (24 * 365);
        let dy = (h / 24) % 365;
        return if dy == 0 {
            format!("{y}y")
        } else {
            format!("{y}y{dy}d")
        };
    }
    format!("{}y", h / (24 * 365))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn human_duration_matches_kubectl() {
        assert_eq!(human_duration(5), "5s");
        assert_eq!(human_duration(119), "119s");
        assert_eq!(human_duration(125), "2m5s");
        assert_eq!(human_duration(600), "10m");
        assert_eq!(human_duration(3 * 3600 + 300), "3h5m");
        assert_eq!(human_duration(10 * 3600), "10h");
        assert_eq!(human_duration(3 * 86400 + 3600), "3d1h");
        assert_eq!(human_duration(30 * 86400), "30d");
        assert_eq!(human_duration(3 * 365 * 86400 + 86400), "3y1d");
        assert_eq!(human_duration(-1), "0s");
        assert_eq!(human_duration(-5), "<invalid>");
    }

    #[test]
    fn conditions_prefer_v1beta2_block_then_status() {
        let v = json!({"status": {"conditions": [{"type": "Ready", "status": "False", "severity": "Warning"}],
            "v1beta2": {"conditions": [{"type": "Available", "status": "True", "reason": "Available"}]}}});
        assert_eq!(conditions(&v)[0].type_, "Available");
        assert_eq!(
            v1beta1_conditions(&v)[0].severity.as_deref(),
            Some("Warning")
        );
        let v2 = json!({"status": {"conditions": [{"type": "Available", "status": "True"}],
            "deprecated": {"v1beta1": {"conditions": [{"type": "Ready", "status": "True"}]}}}});
        assert_eq!(conditions(&v2)[0].type_, "Available");
        assert_eq!(v1beta1_conditions(&v2)[0].type_, "Ready");
    }

    #[test]
    fn owner_prefers_controller() {
        let v = json!({"metadata": {"ownerReferences": [
            {"kind": "Machine", "name": "a"}, {"kind": "Machine", "name": "b", "controller": true}]}});
        assert_eq!(owner_of_kind(&v, "Machine"), Some("b"));
        assert_eq!(owner_of_kind(&v, "MachineSet"), None);
    }

    #[test]
    fn seconds_since_parses_rfc3339() {
        let now: jiff::Timestamp = "2026-11-30T08:00:00Z".parse().unwrap();
        assert_eq!(seconds_since("2026-11-30T07:00:00Z", now), Some(3600));
        assert_eq!(seconds_since("garbage", now), None);
    }
}
