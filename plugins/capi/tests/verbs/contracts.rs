//! The day-2 verbs on both CAPI contracts and on ClusterClass clusters, with objects written
//! through the API (no controllers): v1beta1 fields (`spec.rolloutAfter`, versioned references)
//! on the CAPI 1.10-shaped testbed, and `spec.topology` patches on the full profile.

use std::path::Path;
use std::process::Output;

use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::discovery::ApiResource;
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_kubectl-capi");

fn ar(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: format!("{group}/{version}"),
        kind: kind.into(),
        plural: plural.into(),
    }
}

async fn apply(client: &Client, ns: &str, r: &ApiResource, obj: Value) {
    let name = obj["metadata"]["name"].as_str().unwrap().to_string();
    Api::<DynamicObject>::namespaced_with(client.clone(), ns, r)
        .patch(
            &name,
            &PatchParams::apply("contracts-test"),
            &Patch::Apply(&obj),
        )
        .await
        .unwrap_or_else(|e| panic!("applying {} {name}: {e}", r.kind));
}

async fn get(client: &Client, ns: &str, r: &ApiResource, name: &str) -> Value {
    Api::<DynamicObject>::namespaced_with(client.clone(), ns, r)
        .get(name)
        .await
        .unwrap()
        .data
}

use testbed::fixtures::run::assert_contains;
use testbed::fixtures::run::{stderr as err, stdout as out, words};

fn run(kubeconfig: &Path, ns: &str, args: &[&str]) -> Output {
    testbed::fixtures::run::plugin_in(BIN, kubeconfig, ns, args)
}

