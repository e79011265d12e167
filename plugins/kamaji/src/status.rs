//! `kubectl kamaji status NAME`: one control plane in sections, as `kubectl cnpg status` does.

use base64::Engine;
use clap::Args as ClapArgs;
use cli::{Conn, KubeFlags, OutputFlags};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use serde::Serialize;
use serde_json::Value;
use shared::build::kamaji::CLUSTER_NAME_LABEL;
use shared::build::pki;
use shared::discovery::ServerApis;
use shared::discovery::fields::{self, Condition, object_json};
use shared::error::{Error, Op};
use shared::render::{Fields, Human, Printer, Render, Table};

use crate::common::{self, Target};

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
    pub hints: Vec<String>,
}

fn section(out: &mut String, title: &str) {
    if !out.is_empty() {
        out.push('\n');
    }
    out.push_str(title);
    out.push('\n');
}

impl Render for Status {
    fn human(&self) -> Human {
        let s = &self.summary;
        let mut out = String::new();
        section(&mut out, "Control plane");
        let mut f = Fields::new();
        f.add("Name", format!("{}/{}", s.namespace, s.name));
        f.add(
            "Cluster",
            s.cluster.clone().unwrap_or_else(|| "<none>".into()),
        );
        f.add(
            "TenantControlPlane",
            s.tenant_control_plane
                .clone()
                .unwrap_or_else(|| "<not created>".into()),
        );
        let version = match (&s.version, &s.desired_version) {
            (Some(v), Some(d)) if v != d => format!("{v} (upgrading to {d})"),
            (Some(v), _) => v.clone(),
            (None, Some(d)) => format!("{d} (not running yet)"),
            (None, None) => String::new(),
        };
        f.add("Version", version);
        f.add(
            "Status",
            s.status.clone().unwrap_or_else(|| "Unknown".into()),
        );
        f.add(
            "Replicas",
            format!("{}/{} ready", s.ready_replicas, s.desired_replicas),
        );
        f.add(
            "Endpoint",
            s.endpoint
                .clone()
                .unwrap_or_else(|| "<not assigned>".into()),
        );
        f.add(
            "DataStore",
            s.datastore
                .clone()
                .unwrap_or_else(|| "<Kamaji default>".into()),
        );
        f.add(
            "Infrastructure",
            s.infrastructure.clone().unwrap_or_else(|| "<none>".into()),
        );
        f.add("Age", s.age.as_str());
        out.push_str(&f.render(false));

        section(&mut out, "Control-plane pods");
        if self.pods.is_empty() {
            out.push_str("  none found\n");
        } else {
            let mut t = Table::new(["name", "status", "ready", "restarts", "node"]);
            for p in &self.pods {
                t.row([
                    p.name.clone(),
                    p.phase.clone(),
                    p.ready.clone(),
                    p.restarts.to_string(),
                    p.node.clone(),
                ]);
            }
            out.push_str(&t.render(false, true, false));
        }

        section(&mut out, "Conditions");
        if self.conditions.is_empty() {
            out.push_str("  none reported\n");
        } else {
            let mut t = Table::new(["type", "status", "reason", "message"]);
            for c in &self.conditions {
                t.row([
                    c.type_.clone(),
                    c.status.clone(),
                    c.reason.clone().unwrap_or_default(),
                    c.message.clone().unwrap_or_default(),
                ]);
            }
            out.push_str(&t.render(false, true, false));
        }

        section(&mut out, "Addons");
        let mut t = Table::new(["addon", "enabled", "details"]);
        for a in &self.addons {
            t.row([
                a.name.clone(),
                if a.enabled { "yes" } else { "no" }.to_string(),
                a.details.clone(),
            ]);
        }
        out.push_str(&t.render(false, true, false));

        section(&mut out, "Certificates");
        if self.certificates.is_empty() {
            out.push_str("  none found\n");
        } else {
            let mut t = Table::new(["secret", "key", "subject", "expires", "days left"]);
            for c in &self.certificates {
                t.row([
                    c.secret.clone(),
                    c.key.clone(),
                    c.subject.clone(),
                    c.not_after.clone(),
                    c.days_left.to_string(),
                ]);
            }
            out.push_str(&t.render(false, true, false));
        }

        section(&mut out, "Workers");
        if self.workers.is_empty() {
            out.push_str("  no MachineDeployments (join workers with kubectl kamaji token join)\n");
        } else {
            let mut t = Table::new(["machinedeployment", "ready/desired", "version"]);
            for w in &self.workers {
                t.row([
                    w.machine_deployment.clone(),
                    format!("{}/{}", w.ready, w.desired),
                    w.version.clone(),
                ]);
            }
            out.push_str(&t.render(false, true, false));
        }

        if !self.hints.is_empty() {
            section(&mut out, "Hints");
            for h in &self.hints {
                out.push_str(&format!("  - {h}\n"));
            }
        }
        Human::Text(out)
    }
}

