//! kubectl's flags: connection ([`KubeFlags`]), output ([`OutputFlags`]) and `-v` ([`LogFlags`]).
//! The flags parse into the client layer's plain options ([`kclient::conn::ConnectOptions`],
//! [`kclient::render::OutputOptions`]); nothing below this crate knows about clap.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use kclient::conn::{Conn, ConnectOptions};
use kclient::error::Error;
use kclient::render::{ColorWhen, OutputFormat, OutputOptions};
use kube::Config;
use kube::config::Kubeconfig;

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
    /// Path to a cert file for the certificate authority
    #[arg(id = "kube-certificate_authority", long = "certificate-authority", value_name = "FILE", value_hint = clap::ValueHint::FilePath)]
    pub certificate_authority: Option<PathBuf>,
    /// Path to a client certificate file for TLS
    #[arg(id = "kube-client_certificate", long = "client-certificate", value_name = "FILE", value_hint = clap::ValueHint::FilePath)]
    pub client_certificate: Option<PathBuf>,
    /// Path to a client key file for TLS
    #[arg(id = "kube-client_key", long = "client-key", value_name = "FILE", value_hint = clap::ValueHint::FilePath)]
    pub client_key: Option<PathBuf>,
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
            certificate_authority: self.certificate_authority.clone(),
            client_certificate: self.client_certificate.clone(),
            client_key: self.client_key.clone(),
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

/// `-v`, counted (`-v` info, `-vv` debug, `-vvv` trace), or kubectl's levels `-v=N`/`--v=N`.
#[derive(Args, Clone, Debug, Default)]
pub struct LogFlags {
    /// More logs on stderr (-v info, -vv debug, -vvv trace; RUST_LOG overrides)
    #[arg(short = 'v', long = "verbose", action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
    /// kubectl's log level: -v=N or --v=N (0-10; 6 shows each request, 8 and up everything)
    #[arg(long = "v", value_name = "LEVEL", global = true, value_parser = clap::value_parser!(u8).range(0..=10))]
    pub level: Option<u8>,
}

/// kubectl's `-v=6` and `-v6` as `--v=6`: clap's counted `-v` takes no value, and kubectl's
/// level takes one. Words after `--` are left alone.
pub fn kubectl_verbosity(args: Vec<std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    let mut out = Vec::with_capacity(args.len());
    let mut rest = false;
    for a in args {
        let level = a.to_str().filter(|_| !rest).and_then(|s| {
            let n = s.strip_prefix("-v=").or_else(|| s.strip_prefix("-v"))?;
            (!n.is_empty() && n.len() <= 3 && n.bytes().all(|b| b.is_ascii_digit()))
                .then(|| format!("--v={n}"))
        });
        rest |= a == "--";
        out.push(level.map(Into::into).unwrap_or(a));
    }
    out
}

/// The tracing filters for a verbosity: ours, dependencies', kube-client's.
fn filters(count: u8, level: Option<u8>) -> (&'static str, &'static str, &'static str) {
    // kubectl's levels folded onto ours: 1-3 info, 4-5 debug, 6-7 debug with each request
    // (kube-client's spans), 8 and up trace.
    let level = level.unwrap_or(match count {
        0 => 0,
        1 => 2,
        2 => 6,
        _ => 8,
    });
    match level {
        0 => ("warn", "off", "off"),
        1..=3 => ("info", "warn", "off"),
        4..=5 => ("debug", "warn", "off"),
        6..=7 => ("debug", "warn", "debug"),
        _ => ("trace", "debug", "trace"),
    }
}

impl LogFlags {
    /// Starts the tracing subscriber on stderr. Safe to call more than once.
    pub fn init(&self) {
        // Libraries log failed requests and TLS errors themselves; we report those as typed
        // errors, so their logs only show from -v on.
        let (ours, deps, kube) = filters(self.verbose, self.level);
        let default = format!(
            "{deps},shared={ours},kubectl_capi={ours},kubectl_kamaji={ours},kamaji_reconciler={ours},kube_client={kube},kube={kube}"
        );
        let filter = tracing_subscriber::EnvFilter::try_from_env("RUST_LOG")
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            // Colour codes only on a terminal and without NO_COLOR, as for every other output.
            .with_ansi(kclient::render::color_enabled(
                ColorWhen::Auto,
                std::env::var("NO_COLOR").ok().as_deref(),
                std::io::IsTerminal::is_terminal(&std::io::stderr()),
            ))
            .with_target(ours != "info" && ours != "warn")
            .without_time()
            .try_init();
    }
}

