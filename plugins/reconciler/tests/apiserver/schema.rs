//! Field-for-field compatibility: every property of CACPPK v0.20.0's CRDs (from the Go module
//! proxy) exists in ours, with the same required fields, defaults, enums and CEL rules.

use std::collections::BTreeMap;

use crate::common::*;
use serde_json::Value;

/// Property path → the schema node, for every property in a schema.
fn paths(n: &Value, p: &str, out: &mut BTreeMap<String, Value>) {
    out.insert(p.to_string(), n.clone());
    if let Some(props) = n["properties"].as_object() {
        for (k, c) in props {
            paths(c, &format!("{p}.{k}"), out);
        }
    }
    if n["items"].is_object() {
        paths(&n["items"], &format!("{p}[]"), out);
    }
    if n["additionalProperties"].is_object() {
        paths(&n["additionalProperties"], &format!("{p}{{}}"), out);
    }
}

/// Fields of Kubernetes 1.34+ core types (our k8s-openapi builds the 1.33 API), and controller-gen's
/// empty `metadata` of PVC templates: not part of the KamajiControlPlane API itself.
fn newer_core_field(p: &str) -> bool {
    ["fileKeyRef", "restartPolicyRules", "podCertificate"]
        .iter()
        .any(|f| p.contains(f))
}