fn s(v: Option<&Value>) -> Option<String> {
    v.and_then(Value::as_str)
        .filter(|x| !x.is_empty())
        .map(str::to_string)
}

/// Certificates in a Secret: `*.crt` keys, and the client certificates inside kubeconfigs.
pub fn secret_certificates(
    name: &str,
    data: &std::collections::BTreeMap<String, Vec<u8>>,
    now: i64,
) -> Vec<CertRow> {
    let mut out = Vec::new();
    let mut push = |key: &str, pem: &[u8]| {
        for c in pki::pem_certificates(pem) {
            out.push(CertRow {
                secret: name.to_string(),
                key: key.to_string(),
                subject: c.subject.clone(),
                not_after: c.not_after.clone(),
                days_left: (c.not_after_unix - now).div_euclid(86_400),
            });
        }
    };
    for (k, v) in data {
        if k.ends_with(".crt") {
            push(k, v);
        } else if k.ends_with(".conf") {
            // A kubeconfig: its users' client-certificate-data.
            let Ok(text) = std::str::from_utf8(v) else {
                continue;
            };
            let Ok(kc) = shared::kubeconfig::parse(text, k) else {
                continue;
            };
            for u in kc["users"].as_array().into_iter().flatten() {
                if let Some(b64) = u["user"]["client-certificate-data"].as_str()
                    && let Ok(pem) = base64::engine::general_purpose::STANDARD.decode(b64)
                {
                    push(k, &pem);
                }
            }
        }
    }
    out
}

const CERT_SECRETS: [&str; 9] = [
    "ca",
    "api-server-certificate",
    "api-server-kubelet-client-certificate",
    "front-proxy-ca-certificate",
    "front-proxy-client-certificate",
    "konnectivity-certificate",
    "datastore-certificate",
    "admin-kubeconfig",
    "sa-certificate",
];

