//! `kubectl kamaji list`: KamajiControlPlanes and standalone TenantControlPlanes.

use clap::Args as ClapArgs;
use cli::{KubeFlags, OutputFlags};
use serde::Serialize;
use serde_json::Value;
use shared::discovery::ServerApis;
use shared::discovery::fields::{self, object_json};
use shared::error::Error;
use shared::render::{Cell, Human, Printer, Render, Table, Tone, object_name};

use crate::common;

#[derive(ClapArgs, Clone, Debug)]
pub struct Args {
    #[command(flatten)]
    pub kube: KubeFlags,
    #[command(flatten)]
    pub output: OutputFlags,
}

/// One control plane.
#[derive(Serialize, Clone, Debug)]
#[serde(rename_all = "camelCase")]
pub struct Row {
    /// kubectl's `metadata` (name, namespace, labels) of the KamajiControlPlane, else the TenantControlPlane.
    pub metadata: kcore::json::RowMeta,
    pub namespace: String,
    pub name: String,
    /// `KamajiControlPlane` or `TenantControlPlane` (standalone).
    pub kind: String,
    pub cluster: Option<String>,
    pub version: Option<String>,
    pub status: Option<String>,
    pub ready_replicas: i64,
    pub desired_replicas: i64,
    pub endpoint: Option<String>,
    pub datastore: Option<String>,
    pub age: String,
}

#[derive(Serialize, Clone, Debug)]
pub struct List {
    pub items: Vec<Row>,
    #[serde(skip)]
    pub all_namespaces: bool,
}

fn tone(status: &str) -> Tone {
    match status {
        "Ready" => Tone::Good,
        "NotReady" => Tone::Bad,
        "Sleeping" => Tone::Dim,
        _ => Tone::Warn,
    }
}

impl Render for List {
    fn labels(&self) -> Option<Vec<String>> {
        let text = self
            .items
            .iter()
            .map(|r| shared::render::labels_text(&r.metadata.labels));
        Some(text.collect())
    }
    fn human(&self) -> Human {
        let mut cols = vec![
            "name",
            "cluster",
            "version",
            "status",
            "ready/desired",
            "endpoint",
            "datastore",
            "age",
        ];
        if self.all_namespaces {
            cols.insert(0, "namespace");
        }
        let mut t = Table::new(cols).wide(["kind"]);
        for r in &self.items {
            let status = r.status.clone().unwrap_or_else(|| "Unknown".into());
            let mut cells = vec![
                Cell::from(r.name.as_str()),
                Cell::from(r.cluster.clone().unwrap_or_else(|| "<none>".into())),
                Cell::from(r.version.clone().unwrap_or_default()),
                Cell::new(status.clone(), tone(&status)),
                Cell::from(format!("{}/{}", r.ready_replicas, r.desired_replicas)),
                Cell::from(r.endpoint.clone().unwrap_or_default()),
                Cell::from(r.datastore.clone().unwrap_or_default()),
                Cell::from(r.age.as_str()),
                Cell::from(r.kind.as_str()),
            ];
            if self.all_namespaces {
                cells.insert(0, Cell::from(r.namespace.as_str()));
            }
            t.row(cells);
        }
        Human::Table(t)
    }
    fn names(&self) -> Option<Vec<String>> {
        Some(
            self.items
                .iter()
                .map(|r| {
                    let g = if r.kind == "KamajiControlPlane" {
                        "controlplane.cluster.x-k8s.io"
                    } else {
                        "kamaji.clastix.io"
                    };
                    object_name(&r.kind, g, &r.name)
                })
                .collect(),
        )
    }
}

fn s(v: Option<&Value>) -> Option<String> {
    v.and_then(Value::as_str)
        .filter(|x| !x.is_empty())
        .map(str::to_string)
}