/// Output flags. Flatten into every verb that prints objects.
#[derive(Args, Clone, Debug, Default)]
#[command(next_help_heading = "Output")]
pub struct OutputFlags {
    /// Output format: table, wide, json, yaml, name, jsonpath=TEMPLATE, jsonpath-file=FILE, custom-columns=HEADER:PATH,..., custom-columns-file=FILE (as kubectl get)
    #[arg(id = "out-output", short = 'o', long = "output", value_parser = OutputParser, default_value = "table", value_name = "FORMAT")]
    pub output: OutputFormat,
    /// Do not print table headers
    #[arg(id = "out-no_headers", long = "no-headers")]
    pub no_headers: bool,
    /// Show each object's labels as the last column (as kubectl get --show-labels)
    #[arg(id = "out-show_labels", long = "show-labels")]
    pub show_labels: bool,
    /// When to colour the output (auto, always, never; -c, --color and --color=true mean always, as in clusterctl)
    #[arg(id = "out-color", short = 'c', long = "color", value_parser = color_when(), default_value_t = ColorWhen::Auto, value_name = "WHEN", num_args = 0..=1, require_equals = false, default_missing_value = "always")]
    pub color: ColorWhen,
}

/// The flags of a verb that lists and prints, and takes nothing else: kubectl's connection
/// ([`KubeFlags`]) and output ([`OutputFlags`]) flags.
#[derive(Args, Clone, Debug, Default)]
pub struct ListArgs {
    #[command(flatten)]
    pub kube: KubeFlags,
    #[command(flatten)]
    pub output: OutputFlags,
}

impl From<&OutputFlags> for OutputOptions {
    fn from(f: &OutputFlags) -> OutputOptions {
        OutputOptions {
            output: f.output.clone(),
            no_headers: f.no_headers,
            show_labels: f.show_labels,
            color: f.color,
        }
    }
}

/// The longest template file `-o jsonpath-file=` or `custom-columns-file=` reads.
const MAX_TEMPLATE_FILE: usize = kclient::render::jsonpath::MAX_TEMPLATE_BYTES;

/// Bounded in bytes whatever the file is, and in time when it is a FIFO or a pipe
/// ([`kclient::input`]): `-o jsonpath-file=FIFO` with no writer fails in one line.
fn read_template_file(kind: &str, path: &str) -> Result<String, String> {
    let flag = format!("-o {kind}");
    let input = kclient::input::Input {
        flag: &flag,
        limit: MAX_TEMPLATE_FILE,
        stdin: false,
    };
    input
        .read_text(std::path::Path::new(path))
        .map_err(|e| format!("{e}; {}", e.hint()))
}

/// `-o`: a name from the render layer's one list, or kubectl's templated forms, parsed (and
/// template files read) here so a bad template is a usage error before any request.
pub fn parse_output(s: &str) -> Result<OutputFormat, String> {
    use kclient::render::jsonpath::{Columns, Template};
    if let Some((f, _, _)) = OutputFormat::ALL.iter().find(|(_, n, _)| *n == s) {
        return Ok(f.clone());
    }
    let (kind, arg) = s.split_once('=').unwrap_or((s, ""));
    let needs = |what: &str| {
        format!(
            "-o {kind} needs {what} after '=' (e.g. -o {kind}={})",
            match kind {
                k if k.starts_with("custom-columns") && !k.ends_with("file") =>
                    "NAME:.metadata.name",
                k if k.ends_with("file") => "FILE",
                _ => "'{.items[*].metadata.name}'",
            }
        )
    };
    let e = |e: kclient::render::jsonpath::JsonPathError| e.to_string();
    match kind {
        "jsonpath" if arg.is_empty() => Err(needs("a template")),
        "jsonpath" => Template::parse(arg).map(OutputFormat::JsonPath).map_err(e),
        "jsonpath-file" if arg.is_empty() => Err(needs("a file")),
        "jsonpath-file" => Template::parse(&read_template_file(kind, arg)?)
            .map(OutputFormat::JsonPath)
            .map_err(e),
        "custom-columns" if arg.is_empty() => Err(needs("columns")),
        "custom-columns" => Columns::parse(arg)
            .map(OutputFormat::CustomColumns)
            .map_err(e),
        "custom-columns-file" if arg.is_empty() => Err(needs("a file")),
        "custom-columns-file" => Columns::parse_file(&read_template_file(kind, arg)?)
            .map(OutputFormat::CustomColumns)
            .map_err(e),
        "go-template" | "go-template-file" | "template" | "templatefile" => Err(format!(
            "-o {kind} is not supported (no Go template engine in Rust); the same fields print with -o jsonpath='{{...}}'"
        )),
        _ => {
            let names: Vec<&str> = OutputFormat::ALL.iter().map(|(_, n, _)| *n).collect();
            let templated: Vec<&str> = OutputFormat::TEMPLATED.iter().map(|(n, _)| *n).collect();
            Err(format!(
                "invalid output format {s:?} (use one of: {}, {})",
                names.join(", "),
                templated.join(", ")
            ))
        }
    }
}

