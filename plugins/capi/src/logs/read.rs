//! What `logs` reads: the target, what relates to it, the Events in its namespaces, and the
//! controllers' `pods/log`. Every decision is `kcore::plan::logs`'s.

use std::collections::HashMap;
use std::time::Duration;

use cli::Conn;
use futures::AsyncBufReadExt;
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kclient::discovery::ServerApis;
use kclient::error::{Error, Op};
use kcore::groups::{BOOTSTRAP_GROUP, INFRASTRUCTURE_GROUP};
use kcore::init::set::Component;
use kcore::json;
use kcore::labels::CLUSTER_NAME_LABEL;
use kcore::plan::logs::{
    self as plan, ClusterLists, Cursor, Entry, Matcher, Newest, Related, SeenEvents, Target,
    TargetKind,
};
use kube::api::{Api, ListParams, LogParams};
use kube::discovery::ApiResource;
use serde_json::Value;

use crate::common::host_pool;

/// The kinds `logs` reads, at the versions the server serves (`None`: not served).
pub struct Kinds {
    cluster: ApiResource,
    machine: ApiResource,
    machine_set: Option<ApiResource>,
    machine_deployment: Option<ApiResource>,
    byo_machine: Option<ApiResource>,
    byo_host: Option<ApiResource>,
    kubeadm_config: Option<ApiResource>,
}

impl Kinds {
    pub fn of(apis: &ServerApis) -> Result<Kinds, Error> {
        Ok(Kinds {
            cluster: apis.cluster()?,
            machine: apis.capi_kind("Machine")?,
            machine_set: apis.capi_kind("MachineSet").ok(),
            machine_deployment: apis.capi_kind("MachineDeployment").ok(),
            byo_machine: apis.provider_kind(INFRASTRUCTURE_GROUP, "ByoMachine"),
            byo_host: apis.byo_host(),
            kubeadm_config: apis.provider_kind(BOOTSTRAP_GROUP, "KubeadmConfig"),
        })
    }

    fn of_kind(&self, k: TargetKind) -> Option<&ApiResource> {
        match k {
            TargetKind::Cluster => Some(&self.cluster),
            TargetKind::Machine => Some(&self.machine),
            TargetKind::Host => self.byo_host.as_ref(),
        }
    }
}

/// The target found: a typed one by its kind, a bare name as the one kind that has it.
pub async fn find_target(
    conn: &Conn,
    kinds: &Kinds,
    target: &Target,
    namespace: &str,
) -> Result<(TargetKind, Value), Error> {
    if let Some(k) = target.kind {
        let ar = kinds.of_kind(k).ok_or_else(|| Error::NotInstalled {
            product: "BYOH (Bring Your Own Host)".into(),
            group: format!("{INFRASTRUCTURE_GROUP} ByoHost"),
            install: host_pool::BYOH_INSTALL.into(),
            context: conn.context.clone(),
        })?;
        let obj = kclient::api::get_or_suggest(conn, ar, namespace, &target.name).await?;
        return Ok((k, kcore::fields::object_json(&obj)));
    }
    let mut found = Vec::new();
    for k in TargetKind::ALL {
        let Some(ar) = kinds.of_kind(k) else { continue };
        if let Some(obj) =
            kclient::api::get_json_opt(conn, ar, Some(namespace), &target.name).await?
        {
            found.push((k, obj));
        }
    }
    let kinds_found: Vec<TargetKind> = found.iter().map(|(k, _)| *k).collect();
    let k = plan::pick_kind(&target.name, namespace, &kinds_found)?;
    found
        .into_iter()
        .find(|(x, _)| *x == k)
        .ok_or_else(|| Error::other(format!("{} {} vanished", k.kind(), target.name)))
}

/// Objects of `ar` in `namespace` labelled with `selector`; none when the kind is not served.
async fn labelled(
    conn: &Conn,
    ar: Option<&ApiResource>,
    namespace: &str,
    selector: &str,
) -> Result<Vec<Value>, Error> {
    let lp = ListParams::default().labels(selector);
    crate::common::lists::list_opt(conn, ar, Some(namespace), &lp).await
}

