//! The `main` of every plugin binary ([`run`]): the name it was run by ([`Program`], `kubectl capi`
//! or `clusterctl-capi`), kubectl's plugin rule for verbs of other plugins on PATH, clap parsing
//! (exit code 2), logging, the runtime, and one-line errors with the right exit code.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{ArgMatches, CommandFactory, FromArgMatches, Parser, Subcommand};
use kclient::error::Error;

use crate::flags::{EXIT_CODES_HELP, LogFlags, VERB_EXIT_CODES_HELP};

/// A plugin binary: its name (`capi`, `kamaji`), and its one-line description and version for
/// `--help` and `--version`.
#[derive(Clone, Copy, Debug)]
pub struct Plugin {
    pub name: &'static str,
    pub about: &'static str,
    pub version: &'static str,
}

// The command line of every plugin: `-v`, then one of its verbs `V`. (No doc comment: clap
// would print it in `--help`; [`run`] sets the plugin's own description.)
#[derive(Parser)]
#[command(
    after_help = EXIT_CODES_HELP,
    disable_help_subcommand = true,
    propagate_version = false
)]
struct PluginCli<V: Subcommand> {
    #[command(flatten)]
    log: LogFlags,
    #[command(subcommand)]
    verb: V,
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

#[cfg(unix)]
fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Windows has no execute bit: kubectl looks for `<name>.exe` (and the other PATHEXT forms); we
/// look for the `.exe` form only.
#[cfg(not(unix))]
fn is_executable(p: &Path) -> bool {
    p.with_extension("exe").is_file()
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
                    #[cfg(not(unix))]
                    let candidate = candidate.with_extension("exe");
                    return Some((candidate, n));
                }
            }
        }
    }
    None
}

#[cfg(unix)]
fn exec_external(exe: &Path, rest: &[OsString]) -> ExitCode {
    use std::os::unix::process::CommandExt;
    let err = std::process::Command::new(exe).args(rest).exec();
    kclient::render::error(&Error::other(format!(
        "cannot run {}: {err}",
        exe.display()
    )));
    ExitCode::from(kclient::error::EXIT_FAILURE)
}

/// Windows cannot replace the process: run the plugin, wait, and exit with its code (as
/// kubectl's own plugin handler does there).
#[cfg(not(unix))]
fn exec_external(exe: &Path, rest: &[OsString]) -> ExitCode {
    match std::process::Command::new(exe).args(rest).status() {
        Ok(status) => ExitCode::from(
            status
                .code()
                .and_then(|c| u8::try_from(c).ok())
                .unwrap_or(kclient::error::EXIT_FAILURE),
        ),
        Err(err) => {
            kclient::render::error(&Error::other(format!(
                "cannot run {}: {err}",
                exe.display()
            )));
            ExitCode::from(kclient::error::EXIT_FAILURE)
        }
    }
}

/// Help and version go out as clap prints them (exit 0); a usage error becomes our one line
/// plus a hint, exit 2.
fn usage_exit(e: clap::Error, help_on: &str) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        e.exit()
    }
    kclient::render::error(&usage_error(&e.to_string(), help_on));
    ExitCode::from(kclient::error::EXIT_USAGE)
}

/// clap's usage error as our one line and hint ([`kcore::text::usage_line`]).
pub fn usage_error(clap_text: &str, help_on: &str) -> Error {
    let (message, hint) = kcore::text::usage_line(clap_text, help_on);
    Error::Usage {
        message,
        hint: Some(hint),
    }
}

/// The clap command of `C`, named after how the program was run.
pub fn command_for<C: CommandFactory>(program: &Program) -> clap::Command {
    let display = program.display();
    C::command()
        .name(program.executable())
        .bin_name(display.clone())
        .display_name(display)
}

