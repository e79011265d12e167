//! End-to-end tests of the reconciler on the full-profile testbed (CAPI v1beta2 contract).
//! The reconciler runs as a process; the fixture plays Kamaji, CAPI core and the
//! infrastructure providers.

use std::time::Duration;

use crate::common::*;
use kube::api::Api;
use serde_json::{Value, json};
use testbed::fixtures::run::assert_contains;

const V: &str = "v1alpha2";

fn net() -> Value {
    json!({"apiServerPort": 7443, "serviceDomain": "cluster.local",
           "services": {"cidrBlocks": ["10.96.0.0/16"]}, "pods": {"cidrBlocks": ["10.244.0.0/16"]}})
}

#[tokio::test(flavor = "multi_thread")]
async fn create_ready_secrets_byo_annotations_and_readiness() {
    let tb = testbed::shared();
    let (c, ns) = namespace(tb, "kr-create").await;
    byo_cluster(&c, &ns, "prod").await;
    let (_cl, _k) = cluster_with_kcp(
        &c,
        &ns,
        "v1beta2",
        "prod",
        "prod-cp",
        Some(("infrastructure.cluster.x-k8s.io", "v1beta1", "ByoCluster")),
        net(),
        json!({"version": "1.33.0", "replicas": 2, "dataStoreName": "default",
               "network": {"serviceType": "LoadBalancer", "certSANs": ["prod.example.com"]},
               "apiServer": {"extraArgs": ["--v=2"]}}),
    )
    .await;
    let mut r = start_reconciler(&tb.kubeconfig, &ns, &[]);

    // The TenantControlPlane, mapped field by field.
    let tcp = wait_for(60, "the TenantControlPlane", Some(&r), || {
        get_tcp(&c, &ns, "prod-cp")
    })
    .await;
    assert_eq!(tcp["spec"]["kubernetes"]["version"], "v1.33.0");
    assert_eq!(tcp["spec"]["networkProfile"]["port"], 7443);
    // Kamaji v1.0.0's CRD has only the singular CIDR fields: a single stack fits.
    assert_eq!(tcp["spec"]["networkProfile"]["serviceCidr"], "10.96.0.0/16");
    assert_eq!(tcp["spec"]["networkProfile"]["podCidr"], "10.244.0.0/16");
    assert_eq!(
        tcp["spec"]["networkProfile"]["certSANs"],
        json!(["prod.example.com"])
    );
    assert_eq!(tcp["spec"]["dataStore"], "default");
    assert_eq!(tcp["spec"]["controlPlane"]["deployment"]["replicas"], 2);
    assert_eq!(
        tcp["spec"]["controlPlane"]["deployment"]["extraArgs"]["apiServer"],
        json!(["--v=2"])
    );
    assert_eq!(
        tcp["spec"]["controlPlane"]["service"]["serviceType"],
        "LoadBalancer"
    );
    // blockOwnerDeletion as CACPPK v0.20.0 sets it (controller-runtime's SetControllerReference):
    // a foreground deletion of the KCP waits for the TCP and both Secrets.
    let owner = &tcp["metadata"]["ownerReferences"][0];
    assert_eq!(
        (
            owner["kind"].as_str(),
            owner["controller"].as_bool(),
            owner["blockOwnerDeletion"].as_bool()
        ),
        (Some("KamajiControlPlane"), Some(true), Some(true))
    );
    let m = wait_condition(
        &c,
        &ns,
        V,
        "prod-cp",
        "TenantControlPlaneAddressReady=False/WaitingForKamaji",
        &r,
    )
    .await;
    assert_contains(&m, "controlPlaneEndpoint");

    // Kamaji reports the address, version and a running deployment.
    kamaji_publish(&c, &ns, "prod-cp", "10.0.0.5:7443", "v1.33.0", "Ready", 2).await;
    // Ready, with conditions of the current generation: patching spec.controlPlaneEndpoint bumps
    // the generation, and the status of that generation follows on the next reconcile.
    let kcp = wait_kcp(&c, &ns, V, "prod-cp", "ready, current", &r, |k| {
        ready(k)
            && k["status"]["conditions"][0]["observedGeneration"] == k["metadata"]["generation"]
    })
    .await;
    assert_eq!(
        kcp["spec"]["controlPlaneEndpoint"],
        json!({"host": "10.0.0.5", "port": 7443})
    );
    assert_eq!(
        kcp["status"]["initialization"]["controlPlaneInitialized"],
        true
    );
    assert_eq!(kcp["status"]["version"], "v1.33.0");
    assert_eq!(kcp["status"]["replicas"], 2);
    assert_eq!(kcp["status"]["availableReplicas"], 2);
    assert_eq!(kcp["status"]["upToDateReplicas"], 2);
    assert_eq!(kcp["status"]["selector"], "kamaji.clastix.io/name=prod-cp");
    assert_eq!(kcp["status"]["externalManagedControlPlane"], true);
    for t in [
        "TenantControlPlaneCreated",
        "ControlPlaneEndpointPatched",
        "InfrastructureClusterPatched",
        "KubeadmResourcesCreated",
        "KamajiControlPlaneIsReady",
        "Available",
    ] {
        assert_eq!(
            condition(&kcp, t).map(|c| c.0),
            Some("True".into()),
            "{t}: {:?}",
            kcp["status"]
        );
    }
    assert_eq!(
        kcp["status"]["conditions"][0]["observedGeneration"],
        kcp["metadata"]["generation"]
    );

    // ByoCluster: spec.controlPlaneEndpoint.
    let byo = ar("infrastructure.cluster.x-k8s.io", "v1beta1", "ByoCluster");
    let b = get(&c, &ns, &byo, "prod").await.unwrap();
    assert_eq!(
        b["spec"]["controlPlaneEndpoint"],
        json!({"host": "10.0.0.5", "port": 7443})
    );

    // CI: BYOH v0.5.0's default port (6443) landed on the ByoCluster after our endpoint, and
    // Cluster API copied that mix into the Cluster for good. Played here as the Cluster is
    // then: the reconciler puts it back on the port the control plane serves, and says so.
    let cluster_ar = ar("cluster.x-k8s.io", "v1beta2", "Cluster");
    merge(
        &c,
        &ns,
        &cluster_ar,
        "prod",
        json!({"spec": {"controlPlaneEndpoint": {"host": "10.0.0.5", "port": 6443}}}),
    )
    .await;
    wait_for(
        30,
        "the Cluster back on 10.0.0.5:7443",
        Some(&r),
        || async {
            let cl = get(&c, &ns, &cluster_ar, "prod").await?;
            (cl["spec"]["controlPlaneEndpoint"] == json!({"host": "10.0.0.5", "port": 7443}))
                .then_some(())
        },
    )
    .await;
    let ev = warning_event(
        &c,
        &ns,
        "KamajiControlPlane",
        "prod-cp",
        "ControlPlaneEndpointRepaired",
        &r,
    )
    .await;
    assert!(ev.note.unwrap_or_default().contains("10.0.0.5:6443"));

    // The CAPI Secrets, in the shape clusterctl and CABPK read.
    let kc = secret(&c, &ns, "prod-kubeconfig")
        .await
        .expect("prod-kubeconfig");
    assert_eq!(kc.type_.as_deref(), Some("cluster.x-k8s.io/secret"));
    assert_eq!(
        kc.metadata.labels.as_ref().unwrap()["cluster.x-k8s.io/cluster-name"],
        "prod"
    );
    let v = data(&kc, "value").unwrap();
    assert!(
        v.contains("server: https://10.0.0.5:7443") && !v.contains("# super"),
        "{v}"
    );
    let ca = secret(&c, &ns, "prod-ca").await.expect("prod-ca");
    for s in [&kc, &ca] {
        let o = &s.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (o.kind.as_str(), o.controller, o.block_owner_deletion),
            ("KamajiControlPlane", Some(true), Some(true))
        );
    }
    assert_eq!(data(&ca, "tls.crt").as_deref(), Some("CERT"));
    assert_eq!(data(&ca, "tls.key").as_deref(), Some("KEY"));
    assert_eq!(ca.type_.as_deref(), Some("cluster.x-k8s.io/secret"));
    assert_eq!(
        ca.metadata.labels.as_ref().unwrap()["kamaji.clastix.io/secret"],
        "ca"
    );

    // The copy follows its source and is put back when changed or deleted: the reconciler skips
    // reading both while the Secret watch shows them as it left them, and each of
    // these changes them.
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(c.clone(), &ns);
    let pp = kube::api::PatchParams::default();
    let rotated = v.replace("token: x", "token: rotated");
    let body = json!({"data": {"admin.conf": base64(&rotated)}});
    let patch = kube::api::Patch::Merge(&body);
    secrets
        .patch("prod-cp-admin-kubeconfig", &pp, &patch)
        .await
        .unwrap();
    let copied = |want: &'static str| {
        let c = &c;
        let ns = &ns;
        move || async move {
            let s = secret(c, ns, "prod-kubeconfig").await?;
            data(&s, "value").filter(|v| v.contains(want))
        }
    };
    wait_for(
        30,
        "the rotated kubeconfig copied",
        Some(&r),
        copied("token: rotated"),
    )
    .await;
    let body = json!({"data": {"value": base64("edited by hand")}});
    let patch = kube::api::Patch::Merge(&body);
    secrets.patch("prod-kubeconfig", &pp, &patch).await.unwrap();
    wait_for(
        30,
        "the edited copy put back",
        Some(&r),
        copied("token: rotated"),
    )
    .await;
    secrets
        .delete("prod-kubeconfig", &Default::default())
        .await
        .unwrap();
    wait_for(
        30,
        "the deleted copy made again",
        Some(&r),
        copied("token: rotated"),
    )
    .await;

    // The kubeconfig key annotation, and an annotation that must follow its removal.
    annotate_kcp(
        &c,
        &ns,
        "prod-cp",
        json!({
        "kamaji.clastix.io/kubeconfig-secret-key": "super-admin.svc", "example.com/team": "blue"}),
    )
    .await;
    wait_for(60, "super-admin.svc copied", Some(&r), || async {
        let s = secret(&c, &ns, "prod-kubeconfig").await?;
        data(&s, "value").filter(|v| v.contains("# super") && v.contains(".svc:6443"))
    })
    .await;
    wait_for(60, "annotations on the TCP", Some(&r), || async {
        let t = get_tcp(&c, &ns, "prod-cp").await?;
        (t["metadata"]["annotations"]["example.com/team"] == "blue"
            && t["metadata"]["annotations"]["kamaji.clastix.io/kubeconfig-secret-key"]
                == "super-admin.svc")
            .then_some(())
    })
    .await;
    annotate_kcp(&c, &ns, "prod-cp", json!({"example.com/team": null})).await;
    wait_for(
        60,
        "the removed annotation gone from the TCP",
        Some(&r),
        || async {
            let t = get_tcp(&c, &ns, "prod-cp").await?;
            t["metadata"]["annotations"]
                .get("example.com/team")
                .is_none()
                .then_some(())
        },
    )
    .await;

    // Readiness also needs the deployment: no available replica → not ready (CACPPK#71).
    merge_status(&c, &ns, &tcp_ar(), "prod-cp", json!({"status": {"kubernetesResources": {"deployment": {"availableReplicas": 0, "readyReplicas": 0}}}})).await;
    let kcp = wait_kcp(&c, &ns, V, "prod-cp", "not ready", &r, |k| {
        k["status"]["ready"] == json!(false)
    })
    .await;
    assert_eq!(condition(&kcp, "Available").unwrap().1, "NotAvailable");
    // Initialized is never reset.
    assert_eq!(
        kcp["status"]["initialization"]["controlPlaneInitialized"],
        true
    );
    r.kill();
}

