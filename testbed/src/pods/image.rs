//! SIMULATED kubelet for pods whose images come from the testbed's local OCI registry.
//!
//! There is no container runtime here. This stands in for the kubelet (and its CRI runtime) of
//! one node, `testbed-image-node`, for exactly the pods whose every container image is in the
//! testbed's registry (`crane registry serve`, go-containerregistry): the reconciler's
//! Deployment as `kubectl kamaji install --image` or `clusterctl init` writes it. What it does,
//! as a kubelet does (kubernetes `pkg/kubelet/kuberuntime`, v1.35):
//! - binds the pending pod to its node (there is no scheduler here);
//! - pulls each image by its reference with `crane` and unpacks the flattened file system
//!   (`crane export`) into the pod's folder; `imageID` is the pulled digest;
//! - the command is the container's `command`, else the image's `Entrypoint`; the arguments
//!   the container's `args`, else (without `command`) the image's `Cmd`; the environment the
//!   image's `Env`, then the container's `env` (literal values and `fieldRef`s to the pod's
//!   name, namespace, uid, node and service account), then `KUBERNETES_SERVICE_HOST`/`PORT`;
//! - the user is the container's `runAsUser`/`runAsGroup`, else the pod's, else the image's
//!   `User`; `runAsNonRoot` with uid 0 is refused (`CreateContainerConfigError`);
//! - the ServiceAccount's token, from the TokenRequest API and bound to the pod, with the API
//!   server's CA and the namespace, is mounted at `/var/run/secrets/kubernetes.io/serviceaccount`
//!   (unless `automountServiceAccountToken` is false);
//! - `readOnlyRootFilesystem` makes the root file system read-only;
//! - each container runs in a mount namespace of its own (`unshare`), `chroot`ed into its
//!   image, in the pod's own network namespace ([`NetSandbox`]: its loopback, where the API
//!   server's port is forwarded in, so `KUBERNETES_SERVICE_HOST` is 127.0.0.1), whose address
//!   the other pods reach through the SIMULATED pod network ([`super::network`]) and whose
//!   `/etc/hosts` names the pods of headless Services (the SIMULATED cluster DNS,
//!   [`super::names`]);
//! - `persistentVolumeClaim` volumes: a pod is bound to the node only once its claims are
//!   Bound, and the bound PersistentVolume's directory is mounted ([`super::claims`]);
//! - HTTP readiness and liveness probes (`httpGet`, by number or named port), the pod's Ready
//!   condition from readiness, and a container restarted after `failureThreshold` liveness
//!   failures or when it exits, with a capped back-off;
//! - each container's stdout and stderr in its log file in the CRI log format, as a runtime
//!   writes it ([`Proc::spawn_cri`]), the last terminated instance's kept beside it, served as
//!   `pods/log` through the API server by the kubelet API ([`super::logs`]), whose port the Node
//!   registers (`status.daemonEndpoints.kubeletEndpoint.Port`).
//!
//! What differs from a kubelet, and why: no cgroups (resource limits are not enforced), no PID or
//! IPC namespace, no `/proc` or `/dev` in the container, the token is not rotated (pods here live
//! minutes, tokens an hour), images are unpacked whole for each pod (no layer store), and a
//! deleted pod's grace period is capped at 30 s (SIGTERM, then SIGKILL) while its object is
//! removed at once (the directory goes when the processes have been told to stop).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Container as PodContainer, Pod, ServiceAccount};
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::logs::{LogIndex, PodLogs};
use super::{restart_backoff, terminated};
use crate::Proc;
use crate::netns::{NetSandbox, PodLink};

mod probe;
mod registry;
mod spec;

use probe::{Probe, due, probe_ok};
pub(crate) use registry::start_registry;
use registry::{pull, repository};
use spec::{expand, field, mounts, program_path, security, words};

/// The node the image pods run on.
pub const NODE: &str = "testbed-image-node";

/// Where a kubelet mounts a pod's ServiceAccount token.
pub const TOKEN_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

