//! The day-2 verbs on both CAPI contracts and on ClusterClass clusters, with objects written
//! through the API (no controllers): v1beta1 fields (`spec.rolloutAfter`, versioned references)
//! on the CAPI 1.10-shaped testbed, and `spec.topology` patches on the full profile.

use std::path::Path;
use std::process::Output;

use kube::Client;
use kube::api::{Patch, PatchParams};
use kube::discovery::ApiResource;
use serde_json::{Value, json};
use testbed::fixtures::poll;
use testbed::fixtures::releases::{MARKERS_ENV, newest};
use testbed::fixtures::run::{assert_contains, assert_ok, words};

use crate::objects::{CAPI, CP, INFRA, api, apply, ar, assert_fails, create, get};

const BIN: &str = env!("CARGO_BIN_EXE_kubectl-capi");

fn run(kubeconfig: &Path, ns: &str, args: &[&str]) -> Output {
    testbed::fixtures::run::plugin_in(BIN, kubeconfig, ns, args)
}

/// [`run`], insisting on success; returns stdout.
#[track_caller]
fn ok(kubeconfig: &Path, ns: &str, args: &[&str]) -> String {
    assert_ok(&run(kubeconfig, ns, args), &args.join(" "))
}

fn kamaji_ar() -> ApiResource {
    ar(CP, "v1alpha2", "KamajiControlPlane", "kamajicontrolplanes")
}

/// A v1beta2 Cluster `name` on a KamajiControlPlane of the same name (the CRD installed first).
async fn kamaji_cluster(client: &Client, ns: &str, name: &str, replicas: u32, version: &str) {
    testbed::fixtures::ensure_kamaji_control_plane_crd(client)
        .await
        .unwrap();
    apply(
        client,
        ns,
        &kamaji_ar(),
        json!({"apiVersion": format!("{CP}/v1alpha2"), "kind": "KamajiControlPlane",
               "metadata": {"name": name},
               "spec": {"dataStoreName": "default", "replicas": replicas, "version": version}}),
    )
    .await;
    apply(
        client,
        ns,
        &ar(CAPI, "v1beta2", "Cluster", "clusters"),
        json!({"apiVersion": format!("{CAPI}/v1beta2"), "kind": "Cluster",
               "metadata": {"name": name},
               "spec": {"controlPlaneRef": {"apiGroup": CP, "kind": "KamajiControlPlane", "name": name}}}),
    )
    .await;
}

