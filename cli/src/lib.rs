//! The command-line layer shared by `kubectl capi` and `kubectl kamaji`, and the only library
//! crate that depends on clap (as in ripgrep, flags stay at the edge):
//! - [`flags`]: kubectl's connection, output and `-v` flags, parsed into the client layer's
//!   plain options;
//! - [`harness`]: the `main` of every binary ([`run`]);
//! - [`complete`]: the hidden `__complete` verb (cobra's protocol, live names);
//! - [`apiserver`]: the `version` and `completion` verbs both plugins expose; [`doctor`]: the
//!   fleet report both expose.
//!
//! A verb flattens [`KubeFlags`] and [`OutputFlags`] into its clap `Args`, connects with
//! `args.kube.connect().await?`, plans with `kcore`, acts through `shared`, and prints with
//! `kclient::render::Printer::new(&args.output)`.

pub mod complete;
pub mod completion_shim;
pub mod doctor;
pub mod flags;
pub mod harness;
pub mod kubeconfig_flags;
pub mod verbs;

pub use flags::{
    DryRun, DryRunFlag, EXIT_CODES_HELP, KubeFlags, ListArgs, LogFlags, OutputFlags,
    VERB_EXIT_CODES_HELP, count, label_selector, parse_duration,
};
pub use harness::{Plugin, Program, command_for, external_verbs, run};
pub use kclient::conn::Conn;
pub use kclient::render::{ColorWhen, OutputFormat, color_enabled};
pub use kubeconfig_flags::{KubeconfigFlags, KubeconfigOutput};
