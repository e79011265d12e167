//! `kubectl kamaji status NAME`: one control plane in sections, as `kubectl cnpg status` does.

use clap::Args as ClapArgs;
use cli::{Conn, KubeFlags, OutputFlags};
use k8s_openapi::api::core::v1::Pod;
use kclient::discovery::ServerApis;
use kclient::error::{Error, Op};
use kclient::render::Printer;
use kcore::build::pki;
use kcore::fields::{self, Condition, object_json};
use kcore::kamaji::certificates::SECRET_SUFFIXES as CERT_SECRETS;
use kcore::labels::CLUSTER_NAME_LABEL;
use kcore::ops::summary::{UpgradeSummary, summarize};
use kube::api::{Api, ListParams};
use serde::Serialize;
use serde_json::Value;

use crate::common::control_plane::{self, ControlPlane};
use crate::common::control_plane_row::ControlPlaneRow;
use crate::common::secrets;

mod render;

#[derive(ClapArgs, Clone, Debug)]
pub struct Args {
    /// The KamajiControlPlane (or standalone TenantControlPlane)
    #[arg(value_name = "CONTROL_PLANE")]
    pub name: String,
    #[command(flatten)]
    pub kube: KubeFlags,
    #[command(flatten)]
    pub output: OutputFlags,
}

#[derive(Serialize, Clone, Debug, Default)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub name: String,
    pub namespace: String,
    pub cluster: Option<String>,
    pub tenant_control_plane: Option<String>,
    pub desired_version: Option<String>,
    pub version: Option<String>,
    pub status: Option<String>,
    pub ready: bool,
    pub ready_replicas: i64,
    pub desired_replicas: i64,
    pub endpoint: Option<String>,
    pub datastore: Option<String>,
    pub infrastructure: Option<String>,
    pub age: String,
}

#[derive(Serialize, Clone, Debug)]
#[serde(rename_all = "camelCase")]
pub struct PodRow {
    pub name: String,
    pub phase: String,
    pub ready: String,
    pub restarts: i64,
    pub node: String,
}

#[derive(Serialize, Clone, Debug)]
#[serde(rename_all = "camelCase")]
pub struct AddonRow {
    pub name: String,
    pub enabled: bool,
    pub details: String,
}

#[derive(Serialize, Clone, Debug)]
#[serde(rename_all = "camelCase")]
pub struct CertRow {
    pub secret: String,
    pub key: String,
    pub subject: String,
    pub not_after: String,
    pub days_left: i64,
}

#[derive(Serialize, Clone, Debug)]
#[serde(rename_all = "camelCase")]
pub struct WorkerRow {
    pub machine_deployment: String,
    pub desired: i64,
    pub ready: i64,
    pub version: String,
}

#[derive(Serialize, Clone, Debug, Default)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    pub summary: Summary,
    pub pods: Vec<PodRow>,
    pub conditions: Vec<Condition>,
    pub addons: Vec<AddonRow>,
    pub certificates: Vec<CertRow>,
    pub workers: Vec<WorkerRow>,
    /// The owning Cluster's ClusterUpgrade, when one is under way or failed
    /// (`kcore::ops::summary`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upgrade: Option<UpgradeSummary>,
    pub hints: Vec<String>,
}

fn s(v: Option<&Value>) -> Option<String> {
    v.and_then(Value::as_str)
        .filter(|x| !x.is_empty())
        .map(str::to_string)
}

/// The owning Cluster's infrastructure ("KIND name") and the Cluster itself, when it exists.
async fn owning_cluster(
    conn: &Conn,
    apis: &ServerApis,
    ns: &str,
    cluster: Option<&str>,
) -> Result<(Option<String>, Option<Value>), Error> {
    if let Some(c) = cluster
        && let Ok(ar) = apis.cluster()
        && let Some(obj) = kclient::api::get_opt(conn, &ar, Some(ns), c).await?
    {
        let v = object_json(&obj);
        let infrastructure =
            fields::cluster_infrastructure_ref(&v).map(|r| format!("{} {}", r.kind, r.name));
        return Ok((infrastructure, Some(v)));
    }
    Ok((None, None))
}

/// The ClusterUpgrade of the owning Cluster (named after it), where the API is served: one
/// GET; `None` when there is no Cluster, no such object, it cannot be read, or it is not shown
/// (`kcore::ops::summary`).
async fn cluster_upgrade(
    conn: &Conn,
    apis: &ServerApis,
    ns: &str,
    cluster: Option<&str>,
) -> Option<UpgradeSummary> {
    let cluster = cluster?;
    let ar = apis
        .kind(kcore::groups::OPS_GROUP, "ClusterUpgrade")
        .map(|k| k.resource(k.version()))?;
    // The upgrade is a bonus: a user who may not read ClusterUpgrades still gets the status.
    let cu = kclient::api::get_json_opt(conn, &ar, Some(ns), cluster).await;
    summarize(&cu.ok()??)
}

