//! Field-for-field compatibility: every property of CACPPK v0.20.0's CRDs (from the Go module
//! proxy) exists in ours, with the same required fields, defaults, enums and CEL rules.

mod common;

use std::collections::BTreeMap;

use common::*;
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
    let ours: Vec<Value> = kamaji_reconciler::crds()
        .iter()
        .map(|c| serde_json::to_value(c).unwrap())
        .collect();
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
