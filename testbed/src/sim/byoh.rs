//! SIMULATED BYOH: a pool of host agents, and the BYOH controller's cluster, attach and release
//! steps (byoh.md §6). The agents register ByoHosts with realistic host facts, bootstrap when a
//! machine is attached (or fail, at a configurable rate, as a broken install script would), and
//! clean up when released. The controller picks the first free host matching a ByoMachine's
//! selector across all namespaces, as upstream does, and registers a Node with the BYOH provider
//! ID in the workload cluster (the sandbox itself) once the host has bootstrapped.

use std::collections::HashMap;
use std::time::Instant;

use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::{SimOptions, annotation, ar, join, label, name, namespace, now, unit_hash};

const GROUP: &str = "infrastructure.cluster.x-k8s.io";
const CLUSTER_NAME: &str = "cluster.x-k8s.io/cluster-name";
const BYOMACHINE_NAME: &str = "byoh.infrastructure.cluster.x-k8s.io/byomachine-name";
const UNREGISTERING: &str = "byoh.infrastructure.cluster.x-k8s.io/unregistering";
const ENDPOINT_IP: &str = "byoh.infrastructure.cluster.x-k8s.io/endpointip";
const K8S_VERSION: &str = "byoh.infrastructure.cluster.x-k8s.io/k8sversion";
const BUNDLE_REGISTRY: &str = "byoh.infrastructure.cluster.x-k8s.io/bundle-registry";
const MACHINE_FINALIZER: &str = "byomachine.infrastructure.cluster.x-k8s.io";
const CLUSTER_FINALIZER: &str = "byocluster.infrastructure.cluster.x-k8s.io";

fn hosts_api(client: &Client, ns: Option<&str>) -> Api<DynamicObject> {
    let r = ar(GROUP, "v1beta1", "ByoHost", "byohosts");
    match ns {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &r),
        None => Api::all_with(client.clone(), &r),
    }
}

fn cond(type_: &str, status: bool, reason: &str, severity: &str, message: &str) -> Value {
    let mut c = json!({"type": type_, "status": if status {"True"} else {"False"},
                       "lastTransitionTime": now()});
    if !status {
        c["reason"] = reason.into();
        c["severity"] = severity.into();
        if !message.is_empty() {
            c["message"] = message.into();
        }
    }
    c
}

/// The pool of host agents.
#[derive(Clone, Debug)]
pub struct Pool {
    pub namespace: String,
    pub count: usize,
    /// Labels every host registers with (`--label` on the real agent), e.g. `role=worker`.
    pub labels: Vec<(String, String)>,
    pub name_prefix: String,
}

/// Registers the pool's ByoHosts (idempotent), as agents do at start-up.
pub async fn register(client: &Client, pool: &Pool) -> Result<(), kube::Error> {
    register_with(client, pool, None).await
}

/// Grants the `byoh:hosts` group what an agent does with its host (the agents' RBAC).
async fn agent_rbac(admin: &Client) -> Result<(), kube::Error> {
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "capi-testbed:byoh-host-agent"},
        "rules": [
            {"apiGroups": [GROUP], "resources": ["byohosts", "byohosts/status"], "verbs": ["*"]},
            {"apiGroups": [GROUP], "resources": ["byomachines", "k8sinstallerconfigs"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]}]});
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "capi-testbed:byoh-host-agent"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "capi-testbed:byoh-host-agent"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "byoh:hosts"}]});
    let pp = PatchParams::apply("capi-testbed").force();
    let roles: Api<DynamicObject> = Api::all_with(
        admin.clone(),
        &ar(
            "rbac.authorization.k8s.io",
            "v1",
            "ClusterRole",
            "clusterroles",
        ),
    );
    roles
        .patch("capi-testbed:byoh-host-agent", &pp, &Patch::Apply(&role))
        .await?;
    let bindings: Api<DynamicObject> = Api::all_with(
        admin.clone(),
        &ar(
            "rbac.authorization.k8s.io",
            "v1",
            "ClusterRoleBinding",
            "clusterrolebindings",
        ),
    );
    bindings
        .patch("capi-testbed:byoh-host-agent", &pp, &Patch::Apply(&binding))
        .await?;
    Ok(())
}