/// `-o`'s parser: [`parse_output`], listing the render layer's names (and the templated
/// forms' prefixes) as possible values for help and completion.
#[derive(Clone, Copy, Debug)]
struct OutputParser;

impl TypedValueParser for OutputParser {
    type Value = OutputFormat;
    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<OutputFormat, clap::Error> {
        let text = value.to_string_lossy();
        parse_output(&text).map_err(|msg| {
            let flag = arg.map(|a| a.to_string()).unwrap_or_else(|| "-o".into());
            clap::Error::raw(
                clap::error::ErrorKind::InvalidValue,
                format!("invalid value '{text}' for '{flag}': {msg}\n"),
            )
            .with_cmd(cmd)
        })
    }
    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        let names = OutputFormat::ALL
            .iter()
            .map(|(_, name, help)| PossibleValue::new(*name).help(*help));
        let templated = OutputFormat::TEMPLATED.iter().map(|(form, help)| {
            let prefix = form.split_once('=').map(|(p, _)| p).unwrap_or(form);
            PossibleValue::new(format!("{prefix}=")).help(*help)
        });
        Some(Box::new(names.chain(templated)))
    }
}

/// `--color`'s values, with their help; clusterctl's boolean `--color=true|false` too.
fn color_when() -> impl TypedValueParser<Value = ColorWhen> {
    let mut values: Vec<PossibleValue> = ColorWhen::ALL
        .iter()
        .map(|(_, name, help)| PossibleValue::new(*name).help(*help))
        .collect();
    values.push(PossibleValue::new("true").hide(true));
    values.push(PossibleValue::new("false").hide(true));
    PossibleValuesParser::new(values).map(|s| match s.as_str() {
        "true" => ColorWhen::Always,
        "false" => ColorWhen::Never,
        // PossibleValuesParser admitted only the names above, so the parse cannot fail.
        other => other.parse::<ColorWhen>().unwrap_or_default(),
    })
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

/// `--dry-run=none|client|server`, the one declaration of the flag every verb that writes
/// flattens (`#[command(flatten)] pub dry_run: DryRunFlag`). As kubectl (1.2x) does, the mode must
/// be given: a bare `--dry-run` is a usage error (exit 2) naming the possible values. A verb
/// whose dry run says more than the help below sets its own with
/// `#[command(mut_arg("dry-run", |a| a.help("...")))]`. Derefs to the [`DryRun`] mode.
#[derive(Args, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DryRunFlag {
    /// Only print (client) or validate on the server (server) what would change
    #[arg(
        id = "dry-run",
        long = "dry-run",
        value_enum,
        default_value_t = DryRun::None,
        value_name = "MODE"
    )]
    pub mode: DryRun,
}

impl std::ops::Deref for DryRunFlag {
    type Target = DryRun;
    fn deref(&self) -> &DryRun {
        &self.mode
    }
}

impl PartialEq<DryRun> for DryRunFlag {
    fn eq(&self, other: &DryRun) -> bool {
        self.mode == *other
    }
}