/// The row of a control plane.
pub fn row(kcp: Option<&Value>, tcp: Option<&Value>) -> Row {
    let t = common::Target {
        namespace: String::new(),
        name: String::new(),
        kcp: kcp.cloned(),
        tcp: tcp.cloned(),
    };
    let main = kcp.or(tcp).cloned().unwrap_or(Value::Null);
    let tcp_v = tcp.cloned().unwrap_or(Value::Null);
    let (ready, desired) = match kcp {
        Some(k) => {
            let r = fields::replicas(k);
            (r.ready.unwrap_or(0), r.desired.unwrap_or(2))
        }
        None => (
            tcp_v["status"]["kubernetesResources"]["deployment"]["readyReplicas"]
                .as_i64()
                .unwrap_or(0),
            tcp_v["spec"]["controlPlane"]["deployment"]["replicas"]
                .as_i64()
                .unwrap_or(2),
        ),
    };
    Row {
        metadata: kcore::json::RowMeta::of(&main),
        namespace: s(main["metadata"].get("namespace")).unwrap_or_default(),
        name: s(main["metadata"].get("name")).unwrap_or_default(),
        kind: if kcp.is_some() {
            "KamajiControlPlane"
        } else {
            "TenantControlPlane"
        }
        .into(),
        cluster: t.cluster_name(),
        version: s(kcp.and_then(|k| k["status"].get("version")))
            .or_else(|| {
                s(fields::at(
                    &tcp_v,
                    &["status", "kubernetesResources", "version", "version"],
                ))
            })
            .or_else(|| s(kcp.and_then(|k| k["spec"].get("version"))))
            .or_else(|| s(fields::at(&tcp_v, &["spec", "kubernetes", "version"]))),
        status: tcp.and_then(common::tcp_phase).or_else(|| {
            kcp.map(|k| {
                if fields::control_plane_ready(k) {
                    "Ready".into()
                } else {
                    "Provisioning".into()
                }
            })
        }),
        ready_replicas: ready,
        desired_replicas: desired,
        endpoint: common::endpoint(&t).map(|(h, p)| format!("{h}:{p}")),
        datastore: s(fields::at(&tcp_v, &["status", "storage", "dataStoreName"]))
            .or_else(|| s(kcp.and_then(|k| k["spec"].get("dataStoreName"))))
            .or_else(|| s(tcp_v["spec"].get("dataStore"))),
        age: common::age(&main),
    }
}

pub async fn run(args: &Args) -> Result<(), Error> {
    let conn = args.kube.connect().await?;
    let apis = ServerApis::discover(&conn).await?;
    let tcp_ar = common::tcp_resource(&apis)?;
    let ns = conn.list_namespace().map(str::to_string);
    let tcps = common::list(&conn, &tcp_ar, ns.as_deref(), None).await?;
    let kcps = match apis.kamaji_control_plane() {
        Some(ar) => common::list(&conn, &ar, ns.as_deref(), None).await?,
        None => Vec::new(),
    };
    let mut items = Vec::new();
    let mut used = Vec::new();
    for k in &kcps {
        let kv = object_json(k);
        let same_ns: Vec<_> = tcps
            .iter()
            .filter(|t| t.metadata.namespace == k.metadata.namespace)
            .cloned()
            .collect();
        let tcp = common::tcp_of(&kv, &same_ns).map(object_json);
        if let Some(t) = &tcp {
            used.push(t["metadata"]["uid"].clone());
        }
        items.push(row(Some(&kv), tcp.as_ref()));
    }
    for t in &tcps {
        let tv = object_json(t);
        if used.contains(&tv["metadata"]["uid"]) || common::owned_by_kcp(t) {
            continue;
        }
        items.push(row(None, Some(&tv)));
    }
    items.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    if items.is_empty()
        && matches!(
            args.output.output,
            cli::OutputFormat::Table | cli::OutputFormat::Wide
        )
    {
        let where_ = match &ns {
            Some(n) => format!("in {n} namespace"),
            None => "in any namespace".into(),
        };
        shared::render::info(&format!("No Kamaji control planes found {where_}."));
        return Ok(());
    }
    Printer::new(&args.output).print(&List {
        items,
        all_namespaces: conn.all_namespaces,
    })
}
