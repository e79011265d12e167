//! Fixtures: a fleet of Cluster API objects written through the API exactly as the real
//! controllers would have left them (CAPI core, KubeadmControlPlane, the Kamaji control-plane
//! provider and Kamaji, the BYOH controller and host agents). Status goes through the status
//! subresource; owner references carry real UIDs (the garbage collector is running).
//!
//! The API level is discovered: v1beta2 objects when the server serves `cluster.x-k8s.io/v1beta2`,
//! v1beta1 ones (with the CAPI ≥ 1.9 `status.v1beta2` blocks) otherwise.
//!
//! ```no_run
//! # async fn t() {
//! let tb = testbed::shared();
//! let (client, ns) = tb.namespace("hosts").await;
//! let fleet = testbed::fixtures::fleet(&client, &ns, &testbed::fixtures::FleetSpec::small())
//!     .await
//!     .unwrap();
//! assert_eq!(fleet.hosts.len(), 30);
//! # }
//! ```
//!
//! Layout (deterministic, so tests can assert on it):
//! - clusters `cluster-0` … : `cluster-0` has a `KamajiControlPlane` (2 control-plane pods in a
//!   `TenantControlPlane`, no control-plane Machines); the others a `KubeadmControlPlane` with one
//!   control-plane Machine `<cluster>-cp-0`. Every cluster has a `ByoCluster` and a Secret
//!   `<cluster>-kubeconfig`.
//! - MachineDeployments `cluster-<i % clusters>-md-<i / clusters>`, each with one MachineSet
//!   `<md>-ms`; the remaining Machines go round-robin to them, named `<md>-<nnnn>`.
//! - every Machine has a ByoMachine of the same name; Machine `k` (creation order) is in
//!   [`MachineState::for_index`]`(k)`, and the first `hosts - hosts/10` hosts are attached to
//!   the first Machines, in the matching host state. Of the rest, two are Releasing (claimed by
//!   a ByoMachine that is gone) and the others Available.
//! - hosts are `<namespace>-host-<nnnn>` ([`FleetSpec::host_prefix`]) in
//!   [`FleetSpec::hosts_namespace`] (default: the fleet namespace).

use std::collections::BTreeMap;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::Error;

/// The BYOH host states `kubectl capi hosts` derives (byoh.md §12).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum HostState {
    Available,
    Reserved,
    Provisioning,
    Running,
    Releasing,
    Failed,
    Paused,
}

impl HostState {
    pub fn as_str(self) -> &'static str {
        match self {
            HostState::Available => "Available",
            HostState::Reserved => "Reserved",
            HostState::Provisioning => "Provisioning",
            HostState::Running => "Running",
            HostState::Releasing => "Releasing",
            HostState::Failed => "Failed",
            HostState::Paused => "Paused",
        }
    }
}

/// What a Machine looks like, and the state of the host behind it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MachineState {
    /// Node up: phase Running, host Running.
    Running,
    /// Running, but on an older Kubernetes version (UpToDate False).
    Outdated,
    /// Host attached and installing: phase Provisioning, host Provisioning.
    Provisioning,
    /// Host attached, no bootstrap data yet: phase Pending, host Reserved.
    Pending,
    /// The host's install script failed: phase Provisioning, host Failed.
    HostFailed,
    /// Running on a host paused with its cluster: host Paused.
    Paused,
}

impl MachineState {
    /// The state of the `k`-th Machine: of every 10, 5 Running, 1 Outdated, 1 Provisioning,
    /// 1 Pending, 1 HostFailed, 1 Paused. (Machines without a host are Provisioning, waiting.)
    pub fn for_index(k: usize) -> MachineState {
        match k % 10 {
            0..=3 | 5 => MachineState::Running,
            4 => MachineState::Outdated,
            6 => MachineState::Provisioning,
            7 => MachineState::Pending,
            8 => MachineState::HostFailed,
            _ => MachineState::Paused,
        }
    }
    fn host_state(self) -> HostState {
        match self {
            MachineState::Running | MachineState::Outdated => HostState::Running,
            MachineState::Provisioning => HostState::Provisioning,
            MachineState::Pending => HostState::Reserved,
            MachineState::HostFailed => HostState::Failed,
            MachineState::Paused => HostState::Paused,
        }
    }
    fn has_node(self) -> bool {
        matches!(
            self,
            MachineState::Running | MachineState::Outdated | MachineState::Paused
        )
    }
}

/// The size of the fleet.
#[derive(Clone, Debug)]
pub struct FleetSpec {
    /// Clusters (at least 1); `cluster-0` is the Kamaji one when `kamaji` is set.
    pub clusters: usize,
    pub kamaji: bool,
    /// MachineDeployments (at least 1 when there are worker Machines).
    pub machine_deployments: usize,
    /// Machines in total, control-plane Machines included.
    pub machines: usize,
    pub hosts: usize,
    /// Where the ByoHosts live (agents register in their own namespace); default: the fleet's.
    pub hosts_namespace: Option<String>,
    /// Host names are `<prefix><nnnn>`; default `<namespace>-host-` (ByoHost names are host
    /// names, unique across namespaces in practice, and the BYOH providerID names only the host).
    pub host_prefix: Option<String>,
    /// Extra labels every host registers with (as `--label` on the agent).
    pub host_labels: BTreeMap<String, String>,
    /// The Kubernetes version of the fleet.
    pub version: String,
    /// Events on hosts and machines (off for big fleets).
    pub events: bool,
    /// Concurrent requests.
    pub concurrency: usize,
}

impl FleetSpec {
    /// The acceptance fleet: 3 clusters (one Kamaji), 2 MachineDeployments, 20 Machines, 30 hosts.
    pub fn small() -> FleetSpec {
        FleetSpec {
            clusters: 3,
            kamaji: true,
            machine_deployments: 2,
            machines: 20,
            hosts: 30,
            hosts_namespace: None,
            host_prefix: None,
            host_labels: BTreeMap::from([("site".to_string(), "rack-1".to_string())]),
            version: "v1.33.1".into(),
            events: true,
            concurrency: 64,
        }
    }
    /// A benchmark fleet: `hosts` ByoHosts and `machines` Machines, no events.
    pub fn bench(hosts: usize, machines: usize) -> FleetSpec {
        FleetSpec {
            hosts,
            machines,
            events: false,
            ..FleetSpec::small()
        }
    }
}

/// One fixture host and the state it was written in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FixtureHost {
    pub name: String,
    pub namespace: String,
    pub state: HostState,
    /// The cluster and Machine it serves, if any.
    pub cluster: Option<String>,
    pub machine: Option<String>,
}

