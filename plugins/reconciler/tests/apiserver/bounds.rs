//! The KamajiControlPlane CRDs bound what a user sets, and the API server holds to it: a
//! replica count above the provider's maximum and a version that is not one (100,000
//! characters of it among them) are refused on create, on a merge patch and through the scale
//! subresource, in both served versions, while a normal KamajiControlPlane and template, with
//! a script and a certificate in an extra container, are taken. The reconciler's own check of
//! a stored object (`KamajiControlPlaneSpec::out_of_bounds`) refuses exactly what the API
//! server refuses.

use crate::common::*;
use kcore::kamaji::api::v1alpha2::KamajiControlPlaneSpec;
use kube::api::{DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

/// The API server's answer to creating a KamajiControlPlane (`version`) of `spec`, in a
/// server dry run: `Ok` or the message of its refusal (422 Invalid).
async fn try_create(
    c: &kube::Client,
    ns: &str,
    kind: &str,
    version: &str,
    spec: Value,
) -> Result<(), String> {
    let r = ar("controlplane.cluster.x-k8s.io", version, kind);
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("controlplane.cluster.x-k8s.io/{version}"), "kind": kind,
        "metadata": {"generateName": "b-"}, "spec": spec
    }))
    .unwrap();
    let pp = PostParams {
        dry_run: true,
        ..Default::default()
    };
    match dyn_api(c, ns, &r).create(&pp, &obj).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 422 => Err(e.message),
        Err(e) => panic!("creating a {kind}: {e}"),
    }
}

