//! `kubectl kamaji backup CONTROL_PLANE [-o FILE]`: one tenant's data and what brings it back,
//! in one file (`kcore::kamaji::backup` says what the file holds and why).
//!
//! parse → read (the control plane, its Cluster and infrastructure cluster, the identity
//! Secrets, the DataStore dialled from here) → write (the keys page by page at one revision,
//! the objects, the manifest; gzip into a 0600 temporary file renamed into place when whole) →
//! say what was written. Nothing on the cluster changes.

use std::path::{Path, PathBuf};

use clap::Args as ClapArgs;
use cli::{Conn, KubeFlags};
use futures::StreamExt;
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
  kubectl kamaji backup -A -o /var/backups/tenants --max-parallel 8
  kubectl kamaji restore prod.kamaji-backup"
)]
pub struct Args {
    /// The KamajiControlPlane, or a standalone TenantControlPlane (or -A, -l)
    #[arg(value_name = "CONTROL_PLANE", required_unless_present_any = ["kube-all_namespaces", "selector"])]
    pub name: Option<String>,
    /// The file to write (default: CONTROL_PLANE.kamaji-backup); with -A or -l, the directory (default: the current one)
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// Back up every control plane whose labels match (kubectl's label selector)
    #[arg(short = 'l', long, value_name = "SELECTOR", conflicts_with = "name")]
    pub selector: Option<String>,
    /// With -A or -l: how many backups run at once
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=MAX_PARALLEL), value_name = "N")]
    pub max_parallel: u16,
    #[command(flatten)]
    pub kube: KubeFlags,
}

/// The most backups `--max-parallel` runs at once: each holds a page of keys and two connections.
const MAX_PARALLEL: i64 = 32;

/// `-o` here names a file or a directory: an output format typed out of habit is refused rather
/// than written to a file called `json`.
fn output_of(args: &Args) -> Result<Option<PathBuf>, Error> {
    let Some(file) = &args.file else {
        return Ok(None);
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
    Ok(Some(file.clone()))
}

pub async fn run(args: &Args) -> Result<(), Error> {
    let out = output_of(args)?;
    if args.kube.all_namespaces && args.name.is_some() {
        return Err(Error::Usage {
            message: "backup takes a CONTROL_PLANE or -A, not both".into(),
            hint: Some("kubectl kamaji backup -A -o DIR backs up every control plane".into()),
        });
    }
    let conn = args.kube.connect().await?;
    let apis = ServerApis::discover(&conn).await?;
    let Some(name) = &args.name else {
        let dir = out.unwrap_or_else(|| PathBuf::from("."));
        return many(&conn, &apis, args, &dir).await;
    };
    let path = out.unwrap_or_else(|| PathBuf::from(format!("{name}.kamaji-backup")));
    let cp = control_plane::resolve(&conn, &apis, name).await?;
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

/// `-A` / `-l`: every chosen control plane into `dir` (`<namespace>.<name>.kamaji-backup`),
/// `--max-parallel` at a time; one line each; a failure fails the run once all are done.
async fn many(conn: &Conn, apis: &ServerApis, args: &Args, dir: &Path) -> Result<(), Error> {
    let ns = (!args.kube.all_namespaces).then_some(conn.namespace.as_str());
    let chosen = control_plane::list_names(conn, apis, ns, args.selector.as_deref()).await?;
    if chosen.is_empty() {
        render::none_found("control planes", ns);
        return Ok(());
    }
    if !dir.exists() {
        kclient::kubeconfig::create_private_dir(dir)?;
    }
    let total = chosen.len();
    let results: Vec<(String, Result<PathBuf, Error>)> = futures::stream::iter(chosen)
        .map(|(ns, name)| async move {
            let path = dir.join(format!("{ns}.{name}.kamaji-backup"));
            let scoped = Conn {
                namespace: ns.clone(),
                namespace_explicit: true,
                ..conn.clone()
            };
            let result = async {
                let cp = control_plane::resolve(&scoped, apis, &name).await?;
                let witness = read_witness(&scoped, &cp).await;
                let m = write_backup(&scoped, apis, &cp, &path, witness).await?;
                render::line(&format!(
                    "{ns}/{name}: {} keys at revision {} written to {}",
                    m.keys,
                    m.revision,
                    path.display()
                ));
                Ok(path)
            }
            .await;
            (format!("{ns}/{name}"), result)
        })
        .buffer_unordered(usize::from(args.max_parallel))
        .collect()
        .await;
    let failed: Vec<String> = results
        .iter()
        .filter_map(|(who, r)| r.as_ref().err().map(|e| format!("{who}: {e}")))
        .collect();
    for f in &failed {
        render::warn(f);
    }
    if failed.is_empty() {
        return Ok(());
    }
    Err(Error::Other {
        message: format!("{} of {total} backups failed", failed.len()),
        hint: Some("each failure is named above; re-run with those control planes".into()),
    })
}
