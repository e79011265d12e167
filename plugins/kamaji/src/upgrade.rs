//! `kubectl kamaji upgrade CONTROL_PLANE --to VERSION [--plan]`: Kamaji refuses to skip a
//! minor, so the control plane walks one minor at a time, each step waited for; the cluster's
//! MachineDeployments follow. On a ClusterClass cluster each step sets the Cluster's
//! `spec.topology.version` and CAPI's topology controller moves the KamajiControlPlane, then the
//! MachineDeployments. Plan: `kcore::kamaji::plan::plan_upgrade`.

use std::time::Duration;

use clap::Args as ClapArgs;
use cli::{Conn, KubeFlags, OutputFlags, parse_duration};
use kclient::discovery::ServerApis;
use kclient::error::Error;
use kclient::render::{self, Fields, Human, Poll, Printer, Progress, Render, Table, Wait};
use kcore::fields;
use kcore::kamaji::plan::{self as plan, KamajiUpgradePlan, topology};
use kcore::plan::upgrade::deprecated;
use kcore::plan::upgrade::{StepLine, StepRole, step_progress};
use kcore::plan::{Finding, Severity};
use kcore::version::releases::{PATCH_RELEASES_ANNOTATION, ReleaseSource, Releases};
use kcore::version::{KubeVersion, parse_version};
use serde::Serialize;
use serde_json::{Value, json};

use crate::common::control_plane::{self, ControlPlane};
use crate::common::tenant_kubeconfig;
use crate::common::tenant_status;
use crate::common::writes;

#[derive(ClapArgs, Clone, Debug)]
#[command(
    after_help = "Kamaji refuses to skip a minor version, so v1.33 -> v1.35 goes through the newest patch of \
v1.33, then of v1.34, waiting for each step to be Ready. The newest patches come from Kubernetes' \
stable-release markers (https://cdn.dl.k8s.io/release/stable-1.N.txt; CAPI_KAMAJI_RELEASE_MARKERS names a \
mirror, or off), else from a table shipped with this release. Workers (MachineDeployments) follow once the \
control plane is at the target."
)]
pub struct Args {
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
    /// Upgrade although clients still call APIs the target version removes
    #[arg(long)]
    pub force: bool,
    /// How long each step may take
    #[arg(long, value_parser = parse_duration, default_value = "10m", value_name = "DURATION")]
    pub timeout: Duration,
    #[command(flatten)]
    pub kube: KubeFlags,
    #[command(flatten)]
    pub output: OutputFlags,
}

/// The plan as `--plan` prints it.
#[derive(Serialize)]
#[serde(transparent)]
struct Shown<'a>(&'a KamajiUpgradePlan);

impl Render for Shown<'_> {
    fn human(&self) -> Human {
        let mut f = Fields::new();
        f.add(
            "Control plane",
            format!("{}/{}", self.0.namespace, self.0.name),
        );
        f.add("From", self.0.from.to_string());
        f.add("To", self.0.to.to_string());
        let mut out = f.render(false);
        if self.0.control_plane_steps.is_empty() {
            out.push_str("\nAlready at the target version: nothing to do.\n");
            return Human::Text(out);
        }
        let mut t = Table::new(["step", "object", "version"]);
        for (i, s) in self.0.control_plane_steps.iter().enumerate() {
            t.row([
                (i + 1).to_string(),
                format!("KamajiControlPlane {}", self.0.name),
                s.to_string(),
            ]);
        }
        let n = self.0.control_plane_steps.len();
        for (i, md) in self.0.machine_deployments.iter().enumerate() {
            t.row([
                (n + i + 1).to_string(),
                format!("MachineDeployment {md}"),
                self.0.to.to_string(),
            ]);
        }
        out.push('\n');
        out.push_str(&t.render(false, true, false));
        if let Some(from) = &self.0.patch_releases_from {
            out.push_str(&format!("\n{from}\n"));
        }
        for f in &self.0.findings {
            let word = match f.severity {
                Severity::Error => "Blocking",
                Severity::Warning => "Warning",
                Severity::Info => "Note",
            };
            out.push_str(&format!("{word}: {}\n", f.message));
        }
        Human::Text(out)
    }
}

