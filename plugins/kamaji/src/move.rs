//! `kubectl kamaji move CONTROL_PLANE --to-kubeconfig FILE [--to-context C] [--delete-origin]`:
//! a tenant moved to another management cluster, its endpoint, CA and data kept, so its
//! kubeconfigs and workers follow it (`clusterctl move` carries Cluster API objects, not a
//! Kamaji tenant's data).
//!
//! parse → read both clusters (the origin's control plane; the target's preflight on what the
//! backup will carry: namespace, kinds, names, DataStore) → ask → put the origin to sleep
//! (replicas 0, the count kept in `capi-kamaji.io/moving-replicas`, so that no write lands on
//! it after the backup and the target can serve the same endpoint) → back up to a 0600 file
//! → restore on the target (replicas given back) → wait until it answers there → delete the
//! origin (`--delete-origin`) or leave it asleep → remove the file. A re-run after an
//! interruption picks up where it stopped: the origin's annotation says it sleeps for this
//! move, the file is reused, the restore finishes its own objects.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Args as ClapArgs;
use cli::{Conn, KubeFlags, parse_duration};
use kclient::discovery::ServerApis;
use kclient::error::Error;
use kclient::render;
use kcore::kamaji::backup::{self as plan, RESTORED_FROM, RestoreTarget};

use crate::common::control_plane::{self, ControlPlane};
use crate::common::tenant_backup::{
    preflight, provisional, read_witness, restore, targeted, verify, write_backup,
};
use crate::common::tenant_delete::{Deletion, pods_gone};
use crate::common::writes;

#[derive(ClapArgs, Clone, Debug)]
#[command(
    after_help = "The origin is put to sleep (replicas 0) before the backup, so nothing written to it is lost, and the target serves the tenant at the same endpoint with the same CA: kubeconfigs and workers keep working. Without --delete-origin the origin stays asleep; waking it would serve a copy that diverges. Workers' Cluster API objects (MachineDeployments, Machines) are not carried.

Examples:
  kubectl kamaji move prod -n team-a --to-kubeconfig ~/.kube/site-b --delete-origin
  kubectl kamaji move prod --to-kubeconfig site-b.yaml --to-context admin@site-b --yes"
)]
pub struct Args {
    /// The KamajiControlPlane, or a standalone TenantControlPlane
    #[arg(value_name = "CONTROL_PLANE")]
    pub name: String,
    /// The kubeconfig of the management cluster to move to
    #[arg(long, value_name = "FILE", value_hint = clap::ValueHint::FilePath)]
    pub to_kubeconfig: PathBuf,
    /// Its context (the kubeconfig's current one by default)
    #[arg(long, value_name = "CONTEXT")]
    pub to_context: Option<String>,
    /// The DataStore there (the origin's DataStore's name by default)
    #[arg(long, value_name = "DATASTORE")]
    pub to_datastore: Option<String>,
    /// Delete the origin (and its data) once the tenant answers on the target
    #[arg(long)]
    pub delete_origin: bool,
    /// Where the move keeps its backup until it finishes (default: CONTROL_PLANE.kamaji-move)
    #[arg(long, value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// Do not ask (needed without a terminal)
    #[arg(short = 'y', long)]
    pub yes: bool,
    #[arg(long, value_parser = parse_duration, default_value = "10m", value_name = "DURATION")]
    pub timeout: Duration,
    #[command(flatten)]
    pub kube: KubeFlags,
}

