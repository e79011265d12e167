//! Reading API objects held as `serde_json::Value` (as the server returns them, so every
//! contract version and provider fork reads the same way).

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

/// The strings of the list at `path` (other items skipped; empty when there is no list).
pub fn strings_at(v: &Value, path: &[&str]) -> Vec<String> {
    at(v, path)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
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

/// The `metadata` of a list row, as kubectl's objects carry it, so that
/// `-o jsonpath='{.items[*].metadata.name}'` and `--show-labels` read rows as they read objects.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RowMeta {
    pub name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub labels: std::collections::BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub creation_timestamp: Option<String>,
}

impl RowMeta {
    /// The name, namespace, labels and creation time of `obj`.
    pub fn of(obj: &Value) -> RowMeta {
        RowMeta {
            name: name(obj).to_string(),
            namespace: namespace(obj).to_string(),
            labels: labels(obj),
            creation_timestamp: str_at(obj, &["metadata", "creationTimestamp"]).map(str::to_string),
        }
    }
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

/// The nested object `{a: {b: {c: value}}}` for a path.
pub fn nest(path: &[&str], value: Value) -> Value {
    path.iter()
        .rev()
        .fold(value, |acc, key| serde_json::json!({ (*key): acc }))
}

/// Deep-merges `from` into `into` (objects merge, everything else replaces).
pub fn deep_merge(into: &mut Value, from: Value) {
    match (into, from) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                deep_merge(a.entry(k).or_insert(Value::Null), v);
            }
        }
        (slot, v) => *slot = v,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn owner_prefers_controller() {
        let v = json!({"metadata": {"ownerReferences": [
            {"kind": "Machine", "name": "a"}, {"kind": "Machine", "name": "b", "controller": true}]}});
        assert_eq!(owner_of_kind(&v, "Machine"), Some("b"));
        assert_eq!(owner_of_kind(&v, "MachineSet"), None);
    }
}
