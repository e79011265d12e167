//! SIMULATED BYOH host agents (the host agent of cluster-api-provider-bringyourownhost v0.5.0,
//! its `agent/` directory), next to the real BYOH controller manager (`testbed/src/byoh.rs`):
//! the agents register ByoHosts with realistic host facts as their `byoh:host:<name>` users,
//! bootstrap when the controller attaches a machine (or fail, at a configurable rate, as a
//! broken install script would), join the workload cluster for real when [`SimOptions::join`]
//! is set ([`join`]) and clean up when released.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use kube::Client;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::join::{secret_value, tenant_admin};
use super::{SimOptions, annotation, ar, join, name, now, unit_hash};

use crate::fixtures::{CLUSTER_NAME, INFRA as GROUP};
const BYOMACHINE_NAME: &str = "byoh.infrastructure.cluster.x-k8s.io/byomachine-name";
const UNREGISTERING: &str = "byoh.infrastructure.cluster.x-k8s.io/unregistering";
const ENDPOINT_IP: &str = "byoh.infrastructure.cluster.x-k8s.io/endpointip";
const K8S_VERSION: &str = "byoh.infrastructure.cluster.x-k8s.io/k8sversion";
const BUNDLE_REGISTRY: &str = "byoh.infrastructure.cluster.x-k8s.io/bundle-registry";
/// Fault injection: the hosts powered off ([`power`]), by name, in this process.
static POWERED_OFF: std::sync::Mutex<std::collections::BTreeSet<String>> =
    std::sync::Mutex::new(std::collections::BTreeSet::new());

/// Fault injection for the agents this process runs: powers host `name` off (`on` false) or
/// back on. A host powered off does nothing, its SIMULATED agent and kubelet alike (no
/// reconcile, no Node heartbeat), as a host that lost power or network; powered back on, it
/// carries on with its state intact. (Not an annotation: BYOH's webhook lets only the host's
/// own agent change its ByoHost.)
pub fn power(name: &str, on: bool) {
    let mut off = POWERED_OFF.lock().unwrap_or_else(|e| e.into_inner());
    if on {
        off.remove(name);
    } else {
        off.insert(name.to_string());
    }
}

fn powered_off(name: &str) -> bool {
    POWERED_OFF
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .contains(name)
}

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
    for (kind, plural, obj) in [
        ("ClusterRole", "clusterroles", role),
        ("ClusterRoleBinding", "clusterrolebindings", binding),
    ] {
        let api: Api<DynamicObject> = Api::all_with(
            admin.clone(),
            &ar("rbac.authorization.k8s.io", "v1", kind, plural),
        );
        api.patch("capi-testbed:byoh-host-agent", &pp, &Patch::Apply(&obj))
            .await?;
    }
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

/// Registers the pool's ByoHosts (idempotent), as agents do at start-up.
async fn register(client: &Client, pool: &Pool, agents: &mut Agents) -> Result<(), kube::Error> {
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
    // Registration is idempotent; a real agent retries it until the management cluster takes
    // it (the BYOH webhook may not serve yet, a request may time out under load): one failure
    // used to leave the pool empty for good.
    for attempt in 1..=120 {
        match register(&client, &pool, &mut agents).await {
            Ok(()) => break,
            Err(e) => {
                tracing::warn!("simulated BYOH agents: registering hosts (attempt {attempt}): {e}");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
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
    let all = merged_conditions(host, conds);
    api.patch_status(
        &name(host),
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"conditions": all}})),
    )
    .await?;
    Ok(())
}

/// The host's conditions with `conds` set by type, the others kept.
fn merged_conditions(host: &DynamicObject, conds: Vec<Value>) -> Vec<Value> {
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
    all
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

/// What a host agent does next with an attached host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Action {
    /// Run the installer script from the installation secret.
    Install,
    /// Run the bootstrap data (`kubeadm join`).
    Bootstrap,
    /// Reset the host and drop its claim (the host carries the unregistering annotation).
    Cleanup,
}