pub async fn run(args: &Args) -> Result<(), Error> {
    if let Some(d) = &args.to_datastore {
        kcore::names::check_object_name("DataStore", d)?;
    }
    if !args.yes {
        render::require_terminal(
            "move",
            format!(
                "pass --yes (kubectl kamaji move {} --help says what it does)",
                args.name
            ),
        )?;
    }
    let started = Instant::now();
    let file = args
        .file
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("{}.kamaji-move", args.name)));
    let conn = args.kube.connect().await?;
    let apis = ServerApis::discover(&conn).await?;
    let to = KubeFlags {
        kubeconfig: Some(args.to_kubeconfig.clone()),
        context: args.to_context.clone(),
        namespace: Some(conn.namespace.clone()),
        ..KubeFlags::default()
    }
    .connect()
    .await?;
    if to.server == conn.server {
        return Err(Error::Usage {
            message: format!(
                "--to-kubeconfig names this management cluster ({})",
                conn.server
            ),
            hint: Some(
                "move goes to another one; kubectl kamaji migrate moves a tenant between DataStores"
                    .into(),
            ),
        });
    }
    let to_apis = ServerApis::discover(&to).await?;
    let cp = match control_plane::resolve(&conn, &apis, &args.name).await {
        Ok(cp) => cp,
        Err(e @ Error::NotFound { .. }) => {
            return moved_already(&to, &to_apis, &args.name, e).await;
        }
        Err(e) => return Err(e),
    };
    let holder = holder(&cp)?;
    match plan::moving_to(&holder) {
        Some(server) if server != to.server => {
            return Err(Error::Other {
                message: format!("{} sleeps for a move to {server} already", cp.name),
                hint: Some(format!(
                    "finish that one: kubectl kamaji move {} --to-kubeconfig <its kubeconfig>",
                    cp.name
                )),
            });
        }
        Some(_) => render::info(&format!(
            "{} sleeps for this move already: picking up where it stopped",
            cp.name
        )),
        None => {
            // Everything the target will be asked, before the origin stops serving.
            let (m, objects) = provisional(&conn, &apis, &cp).await?;
            let target = RestoreTarget::of(&m, None, None, args.to_datastore.as_deref());
            preflight(&to, &to_apis, &m, &target, &targeted(&m, &objects, &target)).await?;
            render::info(&format!(
                "This stops {} on {} (replicas {} -> 0), backs it up to {}, restores it on {} (DataStore {}){}.",
                cp.name,
                conn.server,
                plan::replicas(&holder),
                file.display(),
                to.server,
                target.data_store,
                if args.delete_origin {
                    ", then deletes it and its data here"
                } else {
                    "; the origin stays asleep"
                }
            ));
            if !args.yes && !render::confirm(&format!("Move {}?", cp.name))? {
                return Err(Error::other("aborted: nothing was changed"));
            }
        }
    }
    let witness = read_witness(&conn, &cp).await;
    let ar = if cp.kcp.is_some() {
        control_plane::kcp_resource(&apis)?
    } else {
        control_plane::tcp_resource(&apis)?
    };
    let patch = plan::sleep_patch(&holder, &to.server);
    writes::merge_patch(&conn, &ar, &cp.namespace, &cp.name, &patch).await?;
    pods_gone(&conn, &cp.namespace, &cp.tcp_name(), args.timeout).await?;
    render::info(&format!("{} sleeps on {}", cp.name, conn.server));

    let manifest = match reusable(&file, &cp) {
        Some(m) => {
            render::info(&format!(
                "reusing {}, the backup an earlier run took",
                file.display()
            ));
            m
        }
        None => {
            let cp = control_plane::resolve(&conn, &apis, &cp.name).await?;
            write_backup(&conn, &apis, &cp, &file, witness).await?
        }
    };
    for line in plan::describe(&manifest) {
        render::info(&line);
    }
    let (manifest, objects) = verify(&file)?;
    let target = RestoreTarget::of(&manifest, None, None, args.to_datastore.as_deref());
    let objects = targeted(&manifest, &objects, &target);
    let pre = preflight(&to, &to_apis, &manifest, &target, &objects).await?;
    let left = args.timeout.saturating_sub(started.elapsed());
    let done = restore(
        &to, &to_apis, &file, &manifest, &objects, &target, &pre, left,
    )
    .await?;
    render::line(&done.line(&target, &manifest));

    if args.delete_origin {
        let d = Deletion::plan(&conn, &apis, &cp.name).await?;
        d.delete(&conn).await?;
        let left = args.timeout.saturating_sub(started.elapsed());
        render::line(&d.wait(&conn, &apis, left).await?);
    } else {
        render::info(&format!(
            "{} stays asleep on {} (replicas 0): remove it with kubectl kamaji delete {} -n {} --yes --wait; waking it would serve a copy that diverges",
            cp.name, conn.server, cp.name, cp.namespace
        ));
    }
    match std::fs::remove_file(&file) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => render::warn(&format!(
            "cannot remove {} ({e}): it holds the tenant's keys and CA; remove it",
            file.display()
        )),
    }
    render::line(&format!(
        "{} moved to {} ({}s)",
        cp.name,
        to.server,
        started.elapsed().as_secs()
    ));
    Ok(())
}

/// The object whose replicas the move sets: the KamajiControlPlane, else the standalone
/// TenantControlPlane.
fn holder(cp: &ControlPlane) -> Result<serde_json::Value, Error> {
    cp.kcp.clone().or_else(|| cp.tcp.clone()).ok_or_else(|| {
        Error::other(format!(
            "{} has neither a KamajiControlPlane nor a TenantControlPlane",
            cp.name
        ))
    })
}

/// The backup an earlier run of this move left, when whole and of this tenant.
fn reusable(file: &std::path::Path, cp: &ControlPlane) -> Option<plan::BackupManifest> {
    if !file.exists() {
        return None;
    }
    match verify(file) {
        Ok((m, _)) if m.tenant.namespace == cp.namespace && m.tenant.name == cp.name => Some(m),
        Ok(_) => None,
        Err(e) => {
            render::warn(&format!("{e}: taking the backup again"));
            None
        }
    }
}

/// The origin has no such control plane: a move that finished has one on the target, restored
/// by a move (`capi-kamaji.io/restored-from`); anything else is the origin's "not found".
async fn moved_already(
    to: &Conn,
    to_apis: &ServerApis,
    name: &str,
    not_found: Error,
) -> Result<(), Error> {
    let Ok(there) = control_plane::resolve(to, to_apis, name).await else {
        return Err(not_found);
    };
    let obj = there.kcp.as_ref().or(there.tcp.as_ref());
    if obj.is_some_and(|o| o["metadata"]["annotations"][RESTORED_FROM].is_string()) {
        render::line(&format!(
            "{name} runs on {} already: nothing left to move",
            to.server
        ));
        return Ok(());
    }
    Err(not_found)
}