#[derive(Clone)]
pub struct Config {
    pub dir: PathBuf,
    /// `127.0.0.1:PORT`: images under this host are this kubelet's.
    pub registry: String,
    pub crane: PathBuf,
    pub testbed_dir: PathBuf,
    pub api_port: u16,
    /// The API server's serving CA (the pod's `ca.crt`).
    pub ca: PathBuf,
    pub tick: Duration,
    /// Where every pod's network namespace is registered, so that the tenant plumbing (when
    /// Kamaji runs) forwards tenant ports into it too.
    pub sandboxes: Arc<Mutex<Vec<Arc<NetSandbox>>>>,
    /// Host loopback ports forwarded into every pod besides the API server's (the datastore
    /// etcds, which Kamaji's DataStores name as `127.0.0.1:PORT`).
    pub forwards: Vec<u16>,
    /// The SIMULATED pod network's router, which links every pod to every other.
    pub(crate) router: Arc<super::network::Router>,
    /// The SIMULATED cluster DNS's hosts file for processes of the host's network
    /// ([`super::names::host_file`]), kept current with the pods' names.
    pub hosts: PathBuf,
}

struct Container {
    name: String,
    image: String,
    image_id: String,
    /// `env -i K=V… chroot --userspec=U:G ROOT PROGRAM ARGS…` run by the mount script.
    argv: Vec<String>,
    root: PathBuf,
    read_only: bool,
    unavailable: Option<(String, String)>,
    readiness: Option<Probe>,
    liveness: Option<Probe>,
    proc: Option<Proc>,
    started_at: String,
    restarts: i32,
    next_start: Instant,
    last_exit: Option<Value>,
    ready: bool,
    log: PathBuf,
    /// The container's volume mounts: the volume's folder (or a `subPath` in it), where it goes
    /// in the image, and whether read-only.
    mounts: Vec<(PathBuf, String, bool)>,
}

struct RunningPod {
    /// Its namespace and name.
    key: (String, String),
    dir: PathBuf,
    sandbox: Arc<NetSandbox>,
    /// The pod's own address (its `eth0`), which its EndpointSlices carry.
    link: PodLink,
    /// The names a kubelet gives the pod in its own hosts file ([`super::names::own_names`]).
    names: Vec<String>,
    sa_dir: Option<PathBuf>,
    containers: Vec<Container>,
    started: String,
    reported: Value,
}

/// Runs until the future is dropped, with its kubelet API ([`super::logs`]).
pub async fn run(client: Client, cfg: Config) {
    let mut running: HashMap<String, RunningPod> = HashMap::new();
    tracing::info!(
        "SIMULATED kubelet: running pods whose images are in the registry {}",
        cfg.registry
    );
    let index = LogIndex::default();
    let (api, port) = match tokio::net::TcpListener::bind("127.0.0.1:0").await {
        Ok(l) => {
            let port = l.local_addr().map(|a| a.port()).unwrap_or_default();
            (Some(super::logs::serve(l, index.clone())), port)
        }
        Err(e) => {
            tracing::warn!("SIMULATED kubelet ({NODE}): no port for its API (pods/log): {e}");
            (None, 0)
        }
    };
    let pods = async {
        loop {
            if let Err(e) = register_node(&client, port).await {
                tracing::warn!("SIMULATED kubelet ({NODE}): registering the Node: {e}");
            }
            if let Err(e) = tick(&client, &cfg, &mut running).await {
                tracing::warn!("SIMULATED kubelet ({NODE}): {e}");
            }
            index.publish(published(&running));
            tokio::time::sleep(cfg.tick).await;
        }
    };
    match api {
        Some(api) => {
            tokio::join!(api, pods);
        }
        None => pods.await,
    }
}

/// What the kubelet API serves of the pods running: each container's log folder and whether it
/// runs.
fn published(running: &HashMap<String, RunningPod>) -> HashMap<(String, String), PodLogs> {
    running
        .values()
        .map(|p| {
            let containers = p
                .containers
                .iter()
                .map(|c| (c.name.clone(), c.proc.is_some()))
                .collect();
            (
                p.key.clone(),
                PodLogs {
                    dir: p.dir.clone(),
                    containers,
                },
            )
        })
        .collect()
}