#[tokio::test]
async fn v1beta1_contract_fields() {
    let tb = testbed::shared_v1beta1();
    let (client, ns) = tb.namespace("v1beta1").await;
    let cluster_ar = ar(CAPI, "v1beta1", "Cluster", "clusters");
    let md_ar = ar(CAPI, "v1beta1", "MachineDeployment", "machinedeployments");
    let kcp_ar = ar(CP, "v1beta1", "KubeadmControlPlane", "kubeadmcontrolplanes");
    let infra_ref = |name: &str| json!({"apiVersion": format!("{INFRA}/v1beta1"), "kind": "ByoMachineTemplate", "name": name});
    for (r, obj) in [
        (
            ar(
                INFRA,
                "v1beta1",
                "ByoMachineTemplate",
                "byomachinetemplates",
            ),
            json!({"apiVersion": format!("{INFRA}/v1beta1"), "kind": "ByoMachineTemplate",
                   "metadata": {"name": "old-md-0"},
                   "spec": {"template": {"spec": {"selector": {"matchLabels": {"role": format!("w-{ns}")}}}}}}),
        ),
        (
            kcp_ar.clone(),
            json!({"apiVersion": format!("{CP}/v1beta1"), "kind": "KubeadmControlPlane",
                   "metadata": {"name": "old-cp"},
                   "spec": {"replicas": 1, "version": "v1.30.4",
                     "machineTemplate": {"infrastructureRef": infra_ref("old-cp")},
                     "kubeadmConfigSpec": {"clusterConfiguration": {}}}}),
        ),
        (
            cluster_ar.clone(),
            json!({"apiVersion": format!("{CAPI}/v1beta1"), "kind": "Cluster",
                   "metadata": {"name": "old"},
                   "spec": {"controlPlaneRef": {"apiVersion": format!("{CP}/v1beta1"), "kind": "KubeadmControlPlane", "name": "old-cp", "namespace": ns}}}),
        ),
        (
            md_ar.clone(),
            json!({"apiVersion": format!("{CAPI}/v1beta1"), "kind": "MachineDeployment",
                   "metadata": {"name": "old-md-0", "labels": {"cluster.x-k8s.io/cluster-name": "old"}},
                   "spec": {"clusterName": "old", "replicas": 1,
                     "selector": {"matchLabels": {"cluster.x-k8s.io/deployment-name": "old-md-0"}},
                     "template": {"metadata": {"labels": {"cluster.x-k8s.io/deployment-name": "old-md-0"}},
                       "spec": {"clusterName": "old", "version": "v1.30.4",
                         "bootstrap": {"dataSecretName": "x"},
                         "infrastructureRef": infra_ref("old-md-0")}}}}),
        ),
    ] {
        apply(&client, &ns, &r, obj).await;
    }
    let kc = &tb.kubeconfig;

    // No host matches: refused; --force goes ahead with a warning.
    let o = run(kc, &ns, &words("scale old --workers 2"));
    assert_fails(
        &o,
        1,
        &format!("needs 1 free hosts matching {{role=w-{ns}}}; 0 available"),
    );
    ok(kc, &ns, &words("scale old --workers 2 --force"));
    let md = || get(&client, &ns, &md_ar, "old-md-0");
    let kcp = || get(&client, &ns, &kcp_ar, "old-cp");
    assert_eq!(md().await["spec"]["replicas"], 2);

    // v1beta1 rollout fields: spec.rolloutAfter on both.
    ok(kc, &ns, &["restart", "old"]);
    assert!(md().await["spec"]["rolloutAfter"].is_string());
    assert!(kcp().await["spec"]["rolloutAfter"].is_string());

    ok(kc, &ns, &["pause", "old"]);
    assert_eq!(
        get(&client, &ns, &cluster_ar, "old").await["spec"]["paused"],
        true
    );

    // Upgrade plan on v1beta1 objects: minor by minor, control plane first.
    let plan = ok(kc, &ns, &words("upgrade old --to v1.32.1 --plan -o json"));
    let plan: Value = serde_json::from_str(&plan).unwrap();
    let steps: Vec<String> = plan["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            format!(
                "{} {}",
                s["target"].as_str().unwrap(),
                s["toVersion"].as_str().unwrap()
            )
        })
        .collect();
    // The newest patch of the current minor first, then of the next (the test mirror's).
    let (p30, p31) = (newest(30), newest(31));
    assert_eq!(
        steps,
        [
            format!("KubeadmControlPlane/old-cp {p30}"),
            format!("MachineDeployment/old-md-0 {p30}"),
            format!("KubeadmControlPlane/old-cp {p31}"),
            format!("MachineDeployment/old-md-0 {p31}"),
            "KubeadmControlPlane/old-cp v1.32.1".into(),
            "MachineDeployment/old-md-0 v1.32.1".into(),
        ]
    );
    // The workers have no spare host for a rolling step: blocked with the ways out...
    let dry = words("upgrade old --to v1.32.1 --dry-run=server --yes");
    assert_fails(
        &run(kc, &ns, &dry),
        1,
        &format!(
            "error: the upgrade preflight failed: MachineDeployment/old-md-0: a rolling upgrade needs 1 spare host(s) matching {{role=w-{ns}}}; 0 available"
        ),
    );
    // ...unless forced; the first step is validated by the server and not stored.
    let out = ok(kc, &ns, &[&dry[..], &["--force"]].concat());
    assert_contains(&out, "accepted by the server (server dry run");
    assert_eq!(kcp().await["spec"]["version"], "v1.30.4");

    // delete --dry-run=server: shown, validated, nothing deleted.
    let out = ok(kc, &ns, &words("delete old --dry-run=server"));
    assert_contains(
        &out,
        "cluster.cluster.x-k8s.io/old deleted (server dry run)",
    );
    let _ = get(&client, &ns, &cluster_ar, "old").await;

    // delete --cleanup-bootstrap-kubeconfigs: the BootstrapKubeconfig of a host that has
    // registered goes; the one of a host that has not registered yet stays.
    let host = format!("{ns}-node001");
    apply(
        &client,
        &ns,
        &ar(INFRA, "v1beta1", "ByoHost", "byohosts"),
        json!({"apiVersion": format!("{INFRA}/v1beta1"), "kind": "ByoHost",
               "metadata": {"name": host}, "spec": {}}),
    )
    .await;
    let bk_ar = ar(
        INFRA,
        "v1beta1",
        "BootstrapKubeconfig",
        "bootstrapkubeconfigs",
    );
    let (registered, unregistered) = (
        format!("bootstrap-kubeconfig-{host}"),
        format!("bootstrap-kubeconfig-{ns}-node002"),
    );
    for n in [&registered, &unregistered] {
        apply(
            &client,
            &ns,
            &bk_ar,
            json!({"apiVersion": format!("{INFRA}/v1beta1"), "kind": "BootstrapKubeconfig",
                   "metadata": {"name": n},
                   "spec": {"apiserver": "https://192.0.2.1:6443", "certificate-authority-data": "Y2E="}}),
        )
        .await;
    }
    let out = ok(
        kc,
        &ns,
        &words("delete old --yes --cleanup-bootstrap-kubeconfigs"),
    );
    assert_contains(
        &out,
        &format!(
            "bootstrapkubeconfig.infrastructure.cluster.x-k8s.io/{registered} deleted (host {host} has registered)"
        ),
    );
    let bks = api(&client, &ns, &bk_ar);
    assert!(bks.get_opt(&registered).await.unwrap().is_none());
    assert!(bks.get_opt(&unregistered).await.unwrap().is_some());
}