#[tokio::test]
async fn v1beta1_contract_fields() {
    let tb = testbed::shared_v1beta1();
    let (client, ns) = tb.namespace("v1beta1").await;
    let infra = "infrastructure.cluster.x-k8s.io";
    let cluster_ar = ar("cluster.x-k8s.io", "v1beta1", "Cluster", "clusters");
    let md_ar = ar(
        "cluster.x-k8s.io",
        "v1beta1",
        "MachineDeployment",
        "machinedeployments",
    );
    let kcp_ar = ar(
        "controlplane.cluster.x-k8s.io",
        "v1beta1",
        "KubeadmControlPlane",
        "kubeadmcontrolplanes",
    );
    apply(
        &client,
        &ns,
        &ar(infra, "v1beta1", "ByoMachineTemplate", "byomachinetemplates"),
        json!({"apiVersion": format!("{infra}/v1beta1"), "kind": "ByoMachineTemplate",
               "metadata": {"name": "old-md-0"},
               "spec": {"template": {"spec": {"selector": {"matchLabels": {"role": format!("w-{ns}")}}}}}}),
    )
    .await;
    apply(
        &client,
        &ns,
        &kcp_ar,
        json!({"apiVersion": "controlplane.cluster.x-k8s.io/v1beta1", "kind": "KubeadmControlPlane",
               "metadata": {"name": "old-cp"},
               "spec": {"replicas": 1, "version": "v1.30.4",
                 "machineTemplate": {"infrastructureRef": {"apiVersion": format!("{infra}/v1beta1"), "kind": "ByoMachineTemplate", "name": "old-cp"}},
                 "kubeadmConfigSpec": {"clusterConfiguration": {}}}}),
    )
    .await;
    apply(
        &client,
        &ns,
        &cluster_ar,
        json!({"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster",
               "metadata": {"name": "old"},
               "spec": {"controlPlaneRef": {"apiVersion": "controlplane.cluster.x-k8s.io/v1beta1", "kind": "KubeadmControlPlane", "name": "old-cp", "namespace": ns}}}),
    )
    .await;
    apply(
        &client,
        &ns,
        &md_ar,
        json!({"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineDeployment",
               "metadata": {"name": "old-md-0", "labels": {"cluster.x-k8s.io/cluster-name": "old"}},
               "spec": {"clusterName": "old", "replicas": 1,
                 "selector": {"matchLabels": {"cluster.x-k8s.io/deployment-name": "old-md-0"}},
                 "template": {"metadata": {"labels": {"cluster.x-k8s.io/deployment-name": "old-md-0"}},
                   "spec": {"clusterName": "old", "version": "v1.30.4",
                     "bootstrap": {"dataSecretName": "x"},
                     "infrastructureRef": {"apiVersion": format!("{infra}/v1beta1"), "kind": "ByoMachineTemplate", "name": "old-md-0"}}}}}),
    )
    .await;
    let kc = &tb.kubeconfig;

    // No host matches: refused; --force goes ahead with a warning.
    let o = run(kc, &ns, &["scale", "old", "--workers", "2"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        err(&o).contains(&format!(
            "needs 1 free hosts matching {{role=w-{ns}}}; 0 available"
        )),
        "{}",
        err(&o)
    );
    let o = run(kc, &ns, &["scale", "old", "--workers", "2", "--force"]);
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(
        get(&client, &ns, &md_ar, "old-md-0").await["spec"]["replicas"],
        2
    );

    // v1beta1 rollout fields: spec.rolloutAfter on both.
    let o = run(kc, &ns, &["restart", "old"]);
    assert!(o.status.success(), "{}", err(&o));
    assert!(get(&client, &ns, &md_ar, "old-md-0").await["spec"]["rolloutAfter"].is_string());
    assert!(get(&client, &ns, &kcp_ar, "old-cp").await["spec"]["rolloutAfter"].is_string());

    let o = run(kc, &ns, &["pause", "old"]);
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(
        get(&client, &ns, &cluster_ar, "old").await["spec"]["paused"],
        true
    );

    // Upgrade plan on v1beta1 objects: minor by minor, control plane first.
    let o = run(
        kc,
        &ns,
        &["upgrade", "old", "--to", "v1.32.1", "--plan", "-o", "json"],
    );
    assert!(o.status.success(), "{}", err(&o));
    let plan: Value = serde_json::from_slice(&o.stdout).unwrap();
    let steps: Vec<(String, String)> = plan["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["target"].as_str().unwrap().to_string(),
                s["toVersion"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        steps,
        vec![
            ("KubeadmControlPlane/old-cp".into(), "v1.31.0".into()),
            ("MachineDeployment/old-md-0".into(), "v1.31.0".into()),
            ("KubeadmControlPlane/old-cp".into(), "v1.32.1".into()),
            ("MachineDeployment/old-md-0".into(), "v1.32.1".into()),
        ]
    );
    // The workers have no spare host for a rolling step: blocked with the ways out...
    let dry = [
        "upgrade",
        "old",
        "--to",
        "v1.32.1",
        "--dry-run=server",
        "--yes",
    ];
    let o = run(kc, &ns, &dry);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        err(&o).contains(&format!(
            "error: the upgrade preflight failed: MachineDeployment/old-md-0: a rolling upgrade needs 1 spare host(s) matching {{role=w-{ns}}}; 0 available"
        )),
        "{}",
        err(&o)
    );
    // ...unless forced; the first step is validated by the server and not stored.
    let o = run(kc, &ns, &[&dry[..], &["--force"]].concat());
    assert!(o.status.success(), "{}", err(&o));
    assert!(
        out(&o).contains("accepted by the server (server dry run"),
        "{}",
        out(&o)
    );
    assert_eq!(
        get(&client, &ns, &kcp_ar, "old-cp").await["spec"]["version"],
        "v1.30.4"
    );

    // delete --dry-run=server: shown, validated, nothing deleted.
    let o = run(kc, &ns, &["delete", "old", "--dry-run=server"]);
    assert!(o.status.success(), "{}", err(&o));
    assert!(out(&o).contains("cluster.cluster.x-k8s.io/old deleted (server dry run)"));
    let _ = get(&client, &ns, &cluster_ar, "old").await;

    // delete --cleanup-bootstrap-kubeconfigs: the BootstrapKubeconfig of a host that has
    // registered goes; the one of a host that has not registered yet stays.
    let host = format!("{ns}-node001");
    apply(
        &client,
        &ns,
        &ar(infra, "v1beta1", "ByoHost", "byohosts"),
        json!({"apiVersion": format!("{infra}/v1beta1"), "kind": "ByoHost",
               "metadata": {"name": host}, "spec": {}}),
    )
    .await;
    let bk_ar = ar(
        infra,
        "v1beta1",
        "BootstrapKubeconfig",
        "bootstrapkubeconfigs",
    );
    for n in [
        format!("bootstrap-kubeconfig-{host}"),
        format!("bootstrap-kubeconfig-{ns}-node002"),
    ] {
        apply(
            &client,
            &ns,
            &bk_ar,
            json!({"apiVersion": format!("{infra}/v1beta1"), "kind": "BootstrapKubeconfig",
                   "metadata": {"name": n},
                   "spec": {"apiserver": "https://192.0.2.1:6443", "certificate-authority-data": "Y2E="}}),
        )
        .await;
    }
    let o = run(
        kc,
        &ns,
        &["delete", "old", "--yes", "--cleanup-bootstrap-kubeconfigs"],
    );
    assert!(o.status.success(), "{}", err(&o));
    assert!(
        out(&o).contains(&format!(
            "bootstrapkubeconfig.infrastructure.cluster.x-k8s.io/bootstrap-kubeconfig-{host} deleted (host {host} has registered)"
        )),
        "{}",
        out(&o)
    );
    let bks = Api::<DynamicObject>::namespaced_with(client.clone(), &ns, &bk_ar);
    assert!(
        bks.get_opt(&format!("bootstrap-kubeconfig-{host}"))
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        bks.get_opt(&format!("bootstrap-kubeconfig-{ns}-node002"))
            .await
            .unwrap()
            .is_some()
    );
}

#[tokio::test]
async fn clusterclass_clusters_patch_spec_topology() {
    let tb = testbed::shared();
    let (client, ns) = tb.namespace("topology").await;
    let cluster_ar = ar("cluster.x-k8s.io", "v1beta2", "Cluster", "clusters");
    apply(
        &client,
        &ns,
        &cluster_ar,
        json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
               "metadata": {"name": "cc"},
               "spec": {"topology": {"classRef": {"name": "quick-start"}, "version": "v1.33.4",
                 "controlPlane": {"replicas": 1},
                 "workers": {"machineDeployments": [
                   {"class": "default-worker", "name": "md-0", "replicas": 1},
                   {"class": "gpu-worker", "name": "gpu", "replicas": 2}]}}}}),
    )
    .await;
    let kc = &tb.kubeconfig;
    let o = run(kc, &ns, &["scale", "cc", "--workers", "3"]);
    assert_eq!(o.status.code(), Some(1), "two deployments: pick one");
    assert_contains(&err(&o), "pick one with --deployment");
    let o = run(
        kc,
        &ns,
        &["scale", "cc", "--workers", "3", "--deployment", "gpu"],
    );
    assert!(o.status.success(), "{}", err(&o));
    assert!(
        out(&o).contains(
            "cluster.cluster.x-k8s.io/cc (MachineDeployment (topology gpu)) scaled from 2 to 3"
        ),
        "{}",
        out(&o)
    );
    let o = run(kc, &ns, &["scale", "cc", "--control-plane", "3"]);
    assert!(o.status.success(), "{}", err(&o));
    let c = get(&client, &ns, &cluster_ar, "cc").await;
    assert_eq!(
        c["spec"]["topology"]["workers"]["machineDeployments"][1]["replicas"],
        3
    );
    assert_eq!(
        c["spec"]["topology"]["workers"]["machineDeployments"][0]["replicas"],
        1
    );
    assert_eq!(c["spec"]["topology"]["controlPlane"]["replicas"], 3);

    // Upgrade: spec.topology.version, one minor at a time; scopes do not apply.
    let o = run(
        kc,
        &ns,
        &["upgrade", "cc", "--to", "v1.34.1", "--plan", "-o", "json"],
    );
    assert!(o.status.success(), "{}", err(&o));
    let plan: Value = serde_json::from_slice(&o.stdout).unwrap();
    let steps = plan["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 1, "{plan}");
    assert_eq!(steps[0]["target"], "Cluster/cc");
    assert_eq!(
        steps[0]["patch"]["changes"][0]["path"],
        "/spec/topology/version"
    );
    let o = run(
        kc,
        &ns,
        &words("upgrade cc --to v1.34.1 --control-plane-only --plan"),
    );
    assert_eq!(o.status.code(), Some(2));
    assert_contains(&err(&o), "uses a ClusterClass");
    let o = run(
        kc,
        &ns,
        &words("upgrade cc --to v1.34.1 --yes --timeout 2s"),
    );
    // The version is patched; nothing rolls it out here, so the wait times out and says how to resume.
    assert_eq!(o.status.code(), Some(1), "{}", err(&o));
    assert_contains(&err(&o), "run the same command again to resume");
    let c = get(&client, &ns, &cluster_ar, "cc").await;
    assert_eq!(c["spec"]["topology"]["version"], "v1.34.1");
}

