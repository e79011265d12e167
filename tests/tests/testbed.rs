//! Proves the testbed is a real API server: schema validation, garbage collection, status
//! subresources and namespace deletion all come from upstream code, not from us.

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::discovery::ApiResource;
use serde_json::json;

use testbed::api_resource as ar;

use testbed::fixtures::poll::eventually;

const INFRA: &str = "infrastructure.cluster.x-k8s.io";

/// The objects of the kind `r` in namespace `ns`.
fn api(client: &kube::Client, ns: &str, r: ApiResource) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), ns, &r)
}

fn byohosts(client: &kube::Client, ns: &str) -> Api<DynamicObject> {
    api(client, ns, ar(INFRA, "v1beta1", "ByoHost", "byohosts"))
}

/// Waits (60 s) until `name` is gone from `api`.
async fn wait_gone<K>(what: &str, api: &Api<K>, name: &str)
where
    K: Clone + std::fmt::Debug + k8s_openapi::serde::de::DeserializeOwned,
{
    let gone = || async move { api.get_opt(name).await.unwrap().is_none() };
    eventually(what, Duration::from_secs(60), gone).await;
}

/// Creates `obj` (JSON) through `api`, which must accept it.
async fn create<K>(api: &Api<K>, obj: serde_json::Value) -> K
where
    K: Clone
        + std::fmt::Debug
        + k8s_openapi::serde::de::DeserializeOwned
        + k8s_openapi::serde::Serialize,
{
    let obj: K = serde_json::from_value(obj).unwrap();
    api.create(&PostParams::default(), &obj).await.unwrap()
}

#[tokio::test]
async fn invalid_v1beta2_cluster_is_rejected_by_the_crd_schema() {
    let tb = testbed::shared();
    let (client, ns) = tb.namespace("schema").await;
    let clusters = api(
        &client,
        &ns,
        ar("cluster.x-k8s.io", "v1beta2", "Cluster", "clusters"),
    );
    // clusterNetwork.apiServerPort must be an integer within 1..65535.
    let bad: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
        "metadata": {"name": "bad"},
        "spec": {"clusterNetwork": {"apiServerPort": "not-a-port"}}
    }))
    .unwrap();
    let err = clusters
        .create(&PostParams::default(), &bad)
        .await
        .expect_err("an invalid Cluster must be rejected");
    let msg = err.to_string();
    assert!(msg.contains("apiServerPort"), "unexpected error: {msg}");

    let good: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
        "metadata": {"name": "good"},
        "spec": {"clusterNetwork": {"apiServerPort": 6443}}
    }))
    .unwrap();
    clusters
        .create(&PostParams::default(), &good)
        .await
        .expect("a valid Cluster is accepted");
}

#[tokio::test]
async fn owned_object_is_garbage_collected_after_its_owner_is_deleted() {
    let tb = testbed::shared();
    let (client, ns) = tb.namespace("gc").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let owner = create(&cms, json!({"metadata": {"name": "owner"}})).await;
    let uid = owner.metadata.uid.clone().unwrap();
    let owned_by = json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": uid}]);
    create(
        &cms,
        json!({"metadata": {"name": "child", "ownerReferences": owned_by}}),
    )
    .await;
    // A custom resource owned by the same owner: the GC must know CRD kinds too.
    let hosts = byohosts(&client, &ns);
    create(
        &hosts,
        json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "ByoHost",
            "metadata": {"name": "owned-host", "ownerReferences": owned_by},
            "spec": {}
        }),
    )
    .await;
    cms.delete("owner", &DeleteParams::default()).await.unwrap();
    wait_gone("the child ConfigMap to be collected", &cms, "child").await;
    wait_gone("the owned ByoHost to be collected", &hosts, "owned-host").await;
}