/// One fixture Machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FixtureMachine {
    pub name: String,
    pub cluster: String,
    pub control_plane: bool,
    pub deployment: Option<String>,
    pub phase: String,
    pub host: Option<String>,
}

/// What [`fleet`] wrote.
#[derive(Clone, Debug)]
pub struct Fleet {
    pub namespace: String,
    /// `v1beta2` or `v1beta1`: the CAPI core version the objects were written at.
    pub capi_version: String,
    pub clusters: Vec<String>,
    /// The Kamaji cluster, if any.
    pub kamaji_cluster: Option<String>,
    pub machine_deployments: Vec<String>,
    pub machines: Vec<FixtureMachine>,
    pub hosts: Vec<FixtureHost>,
}

impl Fleet {
    /// Hosts in a state.
    pub fn hosts_in(&self, state: HostState) -> Vec<&FixtureHost> {
        self.hosts.iter().filter(|h| h.state == state).collect()
    }
    /// Machines of a cluster.
    pub fn machines_of(&self, cluster: &str) -> Vec<&FixtureMachine> {
        self.machines
            .iter()
            .filter(|m| m.cluster == cluster)
            .collect()
    }
}

const CAPI: &str = "cluster.x-k8s.io";
const CP: &str = "controlplane.cluster.x-k8s.io";
const INFRA: &str = "infrastructure.cluster.x-k8s.io";
const BOOTSTRAP: &str = "bootstrap.cluster.x-k8s.io";
const CLUSTER_NAME: &str = "cluster.x-k8s.io/cluster-name";
/// The time every fixture condition transitioned (fixtures are deterministic).
const T0: &str = "2026-11-30T07:00:00Z";

fn ar(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    crate::sim::ar(group, version, kind, plural)
}

/// Which CAPI core version the server serves best.
pub async fn capi_version(client: &Client) -> Result<String, Error> {
    match client
        .list_api_group_resources(&format!("{CAPI}/v1beta2"))
        .await
    {
        Ok(l) if l.resources.iter().any(|r| r.name == "machines") => Ok("v1beta2".into()),
        _ => Ok("v1beta1".into()),
    }
}

/// Installs the upstream KamajiControlPlane CRDs (CACPPK v0.20.0) unless they are served.
pub async fn ensure_kamaji_control_plane_crd(client: &Client) -> Result<(), Error> {
    let served = client
        .list_api_group_resources(&format!("{CP}/v1alpha2"))
        .await
        .map(|l| l.resources.iter().any(|r| r.name == "kamajicontrolplanes"))
        .unwrap_or(false);
    if served {
        return Ok(());
    }
    let assets = crate::Assets::ensure(false)?;
    crate::install_crds(client, &assets.crds.join("extra")).await
}

/// Creates an object (already existing is fine: fixtures are idempotent), sets its status
/// through the status subresource, and returns its UID.
async fn put(
    client: &Client,
    r: &ApiResource,
    ns: Option<&str>,
    mut obj: Value,
) -> Result<String, Error> {
    let api: Api<DynamicObject> = match ns {
        Some(ns) => Api::namespaced_with(client.clone(), ns, r),
        None => Api::all_with(client.clone(), r),
    };
    let status = obj.as_object_mut().and_then(|o| o.remove("status"));
    obj["apiVersion"] = json!(r.api_version);
    obj["kind"] = json!(r.kind);
    let name = obj["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let body: DynamicObject = serde_json::from_value(obj).map_err(|e| Error::Crd {
        file: format!("fixture {} {name}", r.kind),
        msg: e.to_string(),
    })?;
    let created = match api.create(&PostParams::default(), &body).await {
        Ok(o) => o,
        Err(kube::Error::Api(s)) if s.code == 409 => api.get(&name).await?,
        Err(e) => return Err(e.into()),
    };
    if let Some(status) = status {
        let pp = PatchParams::default();
        api.patch_status(&name, &pp, &Patch::Merge(json!({ "status": status })))
            .await?;
    }
    Ok(created.metadata.uid.unwrap_or_default())
}

fn owner(api_version: &str, kind: &str, name: &str, uid: &str) -> Value {
    json!([{"apiVersion": api_version, "kind": kind, "name": name, "uid": uid,
            "controller": true, "blockOwnerDeletion": true}])
}

/// A v1beta2 condition (metav1.Condition).
fn cond2(type_: &str, status: &str, reason: &str, message: &str) -> Value {
    json!({"type": type_, "status": status, "reason": reason, "message": message,
           "lastTransitionTime": T0, "observedGeneration": 1})
}

/// A v1beta1 CAPI condition (with severity when not True).
fn cond1(type_: &str, ok: bool, reason: &str, severity: &str, message: &str) -> Value {
    if ok {
        json!({"type": type_, "status": "True", "lastTransitionTime": T0})
    } else {
        let mut c = json!({"type": type_, "status": "False", "severity": severity,
                           "lastTransitionTime": T0});
        if !reason.is_empty() {
            c["reason"] = json!(reason);
        }
        if !message.is_empty() {
            c["message"] = json!(message);
        }
        c
    }
}

/// A reference as the core objects of `level` write it.
fn ref_(level: &str, group: &str, version: &str, kind: &str, name: &str, ns: &str) -> Value {
    if level == "v1beta2" {
        json!({"apiGroup": group, "kind": kind, "name": name})
    } else {
        json!({"apiVersion": format!("{group}/{version}"), "kind": kind, "name": name, "namespace": ns})
    }
}

/// Counters of a group of Machines.
#[derive(Clone, Copy, Default, Debug)]
struct Counts {
    desired: i64,
    ready: i64,
    available: i64,
    up_to_date: i64,
}

impl Counts {
    fn add(&mut self, s: MachineState) {
        self.desired += 1;
        if s.has_node() {
            self.ready += 1;
            self.available += 1;
        }
        if s != MachineState::Outdated {
            self.up_to_date += 1;
        }
    }
    fn v1beta2_block(&self) -> Value {
        json!({"desiredReplicas": self.desired, "replicas": self.desired, "readyReplicas": self.ready,
               "availableReplicas": self.available, "upToDateReplicas": self.up_to_date})
    }
}

/// A kubeconfig for a workload cluster, as CAPI writes it into `<cluster>-kubeconfig`.
pub fn workload_kubeconfig(cluster: &str, server: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: {cluster}\n  cluster:\n    server: {server}\n    insecure-skip-tls-verify: true\ncontexts:\n- name: {cluster}-admin@{cluster}\n  context:\n    cluster: {cluster}\n    user: {cluster}-admin\ncurrent-context: {cluster}-admin@{cluster}\nusers:\n- name: {cluster}-admin\n  user:\n    token: fixture-token-{cluster}\n"
    )
}

