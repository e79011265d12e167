//! The values file's fields checked against the KamajiControlPlane API before anything is
//! sent: a value of the wrong type (`replicas: "two"`) or a field the API does not have is
//! otherwise answered by the API server's server-side apply with a 500, `failed to create
//! typed patch object`, that names neither the file nor what to write instead.
//!
//! The check walks the structural schema of our own CRD (`kamaji::crd`, generated from the Rust
//! types of `kamaji::api`), so it follows the types wherever they change.

use serde_json::{Map, Value};

use crate::Error;
use crate::error::usage;

/// The served version whose schema the values are checked against: the storage version. The
/// spec fields of v1alpha1 are the same but for the endpoint, which a values file leaves to
/// the controller.
const SCHEMA_VERSION: &str = "v1alpha2";

/// The schema of `spec` in our KamajiControlPlane CRD, as JSON. `None` only if the CRDs could
/// not be generated, which the CRD unit tests rule out; the check is then skipped and the API
/// server remains the judge.
fn spec_schema() -> Option<Value> {
    let crd = crate::kamaji::crd::crds()
        .into_iter()
        .find(|c| c.spec.names.kind == "KamajiControlPlane")?;
    let version = crd
        .spec
        .versions
        .into_iter()
        .find(|v| v.name == SCHEMA_VERSION)?;
    let schema = version.schema?.open_api_v3_schema?;
    let json = serde_json::to_value(schema).ok()?;
    json.pointer("/properties/spec").cloned()
}

/// What is wrong with one value: the message and its hint.
struct Problem {
    message: String,
    hint: String,
}

/// Checks the values file's spec fields: one usage error naming the first wrong field.
pub(super) fn check_values(spec: &Map<String, Value>) -> Result<(), Error> {
    let Some(schema) = spec_schema() else {
        return Ok(());
    };
    match check_object(spec, &schema, "spec") {
        Ok(()) => Ok(()),
        Err(p) => Err(usage(format!("--from-file: {}", p.message), p.hint)),
    }
}

/// The value in a few characters, as the file would spell it.
fn shown(v: &Value) -> String {
    let s = v.to_string();
    match s.char_indices().nth(40) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s,
    }
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "an integer",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a map",
    }
}

/// `kubectl explain`'s path for a field: the dotted path without list indexes.
fn explain_path(path: &str) -> String {
    let mut out = String::new();
    let mut in_index = false;
    for c in path.chars() {
        match c {
            '[' => in_index = true,
            ']' => in_index = false,
            c if !in_index => out.push(c),
            _ => {}
        }
    }
    format!("kamajicontrolplane.{out}")
}

fn wrong_type(v: &Value, expected: &str, path: &str) -> Problem {
    Problem {
        message: format!(
            "{path} is {} ({}); it must be {expected}",
            shown(v),
            kind_of(v)
        ),
        hint: format!(
            "fix that value in the file (kubectl explain {} describes the field)",
            explain_path(path)
        ),
    }
}

fn is_integer(v: &Value) -> bool {
    v.as_i64().is_some() || v.as_u64().is_some()
}

fn is_true(s: &Value, key: &str) -> bool {
    s.get(key).and_then(Value::as_bool) == Some(true)
}

/// Checks `v` against the schema `s` at `path`.
fn check(v: &Value, s: &Value, path: &str) -> Result<(), Problem> {
    // A null leaves the field unset in a server-side apply.
    if v.is_null() {
        return Ok(());
    }
    if is_true(s, "x-kubernetes-int-or-string") {
        return if v.is_string() || is_integer(v) {
            Ok(())
        } else {
            Err(wrong_type(v, "an integer or a string", path))
        };
    }
    let expected = match s.get("type").and_then(Value::as_str) {
        // Untyped (preserved unknown fields): anything goes.
        None => return Ok(()),
        Some("string") if v.is_string() => None,
        Some("string") => Some("a string"),
        Some("integer") if is_integer(v) => None,
        Some("integer") => Some("an integer"),
        Some("number") if v.is_number() => None,
        Some("number") => Some("a number"),
        Some("boolean") if v.is_boolean() => None,
        Some("boolean") => Some("true or false"),
        Some("array") => match v.as_array() {
            Some(items) => return check_items(items, s, path),
            None => Some("a list"),
        },
        Some("object") => match v.as_object() {
            Some(m) => return check_object(m, s, path),
            None => Some("a map"),
        },
        Some(_) => None,
    };
    if let Some(expected) = expected {
        return Err(wrong_type(v, expected, path));
    }
    check_int32(v, s, path)?;
    check_enum(v, s, path)
}

fn check_int32(v: &Value, s: &Value, path: &str) -> Result<(), Problem> {
    if s.get("format").and_then(Value::as_str) == Some("int32")
        && v.as_i64().and_then(|n| i32::try_from(n).ok()).is_none()
    {
        return Err(wrong_type(v, "a 32-bit integer", path));
    }
    Ok(())
}

fn check_enum(v: &Value, s: &Value, path: &str) -> Result<(), Problem> {
    let Some(allowed) = s.get("enum").and_then(Value::as_array) else {
        return Ok(());
    };
    if allowed.contains(v) {
        return Ok(());
    }
    let names: Vec<String> = allowed.iter().map(shown).collect();
    Err(Problem {
        message: format!(
            "{path} is {}; it must be one of {}",
            shown(v),
            names.join(", ")
        ),
        hint: format!(
            "fix that value in the file (kubectl explain {} describes the field)",
            explain_path(path)
        ),
    })
}