/// A client acting as host `host`'s agent: the user `byoh:host:<host>` in group `byoh:hosts`,
/// as the upstream agent's certificate from its BootstrapKubeconfig says (impersonated here).
async fn host_client(kubeconfig: &std::path::Path, host: &str) -> Result<Client, kube::Error> {
    use kube::config::{KubeConfigOptions, Kubeconfig};
    let kc = Kubeconfig::read_from(kubeconfig)
        .map_err(|e| kube::Error::Service(e.to_string().into()))?;
    let mut config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .map_err(|e| kube::Error::Service(e.to_string().into()))?;
    config.auth_info.impersonate = Some(format!("byoh:host:{host}"));
    config.auth_info.impersonate_groups =
        Some(vec!["byoh:hosts".into(), "system:authenticated".into()]);
    Client::try_from(config)
}

struct Agents {
    admin: Client,
    kubeconfig: Option<std::path::PathBuf>,
    clients: HashMap<String, Client>,
    /// Hosts whose (SIMULATED) kubelet has joined a workload cluster, and its last heartbeat.
    nodes: HashMap<String, (join::Joined, Option<Instant>)>,
}

impl Agents {
    async fn client(&mut self, host: &str) -> Result<Client, kube::Error> {
        let Some(kc) = self.kubeconfig.clone() else {
            return Ok(self.admin.clone());
        };
        if let Some(c) = self.clients.get(host) {
            return Ok(c.clone());
        }
        let c = host_client(&kc, host).await?;
        self.clients.insert(host.to_string(), c.clone());
        Ok(c)
    }
}

async fn register_with(
    client: &Client,
    pool: &Pool,
    agents: Option<&mut Agents>,
) -> Result<(), kube::Error> {
    let mut local;
    let agents = match agents {
        Some(a) => a,
        None => {
            local = Agents {
                admin: client.clone(),
                kubeconfig: None,
                clients: HashMap::new(),
                nodes: HashMap::new(),
            };
            &mut local
        }
    };
    if agents.kubeconfig.is_some() {
        agent_rbac(client).await?;
    }
    for i in 1..=pool.count {
        let host = format!("{}{i:02}", pool.name_prefix);
        let api = hosts_api(&agents.client(&host).await?, Some(&pool.namespace));
        if api.get_opt(&host).await?.is_none() {
            let labels: serde_json::Map<String, Value> = pool
                .labels
                .iter()
                .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                .collect();
            let obj: DynamicObject = serde_json::from_value(json!({
                "apiVersion": format!("{GROUP}/v1beta1"), "kind": "ByoHost",
                "metadata": {"name": host, "labels": labels,
                             "annotations": {"testbed.capi-kamaji.io/simulated": "true"}},
                "spec": {},
            }))
            .map_err(kube::Error::SerdeError)?;
            api.create(&PostParams::default(), &obj).await?;
        }
        let status = json!({"status": {
            "hostinfo": {"osname": "linux", "osimage": "Ubuntu 22.04.4 LTS", "architecture": "amd64"},
            "network": [
                {"networkInterfaceName": "eno1", "isDefault": true, "connected": true,
                 "macAddr": format!("52:54:00:00:10:{i:02x}"), "ipAddrs": [format!("192.0.2.{}/24", 10 + i)]},
                {"networkInterfaceName": "eno2", "isDefault": false, "connected": false,
                 "macAddr": format!("52:54:00:00:20:{i:02x}"), "ipAddrs": []},
            ],
        }});
        api.patch_status(&host, &PatchParams::default(), &Patch::Merge(status))
            .await?;
    }
    Ok(())
}