fn compare(ours: &Value, upstream: &Value, kind: &str) {
    let (mut o, mut u) = (BTreeMap::new(), BTreeMap::new());
    paths(
        &ours["spec"]["versions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == "v1alpha2")
            .unwrap()["schema"]["openAPIV3Schema"],
        "",
        &mut o,
    );
    paths(
        &upstream["spec"]["versions"][0]["schema"]["openAPIV3Schema"],
        "",
        &mut u,
    );
    let mut missing = Vec::new();
    let mut differ = Vec::new();
    for (p, un) in &u {
        if p.is_empty()
            || p == ".metadata"
            || p == ".apiVersion"
            || p == ".kind"
            || newer_core_field(p)
        {
            continue;
        }
        let Some(on) = o.get(p) else {
            missing.push(p.clone());
            continue;
        };
        // What the KamajiControlPlane API itself declares (core types' list annotations aside).
        for key in [
            "type",
            "enum",
            "default",
            "x-kubernetes-validations",
            "minProperties",
            "x-kubernetes-preserve-unknown-fields",
        ] {
            if un.get(key) != on.get(key) && !(key == "type" && un.get(key).is_none()) {
                differ.push(format!(
                    "{p} {key}: upstream {:?} ours {:?}",
                    un.get(key),
                    on.get(key)
                ));
            }
        }
        let req = |n: &Value| {
            let mut r: Vec<String> = n["required"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|s| s.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default();
            r.sort();
            r
        };
        if !p.contains("extraContainers")
            && !p.contains("extraInitContainers")
            && !p.contains("extraVolumes")
            && req(un) != req(on)
        {
            differ.push(format!(
                "{p} required: upstream {:?} ours {:?}",
                req(un),
                req(on)
            ));
        }
    }
    assert!(
        missing.is_empty(),
        "{kind}: properties missing from our CRD: {missing:#?}"
    );
    // Core Kubernetes types come from k8s-openapi; compare only the KCP's own fields strictly.
    let own: Vec<&String> = differ
        .iter()
        .filter(|d| {
            ![
                "extraContainers",
                "extraInitContainers",
                "extraVolumes",
                "affinity",
                "topologySpreadConstraints",
                "tolerations",
                "resources",
                "strategy",
                "extraVolumeMounts",
                "conditions",
                "targetPort",
            ]
            .iter()
            .any(|c| d.contains(c))
        })
        .collect();
    assert!(own.is_empty(), "{kind}: differences: {own:#?}");
}

#[test]
fn our_crds_cover_cacppk_v0_20_0_field_for_field() {
    let dir = cacppk_dir()
        .expect("CACPPK v0.20.0 from the Go module proxy")
        .join("config/crd/bases");
    let ours = as_values(&kamaji_reconciler::crds());
    for (i, f) in [
        "controlplane.cluster.x-k8s.io_kamajicontrolplanes.yaml",
        "controlplane.cluster.x-k8s.io_kamajicontrolplanetemplates.yaml",
    ]
    .iter()
    .enumerate()
    {
        let up = read_yaml_docs(&dir.join(f)).remove(0);
        assert_eq!(
            ours[i]["spec"]["names"]["kind"],
            up["spec"]["names"]["kind"]
        );
        assert_eq!(
            ours[i]["spec"]["names"]["shortNames"],
            up["spec"]["names"]["shortNames"]
        );
        assert_eq!(
            ours[i]["spec"]["names"]["categories"],
            up["spec"]["names"]["categories"]
        );
        let ov = ours[i]["spec"]["versions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == "v1alpha2")
            .unwrap();
        assert_eq!(
            ov.get("additionalPrinterColumns"),
            up["spec"]["versions"][0].get("additionalPrinterColumns")
        );
        assert_eq!(
            ov.get("subresources"),
            up["spec"]["versions"][0].get("subresources")
        );
        compare(&ours[i], &up, f);
    }
}

/// Every `default` in a schema, by property path.
fn defaults(n: &Value) -> BTreeMap<String, Option<Value>> {
    let mut all = BTreeMap::new();
    paths(n, "", &mut all);
    all.into_iter()
        .map(|(p, n)| (p, n.get("default").cloned()))
        .collect()
}

fn version_schema<'a>(crd: &'a Value, version: &str) -> &'a Value {
    let v = crd["spec"]["versions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == version)
        .unwrap_or_else(|| panic!("no version {version}"));
    &v["schema"]["openAPIV3Schema"]
}

/// Core Kubernetes types embedded in the KCP (containers and volumes of `deployment.extra*`):
/// controller-gen copies their API-server defaults (`protocol: TCP`, `rbd.pool: rbd`, ...) into
/// CACPPK's CRD, k8s-openapi's schemas do not; the API server applies them to the pods anyway.
fn core_type(p: &str) -> bool {
    [
        "extraContainers[]",
        "extraInitContainers[]",
        "extraVolumes[]",
    ]
    .iter()
    .any(|c| p.contains(c))
}

/// The whole schemas' defaults of both our versions against CACPPK's published CRDs: v1alpha2
/// against v0.20.0; v1alpha1 against v0.11.0's v1alpha1, except where v0.11.0 and v0.20.0
/// disagree (kubelet.preferredAddressTypes, konnectivity versions, coreDNS.dnsServiceIPs,
/// konnectivity agent mode and hostNetwork), where both follow v0.20.0. Both keep
/// `conditions[].observedGeneration`, which CACPPK writes.
#[test]
fn our_crd_defaults_are_cacppks() {
    let v20 = cacppk_dir()
        .expect("CACPPK v0.20.0 from the Go module proxy")
        .join("config/crd/bases");
    let v11 = go_mod_dir("github.com/clastix/cluster-api-control-plane-provider-kamaji@v0.11.0")
        .expect("CACPPK v0.11.0 from the Go module proxy")
        .join("config/crd/bases");
    let ours = as_values(&kamaji_reconciler::crds());
    let mut checked = 0;
    for (i, f) in [
        "controlplane.cluster.x-k8s.io_kamajicontrolplanes.yaml",
        "controlplane.cluster.x-k8s.io_kamajicontrolplanetemplates.yaml",
    ]
    .iter()
    .enumerate()
    {
        let u20 = defaults(version_schema(
            &read_yaml_docs(&v20.join(f)).remove(0),
            "v1alpha2",
        ));
        let u11 = defaults(version_schema(
            &read_yaml_docs(&v11.join(f)).remove(0),
            "v1alpha1",
        ));
        for version in ["v1alpha2", "v1alpha1"] {
            let o = defaults(version_schema(&ours[i], version));
            let mut differ = Vec::new();
            let paths: std::collections::BTreeSet<&String> =
                u20.keys().chain(u11.keys()).chain(o.keys()).collect();
            for p in paths {
                if core_type(p) {
                    continue;
                }
                // v1alpha2 is v0.20.0's; v1alpha1 is v0.11.0's where v0.20.0 has no such field.
                let want = if version == "v1alpha2" || u20.contains_key(p) {
                    u20.get(p).cloned().flatten()
                } else {
                    u11.get(p).cloned().flatten()
                };
                let got = o.get(p).cloned().flatten();
                if want.is_some() || got.is_some() {
                    checked += 1;
                }
                if want != got {
                    differ.push(format!("{p}: CACPPK {want:?}, ours {got:?}"));
                }
            }
            assert!(differ.is_empty(), "{f} {version}: {differ:#?}");
            if i == 0 {
                let cond = &version_schema(&ours[i], version)["properties"]["status"]["properties"]
                    ["conditions"]["items"]["properties"];
                assert!(
                    cond["observedGeneration"].is_object(),
                    "{version} prunes conditions[].observedGeneration"
                );
            }
        }
    }
    // The defaults compared: a schema without them (or an empty comparison) must not pass.
    assert!(checked > 40, "only {checked} defaults compared");
}
