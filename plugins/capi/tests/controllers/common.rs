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
pub use testbed::agent::HostAgent;

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

pub use testbed::fixtures::run::{Background, assert_ok, stderr as err, stdout as out, words};

pub fn run(kubeconfig: &Path, ns: &str, args: &[&str]) -> Output {
    testbed::fixtures::run::plugin_in(BIN, kubeconfig, ns, args)
}

/// Asserts the command exited with `code`; a failure shows both outputs.
#[track_caller]
pub fn exits(o: &Output, code: i32) {
    assert_eq!(
        o.status.code(),
        Some(code),
        "stdout:\n{}\nstderr:\n{}",
        out(o),
        err(o)
    );
}

/// The first line of stderr: a refusal says what is wrong in it.
pub fn first_line(o: &Output) -> String {
    err(o).lines().next().unwrap_or_default().to_string()
}

/// The `error:` line of stderr, after any progress lines (a non-terminal stderr gets those first).
#[track_caller]
pub fn error_line(o: &Output) -> String {
    let e = err(o);
    e.lines()
        .find(|l| l.starts_with("error:"))
        .unwrap_or_else(|| panic!("no error: line in:\n{e}"))
        .to_string()
}

/// One story: its turn on the shared real testbed (one cluster's machines at a time) and a
/// fresh namespace there; the turn passes on when it is dropped, after what the test made later.
pub struct Story {
    pub tb: &'static Testbed,
    pub client: Client,
    pub ns: String,
    _turn: tokio::sync::MutexGuard<'static, ()>,
}

impl Story {
    pub async fn start(prefix: &str) -> Story {
        let turn = TURN.lock().await;
        let tb = testbed::shared_real();
        let (client, ns) = tb.namespace(prefix).await;
        Story {
            tb,
            client,
            ns,
            _turn: turn,
        }
    }

    /// `kubectl capi <args>` in the story's namespace on the testbed.
    pub fn run(&self, args: &[&str]) -> Output {
        run(&self.tb.kubeconfig, &self.ns, args)
    }

    /// [`Story::run`], which must succeed (its output is the failure).
    #[track_caller]
    pub fn ok(&self, args: &[&str]) -> Output {
        let o = self.run(args);
        assert_ok(&o, &format!("kubectl capi {}", args.join(" ")));
        o
    }

    /// [`Story::run`], which must exit with `code`.
    #[track_caller]
    pub fn fails(&self, code: i32, args: &[&str]) -> Output {
        let o = self.run(args);
        exits(&o, code);
        o
    }

    pub fn api(&self, r: &ApiResource) -> Api<DynamicObject> {
        api(&self.client, &self.ns, r)
    }

    pub async fn get(&self, r: &ApiResource, name: &str) -> DynamicObject {
        self.api(r)
            .get(name)
            .await
            .unwrap_or_else(|e| panic!("getting {} {name}: {e}", r.kind))
    }

    /// The objects of kind `r` that belong to `cluster` (by its cluster-name label).
    pub async fn of_cluster(&self, r: &ApiResource, cluster: &str) -> Vec<DynamicObject> {
        self.api(r)
            .list(
                &ListParams::default().labels(&format!("cluster.x-k8s.io/cluster-name={cluster}")),
            )
            .await
            .unwrap()
            .items
    }

    pub async fn machines(&self, cluster: &str) -> usize {
        self.of_cluster(&machine_ar(), cluster).await.len()
    }

    /// The hosts that serve a machine.
    pub async fn claimed(&self) -> Vec<String> {
        claimed_hosts(&self.client, &self.ns).await
    }

    pub async fn until_claimed(&self, n: usize) {
        eventually(
            &format!("{n} hosts claimed"),
            Duration::from_secs(90),
            async || self.claimed().await.len() == n,
        )
        .await;
    }

    /// Waits until MachineDeployment `md` has `n` replicas, all ready.
    pub async fn until_ready(&self, md: &str, n: i64) {
        eventually(
            &format!("{md} with {n} ready"),
            Duration::from_secs(120),
            async || md_ready(&self.client, &self.ns, md, n).await,
        )
        .await;
    }

    /// Cluster `name` with `workers` machines, on the hosts of `played` (their agents running,
    /// with the players of `play`), after the hosts of `stopped` registered and stopped.
    pub async fn cluster(
        &self,
        name: &str,
        workers: i64,
        played: Pool,
        stopped: Option<Pool>,
    ) -> Players {
        let stopped = match stopped {
            Some(p) => register_then_stop(self.tb, &self.client, p).await,
            None => Vec::new(),
        };
        let mut players = play(self.tb, &self.client, &self.ns, played);
        players.stopped = stopped;
        make_cluster(&self.client, &self.ns, name, workers, &self.tb.kubeconfig).await;
        players
    }