/// Registers the node as a kubelet does at start-up, Ready, and keeps it so (created once, then
/// its status merged only when the Ready condition or the kubelet API's `port` is missing). The
/// EndpointSlice controller leaves out the pods of a node that does not exist (`endpointslice`
/// `reconciler.go`), and webhook Services reach their pods through those slices; the API
/// server's `pods/log` reaches the kubelet API at the Node's InternalIP and
/// `status.daemonEndpoints.kubeletEndpoint.Port` (0: none).
async fn register_node(client: &Client, port: u16) -> Result<(), String> {
    use k8s_openapi::api::core::v1::Node;
    let nodes: Api<Node> = Api::all(client.clone());
    let node = match nodes.get_opt(NODE).await.map_err(|e| e.to_string())? {
        Some(n) => n,
        None => {
            let n: Node = serde_json::from_value(json!({
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": NODE, "labels": {"kubernetes.io/hostname": NODE,
                    "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}}
            }))
            .map_err(|e| e.to_string())?;
            nodes
                .create(&PostParams::default(), &n)
                .await
                .map_err(|e| e.to_string())?
        }
    };
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    let registered_port = node
        .status
        .as_ref()
        .and_then(|s| s.daemon_endpoints.as_ref())
        .and_then(|d| d.kubelet_endpoint.as_ref())
        .map(|e| e.port);
    if !ready || (port != 0 && registered_port != Some(i32::from(port))) {
        let now = crate::meta::now();
        let status = json!({"status": {
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                "message": "SIMULATED kubelet is posting ready status",
                "lastHeartbeatTime": now, "lastTransitionTime": now}],
            "addresses": [{"type": "InternalIP", "address": "127.0.0.1"},
                          {"type": "Hostname", "address": NODE}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": port}},
            "nodeInfo": {"kubeletVersion": "v1.35.4", "containerRuntimeVersion": "simulated://0",
                "operatingSystem": "linux", "architecture": "amd64", "kernelVersion": "",
                "osImage": "", "kubeProxyVersion": "", "machineID": "", "systemUUID": "",
                "bootID": ""}
        }});
        nodes
            .patch_status(NODE, &PatchParams::default(), &Patch::Merge(status))
            .await
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

fn ours(pod: &Pod, registry: &str) -> bool {
    let prefix = format!("{registry}/");
    pod.spec.as_ref().is_some_and(|s| {
        !s.containers.is_empty()
            && s.containers
                .iter()
                .all(|c| c.image.as_deref().is_some_and(|i| i.starts_with(&prefix)))
    })
}

async fn tick(
    client: &Client,
    cfg: &Config,
    running: &mut HashMap<String, RunningPod>,
) -> Result<(), String> {
    let all: Api<Pod> = Api::all(client.clone());
    // The scheduler's part: bind pending pods of ours to the node.
    let pending = all
        .list(&ListParams::default().fields("spec.nodeName="))
        .await
        .map_err(|e| format!("listing pending pods: {e}"))?;
    for pod in pending.items.iter().filter(|p| ours(p, &cfg.registry)) {
        if super::claims::unschedulable(client, pod).await {
            continue;
        }
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        let name = pod.metadata.name.clone().unwrap_or_default();
        let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
                             "target": {"apiVersion": "v1", "kind": "Node", "name": NODE}});
        let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
        if let Err(e) = pods
            .create_subresource::<Value, Value>("binding", &name, &PostParams::default(), &binding)
            .await
        {
            tracing::warn!("SIMULATED kubelet: binding {ns}/{name}: {e}");
        }
    }
    let list = all
        .list(&ListParams::default().fields(&format!("spec.nodeName={NODE}")))
        .await
        .map_err(|e| format!("listing pods: {e}"))?;
    let mut seen = Vec::new();
    for pod in &list.items {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        seen.push(uid.clone());
        if let Err(e) = step(client, cfg, running, &uid, pod).await {
            tracing::warn!(
                "SIMULATED kubelet: pod {}/{}: {e}",
                pod.metadata.namespace.as_deref().unwrap_or_default(),
                pod.metadata.name.as_deref().unwrap_or_default()
            );
        }
    }
    let gone: Vec<String> = running
        .keys()
        .filter(|u| !seen.contains(u))
        .cloned()
        .collect();
    for uid in gone {
        if let Some(p) = running.remove(&uid) {
            stop(cfg, p, Duration::ZERO);
        }
    }
    let names: Vec<super::names::PodNames> = running
        .values()
        .map(|p| super::names::PodNames {
            sandbox: &p.sandbox,
            ip: p.link.pod_ip,
            own: &p.names,
        })
        .collect();
    super::names::refresh(client, &cfg.hosts, &names).await;
    Ok(())
}

