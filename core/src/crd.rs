//! What every CRD we generate goes through before it is shipped (the KamajiControlPlane CRDs of
//! `kamaji::crd`, the ClusterUpgrade and FleetUpgrade CRDs of `ops::crd`): schemars' formats the
//! API server does not know are dropped (integer formats become bounds), so applying a CRD draws
//! no `unrecognized format` warning; and every string, number, list and map of a `spec` that
//! its type leaves unbounded gets a generous bound ([`bound_what_users_set`]).

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

/// The longest string of a `spec` whose type states no bound of its own (a container's
/// argument or environment value, a label's value, a JSON patch's path): 256 KiB, what the API
/// server allows all of an object's annotations together (`TotalAnnotationSizeLimitB`,
/// apimachinery's `pkg/api/validation/objectmeta.go`), room for a certificate bundle or a
/// script in a container's arguments.
const DEFAULT_MAX_LENGTH: i64 = 256 * 1024;
/// The most items of a `spec` list whose type states no bound of its own (extra arguments,
/// tolerations, volumes, containers, environment variables, ports): far beyond what a pod
/// lists.
const DEFAULT_MAX_ITEMS: i64 = 1024;
/// The most entries of a `spec` map whose type states no bound of its own (labels,
/// annotations, node selectors, resource limits).
const DEFAULT_MAX_PROPERTIES: i64 = 1024;

/// Bounds every string, number, list and map below `s` that has none: strings get
/// [`DEFAULT_MAX_LENGTH`] (enums and date-times are bounded already), lists
/// [`DEFAULT_MAX_ITEMS`], maps [`DEFAULT_MAX_PROPERTIES`], integers the largest value of their
/// format (`int32`: 2147483647; else int64's, the most the API server stores), numbers the
/// largest `double`. Bounds a type states are kept. Each is far above what a real object
/// holds (an integer's is what its Go type holds), so it refuses none: it makes the schema say
/// how large a field may be, and bounds the cost the API server estimates for a CEL rule over
/// such a field. Free-form objects (`x-kubernetes-preserve-unknown-fields`) stay
/// bounded by the request size only.
pub(crate) fn bound_what_users_set(s: &mut JSONSchemaProps) {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
        JSONSchemaPropsOrArray as OrArray, JSONSchemaPropsOrBool as OrBool,
    };
    let bounded_already = s.enum_.is_some();
    match s.type_.as_deref() {
        Some("string")
            if !bounded_already
                && s.max_length.is_none()
                && s.format.as_deref() != Some("date-time") =>
        {
            s.max_length = Some(DEFAULT_MAX_LENGTH);
        }
        Some("array") if s.max_items.is_none() => s.max_items = Some(DEFAULT_MAX_ITEMS),
        Some("integer") if !bounded_already && s.maximum.is_none() => {
            s.maximum = Some(if s.format.as_deref() == Some("int32") {
                f64::from(i32::MAX)
            } else {
                i64::MAX as f64
            });
        }
        Some("number") if !bounded_already && s.maximum.is_none() => s.maximum = Some(f64::MAX),
        Some("object")
            if matches!(s.additional_properties, Some(OrBool::Schema(_)))
                && s.max_properties.is_none() =>
        {
            s.max_properties = Some(DEFAULT_MAX_PROPERTIES);
        }
        _ => {}
    }
    for p in s.properties.iter_mut().flat_map(|m| m.values_mut()) {
        bound_what_users_set(p);
    }
    for l in [&mut s.all_of, &mut s.any_of, &mut s.one_of]
        .into_iter()
        .flatten()
    {
        l.iter_mut().for_each(bound_what_users_set);
    }
    match &mut s.items {
        Some(OrArray::Schema(i)) => bound_what_users_set(i),
        Some(OrArray::Schemas(l)) => l.iter_mut().for_each(bound_what_users_set),
        None => {}
    }
    if let Some(OrBool::Schema(i)) = &mut s.additional_properties {
        bound_what_users_set(i);
    }
}

