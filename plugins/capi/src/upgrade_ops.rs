//! Upgrades carried out by the reconciler: `kubectl capi upgrade CLUSTER --to V` creates a
//! ClusterUpgrade (`ops.capi-kamaji.io`) where that API is served and gets out of the way
//! (`--wait` follows it); `kubectl capi upgrade status [CLUSTER]`, `pause`, `resume` and `cancel`
//! read and steer it. The reconciler plans from the same objects with the same code, so its
//! plan is the one `--plan` prints.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use clap::{Args as ClapArgs, Subcommand};
use cli::{KubeFlags, OutputFlags};
use kcore::groups::OPS_GROUP;
use kcore::ops::api::{ClusterUpgradeSpec, ClusterUpgradeStatus};
use kcore::ops::phase;
use kube::discovery::ApiResource;
use serde::Serialize;
use serde_json::{Value, json};
use shared::discovery::ServerApis;
use shared::error::{Error, Op};
use shared::plan::upgrade::{StepLine, StepProgress, StepRole, parse_version, step_progress};
use shared::render::{Human, Poll, Printer, Progress, Render, Table, Wait};

use crate::day2::Target;
use crate::upgrade::{Snapshot, cluster_runs, role_object};

/// The verbs on an upgrade under way.
#[derive(Subcommand, Clone, Debug)]
pub enum UpgradeOp {
    /// The ClusterUpgrades of the namespace (-A: all), or one cluster's plan and progress
    Status(StatusArgs),
    /// Start no further step of a cluster's upgrade (a rollout under way runs to its end)
    Pause(OneArgs),
    /// Let a paused upgrade go on
    Resume(OneArgs),
    /// Stop a cluster's upgrade for good (a rollout under way runs to its end)
    Cancel(OneArgs),
}

#[derive(ClapArgs, Clone, Debug)]
pub struct StatusArgs {
    /// The cluster (all clusters of the namespace when left out)
    #[arg(value_name = "CLUSTER")]
    pub cluster: Option<String>,
    #[command(flatten)]
    pub output: OutputFlags,
    #[command(flatten)]
    pub kube: KubeFlags,
}

#[derive(ClapArgs, Clone, Debug)]
pub struct OneArgs {
    /// The cluster
    #[arg(value_name = "CLUSTER")]
    pub cluster: String,
    /// Do not ask (cancel asks on a terminal and needs --yes without one)
    #[arg(short = 'y', long)]
    pub yes: bool,
    #[command(flatten)]
    pub kube: KubeFlags,
}

/// The ClusterUpgrade resource, where the API is served.
pub fn resource(apis: &ServerApis) -> Option<ApiResource> {
    apis.kind(OPS_GROUP, "ClusterUpgrade")
        .map(|k| k.resource(k.version()))
}

fn not_installed(apis: &ServerApis) -> Error {
    apis.not_installed(
        "The ClusterUpgrade API",
        OPS_GROUP,
        "install the reconciler with kubectl kamaji install",
    )
}

fn status_of(obj: &Value) -> ClusterUpgradeStatus {
    serde_json::from_value(obj["status"].clone()).unwrap_or_default()
}

fn spec_of(obj: &Value) -> ClusterUpgradeSpec {
    serde_json::from_value(obj["spec"].clone()).unwrap_or_default()
}

/// Whether the status is about the current spec (the reconciler has seen it).
fn current(obj: &Value) -> bool {
    obj["status"]["observedGeneration"].as_i64() == obj["metadata"]["generation"].as_i64()
}

fn in_words(obj: &Value) -> String {
    let st = status_of(obj);
    let spec = spec_of(obj);
    format!(
        "to {} ({}, step {})",
        spec.version,
        st.phase.as_deref().unwrap_or("Pending"),
        st.progress.as_deref().unwrap_or("0/?")
    )
}

/// What `kubectl capi upgrade` asked for, to hand over.
pub struct Request<'a> {
    pub to: &'a str,
    pub control_plane_only: bool,
    pub workers_only: bool,
    pub force: bool,
    pub max_parallel: Option<u32>,
    pub wait: bool,
    pub timeout: Duration,
    pub steps: usize,
}