/// Stops the pod's containers as a kubelet does: SIGTERM, then SIGKILL after the pod's grace
/// period (at most 30 s here).
fn stop(cfg: &Config, p: RunningPod, grace: Duration) {
    for mut c in p.containers {
        if let Some(proc) = c.proc.take() {
            proc.terminate(grace);
        }
    }
    if let Ok(mut v) = cfg.sandboxes.lock() {
        v.retain(|s| !Arc::ptr_eq(s, &p.sandbox));
    }
    let _ = std::fs::remove_dir_all(&p.dir);
}

async fn step(
    client: &Client,
    cfg: &Config,
    running: &mut HashMap<String, RunningPod>,
    uid: &str,
    pod: &Pod,
) -> Result<(), String> {
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let name = pod.metadata.name.clone().unwrap_or_default();
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    if pod.metadata.deletion_timestamp.is_some() {
        let grace = pod
            .metadata
            .deletion_grace_period_seconds
            .unwrap_or(30)
            .clamp(0, 30);
        if let Some(p) = running.remove(uid) {
            stop(cfg, p, Duration::from_secs(grace as u64));
        }
        let dp = DeleteParams {
            grace_period_seconds: Some(0),
            ..DeleteParams::default()
        };
        let _ = pods.delete(&name, &dp).await;
        return Ok(());
    }
    if !running.contains_key(uid) {
        let p = prepare(client, cfg, pod).await?;
        tracing::info!("SIMULATED kubelet: pod {ns}/{name} admitted on {NODE}");
        running.insert(uid.to_string(), p);
    }
    let Some(p) = running.get_mut(uid) else {
        return Ok(());
    };
    supervise(p).await;
    let status = status_of(p);
    if status != p.reported {
        pods.patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": status })),
        )
        .await
        .map_err(|e| format!("status: {e}"))?;
        p.reported = status;
    }
    Ok(())
}

/// The pod's network namespace, its ServiceAccount token, and each container's image.
async fn prepare(client: &Client, cfg: &Config, pod: &Pod) -> Result<RunningPod, String> {
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let name = pod.metadata.name.clone().unwrap_or_default();
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let dir = cfg
        .dir
        .join(format!("{ns}_{name}_{}", &uid[..uid.len().min(8)]));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let spec = pod.spec.clone().unwrap_or_default();
    // The volumes first: a Secret not there yet (cert-manager has not issued a webhook's
    // certificate) keeps the pod waiting, as a kubelet's FailedMount does, and costs nothing.
    let vol_root = dir.join("volumes");
    std::fs::create_dir_all(&vol_root).map_err(|e| format!("{}: {e}", vol_root.display()))?;
    if let Err(e) = super::volumes::write_all(
        client,
        &ns,
        &vol_root,
        spec.volumes.clone().unwrap_or_default(),
    )
    .await
    {
        let _ = std::fs::remove_dir_all(&dir);
        return Err(format!("MountVolume: {e}"));
    }
    let sandbox = NetSandbox::start(&dir, "pod").map_err(|e| e.to_string())?;
    for port in std::iter::once(cfg.api_port).chain(cfg.forwards.iter().copied()) {
        sandbox.forward(port).map_err(|e| e.to_string())?;
    }
    let link = sandbox.attach_link().map_err(|e| e.to_string())?;
    cfg.router
        .attach(&sandbox, link.pod_ip)
        .map_err(|e| e.to_string())?;
    let names = super::names::own_names(pod);
    super::names::write_own(&sandbox, link.pod_ip, &names).map_err(|e| e.to_string())?;
    let sandbox = Arc::new(sandbox);
    if let Ok(mut v) = cfg.sandboxes.lock() {
        v.push(sandbox.clone());
    }
    // A pod naming no ServiceAccount runs as its namespace's `default`. On a cluster the
    // ServiceAccount admission plugin writes that name into the pod; this API server runs
    // without the plugin (`start_apiserver`), and TokenRequest refuses to bind a token of
    // `default` to a pod that does not name it, so such a pod's token is not bound to the pod.
    let named = spec.service_account_name.as_deref();
    let sa = named.unwrap_or("default");
    let bound = named.map(|_| (name.as_str(), uid.as_str()));
    let sa_dir = if spec.automount_service_account_token == Some(false) {
        None
    } else {
        Some(token_dir(client, cfg, &dir, &ns, bound, sa).await?)
    };
    let mut containers = Vec::new();
    for c in &spec.containers {
        containers.push(container(cfg, &dir, &vol_root, pod, &link, c, &sandbox)?);
    }
    Ok(RunningPod {
        key: (ns, name),
        dir,
        sandbox,
        link,
        names,
        sa_dir,
        containers,
        started: crate::meta::now(),
        reported: Value::Null,
    })
}