/// Runs the host agents of `pool` until dropped.
pub async fn run_agents(client: Client, pool: Pool, opts: SimOptions) {
    let mut agents = Agents {
        admin: client.clone(),
        kubeconfig: opts.host_kubeconfig.clone(),
        clients: HashMap::new(),
        nodes: HashMap::new(),
    };
    if let Err(e) = register_with(&client, &pool, Some(&mut agents)).await {
        tracing::warn!("simulated BYOH agents: registering hosts: {e}");
    }
    tracing::info!(
        "simulated BYOH agents: {} hosts registered in namespace {}",
        pool.count,
        pool.namespace
    );
    let api = hosts_api(&client, Some(&pool.namespace));
    // When each host started its current action.
    let mut started: HashMap<String, (String, Instant)> = HashMap::new();
    let mut attempts: HashMap<String, u32> = HashMap::new();
    loop {
        match api.list(&ListParams::default()).await {
            Ok(list) => {
                for host in list
                    .items
                    .iter()
                    .filter(|h| name(h).starts_with(&pool.name_prefix))
                {
                    let h = name(host);
                    let hapi = match agents.client(&h).await {
                        Ok(c) => hosts_api(&c, Some(&pool.namespace)),
                        Err(e) => {
                            tracing::warn!("simulated BYOH agent {h}: {e}");
                            continue;
                        }
                    };
                    if let Err(e) =
                        agent_step(&hapi, &opts, &mut agents, &mut started, &mut attempts, host)
                            .await
                    {
                        tracing::warn!("simulated BYOH agent {h}: {e}");
                    }
                }
            }
            Err(e) => tracing::warn!("simulated BYOH agents: listing hosts: {e}"),
        }
        tokio::time::sleep(opts.tick).await;
    }
}

fn condition_status(host: &DynamicObject, type_: &str) -> Option<(String, String)> {
    host.data["status"]["conditions"]
        .as_array()?
        .iter()
        .find_map(|c| {
            (c["type"] == type_).then(|| {
                (
                    c["status"].as_str().unwrap_or("").to_string(),
                    c["reason"].as_str().unwrap_or("").to_string(),
                )
            })
        })
}

/// Sets conditions by type, keeping the host's others (as CAPI's `conditions.Set` does).
async fn set_conditions(
    api: &Api<DynamicObject>,
    host: &DynamicObject,
    conds: Vec<Value>,
) -> Result<(), kube::Error> {
    let mut all: Vec<Value> = host.data["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for c in conds {
        match all.iter_mut().find(|x| x["type"] == c["type"]) {
            Some(x) => *x = c,
            None => all.push(c),
        }
    }
    api.patch_status(
        &name(host),
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"conditions": all}})),
    )
    .await?;
    Ok(())
}

fn is_true(host: &DynamicObject, type_: &str) -> bool {
    condition_status(host, type_).is_some_and(|c| c.0 == "True")
}

fn host_ip(h: &DynamicObject) -> String {
    h.data["status"]["network"]
        .as_array()
        .and_then(|n| n.iter().find(|i| i["isDefault"] == json!(true)))
        .and_then(|i| i["ipAddrs"][0].as_str())
        .unwrap_or("")
        .split('/')
        .next()
        .unwrap_or("")
        .to_string()
}

async fn secret_value(admin: &Client, ns: &str, name: &str, key: &str) -> Result<String, String> {
    let s = Api::<k8s_openapi::api::core::v1::Secret>::namespaced(admin.clone(), ns)
        .get(name)
        .await
        .map_err(|e| format!("secret {ns}/{name}: {e}"))?;
    s.data
        .and_then(|d| {
            d.get(key)
                .map(|b| String::from_utf8_lossy(&b.0).to_string())
        })
        .ok_or_else(|| format!("secret {ns}/{name} has no {key}"))
}

/// An admin client of the workload cluster the host serves (`<cluster>-kubeconfig`), for the
/// SIMULATED check of whether a network add-on runs there.
async fn tenant_admin(admin: &Client, h: &DynamicObject) -> Option<Client> {
    let cluster = label(h, CLUSTER_NAME)?;
    let ns = h.data["status"]["machineRef"]["namespace"].as_str()?;
    let text = secret_value(admin, ns, &format!("{cluster}-kubeconfig"), "value")
        .await
        .ok()?;
    let kc = kube::config::Kubeconfig::from_yaml(&text).ok()?;
    let config =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await
            .ok()?;
    Client::try_from(config).ok()
}