struct Plan {
    level: String,
    ns: String,
    hosts_ns: String,
    spec: FleetSpec,
    clusters: Vec<String>,
    mds: Vec<(String, String)>,
    machines: Vec<FixtureMachine>,
    states: Vec<MachineState>,
    /// Host index → machine index.
    host_of_machine: Vec<Option<usize>>,
    hosts: Vec<FixtureHost>,
}

fn plan(level: &str, ns: &str, spec: &FleetSpec) -> Plan {
    let nclusters = spec.clusters.max(1);
    let clusters: Vec<String> = (0..nclusters).map(|i| format!("cluster-{i}")).collect();
    let kamaji = spec.kamaji;
    let mds: Vec<(String, String)> = (0..spec.machine_deployments)
        .map(|i| {
            let c = &clusters[i % nclusters];
            (format!("{c}-md-{}", i / nclusters), c.clone())
        })
        .collect();
    let mut machines = Vec::with_capacity(spec.machines);
    for (i, c) in clusters.iter().enumerate() {
        if machines.len() >= spec.machines {
            break;
        }
        if !(kamaji && i == 0) {
            machines.push(FixtureMachine {
                name: format!("{c}-cp-0"),
                cluster: c.clone(),
                control_plane: true,
                deployment: None,
                phase: String::new(),
                host: None,
            });
        }
    }
    let mut w = 0usize;
    while machines.len() < spec.machines && !mds.is_empty() {
        let (md, c) = &mds[w % mds.len()];
        machines.push(FixtureMachine {
            name: format!("{md}-{:04}", w / mds.len()),
            cluster: c.clone(),
            control_plane: false,
            deployment: Some(md.clone()),
            phase: String::new(),
            host: None,
        });
        w += 1;
    }
    let attached = spec.machines.min(spec.hosts - spec.hosts / 10);
    let hosts_ns = spec
        .hosts_namespace
        .clone()
        .unwrap_or_else(|| ns.to_string());
    let prefix = spec
        .host_prefix
        .clone()
        .unwrap_or_else(|| format!("{ns}-host-"));
    let mut states = Vec::with_capacity(machines.len());
    let mut hosts = Vec::with_capacity(spec.hosts);
    let mut host_of_machine = Vec::with_capacity(spec.hosts);
    for (k, m) in machines.iter_mut().enumerate() {
        let s = MachineState::for_index(k);
        states.push(s);
        m.phase = if k >= attached {
            "Provisioning".into()
        } else {
            match s {
                MachineState::Running | MachineState::Outdated | MachineState::Paused => "Running",
                MachineState::Pending => "Pending",
                MachineState::Provisioning | MachineState::HostFailed => "Provisioning",
            }
            .into()
        };
        if k < attached {
            let h = format!("{prefix}{k:04}");
            m.host = Some(h.clone());
            hosts.push(FixtureHost {
                name: h,
                namespace: hosts_ns.clone(),
                state: s.host_state(),
                cluster: Some(m.cluster.clone()),
                machine: Some(m.name.clone()),
            });
            host_of_machine.push(Some(k));
        }
    }
    for i in attached..spec.hosts {
        let releasing = i < attached + 2;
        hosts.push(FixtureHost {
            name: format!("{prefix}{i:04}"),
            namespace: hosts_ns.clone(),
            state: if releasing {
                HostState::Releasing
            } else {
                HostState::Available
            },
            cluster: releasing.then(|| clusters[clusters.len() - 1].clone()),
            machine: None,
        });
        host_of_machine.push(None);
    }
    Plan {
        level: level.to_string(),
        ns: ns.to_string(),
        hosts_ns,
        spec: spec.clone(),
        clusters,
        mds,
        machines,
        states,
        host_of_machine,
        hosts,
    }
}

/// Writes the fleet into namespace `ns` (which must exist) and returns what it wrote.
/// Idempotent: existing objects are kept and their status rewritten.
pub async fn fleet(client: &Client, ns: &str, spec: &FleetSpec) -> Result<Fleet, Error> {
    let level = capi_version(client).await?;
    if spec.kamaji {
        ensure_kamaji_control_plane_crd(client).await?;
    }
    let p = plan(&level, ns, spec);
    if p.hosts_ns != ns {
        ensure_namespace(client, &p.hosts_ns).await?;
    }
    let conc = spec.concurrency.max(1);

    // Clusters with their infrastructure and control planes.
    let mut cluster_uids = BTreeMap::new();
    let mut cp_uids = BTreeMap::new();
    for (i, c) in p.clusters.iter().enumerate() {
        let kamaji = spec.kamaji && i == 0;
        let (uid, cp_uid) = put_cluster(client, &p, c, i, kamaji).await?;
        cluster_uids.insert(c.clone(), uid);
        cp_uids.insert(c.clone(), cp_uid);
    }

    // MachineDeployments and their MachineSets.
    let mut ms_uids = BTreeMap::new();
    for (md, c) in &p.mds {
        let uid = put_machine_deployment(client, &p, md, c, &cluster_uids[c]).await?;
        ms_uids.insert(md.clone(), uid);
    }

    // Machines, then their ByoMachines (owned by the Machines), then hosts.
    let machine_uids: Vec<(usize, String)> = futures::stream::iter(0..p.machines.len())
        .map(|k| {
            let p = &p;
            let owner_uid = match &p.machines[k].deployment {
                Some(md) => ms_uids.get(md).cloned().unwrap_or_default(),
                None => cp_uids
                    .get(&p.machines[k].cluster)
                    .cloned()
                    .unwrap_or_default(),
            };
            async move {
                let uid = put_machine(client, p, k, &owner_uid).await?;
                Ok::<_, Error>((k, uid))
            }
        })
        .buffer_unordered(conc)
        .try_collect()
        .await?;
    let mut uids = vec![String::new(); p.machines.len()];
    for (k, uid) in machine_uids {
        uids[k] = uid;
    }
    futures::stream::iter(0..p.machines.len())
        .map(|k| {
            let (p, uid) = (&p, uids[k].clone());
            async move { put_byomachine(client, p, k, &uid).await }
        })
        .buffer_unordered(conc)
        .try_collect::<Vec<_>>()
        .await?;
    futures::stream::iter(0..p.hosts.len())
        .map(|i| {
            let p = &p;
            async move { put_host(client, p, i).await }
        })
        .buffer_unordered(conc)
        .try_collect::<Vec<_>>()
        .await?;
    if spec.events {
        put_events(client, &p).await?;
    }
    Ok(Fleet {
        namespace: ns.to_string(),
        capi_version: level,
        kamaji_cluster: spec.kamaji.then(|| p.clusters[0].clone()),
        clusters: p.clusters.clone(),
        machine_deployments: p.mds.iter().map(|(m, _)| m.clone()).collect(),
        machines: p.machines.clone(),
        hosts: p.hosts.clone(),
    })
}