/// The ByoHosts of every namespace (BYOH claims hosts anywhere), else of `namespace` when the
/// reader may not list them all, else none.
async fn hosts(conn: &Conn, kinds: &Kinds, namespace: &str) -> Vec<Value> {
    let Some(ar) = kinds.byo_host.clone() else {
        return Vec::new();
    };
    match host_pool::host_claims(conn, Some(ar.clone())).await {
        Ok(h) => h,
        Err(e) => {
            tracing::info!("ByoHosts of every namespace: {e}; reading namespace {namespace}");
            kclient::api::list_json(conn, &ar, Some(namespace), &ListParams::default())
                .await
                .unwrap_or_default()
        }
    }
}

/// What the target relates to, read afresh.
pub async fn related(
    conn: &Conn,
    kinds: &Kinds,
    kind: TargetKind,
    obj: &Value,
) -> Result<Related, Error> {
    let ns = json::namespace(obj);
    let name = json::name(obj);
    match kind {
        TargetKind::Cluster => {
            let sel = format!("{CLUSTER_NAME_LABEL}={name}");
            let (machines, sets, deployments, byomachines, configs, hosts) = tokio::try_join!(
                labelled(conn, Some(&kinds.machine), ns, &sel),
                labelled(conn, kinds.machine_set.as_ref(), ns, &sel),
                labelled(conn, kinds.machine_deployment.as_ref(), ns, &sel),
                labelled(conn, kinds.byo_machine.as_ref(), ns, &sel),
                labelled(conn, kinds.kubeadm_config.as_ref(), ns, &sel),
                async { Ok(hosts(conn, kinds, ns).await) },
            )?;
            let lists: [(&str, &[Value]); 5] = [
                ("Machine", &machines),
                ("MachineSet", &sets),
                ("MachineDeployment", &deployments),
                ("ByoMachine", &byomachines),
                ("KubeadmConfig", &configs),
            ];
            Ok(plan::related_to_cluster(
                obj,
                ClusterLists {
                    labelled: &lists,
                    hosts: &hosts,
                },
            ))
        }
        TargetKind::Machine => {
            let hosts = hosts(conn, kinds, ns).await;
            Ok(plan::related_to_machine(obj, &hosts))
        }
        TargetKind::Host => {
            // The host's claim first, then its ByoMachine and Machine where the claim is.
            let alone = plan::related_to_host(obj, &[], &[]);
            let Some(bm) = alone.objects.iter().find(|o| o.kind == "ByoMachine") else {
                return Ok(alone);
            };
            let byomachine = match &kinds.byo_machine {
                Some(ar) => kclient::api::get_json_opt(conn, ar, Some(&bm.namespace), &bm.name)
                    .await?
                    .into_iter()
                    .collect(),
                None => Vec::new(),
            };
            let owner = byomachine
                .first()
                .and_then(|b| json::owner_of_kind(b, "Machine"))
                .map(str::to_string);
            let machines = match owner {
                Some(m) => {
                    kclient::api::get_json_opt(conn, &kinds.machine, Some(&bm.namespace), &m)
                        .await?
                        .into_iter()
                        .collect()
                }
                None => {
                    let lp = ListParams::default();
                    kclient::api::list_json(conn, &kinds.machine, Some(&bm.namespace), &lp).await?
                }
            };
            Ok(plan::related_to_host(obj, &byomachine, &machines))
        }
    }
}

/// What a failed read says on stderr, once.
pub type Warning = String;

fn events_resource() -> ApiResource {
    ApiResource {
        group: String::new(),
        version: "v1".into(),
        api_version: "v1".into(),
        kind: "Event".into(),
        plural: "events".into(),
    }
}