/// One pass of a host agent, following the upstream agent's `HostReconciler`
/// (`agent/reconciler/host_reconciler.go`, BYOH v0.5.0): the same conditions, reasons and
/// severities, in the same order. The OS work (installer script, `kubeadm join`/`reset`) is
/// SIMULATED; a join, when `opts.join`, is real API traffic ([`join`]).
async fn agent_step(
    api: &Api<DynamicObject>,
    opts: &SimOptions,
    agents: &mut Agents,
    started: &mut HashMap<String, (String, Instant)>,
    attempts: &mut HashMap<String, u32>,
    host: &DynamicObject,
) -> Result<(), kube::Error> {
    let h = name(host);
    if annotation(host, "cluster.x-k8s.io/paused").is_some() {
        return Ok(());
    }
    // The kubelet keeps heartbeating while the host serves a cluster.
    if let Some((joined, last)) = agents.nodes.get_mut(&h)
        && annotation(host, UNREGISTERING).is_none()
        && last.is_none_or(|t| t.elapsed() >= std::time::Duration::from_secs(10))
    {
        let joined = joined.clone();
        *last = Some(Instant::now());
        let cni = match tenant_admin(&agents.admin, host).await {
            Some(c) => join::cni_present(&c).await,
            None => false,
        };
        let version = annotation(host, K8S_VERSION).unwrap_or("").to_string();
        if let Err(e) = join::heartbeat(&joined, &h, &version, &host_ip(host), cni).await {
            tracing::warn!("simulated kubelet on {h}: {e}");
        }
    }
    let attached = host.data["status"]["machineRef"].get("name").is_some();
    let action = if annotation(host, UNREGISTERING).is_some() {
        "cleanup"
    } else if !attached {
        if condition_status(host, "K8sNodeBootstrapSucceeded").map(|b| b.1)
            != Some("WaitingForMachineRefToBeAssigned".into())
        {
            set_conditions(
                api,
                host,
                vec![cond(
                    "K8sNodeBootstrapSucceeded",
                    false,
                    "WaitingForMachineRefToBeAssigned",
                    "Info",
                    "",
                )],
            )
            .await?;
        }
        return Ok(());
    } else if host.data["spec"]["bootstrapSecret"].get("name").is_none() {
        if condition_status(host, "K8sNodeBootstrapSucceeded").map(|b| b.1)
            != Some("BootstrapDataSecretUnavailable".into())
        {
            set_conditions(
                api,
                host,
                vec![cond(
                    "K8sNodeBootstrapSucceeded",
                    false,
                    "BootstrapDataSecretUnavailable",
                    "Info",
                    "",
                )],
            )
            .await?;
        }
        return Ok(());
    } else if is_true(host, "K8sNodeBootstrapSucceeded") {
        return Ok(());
    } else if condition_status(host, "K8sNodeBootstrapSucceeded").map(|b| b.1)
        == Some("CloudInitExecutionFailed".into())
    {
        // The upstream agent retries on its next reconcile; a host left failed shows the
        // failure (as `kubectl capi hosts` reports it) until someone acts.
        return Ok(());
    } else if opts.install && !is_true(host, "K8sComponentsInstallationSucceeded") {
        if host.data["spec"]["installationSecret"]
            .get("name")
            .is_none()
        {
            if condition_status(host, "K8sComponentsInstallationSucceeded").map(|b| b.1)
                != Some("K8sInstallationSecretUnavailable".into())
            {
                set_conditions(
                    api,
                    host,
                    vec![cond(
                        "K8sComponentsInstallationSucceeded",
                        false,
                        "K8sInstallationSecretUnavailable",
                        "Info",
                        "",
                    )],
                )
                .await?;
            }
            return Ok(());
        }
        "install"
    } else {
        "bootstrap"
    };
    let since = match started.get(&h) {
        Some((a, t)) if a == action => *t,
        _ => {
            tracing::info!("simulated BYOH agent {h}: {action} started");
            started.insert(h.clone(), (action.to_string(), Instant::now()));
            return Ok(());
        }
    };
    if since.elapsed() < opts.delay {
        return Ok(());
    }
    started.remove(&h);
    match action {
        "install" => {
            // SIMULATED install script; the uninstall script is kept on the host, as upstream.
            let sec = &host.data["spec"]["installationSecret"];
            let (sns, sname) = (
                sec["namespace"].as_str().unwrap_or_default(),
                sec["name"].as_str().unwrap_or_default(),
            );
            let uninstall = secret_value(&agents.admin, sns, sname, "uninstall")
                .await
                .unwrap_or_default();
            api.patch(
                &h,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"uninstallationScript": uninstall}})),
            )
            .await?;
            tracing::info!("simulated BYOH agent {h}: install script done (SIMULATED)");
            set_conditions(
                api,
                host,
                vec![cond("K8sComponentsInstallationSucceeded", true, "", "", "")],
            )
            .await?;
        }
        "bootstrap" => {
            let n = attempts.entry(h.clone()).or_insert(0);
            *n += 1;
            let mut failure = (unit_hash(&format!("{h}/{n}")) < opts.failure_rate).then(|| {
                "install script error: kubeadm join exited with status 1 (simulated)".to_string()
            });
            if failure.is_none() && opts.join {
                let sec = &host.data["spec"]["bootstrapSecret"];
                let joined = async {
                    let value = secret_value(
                        &agents.admin,
                        sec["namespace"].as_str().unwrap_or_default(),
                        sec["name"].as_str().unwrap_or_default(),
                        "value",
                    )
                    .await?;
                    let cfg = join::parse_bootstrap(&value)
                        .ok_or("the bootstrap data has no kubeadm JoinConfiguration")?;
                    join::join(&cfg, &h).await
                }
                .await;
                match joined {
                    Ok(j) => {
                        agents.nodes.insert(h.clone(), (j, None));
                    }
                    Err(e) => {
                        failure = Some(format!("kubeadm join (SIMULATED, real API traffic): {e}"))
                    }
                }
            }
            match failure {
                Some(msg) => {
                    tracing::info!("simulated BYOH agent {h}: bootstrap failed: {msg}");
                    set_conditions(
                        api,
                        host,
                        vec![cond(
                            "K8sNodeBootstrapSucceeded",
                            false,
                            "CloudInitExecutionFailed",
                            "Error",
                            &msg,
                        )],
                    )
                    .await?;
                }
                None => {
                    tracing::info!(
                        "simulated BYOH agent {h}: kubeadm join done, node bootstrapped"
                    );
                    set_conditions(
                        api,
                        host,
                        vec![cond("K8sNodeBootstrapSucceeded", true, "", "", "")],
                    )
                    .await?;
                }
            }
        }
        _ => {
            // hostCleanUp: kubeadm reset and the uninstall script (SIMULATED), then the
            // annotations, labels and references removed as `removeAnnotations` does.
            agents.nodes.remove(&h);
            tracing::info!("simulated BYOH agent {h}: kubeadm reset done, host released");
            let mut labels = serde_json::Map::new();
            labels.insert(CLUSTER_NAME.into(), Value::Null);
            labels.insert(BYOMACHINE_NAME.into(), Value::Null);
            let mut annotations = serde_json::Map::new();
            for k in [UNREGISTERING, ENDPOINT_IP, K8S_VERSION, BUNDLE_REGISTRY] {
                annotations.insert(k.into(), Value::Null);
            }
            api.patch(&h, &PatchParams::default(), &Patch::Merge(json!({
                "metadata": {"labels": labels, "annotations": annotations},
                "spec": {"bootstrapSecret": null, "installationSecret": null, "uninstallationScript": null},
            })))
            .await?;
            let mut conds = vec![cond(
                "K8sNodeBootstrapSucceeded",
                false,
                "K8sNodeAbsent",
                "Info",
                "",
            )];
            if is_true(host, "K8sComponentsInstallationSucceeded") {
                conds.push(cond(
                    "K8sComponentsInstallationSucceeded",
                    false,
                    "K8sNodeAbsent",
                    "Info",
                    "",
                ));
            }
            let mut all: Vec<Value> = host.data["status"]["conditions"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            for c in conds {
                match all.iter_mut().find(|x| x["type"] == c["type"]) {
                    Some(x) => *x = c,
                    None => all.push(c),
                }
            }
            api.patch_status(
                &h,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {
                    "machineRef": null,
                    "conditions": all,
                }})),
            )
            .await?;
        }
    }
    Ok(())
}

