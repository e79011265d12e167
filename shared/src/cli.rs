//! Command-line plumbing shared by both plugins: kubectl's connection flags ([`KubeFlags`]),
//! output flags ([`OutputFlags`]), `-v` ([`LogFlags`]), the connected client ([`Conn`]), the
//! name the program was run by ([`Program`]) and the `main` of every binary ([`run`]).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::{ArgMatches, Args, CommandFactory, FromArgMatches, ValueEnum};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use crate::error::{Error, Target};

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
    #[arg(id = "kube-server", short = 's', long = "server", value_name = "URL")]
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

/// Parses kubectl/Go durations: `30` (seconds), `500ms`, `10s`, `2m`, `1h30m`, `0`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if s.is_empty() {
        return Err("empty duration".into());
    }
    if let Ok(n) = s.parse::<u64>() {
        return Ok(Duration::from_secs(n));
    }
    let mut total = Duration::ZERO;
    let mut rest = s;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| format!("invalid duration {s:?}: missing unit (use s, m or h)"))?;
        if num_len == 0 {
            return Err(format!("invalid duration {s:?} (examples: 30s, 2m, 1h30m)"));
        }
        let n: f64 = rest[..num_len]
            .parse()
            .map_err(|_| format!("invalid duration {s:?}"))?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let secs = match &rest[..unit_len] {
            "ns" => n / 1e9,
            "us" | "µs" => n / 1e6,
            "ms" => n / 1e3,
            "s" => n,
            "m" => n * 60.0,
            "h" => n * 3600.0,
            u => {
                return Err(format!(
                    "invalid duration {s:?}: unknown unit {u:?} (use ms, s, m or h)"
                ));
            }
        };
        total += Duration::from_secs_f64(secs);
        rest = &rest[unit_len..];
    }
    Ok(total)
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

/// `-o` values.
#[derive(ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OutputFormat {
    /// kubectl-looking table
    #[default]
    Table,
    /// table with extra columns
    Wide,
    /// JSON, stable for scripts
    Json,
    /// YAML, stable for scripts
    Yaml,
    /// kind.group/name, one a line
    Name,
}

/// `--color` values.
#[derive(ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ColorWhen {
    /// colour on a terminal unless NO_COLOR is set
    #[default]
    Auto,
    /// always colour (overrides NO_COLOR)
    Always,
    /// never colour
    Never,
}

/// Output flags. Flatten into every verb that prints objects.
#[derive(Args, Clone, Debug, Default)]
#[command(next_help_heading = "Output")]
pub struct OutputFlags {
    /// Output format
    #[arg(id = "out-output", short = 'o', long = "output", value_enum, default_value_t = OutputFormat::Table, value_name = "FORMAT")]
    pub output: OutputFormat,
    /// Do not print table headers
    #[arg(id = "out-no_headers", long = "no-headers")]
    pub no_headers: bool,
    /// When to colour the output
    #[arg(id = "out-color", long = "color", value_enum, default_value_t = ColorWhen::Auto, value_name = "WHEN")]
    pub color: ColorWhen,
}

/// Whether to colour, given the flag, `NO_COLOR` and whether the stream is a terminal.
pub fn color_enabled(when: ColorWhen, no_color_env: Option<&str>, is_tty: bool) -> bool {
    match when {
        ColorWhen::Always => true,
        ColorWhen::Never => false,
        ColorWhen::Auto => is_tty && no_color_env.is_none_or(str::is_empty),
    }
}

/// A client connected the way kubectl would, plus what it resolved (for messages).
#[derive(Clone)]
pub struct Conn {
    pub client: Client,
    /// The context name (`in-cluster` for in-cluster configuration).
    pub context: String,
    /// The API server URL.
    pub server: String,
    /// `-n`, else the context's namespace, else `default`.
    pub namespace: String,
    /// True when `-n` was given.
    pub namespace_explicit: bool,
    /// `-A`.
    pub all_namespaces: bool,
    /// `--request-timeout`, for timeout messages.
    pub request_timeout: Option<Duration>,
}

