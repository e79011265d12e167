//! `kubectl kamaji restore FILE [--new-name NAME] [--datastore D] [-n NS]`: a tenant back from
//! what `kubectl kamaji backup` wrote, into this management cluster or another one.
//!
//! parse → read the whole file once (every line checked, the counts and the checksum against
//! its manifest; nothing is written from a file that is not whole) → preflight (the namespace,
//! the kinds served, the names free, the DataStore answers and holds nothing under the target
//! prefix) → write the keys (a second read of the file) → apply the objects, identity Secrets
//! first and the Cluster last → wait until the tenant answers → verify (its key count, its
//! `/version`, the `kube-system` Namespace the backup read). Every object carries the backup's
//! checksum (`capi-kamaji.io/restored-from`), so a re-run of a restore that stopped after its
//! keys finishes the job instead of refusing.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args as ClapArgs;
use cli::{DryRunFlag, KubeFlags, parse_duration};
use kclient::discovery::ServerApis;
use kclient::error::Error;
use kclient::render;
use kcore::kamaji::backup::{self as plan, RestoreTarget};

use crate::common::tenant_backup::{preflight, restore, targeted, verify};

#[derive(ClapArgs, Clone, Debug)]
#[command(
    after_help = "The whole file is checked before anything is written: a file cut short or changed after it was written is refused, naming the file. The restore is refused, with nothing written, when an object of the tenant already exists or the DataStore already holds keys under the tenant's prefix. A restore that stopped after writing the keys is finished by running it again.

Examples:
  kubectl kamaji restore prod.kamaji-backup
  kubectl kamaji restore prod.kamaji-backup -n team-b --new-name prod-copy --datastore dedicated
  kubectl kamaji restore prod.kamaji-backup --dry-run=client"
)]
#[command(mut_arg("dry-run", |a| a.help("client: check the file and the preflight, say what would be restored, change nothing")))]
pub struct Args {
    /// The file kubectl kamaji backup wrote
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Restore under another name (the backup's by default)
    #[arg(long, value_name = "NAME")]
    pub new_name: Option<String>,
    /// The DataStore to write the keys to and to name in the control plane (the backup's by default)
    #[arg(long, value_name = "DATASTORE")]
    pub datastore: Option<String>,
    /// How long to wait for the restored tenant to answer
    #[arg(long, value_parser = parse_duration, default_value = "10m", value_name = "DURATION")]
    pub timeout: Duration,
    #[command(flatten)]
    pub dry_run: DryRunFlag,
    #[command(flatten)]
    pub kube: KubeFlags,
}

pub async fn run(args: &Args) -> Result<(), Error> {
    if let Some(n) = &args.new_name {
        kcore::names::check_object_name("--new-name", n)?;
    }
    if let Some(d) = &args.datastore {
        kcore::names::check_object_name("DataStore", d)?;
    }
    if args.dry_run.mode == cli::DryRun::Server {
        return Err(Error::Usage {
            message: "restore --dry-run=server: keys cannot be written to a DataStore in a dry run"
                .into(),
            hint: Some("use --dry-run=client to check the file and the preflight".into()),
        });
    }
    let (manifest, objects) = verify(&args.file)?;
    let target = RestoreTarget::of(
        &manifest,
        args.kube.namespace.as_deref(),
        args.new_name.as_deref(),
        args.datastore.as_deref(),
    );
    let conn = args.kube.connect().await?;
    let apis = ServerApis::discover(&conn).await?;
    let objects = targeted(&manifest, &objects, &target);
    let pre = preflight(&conn, &apis, &manifest, &target, &objects).await?;
    let prefix = target.prefix(&manifest);
    for line in plan::describe(&manifest) {
        render::line(&line);
    }
    if args.dry_run.is_dry() {
        render::line(&format!(
            "would restore {} as {}/{} on DataStore {} under {prefix} (dry run)",
            manifest.tenant.name, target.namespace, target.name, target.data_store
        ));
        return Ok(());
    }
    let done = restore(
        &conn,
        &apis,
        &args.file,
        &manifest,
        &objects,
        &target,
        &pre,
        args.timeout,
    )
    .await?;
    render::line(&done.line(&target, &manifest));
    Ok(())
}