/// Runs the BYOH controller's ByoCluster and ByoMachine steps until dropped.
pub async fn run_controller(client: Client, opts: SimOptions) {
    tracing::info!("simulated BYOH controller: watching ByoClusters and ByoMachines");
    loop {
        if let Err(e) = controller_tick(&client).await {
            tracing::warn!("simulated BYOH controller: {e}");
        }
        tokio::time::sleep(opts.tick).await;
    }
}

async fn controller_tick(client: &Client) -> Result<(), kube::Error> {
    let clusters: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ar(GROUP, "v1beta1", "ByoCluster", "byoclusters"),
    );
    let machines: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ar(GROUP, "v1beta1", "ByoMachine", "byomachines"),
    );
    let byo_machines = machines.list(&ListParams::default()).await?.items;
    for c in clusters.list(&ListParams::default()).await?.items {
        if let Err(e) = cluster_step(client, &c, &byo_machines).await {
            tracing::warn!(
                "simulated BYOH controller: ByoCluster {}/{}: {e}",
                namespace(&c),
                name(&c)
            );
        }
    }
    if byo_machines.is_empty() {
        return Ok(());
    }
    let mut hosts = hosts_api(client, None)
        .list(&ListParams::default())
        .await?
        .items;
    hosts.sort_by_key(name);
    for m in &byo_machines {
        if let Err(e) = machine_step(client, m, &mut hosts).await {
            tracing::warn!(
                "simulated BYOH controller: ByoMachine {}/{}: {e}",
                namespace(m),
                name(m)
            );
        }
    }
    Ok(())
}

