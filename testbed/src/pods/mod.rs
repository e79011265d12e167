//! SIMULATED kubelet, for Kamaji's tenant control-plane pods and Kamaji's DataStore migration
//! Job pods only.
//!
//! There is no container runtime here, so this stands in for the kubelet of the node that would
//! run a TenantControlPlane's Deployment: it binds each pod of a Kamaji Deployment (label
//! `kamaji.clastix.io/name`) to a node name, writes the pod's Secret, ConfigMap, projected and
//! emptyDir volumes into a private directory, starts the upstream binary each container names
//! (kube-apiserver, kube-controller-manager, kube-scheduler, built from the pinned Kubernetes
//! modules) with the container's command and arguments (mount paths remapped to that
//! directory), restarts it when it exits (with a capped back-off, as a kubelet does), and reports
//! the pod's status from the processes' real health. The Deployment and ReplicaSet controllers
//! of the management cluster's kube-controller-manager do the rest, exactly as on a real node.
//!
//! What differs from a kubelet, and why:
//! - The image is not pulled: its tag selects a Kubernetes release the testbed has built. A
//!   version the testbed cannot run leaves the container waiting with reason `ErrImagePull` and
//!   a message naming the versions it has; nothing pretends to run it.
//! - Pods share the host's network namespace. On a node each pod has its own, so two pods of one
//!   tenant (replicas, or the old and new pod of Kamaji's blue/green rollout) can both listen on
//!   the tenant's API server port. Here each kube-apiserver listens on a port of its own, and the
//!   tenant's port is served by a SIMULATED Service: a TCP proxy that forwards to the API servers
//!   of Ready pods only, as kube-proxy does to a Service's ready endpoints (so a new pod gets no
//!   traffic before its `/readyz` passes, and a terminating one none after). kube-controller-
//!   manager and kube-scheduler likewise get a port of their own on 127.0.0.1 instead of 10257
//!   and 10259.
//! - Each kube-apiserver whose advertise address is loopback (the tenant's Service address
//!   here) runs with `--endpoint-reconciler-type=none`: no Endpoints may hold a loopback
//!   address, and kube-apiserver v1.37 refuses to start with one.
//! - Volumes are written once when the pod starts (Kamaji rolls its Deployment when a secret it
//!   mounts changes, so a new pod sees new content).
//! - With [`Config::hosts`] (a testbed with image pods), each process runs in a private mount
//!   namespace whose `/etc/hosts` is the SIMULATED cluster DNS's file ([`names`]), so a tenant's
//!   kube-apiserver reaches a DataStore's etcd members by their StatefulSet names
//!   (`<pod>.<service>.<namespace>.svc.cluster.local`), at the members' own addresses, which the
//!   host's network reaches directly; on a node, the pod's DNS policy would resolve them.
//! - Kamaji's migration Job (`internal/resources/datastore/datastore_migrate.go`, Kamaji
//!   v1.0.0: container command `/kamaji`, args `migrate --tenant-control-plane=...
//!   --target-datastore=...`, restart policy OnFailure) runs the Kamaji binary the testbed built
//!   for its manager, to completion, restarted on failure with the same back-off. Its image is
//!   not pulled (the binary is the same release). Its credentials are the testbed's kubeconfig,
//!   given as `KUBECONFIG`, instead of the `kamaji` ServiceAccount's token mounted at the
//!   standard path: the testbed runs without the ServiceAccount admission plugin and token
//!   mounts, and Kamaji's manager itself runs here with that kubeconfig.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::{Proc, free_port};

mod claims;
pub mod image;
mod logs;
pub mod names;
pub(crate) mod network;
mod service;
mod volumes;

use service::{Endpoints, service, unroute};

/// Which tenant pods to run, and with what.
#[derive(Clone, Debug)]
pub struct Config {
    /// Where pod directories go.
    pub dir: PathBuf,
    /// Kubernetes releases the testbed has built: version (`v1.36.3`) and directory.
    pub releases: Vec<(String, PathBuf)>,
    /// The node name pods are bound to.
    pub node_name: String,
    pub tick: Duration,
    /// Run Kamaji's migration Job pods too, with this.
    pub kamaji: Option<KamajiJobs>,
    /// The SIMULATED cluster DNS's hosts file for the host's network ([`names::host_file`]),
    /// which each process gets as its `/etc/hosts` ([`names::host_command`]).
    pub hosts: Option<PathBuf>,
}

