//! `kubectl kamaji`: Kamaji control planes for Cluster API (a superset of clastix's `kubectl kamaji`).
//!
//! One module per verb. To add a verb: `mod <verb>;`, a `Verb` variant holding its `Args`,
//! and a match arm calling its `run`.

mod common;
mod completion;
mod create;
mod version;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use shared::cli::{EXIT_CODES_HELP, LogFlags};
use shared::complete::CompleteArgs;

#[derive(Parser, Debug)]
#[command(
    version,
    about = "Create and manage Kamaji-hosted control planes for Cluster API clusters",
    after_help = EXIT_CODES_HELP,
    disable_help_subcommand = true,
    propagate_version = false
)]
struct Cli {
    #[command(flatten)]
    log: LogFlags,
    #[command(subcommand)]
    verb: Verb,
}

// Parsed once per run: the size of the largest verb's flags does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand, Debug)]
enum Verb {
    /// Create a cluster with a Kamaji control plane (Cluster, KamajiControlPlane, infrastructure, workers)
    Create(create::Args),
    /// Print the client version and the Cluster API, Kamaji and BYOH versions the cluster serves
    Version(version::Args),
    /// Print a shell completion script (bash, zsh, fish)
    Completion(completion::Args),
    /// kubectl's plugin completion protocol (used by kubectl_complete-kamaji)
    #[command(name = "__complete", hide = true)]
    Complete(CompleteArgs),
}

fn main() -> ExitCode {
    shared::cli::run::<Cli, _, _>(
        "kamaji",
        |cli| cli.log.clone(),
        |cli, program, root| async move {
            match cli.verb {
                Verb::Create(a) => create::run(&a).await,
                Verb::Version(a) => version::run(&program, &a).await,
                Verb::Completion(a) => completion::run(&program, &root, &a),
                Verb::Complete(a) => shared::complete::run(&root, &a).await,
            }
        },
    )
}