/// Creates a namespace unless it exists.
pub async fn ensure_namespace(client: &Client, name: &str) -> Result<(), Error> {
    use k8s_openapi::api::core::v1::Namespace;
    let api: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}}))
        .map_err(|e| Error::Start(e.to_string()))?;
    match api.create(&PostParams::default(), &ns).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

fn counts_of(p: &Plan, pred: impl Fn(&FixtureMachine) -> bool) -> Counts {
    let mut c = Counts::default();
    for (k, m) in p.machines.iter().enumerate() {
        if pred(m) {
            c.add(effective_state(p, k));
        }
    }
    c
}

/// The state of Machine `k`: machines without a host wait in Provisioning.
fn effective_state(p: &Plan, k: usize) -> MachineState {
    if p.machines[k].host.is_none() {
        MachineState::Provisioning
    } else {
        p.states[k]
    }
}

async fn put_cluster(
    client: &Client,
    p: &Plan,
    c: &str,
    i: usize,
    kamaji: bool,
) -> Result<(String, String), Error> {
    let (l, ns, version) = (p.level.as_str(), p.ns.as_str(), p.spec.version.as_str());
    let endpoint = format!("10.10.{i}.100");
    let cp_counts = if kamaji {
        Counts {
            desired: 2,
            ready: 2,
            available: 2,
            up_to_date: 2,
        }
    } else {
        counts_of(p, |m| m.cluster == c && m.control_plane)
    };
    let w = counts_of(p, |m| m.cluster == c && !m.control_plane);
    let workers_ok = w.available == w.desired;
    let labels = json!({"env": if i.is_multiple_of(2) {"prod"} else {"dev"}, "fixture.capi-kamaji.io/fleet": "true"});
    let cp_kind = if kamaji {
        "KamajiControlPlane"
    } else {
        "KubeadmControlPlane"
    };
    let cp_version = if kamaji { "v1alpha2" } else { l };
    let avail_msg = if workers_ok {
        String::new()
    } else {
        format!(
            "* WorkersAvailable: {} of {} worker Machines available",
            w.available, w.desired
        )
    };
    let cluster_conds = vec![
        cond2(
            "Available",
            if workers_ok { "True" } else { "False" },
            if workers_ok {
                "Available"
            } else {
                "NotAvailable"
            },
            &avail_msg,
        ),
        cond2("InfrastructureReady", "True", "Ready", ""),
        cond2("ControlPlaneInitialized", "True", "Initialized", ""),
        cond2("ControlPlaneAvailable", "True", "Available", ""),
        cond2(
            "WorkersAvailable",
            if workers_ok { "True" } else { "False" },
            if workers_ok {
                "Available"
            } else {
                "NotAvailable"
            },
            &avail_msg,
        ),
        cond2("RemoteConnectionProbe", "True", "ProbeSucceeded", ""),
    ];
    let cluster_status = if l == "v1beta2" {
        json!({
            "phase": "Provisioned",
            "initialization": {"infrastructureProvisioned": true, "controlPlaneInitialized": true},
            "controlPlane": cp_counts.v1beta2_block(),
            "workers": w.v1beta2_block(),
            "conditions": cluster_conds,
            "deprecated": {"v1beta1": {"conditions": [cond1("Ready", workers_ok, "WaitingForWorkers", "Warning", "")]}},
        })
    } else {
        json!({
            "phase": "Provisioned", "infrastructureReady": true, "controlPlaneReady": true,
            "conditions": [cond1("Ready", true, "", "", ""), cond1("ControlPlaneInitialized", true, "", "", ""),
                           cond1("ControlPlaneReady", true, "", "", ""), cond1("InfrastructureReady", true, "", "", "")],
            "v1beta2": {"conditions": cluster_conds, "controlPlane": cp_counts.v1beta2_block(),
                        "workers": w.v1beta2_block()},
        })
    };
    let cluster_uid = put(
        client,
        &ar(CAPI, l, "Cluster", "clusters"),
        Some(ns),
        json!({
            "metadata": {"name": c, "labels": labels},
            "spec": {
                "clusterNetwork": {"pods": {"cidrBlocks": ["192.168.0.0/16"]}, "services": {"cidrBlocks": ["10.128.0.0/12"]}},
                "controlPlaneEndpoint": {"host": endpoint, "port": 6443},
                "controlPlaneRef": ref_(l, CP, cp_version, cp_kind, c, ns),
                "infrastructureRef": ref_(l, INFRA, "v1beta1", "ByoCluster", c, ns),
            },
            "status": cluster_status,
        }),
    )
    .await?;
    let cluster_owner = owner(&format!("{CAPI}/{l}"), "Cluster", c, &cluster_uid);
    put(
        client,
        &ar(INFRA, "v1beta1", "ByoCluster", "byoclusters"),
        Some(ns),
        json!({
            "metadata": {"name": c, "labels": {CLUSTER_NAME: c}, "ownerReferences": cluster_owner},
            "spec": {"controlPlaneEndpoint": {"host": endpoint, "port": 6443},
                     "bundleLookupBaseRegistry": "projects.registry.vmware.com/cluster_api_provider_bringyourownhost"},
            "status": {"ready": true, "conditions": [cond1("Ready", true, "", "", "")]},
        }),
    )
    .await?;
    let cp_uid = if kamaji {
        let uid = put(
            client,
            &ar(CP, "v1alpha2", "KamajiControlPlane", "kamajicontrolplanes"),
            Some(ns),
            json!({
                "metadata": {"name": c, "labels": {CLUSTER_NAME: c}, "ownerReferences": cluster_owner},
                "spec": {"replicas": 2, "version": version, "dataStoreName": "default"},
                "status": {
                    "externalManagedControlPlane": true, "ready": true, "version": version,
                    "initialization": {"controlPlaneInitialized": true},
                    "replicas": 2, "readyReplicas": 2, "availableReplicas": 2, "upToDateReplicas": 2,
                    "selector": format!("kamaji.clastix.io/name={c}"),
                    "conditions": [cond2("Available", "True", "Available", ""),
                                   cond2("Ready", "True", "TenantControlPlaneReady", "")],
                },
            }),
        )
        .await?;
        put(
            client,
            &ar("kamaji.clastix.io", "v1alpha1", "TenantControlPlane", "tenantcontrolplanes"),
            Some(ns),
            json!({
                "metadata": {"name": c, "labels": {CLUSTER_NAME: c},
                             "ownerReferences": owner(&format!("{CP}/v1alpha2"), "KamajiControlPlane", c, &uid)},
                "spec": {
                    "controlPlane": {"deployment": {"replicas": 2}, "service": {"serviceType": "LoadBalancer"}},
                    "kubernetes": {"version": version, "kubelet": {"cgroupfs": "systemd"}},
                    "networkProfile": {"address": endpoint, "port": 6443},
                },
                "status": {
                    "controlPlaneEndpoint": format!("{endpoint}:6443"),
                    "kubernetesResources": {
                        "version": {"version": version, "status": "Ready"},
                        "deployment": {"name": c, "namespace": ns, "selector": format!("kamaji.clastix.io/name={c}"),
                                       "replicas": 2, "readyReplicas": 2, "availableReplicas": 2, "updatedReplicas": 2},
                        "service": {"name": c, "namespace": ns, "port": 6443},
                    },
                    "kubeconfig": {"admin": {"secretName": format!("{c}-admin-kubeconfig")}},
                },
            }),
        )
        .await?;
        uid
    } else {
        let (spec, status) = if l == "v1beta2" {
            (
                json!({"replicas": cp_counts.desired, "version": version, "kubeadmConfigSpec": {"format": "cloud-config"},
                       "machineTemplate": {"spec": {"infrastructureRef": ref_(l, INFRA, "v1beta1", "ByoMachineTemplate", &format!("{c}-control-plane"), ns)}}}),
                json!({"initialization": {"controlPlaneInitialized": true}, "replicas": cp_counts.desired,
                       "readyReplicas": cp_counts.ready, "availableReplicas": cp_counts.available,
                       "upToDateReplicas": cp_counts.up_to_date, "version": version,
                       "selector": format!("{CLUSTER_NAME}={c},cluster.x-k8s.io/control-plane"),
                       "conditions": [cond2("Available", "True", "Available", ""),
                                      cond2("Initialized", "True", "Initialized", ""),
                                      cond2("MachinesReady", "True", "Ready", ""),
                                      cond2("MachinesUpToDate", "True", "UpToDate", "")]}),
            )
        } else {
            (
                json!({"replicas": cp_counts.desired, "version": version, "kubeadmConfigSpec": {"format": "cloud-config"},
                       "machineTemplate": {"infrastructureRef": ref_(l, INFRA, "v1beta1", "ByoMachineTemplate", &format!("{c}-control-plane"), ns)}}),
                json!({"initialized": true, "ready": true, "replicas": cp_counts.desired,
                       "readyReplicas": cp_counts.ready, "updatedReplicas": cp_counts.up_to_date,
                       "unavailableReplicas": cp_counts.desired - cp_counts.available, "version": version,
                       "selector": format!("{CLUSTER_NAME}={c},cluster.x-k8s.io/control-plane"),
                       "conditions": [cond1("Ready", true, "", "", ""), cond1("Available", true, "", "", "")],
                       "v1beta2": {"conditions": [cond2("Available", "True", "Available", "")],
                                   "readyReplicas": cp_counts.ready, "availableReplicas": cp_counts.available,
                                   "upToDateReplicas": cp_counts.up_to_date}}),
            )
        };
        put(
            client,
            &ar(CP, l, "KubeadmControlPlane", "kubeadmcontrolplanes"),
            Some(ns),
            json!({"metadata": {"name": c, "labels": {CLUSTER_NAME: c}, "ownerReferences": cluster_owner},
                   "spec": spec, "status": status}),
        )
        .await?
    };
    let kc = workload_kubeconfig(c, &format!("https://{endpoint}:6443"));
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD.encode(kc.as_bytes());
    put(
        client,
        &ar("", "v1", "Secret", "secrets"),
        Some(ns),
        json!({"metadata": {"name": format!("{c}-kubeconfig"), "labels": {CLUSTER_NAME: c},
                            "ownerReferences": cluster_owner},
               "type": "cluster.x-k8s.io/secret", "data": {"value": b64}}),
    )
    .await?;
    Ok((cluster_uid, cp_uid))
}