/// A normal spec as a user writes it: an extra container with a 70 KB script and a
/// certificate in its environment, tolerations, labels, extra arguments.
fn normal_spec(version: &str) -> Value {
    let script = format!(
        "set -e\n{}",
        "echo configuring the audit shipper\n".repeat(2000)
    );
    let pem = format!(
        "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n",
        "MIIDdzCCAl+gAwIBAgIEAgAAuTANBgkqhkiG9w0BAQUFADBaMQswCQYDVQQGEwJJ\n".repeat(30)
    );
    json!({
        "version": version, "replicas": 3,
        "dataStoreName": "default",
        "apiServer": {"extraArgs": ["--audit-log-maxage=30", "--v=2"]},
        "network": {"serviceType": "ClusterIP", "certSANs": ["api.example.com", "10.0.0.1"]},
        "deployment": {
            "nodeSelector": {"node-role.kubernetes.io/control-plane": ""},
            "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "cp", "effect": "NoSchedule"}],
            "extraContainers": [{
                "name": "audit-shipper", "image": "example.com/shipper:v1",
                "command": ["sh", "-c", script],
                "env": [{"name": "CA_PEM", "value": pem}]
            }]
        }
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn the_api_server_refuses_a_count_or_a_version_out_of_bounds() {
    let tb = testbed::shared();
    let (c, ns) = namespace(tb, "kr-bounds").await;
    let kcp = "KamajiControlPlane";

    // A normal one is taken, in both versions, with or without the v; its template too.
    for v in ["v1alpha2", "v1alpha1"] {
        for version in ["v1.33.0", "1.33.0"] {
            try_create(&c, &ns, kcp, v, normal_spec(version))
                .await
                .unwrap_or_else(|e| panic!("{v} {version}: {e}"));
        }
        let mut fields = normal_spec("v1.33.0");
        let o = fields.as_object_mut().unwrap();
        o.remove("version");
        o.remove("replicas");
        let template = json!({"template": {"metadata": {"labels": {"a": "b"}}, "spec": fields}});
        try_create(&c, &ns, "KamajiControlPlaneTemplate", v, template)
            .await
            .unwrap_or_else(|e| panic!("{v} template: {e}"));
    }

    // What the hostile user wrote, refused by the API server itself in both versions.
    let long = format!("v1.33.0-{}", "a".repeat(99_992));
    assert_eq!(long.len(), 100_000);
    for v in ["v1alpha2", "v1alpha1"] {
        let e = try_create(
            &c,
            &ns,
            kcp,
            v,
            json!({"version": "v1.33.0", "replicas": i32::MAX}),
        )
        .await
        .expect_err("replicas 2147483647 taken");
        assert!(
            e.contains("spec.replicas") && e.contains("less than or equal to 16"),
            "{e}"
        );
        let e = try_create(&c, &ns, kcp, v, json!({"version": long}))
            .await
            .expect_err("a 100,000-character version taken");
        assert!(e.contains("spec.version"), "{e}");
        // A string an embedded core type leaves unbounded has the generic bound.
        let mut spec = normal_spec("v1.33.0");
        spec["deployment"]["extraContainers"][0]["command"][2] = json!("x".repeat(300_000));
        let e = try_create(&c, &ns, kcp, v, spec)
            .await
            .expect_err("a 300,000-character command taken");
        assert!(e.contains("extraContainers[0].command[2]"), "{e}");
    }

    // The reconciler's check of a stored spec agrees with the API server, case by case.
    let cases: Vec<(Option<i32>, String)> = [
        (Some(0), "v1.33.0"),
        (Some(16), "1.34.1"),
        (Some(17), "v1.33.0"),
        (Some(-1), "v1.33.0"),
        (None, "v1.34.0-rc.1"),
        (None, "v1.33.0+build.5"),
        (None, "v1.33"),
        (None, "latest"),
        (None, "V1.33.0"),
        (None, "v1.33.0-"),
        (None, "v1.33.0 "),
        (None, "v1.33.0\ntouch /tmp/x"),
        (None, "v1.33.0-é"),
    ]
    .into_iter()
    .map(|(r, v)| (r, v.to_string()))
    .chain([
        (None, format!("v1.33.0-{}", "a".repeat(56))),
        (None, format!("v1.33.0-{}", "a".repeat(57))),
        (None, long.clone()),
    ])
    .collect();
    let mut differ = Vec::new();
    for (replicas, version) in &cases {
        let mut spec = json!({"version": version});
        if let Some(r) = replicas {
            spec["replicas"] = json!(r);
        }
        let server = try_create(&c, &ns, kcp, "v1alpha2", spec).await;
        let ours = KamajiControlPlaneSpec {
            replicas: *replicas,
            version: version.clone(),
            ..Default::default()
        }
        .out_of_bounds();
        if server.is_ok() != ours.is_none() {
            let shown: String = version.chars().take(40).collect();
            differ.push(format!(
                "{replicas:?} {shown:?}: API server {server:?}, reconciler {ours:?}"
            ));
        }
    }
    assert!(differ.is_empty(), "{differ:#?}");

    // An object that is in: a merge patch and the scale subresource cannot take it out.
    let r = kcp_ar("v1alpha2");
    create(
        &c,
        &ns,
        &r,
        json!({"apiVersion": "controlplane.cluster.x-k8s.io/v1alpha2", "kind": kcp,
            "metadata": {"name": "in"}, "spec": {"version": "v1.33.0"}}),
    )
    .await;
    let api = dyn_api(&c, &ns, &r);
    for body in [
        json!({"spec": {"replicas": i32::MAX}}),
        json!({"spec": {"version": long}}),
    ] {
        let e = api
            .patch("in", &PatchParams::default(), &Patch::Merge(&body))
            .await
            .expect_err("a merge patch out of bounds taken");
        assert!(matches!(&e, kube::Error::Api(a) if a.code == 422), "{e}");
    }
    let e = api
        .patch_scale(
            "in",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": i32::MAX}})),
        )
        .await
        .expect_err("a scale to 2147483647 taken");
    assert!(matches!(&e, kube::Error::Api(a) if a.code == 422), "{e}");
    let scaled = api
        .patch_scale(
            "in",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 5}})),
        )
        .await
        .unwrap();
    assert_eq!(scaled.spec.and_then(|s| s.replicas), Some(5));
    let now = get(&c, &ns, &r, "in").await.unwrap();
    assert_eq!(now["spec"]["replicas"], 5);
    assert_eq!(now["spec"]["version"], "v1.33.0");
}
