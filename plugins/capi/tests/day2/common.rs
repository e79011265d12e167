//! What the day-2 stories share: the objects' kinds, the players of the controllers that do
//! not run here (SIMULATED), the cluster and host pools each story starts from.

pub use std::path::{Path, PathBuf};
pub use std::process::{Command, Output};
pub use std::time::Duration;

pub use kube::Client;
pub use kube::ResourceExt;
pub use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
pub use kube::discovery::ApiResource;
pub use serde_json::{Value, json};
pub use testbed::Testbed;
pub use testbed::sim::{SimOptions, byoh};

pub const BIN: &str = env!("CARGO_BIN_EXE_kubectl-capi");
pub static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

pub use testbed::api_resource as ar;

pub fn cluster_ar() -> ApiResource {
    ar("cluster.x-k8s.io", "v1beta2", "Cluster", "clusters")
}
pub fn md_ar() -> ApiResource {
    ar(
        "cluster.x-k8s.io",
        "v1beta2",
        "MachineDeployment",
        "machinedeployments",
    )
}
pub fn machine_ar() -> ApiResource {
    ar("cluster.x-k8s.io", "v1beta2", "Machine", "machines")
}
pub fn ms_ar() -> ApiResource {
    ar("cluster.x-k8s.io", "v1beta2", "MachineSet", "machinesets")
}
pub fn kcp_ar() -> ApiResource {
    ar(
        "controlplane.cluster.x-k8s.io",
        "v1beta2",
        "KubeadmControlPlane",
        "kubeadmcontrolplanes",
    )
}
pub fn host_ar() -> ApiResource {
    ar(
        "infrastructure.cluster.x-k8s.io",
        "v1beta1",
        "ByoHost",
        "byohosts",
    )
}
pub fn bmt_ar() -> ApiResource {
    ar(
        "infrastructure.cluster.x-k8s.io",
        "v1beta1",
        "ByoMachineTemplate",
        "byomachinetemplates",
    )
}

pub fn api(client: &Client, ns: &str, r: &ApiResource) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), ns, r)
}

pub async fn apply(client: &Client, ns: &str, r: ApiResource, obj: Value) {
    let name = obj["metadata"]["name"].as_str().unwrap().to_string();
    api(client, ns, &r)
        .patch(&name, &PatchParams::apply("day2-test"), &Patch::Apply(&obj))
        .await
        .unwrap_or_else(|e| panic!("applying {} {name}: {e}", r.kind));
}

pub use testbed::fixtures::run::{stderr as err, stdout as out, words};

pub fn run(kubeconfig: &Path, ns: &str, args: &[&str]) -> Output {
    testbed::fixtures::run::plugin_in(BIN, kubeconfig, ns, args)
}

/// `kubectl capi <args>` in `ns` on the testbed, which must succeed (its output is the failure).
#[track_caller]
pub fn ok(tb: &Testbed, ns: &str, args: &[&str]) -> Output {
    let o = run(&tb.kubeconfig, ns, args);
    testbed::fixtures::run::assert_ok(&o, &format!("kubectl capi {}", args.join(" ")));
    o
}

pub use testbed::fixtures::poll::eventually;

/// Agents act as their `byoh:host:<name>` users (the real BYOH webhook admits no one else)
/// and do not join: the test plays their kubelets (`play_kubelets`).
pub fn sim_opts(tb: &Testbed) -> SimOptions {
    SimOptions {
        delay: Duration::from_millis(300),
        failure_rate: 0.0,
        tick: Duration::from_millis(150),
        host_kubeconfig: Some(tb.kubeconfig.clone()),
        install: false,
        join: false,
    }
}

/// Hosts whose agent registered them and then stopped: the agents run until every host of the
/// pool is registered with its facts (BYOH's webhook denies admin writes to ByoHosts).
pub async fn register_then_stop(tb: &Testbed, client: &Client, pool: byoh::Pool) {
    let (ns, prefix, count) = (pool.namespace.clone(), pool.name_prefix.clone(), pool.count);
    let agents = tokio::spawn(byoh::run_agents(client.clone(), pool, sim_opts(tb)));
    eventually(
        &format!("{count} hosts {prefix}* registered"),
        Duration::from_secs(60),
        || {
            let (c, n, p) = (client.clone(), ns.clone(), prefix.clone());
            async move {
                api(&c, &n, &host_ar())
                    .list(&ListParams::default())
                    .await
                    .unwrap()
                    .items
                    .iter()
                    .filter(|h| {
                        h.metadata
                            .name
                            .as_deref()
                            .is_some_and(|x| x.starts_with(&p))
                    })
                    .filter(|h| h.data["status"]["hostinfo"]["osname"].is_string())
                    .count()
                    == count
            }
        },
    )
    .await;
    agents.abort();
    let _ = agents.await;
}