#[tokio::test]
async fn byohost_status_is_written_through_the_status_subresource() {
    let tb = testbed::shared();
    let (client, ns) = tb.namespace("status").await;
    let hosts = byohosts(&client, &ns);
    create(
        &hosts,
        json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "ByoHost",
            "metadata": {"name": "host-1"}, "spec": {},
            // Status in a create is dropped by the status subresource.
            "status": {"hostinfo": {"osname": "dropped"}}
        }),
    )
    .await;
    let created = hosts.get("host-1").await.unwrap();
    assert!(
        created
            .data
            .get("status")
            .and_then(|s| s.get("hostinfo"))
            .is_none(),
        "status must be ignored on create: {:?}",
        created.data.get("status")
    );
    let status = json!({"status": {
        "hostinfo": {"osname": "linux", "osimage": "Ubuntu 22.04.4 LTS", "architecture": "amd64"},
        "network": [{"networkInterfaceName": "eth0", "macAddr": "52:54:00:12:34:56", "ipAddrs": ["192.0.2.10/24"], "isDefault": true}]
    }});
    hosts
        .patch_status("host-1", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    let got = hosts.get("host-1").await.unwrap();
    assert_eq!(
        got.data["status"]["hostinfo"]["osimage"],
        "Ubuntu 22.04.4 LTS"
    );
    // A spec write does not touch status.
    hosts
        .patch(
            "host-1",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"role": "worker"}}, "status": {"hostinfo": {"osname": "nope"}}})),
        )
        .await
        .unwrap();
    let got = hosts.get("host-1").await.unwrap();
    assert_eq!(got.data["status"]["hostinfo"]["osname"], "linux");
}

#[tokio::test]
async fn namespace_deletion_completes() {
    let tb = testbed::shared();
    let (client, ns) = tb.namespace("nsdel").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    create(&cms, json!({"metadata": {"name": "content"}})).await;
    tb.delete_namespace(&client, &ns).await;
    let nss: Api<Namespace> = Api::all(client);
    wait_gone("the namespace to be gone", &nss, &ns).await;
}

#[tokio::test]
async fn discovery_lists_the_upstream_kinds_with_contract_labels() {
    let tb = testbed::shared();
    let client = tb.client().await;
    for (gv, plural) in [
        ("cluster.x-k8s.io/v1beta2", "clusters"),
        ("cluster.x-k8s.io/v1beta1", "machines"),
        ("infrastructure.cluster.x-k8s.io/v1beta1", "byohosts"),
        ("kamaji.clastix.io/v1alpha1", "tenantcontrolplanes"),
        (
            "bootstrap.cluster.x-k8s.io/v1beta2",
            "kubeadmconfigtemplates",
        ),
    ] {
        let list = client.list_api_group_resources(gv).await.unwrap();
        assert!(
            list.resources.iter().any(|r| r.name == plural),
            "{plural} missing from {gv}"
        );
    }
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(client);
    let byoh = crds
        .get("byohosts.infrastructure.cluster.x-k8s.io")
        .await
        .unwrap();
    assert_eq!(
        byoh.metadata
            .labels
            .unwrap()
            .get("cluster.x-k8s.io/v1beta1")
            .map(String::as_str),
        Some("v1beta1")
    );
}

#[tokio::test]
async fn v1beta1_profile_serves_capi_v1beta1_only() {
    let tb = testbed::shared_v1beta1();
    let client = tb.client().await;
    let groups = client.list_api_groups().await.unwrap();
    let capi = groups
        .groups
        .iter()
        .find(|g| g.name == "cluster.x-k8s.io")
        .expect("cluster.x-k8s.io is served");
    let versions: Vec<&str> = capi.versions.iter().map(|v| v.version.as_str()).collect();
    assert_eq!(versions, vec!["v1beta1"]);
}