/// The token (TokenRequest, bound to the pod `bound` names, by name and uid), the API server's
/// CA and the namespace, as a kubelet's projected ServiceAccount volume holds them.
async fn token_dir(
    client: &Client,
    cfg: &Config,
    dir: &Path,
    ns: &str,
    bound: Option<(&str, &str)>,
    sa: &str,
) -> Result<PathBuf, String> {
    let api: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
    let mut req = json!({
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "spec": {"expirationSeconds": 3600}
    });
    if let Some((pod, uid)) = bound {
        req["spec"]["boundObjectRef"] =
            json!({"apiVersion": "v1", "kind": "Pod", "name": pod, "uid": uid});
    }
    let resp: Value = api
        .create_subresource("token", sa, &PostParams::default(), &req)
        .await
        .map_err(|e| format!("TokenRequest for ServiceAccount {ns}/{sa}: {e}"))?;
    let token = resp["status"]["token"]
        .as_str()
        .ok_or("the TokenRequest answered without a token")?;
    let out = dir.join("serviceaccount");
    std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    let ca = std::fs::read(&cfg.ca).map_err(|e| format!("{}: {e}", cfg.ca.display()))?;
    for (f, data) in [
        ("token", token.as_bytes().to_vec()),
        ("ca.crt", ca),
        ("namespace", ns.as_bytes().to_vec()),
    ] {
        let p = out.join(f);
        std::fs::write(&p, data).map_err(|e| format!("{}: {e}", p.display()))?;
    }
    Ok(out)
}

fn container(
    cfg: &Config,
    dir: &Path,
    vol_root: &Path,
    pod: &Pod,
    link: &PodLink,
    c: &PodContainer,
    sandbox: &NetSandbox,
) -> Result<Container, String> {
    let image = c.image.clone().unwrap_or_default();
    let root = dir.join(format!("rootfs-{}", c.name));
    let mut out = Container {
        name: c.name.clone(),
        image: image.clone(),
        image_id: String::new(),
        argv: Vec::new(),
        root: root.clone(),
        read_only: false,
        unavailable: None,
        readiness: None,
        liveness: None,
        proc: None,
        started_at: String::new(),
        restarts: 0,
        next_start: Instant::now(),
        last_exit: None,
        ready: false,
        log: super::logs::log_path(dir, &c.name),
        mounts: mounts(vol_root, c)?,
    };
    let (config, digest) = match pull(cfg, &image, &root) {
        Ok(x) => x,
        Err(e) => {
            out.unavailable = Some((
                "ErrImagePull".into(),
                format!("SIMULATED kubelet: pulling {image}: {e}"),
            ));
            return Ok(out);
        }
    };
    out.image_id = format!("{}@{digest}", repository(&image));
    let ic = &config["config"];
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s.as_str().map(String::from))
            .collect()
    };
    let words = words(
        c.command.as_deref(),
        c.args.as_deref(),
        &strings(&ic["Entrypoint"]),
        &strings(&ic["Cmd"]),
    );
    if words.is_empty() {
        out.unavailable = Some((
            "CreateContainerConfigError".into(),
            "no command specified".into(),
        ));
        return Ok(out);
    }
    let (user, group, non_root, read_only) = security(pod, c);
    let image_user = ic["User"].as_str().unwrap_or_default();
    let (iu, ig) = image_user.split_once(':').unwrap_or((image_user, ""));
    let uid = user.or_else(|| iu.parse().ok()).unwrap_or(0);
    let gid = group.or_else(|| ig.parse().ok()).unwrap_or(0);
    if non_root && uid == 0 {
        out.unavailable = Some((
            "CreateContainerConfigError".into(),
            "container has runAsNonRoot and image will run as root".into(),
        ));
        return Ok(out);
    }
    out.read_only = read_only;
    let mut env: Vec<String> = strings(&ic["Env"]);
    for e in c.env.clone().unwrap_or_default() {
        let value = match (&e.value, &e.value_from) {
            (Some(v), _) => Some(v.clone()),
            (None, Some(from)) => from
                .field_ref
                .as_ref()
                .and_then(|f| field(pod, link, &f.field_path)),
            _ => Some(String::new()),
        };
        if let Some(v) = value {
            env.retain(|x| !x.starts_with(&format!("{}=", e.name)));
            env.push(format!("{}={v}", e.name));
        }
    }
    env.push("KUBERNETES_SERVICE_HOST=127.0.0.1".into());
    env.push(format!("KUBERNETES_SERVICE_PORT={}", cfg.api_port));
    env.push(format!(
        "HOSTNAME={}",
        pod.metadata.name.clone().unwrap_or_default()
    ));
    let mut argv = vec!["env".to_string(), "-i".into()];
    argv.extend(env.iter().cloned());
    argv.extend([
        program_path("chroot"),
        format!("--userspec={uid}:{gid}"),
        root.display().to_string(),
    ]);
    // The container's `$(VAR)` references, from its own environment, as a kubelet expands
    // them in `command` and `args` (kubernetes `third_party/forked/golang/expansion`).
    let vars: HashMap<&str, &str> = env.iter().filter_map(|kv| kv.split_once('=')).collect();
    argv.extend(words.iter().map(|w| expand(w, &vars)));
    out.argv = argv;
    let ports: Vec<(String, i32)> = c
        .ports
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|p| (p.name.unwrap_or_default(), p.container_port))
        .collect();
    out.readiness = probe::of(c.readiness_probe.as_ref(), &ports, sandbox)?;
    out.liveness = probe::of(c.liveness_probe.as_ref(), &ports, sandbox)?;
    Ok(out)
}