/// Hints about what is missing around the control plane: its Cluster, its TenantControlPlane.
fn ownership_hints(t: &ControlPlane, cluster: Option<&str>) -> Vec<String> {
    let mut hints = Vec::new();
    if t.kcp.is_some() && cluster.is_none() {
        hints.push(format!(
            "no Cluster owns this KamajiControlPlane: create one whose spec.controlPlaneRef names it (kubectl kamaji create {} ... re-applies the set)",
            t.name
        ));
    }
    if t.kcp.is_some() && t.tcp.is_none() {
        hints.push(
            "no TenantControlPlane yet: is the reconciler running? (kubectl kamaji install)".into(),
        );
    }
    hints
}

fn pod_row(p: &Pod) -> PodRow {
    let st = p.status.clone().unwrap_or_default();
    let cs = st.container_statuses.clone().unwrap_or_default();
    PodRow {
        name: p.metadata.name.clone().unwrap_or_default(),
        phase: st.phase.clone().unwrap_or_default(),
        ready: format!("{}/{}", cs.iter().filter(|c| c.ready).count(), cs.len()),
        restarts: cs.iter().map(|c| i64::from(c.restart_count)).sum(),
        node: p
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .unwrap_or_default(),
    }
}

/// The control-plane pods: the TenantControlPlane's Deployment selector, else Kamaji's name label.
async fn pods(conn: &Conn, ns: &str, tcp: &Value, tcp_name: &str) -> Result<Vec<PodRow>, Error> {
    let selector = s(fields::at(
        tcp,
        &["status", "kubernetesResources", "deployment", "selector"],
    ))
    .unwrap_or_else(|| format!("{}={tcp_name}", kcore::plan::teardown::KAMAJI_NAME_LABEL));
    let pods_api: Api<Pod> = Api::namespaced(conn.client.clone(), ns);
    let pods = pods_api
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(|e| {
            conn.error(
                e,
                &Op::new("list", "", "pods", "Pod").in_namespace(Some(ns)),
            )
        })?;
    Ok(pods.items.iter().map(pod_row).collect())
}

/// The KamajiControlPlane's conditions, else the TenantControlPlane's.
fn conditions(kcp: &Value, tcp: &Value) -> Vec<Condition> {
    let conditions = fields::conditions(kcp);
    if conditions.is_empty() {
        fields::conditions(tcp)
    } else {
        conditions
    }
}

fn condition_hints(conditions: &[Condition]) -> impl Iterator<Item = String> + '_ {
    conditions.iter().filter(|c| c.is_problem()).map(|c| {
        format!(
            "{} is False{}",
            c.type_,
            c.message
                .as_ref()
                .map(|m| format!(": {m}"))
                .unwrap_or_default()
        )
    })
}

/// The three addons, from the KamajiControlPlane's spec.addons, else the TenantControlPlane's.
fn addons(kcp: &Value, tcp: &Value) -> Vec<AddonRow> {
    let addons_spec = kcp["spec"]["addons"]
        .as_object()
        .cloned()
        .or_else(|| tcp["spec"]["addons"].as_object().cloned())
        .unwrap_or_default();
    [
        ("coreDNS", "CoreDNS"),
        ("kubeProxy", "kube-proxy"),
        ("konnectivity", "Konnectivity"),
    ]
    .iter()
    .map(|(key, label)| {
        let v = addons_spec.get(*key);
        let details = match v {
            Some(v) if v.as_object().is_some_and(|m| !m.is_empty()) => {
                serde_json::to_string(v).unwrap_or_default()
            }
            Some(_) => "defaults".into(),
            None => String::new(),
        };
        AddonRow {
            name: label.to_string(),
            enabled: v.is_some(),
            details,
        }
    })
    .collect()
}

/// Every certificate in the TenantControlPlane's Secrets that exist.
async fn certificates(conn: &Conn, ns: &str, tcp_name: &str) -> Result<Vec<CertRow>, Error> {
    let now = jiff::Timestamp::now().as_second();
    let mut certificates = Vec::new();
    for suffix in CERT_SECRETS {
        let name = format!("{tcp_name}-{suffix}");
        if let Some((_, data)) = secrets::secret_data(conn, ns, &name).await? {
            let rows = pki::secret_certificates(&data)
                .into_iter()
                .map(|(key, c)| CertRow {
                    secret: name.clone(),
                    key,
                    subject: c.subject,
                    not_after: c.not_after,
                    days_left: (c.not_after_unix - now).div_euclid(86_400),
                });
            certificates.extend(rows);
        }
    }
    Ok(certificates)
}

/// A hint for each certificate expired or expiring within 30 days.
fn certificate_hints<'a>(
    certificates: &'a [CertRow],
    name: &'a str,
) -> impl Iterator<Item = String> + 'a {
    certificates.iter().filter_map(move |c| {
        if c.days_left < 0 {
            Some(format!(
                "{} {} expired on {}: kubectl kamaji certificates rotate {} --all",
                c.secret, c.key, c.not_after, name
            ))
        } else if c.days_left < 30 {
            Some(format!(
                "{} {} expires in {} days: kubectl kamaji certificates rotate {}",
                c.secret, c.key, c.days_left, name
            ))
        } else {
            None
        }
    })
}

