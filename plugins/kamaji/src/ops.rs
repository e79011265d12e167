//! Operations: `scale`, `upgrade`, `delete`.

use std::time::Duration;

use clap::Args as ClapArgs;
use cli::{Conn, KubeFlags, OutputFlags, parse_duration};
use kube::api::{ApiResource, DeleteParams, PropagationPolicy};
use serde::Serialize;
use serde_json::{Value, json};
use shared::build::kamaji::{self, CLUSTER_NAME_LABEL, upgrade_steps};
use shared::discovery::ServerApis;
use shared::discovery::fields::{self, object_json};
use shared::error::{Error, Op};
use shared::render::{self, Fields, Human, Poll, Printer, Render, Table};

use crate::common::{self, Target};

// ------------------------------------------------------------------ scale

#[derive(ClapArgs, Clone, Debug)]
#[command(
    after_help = "0 replicas puts the control plane to sleep (Kamaji keeps its state in the DataStore)."
)]
pub struct ScaleArgs {
    /// The KamajiControlPlane
    #[arg(value_name = "CONTROL_PLANE")]
    pub name: String,
    /// Control-plane replicas (0 = asleep)
    #[arg(long, value_name = "N")]
    pub replicas: Option<i64>,
    /// Worker replicas of the cluster's MachineDeployment
    #[arg(long, value_name = "N")]
    pub workers: Option<i64>,
    /// Wait until the control plane reports the new replicas
    #[arg(long)]
    pub wait: bool,
    #[arg(long, value_parser = parse_duration, default_value = "5m", value_name = "DURATION")]
    pub timeout: Duration,
    #[command(flatten)]
    pub kube: KubeFlags,
}

fn kcp_of(t: &Target) -> Result<Value, Error> {
    t.kcp.clone().ok_or_else(|| Error::Other {
        message: format!("{} is a standalone TenantControlPlane, not a KamajiControlPlane", t.name),
        hint: Some("scale, upgrade and delete act on KamajiControlPlanes; use kubectl edit tcp for a standalone one".into()),
    })
}

