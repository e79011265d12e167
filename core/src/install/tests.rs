use super::*;
use crate::labels::{CLUSTERCTL_LABEL, PROVIDER, PROVIDER_LABEL};

#[test]
fn backup_claims_are_mounted_and_passed_to_the_reconciler() {
    let mut m = install_manifests("img:1", "ns1", 1);
    mount_backup_claims(&mut m, &["nightly".into()]);
    let dep = m.iter().find(|o| o["kind"] == "Deployment").unwrap();
    let pod = &dep["spec"]["template"]["spec"];
    assert_eq!(
        pod["volumes"][0]["persistentVolumeClaim"]["claimName"],
        "nightly"
    );
    assert_eq!(pod["securityContext"]["fsGroup"], 65532);
    let c = &pod["containers"][0];
    assert_eq!(
        c["volumeMounts"][0]["mountPath"],
        "/var/lib/kamaji-backups/nightly"
    );
    assert!(
        c["args"]
            .to_string()
            .contains("--backup-volume=nightly=/var/lib/kamaji-backups/nightly"),
        "{c}"
    );
}

#[test]
fn manifests_are_hardened_and_least_privilege() {
    let m = install_manifests("img:1", "ns1", 1);
    let kinds: Vec<&str> = m.iter().filter_map(|o| o["kind"].as_str()).collect();
    assert_eq!(
        kinds
            .iter()
            .filter(|k| **k == "CustomResourceDefinition")
            .count(),
        5
    );
    let dep = m.iter().find(|o| o["kind"] == "Deployment").unwrap();
    let c = &dep["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(c["image"], "img:1");
    assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(
        dep["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"],
        true
    );
    assert!(c["resources"]["limits"]["memory"].is_string());
    let role = cluster_role();
    for r in role["rules"].as_array().unwrap() {
        for v in r["verbs"].as_array().unwrap() {
            assert_ne!(v, "*");
        }
        assert!(!r["resources"].as_array().unwrap().iter().any(|x| x == "*"));
    }
    let reader = m
        .iter()
        .find(|o| {
            o["metadata"]["name"] == "kamaji-reconciler-kubeadm-bootstrap-reader"
                && o["kind"] == "ClusterRoleBinding"
        })
        .unwrap();
    assert_eq!(
        reader["subjects"][0]["name"],
        "system:serviceaccount:capi-kubeadm-bootstrap-system:capi-kubeadm-bootstrap-manager"
    );
    assert!(reader["subjects"][0].get("namespace").is_none());
}

/// The rules of `role` as `group/resource` → verbs.
fn grants(role: &Value) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    for r in role["rules"].as_array().unwrap() {
        for g in r["apiGroups"].as_array().unwrap() {
            for res in r["resources"].as_array().unwrap() {
                let verbs = r["verbs"].as_array().unwrap();
                out.push((
                    format!("{}/{}", g.as_str().unwrap(), res.as_str().unwrap()),
                    verbs.iter().map(|v| v.as_str().unwrap().into()).collect(),
                ));
            }
        }
    }
    out
}

