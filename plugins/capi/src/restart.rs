//! `kubectl capi restart CLUSTER [--deployment NAME]`: roll the cluster's machines, as
//! `clusterctl alpha rollout restart` does, by setting the rollout time to now: v1beta2
//! `spec.rollout.after`, v1beta1 `spec.rolloutAfter`. Without `--deployment` it rolls every
//! MachineDeployment and a machine-based control plane (KubeadmControlPlane); control planes
//! that run as pods (KamajiControlPlane) have no machines to roll.

use clap::Args as ClapArgs;
use cli::{DryRun, DryRunFlag, KubeFlags};
use kclient::error::Error;
use kcore::fields;
use kcore::groups::CapiVersion;
use kcore::json::nest;

use crate::common::cluster::ClusterHandle;
use crate::common::names::{display_name, name_of};
use crate::common::time::rollout_time;

#[derive(ClapArgs, Clone, Debug)]
pub struct Args {
    /// The cluster
    #[arg(value_name = "CLUSTER")]
    pub cluster: String,
    /// Roll only this MachineDeployment (its name, or its ClusterClass topology name)
    #[arg(long, value_name = "NAME")]
    pub deployment: Option<String>,
    #[command(flatten)]
    pub dry_run: DryRunFlag,
    #[command(flatten)]
    pub kube: KubeFlags,
}

use kcore::labels::TOPOLOGY_DEPLOYMENT_LABEL;

pub async fn run(args: &Args) -> Result<(), Error> {
    let t = ClusterHandle::load(&args.kube, &args.cluster).await?;
    let md_ar = t.core("MachineDeployment")?;
    let mds = t.machine_deployments().await?;
    let chosen: Vec<&serde_json::Value> = match &args.deployment {
        Some(d) => {
            let found: Vec<_> = mds
                .iter()
                .filter(|m| {
                    name_of(m) == d
                        || m.pointer(&format!(
                            "/metadata/labels/{}",
                            TOPOLOGY_DEPLOYMENT_LABEL.replace('/', "~1")
                        ))
                        .and_then(serde_json::Value::as_str)
                            == Some(d.as_str())
                })
                .collect();
            if found.is_empty() {
                let names: Vec<&str> = mds.iter().map(name_of).collect();
                return Err(Error::NotFound {
                    kind: format!("MachineDeployment of cluster {}", t.name),
                    name: d.clone(),
                    namespace: Some(t.namespace.clone()),
                    suggestions: kcore::text::closest_names(d, names.iter().copied()),
                });
            }
            found
        }
        None => mds.iter().collect(),
    };
    let at = rollout_time();
    let mut done = 0;
    if args.deployment.is_none()
        && let Some((ar, cp)) = t.control_plane().await?
    {
        if ar.kind == "KubeadmControlPlane" {
            let level = CapiVersion::of_api_version(&ar.api_version).unwrap_or(t.level);
            let paths = fields::rollout_paths(&ar.kind, level);
            restart_one(&t, &ar, name_of(&cp), paths.after, &at, *args.dry_run).await?;
            done += 1;
        } else {
            kclient::render::info(&format!(
                "{} {} runs no machines of its own; nothing to roll there",
                ar.kind,
                name_of(&cp)
            ));
        }
    }
    for md in chosen {
        let level = fields::api_level(md).unwrap_or(t.level);
        let paths = fields::rollout_paths("MachineDeployment", level);
        restart_one(&t, &md_ar, name_of(md), paths.after, &at, *args.dry_run).await?;
        done += 1;
    }
    if done == 0 {
        return Err(Error::Other {
            message: format!(
                "cluster {} has no MachineDeployments or machine-based control plane to restart",
                t.name
            ),
            hint: None,
        });
    }
    Ok(())
}

async fn restart_one(
    t: &ClusterHandle,
    ar: &kube::discovery::ApiResource,
    name: &str,
    path: &[&str],
    at: &str,
    dry: DryRun,
) -> Result<(), Error> {
    let obj = t
        .apply(ar, name, nest(path, serde_json::json!(at)), dry)
        .await?;
    if dry == DryRun::Client {
        kclient::render::raw(format!("---\n{}", kclient::render::to_yaml(&obj)?).as_bytes());
    }
    kclient::render::line(&format!(
        "{} restarted{}",
        display_name(&ar.kind, &ar.api_version, name),
        dry.suffix()
    ));
    Ok(())
}