pub async fn scale(args: &ScaleArgs) -> Result<(), Error> {
    if args.replicas.is_none() && args.workers.is_none() {
        return Err(Error::Usage {
            message: "nothing to scale".into(),
            hint: Some("pass --replicas N and/or --workers N".into()),
        });
    }
    if let Some(r) = args.replicas
        && !(0..=16).contains(&r)
    {
        return Err(Error::Usage {
            message: format!("invalid --replicas {r}"),
            hint: Some("use 0 (asleep) to 16".into()),
        });
    }
    if let Some(w) = args.workers
        && w < 0
    {
        return Err(Error::Usage {
            message: format!("invalid --workers {w}"),
            hint: Some("use 0 or more".into()),
        });
    }
    let conn = args.kube.connect().await?;
    let apis = ServerApis::discover(&conn).await?;
    let t = common::resolve(&conn, &apis, &args.name).await?;
    let kcp = kcp_of(&t)?;
    let kcp_ar = common::kcp_resource(&apis)?;
    if let Some(r) = args.replicas {
        let from = kcp["spec"]["replicas"].as_i64().unwrap_or(2);
        common::merge_patch(
            &conn,
            &kcp_ar,
            &t.namespace,
            &t.name,
            &json!({"spec": {"replicas": r}}),
        )
        .await?;
        let note = if r == 0 {
            " (asleep)"
        } else if from == 0 {
            " (waking up)"
        } else {
            ""
        };
        render::line(&format!(
            "kamajicontrolplane.controlplane.cluster.x-k8s.io/{} scaled from {from} to {r}{note}",
            t.name
        ));
    }
    if let Some(w) = args.workers {
        let cluster = t.cluster_name().unwrap_or_else(|| t.name.clone());
        let md_ar = apis.capi_kind("MachineDeployment")?;
        let mds = common::list(
            &conn,
            &md_ar,
            Some(&t.namespace),
            Some(&format!("{CLUSTER_NAME_LABEL}={cluster}")),
        )
        .await?;
        match mds.as_slice() {
            [md] => {
                let n = md.metadata.name.clone().unwrap_or_default();
                common::merge_patch(&conn, &md_ar, &t.namespace, &n, &json!({"spec": {"replicas": w}})).await?;
                render::line(&format!("machinedeployment.cluster.x-k8s.io/{n} scaled to {w}"));
            }
            [] => return Err(Error::Other { message: format!("cluster {cluster} has no MachineDeployment"), hint: Some("workers of --infrastructure none are joined by hand (kubectl kamaji token join)".into()) }),
            _ => return Err(Error::Other { message: format!("cluster {cluster} has several MachineDeployments"), hint: Some("scale one with kubectl capi scale or kubectl scale machinedeployment".into()) }),
        }
    }
    if args.wait
        && let Some(r) = args.replicas
    {
        let name = t.name.clone();
        render::wait_until(
            &format!("waiting for {name} to run {r} replicas"),
            args.timeout,
            Duration::from_millis(500),
            || {
                let (conn, apis, name) = (&conn, &apis, name.clone());
                async move {
                    let t = common::resolve(conn, apis, &name).await?;
                    let phase = t
                        .tcp
                        .as_ref()
                        .and_then(common::tcp_phase)
                        .unwrap_or_default();
                    let row = crate::list::row(t.kcp.as_ref(), t.tcp.as_ref());
                    // Kamaji inlines the Deployment's status, whose counts are `omitempty`
                    // (k8s.io/api apps/v1 DeploymentStatus): a scaled-down Deployment has no
                    // `replicas` field at all.
                    let tcp_replicas = t.tcp.as_ref().and_then(|x| {
                        let d = &x["status"]["kubernetesResources"]["deployment"];
                        d.is_object().then(|| d["replicas"].as_i64().unwrap_or(0))
                    });
                    // Kamaji before "Sleeping" existed shows a scaled-down Deployment only.
                    let asleep =
                        phase == "Sleeping" || (tcp_replicas == Some(0) && row.ready_replicas == 0);
                    let done = if r == 0 {
                        asleep
                    } else {
                        row.ready_replicas >= r && tcp_replicas == Some(r) && phase == "Ready"
                    };
                    Ok(if done {
                        Poll::Ready(())
                    } else {
                        Poll::Pending(format!(
                            "{}/{} ready, TenantControlPlane {phase}",
                            row.ready_replicas, r
                        ))
                    })
                }
            },
        )
        .await?;
        render::info(&format!(
            "{} runs {r} replicas{}",
            t.name,
            if r == 0 { " (asleep)" } else { "" }
        ));
    }
    Ok(())
}

// ------------------------------------------------------------------ upgrade

#[derive(ClapArgs, Clone, Debug)]
#[command(
    after_help = "Kamaji refuses to skip a minor version, so v1.33 -> v1.35 goes through v1.34.0, waiting for \
each step to be Ready. Workers (MachineDeployments) follow once the control plane is at the target."
)]
pub struct UpgradeArgs {
    /// The KamajiControlPlane
    #[arg(value_name = "CONTROL_PLANE")]
    pub name: String,
    /// Target Kubernetes version (e.g. v1.35.0)
    #[arg(long, value_name = "VERSION")]
    pub to: String,
    /// Print the steps and change nothing
    #[arg(long)]
    pub plan: bool,
    /// Do not change the workers' version
    #[arg(long)]
    pub control_plane_only: bool,
    /// How long each step may take
    #[arg(long, value_parser = parse_duration, default_value = "10m", value_name = "DURATION")]
    pub timeout: Duration,
    #[command(flatten)]
    pub kube: KubeFlags,
    #[command(flatten)]
    pub output: OutputFlags,
}

#[derive(Serialize, Clone, Debug)]
#[serde(rename_all = "camelCase")]
pub struct UpgradePlan {
    pub name: String,
    pub namespace: String,
    pub from: String,
    pub to: String,
    pub control_plane_steps: Vec<String>,
    pub machine_deployments: Vec<String>,
}