/// The shell that makes a container's mount namespace: its image as `/`, the token at
/// [`TOKEN_DIR`], the pod's hosts file at `/etc/hosts`, each volume mount (`N` triples of source,
/// path, read-only), the root read-only
/// if asked; then runs `env -i … chroot …` and waits for it (it is the first process of the
/// container's PID namespace, and exits with the container's status).
const MOUNT_SCRIPT: &str = r#"set -e
root=$1; sa=$2; ro=$3; hosts=$4; n=$5; shift 5
mount --bind "$root" "$root"
mkdir -p "$root/etc"; [ -e "$root/etc/hosts" ] || : > "$root/etc/hosts"
mount --bind "$hosts" "$root/etc/hosts"
if [ -n "$sa" ]; then
  mkdir -p "$root/var/run/secrets/kubernetes.io/serviceaccount"
  mount --bind -o ro "$sa" "$root/var/run/secrets/kubernetes.io/serviceaccount"
fi
while [ "$n" -gt 0 ]; do
  src=$1; dst=$root$2; mro=$3; shift 3; n=$((n - 1))
  if [ -d "$src" ] || [ ! -e "$src" ]; then mkdir -p "$src" "$dst"
  else mkdir -p "$(dirname "$dst")"; [ -e "$dst" ] || : > "$dst"; fi
  mount --bind "$src" "$dst"
  if [ "$mro" = 1 ]; then mount -o remount,bind,ro "$dst"; fi
done
if [ "$ro" = 1 ]; then mount -o remount,bind,ro "$root"; fi
"$@""#;