/// The `main` of every plugin binary: parses `argv` (`-v` and one verb of `V`) with usage named
/// after `argv[0]`, starts logging and a runtime, runs the verb with `f`, reports a failure as
/// one line plus a hint, and returns the exit code (0 success, 1 failure, 2 usage).
pub fn run<V, F, Fut>(plugin: Plugin, f: F) -> ExitCode
where
    V: Subcommand,
    F: FnOnce(V, Program, clap::Command) -> Fut,
    Fut: std::future::Future<Output = Result<(), Error>>,
{
    let args: Vec<OsString> = crate::flags::kubectl_verbosity(std::env::args_os().collect());
    let program = Program::from_argv0(args.first().and_then(|a| a.to_str()), plugin.name);
    let cmd = command_for::<PluginCli<V>>(&program)
        .about(plugin.about)
        .version(plugin.version);
    let mut cmd = with_exit_codes_help(cmd);
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
        cmd = with_external_verbs_help(&program, cmd);
    }
    let help_on = help_on(&program, &cmd, &words);
    let matches: ArgMatches = match cmd.clone().try_get_matches_from(&args) {
        Ok(m) => m,
        Err(e) => return usage_exit(e, &help_on),
    };
    let cli = match PluginCli::<V>::from_arg_matches(&matches) {
        Ok(c) => c,
        Err(e) => return usage_exit(e.with_cmd(&cmd), &help_on),
    };
    cli.log.init();
    run_verb(|| f(cli.verb, program, cmd))
}

/// Every verb's --help ends with the exit codes too.
fn with_exit_codes_help(mut cmd: clap::Command) -> clap::Command {
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
    cmd
}

/// The top-level help lists the verbs other plugins on PATH add, when there are any.
fn with_external_verbs_help(program: &Program, cmd: clap::Command) -> clap::Command {
    let external = external_verbs(program, &cmd);
    if external.is_empty() {
        return cmd;
    }
    let list: Vec<String> = external
        .iter()
        .map(|(verb, exe)| format!("  {verb:<12}{}", exe.display()))
        .collect();
    let after = cmd
        .get_after_help()
        .map(|h| h.to_string())
        .unwrap_or_default();
    cmd.after_help(format!(
        "Verbs from other plugins on PATH (kubectl's longest-name rule):\n{}\n\n{after}",
        list.join("\n")
    ))
}

/// What to ask for help on when clap's message names no usage line: the verb typed.
fn help_on(program: &Program, cmd: &clap::Command, words: &[String]) -> String {
    let verb = words
        .iter()
        .find(|w| !w.starts_with('-'))
        .filter(|w| cmd.find_subcommand(w.as_str()).is_some());
    match verb {
        Some(v) => format!("{} {v}", program.display()),
        None => program.display(),
    }
}

/// Runs the verb on a current-thread runtime and turns its result into the exit code. The verb
/// is started only once the runtime exists.
fn run_verb<Fut>(verb: impl FnOnce() -> Fut) -> ExitCode
where
    Fut: std::future::Future<Output = Result<(), Error>>,
{
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            kclient::render::error(&Error::other(format!("cannot start the runtime: {e}")));
            return ExitCode::from(kclient::error::EXIT_FAILURE);
        }
    };
    match rt.block_on(verb()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            kclient::render::error(&e);
            ExitCode::from(e.exit_code())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clap_errors_become_one_line_and_a_hint() {
        let e = usage_error(
            "error: the following required arguments were not provided:\n  <CLUSTER>\n\nUsage: kubectl capi describe <CLUSTER>\n\nFor more information, try '--help'.\n",
            "kubectl capi",
        );
        assert_eq!(
            e.to_string(),
            "the following required arguments were not provided: <CLUSTER>"
        );
        assert_eq!(
            e.hint().as_deref(),
            Some("see kubectl capi describe --help")
        );
        assert_eq!(e.exit_code(), 2);
        let e = usage_error(
            "error: unexpected argument '-1' found\n\n  tip: to pass '-1' as a value, use '-- -1'\n\nUsage: kubectl capi scale [OPTIONS] <CLUSTER>\n",
            "kubectl capi scale",
        );
        assert_eq!(
            e.hint().as_deref(),
            Some("counts and durations cannot be negative")
        );
        let e = usage_error(
            "error: invalid value 'tabel' for '--output <FORMAT>'\n  [possible values: table, wide]\n\n  tip: a similar value exists: 'table'\n",
            "kubectl capi list",
        );
        assert_eq!(
            e.hint().as_deref(),
            Some("possible values: table, wide; a similar value exists: 'table'")
        );
        let e = usage_error(
            "error: invalid value '1000h' for '--timeout <DURATION>': duration \"1000h\" is too long\n",
            "kubectl capi upgrade",
        );
        assert_eq!(e.hint().as_deref(), Some("see kubectl capi upgrade --help"));
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
}
