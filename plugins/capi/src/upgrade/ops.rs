//! `kubectl capi upgrade status [CLUSTER]`, `pause`, `resume` and `cancel`: reading and
//! steering the ClusterUpgrades the reconciler carries out.

use clap::{Args as ClapArgs, Subcommand};
use cli::{KubeFlags, OutputFlags};
use kclient::discovery::ServerApis;
use kclient::error::Error;
use kclient::render::{Human, Printer, Render, Table};
use serde::Serialize;
use serde_json::{Value, json};

use crate::common::cluster::ClusterHandle;
use crate::common::cluster_upgrade::{
    in_words, is_finished, not_installed, resource, spec_of, status_of,
};
use crate::common::writes::FIELD_MANAGER;

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
    let t = ClusterHandle::load(&a.kube, &a.cluster).await?;
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
        kclient::render::line(&format!(
            "the upgrade of cluster {} is already {}",
            t.name,
            if value { field } else { "running" }
        ));
        return Ok(());
    }
    if field == "cancelled" && !cancel_confirmed(&t, &cu, a.yes)? {
        return Ok(());
    }
    kclient::api::merge_patch(
        &t.conn,
        &ar,
        &t.namespace,
        &t.name,
        &json!({"spec": {field: value}}),
        kclient::api::Write {
            manager: FIELD_MANAGER,
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
    kclient::render::line(&format!("upgrade of cluster {} {what}", t.name));
    Ok(())
}

/// Cancelling ends the upgrade for good (a resumed one would start over from a new
/// ClusterUpgrade), so it is shown and asked on a terminal, and needs `--yes` without one.
fn cancel_confirmed(t: &ClusterHandle, cu: &Value, yes: bool) -> Result<bool, Error> {
    if yes {
        return Ok(true);
    }
    let what = format!(
        "cancel the upgrade of cluster {} {}: no further step starts, a rollout under way runs to its end, and the cluster stays between versions",
        t.name,
        in_words(cu)
    );
    kclient::render::require_terminal(
        &format!("cancel the upgrade of cluster {}", t.name),
        format!(
            "pass --yes (kubectl capi upgrade cancel {} --yes); pause it instead with kubectl capi upgrade pause {}",
            t.name, t.name
        ),
    )?;
    kclient::render::info(&format!("This will {what}."));
    if !kclient::render::confirm(&format!("Cancel the upgrade of cluster {}?", t.name))? {
        kclient::render::line("not cancelled; nothing was changed");
        return Ok(false);
    }
    Ok(true)
}

/// One row of `upgrade status`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct StatusRow {
    namespace: String,
    cluster: String,
    version: String,
    phase: String,
    progress: String,
    message: String,
}

#[derive(Serialize)]
struct StatusRows {
    items: Vec<StatusRow>,
}

impl Render for StatusRows {
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
struct UpgradeDetail {
    #[serde(flatten)]
    obj: Value,
}

impl Render for UpgradeDetail {
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
        let obj = kclient::api::get_or_suggest(&conn, &ar, &conn.namespace, name)
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
        let obj = kcore::fields::object_json(&obj);
        return Printer::new(&a.output).print(&UpgradeDetail { obj });
    }
    let ns = (!a.kube.all_namespaces).then_some(conn.namespace.as_str());
    let list = kclient::api::list_values(&conn, &ar, ns, None).await?;
    let mut items: Vec<StatusRow> = list
        .iter()
        .map(|o| {
            let spec = spec_of(o);
            let st = status_of(o);
            StatusRow {
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
    Printer::new(&a.output).print(&StatusRows { items })
}