#[tokio::test(flavor = "multi_thread")]
async fn upstream_samples_apply_unchanged() {
    let tb = testbed::shared();
    let (c, ns) = namespace(tb, "kr-samples").await;
    let dir = cacppk_dir()
        .expect("CACPPK v0.20.0 from the Go module proxy")
        .join("config/samples");
    for f in [
        "controlplane_v1alpha2_kamajicontrolplane.yaml",
        "controlplane_v1alpha2_kamajicontrolplanetemplate.yaml",
    ] {
        for doc in read_yaml_docs(&dir.join(f)) {
            let kind = doc["kind"].as_str().unwrap().to_string();
            let o = create(&c, &ns, &kcp_ar(V).clone_with_kind(&kind), doc.clone()).await;
            // Nothing the sample says was dropped.
            let spec = |v: &Value| match kind.as_str() {
                "KamajiControlPlane" => v["spec"].clone(),
                _ => v["spec"]["template"]["spec"].clone(),
            };
            assert_subset(&spec(&doc), &spec(&o), &kind);
        }
    }
    // The CRD's CEL rules hold: loadBalancerClass needs a LoadBalancer Service.
    let bad = kube::api::PostParams::default();
    let obj: kube::api::DynamicObject = serde_json::from_value(json!({"apiVersion": "controlplane.cluster.x-k8s.io/v1alpha2", "kind": "KamajiControlPlane",
        "metadata": {"name": "bad"}, "spec": {"version": "1.33.0", "network": {"serviceType": "ClusterIP", "loadBalancerConfig": {"loadBalancerClass": "x"}}}})).unwrap();
    let e = dyn_api(&c, &ns, &kcp_ar(V))
        .create(&bad, &obj)
        .await
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("LoadBalancerClass is supported only with LoadBalancer service type"),
        "{e}"
    );
    // An empty controlPlaneEndpoint is refused by the schema, which is why we never send one.
    let obj: kube::api::DynamicObject = serde_json::from_value(json!({"apiVersion": "controlplane.cluster.x-k8s.io/v1alpha2", "kind": "KamajiControlPlane",
        "metadata": {"name": "empty-ep"}, "spec": {"version": "1.33.0", "controlPlaneEndpoint": {}}})).unwrap();
    assert!(
        dyn_api(&c, &ns, &kcp_ar(V))
            .create(&bad, &obj)
            .await
            .is_err()
    );
}

