//! `kubectl capi list`: the clusters, with their control plane, workers, version and endpoint.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use clap::Args as ClapArgs;
use kclient::discovery::ServerApis;
use kclient::error::Error;
use kclient::render::{Cell, Human, Printer, Render, RowObjects, Table, Tone};
use kcore::fields::{self, Replicas};
use kcore::groups::CAPI_GROUP;
use kcore::json;
use kube::api::ListParams;
use serde::Serialize;
use serde_json::Value;

use crate::common::list_flags::ListFlags;
use crate::common::{cells, lists, time};

#[derive(ClapArgs, Clone, Debug)]
#[command(
    mut_arg("selector", |a| a.help("Label selector over Cluster labels")),
    after_help = "Clusters of every namespace are listed unless -n is given.\n\nExamples:\n  kubectl capi list\n  kubectl capi list -n team-a -o wide\n  kubectl capi list -l env=prod -o json"
)]
pub struct Args {
    #[command(flatten)]
    pub list: ListFlags,
}

/// Ready out of desired.
#[derive(Serialize, Debug, Clone, Copy, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ReadyOf {
    pub ready: i64,
    pub desired: i64,
}

impl ReadyOf {
    fn text(&self) -> String {
        format!("{}/{}", self.ready, self.desired)
    }
    fn tone(&self) -> Tone {
        if self.ready >= self.desired {
            Tone::Good
        } else {
            Tone::Warn
        }
    }
}

/// One row of `list`.
#[derive(Serialize, Debug, Clone)]
#[serde(rename_all = "camelCase")]
pub struct ClusterRow {
    /// kubectl's `metadata` (name, namespace, labels) of the Cluster.
    pub metadata: kcore::json::RowMeta,
    pub name: String,
    pub namespace: String,
    pub phase: Option<String>,
    /// The control-plane kind (KamajiControlPlane, KubeadmControlPlane, ...).
    pub control_plane_kind: Option<String>,
    pub control_plane: Option<ReadyOf>,
    pub workers: Option<ReadyOf>,
    pub version: Option<String>,
    pub endpoint: Option<String>,
    /// The infrastructure cluster kind (ByoCluster, ...).
    pub infrastructure: Option<String>,
    /// Status of the Available condition (v1beta2), else Ready.
    pub available: Option<String>,
    pub message: Option<String>,
    pub paused: bool,
    /// NVIDIA BCM's KubeCluster template (`infrav1.nvidia.x-k8s.io/capi-kube-template`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bcm_template: Option<String>,
    pub created: Option<String>,
    pub age_seconds: Option<i64>,
}

#[derive(Serialize, Debug)]
#[serde(rename_all = "camelCase")]
pub struct ClusterList {
    pub items: Vec<ClusterRow>,
}

impl Render for ClusterList {
    fn human(&self) -> Human {
        let mut t = Table::new([
            "NAME",
            "NAMESPACE",
            "PHASE",
            "CONTROL PLANE",
            "WORKERS",
            "VERSION",
            "ENDPOINT",
            "INFRASTRUCTURE",
            "AGE",
        ])
        .wide(["AVAILABLE", "PAUSED", "BCM TEMPLATE", "MESSAGE"]);
        for r in &self.items {
            let cp = match (&r.control_plane, &r.control_plane_kind) {
                (Some(c), Some(k)) => Cell::new(format!("{} {k}", c.text()), c.tone()),
                (Some(c), None) => Cell::new(c.text(), c.tone()),
                (None, Some(k)) => Cell::new(format!("?/? {k}"), Tone::Warn),
                (None, None) => Cell::from("<none>"),
            };
            let workers = match &r.workers {
                Some(w) => Cell::new(w.text(), w.tone()),
                None => Cell::from("0/0"),
            };
            let phase_tone = match r.phase.as_deref() {
                Some("Provisioned") => Tone::Good,
                Some("Failed") => Tone::Bad,
                _ => Tone::Warn,
            };
            t.row([
                Cell::from(&r.name),
                Cell::from(&r.namespace),
                Cell::new(cells::or_none(r.phase.as_deref()), phase_tone),
                cp,
                workers,
                Cell::from(cells::or_none(r.version.as_deref())),
                Cell::from(cells::or_none(r.endpoint.as_deref())),
                Cell::from(cells::or_none(r.infrastructure.as_deref())),
                Cell::from(kcore::text::age_cell(r.age_seconds)),
                Cell::status(r.available.as_deref().unwrap_or("Unknown")),
                Cell::from(if r.paused { "true" } else { "false" }),
                Cell::from(cells::or_none(r.bcm_template.as_deref())),
                Cell::from(r.message.clone().unwrap_or_default().replace('\n', " ")),
            ]);
        }
        Human::Table(t)
    }
    fn objects(&self) -> Option<RowObjects<'_>> {
        RowObjects::of("Cluster", CAPI_GROUP, &self.items, |r| &r.metadata)
    }
}

fn ready_of(r: &Replicas) -> Option<ReadyOf> {
    let desired = r.desired.or(r.current)?;
    Some(ReadyOf {
        ready: r.ready.or(r.available).unwrap_or(0),
        desired,
    })
}