/// Writes a MachineDeployment and its MachineSet; returns the MachineSet's UID.
async fn put_machine_deployment(
    client: &Client,
    p: &Plan,
    md: &str,
    c: &str,
    cluster_uid: &str,
) -> Result<String, Error> {
    let (l, ns, version) = (p.level.as_str(), p.ns.as_str(), p.spec.version.as_str());
    let n = counts_of(p, |m| m.deployment.as_deref() == Some(md));
    let sel = json!({"matchLabels": {CLUSTER_NAME: c, "cluster.x-k8s.io/deployment-name": md}});
    let template = json!({
        "metadata": {"labels": {CLUSTER_NAME: c, "cluster.x-k8s.io/deployment-name": md, "nodepool": md}},
        "spec": {
            "clusterName": c, "version": version,
            "bootstrap": {"configRef": ref_(l, BOOTSTRAP, l, "KubeadmConfigTemplate", md, ns)},
            "infrastructureRef": ref_(l, INFRA, "v1beta1", "ByoMachineTemplate", md, ns),
        }
    });
    let ok = n.available == n.desired;
    let status = |with_selector: bool| {
        let mut s = if l == "v1beta2" {
            json!({"replicas": n.desired, "readyReplicas": n.ready, "availableReplicas": n.available,
                   "upToDateReplicas": n.up_to_date, "phase": if ok {"Running"} else {"ScalingUp"},
                   "conditions": [cond2("Available", if ok {"True"} else {"False"}, if ok {"Available"} else {"NotAvailable"},
                                        &if ok {String::new()} else {format!("{} available replicas, at least {} required", n.available, n.desired)}),
                                  cond2("MachinesReady", if n.ready == n.desired {"True"} else {"False"}, if n.ready == n.desired {"Ready"} else {"NotReady"}, ""),
                                  cond2("MachinesUpToDate", if n.up_to_date == n.desired {"True"} else {"False"}, if n.up_to_date == n.desired {"UpToDate"} else {"NotUpToDate"}, "")]})
        } else {
            json!({"replicas": n.desired, "readyReplicas": n.ready, "availableReplicas": n.available,
                   "updatedReplicas": n.up_to_date, "unavailableReplicas": n.desired - n.available,
                   "phase": if ok {"Running"} else {"ScalingUp"},
                   "conditions": [cond1("Ready", ok, "WaitingForAvailableMachines", "Warning", ""),
                                  cond1("Available", ok, "WaitingForAvailableMachines", "Warning", "")],
                   "v1beta2": {"readyReplicas": n.ready, "availableReplicas": n.available, "upToDateReplicas": n.up_to_date,
                               "conditions": [cond2("Available", if ok {"True"} else {"False"}, if ok {"Available"} else {"NotAvailable"}, "")]}})
        };
        if with_selector {
            s["selector"] = json!(format!(
                "{CLUSTER_NAME}={c},cluster.x-k8s.io/deployment-name={md}"
            ));
        }
        s
    };
    let md_uid = put(
        client,
        &ar(CAPI, l, "MachineDeployment", "machinedeployments"),
        Some(ns),
        json!({
            "metadata": {"name": md, "labels": {CLUSTER_NAME: c},
                         "ownerReferences": owner(&format!("{CAPI}/{l}"), "Cluster", c, cluster_uid)},
            "spec": {"clusterName": c, "replicas": n.desired, "selector": sel, "template": template},
            "status": status(true),
        }),
    )
    .await?;
    let ms = format!("{md}-ms");
    let mut ms_template = template.clone();
    ms_template["metadata"]["labels"]["cluster.x-k8s.io/set-name"] = json!(ms);
    let mut ms_sel = sel.clone();
    ms_sel["matchLabels"]["cluster.x-k8s.io/set-name"] = json!(ms);
    put(
        client,
        &ar(CAPI, l, "MachineSet", "machinesets"),
        Some(ns),
        json!({
            "metadata": {"name": ms, "labels": {CLUSTER_NAME: c, "cluster.x-k8s.io/deployment-name": md},
                         "ownerReferences": owner(&format!("{CAPI}/{l}"), "MachineDeployment", md, &md_uid)},
            "spec": {"clusterName": c, "replicas": n.desired, "selector": ms_sel, "template": ms_template},
            "status": status(true),
        }),
    )
    .await
}