/// The Events about the related objects that happened at or after `since` (the newest
/// [`plan::MAX_EVENTS`]), those `seen` let through (`--follow` shows each change once), and a
/// warning for each namespace whose Events cannot be listed.
pub async fn events(
    conn: &Conn,
    related: &Related,
    since: Timestamp,
    seen: &mut SeenEvents,
) -> (Vec<Entry>, Vec<Warning>) {
    let ar = events_resource();
    let lists = futures::future::join_all(related.namespaces().into_iter().map(|ns| {
        let ar = &ar;
        async move {
            let lp = ListParams::default();
            (ns, kclient::api::list_json(conn, ar, Some(ns), &lp).await)
        }
    }))
    .await;
    let mut entries = Vec::new();
    let mut warnings = Vec::new();
    for (ns, list) in lists {
        match list {
            Ok(items) => {
                for ev in &items {
                    if seen.admit(ev)
                        && let Some(e) = plan::event_entry(ev, related, since)
                    {
                        entries.push(e);
                    }
                }
            }
            Err(e) => warnings.push(format!("Events of namespace {ns} are left out: {e}")),
        }
    }
    let mut newest = Newest::new(plan::MAX_EVENTS);
    for e in plan::in_time_order([entries]) {
        newest.push(e);
    }
    (newest.into_vec(), warnings)
}

/// A controller's pods: its Deployment's selector, read once.
pub struct Controller {
    pub component: &'static Component,
    selector: Result<String, String>,
}

impl Controller {
    /// Where its pods are, for messages.
    pub fn place(&self) -> String {
        format!("{}/{}", self.component.namespace, self.component.deployment)
    }
}

/// The controllers of [`kcore::init::set::controllers`], each with its Deployment's pod selector (or why
/// there is none).
pub async fn controllers(conn: &Conn) -> Vec<Controller> {
    futures::future::join_all(kcore::init::set::controllers().map(|c| async move {
        Controller {
            component: c,
            selector: selector(conn, c).await,
        }
    }))
    .await
}

async fn selector(conn: &Conn, c: &Component) -> Result<String, String> {
    let api: Api<Deployment> = Api::namespaced(conn.client.clone(), c.namespace);
    let op = Op::new("get", "apps", "deployments", "Deployment")
        .in_namespace(Some(c.namespace))
        .named(c.deployment);
    let d = api
        .get_opt(c.deployment)
        .await
        .map_err(|e| conn.error(e, &op).to_string())?
        .ok_or_else(|| {
            format!(
                "no Deployment {}/{} (not installed here, or not by kubectl capi init)",
                c.namespace, c.deployment
            )
        })?;
    let labels = d
        .spec
        .and_then(|s| s.selector.match_labels)
        .unwrap_or_default();
    if labels.is_empty() {
        return Err(format!(
            "Deployment {}/{} selects its pods by expressions only",
            c.namespace, c.deployment
        ));
    }
    Ok(labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(","))
}

/// One container of a controller's pod, as `--follow` remembers it.
type ContainerKey = (String, String, String);

/// How long one container's log may take to read (the API server gives up on a kubelet that
/// does not answer sooner).
const READ_TIMEOUT: Duration = Duration::from_secs(60);

/// Where the reads of a container start: `--since` before the command started, or after the
/// last line `--follow` read.
#[derive(Clone, Copy)]
pub struct Window {
    pub start: Timestamp,
    pub since_seconds: i64,
}