impl Action {
    fn as_str(self) -> &'static str {
        match self {
            Action::Install => "install",
            Action::Bootstrap => "bootstrap",
            Action::Cleanup => "cleanup",
        }
    }
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
    if powered_off(&h) {
        return Ok(());
    }
    if annotation(host, "cluster.x-k8s.io/paused").is_some() {
        return Ok(());
    }
    heartbeat(agents, host, &h).await;
    let Some(action) = next_action(api, opts, host).await? else {
        return Ok(());
    };
    if !action_due(started, &h, action, opts) {
        return Ok(());
    }
    match action {
        Action::Install => install(api, agents, host, &h).await,
        Action::Bootstrap => bootstrap(api, opts, agents, attempts, host, &h).await,
        Action::Cleanup => clean_up(api, agents, host, &h).await,
    }
}

/// The kubelet keeps heartbeating (every 10 s) while the host serves a cluster.
async fn heartbeat(agents: &mut Agents, host: &DynamicObject, h: &str) {
    let Some((joined, last)) = agents.nodes.get_mut(h) else {
        return;
    };
    if annotation(host, UNREGISTERING).is_some()
        || last.is_some_and(|t| t.elapsed() < Duration::from_secs(10))
    {
        return;
    }
    let joined = joined.clone();
    *last = Some(Instant::now());
    let cni = match tenant_admin(&agents.admin, host).await {
        Some(c) => join::cni_present(&c).await,
        None => false,
    };
    let version = annotation(host, K8S_VERSION).unwrap_or("").to_string();
    if let Err(e) = join::heartbeat(&joined, h, &version, &host_ip(host), cni).await {
        tracing::warn!("simulated kubelet on {h}: {e}");
    }
}

/// What the agent does with the host now, if anything. A host still waiting for something
/// (a machine, the bootstrap or installation secret) gets the upstream waiting condition
/// instead, written only when it changes so an idle agent does not rewrite its status.
async fn next_action(
    api: &Api<DynamicObject>,
    opts: &SimOptions,
    host: &DynamicObject,
) -> Result<Option<Action>, kube::Error> {
    const BOOTSTRAPPED: &str = "K8sNodeBootstrapSucceeded";
    const INSTALLED: &str = "K8sComponentsInstallationSucceeded";
    if annotation(host, UNREGISTERING).is_some() {
        return Ok(Some(Action::Cleanup));
    }
    if host.data["status"]["machineRef"].get("name").is_none() {
        mark_waiting(api, host, BOOTSTRAPPED, "WaitingForMachineRefToBeAssigned").await?;
        return Ok(None);
    }
    if host.data["spec"]["bootstrapSecret"].get("name").is_none() {
        mark_waiting(api, host, BOOTSTRAPPED, "BootstrapDataSecretUnavailable").await?;
        return Ok(None);
    }
    if is_true(host, BOOTSTRAPPED) {
        return Ok(None);
    }
    if condition_status(host, BOOTSTRAPPED).is_some_and(|c| c.1 == "CloudInitExecutionFailed") {
        // The upstream agent retries on its next reconcile; a host left failed shows the
        // failure (as `kubectl capi hosts` reports it) until someone acts.
        return Ok(None);
    }
    if opts.install && !is_true(host, INSTALLED) {
        if host.data["spec"]["installationSecret"]
            .get("name")
            .is_none()
        {
            mark_waiting(api, host, INSTALLED, "K8sInstallationSecretUnavailable").await?;
            return Ok(None);
        }
        return Ok(Some(Action::Install));
    }
    Ok(Some(Action::Bootstrap))
}

/// Sets condition `type_` to False with `reason` (severity Info) unless it already has it.
async fn mark_waiting(
    api: &Api<DynamicObject>,
    host: &DynamicObject,
    type_: &str,
    reason: &str,
) -> Result<(), kube::Error> {
    if condition_status(host, type_).map(|b| b.1) != Some(reason.into()) {
        set_conditions(api, host, vec![cond(type_, false, reason, "Info", "")]).await?;
    }
    Ok(())
}

/// Whether the SIMULATED `action` has taken its time (`opts.delay`) and is done now. The first
/// call for an action only notes when it started.
fn action_due(
    started: &mut HashMap<String, (String, Instant)>,
    h: &str,
    action: Action,
    opts: &SimOptions,
) -> bool {
    let action = action.as_str();
    let since = match started.get(h) {
        Some((a, t)) if a == action => *t,
        _ => {
            tracing::info!("simulated BYOH agent {h}: {action} started");
            started.insert(h.to_string(), (action.to_string(), Instant::now()));
            return false;
        }
    };
    if since.elapsed() < opts.delay {
        return false;
    }
    started.remove(h);
    true
}