fn machine_conditions2(s: MachineState, has_host: bool) -> Vec<Value> {
    let up = if s == MachineState::Outdated {
        cond2(
            "UpToDate",
            "False",
            "NotUpToDate",
            "* Version v1.32.4, v1.33.1 required",
        )
    } else {
        cond2("UpToDate", "True", "UpToDate", "")
    };
    if has_host && s.has_node() {
        return vec![
            cond2("Available", "True", "Available", ""),
            cond2("Ready", "True", "Ready", ""),
            up,
            cond2("BootstrapConfigReady", "True", "Ready", ""),
            cond2("InfrastructureReady", "True", "Ready", ""),
            cond2("NodeHealthy", "True", "NodeHealthy", ""),
            cond2("NodeReady", "True", "NodeReady", ""),
        ];
    }
    let (boot, infra_msg) = match (has_host, s) {
        (false, _) => (
            true,
            "* BYOHostReady: No available ByoHost matches the selector",
        ),
        (_, MachineState::Pending) => (false, "* BYOHostReady: waiting for bootstrap data"),
        (_, MachineState::HostFailed) => (
            true,
            "* BYOHostReady: host bootstrap failed: install script error",
        ),
        _ => (true, "* BYOHostReady: installing Kubernetes on the host"),
    };
    vec![
        cond2("Available", "False", "NotAvailable", "* Ready: not ready"),
        cond2(
            "Ready",
            "False",
            "NotReady",
            &format!("* InfrastructureReady: {infra_msg}"),
        ),
        up,
        if boot {
            cond2("BootstrapConfigReady", "True", "Ready", "")
        } else {
            cond2(
                "BootstrapConfigReady",
                "False",
                "NotReady",
                "* DataSecretAvailable: waiting for the control plane to be initialized",
            )
        },
        cond2("InfrastructureReady", "False", "NotReady", infra_msg),
        cond2(
            "NodeHealthy",
            "Unknown",
            "NodeDoesNotExist",
            "Waiting for a Node with spec.providerID",
        ),
        cond2(
            "NodeReady",
            "Unknown",
            "NodeDoesNotExist",
            "Waiting for a Node with spec.providerID",
        ),
    ]
}

async fn put_machine(
    client: &Client,
    p: &Plan,
    k: usize,
    owner_uid: &str,
) -> Result<String, Error> {
    let (l, ns) = (p.level.as_str(), p.ns.as_str());
    let m = &p.machines[k];
    let s = effective_state(p, k);
    let has_host = m.host.is_some();
    let running = has_host && s.has_node();
    let version = if s == MachineState::Outdated {
        "v1.32.4".to_string()
    } else {
        p.spec.version.clone()
    };
    let mut labels = json!({CLUSTER_NAME: m.cluster});
    let owner_ref = match &m.deployment {
        Some(md) => {
            labels["cluster.x-k8s.io/deployment-name"] = json!(md);
            labels["cluster.x-k8s.io/set-name"] = json!(format!("{md}-ms"));
            labels["nodepool"] = json!(md);
            owner(
                &format!("{CAPI}/{l}"),
                "MachineSet",
                &format!("{md}-ms"),
                owner_uid,
            )
        }
        None => {
            labels["cluster.x-k8s.io/control-plane"] = json!("");
            labels["cluster.x-k8s.io/control-plane-name"] = json!(m.cluster);
            owner(
                &format!("{CP}/{l}"),
                "KubeadmControlPlane",
                &m.cluster,
                owner_uid,
            )
        }
    };
    let boot_ready = !(has_host && s == MachineState::Pending);
    let mut spec = json!({
        "clusterName": m.cluster, "version": version,
        "bootstrap": {"configRef": ref_(l, BOOTSTRAP, l, "KubeadmConfig", &m.name, ns)},
        "infrastructureRef": ref_(l, INFRA, "v1beta1", "ByoMachine", &m.name, ns),
    });
    if boot_ready {
        spec["bootstrap"]["dataSecretName"] = json!(m.name);
    }
    let host = m.host.clone().unwrap_or_default();
    if running {
        spec["providerID"] = json!(format!("byoh://{host}/fx{k:04}"));
    }
    let conds = machine_conditions2(s, has_host);
    let node_info = json!({"architecture": "amd64", "bootID": format!("boot-{k}"), "containerRuntimeVersion": "containerd://1.7.22",
        "kernelVersion": "5.15.0-122-generic", "kubeProxyVersion": version, "kubeletVersion": version,
        "machineID": format!("machine-{k}"), "operatingSystem": "linux", "osImage": "Ubuntu 22.04.4 LTS",
        "systemUUID": format!("uuid-{k}")});
    let mut status = if l == "v1beta2" {
        json!({
            "phase": m.phase,
            "initialization": {"bootstrapDataSecretCreated": boot_ready, "infrastructureProvisioned": running},
            "conditions": conds,
            "deprecated": {"v1beta1": {"conditions": [cond1("Ready", running, "WaitingForInfrastructure", "Info", "")]}},
        })
    } else {
        json!({
            "phase": m.phase, "bootstrapReady": boot_ready, "infrastructureReady": running,
            "conditions": [cond1("Ready", running, "WaitingForInfrastructure", "Info", ""),
                           cond1("BootstrapReady", boot_ready, "WaitingForControlPlaneAvailable", "Info", ""),
                           cond1("InfrastructureReady", running, "WaitingForInfrastructure", "Info", "")],
            "v1beta2": {"conditions": conds},
        })
    };
    if running {
        status["nodeRef"] = if l == "v1beta2" {
            json!({"name": host})
        } else {
            json!({"apiVersion": "v1", "kind": "Node", "name": host, "uid": format!("node-uid-{k}")})
        };
        status["nodeInfo"] = node_info;
        status["addresses"] = json!([{"type": "InternalIP", "address": host_ip(k)}]);
    }
    let mut meta = json!({"name": m.name, "labels": labels, "ownerReferences": owner_ref});
    if s == MachineState::Paused && has_host {
        meta["annotations"] = json!({"cluster.x-k8s.io/paused": ""});
    }
    put(
        client,
        &ar(CAPI, l, "Machine", "machines"),
        Some(ns),
        json!({"metadata": meta, "spec": spec, "status": status}),
    )
    .await
}