fn has_finalizer(o: &DynamicObject, f: &str) -> bool {
    o.metadata
        .finalizers
        .as_ref()
        .is_some_and(|v| v.iter().any(|x| x == f))
}

async fn set_finalizers(
    api: &Api<DynamicObject>,
    o: &DynamicObject,
    finalizers: Vec<String>,
) -> Result<(), kube::Error> {
    api.patch(
        &name(o),
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {
            "finalizers": finalizers, "resourceVersion": o.metadata.resource_version,
        }})),
    )
    .await?;
    Ok(())
}

async fn cluster_step(
    client: &Client,
    c: &DynamicObject,
    machines: &[DynamicObject],
) -> Result<(), kube::Error> {
    let api: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &namespace(c),
        &ar(GROUP, "v1beta1", "ByoCluster", "byoclusters"),
    );
    let finals: Vec<String> = c.metadata.finalizers.clone().unwrap_or_default();
    if c.metadata.deletion_timestamp.is_some() {
        let cluster = label(c, CLUSTER_NAME).unwrap_or("");
        let remaining = machines
            .iter()
            .any(|m| namespace(m) == namespace(c) && label(m, CLUSTER_NAME) == Some(cluster));
        if !remaining && has_finalizer(c, CLUSTER_FINALIZER) {
            tracing::info!("simulated BYOH controller: ByoCluster {} released", name(c));
            set_finalizers(
                &api,
                c,
                finals
                    .into_iter()
                    .filter(|f| f != CLUSTER_FINALIZER)
                    .collect(),
            )
            .await?;
        }
        return Ok(());
    }
    if !has_finalizer(c, CLUSTER_FINALIZER) {
        let mut f = finals;
        f.push(CLUSTER_FINALIZER.into());
        set_finalizers(&api, c, f).await?;
    }
    if c.data["status"]["ready"] != json!(true) {
        api.patch_status(
            &name(c),
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {
                "ready": true,
                "conditions": [cond("Ready", true, "", "", "")],
            }})),
        )
        .await?;
        tracing::info!(
            "simulated BYOH controller: ByoCluster {}/{} ready",
            namespace(c),
            name(c)
        );
    }
    Ok(())
}

