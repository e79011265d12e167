//! The shared library of `kubectl-kamaji` and `kubectl-capi`.
//!
//! A verb reads top to bottom:
//! 1. flags: flatten [`cli::KubeFlags`] and [`cli::OutputFlags`] into its clap `Args`;
//! 2. connect: `let conn = args.kube.connect().await?;` ([`cli::Conn`]);
//! 3. discover: `let apis = discovery::ServerApis::discover(&conn).await?;` then
//!    `apis.cluster()?` and friends give `ApiResource`s at the served version;
//!    [`discovery::fields`] reads fields that moved between v1beta1 and v1beta2;
//! 4. act through the API, mapping failures with `conn.error(e, &error::Op::on("get", &ar))`
//!    ([`api::get_or_suggest`] adds the closest names to not-found errors);
//! 5. render: `render::Printer::new(&args.output).print(&result)?` where the result
//!    implements [`render::Render`]. Only [`render`] prints.
//!
//! Errors are [`error::Error`]: one line plus a hint, exit code 1 (2 for usage).

pub mod api;
pub mod cli;
pub mod complete;
pub mod discovery;
pub mod error;
pub mod fetch;
pub mod kubeconfig;
pub mod render;
pub mod verbs;

// The pure layer, re-exported so a verb reads `shared::plan::…` as before (as kube re-exports
// kube-core).
pub use kcore::{build, labels, plan};