fn host_ip(i: usize) -> String {
    format!("10.20.{}.{}", i / 250, 10 + i % 250)
}

async fn put_byomachine(
    client: &Client,
    p: &Plan,
    k: usize,
    machine_uid: &str,
) -> Result<String, Error> {
    let (l, ns) = (p.level.as_str(), p.ns.as_str());
    let m = &p.machines[k];
    let s = effective_state(p, k);
    let running = m.host.is_some() && s.has_node();
    let cond = match (&m.host, s) {
        (None, _) => cond1(
            "BYOHostReady",
            false,
            "BYOHostsUnavailable",
            "Info",
            "no free ByoHost matches the selector",
        ),
        (Some(_), MachineState::Pending) => cond1(
            "BYOHostReady",
            false,
            "WaitingForBootstrapDataSecret",
            "Info",
            "",
        ),
        (Some(_), _) if running => cond1("BYOHostReady", true, "", "", ""),
        (Some(_), MachineState::HostFailed) => cond1(
            "BYOHostReady",
            false,
            "BYOHostsUnavailable",
            "Warning",
            "host bootstrap failed",
        ),
        (Some(_), _) => cond1(
            "BYOHostReady",
            false,
            "InstallationSecretNotAvailable",
            "Info",
            "",
        ),
    };
    let mut spec = json!({"selector": {"matchLabels": {"site": "rack-1"}}});
    if running {
        spec["providerID"] = json!(format!(
            "byoh://{}/fx{k:04}",
            m.host.clone().unwrap_or_default()
        ));
    }
    put(
        client,
        &ar(INFRA, "v1beta1", "ByoMachine", "byomachines"),
        Some(ns),
        json!({
            "metadata": {"name": m.name, "labels": {CLUSTER_NAME: m.cluster},
                         "ownerReferences": owner(&format!("{CAPI}/{l}"), "Machine", &m.name, machine_uid)},
            "spec": spec,
            "status": {"ready": running, "conditions": [cond],
                       "hostinfo": {"osname": "linux", "osimage": "Ubuntu 22.04.4 LTS", "architecture": "amd64"}},
        }),
    )
    .await
}

