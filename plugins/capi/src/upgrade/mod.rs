//! `kubectl capi upgrade`: one verb, three modes, told apart once the command line is parsed:
//!
//! - `upgrade CLUSTER --to VERSION` (`cluster`): one cluster, planned here, carried out by the
//!   reconciler through a ClusterUpgrade (`hand_over`) or from this terminal;
//! - `upgrade -l SELECTOR --to VERSION` (`fleet`): a FleetUpgrade over the namespace's clusters;
//! - `upgrade status|pause|resume|cancel` (`ops`): reading and steering a ClusterUpgrade.
//!
//! The flags are one clap `Args` (the command line users know); [`Args::mode`] checks them and
//! makes the typed request of the mode asked for.

mod cluster;
mod fleet;
mod hand_over;
mod ops;
mod plan_view;
mod request;
mod snapshot;

use std::time::Duration;

use clap::Args as ClapArgs;
use cli::{DryRunFlag, KubeFlags, OutputFlags};
use kclient::error::Error;
use kcore::plan::upgrade::UpgradeError;
use kcore::version::{KubeVersion, parse_version};

use fleet::FleetRequest;
use ops::UpgradeOp;
use request::ClusterRequest;

#[derive(ClapArgs, Clone, Debug)]
#[command(
    args_conflicts_with_subcommands = true,
    after_help = "Where the ClusterUpgrade API is served (kubectl kamaji install), the reconciler carries the
upgrade out: the command creates a ClusterUpgrade and returns (--wait follows it), so closing the
terminal stops nothing. Without it, or with --client-side, this terminal applies the steps.

A later minor is reached through the newest patch of the current minor, then of each minor between
(Kubernetes' upgrade advice). The newest patches come from Kubernetes' stable-release markers
(https://cdn.dl.k8s.io/release/stable-1.N.txt; CAPI_KAMAJI_RELEASE_MARKERS names a mirror, or off),
else from a table shipped with this release; a ClusterClass cluster steps through the versions its
class lists. The plan says which it used.

Examples:
  kubectl capi upgrade prod --to v1.34.2 --plan     # the steps, the patches, the preflight
  kubectl capi upgrade prod --to v1.34.2 --yes      # hand it to the reconciler
  kubectl capi upgrade prod --to v1.34.2 --yes --wait
  kubectl capi upgrade status prod                  # its plan and progress
  kubectl capi upgrade pause prod | resume prod | cancel prod
  kubectl capi upgrade -l env=staging --to v1.34.2 --canary 1 --max-parallel 3 --yes --wait
  kubectl capi upgrade prod --to v1.34.2 --yes --client-side   # from this terminal; re-run resumes"
)]
#[command(mut_arg("dry-run", |a| a.help("Only print (client) or validate the next step on the server (server)")))]
pub struct Args {
    #[command(subcommand)]
    pub op: Option<UpgradeOp>,
    /// The cluster
    #[arg(value_name = "CLUSTER")]
    pub cluster: Option<String>,
    /// The Kubernetes version to reach, e.g. v1.34.2
    #[arg(long, value_name = "VERSION")]
    pub to: Option<String>,
    /// Print the plan (steps, patches, template clones, preflight) and change nothing
    #[arg(long)]
    pub plan: bool,
    /// Upgrade only the control plane
    #[arg(long, conflicts_with = "workers_only")]
    pub control_plane_only: bool,
    /// Upgrade only the MachineDeployments (up to the control plane's version)
    #[arg(long)]
    pub workers_only: bool,
    /// Do not ask (required when stdin is not a terminal)
    #[arg(short = 'y', long)]
    pub yes: bool,
    /// Go ahead despite blocking preflight findings (too few spare hosts)
    #[arg(long)]
    pub force: bool,
    /// Apply the steps from this terminal even where the reconciler could carry them out
    #[arg(long)]
    pub client_side: bool,
    /// Follow the reconciler's upgrade until it ends (with --client-side the command always waits)
    #[arg(long)]
    pub wait: bool,
    /// MachineDeployments the reconciler rolls at once within a minor (1 to 100)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=100))]
    pub max_parallel_deployments: Option<u32>,
    /// Upgrade every Cluster of the namespace with these labels, in waves (a FleetUpgrade)
    #[arg(short = 'l', long, value_name = "SELECTOR", value_parser = cli::label_selector)]
    pub selector: Option<String>,
    /// With --selector: clusters upgraded alone first
    #[arg(long, value_name = "N", default_value_t = 0, requires = "selector", value_parser = clap::value_parser!(u32).range(0..=1000))]
    pub canary: u32,
    /// With --selector: clusters upgraded at once after the canaries (1 to 1000, default 1)
    #[arg(long, value_name = "N", requires = "selector", value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub max_parallel: Option<u32>,
    /// With --selector: the FleetUpgrade's name (default upgrade-to-<version>)
    #[arg(long, value_name = "NAME", requires = "selector")]
    pub name: Option<String>,
    /// How long to wait for each step (client side) or for the whole upgrade (--wait)
    #[arg(long, value_name = "DURATION", default_value = "30m", value_parser = cli::parse_duration)]
    pub timeout: Duration,
    #[command(flatten)]
    pub dry_run: DryRunFlag,
    #[command(flatten)]
    pub output: OutputFlags,
    #[command(flatten)]
    pub kube: KubeFlags,
}