fn selector_matches(selector: &Value, host: &DynamicObject) -> bool {
    let labels = host.metadata.labels.clone().unwrap_or_default();
    if let Some(ml) = selector["matchLabels"].as_object() {
        for (k, v) in ml {
            if labels.get(k).map(String::as_str) != v.as_str() {
                return false;
            }
        }
    }
    if let Some(exprs) = selector["matchExpressions"].as_array() {
        for e in exprs {
            let key = e["key"].as_str().unwrap_or("");
            let values: Vec<&str> = e["values"]
                .as_array()
                .map(|v| v.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let have = labels.get(key).map(String::as_str);
            let ok = match e["operator"].as_str().unwrap_or("") {
                "In" => have.is_some_and(|h| values.contains(&h)),
                "NotIn" => !have.is_some_and(|h| values.contains(&h)),
                "Exists" => have.is_some(),
                "DoesNotExist" => have.is_none(),
                _ => false,
            };
            if !ok {
                return false;
            }
        }
    }
    true
}

async fn machine_step(
    client: &Client,
    m: &DynamicObject,
    hosts: &mut [DynamicObject],
) -> Result<(), kube::Error> {
    let ns = namespace(m);
    let mname = name(m);
    let api: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &ns,
        &ar(GROUP, "v1beta1", "ByoMachine", "byomachines"),
    );
    let marker = format!("{ns}.{mname}");
    let host_idx = hosts
        .iter()
        .position(|h| label(h, BYOMACHINE_NAME) == Some(marker.as_str()));
    let finals: Vec<String> = m.metadata.finalizers.clone().unwrap_or_default();

    if m.metadata.deletion_timestamp.is_some() {
        match host_idx {
            Some(i) => {
                let h = &hosts[i];
                if annotation(h, UNREGISTERING).is_none() {
                    tracing::info!(
                        "simulated BYOH controller: releasing host {} from {marker}",
                        name(h)
                    );
                    hosts_api(client, Some(&namespace(h)))
                        .patch(
                            &name(h),
                            &PatchParams::default(),
                            &Patch::Merge(
                                json!({"metadata": {"annotations": {UNREGISTERING: ""}}}),
                            ),
                        )
                        .await?;
                }
                // The agent finishes the release; the finalizer stays until then.
            }
            None => {
                if has_finalizer(m, MACHINE_FINALIZER) {
                    let node = m.data["spec"]["providerID"]
                        .as_str()
                        .and_then(|p| p.strip_prefix("byoh://"))
                        .and_then(|p| p.split('/').next())
                        .map(str::to_string);
                    if let Some(node) = node {
                        let _ = Api::<Node>::all(client.clone())
                            .delete(&node, &DeleteParams::default())
                            .await;
                    }
                    set_finalizers(
                        &api,
                        m,
                        finals
                            .into_iter()
                            .filter(|f| f != MACHINE_FINALIZER)
                            .collect(),
                    )
                    .await?;
                    tracing::info!("simulated BYOH controller: ByoMachine {marker} released");
                }
            }
        }
        return Ok(());
    }
    if !has_finalizer(m, MACHINE_FINALIZER) {
        let mut f = finals;
        f.push(MACHINE_FINALIZER.into());
        set_finalizers(&api, m, f).await?;
        return Ok(());
    }
    if m.data["status"]["ready"] == json!(true) {
        return Ok(());
    }
    // The owning CAPI Machine, for its bootstrap data and version.
    let Some(owner) = m
        .metadata
        .owner_references
        .as_ref()
        .and_then(|o| o.iter().find(|r| r.kind == "Machine"))
    else {
        return Ok(());
    };
    let capi_version = owner
        .api_version
        .rsplit('/')
        .next()
        .unwrap_or("v1beta2")
        .to_string();
    let machines: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &ns,
        &ar("cluster.x-k8s.io", &capi_version, "Machine", "machines"),
    );
    let Some(machine) = machines.get_opt(&owner.name).await? else {
        return Ok(());
    };
    let Some(secret) = machine.data["spec"]["bootstrap"]["dataSecretName"].as_str() else {
        set_machine_condition(&api, &mname, "WaitingForBootstrapDataSecret").await?;
        return Ok(());
    };
    let version = machine.data["spec"]["version"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let i = match host_idx {
        Some(i) => i,
        None => {
            let selector = &m.data["spec"]["selector"];
            let Some(i) = hosts.iter().position(|h| {
                label(h, CLUSTER_NAME).is_none()
                    && h.metadata.deletion_timestamp.is_none()
                    && selector_matches(selector, h)
            }) else {
                set_machine_condition(&api, &mname, "BYOHostsUnavailable").await?;
                return Ok(());
            };
            let h = hosts[i].clone();
            let cluster = label(m, CLUSTER_NAME).unwrap_or("").to_string();
            tracing::info!(
                "simulated BYOH controller: attaching host {} to {marker} (cluster {cluster})",
                name(&h)
            );
            let hapi = hosts_api(client, Some(&namespace(&h)));
            let patched = hapi.patch(&name(&h), &PatchParams::default(), &Patch::Merge(json!({
                "metadata": {
                    "labels": {CLUSTER_NAME: cluster, BYOMACHINE_NAME: marker},
                    "annotations": {K8S_VERSION: version, BUNDLE_REGISTRY: "projects.registry.vmware.com/cluster_api_provider_bringyourownhost"},
                    "resourceVersion": h.metadata.resource_version,
                },
                "spec": {"bootstrapSecret": {"name": secret, "namespace": ns}},
            })))
            .await?;
            hapi.patch_status(&name(&h), &PatchParams::default(), &Patch::Merge(json!({"status": {"machineRef": {
                "apiVersion": format!("{GROUP}/v1beta1"), "kind": "ByoMachine", "namespace": ns, "name": mname, "uid": m.metadata.uid,
            }}})))
            .await?;
            hosts[i] = patched;
            api.patch_status(&mname, &PatchParams::default(), &Patch::Merge(json!({"status": {
                "hostinfo": h.data["status"]["hostinfo"],
                "conditions": [cond("BYOHostReady", false, "InstallationSecretNotAvailable", "Info", "")],
            }})))
            .await?;
            return Ok(());
        }
    };
    let h = &hosts[i];
    if condition_status(h, "K8sNodeBootstrapSucceeded").map(|c| c.0) != Some("True".into()) {
        return Ok(());
    }
    // The host joined: register its Node in the workload cluster (the sandbox) with the BYOH
    // provider ID, then mark the ByoMachine ready.
    let host = name(h);
    let suffix: String = format!("{:06}", (unit_hash(&marker) * 1_000_000.0) as u64);
    let provider_id = format!("byoh://{host}/{suffix}");
    let nodes: Api<Node> = Api::all(client.clone());
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": host, "labels": {"kubernetes.io/hostname": host, "testbed.capi-kamaji.io/simulated": "true"}},
        "spec": {"providerID": provider_id},
    }))
    .map_err(kube::Error::SerdeError)?;
    match nodes.get_opt(&host).await? {
        None => {
            nodes.create(&PostParams::default(), &node).await?;
        }
        Some(existing)
            if existing
                .spec
                .as_ref()
                .and_then(|s| s.provider_id.as_deref())
                != Some(provider_id.as_str()) =>
        {
            // A Node left from the host's previous machine: the kubelet re-registers.
            nodes.delete(&host, &DeleteParams::default()).await?;
            return Ok(());
        }
        Some(_) => {}
    }
    let ip = h.data["status"]["network"]
        .as_array()
        .and_then(|n| n.iter().find(|i| i["isDefault"] == json!(true)))
        .and_then(|i| i["ipAddrs"][0].as_str())
        .unwrap_or("")
        .split('/')
        .next()
        .unwrap_or("")
        .to_string();
    nodes
        .patch_status(&host, &PatchParams::default(), &Patch::Merge(json!({"status": {
            "conditions": [
                {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status (simulated)", "lastHeartbeatTime": now(), "lastTransitionTime": now()},
                {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory", "message": "kubelet has sufficient memory available", "lastHeartbeatTime": now(), "lastTransitionTime": now()},
                {"type": "DiskPressure", "status": "False", "reason": "KubeletHasNoDiskPressure", "message": "kubelet has no disk pressure", "lastHeartbeatTime": now(), "lastTransitionTime": now()},
                {"type": "PIDPressure", "status": "False", "reason": "KubeletHasSufficientPID", "message": "kubelet has sufficient PID available", "lastHeartbeatTime": now(), "lastTransitionTime": now()},
            ],
            "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": host}],
            "nodeInfo": {"kubeletVersion": version, "osImage": "Ubuntu 22.04.4 LTS", "architecture": "amd64", "operatingSystem": "linux",
                          "containerRuntimeVersion": "containerd://1.7.27", "kernelVersion": "5.15.0-simulated", "kubeProxyVersion": version,
                          "bootID": "", "machineID": "", "systemUUID": ""},
        }})))
        .await?;
    api.patch(
        &mname,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"providerID": provider_id}})),
    )
    .await?;
    api.patch_status(
        &mname,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {
            "ready": true,
            "conditions": [cond("BYOHostReady", true, "", "", ""), cond("Ready", true, "", "", "")],
        }})),
    )
    .await?;
    tracing::info!("simulated BYOH controller: {marker} ready on host {host} ({provider_id})");
    Ok(())
}

async fn set_machine_condition(
    api: &Api<DynamicObject>,
    m: &str,
    reason: &str,
) -> Result<(), kube::Error> {
    api.patch_status(
        m,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {
            "conditions": [cond("BYOHostReady", false, reason, "Info", "")],
        }})),
    )
    .await?;
    Ok(())
}