    /// [`Story::cluster`] on `worker_hosts` worker hosts (pool `w`) and `cp_hosts` control-plane
    /// hosts registered and stopped (pool `c`; none when 0): no machine claims those, the control
    /// plane is played, but the preflights count them.
    pub async fn cluster_on(
        &self,
        name: &str,
        workers: i64,
        worker_hosts: usize,
        cp_hosts: usize,
    ) -> Players {
        let cps = (cp_hosts > 0).then(|| pool(&self.ns, "c", cp_hosts, "control-plane"));
        let played = pool(&self.ns, "w", worker_hosts, "worker");
        self.cluster(name, workers, played, cps).await
    }
}

pub use testbed::fixtures::poll::eventually;

/// A pool of hosts: `count` hosts named `<name_prefix>NN` in `namespace`, with `labels`.
#[derive(Clone, Debug)]
pub struct Pool {
    pub namespace: String,
    pub count: usize,
    pub labels: Vec<(String, String)>,
    pub name_prefix: String,
}

/// The hosts of `pool` onboarded as an admin does (`kubectl capi hosts add`, then the printed
/// command on each host: the real BYOH agent, `testbed::agent`), with Kubernetes pre-installed;
/// their `kubeadm join` succeeds without joining, since the test plays their kubelets
/// (`play_kubelets`): the workload clusters here are the testbed's own API server.
pub fn onboard(tb: &Testbed, pool: &Pool) -> Vec<HostAgent> {
    onboard_as(tb, pool, testbed::agent::Kubelet::Played)
}

/// [`onboard`] with the hosts' SIMULATED `kubeadm` doing what `kubelet` says.
pub fn onboard_as(tb: &Testbed, pool: &Pool, kubelet: testbed::agent::Kubelet) -> Vec<HostAgent> {
    (1..=pool.count)
        .map(|i| {
            let host = format!("{}{i:02}", pool.name_prefix);
            testbed::agent::onboard(
                tb,
                Path::new(BIN),
                &pool.namespace,
                &host,
                &pool.labels,
                true,
                kubelet,
            )
            .unwrap_or_else(|e| panic!("onboarding {host}: {e}"))
        })
        .collect()
}

/// Waits until every host of `pool` registered with its facts.
pub async fn registered(client: &Client, pool: &Pool, agents: &[HostAgent]) {
    let (prefix, count) = (&pool.name_prefix, pool.count);
    let hosts = api(client, &pool.namespace, &host_ar());
    testbed::fixtures::poll::wait_for(
        &format!("{count} hosts {prefix}* registered"),
        Duration::from_secs(90),
        || {
            agents
                .iter()
                .map(|a| format!("--- {} ---\n{}", a.host, a.log_tail()))
                .collect::<Vec<_>>()
                .join("\n")
        },
        || async {
            let list = hosts.list(&ListParams::default()).await.ok()?.items;
            let registered = |h: &&DynamicObject| {
                h.name_any().starts_with(prefix.as_str())
                    && h.data["status"]["hostinfo"]["osname"].is_string()
            };
            (list.iter().filter(registered).count() == count).then_some(())
        },
    )
    .await;
}

/// Hosts whose agent registered them and then went down (powered off: the process stopped;
/// [`HostAgent::power`] brings it back). BYOH's webhook denies admin writes to ByoHosts, so
/// only their agents can register them.
pub async fn register_then_stop(tb: &Testbed, client: &Client, pool: Pool) -> Vec<HostAgent> {
    let agents = onboard(tb, &pool);
    registered(client, &pool, &agents).await;
    // Powered off only once running: an agent stopped mid-start exits when resumed.
    testbed::fixtures::poll::wait_for(
        "the stopped pool's agents to start their controller",
        Duration::from_secs(60),
        || {
            agents
                .iter()
                .map(|a| format!("--- agent {} ---\n{}", a.host, a.log_tail()))
                .collect::<Vec<_>>()
                .join("\n")
        },
        || async { agents.iter().all(HostAgent::started).then_some(()) },
    )
    .await;
    for a in &agents {
        a.power(false);
    }
    agents
}

pub fn pool(ns: &str, suffix: &str, count: usize, role: &str) -> Pool {
    Pool {
        namespace: ns.into(),
        count,
        labels: vec![("pool".into(), ns.into()), ("role".into(), role.into())],
        name_prefix: format!("{ns}-{suffix}"),
    }
}