impl Conn {
    /// The connection, for error messages.
    pub fn target(&self) -> Target {
        Target {
            context: self.context.clone(),
            server: self.server.clone(),
        }
    }
    /// The namespace to list in: `None` with `-A`.
    pub fn list_namespace(&self) -> Option<&str> {
        if self.all_namespaces {
            None
        } else {
            Some(&self.namespace)
        }
    }
    /// Maps a kube error of `op` on this connection.
    pub fn error(&self, err: kube::Error, op: &crate::error::Op) -> Error {
        match crate::error::from_kube(err, &self.target(), op) {
            Error::Timeout { what, after } if after.is_zero() => Error::Timeout {
                what,
                after: self.request_timeout.unwrap_or_default(),
            },
            other => other,
        }
    }
}

fn kubeconfig_error(e: impl std::fmt::Display, path: Option<&Path>) -> Error {
    let where_ = path
        .map(|p| format!("{}: ", p.display()))
        .unwrap_or_default();
    Error::Kubeconfig {
        message: format!("cannot read the kubeconfig: {where_}{e}"),
        hint: "check the file (kubectl config view), KUBECONFIG and --kubeconfig".into(),
    }
}

fn default_kubeconfig_path() -> Option<PathBuf> {
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".kube").join("config"))
}

impl KubeFlags {
    /// Loads the kubeconfig like kubectl: `--kubeconfig`, else `KUBECONFIG` (several paths
    /// merged, first wins), else `~/.kube/config`. `None` when none exists (then in-cluster).
    pub fn load_kubeconfig(&self) -> Result<Option<Kubeconfig>, Error> {
        if let Some(p) = &self.kubeconfig {
            return Kubeconfig::read_from(p)
                .map(Some)
                .map_err(|e| kubeconfig_error(e, Some(p)));
        }
        if let Some(v) = std::env::var_os("KUBECONFIG")
            && std::env::split_paths(&v).any(|p| !p.as_os_str().is_empty())
        {
            // kubectl ignores KUBECONFIG entries that do not exist.
            let existing: Vec<PathBuf> = std::env::split_paths(&v)
                .filter(|p| !p.as_os_str().is_empty() && p.exists())
                .collect();
            if existing.is_empty() {
                return Err(Error::Kubeconfig {
                    message: format!(
                        "none of the files in KUBECONFIG exist ({})",
                        v.to_string_lossy()
                    ),
                    hint: "fix KUBECONFIG or pass --kubeconfig".into(),
                });
            }
            let mut merged = Kubeconfig::default();
            for p in &existing {
                let kc = Kubeconfig::read_from(p).map_err(|e| kubeconfig_error(e, Some(p)))?;
                merged = merged.merge(kc).map_err(|e| kubeconfig_error(e, Some(p)))?;
            }
            return Ok(Some(merged));
        }
        match default_kubeconfig_path() {
            Some(p) if p.exists() => Kubeconfig::read_from(&p)
                .map(Some)
                .map_err(|e| kubeconfig_error(e, Some(&p))),
            _ => Ok(None),
        }
    }

