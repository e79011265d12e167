//! kubectl's flags: connection ([`KubeFlags`]), output ([`OutputFlags`]) and `-v` ([`LogFlags`]).
//! The flags parse into the client layer's plain options ([`shared::conn::ConnectOptions`],
//! [`shared::render::OutputOptions`]); nothing below this crate knows about clap.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use kube::Config;
use kube::config::Kubeconfig;
use shared::conn::{Conn, ConnectOptions};
use shared::error::Error;
use shared::render::{ColorWhen, OutputFormat, OutputOptions};

pub use kcore::text::parse_duration;

/// The `--help` section documenting exit codes, for `#[command(after_help = ...)]`.
pub const EXIT_CODES_HELP: &str = "Exit status:
  0  success
  1  failure (the API server was unreachable, refused or could not do what was asked)
  2  usage error (unknown verb, bad flags or arguments)

Flags go after the verb, as kubectl requires for plugins: `kubectl capi version --context prod`.
Colours follow --color (auto: only on a terminal, and not when NO_COLOR is set).";

/// The short exit-code note appended to every verb's `--help`.
pub const VERB_EXIT_CODES_HELP: &str = "Exit status: 0 success, 1 failure, 2 usage error.";

/// kubectl's connection flags. Flatten into every verb that talks to the API server.
///
/// Argument ids carry a `kube-` prefix (`out-` in [`OutputFlags`]) so that a verb may name its
/// own arguments `cluster`, `context` or `output` without clashing.
#[derive(Args, Clone, Debug, Default)]
#[command(next_help_heading = "Kubernetes connection")]
pub struct KubeFlags {
    /// Path to the kubeconfig file (default: $KUBECONFIG, merged by kubectl's rules, then ~/.kube/config, then in-cluster)
    #[arg(id = "kube-kubeconfig", long = "kubeconfig", value_name = "FILE", value_hint = clap::ValueHint::FilePath)]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use
    #[arg(id = "kube-context", long = "context", value_name = "CONTEXT")]
    pub context: Option<String>,
    /// The kubeconfig cluster to use
    #[arg(
        id = "kube-cluster",
        long = "cluster",
        value_name = "KUBECONFIG_CLUSTER"
    )]
    pub cluster: Option<String>,
    /// The kubeconfig user to use
    #[arg(id = "kube-user", long = "user", value_name = "KUBECONFIG_USER")]
    pub user: Option<String>,
    /// The namespace (default: the context's namespace)
    #[arg(
        id = "kube-namespace",
        short = 'n',
        long = "namespace",
        value_name = "NAMESPACE"
    )]
    pub namespace: Option<String>,
    /// Act on all namespaces
    #[arg(id = "kube-all_namespaces", short = 'A', long = "all-namespaces")]
    pub all_namespaces: bool,
    /// The API server URL (overrides the kubeconfig)
    #[arg(id = "kube-server", short = 's', long = "server", value_name = "URL", value_parser = server_url)]
    pub server: Option<String>,
    /// Bearer token for authentication to the API server
    #[arg(id = "kube-token", long = "token", value_name = "TOKEN")]
    pub token: Option<String>,
    /// User to impersonate
    #[arg(id = "kube-as_user", long = "as", value_name = "USER")]
    pub as_user: Option<String>,
    /// Group to impersonate (repeatable)
    #[arg(id = "kube-as_group", long = "as-group", value_name = "GROUP")]
    pub as_group: Vec<String>,
    /// UID to impersonate
    #[arg(id = "kube-as_uid", long = "as-uid", value_name = "UID")]
    pub as_uid: Option<String>,
    /// Time to wait for one server request (e.g. 1s, 2m, 1h; 0 = no limit)
    #[arg(id = "kube-request_timeout", long = "request-timeout", value_name = "DURATION", value_parser = parse_duration)]
    pub request_timeout: Option<Duration>,
    /// Do not check the server's certificate (insecure)
    #[arg(
        id = "kube-insecure_skip_tls_verify",
        long = "insecure-skip-tls-verify"
    )]
    pub insecure_skip_tls_verify: bool,
    /// Server name for certificate validation
    #[arg(
        id = "kube-tls_server_name",
        long = "tls-server-name",
        value_name = "NAME"
    )]
    pub tls_server_name: Option<String>,
}

