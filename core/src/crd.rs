//! What every CRD we generate goes through before it is shipped (the KamajiControlPlane CRDs of
//! `kamaji::crd`, the ClusterUpgrade and FleetUpgrade CRDs of `ops::crd`): schemars' formats the
//! API server does not know are dropped (integer formats become bounds), so applying a CRD draws
//! no `unrecognized format` warning.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionVersion, JSONSchemaProps,
};

/// String formats every Kubernetes release we support validates (`supportedVersionedFormats`
/// in apiextensions-apiserver's `pkg/apiserver/validation/formats.go`, Kubernetes v1.36.3),
/// written as the API server compares them: without dashes. `k8s-short-name` and
/// `k8s-long-name` are left out: only 1.34 and later know them.
const STRING_FORMATS: &[&str] = &[
    "bsonobjectid",
    "uri",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "cidr",
    "mac",
    "uuid",
    "uuid3",
    "uuid4",
    "uuid5",
    "isbn",
    "isbn10",
    "isbn13",
    "creditcard",
    "ssn",
    "hexcolor",
    "rgbcolor",
    "byte",
    "password",
    "date",
    "duration",
    "datetime",
];

/// Whether the API server knows `format` on a schema of type `type_`: the rule of
/// `GetUnrecognizedFormats` (same file), which answers every other format with a `Warning:
/// unrecognized format` on each apply of the CRD.
pub(crate) fn known_format(type_: Option<&str>, format: &str) -> bool {
    match type_.unwrap_or("") {
        "" | "string" => STRING_FORMATS.contains(&format.replace('-', "").as_str()),
        "integer" => matches!(format, "int32" | "int64"),
        "number" => matches!(format, "float" | "double"),
        _ => false,
    }
}

/// The bounds an integer format of schemars' stands for (`uint32`: 0..=4294967295), kept as
/// `minimum`/`maximum` when the format goes, so a value the Rust type cannot hold is still
/// refused by the API server.
fn integer_bounds(format: &str) -> Option<(f64, f64)> {
    Some(match format {
        "int8" => (f64::from(i8::MIN), f64::from(i8::MAX)),
        "int16" => (f64::from(i16::MIN), f64::from(i16::MAX)),
        "uint8" => (0.0, f64::from(u8::MAX)),
        "uint16" => (0.0, f64::from(u16::MAX)),
        "uint32" => (0.0, f64::from(u32::MAX)),
        // Beyond int64 the API server cannot store the value anyway.
        "uint64" | "uint" => (0.0, i64::MAX as f64),
        _ => return None,
    })
}

/// Drops every `format` the API server does not know from a schema and everything below it
/// (properties, items, maps, `allOf`/`anyOf`/`oneOf`/`not`), turning schemars' integer formats
/// into bounds. `default`, `enum` and `example` are values, not schemas, and stay untouched.
pub(crate) fn strip_unknown_formats(s: &mut JSONSchemaProps) {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
        JSONSchemaPropsOrArray as OrArray, JSONSchemaPropsOrBool as OrBool,
        JSONSchemaPropsOrStringArray as OrStrings,
    };
    if let Some(f) = s.format.take() {
        if known_format(s.type_.as_deref(), &f) {
            s.format = Some(f);
        } else if s.type_.as_deref() == Some("integer")
            && let Some((lo, hi)) = integer_bounds(&f)
        {
            s.minimum = Some(s.minimum.map_or(lo, |m| m.max(lo)));
            s.maximum = Some(s.maximum.map_or(hi, |m| m.min(hi)));
        }
    }
    let maps = [
        &mut s.properties,
        &mut s.pattern_properties,
        &mut s.definitions,
    ];
    for m in maps.into_iter().flatten() {
        m.values_mut().for_each(strip_unknown_formats);
    }
    for l in [&mut s.all_of, &mut s.any_of, &mut s.one_of]
        .into_iter()
        .flatten()
    {
        l.iter_mut().for_each(strip_unknown_formats);
    }
    if let Some(n) = s.not.as_deref_mut() {
        strip_unknown_formats(n);
    }
    match &mut s.items {
        Some(OrArray::Schema(i)) => strip_unknown_formats(i),
        Some(OrArray::Schemas(l)) => l.iter_mut().for_each(strip_unknown_formats),
        None => {}
    }
    for b in [&mut s.additional_properties, &mut s.additional_items]
        .into_iter()
        .flatten()
    {
        if let OrBool::Schema(i) = b {
            strip_unknown_formats(i);
        }
    }
    for d in s.dependencies.iter_mut().flat_map(|m| m.values_mut()) {
        if let OrStrings::Schema(i) = d {
            strip_unknown_formats(i);
        }
    }
}