/// The real CAPI v1.14 core manager, with its webhooks registered by URL, turns a
/// MachineDeployment into a MachineSet and Machines.
#[tokio::test]
async fn capi_manager_turns_a_machinedeployment_into_machines() {
    let tb = testbed::shared_with_capi();
    let (client, ns) = tb.namespace("capi-md").await;
    let apply = |ar: ApiResource, obj: serde_json::Value| {
        let api = api(&client, &ns, ar.clone());
        async move {
            let name = obj["metadata"]["name"].as_str().unwrap().to_string();
            api.patch(
                &name,
                &PatchParams::apply("testbed-test"),
                &Patch::Apply(&obj),
            )
            .await
            .unwrap_or_else(|e| panic!("applying {} {name}: {e}", ar.kind));
        }
    };
    apply(
        ar(
            "infrastructure.cluster.x-k8s.io",
            "v1beta1",
            "ByoCluster",
            "byoclusters",
        ),
        json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "ByoCluster",
               "metadata": {"name": "md-test"},
               "spec": {"controlPlaneEndpoint": {"host": "192.0.2.1", "port": 6443}}}),
    )
    .await;
    apply(
        ar("cluster.x-k8s.io", "v1beta2", "Cluster", "clusters"),
        json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
               "metadata": {"name": "md-test"},
               "spec": {"clusterNetwork": {"pods": {"cidrBlocks": ["10.244.0.0/16"]}},
                 "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "ByoCluster", "name": "md-test"}}}),
    )
    .await;
    apply(
        ar("bootstrap.cluster.x-k8s.io", "v1beta2", "KubeadmConfigTemplate", "kubeadmconfigtemplates"),
        json!({"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2", "kind": "KubeadmConfigTemplate",
               "metadata": {"name": "md-test-workers"},
               "spec": {"template": {"spec": {"joinConfiguration": {"nodeRegistration": {"kubeletExtraArgs": [{"name": "node-labels", "value": "role=worker"}]}}}}}}),
    )
    .await;
    apply(
        ar("infrastructure.cluster.x-k8s.io", "v1beta1", "ByoMachineTemplate", "byomachinetemplates"),
        json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "ByoMachineTemplate",
               "metadata": {"name": "md-test-workers"},
               "spec": {"template": {"spec": {"selector": {"matchLabels": {"role": "worker"}}}}}}),
    )
    .await;
    apply(
        ar("cluster.x-k8s.io", "v1beta2", "MachineDeployment", "machinedeployments"),
        json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment",
               "metadata": {"name": "md-test-workers"},
               "spec": {"clusterName": "md-test", "replicas": 2,
                 "template": {"spec": {"clusterName": "md-test", "version": "v1.34.2",
                   "bootstrap": {"configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfigTemplate", "name": "md-test-workers"}},
                   "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "ByoMachineTemplate", "name": "md-test-workers"}}}}}),
    )
    .await;
    let machines = api(
        &client,
        &ns,
        ar("cluster.x-k8s.io", "v1beta2", "Machine", "machines"),
    );
    eventually(
        "2 Machines from the MachineDeployment",
        Duration::from_secs(90),
        || {
            let machines = machines.clone();
            async move {
                let list = machines.list(&Default::default()).await.unwrap();
                list.items.len() == 2
                    && list.items.iter().all(|m| {
                        m.metadata
                            .labels
                            .as_ref()
                            .and_then(|l| l.get("cluster.x-k8s.io/deployment-name"))
                            == Some(&"md-test-workers".to_string())
                    })
            }
        },
    )
    .await;
    // The MachineSet exists and the machines' infrastructure was cloned from the template.
    let sets = api(
        &client,
        &ns,
        ar("cluster.x-k8s.io", "v1beta2", "MachineSet", "machinesets"),
    );
    assert_eq!(sets.list(&Default::default()).await.unwrap().items.len(), 1);
    let byomachines = api(
        &client,
        &ns,
        ar(INFRA, "v1beta1", "ByoMachine", "byomachines"),
    );
    eventually("2 cloned ByoMachines", Duration::from_secs(30), || {
        let b = byomachines.clone();
        async move { b.list(&Default::default()).await.unwrap().items.len() == 2 }
    })
    .await;
}

/// The CAPI CRDs convert through the real CAPI manager's webhook (as clusterctl installs them):
/// a v1beta1 client such as BYOH v0.5.0 reads a v1beta2-stored Cluster in v1beta1 shapes.
#[tokio::test]
async fn v1beta1_reads_of_v1beta2_clusters_are_converted_by_the_capi_manager() {
    let tb = testbed::shared_with_capi();
    let (client, ns) = tb.namespace("conversion").await;
    let v2 = api(
        &client,
        &ns,
        ar("cluster.x-k8s.io", "v1beta2", "Cluster", "clusters"),
    );
    create(
        &v2,
        json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
            "metadata": {"name": "conv"},
            "spec": {"controlPlaneRef": {"apiGroup": "controlplane.cluster.x-k8s.io",
                                         "kind": "KubeadmControlPlane", "name": "conv"},
                     "clusterNetwork": {"pods": {"cidrBlocks": ["10.244.0.0/16"]}}},
        }),
    )
    .await;
    let v1 = api(
        &client,
        &ns,
        ar("cluster.x-k8s.io", "v1beta1", "Cluster", "clusters"),
    );
    let got = v1.get("conv").await.unwrap();
    // v1beta2's ContractVersionedObjectReference (apiGroup) becomes v1beta1's ObjectReference
    // (apiVersion); without conversion the stored v1beta2 shape would come back unchanged.
    let cp = &got.data["spec"]["controlPlaneRef"];
    assert_eq!(
        cp["apiVersion"]
            .as_str()
            .map(|v| v.starts_with("controlplane.cluster.x-k8s.io/")),
        Some(true),
        "{cp}"
    );
    assert!(cp.get("apiGroup").is_none(), "{cp}");
}