    /// Builds the client configuration and the context name it came from.
    pub async fn config(&self) -> Result<(Config, String), Error> {
        let (mut config, context) = match self.load_kubeconfig()? {
            Some(kc) => {
                let context = match self.context.clone().or_else(|| kc.current_context.clone()) {
                    Some(c) => c,
                    None => {
                        return Err(Error::Kubeconfig {
                            message: "the kubeconfig has no current context".into(),
                            hint: "pass --context, or run kubectl config use-context <name>".into(),
                        });
                    }
                };
                if !kc.contexts.iter().any(|c| c.name == context) {
                    let names: Vec<&str> = kc.contexts.iter().map(|c| c.name.as_str()).collect();
                    let close = crate::error::closest_names(&context, names.iter().copied());
                    let hint = if close.is_empty() {
                        format!("known contexts: {}", names.join(", "))
                    } else {
                        format!(
                            "did you mean \"{}\"? (kubectl config get-contexts)",
                            close[0]
                        )
                    };
                    return Err(Error::Kubeconfig {
                        message: format!("context \"{context}\" not found in the kubeconfig"),
                        hint,
                    });
                }
                let opts = KubeConfigOptions {
                    context: Some(context.clone()),
                    cluster: self.cluster.clone(),
                    user: self.user.clone(),
                };
                let config = Config::from_custom_kubeconfig(kc, &opts)
                    .await
                    .map_err(|e| Error::Kubeconfig {
                        message: format!("context \"{context}\": {e}"),
                        hint: "check the context's cluster and user (kubectl config view --minify)"
                            .into(),
                    })?;
                (config, context)
            }
            None => match Config::incluster() {
                Ok(c) => (c, "in-cluster".to_string()),
                Err(e) => {
                    return Err(Error::Kubeconfig {
                        message: format!("no kubeconfig found and not running in a cluster ({e})"),
                        hint: "set KUBECONFIG, pass --kubeconfig, or create ~/.kube/config".into(),
                    });
                }
            },
        };
        if let Some(server) = &self.server {
            config.cluster_url = server.parse().map_err(|e| {
                Error::usage(format!("--server {server:?} is not a valid URL: {e}"))
            })?;
        }
        if let Some(token) = &self.token {
            config.auth_info.token = Some(token.clone().into());
            config.auth_info.token_file = None;
            config.auth_info.exec = None;
            config.auth_info.client_certificate = None;
            config.auth_info.client_certificate_data = None;
            config.auth_info.client_key = None;
            config.auth_info.client_key_data = None;
        }
        if let Some(u) = &self.as_user {
            config.auth_info.impersonate = Some(u.clone());
        }
        if !self.as_group.is_empty() {
            config.auth_info.impersonate_groups = Some(self.as_group.clone());
        }
        if let Some(uid) = &self.as_uid {
            config.auth_info.impersonate_uid = Some(uid.clone());
        }
        if self.insecure_skip_tls_verify {
            config.accept_invalid_certs = true;
            config.root_cert = None;
        }
        if let Some(n) = &self.tls_server_name {
            config.tls_server_name = Some(n.clone());
        }
        if let Some(t) = self.request_timeout.filter(|t| !t.is_zero()) {
            config.connect_timeout = Some(t);
            config.read_timeout = Some(t);
            config.write_timeout = Some(t);
            config.reset_reader_on_write = true;
        }
        Ok((config, context))
    }

    /// Connects like kubectl: kubeconfig (or in-cluster), context, overrides, namespace.
    pub async fn connect(&self) -> Result<Conn, Error> {
        let (config, context) = self.config().await?;
        let server = config
            .cluster_url
            .to_string()
            .trim_end_matches('/')
            .to_string();
        let namespace = self
            .namespace
            .clone()
            .unwrap_or_else(|| config.default_namespace.clone());
        let target = Target {
            context: context.clone(),
            server: server.clone(),
        };
        let client = Client::try_from(config)
            .map_err(|e| crate::error::from_kube(e, &target, &crate::error::Op::default()))?;
        tracing::debug!(%context, %server, %namespace, "connected");
        Ok(Conn {
            client,
            context,
            server,
            namespace,
            namespace_explicit: self.namespace.is_some(),
            all_namespaces: self.all_namespaces,
            request_timeout: self.request_timeout.filter(|t| !t.is_zero()),
        })
    }
}

/// The name the program was run by: `kubectl-capi` (also through kubectl or krew) reads as
/// `kubectl capi`, a `clusterctl-capi` link as `clusterctl capi`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Program {
    /// `kubectl` or `clusterctl`.
    pub host: String,
    /// The plugin name: `capi` or `kamaji`.
    pub plugin: String,
}