pub fn pool(ns: &str, suffix: &str, count: usize, role: &str) -> byoh::Pool {
    byoh::Pool {
        namespace: ns.into(),
        count,
        labels: vec![("pool".into(), ns.into()), ("role".into(), role.into())],
        name_prefix: format!("{ns}-{suffix}"),
    }
}

/// A BYOH cluster: ByoCluster, a KubeadmControlPlane (played by the test), ByoMachineTemplates
/// selecting this test's hosts, and one MachineDeployment whose machines are bootstrap-ready
/// (a data secret instead of a KubeadmConfig, since no control plane really runs).
pub async fn make_cluster(client: &Client, ns: &str, name: &str, workers: i64, kubeconfig: &Path) {
    let infra = "infrastructure.cluster.x-k8s.io";
    apply(
        client,
        ns,
        ar(infra, "v1beta1", "ByoCluster", "byoclusters"),
        json!({"apiVersion": format!("{infra}/v1beta1"), "kind": "ByoCluster",
               "metadata": {"name": name},
               "spec": {"controlPlaneEndpoint": {"host": "192.0.2.1", "port": 6443}}}),
    )
    .await;
    for (tname, role) in [
        (format!("{name}-control-plane"), "control-plane"),
        (format!("{name}-md-0"), "worker"),
    ] {
        apply(
            client,
            ns,
            bmt_ar(),
            json!({"apiVersion": format!("{infra}/v1beta1"), "kind": "ByoMachineTemplate",
                   "metadata": {"name": tname},
                   "spec": {"template": {"spec": {"selector": {"matchLabels": {"pool": ns, "role": role}}}}}}),
        )
        .await;
    }
    apply(
        client,
        ns,
        kcp_ar(),
        json!({"apiVersion": "controlplane.cluster.x-k8s.io/v1beta2", "kind": "KubeadmControlPlane",
               "metadata": {"name": format!("{name}-control-plane")},
               "spec": {"replicas": 1, "version": "v1.33.4",
                 "machineTemplate": {"spec": {"infrastructureRef": {"apiGroup": infra, "kind": "ByoMachineTemplate", "name": format!("{name}-control-plane")}}},
                 "kubeadmConfigSpec": {"clusterConfiguration": {"etcd": {"local": {"dataDir": "/var/lib/etcd"}}}}}}),
    )
    .await;
    // The workload cluster is the testbed itself, as in the sandbox.
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client.clone(), ns);
    let kc = std::fs::read_to_string(kubeconfig).unwrap();
    secrets
        .patch(
            &format!("{name}-kubeconfig"),
            &PatchParams::apply("day2-test"),
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": format!("{name}-kubeconfig"), "labels": {"cluster.x-k8s.io/cluster-name": name}},
                "type": "cluster.x-k8s.io/secret", "stringData": {"value": kc}})),
        )
        .await
        .unwrap();
    apply(
        client,
        ns,
        cluster_ar(),
        json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
               "metadata": {"name": name},
               "spec": {"clusterNetwork": {"pods": {"cidrBlocks": ["10.244.0.0/16"]}},
                 "controlPlaneRef": {"apiGroup": "controlplane.cluster.x-k8s.io", "kind": "KubeadmControlPlane", "name": format!("{name}-control-plane")},
                 "infrastructureRef": {"apiGroup": infra, "kind": "ByoCluster", "name": name}}}),
    )
    .await;
    apply(
        client,
        ns,
        md_ar(),
        json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment",
               "metadata": {"name": format!("{name}-md-0")},
               "spec": {"clusterName": name, "replicas": workers,
                 "template": {"spec": {"clusterName": name, "version": "v1.33.4",
                   "bootstrap": {"dataSecretName": format!("{name}-md-0-bootstrap")},
                   "infrastructureRef": {"apiGroup": infra, "kind": "ByoMachineTemplate", "name": format!("{name}-md-0")}}}}}),
    )
    .await;
}

