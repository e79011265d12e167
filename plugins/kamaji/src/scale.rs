//! `kubectl kamaji scale CONTROL_PLANE [--replicas N] [--workers N] [--wait]`: control-plane
//! replicas (0 puts it to sleep; Kamaji keeps its state in the DataStore) and the workers of
//! the cluster's MachineDeployment; on a ClusterClass cluster, both through the Cluster's
//! `spec.topology`. Plan: `kcore::kamaji::plan`.

use std::time::Duration;

use clap::Args as ClapArgs;
use cli::{KubeFlags, parse_duration};
use kclient::discovery::ServerApis;
use kclient::error::Error;
use kclient::render::{self, Poll};
use kcore::kamaji::plan::{self as plan, KamajiScaleRequest, ScaleObserved, topology};
use serde_json::Value;

use crate::common::control_plane::{self, ControlPlane};
use crate::common::control_plane_row::ControlPlaneRow;
use crate::common::tenant_status;
use crate::common::writes;

#[derive(ClapArgs, Clone, Debug)]
#[command(
    after_help = "0 replicas puts the control plane to sleep (Kamaji keeps its state in the DataStore)."
)]
pub struct Args {
    /// The KamajiControlPlane
    #[arg(value_name = "CONTROL_PLANE")]
    pub name: String,
    /// Control-plane replicas (0 = asleep)
    #[arg(long, value_name = "N", value_parser = cli::count(kcore::plan::MAX_CONTROL_PLANE_REPLICAS), allow_negative_numbers = true)]
    pub replicas: Option<i64>,
    /// Worker replicas of the cluster's MachineDeployment
    #[arg(long, value_name = "N", value_parser = cli::count(kcore::plan::MAX_WORKERS), allow_negative_numbers = true)]
    pub workers: Option<i64>,
    /// Wait until the control plane reports the new replicas
    #[arg(long)]
    pub wait: bool,
    #[arg(long, value_parser = parse_duration, default_value = "5m", value_name = "DURATION")]
    pub timeout: Duration,
    #[command(flatten)]
    pub kube: KubeFlags,
}

pub async fn run(args: &Args) -> Result<(), Error> {
    let req = KamajiScaleRequest::new(args.replicas, args.workers)?;
    let conn = args.kube.connect().await?;
    let apis = ServerApis::discover(&conn).await?;
    let t = control_plane::resolve(&conn, &apis, &args.name).await?;
    let kcp = t.require_kcp()?;
    let cluster = control_plane::owning_cluster(&conn, &apis, &t).await?;
    if let Some(c) = cluster.as_ref().filter(|c| topology::topology(c).is_some()) {
        scale_topology(&conn, &apis, c, req).await?;
    } else {
        scale_objects(&conn, &apis, &t, &kcp, req).await?;
    }
    if args.wait
        && let Some(r) = req.replicas
    {
        wait_replicas(&conn, &apis, &t.name, r, args.timeout).await?;
        let asleep = if r == 0 { " (asleep)" } else { "" };
        render::info(&format!("{} runs {r} replicas{asleep}", t.name));
    }
    Ok(())
}

/// A ClusterClass cluster: the replicas go to the Cluster's topology, which CAPI's topology
/// controller writes into the KamajiControlPlane and the MachineDeployment it manages.
async fn scale_topology(
    conn: &cli::Conn,
    apis: &ServerApis,
    cluster: &Value,
    req: KamajiScaleRequest,
) -> Result<(), Error> {
    let cluster_ar = apis.cluster()?;
    // Both are planned before either is applied: a refusal changes nothing.
    let changes = [
        req.replicas
            .map(|r| topology::scale_control_plane(cluster, r))
            .transpose()?,
        req.workers
            .map(|w| topology::scale_workers(cluster, w))
            .transpose()?,
    ];
    for change in changes.into_iter().flatten() {
        writes::json_patch(conn, &cluster_ar, &change.patch).await?;
        render::line(&change.done);
    }
    Ok(())
}

/// A cluster without a topology: the KamajiControlPlane and the cluster's MachineDeployment.
async fn scale_objects(
    conn: &cli::Conn,
    apis: &ServerApis,
    t: &ControlPlane,
    kcp: &Value,
    req: KamajiScaleRequest,
) -> Result<(), Error> {
    if let Some(r) = req.replicas {
        let change = plan::scale_control_plane(kcp, r);
        let kcp_ar = control_plane::kcp_resource(apis)?;
        writes::merge_patch(conn, &kcp_ar, &t.namespace, &t.name, &change.merge_patch).await?;
        render::line(&change.done);
    }
    if let Some(w) = req.workers {
        let md_ar = apis.capi_kind("MachineDeployment")?;
        let mds = t.cluster_objects(conn, &md_ar).await?;
        let change = plan::scale_workers(&t.cluster_or_own_name(), &mds, w)?;
        writes::merge_patch(
            conn,
            &md_ar,
            &t.namespace,
            &change.name,
            &change.merge_patch,
        )
        .await?;
        render::line(&change.done);
    }
    Ok(())
}

/// Waits until the control plane runs `r` replicas (or sleeps, for 0).
async fn wait_replicas(
    conn: &cli::Conn,
    apis: &ServerApis,
    name: &str,
    r: i64,
    timeout: Duration,
) -> Result<(), Error> {
    render::wait_until(
        &format!("waiting for {name} to run {r} replicas"),
        timeout,
        Duration::from_millis(500),
        || async move {
            let t = control_plane::resolve(conn, apis, name).await?;
            let row = ControlPlaneRow::of(t.kcp.as_ref(), t.tcp.as_ref());
            let seen = ScaleObserved {
                phase: t
                    .tcp
                    .as_ref()
                    .and_then(tenant_status::tcp_phase)
                    .unwrap_or_default(),
                ready_replicas: row.ready_replicas,
                deployment_replicas: t.tcp.as_ref().and_then(ScaleObserved::deployment_replicas),
            };
            Ok(if seen.done(r) {
                Poll::Ready(())
            } else {
                Poll::Pending(format!(
                    "{}/{r} ready, TenantControlPlane {}",
                    seen.ready_replicas, seen.phase
                ))
            })
        },
    )
    .await
}
