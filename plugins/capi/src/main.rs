//! `kubectl capi`: Cluster API clusters on Kamaji control planes and bring-your-own hosts.
//!
//! Every module but `common` is a verb: `<verb>.rs`, or `<verb>/mod.rs` with its sub-verbs and
//! parts as submodules (`hosts/`, `upgrade/`, `describe/`). A verb uses `crate::common::…`
//! and its own submodules, never another verb: what two verbs share moves to a named module of
//! `common/`. `pause` serves `pause` and `resume`, which take the same flags.
//!
//! To add a verb: ARCHITECTURE.md's recipe "Add a verb".

mod alpha;
mod common;
mod completion;
mod delete;
mod describe;
mod doctor;
mod generate;
mod hosts;
mod init;
mod kubeconfig;
mod list;
mod logs;
mod machines;
mod pause;
mod restart;
mod scale;
mod uninstall;
mod upgrade;
mod version;

use std::process::ExitCode;

use clap::Subcommand;
use cli::complete::CompleteArgs;

// Parsed once per run: the size of the largest verb's flags does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand, Debug)]
enum Verb {
    /// Print the client version and the Cluster API, Kamaji and BYOH versions the cluster serves
    Version(version::Args),
    /// Set up the management cluster: cert-manager, Cluster API, BYOH, Kamaji and our provider (init bundle DIR for air-gapped sites)
    Init(init::Args),
    /// Remove what init installed, in reverse order (refused while any Cluster exists)
    Uninstall(uninstall::Args),
    /// Render a clusterctl-compatible cluster template (generate cluster NAME --from FILE)
    Generate(generate::Args),
    /// Scale the control plane or workers of a cluster, with a free-host preflight on BYOH
    Scale(scale::Args),
    /// Upgrade a cluster minor by minor, control plane first, in the cluster where the reconciler runs (--plan shows the steps; status|pause|resume|cancel)
    Upgrade(upgrade::Args),
    /// Delete a cluster (Cluster API cascades), release its hosts, remove its merged context
    Delete(delete::Args),
    /// Pause reconciliation of a cluster (spec.paused)
    Pause(pause::Args),
    /// Resume reconciliation of a paused cluster
    Resume(pause::Args),
    /// Roll a cluster's machines (all MachineDeployments and a KubeadmControlPlane, or one deployment)
    Restart(restart::Args),
    /// The clusters: phase, control plane, workers, version, endpoint
    List(list::Args),
    /// A cluster's object tree with conditions, as clusterctl describe cluster (-o json|yaml too)
    Describe(describe::Args),
    /// What is wrong across the management cluster and the fleet, and the command that fixes each
    Doctor(doctor::Args),
    /// The ByoHost inventory: state, cluster, machine and version of every host
    Hosts(hosts::Args),
    /// The Machines of a cluster (or all): role, phase, readiness, node and host; --watch streams changes
    Machines(machines::Args),
    /// Events and controllers' log lines about a cluster, machine or host and what relates to it, in time order (-f follows)
    Logs(logs::Args),
    /// Print a cluster's kubeconfig, write it to a file, or merge it into yours
    Kubeconfig(kubeconfig::Args),
    /// Print a shell completion script (bash, zsh, fish)
    Completion(completion::Args),
    /// clusterctl's alpha rollout restart|pause|resume KIND/NAME, with clusterctl's meaning
    #[command(hide = true)]
    Alpha(alpha::Args),
    /// clusterctl's get kubeconfig NAME (the same as kubeconfig NAME)
    #[command(hide = true)]
    Get(ClusterctlGetArgs),
    /// kubectl's plugin completion protocol (used by kubectl_complete-capi)
    #[command(name = "__complete", hide = true)]
    Complete(CompleteArgs),
}

#[derive(clap::Args, Debug)]
struct ClusterctlGetArgs {
    #[command(subcommand)]
    what: ClusterctlGetWhat,
}

#[derive(Subcommand, Debug)]
enum ClusterctlGetWhat {
    /// The workload cluster's kubeconfig (clusterctl get kubeconfig NAME)
    Kubeconfig(kubeconfig::Args),
}

fn main() -> ExitCode {
    let plugin = cli::Plugin {
        name: "capi",
        about: "Create, inspect, scale, upgrade and tear down Cluster API clusters",
        version: env!("CARGO_PKG_VERSION"),
    };
    cli::run::<Verb, _, _>(plugin, |verb, program, root| async move {
        match verb {
            Verb::Version(a) => version::run(&program, &a).await,
            Verb::Init(a) => init::run(&a).await,
            Verb::Uninstall(a) => uninstall::run(&a).await,
            Verb::Generate(a) => generate::run(&a).await,
            Verb::Scale(a) => scale::run(&a).await,
            Verb::Upgrade(a) => upgrade::run(&a).await,
            Verb::Delete(a) => delete::run(&a).await,
            Verb::Pause(a) => pause::pause(&a).await,
            Verb::Resume(a) => pause::resume(&a).await,
            Verb::Restart(a) => restart::run(&a).await,
            Verb::List(a) => list::run(&a).await,
            Verb::Describe(a) => describe::run(&a).await,
            Verb::Doctor(a) => doctor::run(&a).await,
            Verb::Hosts(a) => hosts::run(&a).await,
            Verb::Machines(a) => machines::run(&a).await,
            Verb::Logs(a) => logs::run(&a).await,
            Verb::Kubeconfig(a) => kubeconfig::run(&a).await,
            Verb::Completion(a) => completion::run(&program, &root, &a),
            Verb::Complete(a) => cli::complete::run(&root, &a).await,
            Verb::Alpha(a) => alpha::run(&a).await,
            Verb::Get(ClusterctlGetArgs {
                what: ClusterctlGetWhat::Kubeconfig(a),
            }) => kubeconfig::run(&a).await,
        }
    })
}