#[tokio::test]
async fn kamaji_control_planes_scale_without_hosts_and_upgrade_in_one_reconciler_step() {
    let tb = testbed::shared();
    let (client, ns) = tb.namespace("kamaji").await;
    testbed::fixtures::ensure_kamaji_control_plane_crd(&client)
        .await
        .unwrap();
    let kcp_ar = ar(
        "controlplane.cluster.x-k8s.io",
        "v1alpha2",
        "KamajiControlPlane",
        "kamajicontrolplanes",
    );
    let cluster_ar = ar("cluster.x-k8s.io", "v1beta2", "Cluster", "clusters");
    apply(
        &client,
        &ns,
        &kcp_ar,
        json!({"apiVersion": "controlplane.cluster.x-k8s.io/v1alpha2", "kind": "KamajiControlPlane",
               "metadata": {"name": "tenant"},
               "spec": {"dataStoreName": "default", "replicas": 2, "version": "v1.31.2"}}),
    )
    .await;
    apply(
        &client,
        &ns,
        &cluster_ar,
        json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
               "metadata": {"name": "tenant"},
               "spec": {"controlPlaneRef": {"apiGroup": "controlplane.cluster.x-k8s.io", "kind": "KamajiControlPlane", "name": "tenant"}}}),
    )
    .await;
    let kc = &tb.kubeconfig;
    // Control-plane pods: any count, no hosts, no odd rule.
    let o = run(kc, &ns, &["scale", "tenant", "--control-plane", "4"]);
    assert!(o.status.success(), "{}", err(&o));
    assert!(
        out(&o)
            .contains("kamajicontrolplane.controlplane.cluster.x-k8s.io/tenant scaled from 2 to 4"),
        "{}",
        out(&o)
    );
    assert_eq!(
        get(&client, &ns, &kcp_ar, "tenant").await["spec"]["replicas"],
        4
    );
    // One step: the reconciler walks the minors itself.
    let o = run(kc, &ns, &["upgrade", "tenant", "--to", "v1.33.1", "--plan"]);
    assert!(o.status.success(), "{}", err(&o));
    let plan = out(&o);
    assert!(
        plan.contains(
            "Step 1/1 [to do]: KamajiControlPlane/tenant v1.31.2 -> v1.33.1 (the reconciler steps through v1.32.0, v1.33.1)"
        ),
        "{plan}"
    );
    assert_contains(
        &plan,
        "wait for: KamajiControlPlane/tenant: the reconciler reaches v1.33.1",
    );
}