fn check_items(items: &[Value], s: &Value, path: &str) -> Result<(), Problem> {
    let Some(item_schema) = s.get("items") else {
        return Ok(());
    };
    for (i, item) in items.iter().enumerate() {
        check(item, item_schema, &format!("{path}[{i}]"))?;
    }
    Ok(())
}

fn check_object(m: &Map<String, Value>, s: &Value, path: &str) -> Result<(), Problem> {
    let properties = s.get("properties").and_then(Value::as_object);
    let additional = s.get("additionalProperties");
    for (k, v) in m {
        let field = format!("{path}.{k}");
        if let Some(p) = properties.and_then(|p| p.get(k)) {
            check(v, p, &field)?;
            continue;
        }
        match additional {
            Some(a) if a.is_object() => check(v, a, &field)?,
            Some(Value::Bool(true)) => {}
            // Server-side apply refuses a field the schema does not declare; an object with
            // no declared fields, or one that keeps unknown fields, takes anything.
            _ if is_true(s, "x-kubernetes-preserve-unknown-fields") => {}
            _ => {
                let Some(props) = properties else { continue };
                return Err(unknown_field(k, &field, props, path));
            }
        }
    }
    Ok(())
}

fn unknown_field(key: &str, field: &str, props: &Map<String, Value>, path: &str) -> Problem {
    let closest = crate::text::closest_names(key, props.keys().map(String::as_str))
        .first()
        .map(|p| format!("; did you mean {p}?"))
        .unwrap_or_default();
    let known: Vec<&str> = props.keys().map(String::as_str).collect();
    Problem {
        message: format!("{field} is not a field of the KamajiControlPlane API{closest}"),
        hint: format!(
            "{path} takes: {} (kubectl explain {})",
            known.join(", "),
            explain_path(path)
        ),
    }
}

/// The KamajiControlPlane spec fields of a values file: its `spec:` when it is a whole object
/// (or has a `spec` key), else the map itself.
pub(super) fn values_spec(values: &Value) -> Result<Map<String, Value>, Error> {
    let bad = || {
        usage(
            "--from-file must hold a YAML map of KamajiControlPlane spec fields",
            "for example:\n  network:\n    serviceType: NodePort\n  deployment:\n    nodeSelector: {kubernetes.io/os: linux}",
        )
    };
    let map = values.as_object().ok_or_else(bad)?;
    if let Some(kind) = map.get("kind").and_then(Value::as_str)
        && kind != "KamajiControlPlane"
    {
        return Err(usage(
            format!("--from-file holds a {kind}, not KamajiControlPlane fields"),
            "put KamajiControlPlane spec fields (or a KamajiControlPlane) in the file",
        ));
    }
    let spec = match map.get("spec") {
        Some(spec) => spec.as_object().cloned().ok_or_else(bad)?,
        None => map.clone(),
    };
    check_values(&spec)?;
    Ok(spec)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn problem(spec: Value) -> String {
        match check_values(spec.as_object().unwrap()) {
            Err(Error::Usage { message, hint }) => {
                assert!(hint.is_some_and(|h| !h.contains('\n')));
                message
            }
            other => panic!("{spec}: {other:?}"),
        }
    }

    #[test]
    fn wrong_types_and_unknown_fields_are_named() {
        assert_eq!(
            problem(json!({"replicas": "two"})),
            "--from-file: spec.replicas is \"two\" (a string); it must be an integer"
        );
        assert_eq!(
            problem(json!({"replicas": 1.5})),
            "--from-file: spec.replicas is 1.5 (a number); it must be an integer"
        );
        assert_eq!(
            problem(json!({"replicas": 4_294_967_296_u64})),
            "--from-file: spec.replicas is 4294967296 (an integer); it must be a 32-bit integer"
        );
        assert_eq!(
            problem(json!({"network": {"certSANs": "a.example.com"}})),
            "--from-file: spec.network.certSANs is \"a.example.com\" (a string); it must be a list"
        );
        assert_eq!(
            problem(json!({"network": {"certSANs": ["a", 7]}})),
            "--from-file: spec.network.certSANs[1] is 7 (an integer); it must be a string"
        );
        assert_eq!(
            problem(json!({"version": 1.35})),
            "--from-file: spec.version is 1.35 (a number); it must be a string"
        );
        assert_eq!(
            problem(json!({"network": {"serviceTyp": "NodePort"}})),
            "--from-file: spec.network.serviceTyp is not a field of the KamajiControlPlane API; did you mean serviceType?"
        );
    }

    #[test]
    fn well_typed_values_pass() {
        let ok = json!({
            "replicas": 3,
            "version": "v1.35.0",
            "dataStoreName": "default",
            "network": {"serviceType": "NodePort", "certSANs": ["a.example.com"]},
            "deployment": {"nodeSelector": {"kubernetes.io/os": "linux"}},
            "addons": {"coreDNS": {}, "kubeProxy": null},
        });
        assert!(check_values(ok.as_object().unwrap()).is_ok());
        assert!(spec_schema().is_some(), "the CRD has a spec schema");
    }
}