/// The row of one cluster (pure). `control_planes` is keyed by `namespace/name` of objects of
/// the cluster's control-plane kind; `deployments` are all MachineDeployments in scope.
pub fn row(
    c: &Value,
    control_planes: &HashMap<String, &Value>,
    deployments: &[Value],
    now: jiff::Timestamp,
) -> ClusterRow {
    let ns = json::namespace(c);
    let name = json::name(c);
    let cp_ref = fields::cluster_control_plane_ref(c);
    let cp = cp_ref
        .as_ref()
        .and_then(|r| control_planes.get(&format!("{ns}/{}", r.name)).copied());
    let cp_replicas = ready_of(&fields::cluster_control_plane_replicas(c))
        .or_else(|| cp.and_then(|cp| ready_of(&fields::replicas(cp))));
    let workers = ready_of(&fields::cluster_worker_replicas(c)).or_else(|| {
        let mds: Vec<&Value> = deployments
            .iter()
            .filter(|d| {
                json::namespace(d) == ns && json::str_at(d, &["spec", "clusterName"]) == Some(name)
            })
            .collect();
        if mds.is_empty() {
            return None;
        }
        let mut sum = ReadyOf::default();
        for d in mds {
            let r = fields::replicas(d);
            sum.ready += r.ready.unwrap_or(0);
            sum.desired += r.desired.or(r.current).unwrap_or(0);
        }
        Some(sum)
    });
    let version = json::str_at(c, &["spec", "topology", "version"])
        .or_else(|| cp.and_then(|cp| json::str_at(cp, &["spec", "version"])))
        .or_else(|| cp.and_then(|cp| json::str_at(cp, &["status", "version"])))
        .map(str::to_string);
    let endpoint = json::str_at(c, &["spec", "controlPlaneEndpoint", "host"]).map(|h| {
        match json::i64_at(c, &["spec", "controlPlaneEndpoint", "port"]) {
            Some(p) => format!("{h}:{p}"),
            None => h.to_string(),
        }
    });
    let summary = fields::summary_condition(c);
    ClusterRow {
        metadata: json::RowMeta::of(c),
        name: name.to_string(),
        namespace: ns.to_string(),
        phase: json::str_at(c, &["status", "phase"]).map(str::to_string),
        control_plane_kind: cp_ref.as_ref().map(|r| r.kind.clone()),
        control_plane: cp_replicas,
        workers,
        version,
        endpoint,
        infrastructure: fields::cluster_infrastructure_ref(c).map(|r| r.kind),
        available: summary.as_ref().map(|s| s.status.clone()),
        message: summary.and_then(|s| s.message),
        paused: json::bool_at(c, &["spec", "paused"]).unwrap_or(false)
            || json::has_annotation(c, kcore::labels::PAUSED_ANNOTATION),
        bcm_template: kcore::labels::bcm_template(c).map(str::to_string),
        created: json::str_at(c, &["metadata", "creationTimestamp"]).map(str::to_string),
        age_seconds: time::age_of(c, now),
    }
}

pub async fn run(args: &Args) -> Result<(), Error> {
    let printer = Printer::new(&args.list.output);
    let conn = args.list.kube.connect().await?;
    // All namespaces unless -n.
    let namespace =
        (conn.namespace_explicit && !conn.all_namespaces).then(|| conn.namespace.clone());
    let apis = ServerApis::discover(&conn).await?;
    let cluster_ar = apis.cluster()?;
    let mut lp = ListParams::default();
    if let Some(s) = args.list.selector() {
        lp = lp.labels(s);
    }
    let md_ar = apis.capi_kind("MachineDeployment").ok();
    let all = ListParams::default();
    let (clusters, deployments) = tokio::try_join!(
        kclient::api::list_json(&conn, &cluster_ar, namespace.as_deref(), &lp),
        lists::list_opt(&conn, md_ar.as_ref(), namespace.as_deref(), &all),
    )?;
    // One LIST per control-plane kind the clusters reference.
    let kinds: BTreeSet<(String, String)> = clusters
        .iter()
        .filter_map(fields::cluster_control_plane_ref)
        .map(|r| (r.api_group, r.kind))
        .collect();
    let mut cp_lists: BTreeMap<(String, String), Vec<Value>> = BTreeMap::new();
    for (group, kind) in kinds {
        let r = fields::ObjectRef {
            api_group: group.clone(),
            kind: kind.clone(),
            ..Default::default()
        };
        // A control-plane provider that is not installed leaves its column to the cluster status.
        let Ok(ar) = apis.resolve_ref(&r) else {
            continue;
        };
        match kclient::api::list_json(&conn, &ar, namespace.as_deref(), &ListParams::default())
            .await
        {
            Ok(items) => {
                cp_lists.insert((group, kind), items);
            }
            Err(e) => tracing::info!("listing {kind}: {e}"),
        }
    }
    let now = time::now();
    let mut items: Vec<ClusterRow> = clusters
        .iter()
        .map(|c| {
            let by_name: HashMap<String, &Value> = fields::cluster_control_plane_ref(c)
                .and_then(|r| cp_lists.get(&(r.api_group, r.kind)))
                .map(|l| {
                    l.iter()
                        .map(|o| (format!("{}/{}", json::namespace(o), json::name(o)), o))
                        .collect()
                })
                .unwrap_or_default();
            row(c, &by_name, &deployments, now)
        })
        .collect();
    items.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    if items.is_empty() && !args.list.output.output.is_structured() {
        kclient::render::none_found("clusters", namespace.as_deref());
        return Ok(());
    }
    printer.print(&ClusterList { items })
}