impl KubeFlags {
    /// The flags as the client layer's options.
    pub fn options(&self) -> ConnectOptions {
        ConnectOptions {
            kubeconfig: self.kubeconfig.clone(),
            context: self.context.clone(),
            cluster: self.cluster.clone(),
            user: self.user.clone(),
            namespace: self.namespace.clone(),
            all_namespaces: self.all_namespaces,
            server: self.server.clone(),
            token: self.token.clone(),
            as_user: self.as_user.clone(),
            as_group: self.as_group.clone(),
            as_uid: self.as_uid.clone(),
            request_timeout: self.request_timeout,
            insecure_skip_tls_verify: self.insecure_skip_tls_verify,
            tls_server_name: self.tls_server_name.clone(),
        }
    }
    /// See [`ConnectOptions::load_kubeconfig`].
    pub fn load_kubeconfig(&self) -> Result<Option<Kubeconfig>, Error> {
        self.options().load_kubeconfig()
    }
    /// See [`ConnectOptions::config`].
    pub async fn config(&self) -> Result<(Config, String), Error> {
        self.options().config().await
    }
    /// See [`ConnectOptions::connect`].
    pub async fn connect(&self) -> Result<Conn, Error> {
        self.options().connect().await
    }
}

/// `-v`, counted: warnings by default, `-v` info, `-vv` debug, `-vvv` trace (logs on stderr).
#[derive(Args, Clone, Debug, Default)]
pub struct LogFlags {
    /// More logs on stderr (-v info, -vv debug, -vvv trace; RUST_LOG overrides)
    #[arg(short = 'v', long = "verbose", action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
}

impl LogFlags {
    /// Starts the tracing subscriber on stderr. Safe to call more than once.
    pub fn init(&self) {
        let ours = match self.verbose {
            0 => "warn",
            1 => "info",
            2 => "debug",
            _ => "trace",
        };
        // Libraries log failed requests and TLS errors themselves; we report those as typed
        // errors, so their logs only show from -v on.
        let deps = match self.verbose {
            0 => "off",
            1 | 2 => "warn",
            3 => "debug",
            _ => "trace",
        };
        let kube = if self.verbose >= 2 { ours } else { "off" };
        let default = format!(
            "{deps},shared={ours},kubectl_capi={ours},kubectl_kamaji={ours},kamaji_reconciler={ours},kube_client={kube},kube={kube}"
        );
        let filter = tracing_subscriber::EnvFilter::try_from_env("RUST_LOG")
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .with_target(self.verbose >= 2)
            .without_time()
            .try_init();
    }
}

/// Output flags. Flatten into every verb that prints objects.
#[derive(Args, Clone, Debug, Default)]
#[command(next_help_heading = "Output")]
pub struct OutputFlags {
    /// Output format
    #[arg(id = "out-output", short = 'o', long = "output", value_parser = output_format(), default_value_t = OutputFormat::Table, value_name = "FORMAT")]
    pub output: OutputFormat,
    /// Do not print table headers
    #[arg(id = "out-no_headers", long = "no-headers")]
    pub no_headers: bool,
    /// When to colour the output
    #[arg(id = "out-color", long = "color", value_parser = color_when(), default_value_t = ColorWhen::Auto, value_name = "WHEN")]
    pub color: ColorWhen,
}

impl From<&OutputFlags> for OutputOptions {
    fn from(f: &OutputFlags) -> OutputOptions {
        OutputOptions {
            output: f.output,
            no_headers: f.no_headers,
            color: f.color,
        }
    }
}

