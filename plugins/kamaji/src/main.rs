//! `kubectl kamaji`: Kamaji control planes for Cluster API (a superset of clastix's `kubectl kamaji`).
//!
//! One module per verb (`<verb>.rs`, or `<verb>/mod.rs` with its parts), and `common`, what
//! the verbs share. A verb uses `crate::common::...` and its own parts, never another verb:
//! what two verbs need moves to a module of `common` named for what it knows. To add a verb:
//! ARCHITECTURE.md's recipe "Add a verb".

mod backup;
mod certificates;
mod common;
mod completion;
mod create;
mod datastores;
mod delete;
mod doctor;
mod generate;
mod install;
mod kubeconfig;
mod list;
mod migrate;
mod r#move;
mod restore;
mod scale;
mod status;
mod token;
mod upgrade;
mod version;

use std::process::ExitCode;

use clap::Subcommand;
use cli::complete::CompleteArgs;

// Parsed once per run: the size of the largest verb's flags does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand, Debug)]
enum Verb {
    /// Create a cluster with a Kamaji control plane (Cluster, KamajiControlPlane, infrastructure, workers)
    Create(create::Args),
    /// Generate a ClusterClass with a KamajiControlPlaneTemplate (print it, or --apply)
    Generate(generate::Args),
    /// List KamajiControlPlanes and standalone TenantControlPlanes
    List(list::Args),
    /// Show one control plane: summary, pods, conditions, addons, certificates, workers, hints
    Status(status::Args),
    /// List Kamaji DataStores: driver, endpoints, readiness and the control planes using them; --orphans, the prefixes no tenant owns
    Datastores(datastores::Args),
    /// Move a control plane's data to another DataStore with Kamaji's migration (asks first; --yes without a terminal)
    Migrate(migrate::Args),
    /// Back up one tenant to a file: its DataStore keys at one revision and the objects that bring it back
    Backup(backup::Args),
    /// Bring a tenant back from a backup file, here or on another management cluster
    Restore(restore::Args),
    /// Move a tenant to another management cluster, its endpoint, CA and data kept (asks first; --yes without a terminal)
    Move(r#move::Args),
    /// What is wrong across the management cluster and the fleet, and the command that fixes each
    Doctor(doctor::Args),
    /// Scale the control plane (0 = asleep) and the workers
    Scale(scale::Args),
    /// Upgrade one minor at a time, waiting for each step (--plan shows the steps)
    Upgrade(upgrade::Args),
    /// Delete a cluster and its Kamaji control plane (asks first; --yes without a terminal)
    Delete(delete::Args),
    /// Get (print, write or merge) and rotate a tenant's kubeconfigs
    Kubeconfig(kubeconfig::Args),
    /// A tenant's certificates: each one's expiry and what renews it, or rotate them
    Certificates(certificates::Args),
    /// Print a worker join command with a fresh bootstrap token
    Token(token::Args),
    /// Install (or upgrade) the KamajiControlPlane provider: CRDs, RBAC, kamaji-reconciler
    Install(install::InstallArgs),
    /// Remove the KamajiControlPlane provider (refuses while KamajiControlPlanes exist unless --force)
    Uninstall(install::UninstallArgs),
    /// Print the client version and the Cluster API, Kamaji and BYOH versions the cluster serves
    Version(version::Args),
    /// Print a shell completion script (bash, zsh, fish)
    Completion(completion::Args),
    /// kubectl's plugin completion protocol (used by kubectl_complete-kamaji)
    #[command(name = "__complete", hide = true)]
    Complete(CompleteArgs),
}

fn main() -> ExitCode {
    let plugin = cli::Plugin {
        name: "kamaji",
        about: "Create and manage Kamaji-hosted control planes for Cluster API clusters",
        version: env!("CARGO_PKG_VERSION"),
    };
    cli::run::<Verb, _, _>(plugin, |verb, program, root| async move {
        match verb {
            Verb::Create(a) => create::run(&a).await,
            Verb::Generate(a) => generate::run(&a).await,
            Verb::Migrate(a) => migrate::run(&a).await,
            Verb::List(a) => list::run(&a).await,
            Verb::Status(a) => status::run(&a).await,
            Verb::Datastores(a) => datastores::run(&a).await,
            Verb::Backup(a) => backup::run(&a).await,
            Verb::Restore(a) => restore::run(&a).await,
            Verb::Move(a) => r#move::run(&a).await,
            Verb::Doctor(a) => doctor::run(&a).await,
            Verb::Scale(a) => scale::run(&a).await,
            Verb::Upgrade(a) => upgrade::run(&a).await,
            Verb::Delete(a) => delete::run(&a).await,
            Verb::Kubeconfig(a) => kubeconfig::run(&a).await,
            Verb::Certificates(a) => certificates::run(&a).await,
            Verb::Token(a) => token::run(&a).await,
            Verb::Install(a) => install::install(&a).await,
            Verb::Uninstall(a) => install::uninstall(&a).await,
            Verb::Version(a) => version::run(&program, &a).await,
            Verb::Completion(a) => completion::run(&program, &root, &a),
            Verb::Complete(a) => cli::complete::run(&root, &a).await,
        }
    })
}