/// A worker's bootstrap data as CAPI's kubeadm bootstrap provider writes it (cloud-config).
const BOOTSTRAP_DATA: &str = "## template: jinja\n#cloud-config\nwrite_files:\n- path: /run/kubeadm/kubeadm-join-config.yaml\n  owner: root:root\n  permissions: '0640'\n  content: |\n    apiVersion: kubeadm.k8s.io/v1beta4\n    kind: JoinConfiguration\n    discovery:\n      bootstrapToken:\n        apiServerEndpoint: 192.0.2.1:6443\n        token: abcdef.0123456789abcdef\n        unsafeSkipCAVerification: true\n- path: /run/cluster-api/placeholder\n  owner: root:root\n  permissions: '0640'\n  content: This placeholder file is used to create the /run/cluster-api sub directory in a way that is compatible with both Linux and Windows (mkdir -p /run/cluster-api does not work with Windows)\nruncmd:\n  - kubeadm join --config /run/kubeadm/kubeadm-join-config.yaml  && echo success > /run/cluster-api/bootstrap-success.complete\n";

/// A BYOH cluster: ByoCluster, a KubeadmControlPlane (played by the test), ByoMachineTemplates
/// selecting this test's hosts, and one MachineDeployment whose machines are bootstrap-ready
/// (a data secret instead of a KubeadmConfig, since no control plane really runs).
pub async fn make_cluster(client: &Client, ns: &str, name: &str, workers: i64, kubeconfig: &Path) {
    let infra = "infrastructure.cluster.x-k8s.io";
    let template = |tname: String, role: &str| {
        json!({"apiVersion": format!("{infra}/v1beta1"), "kind": "ByoMachineTemplate",
               "metadata": {"name": tname},
               "spec": {"template": {"spec": {"selector": {"matchLabels": {"pool": ns, "role": role}}}}}})
    };
    // The workload cluster is the testbed itself, as in the sandbox.
    let kc = std::fs::read_to_string(kubeconfig).unwrap();
    let objects = [
        (
            ar(infra, "v1beta1", "ByoCluster", "byoclusters"),
            json!({"apiVersion": format!("{infra}/v1beta1"), "kind": "ByoCluster",
                   "metadata": {"name": name},
                   "spec": {"controlPlaneEndpoint": {"host": "192.0.2.1", "port": 6443}}}),
        ),
        (
            bmt_ar(),
            template(format!("{name}-control-plane"), "control-plane"),
        ),
        (bmt_ar(), template(format!("{name}-md-0"), "worker")),
        (
            kcp_ar(),
            json!({"apiVersion": "controlplane.cluster.x-k8s.io/v1beta2", "kind": "KubeadmControlPlane",
                   "metadata": {"name": format!("{name}-control-plane")},
                   "spec": {"replicas": 1, "version": "v1.33.5",
                     "machineTemplate": {"spec": {"infrastructureRef": {"apiGroup": infra, "kind": "ByoMachineTemplate", "name": format!("{name}-control-plane")}}},
                     "kubeadmConfigSpec": {"clusterConfiguration": {"etcd": {"local": {"dataDir": "/var/lib/etcd"}}}}}}),
        ),
        (
            // The workers' bootstrap data, in the shape CAPI's kubeadm bootstrap provider
            // writes (its JoinConfiguration is never read: the hosts' kubeadm is SIMULATED and
            // their Nodes played).
            ar("", "v1", "Secret", "secrets"),
            json!({"apiVersion": "v1", "kind": "Secret",
                   "metadata": {"name": format!("{name}-md-0-bootstrap"), "labels": {"cluster.x-k8s.io/cluster-name": name}},
                   "type": "cluster.x-k8s.io/secret", "stringData": {"format": "cloud-config", "value": BOOTSTRAP_DATA}}),
        ),
        (
            ar("", "v1", "Secret", "secrets"),
            json!({"apiVersion": "v1", "kind": "Secret",
                   "metadata": {"name": format!("{name}-kubeconfig"), "labels": {"cluster.x-k8s.io/cluster-name": name}},
                   "type": "cluster.x-k8s.io/secret", "stringData": {"value": kc}}),
        ),
        (
            cluster_ar(),
            json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
                   "metadata": {"name": name},
                   "spec": {"clusterNetwork": {"pods": {"cidrBlocks": ["10.244.0.0/16"]}},
                     "controlPlaneRef": {"apiGroup": "controlplane.cluster.x-k8s.io", "kind": "KubeadmControlPlane", "name": format!("{name}-control-plane")},
                     "infrastructureRef": {"apiGroup": infra, "kind": "ByoCluster", "name": name}}}),
        ),
        (
            md_ar(),
            json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment",
                   "metadata": {"name": format!("{name}-md-0")},
                   "spec": {"clusterName": name, "replicas": workers,
                     "template": {"spec": {"clusterName": name, "version": "v1.33.5",
                       "bootstrap": {"dataSecretName": format!("{name}-md-0-bootstrap")},
                       "infrastructureRef": {"apiGroup": infra, "kind": "ByoMachineTemplate", "name": format!("{name}-md-0")}}}}}),
        ),
    ];
    for (r, obj) in objects {
        apply(client, ns, r, obj).await;
    }
}