pub async fn run(args: &Args) -> Result<(), Error> {
    // The version is checked before anything is read.
    let to = parse_version(&args.to).map_err(kcore::Error::from)?;
    let conn = args.kube.connect().await?;
    let apis = ServerApis::discover(&conn).await?;
    let t = control_plane::resolve(&conn, &apis, &args.name).await?;
    let kcp = t.require_kcp()?;
    let cluster = control_plane::owning_cluster(&conn, &apis, &t).await?;
    let topo = cluster.as_ref().filter(|c| topology::topology(c).is_some());
    if let Some(c) = topo
        && args.control_plane_only
    {
        return Err(topology::control_plane_only_refused(c).into());
    }
    let md_ar = apis.capi_kind("MachineDeployment").ok();
    let mds = match &md_ar {
        Some(ar) if !args.control_plane_only && topo.is_none() => {
            t.cluster_objects(&conn, ar).await?
        }
        _ => Vec::new(),
    };
    let releases = releases(&kcp, t.tcp.as_ref(), topo, &to).await;
    let mut p = plan::plan_upgrade(&kcp, t.tcp.as_ref(), &mds, &to, &releases)?;
    if let Some(c) = topo {
        // The topology controller moves every one of them once the control plane is there.
        p.machine_deployments = topology::deployment_names(c);
    }
    p.findings.extend(deprecated_apis(&conn, &t, &p).await);
    if args.plan {
        return Printer::new(&args.output).print(&Shown(&p));
    }
    refuse_blocked(&p, args)?;
    plan::refuse_asleep(&kcp)?;
    let kcp_ar = control_plane::kcp_resource(&apis)?;
    let total = p.control_plane_steps.len();
    let started = std::time::Instant::now();
    let mut progress = Progress::line();
    for (i, step) in p.control_plane_steps.iter().enumerate() {
        match topo {
            // A ClusterClass cluster: the Cluster's topology, which CAPI's topology controller
            // writes into the KamajiControlPlane.
            Some(c) => {
                let change = topology::set_version(c, &step.to_string())?;
                writes::json_patch(&conn, &apis.cluster()?, &change.patch).await?;
                progress.note(&format!("step {}/{total}: {}", i + 1, change.done));
            }
            None => {
                // The reconciler walks the minors between through the same patch releases.
                let mut patch = json!({"spec": {"version": step}});
                if !p.recorded.is_empty() {
                    patch["metadata"]["annotations"][PATCH_RELEASES_ANNOTATION] = json!(p.recorded);
                }
                writes::merge_patch(&conn, &kcp_ar, &t.namespace, &t.name, &patch).await?;
            }
        }
        let at = Step {
            number: i + 1,
            total,
            name: &t.name,
            to: step,
        };
        wait_step(&conn, &apis, &at, args.timeout, &mut progress).await?;
        progress.note(&format!(
            "step {}/{total}: KamajiControlPlane {} runs {step}",
            i + 1,
            t.name
        ));
    }
    progress.clear();
    if topo.is_some() {
        for md in &p.machine_deployments {
            render::info(&format!(
                "MachineDeployment {md} (topology) follows to {}: Cluster API's topology controller rolls its machines",
                p.to
            ));
        }
    } else if let Some(ar) = &md_ar {
        for md in &p.machine_deployments {
            let patch = json!({"spec": {"template": {"spec": {"version": p.to}}}});
            writes::merge_patch(&conn, ar, &t.namespace, md, &patch).await?;
            render::info(&format!(
                "machinedeployment.cluster.x-k8s.io/{md} set to {} (its machines roll out)",
                p.to
            ));
        }
    }
    render::line(&format!(
        "{} upgraded from {} to {} in {}",
        t.name,
        p.from,
        p.to,
        kcore::text::human_duration(started.elapsed())
    ));
    Ok(())
}