/// Issue 24: `kubectl capi delete s7 --wait` said the cluster was gone while Kamaji's finalizer
/// still held the `s7-datastore-config` Secret. Kamaji v1.0.0 keeps that Secret (its labels,
/// controlled by the TenantControlPlane, finalizer `finalizer.kamaji.clastix.io/datastore-secret`:
/// internal/resources/datastore/datastore_storage_config.go) until the TenantControlPlane's
/// DataStore clean-up lets go of it. Played here without Kamaji: the TenantControlPlane held by
/// Kamaji's finalizer (its clean-up under way), the Secret it controls. Once the
/// TenantControlPlane goes, the garbage collector deletes the Secret and nothing takes Kamaji's
/// finalizer off (Kamaji v1.0.0 can lose that last update, as CI saw): the wait does, and says so.
#[tokio::test]
async fn delete_wait_waits_for_the_secret_kamaji_holds() {
    use kube::api::PostParams;
    let tb = testbed::shared();
    let (client, ns) = tb.namespace("kamaji-held").await;
    testbed::fixtures::ensure_kamaji_control_plane_crd(&client)
        .await
        .unwrap();
    let kcp_ar = ar(
        "controlplane.cluster.x-k8s.io",
        "v1alpha2",
        "KamajiControlPlane",
        "kamajicontrolplanes",
    );
    let cluster_ar = ar("cluster.x-k8s.io", "v1beta2", "Cluster", "clusters");
    let make_cluster = || async {
        apply(
            &client,
            &ns,
            &kcp_ar,
            json!({"apiVersion": "controlplane.cluster.x-k8s.io/v1alpha2", "kind": "KamajiControlPlane",
                   "metadata": {"name": "s7"},
                   "spec": {"dataStoreName": "default", "replicas": 1, "version": "v1.33.1"}}),
        )
        .await;
        apply(
            &client,
            &ns,
            &cluster_ar,
            json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
                   "metadata": {"name": "s7"},
                   "spec": {"controlPlaneRef": {"apiGroup": "controlplane.cluster.x-k8s.io", "kind": "KamajiControlPlane", "name": "s7"}}}),
        )
        .await;
    };
    make_cluster().await;
    let tcps = Api::<DynamicObject>::namespaced_with(
        client.clone(),
        &ns,
        &ar(
            "kamaji.clastix.io",
            "v1alpha1",
            "TenantControlPlane",
            "tenantcontrolplanes",
        ),
    );
    let tcp: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "kamaji.clastix.io/v1alpha1", "kind": "TenantControlPlane",
        "metadata": {"name": "s7", "finalizers": ["finalizer.kamaji.clastix.io"]},
        "spec": {"dataStore": "default",
            "controlPlane": {"deployment": {"replicas": 1}, "service": {"serviceType": "ClusterIP"}},
            "kubernetes": {"version": "v1.33.1", "kubelet": {"cgroupfs": "systemd"}}}}))
    .unwrap();
    let tcp = tcps.create(&PostParams::default(), &tcp).await.unwrap();
    let secrets = Api::<DynamicObject>::namespaced_with(
        client.clone(),
        &ns,
        &ApiResource::erase::<k8s_openapi::api::core::v1::Secret>(&()),
    );
    let secret: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "s7-datastore-config",
            "finalizers": ["finalizer.kamaji.clastix.io/datastore-secret"],
            "labels": {"kamaji.clastix.io/project": "kamaji", "kamaji.clastix.io/name": "s7",
                "kamaji.clastix.io/component": "datastore-config"},
            "ownerReferences": [{"apiVersion": "kamaji.clastix.io/v1alpha1", "kind": "TenantControlPlane",
                "name": "s7", "uid": tcp.metadata.uid,
                "controller": true, "blockOwnerDeletion": true}]},
        "data": {"DB_SCHEMA": "czc="}}))
    .unwrap();
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();

    let kc = &tb.kubeconfig;
    let o = run(
        kc,
        &ns,
        &["delete", "s7", "--yes", "--wait", "--timeout", "5s"],
    );
    assert_eq!(
        o.status.code(),
        Some(1),
        "--wait returned while Kamaji held the Secret:\n{}{}",
        out(&o),
        err(&o)
    );
    assert_contains(
        &out(&o),
        "Then, once Kamaji lets go: Secret s7-datastore-config",
    );
    assert!(
        out(&o).contains(&format!(
            "Secret {ns}/s7-datastore-config is stuck on finalizers finalizer.kamaji.clastix.io/datastore-secret"
        )),
        "{}",
        out(&o)
    );
    assert!(!out(&o).contains("cluster s7 is gone"), "{}", out(&o));
    assert!(
        err(&o)
            .lines()
            .any(|l| l
                == "error: cluster s7 is not torn down after 5s: 1 objects stuck on finalizers"),
        "{}",
        err(&o)
    );

    // Once Kamaji lets go, the wait ends. The same name again (the Secret is still held):
    // the holder lets go once the Cluster is deleted and the wait is under way.
    make_cluster().await;
    let (kc2, ns2) = (kc.clone(), ns.clone());
    let waiting = tokio::task::spawn_blocking(move || {
        run(
            &kc2,
            &ns2,
            &["delete", "s7", "--yes", "--wait", "--timeout", "60s"],
        )
    });
    let clusters = Api::<DynamicObject>::namespaced_with(client.clone(), &ns, &cluster_ar);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while clusters.get_opt("s7").await.unwrap().is_some() {
        assert!(
            std::time::Instant::now() < deadline,
            "the delete did not delete the Cluster"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    // Kamaji's clean-up ends: the TenantControlPlane goes, its Secret is deleted by the garbage
    // collector and still held; the wait takes the finalizer off.
    tcps.delete("s7", &Default::default()).await.unwrap();
    tcps.patch(
        "s7",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    let o = waiting.await.unwrap();
    assert!(o.status.success(), "{}{}", out(&o), err(&o));
    assert_contains(&out(&o), "cluster s7 is gone");
    assert_contains(
        &err(&o),
        "took Kamaji's finalizer off Secret s7-datastore-config",
    );
    assert!(
        secrets
            .get_opt("s7-datastore-config")
            .await
            .unwrap()
            .is_none()
    );
}