#[tokio::test]
async fn clusterclass_clusters_patch_spec_topology() {
    let tb = testbed::shared();
    let (client, ns) = tb.namespace("topology").await;
    let cluster_ar = ar(CAPI, "v1beta2", "Cluster", "clusters");
    apply(
        &client,
        &ns,
        &cluster_ar,
        json!({"apiVersion": format!("{CAPI}/v1beta2"), "kind": "Cluster",
               "metadata": {"name": "cc"},
               "spec": {"topology": {"classRef": {"name": "quick-start"}, "version": "v1.33.4",
                 "controlPlane": {"replicas": 1},
                 "workers": {"machineDeployments": [
                   {"class": "default-worker", "name": "md-0", "replicas": 1},
                   {"class": "gpu-worker", "name": "gpu", "replicas": 2}]}}}}),
    )
    .await;
    let kc = &tb.kubeconfig;
    // Two deployments: pick one.
    let o = run(kc, &ns, &words("scale cc --workers 3"));
    assert_fails(&o, 1, "pick one with --deployment");
    let out = ok(kc, &ns, &words("scale cc --workers 3 --deployment gpu"));
    assert_contains(
        &out,
        "cluster.cluster.x-k8s.io/cc (MachineDeployment (topology gpu)) scaled from 2 to 3",
    );
    ok(kc, &ns, &words("scale cc --control-plane 3"));
    let c = get(&client, &ns, &cluster_ar, "cc").await;
    let topology = &c["spec"]["topology"];
    assert_eq!(topology["workers"]["machineDeployments"][1]["replicas"], 3);
    assert_eq!(topology["workers"]["machineDeployments"][0]["replicas"], 1);
    assert_eq!(topology["controlPlane"]["replicas"], 3);

    // Upgrade: spec.topology.version, one minor at a time, first to the newest patch of the
    // current minor (the class lists no versions: the markers); scopes do not apply.
    let plan = ok(kc, &ns, &words("upgrade cc --to v1.34.1 --plan -o json"));
    let plan: Value = serde_json::from_str(&plan).unwrap();
    let steps = plan["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2, "{plan}");
    assert_eq!(steps[0]["target"], "Cluster/cc");
    assert_eq!(steps[0]["toVersion"], newest(33));
    assert_eq!(steps[1]["toVersion"], "v1.34.1");
    assert_eq!(
        steps[0]["patch"]["changes"][0]["path"],
        "/spec/topology/version"
    );
    let o = run(
        kc,
        &ns,
        &words("upgrade cc --to v1.34.1 --control-plane-only --plan"),
    );
    assert_fails(&o, 2, "uses a ClusterClass");
    // The version is patched; nothing rolls it out here, so the wait times out and says how to resume.
    let o = run(
        kc,
        &ns,
        &words("upgrade cc --to v1.34.1 --yes --timeout 2s"),
    );
    assert_fails(&o, 1, "run the same command again to resume");
    let c = get(&client, &ns, &cluster_ar, "cc").await;
    assert_eq!(c["spec"]["topology"]["version"], newest(33));
}

#[tokio::test]
async fn kamaji_control_planes_scale_without_hosts_and_upgrade_in_one_reconciler_step() {
    let tb = testbed::shared();
    let (client, ns) = tb.namespace("kamaji").await;
    kamaji_cluster(&client, &ns, "tenant", 2, "v1.31.2").await;
    let kc = &tb.kubeconfig;
    // Control-plane pods: any count, no hosts, no odd rule.
    let out = ok(kc, &ns, &words("scale tenant --control-plane 4"));
    assert_contains(
        &out,
        "kamajicontrolplane.controlplane.cluster.x-k8s.io/tenant scaled from 2 to 4",
    );
    assert_eq!(
        get(&client, &ns, &kamaji_ar(), "tenant").await["spec"]["replicas"],
        4
    );
    // One step: the reconciler walks the minors itself, through the newest patch of 1.31 and
    // of 1.32 as the stable-release markers (the test mirror) give them, recorded on the
    // KamajiControlPlane for it.
    let plan = ok(kc, &ns, &words("upgrade tenant --to v1.33.1 --plan"));
    let (p31, p32) = (newest(31), newest(32));
    assert_contains(
        &plan,
        &format!(
            "Step 1/1 [to do]: KamajiControlPlane/tenant v1.31.2 -> v1.33.1 (the reconciler steps through {p31}, {p32}, v1.33.1)"
        ),
    );
    assert_contains(
        &plan,
        "intermediate versions from Kubernetes' stable-release markers",
    );
    assert_contains(
        &plan,
        &format!("/metadata/annotations/capi-kamaji.io/patch-releases: null -> \"{p31},{p32}\""),
    );
    // Without the markers (off), the shipped table, and the plan says so.
    let o = testbed::fixtures::run::plugin_env(
        BIN,
        &[
            "upgrade",
            "tenant",
            "--to",
            "v1.33.1",
            "--plan",
            "-n",
            &ns,
            "--kubeconfig",
            kc.to_str().unwrap(),
        ],
        &[(MARKERS_ENV, "off")],
    );
    assert_contains(
        &String::from_utf8_lossy(&o.stdout),
        "intermediate versions from the table of patch releases shipped with this release",
    );
    assert_contains(
        &plan,
        "wait for: KamajiControlPlane/tenant: the reconciler reaches v1.33.1",
    );
}

/// `kubectl capi delete s7 --wait` said the cluster was gone while Kamaji's finalizer
/// still held the `s7-datastore-config` Secret. Kamaji v1.0.0 keeps that Secret (its labels,
/// controlled by the TenantControlPlane, finalizer `finalizer.kamaji.clastix.io/datastore-secret`:
/// internal/resources/datastore/datastore_storage_config.go) until the TenantControlPlane's
/// DataStore clean-up lets go of it. Played here without Kamaji: the TenantControlPlane held by
/// Kamaji's finalizer (its clean-up under way), the Secret it controls. Once the
/// TenantControlPlane goes, the garbage collector deletes the Secret and nothing takes Kamaji's
/// finalizer off (Kamaji v1.0.0 can lose that last update, as CI saw): the wait does, and says so.
#[tokio::test]
async fn delete_wait_waits_for_the_secret_kamaji_holds() {
    let tb = testbed::shared();
    let (client, ns) = tb.namespace("kamaji-held").await;
    kamaji_cluster(&client, &ns, "s7", 1, "v1.33.1").await;
    let tcps = api(
        &client,
        &ns,
        &ar(
            "kamaji.clastix.io",
            "v1alpha1",
            "TenantControlPlane",
            "tenantcontrolplanes",
        ),
    );
    let tcp = create(
        &tcps,
        json!({
            "apiVersion": "kamaji.clastix.io/v1alpha1", "kind": "TenantControlPlane",
            "metadata": {"name": "s7", "finalizers": ["finalizer.kamaji.clastix.io"]},
            "spec": {"dataStore": "default",
                "controlPlane": {"deployment": {"replicas": 1}, "service": {"serviceType": "ClusterIP"}},
                "kubernetes": {"version": "v1.33.1", "kubelet": {"cgroupfs": "systemd"}}}}),
    )
    .await;
    let secrets = api(
        &client,
        &ns,
        &ApiResource::erase::<k8s_openapi::api::core::v1::Secret>(&()),
    );
    create(
        &secrets,
        json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "s7-datastore-config",
                "finalizers": ["finalizer.kamaji.clastix.io/datastore-secret"],
                "labels": {"kamaji.clastix.io/project": "kamaji", "kamaji.clastix.io/name": "s7",
                    "kamaji.clastix.io/component": "datastore-config"},
                "ownerReferences": [{"apiVersion": "kamaji.clastix.io/v1alpha1", "kind": "TenantControlPlane",
                    "name": "s7", "uid": tcp.metadata.uid,
                    "controller": true, "blockOwnerDeletion": true}]},
            "data": {"DB_SCHEMA": "czc="}}),
    )
    .await;

    let kc = &tb.kubeconfig;
    let o = run(kc, &ns, &words("delete s7 --yes --wait --timeout 5s"));
    let out = testbed::fixtures::run::stdout(&o);
    // --wait must not return while Kamaji holds the Secret.
    let err = assert_fails(&o, 1, "error: cluster s7 is not torn down after 5s");
    assert_contains(
        &out,
        "Then, once Kamaji lets go: Secret s7-datastore-config",
    );
    assert_contains(
        &out,
        &format!(
            "Secret {ns}/s7-datastore-config is stuck on finalizers finalizer.kamaji.clastix.io/datastore-secret"
        ),
    );
    assert!(!out.contains("cluster s7 is gone"), "{out}");
    assert!(
        err.lines()
            .any(|l| l
                == "error: cluster s7 is not torn down after 5s: 1 objects stuck on finalizers"),
        "{err}"
    );

    // Once Kamaji lets go, the wait ends. The same name again (the Secret is still held):
    // the holder lets go once the Cluster is deleted and the wait is under way.
    kamaji_cluster(&client, &ns, "s7", 1, "v1.33.1").await;
    let (kc2, ns2) = (kc.clone(), ns.clone());
    let waiting = tokio::task::spawn_blocking(move || {
        run(&kc2, &ns2, &words("delete s7 --yes --wait --timeout 60s"))
    });
    let clusters = api(&client, &ns, &ar(CAPI, "v1beta2", "Cluster", "clusters"));
    poll::eventually(
        "the delete to delete the Cluster",
        std::time::Duration::from_secs(60),
        || async { clusters.get_opt("s7").await.unwrap().is_none() },
    )
    .await;
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
    assert_contains(&assert_ok(&o, "delete s7 --wait"), "cluster s7 is gone");
    assert_contains(
        &testbed::fixtures::run::stderr(&o),
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