/// How Kamaji's migration Job pods run here.
#[derive(Clone, Debug)]
pub struct KamajiJobs {
    /// The Kamaji binary (`/kamaji` in Kamaji's image).
    pub binary: PathBuf,
    /// Kamaji's namespace, where its Jobs are.
    pub namespace: String,
    /// Given to the process as `KUBECONFIG` (see the module documentation).
    pub kubeconfig: PathBuf,
}

/// The label the Job controller puts on a Job's pods.
const JOB_POD_LABEL: &str = "batch.kubernetes.io/job-name";

/// The label Kamaji puts on every pod of a TenantControlPlane's Deployment
/// (`internal/builders/controlplane/deployment.go`, `templateLabels`).
pub const TENANT_POD_LABEL: &str = "kamaji.clastix.io/name";

struct Container {
    name: String,
    image: String,
    program: Option<PathBuf>,
    args: Vec<String>,
    /// `waiting` reason and message when the container cannot run at all.
    unavailable: Option<(String, String)>,
    env: Vec<(&'static str, String)>,
    /// Ran to completion and is not restarted (a Job's pod); its exit code.
    finished: Option<i32>,
    /// Where readiness is checked: an https `/readyz` (kube-apiserver) or a listening port.
    probe: Probe,
    proc: Option<Proc>,
    started_at: String,
    restarts: i32,
    next_start: Instant,
    last_exit: Option<Value>,
    ready: bool,
    log: PathBuf,
}

enum Probe {
    ApiServer(u16),
    Listening(u16),
    None,
}

struct RunningPod {
    /// The tenant port this pod's API server serves through the SIMULATED Service.
    service_port: Option<u16>,
    /// The pod's `restartPolicy`: `Always` (tenant pods), `OnFailure` or `Never` (Jobs).
    restart: String,
    /// [`Config::hosts`].
    hosts: Option<PathBuf>,
    dir: PathBuf,
    containers: Vec<Container>,
    started: String,
    reported: Value,
}

/// Runs until the future is dropped.
pub async fn run(client: Client, cfg: Config) {
    let pods: Api<Pod> = Api::all(client.clone());
    let mut running: HashMap<String, RunningPod> = HashMap::new();
    let endpoints: Endpoints = Default::default();
    // Each tenant port's SIMULATED Service, while a pod of it runs here: a port with none left
    // is released, so that a client sees it refused, as kube-proxy's REJECT rule for a Service
    // without endpoints makes it, and another testbed of the machine may serve it (a tenant
    // moved to another management cluster keeps its endpoint).
    let mut services: HashMap<u16, tokio::task::JoinHandle<()>> = HashMap::new();
    tracing::info!(
        "SIMULATED kubelet: running Kamaji tenant control-plane pods with Kubernetes {}",
        cfg.releases
            .iter()
            .map(|(v, _)| v.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    loop {
        match list_pods(&pods, &client, &cfg).await {
            Ok(list) => {
                let mut seen = HashSet::new();
                for pod in list {
                    let uid = pod.metadata.uid.clone().unwrap_or_default();
                    seen.insert(uid.clone());
                    if let Err(e) = step(&client, &cfg, &mut running, &endpoints, &uid, &pod).await
                    {
                        tracing::warn!(
                            "SIMULATED kubelet: pod {}/{}: {e}",
                            pod.metadata.namespace.as_deref().unwrap_or_default(),
                            pod.metadata.name.as_deref().unwrap_or_default()
                        );
                    }
                }
                let gone: Vec<String> = running
                    .keys()
                    .filter(|u| !seen.contains(*u))
                    .cloned()
                    .collect();
                for uid in gone {
                    unroute(&endpoints, &uid);
                    if let Some(p) = running.remove(&uid) {
                        stop(p);
                    }
                }
                for p in running.values() {
                    if let Some(port) = p.service_port
                        && !services.contains_key(&port)
                    {
                        match service(port, endpoints.clone()) {
                            Ok(task) => {
                                services.insert(port, task);
                            }
                            Err(e) => tracing::warn!("SIMULATED Service on port {port}: {e}"),
                        }
                    }
                }
                services.retain(|port, task| {
                    let served = running.values().any(|p| p.service_port == Some(*port));
                    if !served {
                        task.abort();
                    }
                    served
                });
            }
            Err(e) => tracing::warn!("SIMULATED kubelet: listing pods: {e}"),
        }
        tokio::time::sleep(cfg.tick).await;
    }
}

/// Kamaji's tenant pods everywhere, and its Job pods in its namespace.
async fn list_pods(
    pods: &Api<Pod>,
    client: &Client,
    cfg: &Config,
) -> Result<Vec<Pod>, kube::Error> {
    let mut all = pods
        .list(&ListParams::default().labels(TENANT_POD_LABEL))
        .await?
        .items;
    if let Some(k) = &cfg.kamaji {
        let jobs: Api<Pod> = Api::namespaced(client.clone(), &k.namespace);
        all.extend(
            jobs.list(&ListParams::default().labels(JOB_POD_LABEL))
                .await?
                .items,
        );
    }
    Ok(all)
}

fn stop(p: RunningPod) {
    for mut c in p.containers {
        if let Some(mut proc) = c.proc.take() {
            proc.kill();
        }
    }
    let _ = std::fs::remove_dir_all(&p.dir);
}

async fn step(
    client: &Client,
    cfg: &Config,
    running: &mut HashMap<String, RunningPod>,
    endpoints: &Endpoints,
    uid: &str,
    pod: &Pod,
) -> Result<(), String> {
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let name = pod.metadata.name.clone().unwrap_or_default();
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    if pod.metadata.deletion_timestamp.is_some() {
        // The endpoint leaves the Service first; in-flight requests get a moment; then a kubelet
        // stops the containers and confirms the deletion with a zero grace period.
        if unroute(endpoints, uid) {
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
        if let Some(p) = running.remove(uid) {
            stop(p);
        }
        let dp = DeleteParams {
            grace_period_seconds: Some(0),
            ..DeleteParams::default()
        };
        let _ = pods.delete(&name, &dp).await;
        return Ok(());
    }
    if !running.contains_key(uid) {
        let node = pod.spec.as_ref().and_then(|s| s.node_name.clone());
        if node.is_none() {
            let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
                                 "target": {"apiVersion": "v1", "kind": "Node", "name": cfg.node_name}});
            pods.create_subresource::<Value, Value>(
                "binding",
                &name,
                &PostParams::default(),
                &binding,
            )
            .await
            .map_err(|e| format!("binding: {e}"))?;
        }
        let p = prepare(client, cfg, &ns, &name, uid, pod).await?;
        tracing::info!("SIMULATED kubelet: pod {ns}/{name} admitted");
        running.insert(uid.to_string(), p);
    }
    let Some(p) = running.get_mut(uid) else {
        return Ok(());
    };
    supervise(p).await;
    if let Some(sp) = p.service_port {
        let backend = p.containers.iter().find_map(|c| match c.probe {
            Probe::ApiServer(port) => Some((port, c.ready)),
            _ => None,
        });
        if let (Some((port, ready)), Ok(mut eps)) = (backend, endpoints.lock()) {
            let list = eps.entry(sp).or_default();
            list.retain(|(u, _, _)| u != uid);
            list.push((uid.to_string(), port, ready));
        }
    }
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

/// Writes the pod's volumes and works out each container's program and arguments.
async fn prepare(
    client: &Client,
    cfg: &Config,
    ns: &str,
    name: &str,
    uid: &str,
    pod: &Pod,
) -> Result<RunningPod, String> {
    let dir = cfg
        .dir
        .join(format!("{ns}_{name}_{}", &uid[..uid.len().min(8)]));
    let _ = std::fs::remove_dir_all(&dir);
    let vol_root = dir.join("volumes");
    std::fs::create_dir_all(&vol_root).map_err(|e| format!("{}: {e}", vol_root.display()))?;
    let spec = pod.spec.clone().unwrap_or_default();
    volumes::write_all(client, ns, &vol_root, spec.volumes.unwrap_or_default()).await?;
    let mut containers = Vec::new();
    let mut service_port = None;
    let restart = spec
        .restart_policy
        .clone()
        .unwrap_or_else(|| "Always".into());
    for c in spec.containers {
        let (container, port) = container(cfg, &dir, &vol_root, c)?;
        if port.is_some() {
            service_port = port;
        }
        containers.push(container);
    }
    Ok(RunningPod {
        service_port,
        restart,
        hosts: cfg.hosts.clone(),
        dir,
        containers,
        started: crate::meta::now(),
        reported: Value::Null,
    })
}

/// A container of the pod as this kubelet runs it, and, for a kube-apiserver, the tenant port
/// its SIMULATED Service serves (the port the container asked for).
fn container(
    cfg: &Config,
    dir: &Path,
    vol_root: &Path,
    c: k8s_openapi::api::core::v1::Container,
) -> Result<(Container, Option<u16>), String> {
    let mounts: Vec<(String, PathBuf)> = c
        .volume_mounts
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|m| {
            let mut local = vol_root.join(&m.name);
            if let Some(sp) = m.sub_path.as_deref().filter(|s| !s.is_empty()) {
                local = local.join(sp);
            }
            (m.mount_path, local)
        })
        .collect();
    let mut words: Vec<String> = c.command.clone().unwrap_or_default();
    words.extend(c.args.clone().unwrap_or_default());
    let image = c.image.clone().unwrap_or_default();
    let binary = words.first().cloned().unwrap_or_default();
    let (program, unavailable) = program(cfg, &binary, &image);
    let env = match &cfg.kamaji {
        Some(k) if binary == "/kamaji" => vec![("KUBECONFIG", k.kubeconfig.display().to_string())],
        _ => Vec::new(),
    };
    let mut args: Vec<String> = words.iter().skip(1).map(|a| remap(a, &mounts)).collect();
    let (probe, service_port) = own_ports(&binary, &mut args)?;
    let container = Container {
        log: dir.join(format!("{}.log", c.name)),
        name: c.name,
        image,
        program,
        args,
        unavailable,
        env,
        finished: None,
        probe,
        proc: None,
        started_at: String::new(),
        restarts: 0,
        next_start: Instant::now(),
        last_exit: None,
        ready: false,
    };
    Ok((container, service_port))
}

/// The binary that stands in for `image` (its tag picks the Kubernetes release), or the
/// `waiting` reason and message when there is none.
fn program(cfg: &Config, binary: &str, image: &str) -> (Option<PathBuf>, Option<(String, String)>) {
    let version = image
        .rsplit_once(':')
        .map(|(_, t)| t.to_string())
        .unwrap_or_default();
    if let Some(k) = cfg.kamaji.as_ref().filter(|_| binary == "/kamaji") {
        return (Some(k.binary.clone()), None);
    }
    let release = cfg.releases.iter().find(|(v, _)| *v == version);
    let known = [
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
    ];
    match release {
        _ if !known.contains(&binary) => (
            None,
            Some((
                "ErrImagePull".to_string(),
                format!(
                    "SIMULATED kubelet: no container runtime here, and {binary:?} ({image}) is not a binary the testbed builds"
                ),
            )),
        ),
        Some((_, d)) => (Some(d.join(binary)), None),
        None => (
            None,
            Some((
                "ErrImagePull".to_string(),
                format!(
                    "SIMULATED kubelet: the testbed has no {binary} {version}; it runs {}",
                    cfg.releases
                        .iter()
                        .map(|(v, _)| v.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )),
        ),
    }
}

/// Pods share the host's network here (see the module documentation), so each control-plane
/// container gets free ports of its own in `args`. Returns how to probe it, and for a
/// kube-apiserver the port it asked for (`--secure-port`, default 6443): the tenant port.
fn own_ports(binary: &str, args: &mut Vec<String>) -> Result<(Probe, Option<u16>), String> {
    match binary {
        "kube-apiserver" => {
            let service_port = flag(args, "--secure-port")
                .and_then(|p| p.parse().ok())
                .unwrap_or(6443);
            let port = free_port().map_err(|e| e.to_string())?;
            args.retain(|a| !a.starts_with("--secure-port="));
            args.push(format!("--secure-port={port}"));
            // The tenant's Service address here is loopback (see the module documentation),
            // which no `kubernetes` Endpoints may hold: v1.35 and v1.36 log the refused write,
            // v1.37 refuses to start ("cannot use public IP 127.0.0.1 with endpoint
            // reconciler"). On a node the address is the Service's, so the reconciler is only
            // turned off for a loopback one.
            let loopback = flag(args, "--advertise-address")
                .and_then(|a| a.parse::<std::net::IpAddr>().ok())
                .is_some_and(|ip| ip.is_loopback());
            if loopback {
                args.retain(|a| !a.starts_with("--endpoint-reconciler-type="));
                args.push("--endpoint-reconciler-type=none".into());
            }
            Ok((Probe::ApiServer(port), Some(service_port)))
        }
        "kube-controller-manager" | "kube-scheduler" => {
            let port = free_port().map_err(|e| e.to_string())?;
            args.retain(|a| !a.starts_with("--bind-address=") && !a.starts_with("--secure-port="));
            args.push("--bind-address=127.0.0.1".into());
            args.push(format!("--secure-port={port}"));
            Ok((Probe::Listening(port), None))
        }
        _ => Ok((Probe::None, None)),
    }
}

/// The value of `--name=value` in `args`.
fn flag<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    args.iter()
        .find_map(|a| a.strip_prefix(name).and_then(|r| r.strip_prefix('=')))
}

/// Rewrites every absolute path under a mount point in `arg` (after `=` or `,`, or the whole
/// word) to the volume's local directory. The longest mount point wins.
fn remap(arg: &str, mounts: &[(String, PathBuf)]) -> String {
    let (head, value) = match arg.split_once('=') {
        Some((h, v)) if h.starts_with('-') => (Some(h), v),
        _ => (None, arg),
    };
    let mapped: Vec<String> = value
        .split(',')
        .map(|item| {
            let best = mounts
                .iter()
                .filter(|(mp, _)| {
                    let mp = mp.trim_end_matches('/');
                    item == mp || item.starts_with(&format!("{mp}/"))
                })
                .max_by_key(|(mp, _)| mp.len());
            match best {
                Some((mp, local)) => {
                    let rest = item[mp.trim_end_matches('/').len()..].trim_start_matches('/');
                    if rest.is_empty() {
                        local.display().to_string()
                    } else {
                        local.join(rest).display().to_string()
                    }
                }
                None => item.to_string(),
            }
        })
        .collect();
    let value = mapped.join(",");
    match head {
        Some(h) => format!("{h}={value}"),
        None => value,
    }
}

/// Starts what should run, notices what exited, and probes readiness.
async fn supervise(p: &mut RunningPod) {
    let hosts = p.hosts.clone();
    for c in p.containers.iter_mut() {
        if c.unavailable.is_some() || c.finished.is_some() {
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
            // A Job's container that succeeded (or fails with `Never`) is not started again.
            if (code == 0 && p.restart != "Always") || p.restart == "Never" {
                c.finished = Some(code);
                continue;
            }
            c.restarts = c.restarts.saturating_add(1);
            c.next_start = Instant::now() + restart_backoff(c.restarts);
        }
        if c.proc.is_none() && Instant::now() >= c.next_start {
            let Some(program) = c.program.clone() else {
                continue;
            };
            if c.log.exists() {
                let _ = std::fs::rename(&c.log, c.log.with_extension("previous.log"));
            }
            let (spawned, args) = match &hosts {
                Some(h) => names::host_command(h, &program, &c.args),
                None => (program.clone(), c.args.clone()),
            };
            match Proc::spawn_with_env(&c.name, &spawned, &args, &c.log, &c.env) {
                Ok(proc) => {
                    tracing::info!(
                        "SIMULATED kubelet: started {} ({})",
                        c.name,
                        program.display()
                    );
                    c.proc = Some(proc);
                    c.started_at = crate::meta::now();
                }
                Err(e) => {
                    c.unavailable = Some(("RunContainerError".into(), e.to_string()));
                }
            }
        }
        if c.proc.is_some() {
            c.ready = match c.probe {
                Probe::ApiServer(port) => apiserver_ready(port).await,
                Probe::Listening(port) => std::net::TcpStream::connect(("127.0.0.1", port)).is_ok(),
                Probe::None => true,
            };
        }
    }
}

/// `GET https://127.0.0.1:<port>/readyz`, anonymously, as the kubelet's HTTPS probe does (it
/// does not verify the serving certificate either).
async fn apiserver_ready(port: u16) -> bool {
    let Ok(url) = format!("https://127.0.0.1:{port}").parse::<http::Uri>() else {
        return false;
    };
    let mut config = kube::Config::new(url);
    config.accept_invalid_certs = true;
    config.connect_timeout = Some(Duration::from_secs(1));
    config.read_timeout = Some(Duration::from_secs(2));
    let Ok(client) = Client::try_from(config) else {
        return false;
    };
    let Ok(req) = http::Request::get("/readyz").body(Vec::new()) else {
        return false;
    };
    matches!(client.request_text(req).await, Ok(t) if t.trim() == "ok")
}

fn status_of(p: &RunningPod) -> Value {
    let all_ready = p.containers.iter().all(|c| c.ready);
    let finished: Option<Vec<i32>> = p.containers.iter().map(|c| c.finished).collect();
    let statuses: Vec<Value> = p
        .containers
        .iter()
        .map(|c| {
            let state = if c.finished.is_some()
                && let Some(last) = &c.last_exit
            {
                last.clone()
            } else if let Some((reason, message)) = &c.unavailable {
                json!({"waiting": {"reason": reason, "message": message}})
            } else if c.proc.is_some() {
                json!({"running": {"startedAt": c.started_at}})
            } else {
                json!({"waiting": {"reason": "CrashLoopBackOff",
                    "message": format!("SIMULATED kubelet: back-off restarting {}; see {}", c.name, c.log.display())}})
            };
            let mut s = json!({"name": c.name, "image": c.image, "imageID": "", "ready": c.ready,
                "started": c.proc.is_some(), "restartCount": c.restarts, "state": state});
            if let Some(last) = &c.last_exit {
                s["lastState"] = last.clone();
            }
            s
        })
        .collect();
    let phase = match finished {
        Some(codes) if codes.iter().all(|c| *c == 0) => "Succeeded",
        Some(_) => "Failed",
        None => "Running",
    };
    pod_status(phase, &p.started, all_ready, statuses)
}

/// A container's `terminated` state after it exited with `code`.
pub(super) fn terminated(code: i32, started_at: &str) -> Value {
    json!({"terminated": {"exitCode": code,
        "reason": if code == 0 {"Completed"} else {"Error"},
        "startedAt": started_at, "finishedAt": crate::meta::now()}})
}

/// How long to wait before restarting a container that exited `restarts` times: a kubelet backs
/// off 10 s doubling to 5 min; shorter here, the same shape.
pub(super) fn restart_backoff(restarts: i32) -> Duration {
    Duration::from_secs(1u64 << (restarts.clamp(1, 5) as u32))
}

/// A pod's status as these kubelets report it: `phase`, Ready from `ready`, the containers'.
pub(super) fn pod_status(phase: &str, started: &str, ready: bool, statuses: Vec<Value>) -> Value {
    let ready = if ready { "True" } else { "False" };
    json!({
        "phase": phase,
        "hostIP": "127.0.0.1",
        "podIP": "127.0.0.1",
        "podIPs": [{"ip": "127.0.0.1"}],
        "startTime": started,
        "conditions": [
            {"type": "PodScheduled", "status": "True"},
            {"type": "Initialized", "status": "True"},
            {"type": "ContainersReady", "status": ready},
            {"type": "Ready", "status": ready},
        ],
        "containerStatuses": statuses,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remap_rewrites_mounted_paths_only() {
        let mounts = vec![
            ("/etc/kubernetes/pki".to_string(), PathBuf::from("/r/pki")),
            ("/etc/kubernetes".to_string(), PathBuf::from("/r/kc")),
        ];
        for (arg, want) in [
            (
                "--tls-cert-file=/etc/kubernetes/pki/apiserver.crt",
                "--tls-cert-file=/r/pki/apiserver.crt",
            ),
            (
                "--kubeconfig=/etc/kubernetes/scheduler.conf",
                "--kubeconfig=/r/kc/scheduler.conf",
            ),
            (
                "--etcd-servers=https://127.0.0.1:2379",
                "--etcd-servers=https://127.0.0.1:2379",
            ),
            (
                "--x=/etc/kubernetes/pki/a,/etc/kubernetes/b",
                "--x=/r/pki/a,/r/kc/b",
            ),
            ("--y=/etc/kubernetesX/a", "--y=/etc/kubernetesX/a"),
        ] {
            assert_eq!(remap(arg, &mounts), want, "{arg}");
        }
    }
}