/// The mode of `--dry-run` ([`DryRunFlag`]), as kubectl spells it.
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

    /// kubectl takes `--dry-run=none|client|server` and refuses a bare `--dry-run`; a verb's own
    /// help replaces the flag's.
    #[test]
    fn dry_run_needs_its_mode_as_in_kubectl() {
        #[derive(clap::Parser)]
        #[command(mut_arg("dry-run", |a| a.help("what this verb's dry run does")))]
        struct Verb {
            #[command(flatten)]
            dry_run: DryRunFlag,
        }
        use clap::{CommandFactory, Parser};
        Verb::command().debug_assert();
        let parse = |args: &[&str]| Verb::try_parse_from([&["x"], args].concat());
        assert_eq!(parse(&[]).unwrap().dry_run, DryRun::None);
        for (arg, mode) in [
            ("--dry-run=client", DryRun::Client),
            ("--dry-run=server", DryRun::Server),
            ("--dry-run=none", DryRun::None),
        ] {
            assert_eq!(parse(&[arg]).unwrap().dry_run, mode, "{arg}");
        }
        let v = parse(&["--dry-run", "server"]).unwrap();
        assert!(v.dry_run.server() && v.dry_run.is_dry());
        let bare = parse(&["--dry-run"]).map(|_| ()).unwrap_err();
        assert_eq!(bare.kind(), clap::error::ErrorKind::InvalidValue);
        assert!(parse(&["--dry-run=maybe"]).is_err());
        let help = Verb::command().render_long_help().to_string();
        assert!(help.contains("what this verb's dry run does"), "{help}");
    }

    #[test]
    fn kubectl_output_forms() {
        assert_eq!(parse_output("wide").unwrap(), OutputFormat::Wide);
        assert!(matches!(
            parse_output("jsonpath={.items[*].metadata.name}").unwrap(),
            OutputFormat::JsonPath(_)
        ));
        assert!(matches!(
            parse_output("custom-columns=NAME:.metadata.name").unwrap(),
            OutputFormat::CustomColumns(_)
        ));
        let dir = std::env::temp_dir().join(format!("cols-{}", std::process::id()));
        std::fs::write(&dir, "NAME\n.metadata.name\n").unwrap();
        assert!(matches!(
            parse_output(&format!("custom-columns-file={}", dir.display())).unwrap(),
            OutputFormat::CustomColumns(_)
        ));
        std::fs::remove_file(&dir).unwrap();
        // A FIFO nobody writes to: given up in one line, not a hang.
        let fifo = std::env::temp_dir().join(format!("tmpl-fifo-{}", std::process::id()));
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let fifo_arg = format!("jsonpath-file={}", fifo.display());
        let zero = "jsonpath-file=/dev/zero".to_string();
        for (bad, says) in [
            (fifo_arg.as_str(), "nothing arrived"),
            (zero.as_str(), "larger than the 64 KiB limit"),
            ("jsonpath=", "needs a template"),
            ("jsonpath={.items", "unclosed"),
            ("custom-columns=NAME", "HEADER:JSONPATH"),
            ("jsonpath-file=/nonexistent/t", "cannot read"),
            ("go-template={{.kind}}", "not supported"),
            ("tabel", "use one of: table"),
        ] {
            let e = parse_output(bad).unwrap_err();
            assert!(e.contains(says) && !e.contains('\n'), "{bad}: {e}");
        }
        std::fs::remove_file(&fifo).unwrap();
    }

    #[test]
    fn kubectl_verbosity_and_clusterctl_color() {
        let os = |v: &[&str]| v.iter().map(std::ffi::OsString::from).collect::<Vec<_>>();
        assert_eq!(
            kubectl_verbosity(os(&["x", "-v=6", "-v4", "-vv", "--v=2", "--", "-v=1"])),
            os(&["x", "--v=6", "--v=4", "-vv", "--v=2", "--", "-v=1"])
        );
        assert_eq!(filters(0, None).0, "warn");
        assert_eq!(filters(0, Some(6)).2, "debug");
        assert_eq!(filters(3, None).0, "trace");
        #[derive(clap::Parser)]
        struct Verb {
            #[command(flatten)]
            out: OutputFlags,
            #[command(flatten)]
            log: LogFlags,
        }
        use clap::Parser;
        let v = Verb::try_parse_from(["x", "-c", "--v=6", "--show-labels"]).unwrap();
        assert_eq!(v.out.color, ColorWhen::Always);
        assert_eq!(v.log.level, Some(6));
        assert!(v.out.show_labels);
        let v = Verb::try_parse_from(["x", "--color=false"]).unwrap();
        assert_eq!(v.out.color, ColorWhen::Never);
        assert!(Verb::try_parse_from(["x", "--v=11"]).is_err());
    }
}