/// `-o`'s values, with their help, from the render layer's one list.
fn output_format() -> impl TypedValueParser<Value = OutputFormat> {
    PossibleValuesParser::new(
        OutputFormat::ALL
            .iter()
            .map(|(_, name, help)| PossibleValue::new(*name).help(*help)),
    )
    // PossibleValuesParser admitted only names of ALL, so the parse cannot fail.
    .map(|s| s.parse::<OutputFormat>().unwrap_or_default())
}

/// `--color`'s values, with their help.
fn color_when() -> impl TypedValueParser<Value = ColorWhen> {
    PossibleValuesParser::new(
        ColorWhen::ALL
            .iter()
            .map(|(_, name, help)| PossibleValue::new(*name).help(*help)),
    )
    .map(|s| s.parse::<ColorWhen>().unwrap_or_default())
}

/// A count flag (`--workers`, `--replicas`): 0 to `max`; clap refuses anything else before
/// anything is read or sent. Give the flag `allow_negative_numbers = true` so `-1` is refused
/// as a value out of range, not taken for a flag.
pub fn count(max: i64) -> clap::builder::RangedI64ValueParser<i64> {
    clap::value_parser!(i64).range(0..=max)
}

/// `--server`: an absolute http(s) URL, checked before the kubeconfig is read.
fn server_url(s: &str) -> Result<String, String> {
    match s.parse::<http::Uri>() {
        Ok(u) if matches!(u.scheme_str(), Some("https" | "http")) && u.host().is_some() => {
            Ok(s.to_string())
        }
        _ => Err(format!(
            "{s:?} is not a valid URL (e.g. https://10.0.0.1:6443)"
        )),
    }
}

/// A label selector (`-l`), parsed here as the API server would parse it, so a bad one is a
/// usage error (exit 2) and never reaches the server.
pub fn label_selector(s: &str) -> Result<String, String> {
    kcore::plan::selector::LabelSelector::parse(s)
        .map(|_| s.to_string())
        .map_err(|e| e.to_string())
}

/// `--dry-run`, as kubectl spells it.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DryRun {
    /// make the change
    #[default]
    None,
    /// print what would change, send nothing
    Client,
    /// send the change with dryRun=All: the server validates it and stores nothing
    Server,
}

impl DryRun {
    /// The suffix kubectl prints after an action: ` (dry run)`, ` (server dry run)`.
    pub fn suffix(self) -> &'static str {
        match self {
            DryRun::None => "",
            DryRun::Client => " (dry run)",
            DryRun::Server => " (server dry run)",
        }
    }
    pub fn is_dry(self) -> bool {
        self != DryRun::None
    }
    /// Whether writes are sent with `dryRun=All`.
    pub fn server(self) -> bool {
        self == DryRun::Server
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_do_not_clash_with_verb_arguments() {
        #[derive(clap::Parser)]
        struct Verb {
            #[arg(value_name = "CLUSTER")]
            cluster: String,
            context: Option<String>,
            output: Option<String>,
            #[command(flatten)]
            kube: KubeFlags,
            #[command(flatten)]
            out: OutputFlags,
        }
        use clap::{CommandFactory, Parser};
        Verb::command().debug_assert();
        let v = Verb::try_parse_from([
            "x",
            "c1",
            "--cluster",
            "kc",
            "-n",
            "ns",
            "--request-timeout",
            "2s",
            "-o",
            "json",
        ])
        .unwrap();
        assert_eq!(v.cluster, "c1");
        assert_eq!(v.kube.cluster.as_deref(), Some("kc"));
        assert_eq!(v.kube.namespace.as_deref(), Some("ns"));
        assert_eq!(v.kube.request_timeout, Some(Duration::from_secs(2)));
        assert_eq!(v.out.output, OutputFormat::Json);
        assert!(v.context.is_none() && v.output.is_none());
    }
}