/// The patch releases the walk steps through: on a ClusterClass cluster the versions its class
/// lists (CAPI takes only those), else Kubernetes' stable-release markers over the shipped
/// table, with a note when some marker could not be read.
async fn releases(
    kcp: &Value,
    tcp: Option<&Value>,
    topo: Option<&Value>,
    to: &KubeVersion,
) -> Releases {
    let class = topo
        .map(|c| kcore::json::strings_at(c, &["status", "kubernetesVersions"]))
        .unwrap_or_default();
    if !class.is_empty() {
        return Releases::none().with(class, ReleaseSource::ClusterClass);
    }
    let from = plan::current_version(kcp, tcp).and_then(|v| parse_version(&v).ok());
    match from {
        Some(from) => {
            let r = kclient::releases::resolve(&from, to).await;
            if let Some(note) = &r.note {
                render::warn(note);
            }
            r.releases
        }
        None => Releases::shipped(),
    }
}

/// Before crossing a minor: the deprecated APIs the tenant's clients still call that the
/// target removes, from the tenant API server's own count (a blocking finding), or a note that
/// they could not be read.
async fn deprecated_apis(conn: &Conn, t: &ControlPlane, p: &KamajiUpgradePlan) -> Vec<Finding> {
    let (from, to) = (&p.from, &p.to);
    if to.minor <= from.minor {
        return Vec::new();
    }
    let read = async {
        let admin = tenant_kubeconfig::tenant_admin(conn, t).await?;
        kclient::metrics::requested_deprecated_apis(&admin.client, &admin.target).await
    };
    match read.await {
        Ok(apis) => deprecated::finding(&deprecated::removed_by(&apis, from, to), to)
            .into_iter()
            .collect(),
        Err(e) => vec![Finding::warning(format!(
            "the deprecated APIs the tenant's clients call were not checked: {}",
            e.to_string().lines().next().unwrap_or_default()
        ))],
    }
}

/// A blocking finding stops the upgrade before anything is written, unless `--force`.
fn refuse_blocked(p: &KamajiUpgradePlan, args: &Args) -> Result<(), Error> {
    let blocking: Vec<&str> = p
        .findings
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .map(|f| f.message.as_str())
        .collect();
    for f in p.findings.iter().filter(|f| f.severity != Severity::Error) {
        render::warn(&f.message);
    }
    if blocking.is_empty() || args.force {
        return Ok(());
    }
    Err(Error::Other {
        message: format!(
            "the upgrade preflight failed: {}; nothing was changed",
            blocking.join("; ")
        ),
        hint: Some(format!(
            "see kubectl kamaji upgrade {} --to {} --plan, or pass --force",
            args.name, args.to
        )),
    })
}

/// One control-plane step, numbered for its progress line.
struct Step<'a> {
    number: usize,
    total: usize,
    name: &'a str,
    to: &'a KubeVersion,
}

/// Waits until the control plane runs the step's version and is Ready, one updating line (a
/// line per change without a terminal) saying what is left of it and what runs.
async fn wait_step(
    conn: &Conn,
    apis: &ServerApis,
    at: &Step<'_>,
    timeout: Duration,
    progress: &mut Progress,
) -> Result<(), Error> {
    let to = at.to;
    let what = format!("waiting for {} to run {}", at.name, at.to);
    Wait::new(what, timeout)
        .interval(Duration::from_millis(500))
        .on(progress)
        .until(|| async move {
            let t = control_plane::resolve(conn, apis, at.name).await?;
            let kcp = t.kcp.clone().unwrap_or(Value::Null);
            let running = plan::current_version(&kcp, t.tcp.as_ref()).unwrap_or_default();
            let phase = t
                .tcp
                .as_ref()
                .and_then(tenant_status::tcp_phase)
                .unwrap_or_default();
            let runs = parse_version(&running).ok();
            if runs.as_ref() == Some(to) && fields::control_plane_ready(&kcp) && phase == "Ready" {
                return Ok(Poll::Ready(()));
            }
            let mut p = step_progress(StepRole::ControlPlane, t.kcp.as_ref(), runs.as_ref(), to);
            // Ready replicas on the new version are not the end while Kamaji's own phase says
            // otherwise.
            p.reached = false;
            let target = format!("KamajiControlPlane/{}", at.name);
            let mut line = StepLine {
                number: at.number,
                total: at.total,
                target: &target,
                to: at.to,
                progress: &p,
                cluster_runs: runs.as_ref(),
            }
            .to_string();
            if !phase.is_empty() && phase != "Ready" {
                line.push_str(&format!(" (TenantControlPlane {phase})"));
            }
            Ok(Poll::Pending(line))
        })
        .await
}