/// What `kubectl capi upgrade` was asked to do, checked.
enum Mode {
    Cluster(ClusterRequest),
    Fleet(FleetRequest),
    Op(UpgradeOp),
}

impl Args {
    /// The mode the flags ask for, checked in the order the errors have always come in: an
    /// empty selector, a malformed version, a bad FleetUpgrade name, a cluster with a
    /// selector, a missing cluster or version.
    fn mode(&self) -> Result<Mode, Error> {
        if let Some(op) = &self.op {
            return Ok(Mode::Op(op.clone()));
        }
        // An empty selector matches every Cluster of the namespace: too much to be a typo's
        // consequence, so it is refused before anything is read.
        if self
            .selector
            .as_deref()
            .is_some_and(|s| s.trim().is_empty())
        {
            return Err(Error::Usage {
                message: "an empty selector (-l '') would select every cluster of the namespace; nothing was changed".into(),
                hint: Some(
                    "name the clusters' label, e.g. -l env=staging (kubectl capi list --show-labels shows them), or upgrade one cluster with kubectl capi upgrade CLUSTER --to VERSION".into(),
                ),
            });
        }
        if let (Some(selector), Some(to)) = (&self.selector, &self.to) {
            return self.fleet(selector, to).map(Mode::Fleet);
        }
        let (Some(cluster), Some(to)) = (&self.cluster, &self.to) else {
            return Err(Error::Usage {
                message: "upgrade needs a cluster and --to <VERSION>".into(),
                hint: Some(
                    "kubectl capi upgrade CLUSTER --to VERSION [--plan], or kubectl capi upgrade status|pause|resume|cancel CLUSTER".into(),
                ),
            });
        };
        // A malformed version is a usage error before anything is read.
        let to = parse_to(to)?;
        Ok(Mode::Cluster(ClusterRequest {
            cluster: cluster.clone(),
            to,
            plan: self.plan,
            control_plane_only: self.control_plane_only,
            workers_only: self.workers_only,
            yes: self.yes,
            force: self.force,
            client_side: self.client_side,
            wait: self.wait,
            max_parallel_deployments: self.max_parallel_deployments,
            timeout: self.timeout,
            dry_run: *self.dry_run,
            output: self.output.clone(),
            kube: self.kube.clone(),
        }))
    }

    /// `-l SELECTOR --to VERSION`: a well-formed version and FleetUpgrade name, and no cluster.
    fn fleet(&self, selector: &str, to: &str) -> Result<FleetRequest, Error> {
        let to = parse_to(to)?;
        if let Some(n) = &self.name {
            kcore::names::check_object_name("FleetUpgrade", n)?;
        }
        if self.cluster.is_some() {
            return Err(Error::Usage {
                message: "pass a cluster or --selector, not both".into(),
                hint: Some("kubectl capi upgrade --selector env=staging --to VERSION".into()),
            });
        }
        Ok(FleetRequest {
            selector: selector.to_string(),
            name: self.name.clone().unwrap_or_else(|| {
                format!("upgrade-to-{}", to.to_string().replace(['.', '+'], "-"))
            }),
            to,
            canary: self.canary,
            max_parallel: self.max_parallel,
            max_parallel_deployments: self.max_parallel_deployments,
            force: self.force,
            plan: self.plan,
            dry_run: *self.dry_run,
            yes: self.yes,
            wait: self.wait,
            timeout: self.timeout,
            output: self.output.clone(),
            kube: self.kube.clone(),
        })
    }
}

/// `--to`, read by the one rule set of Kubernetes versions.
fn parse_to(to: &str) -> Result<KubeVersion, Error> {
    parse_version(to).map_err(|e| upgrade_error(e.into()))
}

fn upgrade_error(e: UpgradeError) -> Error {
    let usage = |hint: &str| Error::Usage {
        message: e.to_string(),
        hint: Some(hint.into()),
    };
    match e {
        UpgradeError::Version(_) => {
            usage("write the version as vMAJOR.MINOR.PATCH, e.g. --to v1.35.0")
        }
        UpgradeError::ConflictingScope => {
            usage("pass one of them, or neither for the whole cluster")
        }
        UpgradeError::ScopeWithTopology(_) => usage(
            "drop --control-plane-only/--workers-only; the topology controller orders the rollout",
        ),
        other => Error::other(other.to_string()),
    }
}

pub async fn run(args: &Args) -> Result<(), Error> {
    match args.mode()? {
        Mode::Op(op) => ops::run(&op).await,
        Mode::Fleet(req) => fleet::run(&req).await,
        Mode::Cluster(req) => cluster::run(&req).await,
    }
}
