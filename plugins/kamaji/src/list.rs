//! `kubectl kamaji list`: KamajiControlPlanes and standalone TenantControlPlanes, a
//! `common::control_plane_row` each.

use kclient::discovery::ServerApis;
use kclient::error::Error;
use kclient::render::{Cell, Human, Printer, Render, Table, Tone, object_name};
use kcore::fields::object_json;
use serde::Serialize;

use crate::common::control_plane;
use crate::common::control_plane_row::ControlPlaneRow;

/// kubectl's connection and output flags, nothing else.
pub type Args = cli::ListArgs;

#[derive(Serialize, Clone, Debug)]
pub struct List {
    pub items: Vec<ControlPlaneRow>,
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
        kclient::render::labels_column(self.items.iter().map(|r| &r.metadata.labels))
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
                        kcore::groups::CONTROLPLANE_GROUP
                    } else {
                        kcore::groups::KAMAJI_GROUP
                    };
                    object_name(&r.kind, g, &r.name)
                })
                .collect(),
        )
    }
}

pub async fn run(args: &Args) -> Result<(), Error> {
    let conn = args.kube.connect().await?;
    let apis = ServerApis::discover(&conn).await?;
    let tcp_ar = control_plane::tcp_resource(&apis)?;
    let ns = conn.list_namespace().map(str::to_string);
    let tcps = kclient::api::list(&conn, &tcp_ar, ns.as_deref(), None).await?;
    let kcps = match apis.kamaji_control_plane() {
        Some(ar) => kclient::api::list(&conn, &ar, ns.as_deref(), None).await?,
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
        let tcp = control_plane::tcp_of(&kv, &same_ns).map(object_json);
        if let Some(t) = &tcp {
            used.push(t["metadata"]["uid"].clone());
        }
        items.push(ControlPlaneRow::of(Some(&kv), tcp.as_ref()));
    }
    for t in &tcps {
        let tv = object_json(t);
        if used.contains(&tv["metadata"]["uid"]) || control_plane::owned_by_kcp(t) {
            continue;
        }
        items.push(ControlPlaneRow::of(None, Some(&tv)));
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
        kclient::render::info(&format!("No Kamaji control planes found {where_}."));
        return Ok(());
    }
    Printer::new(&args.output).print(&List {
        items,
        all_namespaces: conn.all_namespaces,
    })
}