/// The SIMULATED install script; the uninstall script is kept on the host, as upstream.
async fn install(
    api: &Api<DynamicObject>,
    agents: &Agents,
    host: &DynamicObject,
    h: &str,
) -> Result<(), kube::Error> {
    let sec = &host.data["spec"]["installationSecret"];
    let (sns, sname) = (
        sec["namespace"].as_str().unwrap_or_default(),
        sec["name"].as_str().unwrap_or_default(),
    );
    let uninstall = secret_value(&agents.admin, sns, sname, "uninstall")
        .await
        .unwrap_or_default();
    api.patch(
        h,
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
    .await
}

/// The SIMULATED bootstrap: fails at `opts.failure_rate` (reproducibly per host and attempt),
/// otherwise joins the workload cluster for real when `opts.join`, and reports the outcome.
async fn bootstrap(
    api: &Api<DynamicObject>,
    opts: &SimOptions,
    agents: &mut Agents,
    attempts: &mut HashMap<String, u32>,
    host: &DynamicObject,
    h: &str,
) -> Result<(), kube::Error> {
    let n = attempts.entry(h.to_string()).or_insert(0);
    *n += 1;
    let mut failure = (unit_hash(&format!("{h}/{n}")) < opts.failure_rate)
        .then(|| "install script error: kubeadm join exited with status 1 (simulated)".to_string());
    if failure.is_none() && opts.join {
        match join_host(&agents.admin, host, h).await {
            Ok(j) => {
                agents.nodes.insert(h.to_string(), (j, None));
            }
            Err(e) => failure = Some(format!("kubeadm join (SIMULATED, real API traffic): {e}")),
        }
    }
    let outcome = match failure {
        Some(msg) => {
            tracing::info!("simulated BYOH agent {h}: bootstrap failed: {msg}");
            cond(
                "K8sNodeBootstrapSucceeded",
                false,
                "CloudInitExecutionFailed",
                "Error",
                &msg,
            )
        }
        None => {
            tracing::info!("simulated BYOH agent {h}: kubeadm join done, node bootstrapped");
            cond("K8sNodeBootstrapSucceeded", true, "", "", "")
        }
    };
    set_conditions(api, host, vec![outcome]).await
}

/// `kubeadm join` with the host's bootstrap data ([`join`]).
async fn join_host(admin: &Client, host: &DynamicObject, h: &str) -> Result<join::Joined, String> {
    let sec = &host.data["spec"]["bootstrapSecret"];
    let value = secret_value(
        admin,
        sec["namespace"].as_str().unwrap_or_default(),
        sec["name"].as_str().unwrap_or_default(),
        "value",
    )
    .await?;
    let cfg = join::parse_bootstrap(&value)
        .ok_or("the bootstrap data has no kubeadm JoinConfiguration")?;
    join::join(&cfg, h).await
}

/// `hostCleanUp`: kubeadm reset and the uninstall script (SIMULATED), then the annotations,
/// labels and references removed as `removeAnnotations` does, and the conditions reset.
async fn clean_up(
    api: &Api<DynamicObject>,
    agents: &mut Agents,
    host: &DynamicObject,
    h: &str,
) -> Result<(), kube::Error> {
    agents.nodes.remove(h);
    tracing::info!("simulated BYOH agent {h}: kubeadm reset done, host released");
    let mut labels = serde_json::Map::new();
    labels.insert(CLUSTER_NAME.into(), Value::Null);
    labels.insert(BYOMACHINE_NAME.into(), Value::Null);
    let mut annotations = serde_json::Map::new();
    for k in [UNREGISTERING, ENDPOINT_IP, K8S_VERSION, BUNDLE_REGISTRY] {
        annotations.insert(k.into(), Value::Null);
    }
    api.patch(h, &PatchParams::default(), &Patch::Merge(json!({
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
    // One patch: the machine reference goes with the conditions.
    api.patch_status(
        h,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {
            "machineRef": null,
            "conditions": merged_conditions(host, conds),
        }})),
    )
    .await?;
    Ok(())
}
