//! `kubectl capi alpha rollout restart|pause|resume KIND/NAME`: clusterctl's
//! `alpha rollout` verbs with clusterctl's meaning (Cluster API v1.14,
//! `cmd/clusterctl/client/alpha/rollout_{restarter,pauser,resumer}.go`), for scripts that call
//! them. They act on one MachineDeployment or KubeadmControlPlane:
//! - restart sets the rollout time to now (v1beta2 `spec.rollout.after`, v1beta1
//!   `spec.rolloutAfter`) and refuses a paused object;
//! - pause sets a MachineDeployment's `spec.paused`, or a KubeadmControlPlane's
//!   `cluster.x-k8s.io/paused` annotation; resume clears them; both refuse a no-op as clusterctl does.
//!
//! Our cluster-level verbs (`restart CLUSTER`, `pause CLUSTER`) remain the everyday forms.

use clap::{Args as ClapArgs, Subcommand};
use cli::{DryRun, DryRunFlag, KubeFlags};
use kclient::discovery::ServerApis;
use kclient::error::Error;
use kcore::fields;
use kcore::groups::CapiVersion;
use kcore::json::nest;
use serde_json::{Value, json};

use crate::common::names::display_name;
use crate::common::time::rollout_time;
use crate::common::writes::FIELD_MANAGER;

use kcore::labels::PAUSED_ANNOTATION;

#[derive(ClapArgs, Clone, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub what: AlphaCommand,
}

#[derive(Subcommand, Clone, Debug)]
pub enum AlphaCommand {
    /// clusterctl alpha rollout: restart, pause or resume a MachineDeployment or KubeadmControlPlane
    Rollout(RolloutArgs),
}

#[derive(ClapArgs, Clone, Debug)]
pub struct RolloutArgs {
    #[command(subcommand)]
    pub action: RolloutAction,
}

#[derive(Subcommand, Clone, Debug)]
pub enum RolloutAction {
    /// Roll the machines of RESOURCE (sets the rollout time to now)
    Restart(ResourceArgs),
    /// Pause RESOURCE
    Pause(ResourceArgs),
    /// Resume a paused RESOURCE
    Resume(ResourceArgs),
}

#[derive(ClapArgs, Clone, Debug)]
#[command(
    after_help = "RESOURCE is machinedeployment/NAME (md/NAME) or kubeadmcontrolplane/NAME (kcp/NAME), as in clusterctl.\n\nExamples:\n  kubectl capi alpha rollout restart machinedeployment/my-md-0\n  kubectl capi alpha rollout pause kubeadmcontrolplane/my-kcp -n team-a"
)]
pub struct ResourceArgs {
    /// KIND/NAME
    #[arg(value_name = "RESOURCE")]
    pub resource: String,
    #[command(flatten)]
    pub dry_run: DryRunFlag,
    #[command(flatten)]
    pub kube: KubeFlags,
}

/// `md/x` → ("MachineDeployment", group, "x"), with clusterctl's accepted spellings.
fn parse_resource(s: &str) -> Result<(&'static str, &'static str, &str), Error> {
    let usage = || Error::Usage {
        message: format!("{s:?} is not KIND/NAME"),
        hint: Some(
            "use machinedeployment/NAME or kubeadmcontrolplane/NAME, as clusterctl does".into(),
        ),
    };
    let (kind, name) = s.split_once('/').ok_or_else(usage)?;
    let kind = kind.to_ascii_lowercase();
    let kind = kind.split('.').next().unwrap_or_default();
    let (k, g) = match kind {
        "machinedeployment" | "machinedeployments" | "md" => {
            ("MachineDeployment", kcore::groups::CAPI_GROUP)
        }
        "kubeadmcontrolplane" | "kubeadmcontrolplanes" | "kcp" => {
            ("KubeadmControlPlane", kcore::groups::CONTROLPLANE_GROUP)
        }
        other => {
            return Err(Error::Usage {
                message: format!("alpha rollout does not support kind {other:?}"),
                hint: Some(
                    "clusterctl supports machinedeployment and kubeadmcontrolplane; for a whole cluster use kubectl capi restart|pause|resume CLUSTER".into(),
                ),
            });
        }
    };
    kcore::names::check_object_name(k, name)?;
    Ok((k, g, name))
}

fn is_paused(kind: &str, obj: &Value) -> bool {
    match kind {
        "MachineDeployment" => kcore::json::bool_at(obj, &["spec", "paused"]).unwrap_or(false),
        _ => kcore::json::annotation(obj, PAUSED_ANNOTATION).is_some(),
    }
}

pub async fn run(args: &Args) -> Result<(), Error> {
    let AlphaCommand::Rollout(r) = &args.what;
    let (a, verb) = match &r.action {
        RolloutAction::Restart(a) => (a, "restart"),
        RolloutAction::Pause(a) => (a, "pause"),
        RolloutAction::Resume(a) => (a, "resume"),
    };
    let (kind, group, name) = parse_resource(&a.resource)?;
    let conn = a.kube.connect().await?;
    let ns = conn.namespace.clone();
    let apis = ServerApis::discover(&conn).await?;
    apis.require_capi()?;
    let ar = apis
        .provider_kind(group, kind)
        .ok_or_else(|| apis.not_installed(kind, group, "clusterctl init"))?;
    let obj = kclient::api::get_or_suggest(&conn, &ar, &ns, name).await?;
    let obj = fields::object_json(&obj);
    let shown = display_name(&ar.kind, &ar.api_version, name);
    let paused = is_paused(kind, &obj);
    let patch = match verb {
        "restart" if paused => {
            return Err(Error::Other {
                message: format!("{shown} is paused; a paused object cannot be restarted"),
                hint: Some(format!(
                    "resume it first: kubectl capi alpha rollout resume {}",
                    a.resource
                )),
            });
        }
        "restart" => {
            let level =
                CapiVersion::of_api_version(&ar.api_version).unwrap_or(CapiVersion::V1Beta2);
            nest(
                fields::rollout_paths(kind, level).after,
                json!(rollout_time()),
            )
        }
        "pause" | "resume" if paused == (verb == "pause") => {
            let state = if paused {
                "already paused"
            } else {
                "not paused"
            };
            return Err(Error::other(format!("{shown} is {state}")));
        }
        _ if kind == "MachineDeployment" => json!({"spec": {"paused": verb == "pause"}}),
        _ => {
            let value = if verb == "pause" {
                json!("true")
            } else {
                Value::Null
            };
            json!({"metadata": {"annotations": {PAUSED_ANNOTATION: value}}})
        }
    };
    let w = kclient::api::Write {
        manager: FIELD_MANAGER,
        dry_run: a.dry_run.server(),
        force: false,
    };
    if a.dry_run == DryRun::Client {
        kclient::render::raw(format!("---\n{}", kclient::render::to_yaml(&patch)?).as_bytes());
    } else {
        kclient::api::merge_patch(&conn, &ar, &ns, name, &patch, w).await?;
    }
    let done = match verb {
        "restart" => "restarted",
        "pause" => "paused",
        _ => "resumed",
    };
    kclient::render::line(&format!("{shown} {done}{}", a.dry_run.suffix()));
    Ok(())
}