#[test]
fn with_namespaces_secrets_and_the_watched_kinds_are_granted_only_there() {
    let watched = vec!["team-a".to_string(), "team-b".to_string()];
    let m = install_manifests_watching("img:1", "ns1", 1, &watched);
    let wide_role = m
        .iter()
        .find(|o| o["kind"] == "ClusterRole" && o["metadata"]["name"] == NAME)
        .unwrap();
    let cluster_wide = grants(wide_role);
    let resources: Vec<&str> = cluster_wide.iter().map(|(r, _)| r.as_str()).collect();
    assert_eq!(
        resources,
        [
            "kamaji.clastix.io/datastores",
            "infrastructure.cluster.x-k8s.io/byohosts",
            "apiextensions.k8s.io/customresourcedefinitions",
            "coordination.k8s.io/leases"
        ],
        "{wide_role}"
    );
    // Read only: the CRD and the Leases by name, the hosts listed.
    for (r, verbs) in &cluster_wide {
        assert!(
            verbs.iter().all(|v| v == "get" || v == "list"),
            "{r}: {verbs:?}"
        );
    }
    for ns in &watched {
        let role = m
            .iter()
            .find(|o| {
                o["kind"] == "Role"
                    && o["metadata"]["namespace"] == ns.as_str()
                    && o["metadata"]["name"] == NAME
            })
            .unwrap();
        let g = grants(role);
        assert!(
            g.iter()
                .any(|(r, v)| r == "/secrets" && v.contains(&"create".to_string())),
            "{role}"
        );
        assert!(
            !g.iter()
                .any(|(r, _)| r.starts_with("coordination") || r.starts_with("apiextensions")),
            "{role}"
        );
        let binding = m
            .iter()
            .find(|o| o["kind"] == "RoleBinding" && o["metadata"]["namespace"] == ns.as_str())
            .unwrap();
        assert_eq!(binding["roleRef"]["kind"], "Role");
        assert_eq!(binding["subjects"][0]["namespace"], "ns1");
    }
    // Both together grant exactly what the cluster-wide role grants.
    let mut split: Vec<_> = cluster_wide;
    let role = m
        .iter()
        .find(|o| o["kind"] == "Role" && o["metadata"]["name"] == NAME)
        .unwrap();
    split.extend(grants(role));
    let mut whole = grants(&cluster_role());
    split.sort();
    whole.sort();
    assert_eq!(split, whole);
    let dep = m.iter().find(|o| o["kind"] == "Deployment").unwrap();
    let args = dep["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .unwrap();
    assert!(
        args.contains(&json!("--namespaces=team-a,team-b")),
        "{args:?}"
    );
    // Without namespaces: the cluster-wide install, no namespaced Role but leader election's.
    let plain = install_manifests("img:1", "ns1", 1);
    assert!(
        !plain
            .iter()
            .any(|o| o["kind"] == "Role" && o["metadata"]["name"] == NAME)
    );
    assert!(!plain.iter().any(|o| o.to_string().contains("--namespaces")));
}

#[test]
fn an_admission_policy_narrows_the_reconcilers_secret_writes() {
    let name = "kamaji-reconciler-secrets";
    for watched in [vec![], vec!["team-a".to_string()]] {
        let m = install_manifests_watching("img:1", "ns1", 1, &watched);
        let at = |kind: &str| {
            m.iter()
                .position(|o| o["kind"] == kind && o["metadata"]["name"] == name)
                .unwrap_or_else(|| panic!("no {kind} {name}"))
        };
        let (policy, binding) = (
            at("ValidatingAdmissionPolicy"),
            at("ValidatingAdmissionPolicyBinding"),
        );
        let deployment = m.iter().position(|o| o["kind"] == "Deployment").unwrap();
        // In force before the reconciler runs, the binding after its policy.
        assert!(
            policy < binding && binding < deployment,
            "{policy} {binding}"
        );
        let p = &m[policy]["spec"];
        assert_eq!(p["failurePolicy"], "Fail");
        assert_eq!(
            p["matchConstraints"]["resourceRules"],
            json!([{"apiGroups": [""], "apiVersions": ["v1"], "resources": ["secrets"],
                    "operations": ["CREATE", "UPDATE"]}])
        );
        // The reconciler's service account, in the install namespace or wherever
        // clusterctl's --target-namespace put it.
        let user = p["matchConditions"][0]["expression"].as_str().unwrap();
        assert_eq!(
            user,
            "request.userInfo.username.startsWith('system:serviceaccount:') && request.userInfo.username.endsWith(':kamaji-reconciler')"
        );
        let validations = p["validations"].as_array().unwrap();
        assert_eq!(validations.len(), 3);
        let all: String = validations
            .iter()
            .map(|v| v["expression"].as_str().unwrap())
            .collect();
        for must in [
            "object.type == 'cluster.x-k8s.io/secret'",
            "[variables.cluster + '-kubeconfig', variables.cluster + '-ca']",
            "o.kind == 'KamajiControlPlane'",
            "oldObject.metadata.ownerReferences.all(",
        ] {
            assert!(all.contains(must), "{must}: {all}");
        }
        assert!(
            p["variables"][0]["expression"]
                .as_str()
                .unwrap()
                .contains("object.metadata.labels['cluster.x-k8s.io/cluster-name']")
        );
        for v in validations {
            // 403, one line each, not the 422 the API server answers by default.
            assert_eq!(v["reason"], "Forbidden");
            let msg = v["message"].as_str().unwrap();
            assert!(
                msg.starts_with("kamaji-reconciler ") && !msg.contains('\n'),
                "{msg}"
            );
        }
        let b = &m[binding]["spec"];
        assert_eq!(b["policyName"], name);
        assert_eq!(b["validationActions"], json!(["Deny"]));
        assert!(b.get("paramRef").is_none() && b.get("matchResources").is_none());
    }
    // Uninstall deletes the reconciler first, then the binding, then its policy.
    let u = uninstall_manifests("ns1");
    let at = |kind: &str| u.iter().position(|o| o["kind"] == kind).unwrap();
    assert!(at("Deployment") < at("ValidatingAdmissionPolicyBinding"));
    assert!(at("ValidatingAdmissionPolicyBinding") < at("ValidatingAdmissionPolicy"));
}

#[test]
fn namespaces_are_bounded_labels_given_once() {
    assert_eq!(parse_namespaces("a,team-b").unwrap(), ["a", "team-b"]);
    assert_eq!(parse_namespaces("a, b").unwrap(), ["a", "b"]);
    let many = (0..=MAX_WATCHED_NAMESPACES)
        .map(|i| format!("n{i}"))
        .collect::<Vec<_>>()
        .join(",");
    assert!(parse_namespaces(&many).unwrap_err().contains("at most 32"));
    let just = (0..MAX_WATCHED_NAMESPACES)
        .map(|i| format!("n{i}"))
        .collect::<Vec<_>>()
        .join(",");
    assert_eq!(
        parse_namespaces(&just).unwrap().len(),
        MAX_WATCHED_NAMESPACES
    );
    for (bad, says) in [
        ("", "empty name"),
        ("a,,b", "empty name"),
        ("a,", "empty name"),
        ("A", "not a namespace name"),
        ("a.b", "not a namespace name"),
        ("-a", "not a namespace name"),
        ("a$(x)", "not a namespace name"),
        (&"x".repeat(64), "not a namespace name"),
        ("a,b,a", "twice"),
    ] {
        let e = parse_namespaces(bad).unwrap_err();
        assert!(e.contains(says), "{bad:?}: {e}");
        assert!(!e.contains('\n'), "one line: {e}");
    }
    let long = parse_namespaces(&"X".repeat(10_000)).unwrap_err();
    assert!(long.len() < 400, "{long}");
}

#[test]
fn every_object_carries_the_clusterctl_and_provider_labels() {
    for o in install_manifests(DEFAULT_IMAGE, DEFAULT_NAMESPACE, 1) {
        let l = &o["metadata"]["labels"];
        assert_eq!(l[CLUSTERCTL_LABEL], "", "{}", o["metadata"]["name"]);
        assert_eq!(l[PROVIDER_LABEL], PROVIDER, "{}", o["metadata"]["name"]);
        assert_eq!(l[OWNER_LABEL.0], OWNER_LABEL.1, "{}", o["metadata"]["name"]);
    }
}

#[test]
fn the_default_image_is_this_version_and_the_namespace_is_not_cacppks() {
    assert!(!DEFAULT_IMAGE.ends_with(":latest"));
    assert_eq!(
        DEFAULT_IMAGE.rsplit_once(':').map(|(_, t)| t.to_string()),
        Some(format!("v{}", env!("CARGO_PKG_VERSION")))
    );
    assert_ne!(DEFAULT_NAMESPACE, "kamaji-system");
    let dep = deployment("i", "ns1", 3);
    assert_eq!(dep["spec"]["replicas"], 3);
    let c = &dep["spec"]["template"]["spec"]["containers"][0];
    assert!(
        !c["args"].to_string().contains("ns1"),
        "the namespace must come from the downward API: {}",
        c["args"]
    );
    assert!(
        c["env"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["name"] == "POD_NAMESPACE"
                && e["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace")
    );
}