/// Plays a controller: `f` on each object `objs` lists, over and over until the task is aborted.
async fn play_each<F, Fut>(objs: Api<DynamicObject>, mut f: F)
where
    F: FnMut(DynamicObject) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    loop {
        if let Ok(list) = objs.list(&ListParams::default()).await {
            for o in list.items {
                f(o).await;
            }
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// Plays the KubeadmControlPlane provider: status mirrors spec (version, replicas, initialized).
pub async fn play_kcp(client: Client, ns: String) {
    let kcps = api(&client, &ns, &kcp_ar());
    play_each(kcps.clone(), move |k| {
        let kcps = kcps.clone();
        async move {
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
    })
    .await
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
    let cond = |t: &str, status: &str, reason: &str| {
        json!({"type": t, "status": status, "reason": reason, "message": "played by the test (SIMULATED kubelet)",
               "lastHeartbeatTime": "2026-11-30T00:00:00Z", "lastTransitionTime": "2026-11-30T00:00:00Z"})
    };
    play_each(api(&client, &ns, &host_ar()), move |h| {
        let nodes = nodes.clone();
        async move {
        let attached = h.data["status"]["machineRef"]["name"].is_string();
        let bootstrapped = h.data["status"]["conditions"].as_array().is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "K8sNodeBootstrapSucceeded" && c["status"] == "True")
        });
        let name = h.metadata.name.clone().unwrap_or_default();
        if !attached || !bootstrapped {
            return;
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
                    return;
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
            _ => return,
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
    })
    .await
}

/// The real host agents of `workers` (and of hosts registered and stopped, when any), and the
/// test's KubeadmControlPlane provider and kubelets for `ns` (SIMULATED); all stop when the
/// value is dropped (at the end of the test, or when it fails).
pub struct Players {
    /// Held: dropping an agent stops it.
    pub _agents: Vec<HostAgent>,
    pub stopped: Vec<HostAgent>,
    pub tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Players {
    fn drop(&mut self) {
        for h in &self.tasks {
            h.abort();
        }
    }
}

/// Players of the given tasks only (no hosts).
pub fn tasks(tasks: Vec<tokio::task::JoinHandle<()>>) -> Players {
    Players {
        _agents: Vec::new(),
        stopped: Vec::new(),
        tasks,
    }
}

pub fn play(tb: &Testbed, client: &Client, ns: &str, workers: Pool) -> Players {
    Players {
        _agents: onboard(tb, &workers),
        stopped: Vec::new(),
        tasks: vec![
            tokio::spawn(play_kcp(client.clone(), ns.to_string())),
            tokio::spawn(play_kubelets(client.clone(), ns.to_string())),
        ],
    }
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
pub async fn upgradable_cluster(s: &Story) -> Players {
    let players = s.cluster_on("up", 1, 3, 2).await;
    s.until_ready("up-md-0", 1).await;
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

/// What `look` sees each time it changes (`None`: nothing seen this time), polled in the
/// background every `every` until the recorder is stopped or dropped.
pub struct Recorder<T> {
    seen: std::sync::Arc<std::sync::Mutex<Vec<T>>>,
    task: tokio::task::JoinHandle<()>,
}

pub fn record<T, F, Fut>(every: Duration, look: F) -> Recorder<T>
where
    T: PartialEq + Send + 'static,
    F: Fn() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Option<T>> + Send,
{
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let task = {
        let seen = seen.clone();
        tokio::spawn(async move {
            loop {
                if let Some(v) = look().await {
                    let mut s = seen.lock().unwrap();
                    if s.last() != Some(&v) {
                        s.push(v);
                    }
                }
                tokio::time::sleep(every).await;
            }
        })
    };
    Recorder { seen, task }
}

impl<T> Recorder<T> {
    /// Stops it; what it saw, in order.
    pub fn stop(self) -> Vec<T> {
        self.task.abort();
        std::mem::take(&mut *self.seen.lock().unwrap())
    }
}

impl<T> Drop for Recorder<T> {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The `fields` of each item of the array `list`, as an array of arrays (each field present).
#[track_caller]
pub fn pluck(list: &Value, fields: &[&str]) -> Value {
    let items = list
        .as_array()
        .unwrap_or_else(|| panic!("not an array: {list}"));
    items
        .iter()
        .map(|item| {
            fields
                .iter()
                .map(|f| match &item[f] {
                    Value::Null => panic!("no {f} in {item}"),
                    v => v.clone(),
                })
                .collect::<Value>()
        })
        .collect()
}
