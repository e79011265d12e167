//! `kubectl capi pause CLUSTER` and `kubectl capi resume CLUSTER`, one module for the two verbs
//! (they take the same flags): set or clear the Cluster's `spec.paused`, which stops (or
//! restarts) reconciliation of the cluster and everything in it.

use clap::Args as ClapArgs;
use cli::{DryRun, DryRunFlag, KubeFlags};
use kclient::error::Error;
use kcore::fields;
use serde_json::{Value, json};

use crate::common::cluster::ClusterHandle;
use crate::common::names::display_name;

#[derive(ClapArgs, Clone, Debug)]
pub struct Args {
    /// The cluster
    #[arg(value_name = "CLUSTER")]
    pub cluster: String,
    #[command(flatten)]
    pub dry_run: DryRunFlag,
    #[command(flatten)]
    pub kube: KubeFlags,
}

/// `kubectl capi pause CLUSTER`.
pub async fn pause(args: &Args) -> Result<(), Error> {
    set_paused(args, true).await
}

/// `kubectl capi resume CLUSTER`.
pub async fn resume(args: &Args) -> Result<(), Error> {
    set_paused(args, false).await
}

/// Sets `spec.paused` to `paused`.
async fn set_paused(args: &Args, paused: bool) -> Result<(), Error> {
    let t = ClusterHandle::load(&args.kube, &args.cluster).await?;
    let now = fields::at(&t.cluster, &["spec", "paused"])
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let what = if paused { "paused" } else { "resumed" };
    let shown = display_name(&t.cluster_ar.kind, &t.cluster_ar.api_version, &t.name);
    if now == paused {
        let state = if paused { "paused" } else { "not paused" };
        kclient::render::line(&format!("{shown} is already {state}"));
        return Ok(());
    }
    let obj = t
        .apply(
            &t.cluster_ar,
            &t.name,
            json!({"spec": {"paused": paused}}),
            *args.dry_run,
        )
        .await?;
    if args.dry_run == DryRun::Client {
        kclient::render::raw(kclient::render::to_yaml(&obj)?.as_bytes());
    }
    kclient::render::line(&format!("{shown} {what}{}", args.dry_run.suffix()));
    Ok(())
}
