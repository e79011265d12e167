//! `kubectl capi kubeconfig [get] CLUSTER [-o yaml|json] [--write-to FILE] [--merge[=FILE]
//! [--context-name NAME] [--set-current] [--force]]`: the workload cluster's kubeconfig from
//! Secret `<cluster>-kubeconfig` (key `value`), printed, written to a file, or merged into the
//! user's kubeconfig. The flags and the merge are the ones `kubectl kamaji kubeconfig get`
//! has ([`cli::KubeconfigFlags`], `kclient::kubeconfig::deliver`).
//!
//! clusterctl's form works too: `get kubeconfig NAME -n NS` becomes
//! `kubectl capi kubeconfig get NAME -n NS`, and its `--kubeconfig-context` is kubectl's
//! `--context` (`cmd/clusterctl/cmd/get_kubeconfig.go`, Cluster API v1.14).

use clap::{Args as ClapArgs, Subcommand};
use cli::{KubeFlags, KubeconfigFlags};
use kclient::error::Error;
use kclient::kubeconfig;

use crate::common::workload_kubeconfig;

const HELP: &str = "Without --write-to or --merge the kubeconfig is printed on stdout as the Secret holds it (-o json for JSON).

--merge adds the cluster, user and context (CLUSTER, CLUSTER-admin, CLUSTER-admin@CLUSTER, or --context-name) to your kubeconfig (--merge=FILE, else the first file of KUBECONFIG, else ~/.kube/config): the file is replaced atomically, the previous version is kept as <file>.bak, and existing entries with the same names are never overwritten unless --force.

clusterctl's word order works too: kubectl capi kubeconfig get CLUSTER -n NS (clusterctl get kubeconfig CLUSTER -n NS); --kubeconfig-context is --context.

Older spellings still work: --output FILE and --output-file FILE (--write-to FILE), --merge-into FILE (--merge=FILE), --switch (--set-current).

Examples:
  kubectl capi kubeconfig prod > prod.kubeconfig
  kubectl capi kubeconfig prod -o json
  kubectl capi kubeconfig prod --write-to ~/prod.kubeconfig
  kubectl capi kubeconfig prod --merge --set-current
  kubectl capi kubeconfig get prod -n team-a";

#[derive(ClapArgs, Clone, Debug)]
#[command(
    after_help = HELP,
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
pub struct Args {
    /// clusterctl's word order (`get kubeconfig CLUSTER`); hidden so completion offers clusters
    #[command(subcommand)]
    pub get: Option<Get>,
    /// The cluster
    #[arg(value_name = "CLUSTER", required = true)]
    pub cluster: Option<String>,
    #[command(flatten)]
    pub flags: Flags,
}

#[derive(Subcommand, Clone, Debug)]
pub enum Get {
    /// The same, in clusterctl's word order: kubectl capi kubeconfig get CLUSTER
    #[command(hide = true, after_help = HELP)]
    Get(GetArgs),
}

#[derive(ClapArgs, Clone, Debug)]
pub struct GetArgs {
    /// The cluster
    #[arg(value_name = "CLUSTER")]
    pub cluster: String,
    #[command(flatten)]
    pub flags: Flags,
}

/// The flags of both word orders.
#[derive(ClapArgs, Clone, Debug)]
pub struct Flags {
    #[command(flatten)]
    pub kubeconfig: KubeconfigFlags,
    /// clusterctl's name for --context
    #[arg(long = "kubeconfig-context", value_name = "CONTEXT", hide = true)]
    pub kubeconfig_context: Option<String>,
    #[command(flatten)]
    pub kube: KubeFlags,
}

impl Args {
    /// The cluster and the flags, whichever word order was used.
    fn parts(&self) -> Result<(&str, &Flags), Error> {
        match (&self.get, &self.cluster) {
            (Some(Get::Get(g)), _) => Ok((&g.cluster, &g.flags)),
            (None, Some(c)) => Ok((c, &self.flags)),
            // clap requires CLUSTER unless `get` is there.
            (None, None) => Err(Error::Usage {
                message: "name the cluster".into(),
                hint: Some("kubectl capi kubeconfig CLUSTER".into()),
            }),
        }
    }
}

impl Flags {
    /// The connection flags, with clusterctl's `--kubeconfig-context` as `--context`.
    fn kube(&self) -> Result<KubeFlags, Error> {
        let mut kube = self.kube.clone();
        if let Some(c) = &self.kubeconfig_context {
            if kube.context.as_ref().is_some_and(|k| k != c) {
                return Err(Error::Usage {
                    message: "--context and --kubeconfig-context name two contexts".into(),
                    hint: Some("name one, with --context".into()),
                });
            }
            kube.context = Some(c.clone());
        }
        Ok(kube)
    }
}

pub async fn run(args: &Args) -> Result<(), Error> {
    let (cluster, flags) = args.parts()?;
    kcore::names::check_object_name("cluster", cluster)?;
    let delivery = flags.kubeconfig.delivery()?;
    let kube = flags.kube()?;
    let conn = kube.connect().await?;
    let (text, secret) = workload_kubeconfig::read(&conn, &conn.namespace, cluster).await?;
    kubeconfig::deliver(&delivery, cluster, &secret, &text)
}