impl Render for UpgradePlan {
    fn human(&self) -> Human {
        let mut f = Fields::new();
        f.add("Control plane", format!("{}/{}", self.namespace, self.name));
        f.add("From", self.from.as_str());
        f.add("To", self.to.as_str());
        let mut out = f.render(false);
        if self.control_plane_steps.is_empty() {
            out.push_str("\nAlready at the target version: nothing to do.\n");
            return Human::Text(out);
        }
        let mut t = Table::new(["step", "object", "version"]);
        for (i, s) in self.control_plane_steps.iter().enumerate() {
            t.row([
                (i + 1).to_string(),
                format!("KamajiControlPlane {}", self.name),
                s.clone(),
            ]);
        }
        let n = self.control_plane_steps.len();
        for (i, md) in self.machine_deployments.iter().enumerate() {
            t.row([
                (n + i + 1).to_string(),
                format!("MachineDeployment {md}"),
                self.to.clone(),
            ]);
        }
        out.push('\n');
        out.push_str(&t.render(false, true, false));
        Human::Text(out)
    }
}

fn current_version(t: &Target) -> Option<String> {
    let kcp = t.kcp.as_ref()?;
    kcp["status"]["version"]
        .as_str()
        .filter(|s| !s.is_empty())
        .or_else(|| {
            t.tcp
                .as_ref()
                .and_then(|x| {
                    fields::at(x, &["status", "kubernetesResources", "version", "version"])
                })
                .and_then(Value::as_str)
        })
        .or_else(|| kcp["spec"]["version"].as_str())
        .map(str::to_string)
}