/// [`strip_unknown_formats`] over every version of a CRD, then [`bound_what_users_set`] over
/// its `spec`: applied to every CRD we ship (`kamaji::crd::crds`, `ops::crds`), so no field
/// added later brings a format back or goes unbounded. The status is the reconciler's to
/// write and is left as its types state it.
pub(crate) fn for_the_api_server(mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
    for v in &mut crd.spec.versions {
        if let Some(s) = root_schema_mut(v) {
            strip_unknown_formats(s);
            if let Some(spec) = s.properties.as_mut().and_then(|p| p.get_mut("spec")) {
                bound_what_users_set(spec);
            }
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
    use std::collections::BTreeMap;

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
        // KamajiControlPlane(+Template) in two versions, ClusterUpgrade, FleetUpgrade,
        // TenantBackup.
        assert_eq!(crds, 7);
        assert!(unknown.is_empty(), "{unknown:#?}");
        // An integer bound past int64 (schemars' u64) makes the API server refuse every write
        // of the object, status included ("Maximum boundary value must be of type integer").
        let mut past_int64 = Vec::new();
        each_version(&mut |path, s| {
            if s.maximum.is_some_and(|m| m > 9.3e18) {
                past_int64.push(path.to_string());
            }
        });
        assert!(past_int64.is_empty(), "{past_int64:#?}");
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

    /// Every spec of every CRD we ship is bounded throughout: the KamajiControlPlane's and its
    /// template's, with the Kubernetes core types they embed (affinity, tolerations, volumes,
    /// resources, probes: about 3,200 schema paths upstream leaves unbounded), the
    /// ClusterUpgrade's and the FleetUpgrade's.
    #[test]
    fn every_field_a_user_sets_is_bounded() {
        let mut open = Vec::new();
        let mut checked = 0;
        each_version(&mut |path, s| {
            if path.contains(".spec") {
                checked += 1;
                if let Some(what) = unbounded(s) {
                    open.push(format!("{path}: no {what}"));
                }
            }
        });
        assert!(open.is_empty(), "{} unbounded: {open:#?}", open.len());
        // The core types are walked too, in both versions of both kinds.
        assert!(checked > 4_000, "only {checked} spec schemas walked");
    }

    /// Our own fields carry the bounds their types state, the same in both versions, not the
    /// generic ones: the replica count, and the version, one shape with the ClusterUpgrade's;
    /// the generic pass gives the core types theirs.
    #[test]
    fn our_fields_keep_their_own_bounds_and_core_types_get_the_generic_ones() {
        use crate::kamaji::api::common::{VERSION_MAX_LENGTH, VERSION_PATTERN};
        use crate::plan::MAX_CONTROL_PLANE_REPLICAS;
        type Bounds = (
            Option<f64>,
            Option<f64>,
            Option<i64>,
            Option<String>,
            Option<i64>,
        );
        // The KamajiControlPlane's schemas by path below the version, one per version.
        let mut kcp: BTreeMap<String, Vec<Bounds>> = BTreeMap::new();
        let mut cu_version = None;
        each_version(&mut |path, s| {
            let got = (
                s.minimum,
                s.maximum,
                s.max_length,
                s.pattern.clone(),
                s.max_items,
            );
            for version in ["KamajiControlPlane/v1alpha2", "KamajiControlPlane/v1alpha1"] {
                if let Some(rest) = path.strip_prefix(version) {
                    kcp.entry(rest.to_string()).or_default().push(got.clone());
                }
            }
            if path == "ClusterUpgrade/v1alpha1.spec.version" {
                cu_version = Some(got);
            }
        });
        let at = |p: &str| -> Bounds {
            let both = &kcp[p];
            assert_eq!(both.len(), 2, "{p}");
            assert_eq!(both[0], both[1], "{p}: the versions differ");
            both[0].clone()
        };
        let length = Some(i64::from(VERSION_MAX_LENGTH));
        assert_eq!(
            at(".spec.replicas"),
            (
                Some(0.0),
                Some(MAX_CONTROL_PLANE_REPLICAS as f64),
                None,
                None,
                None
            )
        );
        assert_eq!(
            at(".spec.version"),
            (None, None, length, Some(VERSION_PATTERN.into()), None)
        );
        let cu = cu_version.unwrap();
        assert_eq!(cu.2, length);
        assert_eq!(
            cu.3.map(|p| p.replacen("^v", "^v?", 1)),
            Some(VERSION_PATTERN.to_string()),
            "one version shape, its v required in a ClusterUpgrade"
        );
        let d = ".spec.deployment";
        assert_eq!(
            at(&format!("{d}.extraContainers[].args[]")).2,
            Some(DEFAULT_MAX_LENGTH)
        );
        assert_eq!(
            at(&format!("{d}.extraContainers")).4,
            Some(DEFAULT_MAX_ITEMS)
        );
        assert_eq!(
            at(&format!("{d}.tolerations[].tolerationSeconds")).1,
            Some(i64::MAX as f64)
        );
        assert_eq!(
            at(&format!("{d}.extraContainers[].ports[].containerPort")).1,
            Some(f64::from(i32::MAX))
        );
        assert_eq!(at(&format!("{d}.serviceAccountName")).2, Some(253));
    }

    #[test]
    fn generic_bounds_keep_what_a_type_states() {
        let mut s: JSONSchemaProps = serde_json::from_value(serde_json::json!({
            "type": "object",
            "properties": {
                "own": {"type": "string", "maxLength": 5},
                "free": {"type": "string"},
                "choice": {"type": "string", "enum": ["a"]},
                "when": {"type": "string", "format": "date-time"},
                "n": {"type": "integer", "format": "int32", "maximum": 3.0},
                "i32": {"type": "integer", "format": "int32"},
                "i64": {"type": "integer"},
                "list": {"type": "array", "items": {"type": "string"}},
                "map": {"type": "object", "additionalProperties": {"type": "string"}},
                "io": {"x-kubernetes-int-or-string": true,
                    "anyOf": [{"type": "integer"}, {"type": "string"}]},
                "any": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
            }
        }))
        .unwrap();
        bound_what_users_set(&mut s);
        let v = serde_json::to_value(&s).unwrap();
        let p = &v["properties"];
        assert_eq!(p["own"]["maxLength"], 5);
        assert_eq!(p["free"]["maxLength"], DEFAULT_MAX_LENGTH);
        assert!(p["choice"].get("maxLength").is_none());
        assert!(p["when"].get("maxLength").is_none());
        assert_eq!(p["n"]["maximum"], 3.0);
        assert_eq!(p["i32"]["maximum"], f64::from(i32::MAX));
        assert_eq!(p["i64"]["maximum"], i64::MAX as f64);
        assert_eq!(p["list"]["maxItems"], DEFAULT_MAX_ITEMS);
        assert_eq!(p["list"]["items"]["maxLength"], DEFAULT_MAX_LENGTH);
        assert_eq!(p["map"]["maxProperties"], DEFAULT_MAX_PROPERTIES);
        assert_eq!(
            p["map"]["additionalProperties"]["maxLength"],
            DEFAULT_MAX_LENGTH
        );
        assert_eq!(p["io"]["anyOf"][1]["maxLength"], DEFAULT_MAX_LENGTH);
        assert_eq!(
            p["any"],
            serde_json::json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
        );
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