trait WithKind {
    fn clone_with_kind(&self, kind: &str) -> kube::api::ApiResource;
}
impl WithKind for kube::api::ApiResource {
    fn clone_with_kind(&self, kind: &str) -> kube::api::ApiResource {
        ar(&self.group, &self.version, kind)
    }
}

fn assert_subset(want: &Value, have: &Value, path: &str) {
    match want {
        Value::Object(m) => {
            for (k, v) in m {
                // Empty lists and objects may be normalised away.
                if matches!(v, Value::Array(a) if a.is_empty())
                    || matches!(v, Value::Object(o) if o.is_empty())
                {
                    continue;
                }
                assert_subset(v, &have[k], &format!("{path}.{k}"));
            }
        }
        _ => assert_eq!(want, have, "{path}"),
    }
}

/// A story's start on the shared testbed: a fresh namespace, the plain cluster `cluster` whose
/// KamajiControlPlane wants `version`, and a reconciler watching the namespace.
async fn story(
    prefix: &str,
    cluster: &str,
    net: Value,
    version: &str,
) -> (kube::Client, String, Reconciler) {
    let tb = testbed::shared();
    let (c, ns) = namespace(tb, prefix).await;
    plain_cluster(&c, &ns, cluster, net, json!({"version": version})).await;
    let r = start_reconciler(&tb.kubeconfig, &ns, &[]);
    (c, ns, r)
}