async fn put_host(client: &Client, p: &Plan, i: usize) -> Result<String, Error> {
    let h = &p.hosts[i];
    let version = p.spec.version.as_str();
    let mut labels: serde_json::Map<String, Value> = p
        .spec
        .host_labels
        .iter()
        .map(|(k, v)| (k.clone(), json!(v)))
        .collect();
    labels.insert(
        "fork.example.com/rack-slot".into(),
        json!(format!("{}", i % 42)),
    );
    let mut annotations = serde_json::Map::new();
    let mut spec = json!({});
    let mut status = json!({
        "hostinfo": {"osname": "linux", "osimage": "Ubuntu 22.04.4 LTS", "architecture": if i % 5 == 4 {"arm64"} else {"amd64"}},
        "network": [
            {"networkInterfaceName": "eno1", "isDefault": true, "connected": true,
             "macAddr": format!("52:54:00:{:02x}:{:02x}:01", i / 256 % 256, i % 256), "ipAddrs": [format!("{}/24", host_ip(i))]},
            {"networkInterfaceName": "eno2", "isDefault": false, "connected": false,
             "macAddr": format!("52:54:00:{:02x}:{:02x}:02", i / 256 % 256, i % 256), "ipAddrs": []},
        ],
        // A field from the Platform9 fork: the plugin must tolerate it.
        "agentVersion": "v0.5.86",
    });
    let claimed_by = |bm_ns: &str,
                      bm: &str,
                      cluster: &str,
                      labels: &mut serde_json::Map<String, Value>,
                      annotations: &mut serde_json::Map<String, Value>,
                      status: &mut Value| {
        labels.insert(CLUSTER_NAME.into(), json!(cluster));
        labels.insert(
            "byoh.infrastructure.cluster.x-k8s.io/byomachine-name".into(),
            json!(format!("{bm_ns}.{bm}")),
        );
        annotations.insert(
            "byoh.infrastructure.cluster.x-k8s.io/k8sversion".into(),
            json!(version),
        );
        annotations.insert(
            "byoh.infrastructure.cluster.x-k8s.io/endpointip".into(),
            json!("10.10.0.100"),
        );
        status["machineRef"] = json!({"apiVersion": format!("{INFRA}/v1beta1"), "kind": "ByoMachine",
                                      "namespace": bm_ns, "name": bm, "uid": format!("uid-{bm}")});
    };
    let waiting = cond1(
        "K8sNodeBootstrapSucceeded",
        false,
        "WaitingForMachineRefToBeAssigned",
        "Info",
        "",
    );
    let bootstrap_secret = |spec: &mut Value, m: &str| {
        spec["bootstrapSecret"] = json!({"kind": "Secret", "namespace": p.ns, "name": m});
        spec["installationSecret"] = json!({"kind": "Secret", "namespace": p.ns, "name": m});
    };
    match (h.state, p.host_of_machine[i]) {
        (HostState::Releasing, _) => {
            let bm = format!("{}-gone-{i}", p.clusters[p.clusters.len() - 1]);
            claimed_by(
                &p.ns,
                &bm,
                &p.clusters[p.clusters.len() - 1],
                &mut labels,
                &mut annotations,
                &mut status,
            );
            annotations.insert(
                "byoh.infrastructure.cluster.x-k8s.io/unregistering".into(),
                json!(""),
            );
            status["conditions"] = json!([
                cond1("K8sComponentsInstallationSucceeded", true, "", "", ""),
                cond1("K8sNodeBootstrapSucceeded", true, "", "", ""),
            ]);
        }
        (_, None) => {
            status["conditions"] = json!([waiting]);
        }
        (state, Some(k)) => {
            let m = &p.machines[k];
            claimed_by(
                &p.ns,
                &m.name,
                &m.cluster,
                &mut labels,
                &mut annotations,
                &mut status,
            );
            match state {
                // Claimed; the agent has not reported on the claim yet.
                HostState::Reserved => status["conditions"] = json!([waiting]),
                HostState::Provisioning => {
                    bootstrap_secret(&mut spec, &m.name);
                    status["conditions"] = json!([
                        cond1(
                            "K8sComponentsInstallationSucceeded",
                            false,
                            "K8sComponentsInstalling",
                            "Info",
                            "installing the k8s bundle"
                        ),
                        cond1(
                            "K8sNodeBootstrapSucceeded",
                            false,
                            "BootstrapDataSecretUnavailable",
                            "Info",
                            ""
                        ),
                    ]);
                }
                HostState::Failed => {
                    bootstrap_secret(&mut spec, &m.name);
                    status["conditions"] = json!([
                        cond1(
                            "K8sComponentsInstallationSucceeded",
                            false,
                            "K8sComponentsInstallationFailed",
                            "Error",
                            "apt-get install kubelet=1.33.1-1.1 exited with status 100"
                        ),
                        cond1(
                            "K8sNodeBootstrapSucceeded",
                            false,
                            "BootstrapDataSecretUnavailable",
                            "Info",
                            ""
                        ),
                    ]);
                }
                HostState::Paused => {
                    bootstrap_secret(&mut spec, &m.name);
                    annotations.insert("cluster.x-k8s.io/paused".into(), json!(""));
                    status["conditions"] = json!([
                        cond1("K8sComponentsInstallationSucceeded", true, "", "", ""),
                        cond1("K8sNodeBootstrapSucceeded", true, "", "", ""),
                    ]);
                }
                _ => {
                    bootstrap_secret(&mut spec, &m.name);
                    status["conditions"] = json!([
                        cond1("K8sComponentsInstallationSucceeded", true, "", "", ""),
                        cond1("K8sNodeBootstrapSucceeded", true, "", "", ""),
                    ]);
                }
            }
        }
    }
    put(
        client,
        &ar(INFRA, "v1beta1", "ByoHost", "byohosts"),
        Some(&p.hosts_ns),
        json!({"metadata": {"name": h.name, "labels": labels, "annotations": annotations},
               "spec": spec, "status": status}),
    )
    .await
}

/// Events the BYOH controller and host agents would have recorded on non-idle hosts.
async fn put_events(client: &Client, p: &Plan) -> Result<(), Error> {
    let r = ar("", "v1", "Event", "events");
    let hosts: Vec<&FixtureHost> = p
        .hosts
        .iter()
        .filter(|h| h.state != HostState::Available)
        .collect();
    futures::stream::iter(hosts)
        .map(|h| {
            let r = &r;
            async move {
                let (type_, reason, message, source) = match h.state {
                    HostState::Failed => ("Warning", "InstallScriptExecutionFailed",
                        "apt-get install kubelet=1.33.1-1.1 exited with status 100", "hostagent-controller"),
                    HostState::Releasing => ("Normal", "ByoHostReleaseSucceeded", "Released ByoHost", "byomachine-controller"),
                    HostState::Running | HostState::Paused => ("Normal", "BootstrapK8sNodeSucceeded", "k8s Node Bootstrapped", "hostagent-controller"),
                    _ => ("Normal", "ByoHostAttachSucceeded", "Attached to ByoMachine", "byomachine-controller"),
                };
                let name = format!("{}.fixture-{}", h.name, reason.to_lowercase());
                put(client, r, Some(&h.namespace), json!({
                    "metadata": {"name": name},
                    "involvedObject": {"apiVersion": format!("{INFRA}/v1beta1"), "kind": "ByoHost", "name": h.name, "namespace": h.namespace},
                    "reason": reason, "message": message, "type": type_,
                    "source": {"component": source},
                    "firstTimestamp": T0, "lastTimestamp": T0, "count": 1,
                }))
                .await
            }
        })
        .buffer_unordered(p.spec.concurrency.max(1))
        .try_collect::<Vec<_>>()
        .await?;
    Ok(())
}

/// Polls until `f` is true, for tests that wait on the API (at most `timeout`).
pub async fn eventually<F, Fut>(timeout: Duration, mut f: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = std::time::Instant::now() + timeout;
    loop {
        if f().await {
            return true;
        }
        if std::time::Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_fleet_has_every_host_state() {
        let p = plan("v1beta2", "ns", &FleetSpec::small());
        assert_eq!(p.machines.len(), 20);
        assert_eq!(p.hosts.len(), 30);
        assert_eq!(p.mds.len(), 2);
        for s in [
            HostState::Available,
            HostState::Reserved,
            HostState::Provisioning,
            HostState::Running,
            HostState::Releasing,
            HostState::Failed,
            HostState::Paused,
        ] {
            assert!(p.hosts.iter().any(|h| h.state == s), "{s:?}");
        }
        assert_eq!(p.machines.iter().filter(|m| m.control_plane).count(), 2);
        assert!(p.machines.iter().all(|m| m.host.is_some()));
    }

    #[test]
    fn bench_fleet_scales() {
        let p = plan("v1beta2", "ns", &FleetSpec::bench(5000, 5000));
        assert_eq!(p.hosts.len(), 5000);
        assert_eq!(p.machines.len(), 5000);
        assert_eq!(p.machines.iter().filter(|m| m.host.is_some()).count(), 4500);
    }
}
