//! The client layer of `kubectl-kamaji` and `kubectl-capi`: everything that talks to a server,
//! a file or a terminal, with no flag parsing (that is the `cli` crate) and no decisions (those
//! are `kcore`'s pure plans).
//!
//! A verb reads top to bottom:
//! 1. connect: `let conn = args.kube.connect().await?;` ([`conn::Conn`], from `cli`'s flags);
//! 2. discover: `let apis = discovery::ServerApis::discover(&conn).await?;` then
//!    `apis.cluster()?` and friends give `ApiResource`s at the served version;
//!    `kcore::fields` reads fields that moved between v1beta1 and v1beta2;
//! 3. plan with `kcore` (pure; reached as `kcore::…`, never through this crate), then act through the API, mapping failures with
//!    `conn.error(e, &error::Op::on("get", &ar))` ([`api::get_or_suggest`] adds the closest
//!    names to not-found errors);
//! 4. render: `render::Printer::new(&args.output).print(&result)?` where the result
//!    implements [`render::Render`]. Only [`render`] prints.
//!
//! Errors are [`error::Error`]: one line plus a hint, exit code 1 (2 for usage).

pub mod api;
pub mod backup_file;
pub mod conn;
pub mod discovery;
pub mod error;
/// The etcd gateway client lives in its own crate, which the reconciler links too.
pub use ketcd as etcd;
pub mod fetch;
pub mod input;
pub mod kubeconfig;
pub mod metrics;
pub mod registry;
pub mod releases;
pub mod render;
pub mod teardown;
pub mod tls;