async fn supervise(p: &mut RunningPod) {
    let holder = p.sandbox.enter_args();
    for c in p.containers.iter_mut() {
        if c.unavailable.is_some() {
            continue;
        }
        if let Some(proc) = c.proc.as_mut()
            && let Some(status) = proc.exited()
        {
            let code = status.code().unwrap_or(137);
            c.last_exit = Some(terminated(code, &c.started_at));
            tracing::warn!(
                "SIMULATED kubelet: container {} exited ({status}); see {}",
                c.name,
                c.log.display()
            );
            c.proc = None;
            c.ready = false;
            c.restarts = c.restarts.saturating_add(1);
            c.next_start = Instant::now() + restart_backoff(c.restarts);
            for pr in [c.readiness.as_mut(), c.liveness.as_mut()]
                .into_iter()
                .flatten()
            {
                pr.failures = 0;
                pr.since = None;
                pr.last = None;
            }
        }
        if c.proc.is_none() && Instant::now() >= c.next_start {
            if c.log.exists()
                && let Some(dir) = c.log.parent()
            {
                let _ = std::fs::rename(&c.log, super::logs::previous_log_path(dir, &c.name));
            }
            // nsenter (the pod's network) → unshare (a mount namespace and a PID namespace of
            // its own) → sh (mounts; the PID namespace's first process, which waits) → env -i
            // (the container's environment only) → chroot (the image, as its user).
            // chroot's change of user clears the parent-death signal the testbed gives every
            // child, so a test binary killed by a signal used to leave the container running.
            // Now the chain dies with it: the testbed's death kills unshare, `--kill-child` kills
            // sh, and the end of a PID namespace's first process kills everything in it.
            let mut args = holder.clone();
            args.extend([
                "unshare".into(),
                "--mount".into(),
                "--propagation".into(),
                "private".into(),
                "--pid".into(),
                "--fork".into(),
                "--kill-child".into(),
                "sh".into(),
                "-c".into(),
                MOUNT_SCRIPT.into(),
                "sh".into(),
                c.root.display().to_string(),
                p.sa_dir
                    .as_ref()
                    .map(|d| d.display().to_string())
                    .unwrap_or_default(),
                if c.read_only { "1" } else { "0" }.into(),
                p.sandbox.hosts_file().display().to_string(),
                c.mounts.len().to_string(),
            ]);
            for (src, dst, ro) in &c.mounts {
                args.extend([
                    src.display().to_string(),
                    dst.clone(),
                    if *ro { "1" } else { "0" }.into(),
                ]);
            }
            args.extend(c.argv.iter().cloned());
            match Proc::spawn_cri(&c.name, Path::new("nsenter"), &args, &c.log) {
                Ok(proc) => {
                    tracing::info!("SIMULATED kubelet: started {} ({})", c.name, c.image);
                    c.proc = Some(proc);
                    c.started_at = crate::meta::now();
                }
                Err(e) => c.unavailable = Some(("RunContainerError".into(), e.to_string())),
            }
        }
        if c.proc.is_none() {
            continue;
        }
        if let Some(pr) = c.liveness.as_mut()
            && due(pr, Instant::now())
        {
            if probe_ok(pr).await {
                pr.failures = 0;
            } else {
                pr.failures += 1;
                if pr.failures >= pr.failure_threshold {
                    tracing::warn!(
                        "SIMULATED kubelet: {} failed its liveness probe {} times; restarting",
                        c.name,
                        pr.failures
                    );
                    if let Some(proc) = c.proc.as_mut() {
                        proc.kill();
                    }
                }
            }
        }
        c.ready = match c.readiness.as_mut() {
            Some(pr) => probe_ok(pr).await,
            None => true,
        };
    }
}

fn status_of(p: &RunningPod) -> Value {
    let all_ready = p.containers.iter().all(|c| c.ready);
    let statuses: Vec<Value> = p
        .containers
        .iter()
        .map(|c| {
            let state = if let Some((reason, message)) = &c.unavailable {
                json!({"waiting": {"reason": reason, "message": message}})
            } else if c.proc.is_some() {
                json!({"running": {"startedAt": c.started_at}})
            } else {
                json!({"waiting": {"reason": "CrashLoopBackOff",
                    "message": format!("SIMULATED kubelet: back-off restarting {}; see {}", c.name, c.log.display())}})
            };
            let mut s = json!({"name": c.name, "image": c.image, "imageID": c.image_id, "ready": c.ready,
                "started": c.proc.is_some(), "restartCount": c.restarts, "state": state});
            if let Some(last) = &c.last_exit {
                s["lastState"] = last.clone();
            }
            s
        })
        .collect();
    let mut status = super::pod_status("Running", &p.started, all_ready, statuses);
    let ip = p.link.pod_ip.to_string();
    status["podIP"] = json!(ip);
    status["podIPs"] = json!([{ "ip": ip }]);
    status
}