impl Program {
    /// From `argv[0]` (a path or a name).
    pub fn from_argv0(argv0: Option<&str>, plugin: &str) -> Program {
        let base = argv0
            .map(|a| {
                Path::new(a)
                    .file_name()
                    .map(|f| f.to_string_lossy().to_string())
                    .unwrap_or_default()
            })
            .unwrap_or_default();
        let host = if base.starts_with("clusterctl-") {
            "clusterctl"
        } else {
            "kubectl"
        };
        Program {
            host: host.into(),
            plugin: plugin.into(),
        }
    }
    /// `kubectl capi`.
    pub fn display(&self) -> String {
        format!("{} {}", self.host, self.plugin)
    }
    /// `kubectl-capi`: the executable name.
    pub fn executable(&self) -> String {
        format!("{}-{}", self.host, self.plugin)
    }
}

/// Executables on `PATH` named `<host>-<plugin>-<verb>` (`kubectl-capi-foo`): verbs added by
/// other plugins, which kubectl runs for `kubectl capi foo`. Verbs we implement ourselves are
/// left out (kubectl would still prefer the external binary; `kubectl plugin list` shows it).
pub fn external_verbs(program: &Program, cmd: &clap::Command) -> Vec<(String, PathBuf)> {
    let mut prefixes = vec![format!("{}-", program.executable())];
    if program.host != "kubectl" {
        prefixes.push(format!("kubectl-{}-", program.plugin));
    }
    let mut found: Vec<(String, PathBuf)> = Vec::new();
    let Some(path) = std::env::var_os("PATH") else {
        return found;
    };
    for dir in std::env::split_paths(&path) {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            let Some(verb) = prefixes.iter().find_map(|p| name.strip_prefix(p.as_str())) else {
                continue;
            };
            let verb = verb.replace('_', "-");
            if verb.is_empty()
                || cmd.find_subcommand(&verb).is_some()
                || found.iter().any(|(v, _)| *v == verb)
                || !is_executable(&e.path())
            {
                continue;
            }
            found.push((verb, e.path()));
        }
    }
    found.sort();
    found
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The external executable for the leading non-flag words, longest name first, when the
/// first word is not one of our verbs; with the number of words it consumes.
fn find_external(
    program: &Program,
    cmd: &clap::Command,
    words: &[String],
) -> Option<(PathBuf, usize)> {
    let first = words.first()?;
    if first.starts_with('-') || cmd.find_subcommand(first).is_some() {
        return None;
    }
    let verbs: Vec<String> = words
        .iter()
        .take_while(|w| !w.starts_with('-'))
        .map(|w| w.replace('-', "_"))
        .collect();
    let path = std::env::var_os("PATH")?;
    let mut hosts = vec![program.executable()];
    if program.host != "kubectl" {
        hosts.push(format!("kubectl-{}", program.plugin));
    }
    for n in (1..=verbs.len()).rev() {
        for host in &hosts {
            let name = format!("{host}-{}", verbs[..n].join("-"));
            for dir in std::env::split_paths(&path) {
                let candidate = dir.join(&name);
                if is_executable(&candidate) {
                    return Some((candidate, n));
                }
            }
        }
    }
    None
}

fn exec_external(exe: &Path, rest: &[OsString]) -> ExitCode {
    use std::os::unix::process::CommandExt;
    let err = std::process::Command::new(exe).args(rest).exec();
    crate::render::error(&Error::other(format!(
        "cannot run {}: {err}",
        exe.display()
    )));
    ExitCode::from(crate::error::EXIT_FAILURE)
}

/// The clap command of `C`, named after how the program was run.
pub fn command_for<C: CommandFactory>(program: &Program) -> clap::Command {
    let display = program.display();
    C::command()
        .name(program.executable())
        .bin_name(display.clone())
        .display_name(display)
}