/// The log lines of `c`'s containers that name a related object (the newest
/// [`plan::MAX_LINES_PER_CONTROLLER`]), and why it cannot be read when it cannot. `cursors`
/// holds what was read of each container before (`--follow`).
pub async fn controller_lines(
    conn: &Conn,
    c: &Controller,
    matcher: &Matcher,
    window: Window,
    cursors: &mut HashMap<ContainerKey, Cursor>,
) -> (Vec<Entry>, Option<Warning>) {
    let ns = c.component.namespace;
    let selector = match &c.selector {
        Ok(s) => s,
        Err(why) => return (Vec::new(), Some(why.clone())),
    };
    let pods: Api<Pod> = Api::namespaced(conn.client.clone(), ns);
    let list = match pods.list(&ListParams::default().labels(selector)).await {
        Ok(l) => l.items,
        Err(e) => {
            let op = Op::new("list", "", "pods", "Pod").in_namespace(Some(ns));
            return (Vec::new(), Some(conn.error(e, &op).to_string()));
        }
    };
    let mut containers = Vec::new();
    for p in &list {
        let Some(name) = p.metadata.name.clone() else {
            continue;
        };
        // A pod no kubelet runs yet has no log.
        if p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_none() {
            continue;
        }
        for ct in p.spec.iter().flat_map(|s| &s.containers) {
            containers.push((ns.to_string(), name.clone(), ct.name.clone()));
        }
    }
    if containers.is_empty() {
        let why = if list.is_empty() {
            format!("no pods ({selector})")
        } else {
            "its pods are not scheduled yet".to_string()
        };
        return (Vec::new(), Some(why));
    }
    let reads = containers.into_iter().map(|key| {
        let mut cursor = cursors.remove(&key).unwrap_or_default();
        let pods = pods.clone();
        async move {
            let r = container_lines(conn, &pods, c, &key, matcher, window, &mut cursor).await;
            (key, cursor, r)
        }
    });
    let done = futures::future::join_all(reads.collect::<Vec<_>>()).await;
    let mut groups = Vec::new();
    let mut failures = Vec::new();
    for (key, cursor, r) in done {
        cursors.insert(key.clone(), cursor);
        match r {
            Ok(lines) => groups.push(lines),
            Err(why) => failures.push(format!("{}/{} ({}): {why}", key.0, key.1, key.2)),
        }
    }
    let mut newest = Newest::new(plan::MAX_LINES_PER_CONTROLLER);
    for e in plan::in_time_order(groups) {
        newest.push(e);
    }
    let warning = match failures.as_slice() {
        [] => None,
        [one] => Some(format!("cannot read {one}")),
        [first, rest @ ..] => Some(format!(
            "cannot read {first} (and {} more containers)",
            rest.len()
        )),
    };
    (newest.into_vec(), warning)
}

/// One container's lines that name a related object, read with `timestamps=true`.
async fn container_lines(
    conn: &Conn,
    pods: &Api<Pod>,
    c: &Controller,
    (ns, pod, container): &ContainerKey,
    matcher: &Matcher,
    window: Window,
    cursor: &mut Cursor,
) -> Result<Vec<Entry>, String> {
    let mut lp = LogParams {
        container: Some(container.clone()),
        timestamps: true,
        tail_lines: Some(plan::READ_LINES),
        limit_bytes: Some(plan::READ_BYTES),
        ..LogParams::default()
    };
    if cursor.has_read() {
        lp.since_time = Some(cursor.since(window.start));
    } else {
        lp.since_seconds = Some(window.since_seconds);
    }
    let op = Op::new("get", "", "pods/log", "Pod")
        .in_namespace(Some(ns))
        .named(pod);
    let read = async {
        let stream = pods
            .log_stream(pod, &lp)
            .await
            .map_err(|e| conn.error(e, &op).to_string())?;
        let mut stream = std::pin::pin!(stream);
        let mut newest = Newest::new(plan::MAX_LINES_PER_CONTROLLER);
        let mut buf = Vec::new();
        let source = c.component.id;
        let pod_name = format!("{ns}/{pod}");
        loop {
            buf.clear();
            let n = stream
                .read_until(b'\n', &mut buf)
                .await
                .map_err(|e| format!("reading its log: {e}"))?;
            if n == 0 {
                break;
            }
            let line = String::from_utf8_lossy(&buf);
            let Some((at, text)) = plan::split_timestamp(line.trim_end_matches('\n')) else {
                continue;
            };
            if at < window.start || !cursor.admit(at, text) {
                continue;
            }
            if let Some(e) = plan::log_entry(source, &pod_name, container, at, text, matcher) {
                newest.push(e);
            }
        }
        Ok::<_, String>(newest.into_vec())
    };
    match tokio::time::timeout(READ_TIMEOUT, read).await {
        Ok(r) => r,
        Err(_) => Err(format!(
            "no answer within {} (is its node's kubelet up?)",
            kcore::text::human_duration(READ_TIMEOUT)
        )),
    }
}