/// Plays the KubeadmControlPlane provider: status mirrors spec (version, replicas, initialized).
pub async fn play_kcp(client: Client, ns: String) {
    let kcps = api(&client, &ns, &kcp_ar());
    loop {
        if let Ok(list) = kcps.list(&ListParams::default()).await {
            for k in list.items {
                let n = k.data["spec"]["replicas"].as_i64().unwrap_or(1);
                let v = k.data["spec"]["version"].clone();
                let status = json!({"status": {
                    "version": v, "replicas": n, "readyReplicas": n, "availableReplicas": n, "upToDateReplicas": n,
                    "observedGeneration": k.metadata.generation,
                    "initialization": {"controlPlaneInitialized": true},
                    "conditions": [{"type": "Available", "status": "True", "reason": "Available",
                                    "message": "", "lastTransitionTime": "2026-11-30T00:00:00Z"}],
                }});
                let _ = kcps
                    .patch_status(
                        k.metadata.name.as_deref().unwrap_or(""),
                        &PatchParams::default(),
                        &Patch::Merge(status),
                    )
                    .await;
            }
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// SIMULATED kubelets of the hosts (no kubelet runs here, and the testbed's own API server, the
/// workload cluster, cannot take a real join): once an attached host's agent reports
/// K8sNodeBootstrapSucceeded, a Node named after the host appears in the workload cluster, as
/// `kubeadm join` registers it, and reports Ready with the pressure conditions CAPI's
/// NodeHealthy check reads. The real BYOH controller then sets the Node's provider ID and marks
/// the ByoMachine ready (BYOH v0.5.0 controllers/infrastructure/byomachine_controller.go,
/// updateNodeProviderID: without the Node the ByoMachine never becomes ready).
pub async fn play_kubelets(client: Client, ns: String) {
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
    let hosts = api(&client, &ns, &host_ar());
    let cond = |t: &str, status: &str, reason: &str| {
        json!({"type": t, "status": status, "reason": reason, "message": "played by the test (SIMULATED kubelet)",
               "lastHeartbeatTime": "2026-11-30T00:00:00Z", "lastTransitionTime": "2026-11-30T00:00:00Z"})
    };
    loop {
        if let Ok(list) = hosts.list(&ListParams::default()).await {
            for h in list.items {
                let attached = h.data["status"]["machineRef"]["name"].is_string();
                let bootstrapped = h.data["status"]["conditions"].as_array().is_some_and(|cs| {
                    cs.iter()
                        .any(|c| c["type"] == "K8sNodeBootstrapSucceeded" && c["status"] == "True")
                });
                let name = h.metadata.name.clone().unwrap_or_default();
                if !attached || !bootstrapped {
                    continue;
                }
                let version = h
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get("byoh.infrastructure.cluster.x-k8s.io/k8sversion"))
                    .cloned()
                    .unwrap_or_default();
                match nodes.get_opt(&name).await {
                    Ok(None) => {
                        let node = serde_json::from_value(json!({"metadata": {"name": name, "labels": {
                            "kubernetes.io/hostname": name, "testbed.capi-kamaji.io/simulated": "true"}}}))
                        .unwrap();
                        if nodes.create(&Default::default(), &node).await.is_err() {
                            continue;
                        }
                    }
                    // A host joined again (a new machine, another version) finds its Node from
                    // before, provider ID and all (CAPI v1.14.2 keeps the Nodes of a cluster
                    // without control-plane Machines: core/reconcilers/machine/
                    // machine_controller.go, errNoControlPlaneNodes), and BYOH v0.5.0 reuses a
                    // provider ID of the host's name (setNodeProviderID); the kubelet's status
                    // update reports its new version.
                    Ok(Some(n))
                        if n.status
                            .as_ref()
                            .and_then(|s| s.node_info.as_ref())
                            .is_some_and(|i| i.kubelet_version != version) => {}
                    _ => continue,
                }
                let status = json!({"status": {
                    "conditions": [
                        cond("Ready", "True", "KubeletReady"),
                        cond("MemoryPressure", "False", "KubeletHasSufficientMemory"),
                        cond("DiskPressure", "False", "KubeletHasNoDiskPressure"),
                        cond("PIDPressure", "False", "KubeletHasSufficientPID"),
                    ],
                    "nodeInfo": {"kubeletVersion": version, "kubeProxyVersion": "", "operatingSystem": "linux",
                                 "architecture": "amd64", "osImage": "SIMULATED", "kernelVersion": "",
                                 "containerRuntimeVersion": "", "machineID": "", "systemUUID": "", "bootID": ""},
                }});
                let _ = nodes
                    .patch_status(&name, &PatchParams::default(), &Patch::Merge(status))
                    .await;
            }
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// The SIMULATED host agents of `workers`, and the test's KubeadmControlPlane provider and
/// kubelets for `ns`; all stop when the value is dropped (at the end of the test, or when it
/// fails).
pub struct Players(pub Vec<tokio::task::JoinHandle<()>>);

impl Drop for Players {
    fn drop(&mut self) {
        for h in &self.0 {
            h.abort();
        }
    }
}

pub fn play(tb: &Testbed, client: &Client, ns: &str, workers: byoh::Pool) -> Players {
    let (c, opts) = (client.clone(), sim_opts(tb));
    Players(vec![
        tokio::spawn(async move {
            let _ = byoh::run_agents(c, workers, opts).await;
        }),
        tokio::spawn(play_kcp(client.clone(), ns.to_string())),
        tokio::spawn(play_kubelets(client.clone(), ns.to_string())),
    ])
}

pub async fn count_machines(client: &Client, ns: &str, cluster: &str) -> usize {
    api(client, ns, &machine_ar())
        .list(&ListParams::default().labels(&format!("cluster.x-k8s.io/cluster-name={cluster}")))
        .await
        .unwrap()
        .items
        .len()
}

pub async fn claimed_hosts(client: &Client, ns: &str) -> Vec<String> {
    api(client, ns, &host_ar())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|h| h.data["status"]["machineRef"]["name"].is_string())
        .filter_map(|h| h.metadata.name)
        .collect()
}

/// A kubeconfig with the testbed's admin context plus the context `kubeconfig --merge` would
/// have added for `cluster`.
pub fn kubeconfig_with_merged_context(tb: &testbed::Testbed, dir: &Path, cluster: &str) -> PathBuf {
    let mut doc: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(&tb.kubeconfig).unwrap()).unwrap();
    doc["clusters"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": cluster, "cluster": {"server": "https://192.0.2.1:6443"}}));
    // The credentials `kubeconfig --merge` copies from the cluster's kubeconfig Secret, which
    // make_cluster fills with the testbed's own kubeconfig.
    let creds = doc["users"][0]["user"].clone();
    doc["users"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": format!("{cluster}-admin"), "user": creds}));
    doc["contexts"].as_array_mut().unwrap().push(json!({
        "name": format!("{cluster}-admin@{cluster}"),
        "context": {"cluster": cluster, "user": format!("{cluster}-admin")}
    }));
    let p = dir.join("kubeconfig");
    std::fs::write(&p, serde_json::to_string(&doc).unwrap()).unwrap();
    p
}

pub async fn md_ready(client: &Client, ns: &str, name: &str, replicas: i64) -> bool {
    let md = api(client, ns, &md_ar()).get(name).await.unwrap();
    md.data["status"]["readyReplicas"].as_i64() == Some(replicas)
        && md.data["status"]["replicas"].as_i64() == Some(replicas)
}

/// The cluster `up` of the upgrade tests, its one worker ready: 3 worker hosts (2 spare), 2
/// control-plane hosts registered, and the players of `play`.
pub async fn upgradable_cluster(tb: &Testbed, client: &Client, ns: &str) -> Players {
    let workers = pool(ns, "w", 3, "worker");
    register_then_stop(tb, client, pool(ns, "c", 2, "control-plane")).await;
    let players = play(tb, client, ns, workers);
    make_cluster(client, ns, "up", 1, &tb.kubeconfig).await;
    eventually("the worker ready", Duration::from_secs(120), || {
        let (c, n) = (client.clone(), ns.to_string());
        async move { md_ready(&c, &n, "up-md-0", 1).await }
    })
    .await;
    players
}

pub use testbed::fixtures::reconciler::{Reconciler, binary_next_to};
pub use testbed::fixtures::run::{assert_contains, assert_lacks};

/// The reconciler for one namespace, its log in `log` (appended to across restarts).
pub fn start_reconciler(tb: &Testbed, ns: &str, log: &Path) -> Reconciler {
    let bin = binary_next_to(BIN);
    Reconciler::start(&bin, &tb.kubeconfig, ns, log.to_path_buf(), &["-v"], &[])
}

pub fn cu_ar() -> ApiResource {
    ar(
        "ops.capi-kamaji.io",
        "v1alpha1",
        "ClusterUpgrade",
        "clusterupgrades",
    )
}

/// Installs the CRDs `kubectl kamaji install` applies (the ClusterUpgrade's among them).
pub async fn install_crds(client: &Client) {
    let crds: Vec<_> = kcore::kamaji::crd::crds()
        .into_iter()
        .chain(kcore::ops::crds())
        .collect();
    testbed::fixtures::crds::apply_and_wait(client, &crds, "day2-test").await;
}