/// Refuses when the cluster has an upgrade under way to another version (or one cancelled
/// but not yet stopped).
pub async fn refuse_busy(t: &Target, ar: &ApiResource, to: &str) -> Result<(), Error> {
    match t.get_opt(ar, &t.name).await? {
        Some(cu) if !is_finished(&cu) => {
            let s = spec_of(&cu);
            if s.version != to || s.cancelled {
                return Err(busy(t, &cu));
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Creates the cluster's ClusterUpgrade (or replaces a finished one), then follows it with
/// `--wait`. A ClusterUpgrade under way for another target is refused in one line.
pub async fn hand_over(t: &Target, ar: &ApiResource, req: &Request<'_>) -> Result<(), Error> {
    let existing = t.get_opt(ar, &t.name).await?;
    let spec = json!({
        "clusterName": t.name,
        "version": req.to,
        "controlPlaneOnly": req.control_plane_only,
        "workersOnly": req.workers_only,
        "force": req.force,
        "maxParallelMachineDeployments": req.max_parallel,
        "paused": false,
        "cancelled": false,
    });
    match existing {
        Some(cu) if !is_finished(&cu) => {
            let s = spec_of(&cu);
            if s.version != req.to || s.cancelled {
                return Err(busy(t, &cu));
            }
            shared::render::line(&format!(
                "an upgrade of cluster {} {} is already under way",
                t.name,
                in_words(&cu)
            ));
        }
        Some(cu) => {
            // Replaces a finished one, only if nobody changed it meanwhile.
            let rv = cu["metadata"]["resourceVersion"].clone();
            let body = json!({"metadata": {"resourceVersion": rv}, "spec": spec});
            shared::api::merge_patch(
                &t.conn,
                ar,
                &t.namespace,
                &t.name,
                &body,
                shared::api::Write {
                manager: crate::day2::FIELD_MANAGER,
                dry_run: false,
                force: false,
            },
            )
            .await
            .map_err(|e| match e {
                Error::Conflict { .. } => Error::Other {
                    message: format!(
                        "cluster {}'s ClusterUpgrade changed while it was being replaced; nothing was changed",
                        t.name
                    ),
                    hint: Some("run the command again".into()),
                },
                e => e,
            })?;
            created_line(
                t,
                req,
                "replaced (the finished upgrade stays in its history)",
            );
        }
        None => {
            create(t, ar, spec).await?;
            created_line(t, req, "created");
        }
    }
    if req.wait {
        follow(t, ar, req.timeout).await
    } else {
        Ok(())
    }
}

fn created_line(t: &Target, req: &Request<'_>, what: &str) {
    shared::render::line(&format!(
        "ClusterUpgrade {}/{} {what}: kamaji-reconciler upgrades cluster {} to {} in {} step(s), control plane first; follow it with kubectl capi upgrade status {}",
        t.namespace, t.name, t.name, req.to, req.steps, t.name
    ));
}

fn busy(t: &Target, cu: &Value) -> Error {
    Error::Other {
        message: format!(
            "cluster {} already has an upgrade under way: {}; nothing was changed",
            t.name,
            in_words(cu)
        ),
        hint: Some(format!(
            "follow it with kubectl capi upgrade status {0}, or stop it with kubectl capi upgrade cancel {0}",
            t.name
        )),
    }
}

fn is_finished(cu: &Value) -> bool {
    current(cu)
        && status_of(cu)
            .phase
            .as_deref()
            .is_some_and(phase::is_terminal)
}

async fn create(t: &Target, ar: &ApiResource, spec: Value) -> Result<(), Error> {
    let obj: kube::core::DynamicObject = serde_json::from_value(json!({
        "apiVersion": ar.api_version, "kind": ar.kind,
        "metadata": {"name": t.name, "namespace": t.namespace},
        "spec": spec,
    }))
    .map_err(|e| Error::other(format!("internal: a ClusterUpgrade body: {e}")))?;
    let api = shared::api::dynamic(&t.conn, ar, Some(&t.namespace));
    let pp = kube::api::PostParams {
        field_manager: Some(crate::day2::FIELD_MANAGER.into()),
        ..Default::default()
    };
    match api.create(&pp, &obj).await {
        Ok(_) => Ok(()),
        // Another admin was faster: the API server refuses a second one (it is named after
        // the cluster).
        Err(kube::Error::Api(s)) if s.code == 409 => match t.get_opt(ar, &t.name).await? {
            Some(cu) => Err(busy(t, &cu)),
            None => Err(Error::other(s.message)),
        },
        Err(e) => Err(t.conn.error(
            e,
            &Op::on("create", ar)
                .in_namespace(Some(&t.namespace))
                .named(&t.name),
        )),
    }
}

/// Follows a ClusterUpgrade until it ends: 0 when it succeeds, 1 when it fails or is cancelled.
/// One updating line on a terminal (a line per change otherwise) names the step under way,
/// what is left of it and the version the cluster runs, from the ClusterUpgrade's plan and the
/// cluster's own objects; one line closes it.
async fn follow(t: &Target, ar: &ApiResource, timeout: Duration) -> Result<(), Error> {
    let started = Instant::now();
    let mut progress = Progress::line();
    let what = format!(
        "following the upgrade of cluster {} (it goes on in the cluster)",
        t.name
    );
    let outcome = Wait::new(what, timeout)
        .on(&mut progress)
        .until(|| async {
            let cu = t
                .get_opt(ar, &t.name)
                .await?
                .ok_or_else(|| Error::other(format!("ClusterUpgrade {} was deleted", t.name)))?;
            if !current(&cu) {
                return Ok(Poll::Pending(format!(
                    "waiting for kamaji-reconciler to plan the upgrade of cluster {}",
                    t.name
                )));
            }
            let st = status_of(&cu);
            match st.phase.as_deref() {
                Some(phase::SUCCEEDED) => Ok(Poll::Ready(Ok(spec_of(&cu).version))),
                Some(p @ (phase::FAILED | phase::CANCELLED)) => {
                    Ok(Poll::Ready(Err(Error::Other {
                        message: format!(
                            "the upgrade of cluster {} {}: {}",
                            t.name,
                            p.to_lowercase(),
                            st.message.clone().unwrap_or_default()
                        ),
                        hint: Some(format!("see kubectl capi upgrade status {}", t.name)),
                    })))
                }
                _ => Ok(Poll::Pending(where_it_stands(t, &st).await?)),
            }
        })
        .await;
    progress.clear();
    let version = outcome??;
    shared::render::line(&format!(
        "cluster {} upgraded to {version} in {}",
        t.name,
        shared::error::human_duration(started.elapsed())
    ));
    Ok(())
}

/// The progress line of an upgrade under way: its first current step, as the cluster's objects
/// show it, or its phase between steps.
async fn where_it_stands(t: &Target, st: &ClusterUpgradeStatus) -> Result<String, Error> {
    let total = st.plan.len();
    let done = st
        .steps
        .iter()
        .filter(|s| s.phase == phase::SUCCEEDED)
        .count();
    let step = st
        .current_steps
        .first()
        .and_then(|n| st.plan.iter().find(|p| p.number == *n));
    let Some(step) = step else {
        return Ok(match st.phase.as_deref() {
            Some(phase::PAUSED) => format!("paused after {done} of {total} steps"),
            _ => format!("{done} of {total} steps done"),
        });
    };
    let role = match step.role.as_str() {
        "ControlPlane" => StepRole::ControlPlane,
        "Topology" => StepRole::Topology,
        _ => StepRole::Workers,
    };
    let snap = Snapshot::read(t).await?;
    let observed = snap.observed(t);
    let obj = role_object(t, &snap, role, &step.target);
    let to = parse_version(&step.to_version).ok();
    let p = match &to {
        Some(to) => step_progress(role, obj.as_ref(), observed.get(&step.target).as_ref(), to),
        None => StepProgress::default(),
    };
    let runs = cluster_runs(t, &snap, &observed);
    let mut line = StepLine {
        number: step.number as usize,
        total,
        target: &step.target,
        to: &step.to_version,
        progress: &p,
        cluster_runs: runs.as_ref(),
    }
    .to_string();
    if let [_, more @ ..] = st.current_steps.as_slice()
        && !more.is_empty()
    {
        let more: Vec<String> = more.iter().map(u32::to_string).collect();
        line.push_str(&format!(" (steps {} roll too)", more.join(", ")));
    }
    Ok(line)
}

/// `upgrade status|pause|resume|cancel`.
pub async fn run(op: &UpgradeOp) -> Result<(), Error> {
    match op {
        UpgradeOp::Status(a) => status(a).await,
        UpgradeOp::Pause(a) => steer(a, "paused", true).await,
        UpgradeOp::Resume(a) => steer(a, "paused", false).await,
        UpgradeOp::Cancel(a) => steer(a, "cancelled", true).await,
    }
}

/// Sets `spec.<field>`; refuses a cluster without a ClusterUpgrade and a finished one.
async fn steer(a: &OneArgs, field: &str, value: bool) -> Result<(), Error> {
    let t = Target::load(&a.kube, &a.cluster).await?;
    let ar = resource(&t.apis).ok_or_else(|| not_installed(&t.apis))?;
    let Some(cu) = t.get_opt(&ar, &t.name).await? else {
        return Err(Error::Other {
            message: format!("cluster {} has no ClusterUpgrade", t.name),
            hint: Some(format!(
                "start one with kubectl capi upgrade {} --to VERSION",
                t.name
            )),
        });
    };
    if is_finished(&cu) {
        return Err(Error::Other {
            message: format!(
                "the upgrade of cluster {} has ended ({}); nothing was changed",
                t.name,
                in_words(&cu)
            ),
            hint: Some(format!("see kubectl capi upgrade status {}", t.name)),
        });
    }
    if cu["spec"][field].as_bool().unwrap_or(false) == value {
        shared::render::line(&format!(
            "the upgrade of cluster {} is already {}",
            t.name,
            if value { field } else { "running" }
        ));
        return Ok(());
    }
    if field == "cancelled" && !cancel_confirmed(&t, &cu, a.yes)? {
        return Ok(());
    }
    shared::api::merge_patch(
        &t.conn,
        &ar,
        &t.namespace,
        &t.name,
        &json!({"spec": {field: value}}),
        shared::api::Write {
            manager: crate::day2::FIELD_MANAGER,
            dry_run: false,
            force: false,
        },
    )
    .await?;
    let what = match (field, value) {
        ("paused", true) => "paused: no further step starts (a rollout under way runs to its end)",
        ("paused", false) => "resumed",
        _ => "cancelled: no further step starts (a rollout under way runs to its end)",
    };
    shared::render::line(&format!("upgrade of cluster {} {what}", t.name));
    Ok(())
}

/// Cancelling ends the upgrade for good (a resumed one would start over from a new
/// ClusterUpgrade), so it is shown and asked on a terminal, and needs `--yes` without one.
fn cancel_confirmed(t: &Target, cu: &Value, yes: bool) -> Result<bool, Error> {
    if yes {
        return Ok(true);
    }
    let what = format!(
        "cancel the upgrade of cluster {} {}: no further step starts, a rollout under way runs to its end, and the cluster stays between versions",
        t.name,
        in_words(cu)
    );
    if !std::io::stdin().is_terminal() {
        return Err(Error::Usage {
            message: format!(
                "refusing to cancel the upgrade of cluster {} without confirmation: stdin is not a terminal",
                t.name
            ),
            hint: Some(format!(
                "pass --yes (kubectl capi upgrade cancel {} --yes); pause it instead with kubectl capi upgrade pause {}",
                t.name, t.name
            )),
        });
    }
    shared::render::info(&format!("This will {what}."));
    if !shared::render::confirm(&format!("Cancel the upgrade of cluster {}?", t.name))? {
        shared::render::line("not cancelled; nothing was changed");
        return Ok(false);
    }
    Ok(true)
}

/// One row of `upgrade status`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Row {
    namespace: String,
    cluster: String,
    version: String,
    phase: String,
    progress: String,
    message: String,
}

#[derive(Serialize)]
struct Rows {
    items: Vec<Row>,
}

impl Render for Rows {
    fn human(&self) -> Human {
        let mut t =
            Table::new(["NAMESPACE", "CLUSTER", "VERSION", "PHASE", "STEP"]).wide(["MESSAGE"]);
        for r in &self.items {
            t.row([
                r.namespace.as_str(),
                r.cluster.as_str(),
                r.version.as_str(),
                r.phase.as_str(),
                r.progress.as_str(),
                r.message.as_str(),
            ]);
        }
        Human::Table(t)
    }
}

/// One ClusterUpgrade, whole.
#[derive(Serialize)]
struct Detail {
    #[serde(flatten)]
    obj: Value,
}

impl Render for Detail {
    fn human(&self) -> Human {
        let spec = spec_of(&self.obj);
        let st = status_of(&self.obj);
        let mut s = format!(
            "Upgrade of cluster {}/{} to {}: {} (step {})\n",
            self.obj["metadata"]["namespace"].as_str().unwrap_or(""),
            spec.cluster_name,
            spec.version,
            st.phase.as_deref().unwrap_or("Pending"),
            st.progress.as_deref().unwrap_or("0/?")
        );
        if let Some(m) = &st.message {
            s.push_str(&format!("  {m}\n"));
        }
        if spec.paused {
            s.push_str("  paused: no further step starts\n");
        }
        for p in &st.plan {
            let state = st.steps.iter().find(|x| x.number == p.number);
            s.push_str(&format!(
                "\nStep {}/{} [{}]: {} {} -> {}\n",
                p.number,
                st.plan.len(),
                state.map(|x| x.phase.as_str()).unwrap_or("Pending"),
                p.target,
                p.from_version,
                p.to_version
            ));
            if let Some(x) = state {
                for (what, when) in [("started", &x.started_at), ("done", &x.completed_at)] {
                    if let Some(w) = when {
                        s.push_str(&format!("  {what}: {w}\n"));
                    }
                }
            }
            s.push_str(&format!("  wait for: {}\n", p.wait_for));
        }
        if !st.findings.is_empty() {
            s.push_str("\nPreflight:\n");
            for f in &st.findings {
                s.push_str(&format!("  {}: {}\n", f.severity, f.message));
            }
        }
        if !st.history.is_empty() {
            s.push_str("\nHistory:\n");
            for h in &st.history {
                s.push_str(&format!(
                    "  {} -> {}: {} ({} .. {})\n",
                    h.from_version.as_deref().unwrap_or("?"),
                    h.version,
                    h.phase,
                    h.started_at.as_deref().unwrap_or("?"),
                    h.completed_at.as_deref().unwrap_or("?")
                ));
            }
        }
        Human::Text(s)
    }
}

async fn status(a: &StatusArgs) -> Result<(), Error> {
    let conn = a.kube.connect().await?;
    let apis = ServerApis::discover(&conn).await?;
    let ar = resource(&apis).ok_or_else(|| not_installed(&apis))?;
    if let Some(name) = &a.cluster {
        kcore::names::check_object_name("cluster", name)?;
        let obj = shared::api::get_or_suggest(&conn, &ar, &conn.namespace, name)
            .await
            .map_err(|e| match e {
                Error::NotFound { suggestions, .. } => Error::NotFound {
                    kind: "ClusterUpgrade".into(),
                    name: name.clone(),
                    namespace: Some(conn.namespace.clone()),
                    suggestions,
                },
                e => e,
            })?;
        let obj = shared::discovery::fields::object_json(&obj);
        return Printer::new(&a.output).print(&Detail { obj });
    }
    let ns = (!a.kube.all_namespaces).then_some(conn.namespace.as_str());
    let list = shared::api::list(&conn, &ar, ns, None).await?;
    let mut items: Vec<Row> = list
        .iter()
        .map(shared::discovery::fields::object_json)
        .map(|o| {
            let spec = spec_of(&o);
            let st = status_of(&o);
            Row {
                namespace: o["metadata"]["namespace"].as_str().unwrap_or("").into(),
                cluster: spec.cluster_name,
                version: spec.version,
                phase: st.phase.unwrap_or_else(|| "Pending".into()),
                progress: st.progress.unwrap_or_default(),
                message: st.message.unwrap_or_default(),
            }
        })
        .collect();
    items.sort_by(|a, b| (&a.namespace, &a.cluster).cmp(&(&b.namespace, &b.cluster)));
    Printer::new(&a.output).print(&Rows { items })
}