pub async fn collect(conn: &Conn, apis: &ServerApis, t: &Target) -> Result<Status, Error> {
    let ns = t.namespace.as_str();
    let kcp = t.kcp.clone().unwrap_or(Value::Null);
    let tcp = t.tcp.clone().unwrap_or(Value::Null);
    let tcp_name = t.tcp_name();
    let cluster = t.cluster_name();
    let mut hints = Vec::new();
    let row = crate::list::row(t.kcp.as_ref(), t.tcp.as_ref());

    // Infrastructure, from the owning Cluster.
    let mut infrastructure = None;
    let mut cluster_obj = None;
    if let Some(c) = &cluster
        && let Ok(ar) = apis.cluster()
        && let Some(obj) = common::get_opt(conn, &ar, Some(ns), c).await?
    {
        let v = object_json(&obj);
        infrastructure =
            fields::cluster_infrastructure_ref(&v).map(|r| format!("{} {}", r.kind, r.name));
        cluster_obj = Some(v);
    }
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

    // Pods.
    let selector = s(fields::at(
        &tcp,
        &["status", "kubernetesResources", "deployment", "selector"],
    ))
    .unwrap_or_else(|| format!("kamaji.clastix.io/name={tcp_name}"));
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
    let pods: Vec<PodRow> = pods
        .items
        .iter()
        .map(|p| {
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
        })
        .collect();

    // Conditions: the KamajiControlPlane's, else the TenantControlPlane's.
    let mut conditions = fields::conditions(&kcp);
    if conditions.is_empty() {
        conditions = fields::conditions(&tcp);
    }
    for c in &conditions {
        if c.is_problem() {
            hints.push(format!(
                "{} is False{}",
                c.type_,
                c.message
                    .as_ref()
                    .map(|m| format!(": {m}"))
                    .unwrap_or_default()
            ));
        }
    }

    // Addons.
    let addons_spec = kcp["spec"]["addons"]
        .as_object()
        .cloned()
        .or_else(|| tcp["spec"]["addons"].as_object().cloned())
        .unwrap_or_default();
    let addons = [
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
    .collect();

    // Certificates.
    let now = jiff::Timestamp::now().as_second();
    let mut certificates = Vec::new();
    for suffix in CERT_SECRETS {
        let name = format!("{tcp_name}-{suffix}");
        if let Some((_, data)) = common::secret_data(conn, ns, &name).await? {
            certificates.extend(secret_certificates(&name, &data, now));
        }
    }
    for c in &certificates {
        if c.days_left < 0 {
            hints.push(format!(
                "{} {} expired on {}: kubectl kamaji certificates rotate {} --all",
                c.secret, c.key, c.not_after, t.name
            ));
        } else if c.days_left < 30 {
            hints.push(format!(
                "{} {} expires in {} days: kubectl kamaji certificates rotate {}",
                c.secret, c.key, c.days_left, t.name
            ));
        }
    }

    // Workers.
    let mut workers = Vec::new();
    if let Some(c) = &cluster
        && let Ok(ar) = apis.capi_kind("MachineDeployment")
    {
        for md in common::list(
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
    if row.desired_replicas == 0 {
        hints.push(format!("the control plane is asleep (0 replicas): kubectl kamaji scale {} --replicas 2 wakes it", t.name));
    }
    if let Some(c) = &cluster_obj
        && c["spec"]["paused"] == Value::Bool(true)
    {
        hints.push(format!(
            "Cluster {} is paused",
            c["metadata"]["name"].as_str().unwrap_or_default()
        ));
    }

    Ok(Status {
        summary: Summary {
            name: t.name.clone(),
            namespace: ns.to_string(),
            cluster,
            tenant_control_plane: t.tcp.as_ref().map(|_| tcp_name.clone()),
            desired_version: s(kcp["spec"].get("version"))
                .or_else(|| s(fields::at(&tcp, &["spec", "kubernetes", "version"]))),
            version: s(fields::at(
                &tcp,
                &["status", "kubernetesResources", "version", "version"],
            ))
            .or_else(|| s(kcp["status"].get("version"))),
            status: row.status.clone(),
            ready: match &t.kcp {
                Some(k) => fields::control_plane_ready(k),
                None => row.status.as_deref() == Some("Ready"),
            },
            ready_replicas: row.ready_replicas,
            desired_replicas: row.desired_replicas,
            endpoint: row.endpoint.clone(),
            datastore: row.datastore.clone(),
            infrastructure,
            age: row.age.clone(),
        },
        pods,
        conditions,
        addons,
        certificates,
        workers,
        hints,
    })
}

pub async fn run(args: &Args) -> Result<(), Error> {
    let conn = args.kube.connect().await?;
    let apis = ServerApis::discover(&conn).await?;
    let t = common::resolve(&conn, &apis, &args.name).await?;
    let status = collect(&conn, &apis, &t).await?;
    Printer::new(&args.output).print(&status)
}