/// The `main` of every binary: parses `argv` with usage named after `argv[0]`, starts logging
/// and a runtime, runs the verb, reports a failure as one line plus a hint, and returns the
/// exit code (0 success, 1 failure, 2 usage).
pub fn run<C, F, Fut>(plugin: &str, verbose: impl Fn(&C) -> LogFlags, f: F) -> ExitCode
where
    C: CommandFactory + FromArgMatches,
    F: FnOnce(C, Program, clap::Command) -> Fut,
    Fut: std::future::Future<Output = Result<(), Error>>,
{
    let args: Vec<OsString> = std::env::args_os().collect();
    let program = Program::from_argv0(args.first().and_then(|a| a.to_str()), plugin);
    let mut cmd = command_for::<C>(&program);
    // Every verb's --help ends with the exit codes too.
    let verbs: Vec<String> = cmd
        .get_subcommands()
        .map(|s| s.get_name().to_string())
        .collect();
    for v in verbs {
        cmd = cmd.mut_subcommand(v, |s| {
            let before = s
                .get_after_help()
                .map(|h| format!("{h}\n\n"))
                .unwrap_or_default();
            s.after_help(format!("{before}{VERB_EXIT_CODES_HELP}"))
        });
    }
    let words: Vec<String> = args
        .iter()
        .skip(1)
        .map(|a| a.to_string_lossy().to_string())
        .collect();
    // kubectl's longest-name rule, for direct and clusterctl runs too: an unknown verb with a
    // `<host>-<plugin>-<verb>` executable on PATH runs that executable.
    if let Some((exe, consumed)) = find_external(&program, &cmd, &words) {
        return exec_external(&exe, &args[1 + consumed..]);
    }
    if words.is_empty() || words.iter().any(|w| w == "-h" || w == "--help") {
        let external = external_verbs(&program, &cmd);
        if !external.is_empty() {
            let list: Vec<String> = external
                .iter()
                .map(|(verb, exe)| format!("  {verb:<12}{}", exe.display()))
                .collect();
            let after = cmd
                .get_after_help()
                .map(|h| h.to_string())
                .unwrap_or_default();
            cmd = cmd.after_help(format!(
                "Verbs from other plugins on PATH (kubectl's longest-name rule):\n{}\n\n{after}",
                list.join("\n")
            ));
        }
    }
    let matches: ArgMatches = match cmd.clone().try_get_matches_from(&args) {
        Ok(m) => m,
        // clap prints help, versions and usage errors itself; usage errors exit 2.
        Err(e) => e.exit(),
    };
    let cli = match C::from_arg_matches(&matches) {
        Ok(c) => c,
        Err(e) => e.with_cmd(&cmd).exit(),
    };
    verbose(&cli).init();
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            crate::render::error(&Error::other(format!("cannot start the runtime: {e}")));
            return ExitCode::from(crate::error::EXIT_FAILURE);
        }
    };
    match rt.block_on(f(cli, program, cmd)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            crate::render::error(&e);
            ExitCode::from(e.exit_code())
        }
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
        use clap::Parser;
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

    #[test]
    fn durations_parse_like_kubectl() {
        assert_eq!(parse_duration("30").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("0").unwrap(), Duration::ZERO);
        assert!(parse_duration("10x").is_err());
        assert!(parse_duration("s").is_err());
        assert!(parse_duration("").is_err());
    }

    #[test]
    fn program_name_follows_argv0() {
        let p = Program::from_argv0(Some("/home/u/.krew/bin/kubectl-capi"), "capi");
        assert_eq!(p.display(), "kubectl capi");
        let p = Program::from_argv0(Some("clusterctl-kamaji"), "kamaji");
        assert_eq!(p.display(), "clusterctl kamaji");
        assert_eq!(p.executable(), "clusterctl-kamaji");
        assert_eq!(Program::from_argv0(None, "capi").display(), "kubectl capi");
    }

    #[test]
    fn color_rules() {
        assert!(color_enabled(ColorWhen::Auto, None, true));
        assert!(!color_enabled(ColorWhen::Auto, Some("1"), true));
        assert!(color_enabled(ColorWhen::Auto, Some(""), true));
        assert!(!color_enabled(ColorWhen::Auto, None, false));
        assert!(color_enabled(ColorWhen::Always, Some("1"), false));
        assert!(!color_enabled(ColorWhen::Never, None, true));
    }

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    const KC_A: &str = "apiVersion: v1\nkind: Config\nclusters:\n- name: a\n  cluster:\n    server: https://a.example:6443\ncontexts:\n- name: ctx-a\n  context:\n    cluster: a\n    user: ua\n    namespace: team-a\ncurrent-context: ctx-a\nusers:\n- name: ua\n  user:\n    token: aaa\n";
    const KC_B: &str = "apiVersion: v1\nkind: Config\nclusters:\n- name: b\n  cluster:\n    server: https://b.example:6443\ncontexts:\n- name: ctx-b\n  context:\n    cluster: b\n    user: ub\ncurrent-context: ctx-b\nusers:\n- name: ub\n  user:\n    token: bbb\n";

    #[tokio::test]
    async fn kubeconfig_flag_context_and_namespace() {
        let dir = tempfile::tempdir().unwrap();
        let a = write(dir.path(), "a", KC_A);
        let flags = KubeFlags {
            kubeconfig: Some(a.clone()),
            ..Default::default()
        };
        let (config, ctx) = flags.config().await.unwrap();
        assert_eq!(ctx, "ctx-a");
        assert_eq!(config.default_namespace, "team-a");
        assert_eq!(config.cluster_url.to_string(), "https://a.example:6443/");

        let flags = KubeFlags {
            kubeconfig: Some(a),
            context: Some("ctx-aa".into()),
            request_timeout: Some(Duration::from_secs(3)),
            as_user: Some("jane".into()),
            as_group: vec!["admins".into()],
            insecure_skip_tls_verify: true,
            ..Default::default()
        };
        let err = flags.config().await.unwrap_err();
        assert_eq!(
            err.to_string(),
            "context \"ctx-aa\" not found in the kubeconfig"
        );
        assert!(err.hint().unwrap().contains("did you mean \"ctx-a\"?"));
        let flags = KubeFlags {
            context: Some("ctx-a".into()),
            ..flags
        };
        let (config, _) = flags.config().await.unwrap();
        assert_eq!(config.read_timeout, Some(Duration::from_secs(3)));
        assert_eq!(config.auth_info.impersonate.as_deref(), Some("jane"));
        assert_eq!(
            config.auth_info.impersonate_groups,
            Some(vec!["admins".to_string()])
        );
        assert!(config.accept_invalid_certs);
    }

    // Touches the process environment: the only test in this crate that sets KUBECONFIG.
    #[tokio::test]
    async fn kubeconfig_env_merges_several_files_first_wins() {
        let dir = tempfile::tempdir().unwrap();
        let a = write(dir.path(), "a", KC_A);
        let b = write(dir.path(), "b", KC_B);
        let joined = std::env::join_paths([b.clone(), dir.path().join("missing"), a]).unwrap();
        // SAFETY: no other test of this crate reads or writes KUBECONFIG.
        unsafe { std::env::set_var("KUBECONFIG", &joined) };
        let flags = KubeFlags::default();
        let (config, ctx) = flags.config().await.unwrap();
        assert_eq!(ctx, "ctx-b", "current-context of the first file wins");
        assert_eq!(config.default_namespace, "default");
        let flags = KubeFlags {
            context: Some("ctx-a".into()),
            namespace: Some("x".into()),
            ..Default::default()
        };
        let (config, ctx) = flags.config().await.unwrap();
        assert_eq!(ctx, "ctx-a", "contexts of later files are merged in");
        assert_eq!(config.cluster_url.to_string(), "https://a.example:6443/");
        unsafe { std::env::remove_var("KUBECONFIG") };
    }
}