pub async fn upgrade(args: &UpgradeArgs) -> Result<(), Error> {
    let target = kamaji::parse_version(&args.to)?.to_string();
    let conn = args.kube.connect().await?;
    let apis = ServerApis::discover(&conn).await?;
    let t = common::resolve(&conn, &apis, &args.name).await?;
    let kcp = kcp_of(&t)?;
    let from = current_version(&t)
        .ok_or_else(|| Error::other(format!("{} reports no version yet", t.name)))?;
    let steps = upgrade_steps(&from, &target)?;
    let cluster = t.cluster_name().unwrap_or_else(|| t.name.clone());
    let md_ar = apis.capi_kind("MachineDeployment").ok();
    let mut mds = Vec::new();
    if let Some(ar) = &md_ar
        && !args.control_plane_only
    {
        for md in common::list(
            &conn,
            ar,
            Some(&t.namespace),
            Some(&format!("{CLUSTER_NAME_LABEL}={cluster}")),
        )
        .await?
        {
            let v = object_json(&md);
            if v["spec"]["template"]["spec"]["version"].as_str() != Some(target.as_str()) {
                mds.push(
                    v["metadata"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                );
            }
        }
    }
    let plan = UpgradePlan {
        name: t.name.clone(),
        namespace: t.namespace.clone(),
        from: from.clone(),
        to: target.clone(),
        control_plane_steps: steps.clone(),
        machine_deployments: mds.clone(),
    };
    if args.plan {
        return Printer::new(&args.output).print(&plan);
    }
    if kcp["spec"]["replicas"].as_i64() == Some(0) {
        return Err(Error::Other {
            message: format!(
                "{} is asleep (0 replicas); Kamaji cannot upgrade a sleeping control plane",
                t.name
            ),
            hint: Some(format!(
                "wake it first: kubectl kamaji scale {} --replicas 2 --wait",
                t.name
            )),
        });
    }
    let kcp_ar = common::kcp_resource(&apis)?;
    let total = steps.len();
    for (i, step) in steps.iter().enumerate() {
        common::merge_patch(
            &conn,
            &kcp_ar,
            &t.namespace,
            &t.name,
            &json!({"spec": {"version": step}}),
        )
        .await?;
        render::info(&format!("step {}/{total}: {} set to {step}", i + 1, t.name));
        let name = t.name.clone();
        let step_c = step.clone();
        render::wait_until(
            &format!("step {}/{total}: waiting for {name} to run {step}", i + 1),
            args.timeout,
            Duration::from_millis(500),
            || {
                let (conn, apis, name, step) = (&conn, &apis, name.clone(), step_c.clone());
                async move {
                    let t = common::resolve(conn, apis, &name).await?;
                    let kcp = t.kcp.clone().unwrap_or(Value::Null);
                    let running = current_version(&t).unwrap_or_default();
                    let phase = t
                        .tcp
                        .as_ref()
                        .and_then(common::tcp_phase)
                        .unwrap_or_default();
                    let ready = fields::control_plane_ready(&kcp) && phase == "Ready";
                    if running == step && ready {
                        return Ok(Poll::Ready(()));
                    }
                    let why = fields::conditions(&kcp)
                        .into_iter()
                        .find(|c| c.is_problem())
                        .and_then(|c| c.message)
                        .unwrap_or_default();
                    Ok(Poll::Pending(
                        format!("running {running}, TenantControlPlane {phase} {why}")
                            .trim()
                            .to_string(),
                    ))
                }
            },
        )
        .await?;
        render::info(&format!("step {}/{total}: {} runs {step}", i + 1, t.name));
    }
    if let Some(ar) = &md_ar {
        for md in &mds {
            common::merge_patch(
                &conn,
                ar,
                &t.namespace,
                md,
                &json!({"spec": {"template": {"spec": {"version": target}}}}),
            )
            .await?;
            render::info(&format!(
                "machinedeployment.cluster.x-k8s.io/{md} set to {target} (its machines roll out)"
            ));
        }
    }
    render::line(&format!("{} upgraded from {from} to {target}", t.name));
    Ok(())
}

// ------------------------------------------------------------------ delete

#[derive(ClapArgs, Clone, Debug)]
pub struct DeleteArgs {
    /// The KamajiControlPlane (the cluster of the same name goes with it)
    #[arg(value_name = "CONTROL_PLANE")]
    pub name: String,
    /// Do not ask (needed without a terminal)
    #[arg(short = 'y', long)]
    pub yes: bool,
    /// Wait until everything is gone and the DataStore is cleaned
    #[arg(long)]
    pub wait: bool,
    #[arg(long, value_parser = parse_duration, default_value = "10m", value_name = "DURATION")]
    pub timeout: Duration,
    #[command(flatten)]
    pub kube: KubeFlags,
}

struct Doomed {
    ar: ApiResource,
    name: String,
}

/// A template `delete` keeps because something outside the cluster still uses it.
struct Kept {
    ar: ApiResource,
    name: String,
    /// Who uses it, e.g. `ByoMachineTemplate other-md-0`.
    user: String,
}

/// What `delete` removes, and the templates it keeps because something else uses them.
async fn what_goes(
    conn: &Conn,
    apis: &ServerApis,
    t: &Target,
) -> Result<(Vec<Doomed>, Vec<Kept>), Error> {
    let ns = t.namespace.as_str();
    let cluster_name = t.cluster_name().unwrap_or_else(|| t.name.clone());
    let mut out = Vec::new();
    if let Ok(ar) = apis.cluster()
        && let Some(c) = common::get_opt(conn, &ar, Some(ns), &cluster_name).await?
    {
        let v = object_json(&c);
        out.push(Doomed {
            ar: ar.clone(),
            name: cluster_name.clone(),
        });
        if let Some(r) = fields::cluster_infrastructure_ref(&v)
            && let Ok(iar) = apis.resolve_ref(&r)
        {
            out.push(Doomed {
                ar: iar,
                name: r.name,
            });
        }
    }
    let mut all_mds: Vec<Value> = Vec::new();
    if let Ok(ar) = apis.capi_kind("MachineDeployment") {
        all_mds = common::list(conn, &ar, Some(ns), None)
            .await?
            .iter()
            .map(object_json)
            .collect();
        for v in all_mds.iter().filter(|m| {
            m["metadata"]["labels"][CLUSTER_NAME_LABEL].as_str() == Some(cluster_name.as_str())
        }) {
            let name = v["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            for r in [
                fields::template_infrastructure_ref(v),
                fields::object_ref(v, &["spec", "template", "spec", "bootstrap", "configRef"]),
            ]
            .into_iter()
            .flatten()
            {
                let Ok(rar) = apis.resolve_ref(&r) else {
                    continue;
                };
                // BYOH: the installer template the machine template points at.
                if r.kind == "ByoMachineTemplate"
                    && let Some(bmt) = common::get_opt(conn, &rar, Some(ns), &r.name).await?
                    && let Some(ir) = fields::object_ref(
                        &object_json(&bmt),
                        &["spec", "template", "spec", "installerRef"],
                    )
                    && ir.namespace.as_deref().is_none_or(|n| n == ns)
                    && let Ok(iar) = apis.resolve_ref(&ir)
                {
                    out.push(Doomed {
                        ar: iar,
                        name: ir.name,
                    });
                }
                out.push(Doomed {
                    ar: rar,
                    name: r.name,
                });
            }
            out.insert(
                1.min(out.len()),
                Doomed {
                    ar: ar.clone(),
                    name,
                },
            );
        }
    }
    // What `create --cni`/`--cni-manifest` handed to Cluster API: the ClusterResourceSet and
    // the ConfigMaps (or Secrets) holding the manifest, labelled by create.
    let ours = format!(
        "{CLUSTER_NAME_LABEL}={cluster_name},{}={}",
        kamaji::MANAGED_BY.0,
        kamaji::MANAGED_BY.1
    );
    let mut extra: Vec<ApiResource> = Vec::new();
    if let Some(k) = apis.kind(shared::discovery::ADDONS_GROUP, "ClusterResourceSet") {
        extra.push(k.resource(k.version()));
    }
    extra.push(ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(
        &(),
    ));
    extra.push(ApiResource::erase::<k8s_openapi::api::core::v1::Secret>(&()));
    for ar in extra {
        for o in common::list(conn, &ar, Some(ns), Some(&ours)).await? {
            out.push(Doomed {
                ar: ar.clone(),
                name: o.metadata.name.clone().unwrap_or_default(),
            });
        }
    }
    if let Some(kar) = apis.kamaji_control_plane()
        && t.kcp.is_some()
    {
        out.push(Doomed {
            ar: kar,
            name: t.name.clone(),
        });
    }
    if t.tcp.is_some()
        && let Ok(tar) = common::tcp_resource(apis)
    {
        out.push(Doomed {
            ar: tar,
            name: t.tcp_name(),
        });
    }
    // Unique, keep order.
    let mut seen = Vec::new();
    out.retain(|d| {
        let k = (d.ar.kind.clone(), d.name.clone());
        if seen.contains(&k) {
            false
        } else {
            seen.push(k);
            true
        }
    });
    // Keep the templates another cluster still uses.
    let machine_templates = match apis.provider_kind(
        shared::discovery::INFRASTRUCTURE_GROUP,
        "ByoMachineTemplate",
    ) {
        Some(ar) => common::list(conn, &ar, Some(ns), None)
            .await?
            .iter()
            .map(object_json)
            .collect(),
        None => Vec::new(),
    };
    let in_use = shared::plan::teardown::templates_in_use(
        &cluster_name,
        &all_mds,
        &machine_templates,
        &seen,
    );
    let mut kept = Vec::new();
    out.retain(|d| match in_use.get(&(d.ar.kind.clone(), d.name.clone())) {
        Some(user) => {
            kept.push(Kept {
                ar: d.ar.clone(),
                name: d.name.clone(),
                user: user.clone(),
            });
            false
        }
        None => true,
    });
    Ok((out, kept))
}

pub async fn delete(args: &DeleteArgs) -> Result<(), Error> {
    if !args.yes && !common::stdin_is_tty() {
        return Err(Error::Usage {
            message: "refusing to delete without confirmation: stdin is not a terminal".into(),
            hint: Some(format!(
                "pass --yes (kubectl kamaji status {} shows what goes)",
                args.name
            )),
        });
    }
    let conn = args.kube.connect().await?;
    let apis = ServerApis::discover(&conn).await?;
    let t = common::resolve(&conn, &apis, &args.name).await?;
    let (doomed, kept) = what_goes(&conn, &apis, &t).await?;
    let datastore = crate::list::row(t.kcp.as_ref(), t.tcp.as_ref()).datastore;
    render::info(&format!("This deletes, in namespace {}:", t.namespace));
    for d in &doomed {
        render::info(&format!(
            "  {}",
            render::object_name(&d.ar.kind, &d.ar.group, &d.name)
        ));
    }
    render::info(&format!(
        "and Kamaji removes the control plane's data from DataStore {}.",
        datastore.clone().unwrap_or_else(|| "<default>".into())
    ));
    for k in &kept {
        render::info(&format!(
            "It keeps {} (still used by {}).",
            render::object_name(&k.ar.kind, &k.ar.group, &k.name),
            k.user
        ));
    }
    if !args.yes && !shared::render::confirm(&format!("Delete {} and its cluster?", t.name))? {
        return Err(Error::other("aborted: nothing was deleted"));
    }
    // A kept object the Cluster owns would go with it (garbage collection): release it first.
    let cluster_name = t.cluster_name().unwrap_or_else(|| t.name.clone());
    for k in &kept {
        if let Some(o) = common::get_opt(&conn, &k.ar, Some(&t.namespace), &k.name).await?
            && let Some(refs) = kamaji::disowned_by_cluster(&object_json(&o), &cluster_name)
        {
            common::merge_patch(
                &conn,
                &k.ar,
                &t.namespace,
                &k.name,
                &json!({"metadata": {"ownerReferences": refs, "resourceVersion": o.metadata.resource_version}}),
            )
            .await?;
        }
    }
    let dp = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Foreground),
        ..Default::default()
    };
    for d in &doomed {
        let api = shared::api::dynamic(&conn, &d.ar, Some(&t.namespace));
        match api.delete(&d.name, &dp).await {
            Ok(_) => render::line(&format!(
                "{} deleted",
                render::object_name(&d.ar.kind, &d.ar.group, &d.name)
            )),
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => {
                return Err(conn.error(
                    e,
                    &Op::on("delete", &d.ar)
                        .in_namespace(Some(&t.namespace))
                        .named(&d.name),
                ));
            }
        }
    }
    if !args.wait {
        return Ok(());
    }
    let total = doomed.len();
    render::wait_until(
        &format!("waiting for {} to be gone", t.name),
        args.timeout,
        Duration::from_millis(500),
        || {
            let (conn, doomed, ns) = (&conn, &doomed, t.namespace.clone());
            async move {
                let mut left = Vec::new();
                for d in doomed {
                    if let Some(o) = common::get_opt(conn, &d.ar, Some(&ns), &d.name).await? {
                        let fin = o.metadata.finalizers.clone().unwrap_or_default();
                        let why = if fin.is_empty() {
                            String::new()
                        } else {
                            format!(" (finalizers {})", fin.join(","))
                        };
                        left.push(format!("{} {}{why}", d.ar.kind, d.name));
                    }
                }
                Ok(if left.is_empty() {
                    Poll::Ready(())
                } else {
                    Poll::Pending(format!(
                        "{}/{total} gone; left: {}",
                        total - left.len(),
                        left.join(", ")
                    ))
                })
            }
        },
    )
    .await?;
    render::line(&format!(
        "{} is gone; DataStore {} no longer holds its data (Kamaji's TenantControlPlane finalizer finished)",
        t.name,
        datastore.unwrap_or_else(|| "<default>".into())
    ));
    Ok(())
}