/// Waits for `TenantControlPlaneCreated=False/<reason>` on the KamajiControlPlane `kcp`, and
/// returns its message.
async fn not_created(
    c: &kube::Client,
    ns: &str,
    kcp: &str,
    reason: &str,
    r: &Reconciler,
) -> String {
    let want = format!("TenantControlPlaneCreated=False/{reason}");
    wait_condition(c, ns, V, kcp, &want, r).await
}

/// Merges `annotations` (null removes one) into those of the KamajiControlPlane `kcp`.
async fn annotate_kcp(c: &kube::Client, ns: &str, kcp: &str, annotations: Value) {
    let body = json!({"metadata": {"annotations": annotations}});
    merge(c, ns, &kcp_ar(V), kcp, body).await;
}

/// Sets the v1beta2 Cluster `name`'s `spec.paused`, as a user (or `clusterctl move`) does.
async fn pause_cluster(c: &kube::Client, ns: &str, name: &str, paused: bool) {
    let body = json!({"spec": {"paused": paused}});
    merge(c, ns, &cluster_ar("v1beta2"), name, body).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn missing_owner_and_pause() {
    let tb = testbed::shared();
    let (c, ns) = namespace(tb, "kr-pause").await;
    apply(
        &c,
        &ns,
        &kcp_ar(V),
        json!({"apiVersion": "controlplane.cluster.x-k8s.io/v1alpha2", "kind": "KamajiControlPlane",
        "metadata": {"name": "orphan"}, "spec": {"version": "1.33.0"}}),
    )
    .await;
    let (cl, _) = plain_cluster(&c, &ns, "paused", net(), json!({"version": "1.33.0"})).await;
    pause_cluster(&c, &ns, &name_of(&cl), true).await;
    let r = start_reconciler(&tb.kubeconfig, &ns, &[]);

    // Without a Cluster owner: a condition and an Event that say why nothing happens.
    let m = not_created(&c, &ns, "orphan", "WaitingForClusterOwner", &r).await;
    assert!(m.contains("ownerReference") && m.contains("Cluster"), "{m}");
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(c.clone(), &ns);
    let ev = wait_for(30, "the Event", Some(&r), || async {
        let l = events.list(&Default::default()).await.ok()?;
        l.items
            .into_iter()
            .find(|e| e.regarding.as_ref().and_then(|o| o.name.as_deref()) == Some("orphan"))
    })
    .await;
    assert_eq!(ev.reason.as_deref(), Some("WaitingForClusterOwner"));
    assert_eq!(ev.type_.as_deref(), Some("Warning"));
    assert!(get_tcp(&c, &ns, "orphan").await.is_none());

    // Paused Cluster: Paused=True and nothing created.
    wait_condition(&c, &ns, V, "paused-cp", "Paused=True/Paused", &r).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(get_tcp(&c, &ns, "paused-cp").await.is_none());
    // Unpaused, but the KCP carries the paused annotation: still paused.
    annotate_kcp(&c, &ns, "paused-cp", json!({"cluster.x-k8s.io/paused": ""})).await;
    pause_cluster(&c, &ns, "paused", false).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(get_tcp(&c, &ns, "paused-cp").await.is_none());
    // Annotation removed: reconciliation resumes (watch-driven, no polling).
    annotate_kcp(
        &c,
        &ns,
        "paused-cp",
        json!({"cluster.x-k8s.io/paused": null}),
    )
    .await;
    wait_for(60, "the TCP after unpausing", Some(&r), || {
        get_tcp(&c, &ns, "paused-cp")
    })
    .await;
    wait_condition(&c, &ns, V, "paused-cp", "Paused=False/NotPaused", &r).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn deletion_garbage_collects_and_releases_the_finalizer() {
    let (c, ns, r) = story("kr-delete", "gone", net(), "1.33.0").await;
    wait_tcp(&c, &ns, "gone-cp", &r).await;
    kamaji_publish(&c, &ns, "gone-cp", "10.0.0.9:6443", "v1.33.0", "Ready", 1).await;
    wait_for(60, "the secrets", Some(&r), || async {
        secret(&c, &ns, "gone-kubeconfig").await?;
        secret(&c, &ns, "gone-ca").await
    })
    .await;
    // A leftover external-reference finalizer must not block deletion.
    merge(
        &c,
        &ns,
        &kcp_ar(V),
        "gone-cp",
        json!({"metadata": {"finalizers": ["ecr.kamaji.clastix.io/finalizer"]}}),
    )
    .await;
    delete_kcp(&c, &ns, V, "gone-cp", &r).await;
    // Garbage collection (kube-controller-manager) removes what the KCP owned.
    wait_for(90, "TCP and CAPI secrets collected", Some(&r), || async {
        let t = get_tcp(&c, &ns, "gone-cp").await;
        let k = secret(&c, &ns, "gone-kubeconfig").await;
        let a = secret(&c, &ns, "gone-ca").await;
        (t.is_none() && k.is_none() && a.is_none()).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn upgrade_1_33_to_1_35_steps_through_the_recorded_1_34_patch() {
    let (c, ns, r) = story("kr-upgrade", "up", net(), "v1.33.0").await;
    kamaji_ready(&c, &ns, "up-cp", "10.0.0.7:6443", "v1.33.0", &r).await;

    // As `kubectl kamaji upgrade` records them: the newest patch of 1.33 and of 1.34 (the
    // reconciler walks through these, not its shipped table).
    merge(
        &c,
        &ns,
        &kcp_ar(V),
        "up-cp",
        json!({"metadata": {"annotations": {"capi-kamaji.io/patch-releases": "v1.33.0,v1.34.2"}}}),
    )
    .await;
    set_version(&c, &ns, V, "up-cp", "v1.35.0").await;
    let spec_version = |c: kube::Client, ns: String| async move {
        get_tcp(&c, &ns, "up-cp").await.map(|t| {
            t["spec"]["kubernetes"]["version"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
    };
    wait_for(60, "step v1.34.2 written", Some(&r), || async {
        (spec_version(c.clone(), ns.clone()).await? == "v1.34.2").then_some(())
    })
    .await;
    // Kamaji is rolling v1.34.2 out: the reconciler waits.
    kamaji_version(&c, &ns, "up-cp", "v1.33.0", "Upgrading").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        spec_version(c.clone(), ns.clone()).await.as_deref(),
        Some("v1.34.2")
    );
    let m = wait_condition(
        &c,
        &ns,
        V,
        "up-cp",
        "VersionUpgrade=True/WaitingForStep",
        &r,
    )
    .await;
    assert!(m.contains("v1.34.2") && m.contains("v1.35.0"), "{m}");
    // v1.34.2 Ready: the last step.
    kamaji_version(&c, &ns, "up-cp", "v1.34.2", "Ready").await;
    wait_for(60, "v1.35.0 written", Some(&r), || async {
        (spec_version(c.clone(), ns.clone()).await? == "v1.35.0").then_some(())
    })
    .await;
    kamaji_version(&c, &ns, "up-cp", "v1.35.0", "Ready").await;
    wait_condition(&c, &ns, V, "up-cp", "VersionUpgrade=False/UpToDate", &r).await;
    let k = get(&c, &ns, &kcp_ar(V), "up-cp").await.unwrap();
    assert_eq!(k["status"]["version"], "v1.35.0");

    // A downgrade of the minor is refused early, with a clear condition.
    set_version(&c, &ns, V, "up-cp", "v1.34.2").await;
    let m = not_created(&c, &ns, "up-cp", "VersionRefused", &r).await;
    assert_contains(&m, "downgrading");
    assert_eq!(
        spec_version(c.clone(), ns.clone()).await.as_deref(),
        Some("v1.35.0")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn killed_mid_way_converges_after_restart() {
    let (c, ns, mut r) = story("kr-restart", "phoenix", net(), "1.34.1").await;
    wait_tcp(&c, &ns, "phoenix-cp", &r).await;
    r.kill();
    // While it is down, Kamaji finishes its part and the user changes the spec.
    kamaji_publish(
        &c,
        &ns,
        "phoenix-cp",
        "10.0.0.8:6443",
        "v1.34.1",
        "Ready",
        2,
    )
    .await;
    merge(
        &c,
        &ns,
        &kcp_ar(V),
        "phoenix-cp",
        json!({"spec": {"replicas": 3}}),
    )
    .await;
    let r2 = start_reconciler(&testbed::shared().kubeconfig, &ns, &[]);
    wait_for(60, "converged after restart", Some(&r2), || async {
        let k = get(&c, &ns, &kcp_ar(V), "phoenix-cp").await?;
        let t = get_tcp(&c, &ns, "phoenix-cp").await?;
        secret(&c, &ns, "phoenix-kubeconfig").await?;
        (k["status"]["ready"] == json!(true)
            && k["spec"]["controlPlaneEndpoint"]["host"] == "10.0.0.8"
            && t["spec"]["controlPlane"]["deployment"]["replicas"] == 3)
            .then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn dual_stack_on_a_kamaji_without_plural_cidrs_is_reported() {
    let net = json!({"services": {"cidrBlocks": ["10.96.0.0/16", "fd00:10:96::/108"]}, "pods": {"cidrBlocks": ["10.244.0.0/16", "fd00:10:244::/56"]}});
    let (c, ns, r) = story("kr-dual", "dual", net, "1.33.0").await;
    let m = not_created(&c, &ns, "dual-cp", "UnsupportedByInstalledKamaji", &r).await;
    assert!(
        m.contains("dual stack") && m.contains("serviceCidrs") && m.contains("podCidrs"),
        "{m}"
    );
    assert!(get_tcp(&c, &ns, "dual-cp").await.is_none());
}

/// Idle, the reconciler makes no request; woken by a change that changes nothing it does (a label
/// on the Cluster, then on the TenantControlPlane), it reads both from its watches' caches and
/// the Secrets' resourceVersions, and makes no request either (each such reconcile read
/// the Cluster, the TenantControlPlane and both Secrets again).
#[tokio::test(flavor = "multi_thread")]
async fn an_idle_reconciler_makes_no_api_requests() {
    let (c, ns, r) = story("kr-idle", "idle", net(), "1.33.0").await;
    kamaji_ready(&c, &ns, "idle-cp", "10.0.0.20:6443", "v1.33.0", &r).await;
    let health = r.http_get("/healthz").unwrap_or_default();
    assert!(
        health.starts_with("HTTP/1.1 200") && health.ends_with("ok\n"),
        "{health}"
    );
    assert!(
        r.http_get("/readyz")
            .unwrap_or_default()
            .starts_with("HTTP/1.1 200")
    );
    // Let the last status write's own watch event settle, then count.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = r
        .counter("kamaji_reconciler_api_requests_total")
        .expect("metrics");
    let reconciles = r
        .counter("kamaji_reconciler_reconciles_total")
        .expect("metrics");
    assert!(before > 0 && reconciles > 0);
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(
        r.counter("kamaji_reconciler_api_requests_total"),
        Some(before),
        "requests while idle"
    );
    assert_eq!(
        r.counter("kamaji_reconciler_reconciles_total"),
        Some(reconciles),
        "reconciles while idle"
    );
    let mut done = reconciles;
    for (kind, name) in [(cluster_ar("v1beta2"), "idle"), (tcp_ar(), "idle-cp")] {
        let body = json!({"metadata": {"labels": {"touched": "by-the-test"}}});
        merge(&c, &ns, &kind, name, body).await;
        // A reconcile is counted once it is done, its requests with it.
        done = wait_for(
            30,
            "a reconcile of the touched object",
            Some(&r),
            || async {
                let n = r.counter("kamaji_reconciler_reconciles_total")?;
                (n > done).then_some(n)
            },
        )
        .await;
    }
    assert_eq!(
        r.counter("kamaji_reconciler_api_requests_total"),
        Some(before),
        "requests of reconciles that had nothing to do"
    );
}

/// A ClusterUpgrade of a cluster whose control plane is a KamajiControlPlane. The
/// plan's one step patches the KCP, whose own controller steps the TenantControlPlane; Kamaji is
/// played (Ready at the new version) and the ClusterUpgrade succeeds. The KCP's resource is found
/// in its group although the group's preferred version (KubeadmControlPlane's v1beta2, where
/// CAPI's CRDs are installed) does not serve it: `make demo` hung on that.
#[tokio::test(flavor = "multi_thread")]
async fn a_cluster_upgrade_of_a_kamaji_control_plane() {
    let tb = testbed::shared();
    let (c, ns) = namespace(tb, "kr-cu").await;
    install_ops_crds(&c).await;
    cluster_with_kcp(
        &c,
        &ns,
        "v1beta2",
        "cu",
        "cu",
        None,
        net(),
        json!({"version": "v1.33.0"}),
    )
    .await;
    let r = start_reconciler(&tb.kubeconfig, &ns, &[]);
    kamaji_ready(&c, &ns, "cu", "10.0.0.8:6443", "v1.33.0", &r).await;
    let cu_ar = kube::discovery::ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("ops.capi-kamaji.io", "v1alpha1", "ClusterUpgrade"),
        "clusterupgrades",
    );
    let cus: kube::Api<kube::api::DynamicObject> =
        kube::Api::namespaced_with(c.clone(), &ns, &cu_ar);
    let cu = kube::api::DynamicObject::new("cu", &cu_ar)
        .within(&ns)
        // As `kubectl capi upgrade` records it when v1.33.0 is the newest patch of 1.33 it
        // knows: one step.
        .data(json!({"spec": {"clusterName": "cu", "version": "v1.34.0", "patchReleases": ["v1.33.0"]}}));
    cus.create(&Default::default(), &cu).await.unwrap();
    wait_kcp(&c, &ns, V, "cu", "patched to v1.34.0", &r, |k| {
        k["spec"]["version"] == "v1.34.0"
    })
    .await;
    kamaji_version(&c, &ns, "cu", "v1.34.0", "Ready").await;
    wait_for(90, "the ClusterUpgrade to succeed", Some(&r), || async {
        let o = cus.get("cu").await.ok()?;
        (o.data["status"]["phase"] == "Succeeded").then_some(())
    })
    .await;
    let o = cus.get("cu").await.unwrap();
    assert_eq!(
        o.data["status"]["plan"][0]["target"],
        "KamajiControlPlane/cu"
    );
    assert_eq!(o.data["status"]["progress"], "1/1");
}

/// A ClusterUpgrade whose Cluster does not exist gets a condition and an Event saying
/// so, and is not retried with back-off; once the Cluster appears (watch-driven) it is owned by
/// it, and deleting the Cluster deletes the ClusterUpgrade (the testbed's garbage collector).
#[tokio::test(flavor = "multi_thread")]
async fn a_cluster_upgrade_of_a_missing_cluster_says_so_and_goes_with_its_cluster() {
    let tb = testbed::shared();
    let (c, ns) = namespace(tb, "kr-cu-ghost").await;
    install_ops_crds(&c).await;
    let r = start_reconciler(&tb.kubeconfig, &ns, &[]);
    let cus = dyn_api(&c, &ns, &ops_ar("ClusterUpgrade"));
    create(
        &c,
        &ns,
        &ops_ar("ClusterUpgrade"),
        json!({"apiVersion": "ops.capi-kamaji.io/v1alpha1", "kind": "ClusterUpgrade",
            "metadata": {"name": "ghost"}, "spec": {"clusterName": "ghost", "version": "v1.34.0"}}),
    )
    .await;
    let m = wait_for(
        60,
        "ClusterUpgrade ghost: Ready=False/ClusterNotFound",
        Some(&r),
        || async {
            let o = get(&c, &ns, &ops_ar("ClusterUpgrade"), "ghost").await?;
            let (s, reason, m) = condition(&o, "Ready")?;
            (s == "False" && reason == "ClusterNotFound").then_some(m)
        },
    )
    .await;
    assert_contains(&m, &format!("Cluster {ns}/ghost not found"));
    let ev = warning_event(&c, &ns, "ClusterUpgrade", "ghost", "ClusterNotFound", &r).await;
    assert!(ev.note.unwrap_or_default().contains("not found"));
    assert_log_lacks(
        &r,
        &["upgrade reconcile failed"],
        "a missing Cluster is input to report, not an error to retry",
    );

    // The Cluster appears: the ClusterUpgrade is acted on and owned by it.
    let (cl, _) = cluster_with_kcp(
        &c,
        &ns,
        "v1beta2",
        "ghost",
        "ghost",
        None,
        net(),
        json!({"version": "v1.33.0"}),
    )
    .await;
    let uid = cl["metadata"]["uid"].as_str().unwrap().to_string();
    wait_for(
        60,
        "the Cluster owning its ClusterUpgrade",
        Some(&r),
        || async {
            let o = get(&c, &ns, &ops_ar("ClusterUpgrade"), "ghost").await?;
            let owned = o["metadata"]["ownerReferences"]
                .as_array()?
                .iter()
                .any(|o| o["uid"] == uid.as_str() && o["kind"] == "Cluster");
            let (_, reason, _) = condition(&o, "Ready")?;
            (owned && reason != "ClusterNotFound").then_some(())
        },
    )
    .await;
    delete(&c, &ns, &cluster_ar("v1beta2"), "ghost").await;
    wait_for(
        90,
        "the ClusterUpgrade collected with its Cluster",
        Some(&r),
        || async { cus.get_opt("ghost").await.ok()?.is_none().then_some(()) },
    )
    .await;
}

/// A FleetUpgrade whose selector is no selector (`a in (b`) gets a condition and an
/// Event, is not retried with back-off, and is looked at again when its spec changes.
#[tokio::test(flavor = "multi_thread")]
async fn a_fleet_upgrade_with_a_malformed_selector_says_so() {
    let tb = testbed::shared();
    let (c, ns) = namespace(tb, "kr-fu-bad").await;
    install_ops_crds(&c).await;
    let r = start_reconciler(&tb.kubeconfig, &ns, &[]);
    let fu = ops_ar("FleetUpgrade");
    create(
        &c,
        &ns,
        &fu,
        json!({"apiVersion": "ops.capi-kamaji.io/v1alpha1", "kind": "FleetUpgrade",
            "metadata": {"name": "bad"}, "spec": {"selector": "a in (b", "version": "v1.34.0"}}),
    )
    .await;
    let ready = |reason: &'static str| {
        let (c, ns, fu) = (c.clone(), ns.clone(), fu.clone());
        move || {
            let (c, ns, fu) = (c.clone(), ns.clone(), fu.clone());
            async move {
                let o = get(&c, &ns, &fu, "bad").await?;
                let (s, re, m) = condition(&o, "Ready")?;
                (s == "False" && re == reason && o["status"]["phase"] == "Failed").then_some(m)
            }
        }
    };
    let m = wait_for(
        60,
        "FleetUpgrade bad: InvalidSelector",
        Some(&r),
        ready("InvalidSelector"),
    )
    .await;
    assert!(m.contains("spec.selector") && m.contains("a in (b"), "{m}");
    warning_event(&c, &ns, "FleetUpgrade", "bad", "InvalidSelector", &r).await;
    // A new spec is looked at again (watch-driven): this selector is valid but picks nothing.
    merge(&c, &ns, &fu, "bad", json!({"spec": {"selector": "a=b"}})).await;
    let m = wait_for(
        60,
        "FleetUpgrade bad: NoClusterSelected",
        Some(&r),
        ready("NoClusterSelected"),
    )
    .await;
    assert_contains(&m, "picks no Cluster");
    warning_event(&c, &ns, "FleetUpgrade", "bad", "NoClusterSelected", &r).await;
    assert_log_lacks(
        &r,
        &["fleet reconcile failed"],
        "a malformed selector is input to report, not an error to retry",
    );
}