/// [`strip_unknown_formats`] over every version of a CRD: applied to every CRD we ship
/// (`kamaji::crd::crds`, `ops::crds`), so no field added later brings a format back.
pub(crate) fn for_the_api_server(mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
    for v in &mut crd.spec.versions {
        if let Some(s) = root_schema_mut(v) {
            strip_unknown_formats(s);
        }
    }
    crd
}

/// The `openAPIV3Schema` of one version of a CRD.
#[cfg(test)]
pub(crate) fn root_schema(v: &CustomResourceDefinitionVersion) -> Option<&JSONSchemaProps> {
    v.schema
        .as_ref()
        .and_then(|s| s.open_api_v3_schema.as_ref())
}

/// The `openAPIV3Schema` of one version of a CRD, to change.
pub(crate) fn root_schema_mut(
    v: &mut CustomResourceDefinitionVersion,
) -> Option<&mut JSONSchemaProps> {
    v.schema
        .as_mut()
        .and_then(|s| s.open_api_v3_schema.as_mut())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
        JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
    };

    /// Every CRD `kubectl kamaji install` and `kamaji-reconciler manifests` ship.
    fn shipped() -> Vec<CustomResourceDefinition> {
        crate::install::install_manifests("i:1", "ns", 1)
            .into_iter()
            .filter(|o| o["kind"] == "CustomResourceDefinition")
            .map(|o| serde_json::from_value(o).unwrap())
            .collect()
    }

    /// Calls `f` on every schema below `s` (properties, items, maps, combinators) with its path.
    fn walk(s: &JSONSchemaProps, path: &str, f: &mut dyn FnMut(&str, &JSONSchemaProps)) {
        f(path, s);
        for (k, p) in s.properties.iter().flatten() {
            walk(p, &format!("{path}.{k}"), f);
        }
        if let Some(JSONSchemaPropsOrArray::Schema(i)) = &s.items {
            walk(i, &format!("{path}[]"), f);
        }
        if let Some(JSONSchemaPropsOrBool::Schema(i)) = &s.additional_properties {
            walk(i, &format!("{path}{{}}"), f);
        }
        for l in [&s.all_of, &s.any_of, &s.one_of].into_iter().flatten() {
            for (n, i) in l.iter().enumerate() {
                walk(i, &format!("{path}<{n}>"), f);
            }
        }
    }

    fn each_version(f: &mut dyn FnMut(&str, &JSONSchemaProps)) {
        for crd in shipped() {
            for v in &crd.spec.versions {
                walk(
                    root_schema(v).unwrap(),
                    &format!("{}/{}", crd.spec.names.kind, v.name),
                    f,
                );
            }
        }
    }

    #[test]
    fn every_shipped_crd_has_only_formats_the_api_server_knows() {
        let mut unknown = Vec::new();
        let mut crds = 0;
        each_version(&mut |path, s| {
            crds += usize::from(!path.contains('.'));
            if let Some(f) = &s.format
                && !known_format(s.type_.as_deref(), f)
            {
                unknown.push(format!("{path}: {f}"));
            }
        });
        // KamajiControlPlane(+Template) in two versions, ClusterUpgrade, FleetUpgrade.
        assert_eq!(crds, 6);
        assert!(unknown.is_empty(), "{unknown:#?}");
        // schemars' uint32 became bounds: the ones the type declares, else u32's.
        let mut seen = 0;
        each_version(&mut |path, s| match path {
            "ClusterUpgrade/v1alpha1.spec.maxParallelMachineDeployments" => {
                assert_eq!((s.minimum, s.maximum), (Some(1.0), Some(100.0)));
                seen += 1;
            }
            "ClusterUpgrade/v1alpha1.status.plan[].number" => {
                assert_eq!(
                    (s.minimum, s.maximum),
                    (Some(0.0), Some(f64::from(u32::MAX)))
                );
                seen += 1;
            }
            _ => {}
        });
        assert_eq!(seen, 2);
    }

    /// Why a schema a user fills in is unbounded, if it is: a string without maxLength (or an
    /// enum, or a date-time), a list without maxItems, a number without maximum, a map without
    /// maxProperties. Free-form objects (`x-kubernetes-preserve-unknown-fields`) are bounded only
    /// by the API server's request size.
    fn unbounded(s: &JSONSchemaProps) -> Option<&'static str> {
        if s.enum_.is_some() {
            return None;
        }
        match s.type_.as_deref() {
            Some("string")
                if s.max_length.is_none() && s.format.as_deref() != Some("date-time") =>
            {
                Some("maxLength")
            }
            Some("array") if s.max_items.is_none() => Some("maxItems"),
            Some("integer" | "number") if s.maximum.is_none() => Some("maximum"),
            Some("object")
                if matches!(
                    s.additional_properties,
                    Some(JSONSchemaPropsOrBool::Schema(_))
                ) && s.max_properties.is_none() =>
            {
                Some("maxProperties")
            }
            _ => None,
        }
    }

    /// The ClusterUpgrade and FleetUpgrade specs are bounded throughout. The KamajiControlPlane
    /// CRDs are not held to it yet: they embed Kubernetes core types (affinity, tolerations,
    /// volumes, resources, probes) that upstream leaves unbounded too, about 3,200 schema paths.
    #[test]
    fn every_field_a_user_sets_is_bounded() {
        let mut open = Vec::new();
        each_version(&mut |path, s| {
            let ops = path.starts_with("ClusterUpgrade/") || path.starts_with("FleetUpgrade/");
            if ops
                && path.contains(".spec")
                && let Some(what) = unbounded(s)
            {
                open.push(format!("{path}: no {what}"));
            }
        });
        assert!(open.is_empty(), "{open:#?}");
    }

    #[test]
    fn known_formats_follow_the_api_server() {
        assert!(known_format(Some("string"), "date-time"));
        assert!(known_format(None, "byte"));
        assert!(known_format(Some("integer"), "int32"));
        assert!(!known_format(Some("integer"), "uint32"));
        assert!(!known_format(Some("number"), "uint8"));
        assert!(!known_format(Some("boolean"), "int32"));
        assert!(!known_format(Some("string"), "k8s-short-name"));
        let mut s: JSONSchemaProps = serde_json::from_value(serde_json::json!({
            "type": "object",
            "properties": {
                "a": {"type": "integer", "format": "uint32", "minimum": 1.0, "maximum": 10.0},
                "b": {"type": "array", "items": {"type": "integer", "format": "uint16"}},
                "c": {"type": "object", "additionalProperties": {"type": "string", "format": "uint8"}},
                "format": {"type": "string", "format": "date-time", "default": "x",
                    "enum": [{"format": "uint32"}]}
            }
        }))
        .unwrap();
        strip_unknown_formats(&mut s);
        let v = serde_json::to_value(&s).unwrap();
        let p = &v["properties"];
        assert_eq!(
            p["a"],
            serde_json::json!({"type": "integer", "minimum": 1.0, "maximum": 10.0})
        );
        assert_eq!(p["b"]["items"]["maximum"], 65535.0);
        assert!(p["b"]["items"].get("format").is_none());
        assert!(p["c"]["additionalProperties"].get("format").is_none());
        assert_eq!(p["format"]["format"], "date-time");
        assert_eq!(p["format"]["enum"][0]["format"], "uint32");
    }
}