/// Starts a testbed with every real controller (the options `testbed::shared_real()` uses) on a
/// thread and runtime of its own, as the shared testbeds start, and says how long it took.
fn start_real() -> std::thread::JoinHandle<(Result<testbed::Testbed, testbed::Error>, Duration)> {
    std::thread::spawn(|| {
        let t0 = std::time::Instant::now();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let tb = rt.block_on(testbed::Testbed::start(testbed::Options {
            capi_manager: true,
            kamaji: true,
            byoh: true,
            ..testbed::Options::default()
        }));
        (tb, t0.elapsed())
    })
}

/// Two real testbeds at once (a sandbox next to `make demo`, or a test binary starting
/// several) both run: each API server answers and each one's CAPI manager serves its webhooks
/// (a v1beta1 Cluster converts through it on a server-side dry-run create). Or a testbed is
/// refused in one line naming the inotify limit, instead of a manager dying with `too many
/// open files` at start.
#[tokio::test(flavor = "multi_thread")]
async fn two_real_testbeds_start_side_by_side() {
    let (a, b) = (start_real(), start_real());
    for (n, handle) in [a, b].into_iter().enumerate() {
        let (tb, took) = handle.join().unwrap();
        let tb = match tb {
            Ok(tb) => tb,
            Err(e) => {
                let msg = e.to_string();
                assert!(
                    !msg.contains('\n') && msg.contains("fs.inotify.max_user_"),
                    "testbed {n} failed to start for another reason than the inotify limit: {msg}"
                );
                continue;
            }
        };
        eprintln!("real testbed {n} started in {took:?}");
        let names: Vec<String> = tb.pids().into_iter().map(|(name, _)| name).collect();
        for p in ["kube-apiserver", "capi-manager", "kamaji", "byoh-manager"] {
            assert!(
                names.iter().any(|n| n == p),
                "testbed {n}: no {p} in {names:?}"
            );
        }
        let v1beta1 = ar("cluster.x-k8s.io", "v1beta1", "Cluster", "clusters");
        let clusters = api(&tb.client().await, "default", v1beta1);
        let c: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster",
            "metadata": {"name": "side-by-side"},
            "spec": {"controlPlaneRef": {"apiVersion": "controlplane.cluster.x-k8s.io/v1beta1",
                                         "kind": "KubeadmControlPlane", "name": "side-by-side"}},
        }))
        .unwrap();
        let dry_run = PostParams {
            dry_run: true,
            ..PostParams::default()
        };
        let got = clusters
            .create(&dry_run, &c)
            .await
            .unwrap_or_else(|e| panic!("testbed {n}: the CAPI manager did not convert: {e}"));
        assert_eq!(
            got.data["spec"]["controlPlaneRef"]["kind"], "KubeadmControlPlane",
            "testbed {n}: {:?}",
            got.data
        );
    }
}