/// The Cluster's MachineDeployments.
async fn workers(
    conn: &Conn,
    apis: &ServerApis,
    ns: &str,
    cluster: Option<&str>,
) -> Result<Vec<WorkerRow>, Error> {
    let mut workers = Vec::new();
    if let Some(c) = cluster
        && let Ok(ar) = apis.capi_kind("MachineDeployment")
    {
        for md in kclient::api::list(
            conn,
            &ar,
            Some(ns),
            Some(&format!("{CLUSTER_NAME_LABEL}={c}")),
        )
        .await?
        {
            let v = object_json(&md);
            let r = fields::replicas(&v);
            workers.push(WorkerRow {
                machine_deployment: v["metadata"]["name"].as_str().unwrap_or_default().into(),
                desired: r.desired.unwrap_or(0),
                ready: r.ready.unwrap_or(0),
                version: v["spec"]["template"]["spec"]["version"]
                    .as_str()
                    .unwrap_or_default()
                    .into(),
            });
        }
    }
    Ok(workers)
}

/// Hints about the control plane's state: asleep at 0 replicas, its Cluster paused.
fn state_hints(
    t: &ControlPlane,
    row: &ControlPlaneRow,
    cluster_obj: Option<&Value>,
) -> Vec<String> {
    let mut hints = Vec::new();
    if row.desired_replicas == 0 {
        hints.push(format!("the control plane is asleep (0 replicas): kubectl kamaji scale {} --replicas 2 wakes it", t.name));
    }
    if let Some(c) = cluster_obj
        && c["spec"]["paused"] == Value::Bool(true)
    {
        hints.push(format!(
            "Cluster {} is paused",
            c["metadata"]["name"].as_str().unwrap_or_default()
        ));
    }
    hints
}

fn summary(
    t: &ControlPlane,
    row: ControlPlaneRow,
    cluster: Option<String>,
    infrastructure: Option<String>,
) -> Summary {
    let kcp = t.kcp.as_ref().unwrap_or(&Value::Null);
    let tcp = t.tcp.as_ref().unwrap_or(&Value::Null);
    Summary {
        name: t.name.clone(),
        namespace: t.namespace.clone(),
        cluster,
        tenant_control_plane: t.tcp.as_ref().map(|_| t.tcp_name()),
        desired_version: s(kcp["spec"].get("version"))
            .or_else(|| s(fields::at(tcp, &["spec", "kubernetes", "version"]))),
        version: s(fields::at(
            tcp,
            &["status", "kubernetesResources", "version", "version"],
        ))
        .or_else(|| s(kcp["status"].get("version"))),
        ready: match &t.kcp {
            Some(k) => fields::control_plane_ready(k),
            None => row.status.as_deref() == Some("Ready"),
        },
        status: row.status,
        ready_replicas: row.ready_replicas,
        desired_replicas: row.desired_replicas,
        endpoint: row.endpoint,
        datastore: row.datastore,
        infrastructure,
        age: row.age,
    }
}

pub async fn collect(conn: &Conn, apis: &ServerApis, t: &ControlPlane) -> Result<Status, Error> {
    let ns = t.namespace.as_str();
    let kcp = t.kcp.as_ref().unwrap_or(&Value::Null);
    let tcp = t.tcp.as_ref().unwrap_or(&Value::Null);
    let tcp_name = t.tcp_name();
    let cluster = t.cluster_name();
    let row = ControlPlaneRow::of(t.kcp.as_ref(), t.tcp.as_ref());

    let (owner, upgrade) = tokio::join!(
        owning_cluster(conn, apis, ns, cluster.as_deref()),
        cluster_upgrade(conn, apis, ns, cluster.as_deref()),
    );
    let (infrastructure, cluster_obj) = owner?;
    let mut hints = ownership_hints(t, cluster.as_deref());
    let pods = pods(conn, ns, tcp, &tcp_name).await?;
    let conditions = conditions(kcp, tcp);
    hints.extend(condition_hints(&conditions));
    let addons = addons(kcp, tcp);
    let certificates = certificates(conn, ns, &tcp_name).await?;
    hints.extend(certificate_hints(&certificates, &t.name));
    let workers = workers(conn, apis, ns, cluster.as_deref()).await?;
    hints.extend(state_hints(t, &row, cluster_obj.as_ref()));

    Ok(Status {
        summary: summary(t, row, cluster, infrastructure),
        pods,
        conditions,
        addons,
        certificates,
        workers,
        upgrade,
        hints,
    })
}

pub async fn run(args: &Args) -> Result<(), Error> {
    let conn = args.kube.connect().await?;
    let apis = ServerApis::discover(&conn).await?;
    let t = control_plane::resolve(&conn, &apis, &args.name).await?;
    let status = collect(&conn, &apis, &t).await?;
    Printer::new(&args.output).print(&status)
}
