//! `kubectl kamaji backup CONTROL_PLANE [-o FILE]`: one tenant's data and what brings it back,
//! in one file (`kcore::kamaji::backup` says what the file holds and why).
//!
//! parse → read (the control plane, its Cluster and infrastructure cluster, the identity
//! Secrets, the DataStore dialled from here) → write (the keys page by page at one revision,
//! the objects, the manifest; gzip into a 0600 temporary file renamed into place when whole) →
//! say what was written. Nothing on the cluster changes.

use std::path::PathBuf;

use clap::Args as ClapArgs;
use cli::KubeFlags;
use kclient::discovery::ServerApis;
use kclient::error::Error;
use kclient::render;
use kcore::kamaji::backup as plan;

use crate::common::control_plane;
use crate::common::tenant_backup::{read_witness, write_backup};

#[derive(ClapArgs, Clone, Debug)]
#[command(
    after_help = "The file holds the tenant's keys read from its etcd DataStore at one revision, the KamajiControlPlane with its Cluster and infrastructure cluster (or the standalone TenantControlPlane), and the tenant's CA, front-proxy CA and ServiceAccount key Secrets; it is written with mode 0600 and appears only when complete. Workers (MachineDeployments, Machines) are not carried. kubectl kamaji restore FILE brings the tenant back, here or on another management cluster.

Examples:
  kubectl kamaji backup prod -n team-a -o prod.kamaji-backup
  kubectl kamaji restore prod.kamaji-backup"
)]
pub struct Args {
    /// The KamajiControlPlane, or a standalone TenantControlPlane
    #[arg(value_name = "CONTROL_PLANE")]
    pub name: String,
    /// The file to write (default: CONTROL_PLANE.kamaji-backup in the current directory)
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub file: Option<PathBuf>,
    #[command(flatten)]
    pub kube: KubeFlags,
}

/// `-o` here names a file: an output format typed out of habit is refused rather than written
/// to a file called `json`.
fn file_of(args: &Args) -> Result<PathBuf, Error> {
    let Some(file) = &args.file else {
        return Ok(PathBuf::from(format!("{}.kamaji-backup", args.name)));
    };
    let text = file.to_string_lossy();
    let format = ["json", "yaml", "wide", "name", "table"].contains(&text.as_ref())
        || text.starts_with("jsonpath");
    if format {
        return Err(Error::Usage {
            message: format!(
                "-o {text}: backup's -o names the file to write, not an output format"
            ),
            hint: Some(format!(
                "pass a file name (-o ./{text} to really call it that)"
            )),
        });
    }
    Ok(file.clone())
}

pub async fn run(args: &Args) -> Result<(), Error> {
    let path = file_of(args)?;
    let conn = args.kube.connect().await?;
    let apis = ServerApis::discover(&conn).await?;
    let cp = control_plane::resolve(&conn, &apis, &args.name).await?;
    let witness = read_witness(&conn, &cp).await;
    let manifest = write_backup(&conn, &apis, &cp, &path, witness).await?;
    for line in plan::describe(&manifest) {
        render::line(&line);
    }
    render::line(&format!(
        "backup of {} written to {}",
        cp.name,
        path.display()
    ));
    Ok(())
}
