//! kubectl's plugin completion protocol (kubectl ≥ 1.26): `kubectl_complete-<plugin>` runs
//! `kubectl-<plugin> __complete <args...> <word>`; we print one candidate per line, then
//! `:<directive>` (Cobra's ShellCompDirective bitmask: 0 default, 1 error, 2 no space,
//! 4 no file completion).
//!
//! Completion is driven by the clap command itself: verbs, flags and `possible values` come
//! from it, and a positional or flag value completes live names from the current context when
//! its `value_name` says what it is:
//!
//! | value_name | candidates |
//! |---|---|
//! | `CLUSTER` | Cluster names (cluster.x-k8s.io, served version) |
//! | `HOST` | ByoHost names |
//! | `CONTROL_PLANE` | KamajiControlPlane names |
//! | `TENANT_CONTROL_PLANE` | Kamaji TenantControlPlane names |
//! | `MACHINE_DEPLOYMENT`, `MACHINE` | MachineDeployment, Machine names |
//! | `TARGET` | Cluster names, then `machine/NAME` and `host/NAME` (`kubectl capi logs`) |
//! | `NAMESPACE` | namespaces |
//! | `CONTEXT`, `KUBECONFIG_CLUSTER`, `KUBECONFIG_USER` | from the kubeconfig |
//!
//! So a verb gets live completion by writing `#[arg(value_name = "CLUSTER")] name: String`.

use std::ffi::OsString;
use std::time::Duration;

use clap::{Arg, Args, Command, FromArgMatches};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams};

use crate::flags::KubeFlags;
use kclient::error::Error;

pub const DIRECTIVE_DEFAULT: u32 = 0;
pub const DIRECTIVE_ERROR: u32 = 1;
pub const DIRECTIVE_NO_SPACE: u32 = 2;
pub const DIRECTIVE_NO_FILE_COMP: u32 = 4;

/// The hidden `__complete` subcommand's arguments: everything after it, the last one being
/// the word under the cursor (`""` for a new word).
#[derive(Args, Clone, Debug, Default)]
pub struct CompleteArgs {
    #[arg(num_args = 0.., trailing_var_arg = true, allow_hyphen_values = true)]
    pub words: Vec<String>,
}

/// Live object kinds a value can name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Live {
    Clusters,
    Hosts,
    ControlPlanes,
    TenantControlPlanes,
    MachineDeployments,
    Machines,
    /// What `kubectl capi logs` takes: Clusters, `machine/NAME`, `host/NAME`.
    Targets,
    Namespaces,
    Contexts,
    KubeconfigClusters,
    KubeconfigUsers,
}

impl Live {
    /// The live kind a value name stands for.
    pub fn from_value_name(name: &str) -> Option<Live> {
        Some(match name {
            "CLUSTER" => Live::Clusters,
            "HOST" => Live::Hosts,
            "CONTROL_PLANE" => Live::ControlPlanes,
            "TENANT_CONTROL_PLANE" => Live::TenantControlPlanes,
            "MACHINE_DEPLOYMENT" => Live::MachineDeployments,
            "MACHINE" => Live::Machines,
            "TARGET" => Live::Targets,
            "NAMESPACE" => Live::Namespaces,
            "CONTEXT" => Live::Contexts,
            "KUBECONFIG_CLUSTER" => Live::KubeconfigClusters,
            "KUBECONFIG_USER" => Live::KubeconfigUsers,
            _ => return None,
        })
    }
}

/// What to answer, decided without I/O.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// Fixed candidates (already filtered by the prefix).
    Static(Vec<String>, u32),
    /// Live names of a kind, filtered by `prefix`, each prefixed with `insert` (for `--x=`).
    Live {
        live: Live,
        prefix: String,
        insert: String,
    },
    /// Let the shell complete file names.
    Files,
}

fn takes_value(a: &Arg) -> bool {
    a.get_action().takes_values()
}

fn find_long<'a>(cmd: &'a Command, name: &str) -> Option<&'a Arg> {
    cmd.get_arguments().find(|a| {
        a.get_long_and_visible_aliases()
            .is_some_and(|ls| ls.contains(&name))
    })
}

fn find_short(cmd: &Command, c: char) -> Option<&Arg> {
    cmd.get_arguments().find(|a| a.get_short() == Some(c))
}

/// Where the words before the cursor leave the command line.
struct Position<'a> {
    /// The (sub)command the words reached.
    cmd: &'a Command,
    /// How many positionals were given.
    positional: usize,
    /// The flag whose value is the word under the cursor.
    pending_value: Option<&'a Arg>,
    /// After `--`: every word is a positional.
    only_positionals: bool,
}

/// The value-taking short flag in `-n`, `-nns` or `-vvv` that waits for the next word: the
/// first value-taking short consumes the rest of the word, or the next word when it is last.
fn pending_short<'a>(cmd: &'a Command, shorts: &str) -> Option<&'a Arg> {
    for (i, c) in shorts.char_indices() {
        if let Some(a) = find_short(cmd, c)
            && takes_value(a)
        {
            return (i + c.len_utf8() == shorts.len()).then_some(a);
        }
    }
    None
}

/// Walks the words before the cursor: subcommands, flags (and their values), positionals.
fn walk<'a>(root: &'a Command, done: &[String]) -> Position<'a> {
    let mut p = Position {
        cmd: root,
        positional: 0,
        pending_value: None,
        only_positionals: false,
    };
    for w in done {
        if p.pending_value.take().is_some() {
            continue;
        }
        if p.only_positionals {
            p.positional += 1;
            continue;
        }
        if w == "--" {
            p.only_positionals = true;
            continue;
        }
        if let Some(long) = w.strip_prefix("--") {
            if !long.contains('=')
                && let Some(a) = find_long(p.cmd, long)
                && takes_value(a)
            {
                p.pending_value = Some(a);
            }
            continue;
        }
        if let Some(shorts) = w.strip_prefix('-').filter(|s| !s.is_empty()) {
            p.pending_value = pending_short(p.cmd, shorts);
            continue;
        }
        if p.positional == 0
            && let Some(sub) = p.cmd.find_subcommand(w)
        {
            p.cmd = sub;
            continue;
        }
        p.positional += 1;
    }
    p
}

/// `--flag=VALUE` completes the flag's values; `-...` completes the flag names.
fn flag_plan(cmd: &Command, cur: &str) -> Option<Answer> {
    if let Some(long) = cur.strip_prefix("--")
        && let Some((name, value)) = long.split_once('=')
    {
        return Some(match find_long(cmd, name) {
            Some(a) if takes_value(a) => values_of(a, value, &format!("--{name}=")),
            _ => Answer::Static(vec![], DIRECTIVE_NO_FILE_COMP),
        });
    }
    if !cur.starts_with('-') {
        return None;
    }
    let mut flags: Vec<String> = cmd
        .get_arguments()
        .filter(|a| !a.is_hide_set() && !a.is_positional())
        .filter_map(|a| a.get_long().map(|l| format!("--{l}")))
        .filter(|f| f.starts_with(cur))
        .collect();
    flags.sort();
    flags.dedup();
    Some(Answer::Static(flags, DIRECTIVE_NO_FILE_COMP))
}

/// The visible subcommands starting with `cur`, when `cmd` has any.
fn subcommand_plan(cmd: &Command, cur: &str) -> Option<Answer> {
    let subs: Vec<&Command> = cmd.get_subcommands().filter(|s| !s.is_hide_set()).collect();
    if subs.is_empty() {
        return None;
    }
    let mut names: Vec<String> = subs
        .iter()
        .map(|s| s.get_name().to_string())
        .filter(|n| n.starts_with(cur))
        .collect();
    names.sort();
    Some(Answer::Static(names, DIRECTIVE_NO_FILE_COMP))
}

/// The values of the `positional`-th positional (the last one again if it takes several).
fn positional_plan(cmd: &Command, positional: usize, cur: &str) -> Answer {
    let mut positionals: Vec<&Arg> = cmd.get_positionals().filter(|a| !a.is_hide_set()).collect();
    positionals.sort_by_key(|a| a.get_index().unwrap_or(usize::MAX));
    let arg = positionals.get(positional).copied().or_else(|| {
        positionals
            .last()
            .copied()
            .filter(|a| a.get_num_args().is_some_and(|n| n.max_values() > 1))
    });
    match arg {
        Some(a) => values_of(a, cur, ""),
        None => Answer::Static(vec![], DIRECTIVE_NO_FILE_COMP),
    }
}

/// Decides the answer for `words` (the last one is being completed) on the built `root`.
pub fn plan(root: &Command, words: &[String]) -> Answer {
    let (cur, done) = match words.split_last() {
        Some((cur, done)) => (cur.as_str(), done),
        None => ("", &[][..]),
    };
    let p = walk(root, done);
    if let Some(arg) = p.pending_value {
        return values_of(arg, cur, "");
    }
    if p.only_positionals {
        return positional_plan(p.cmd, p.positional, cur);
    }
    if let Some(plan) = flag_plan(p.cmd, cur) {
        return plan;
    }
    if p.positional == 0
        && let Some(plan) = subcommand_plan(p.cmd, cur)
    {
        return plan;
    }
    positional_plan(p.cmd, p.positional, cur)
}

fn values_of(arg: &Arg, prefix: &str, insert: &str) -> Answer {
    let possible = arg.get_possible_values();
    if !possible.is_empty() {
        let vals: Vec<String> = possible
            .iter()
            .filter(|p| !p.is_hide_set())
            .map(|p| p.get_name().to_string())
            .filter(|n| n.starts_with(prefix))
            .map(|n| format!("{insert}{n}"))
            .collect();
        return Answer::Static(vals, DIRECTIVE_NO_FILE_COMP);
    }
    if let Some(live) = arg
        .get_value_names()
        .and_then(|v| v.first())
        .and_then(|n| Live::from_value_name(n.as_str()))
    {
        return Answer::Live {
            live,
            prefix: prefix.to_string(),
            insert: insert.to_string(),
        };
    }
    match arg.get_value_hint() {
        clap::ValueHint::FilePath | clap::ValueHint::AnyPath | clap::ValueHint::DirPath => {
            Answer::Files
        }
        _ => Answer::Static(vec![], DIRECTIVE_NO_FILE_COMP),
    }
}

/// The connection flags among `words`, parsed leniently (everything else is ignored).
pub fn kube_flags(words: &[String]) -> KubeFlags {
    let cmd = KubeFlags::augment_args(Command::new("complete"))
        .no_binary_name(true)
        .ignore_errors(true)
        .disable_help_flag(true);
    let mut keep: Vec<OsString> = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let w = &words[i];
        let arg = if let Some(long) = w.strip_prefix("--") {
            let name = long.split_once('=').map(|(n, _)| n).unwrap_or(long);
            find_long(&cmd, name).map(|a| (a, long.contains('=')))
        } else if let Some(s) = w.strip_prefix('-').filter(|s| !s.is_empty()) {
            s.chars()
                .next()
                .and_then(|c| find_short(&cmd, c))
                .map(|a| (a, s.chars().count() > 1))
        } else {
            None
        };
        if let Some((a, inline)) = arg {
            keep.push(w.into());
            if takes_value(a) && !inline && i + 1 < words.len() {
                keep.push(words[i + 1].clone().into());
                i += 1;
            }
        }
        i += 1;
    }
    cmd.try_get_matches_from(keep)
        .ok()
        .and_then(|m| KubeFlags::from_arg_matches(&m).ok())
        .unwrap_or_default()
}

async fn live_names(live: Live, flags: &KubeFlags) -> Result<Vec<String>, Error> {
    match live {
        Live::Contexts | Live::KubeconfigClusters | Live::KubeconfigUsers => {
            let kc = flags.load_kubeconfig()?.unwrap_or_default();
            return Ok(match live {
                Live::Contexts => kc.contexts.into_iter().map(|c| c.name).collect(),
                Live::KubeconfigClusters => kc.clusters.into_iter().map(|c| c.name).collect(),
                _ => kc.auth_infos.into_iter().map(|c| c.name).collect(),
            });
        }
        _ => {}
    }
    let mut flags = flags.clone();
    if flags.request_timeout.is_none() {
        flags.request_timeout = Some(Duration::from_secs(5));
    }
    let conn = flags.connect().await?;
    if live == Live::Namespaces {
        let list = Api::<Namespace>::all(conn.client.clone())
            .list_metadata(&ListParams::default())
            .await
            .map_err(|e| {
                conn.error(
                    e,
                    &kclient::error::Op::new("list", "", "namespaces", "Namespace"),
                )
            })?;
        return Ok(list
            .items
            .into_iter()
            .filter_map(|n| n.metadata.name)
            .collect());
    }
    let apis = kclient::discovery::ServerApis::discover(&conn).await?;
    if live == Live::Targets {
        let ns = conn.list_namespace();
        let mut out = Vec::new();
        for (prefix, ar) in [
            ("", apis.cluster().ok()),
            ("machine/", apis.capi_kind("Machine").ok()),
            ("host/", apis.byo_host()),
        ] {
            if let Some(ar) = ar {
                let names = kclient::api::list_names(&conn, &ar, ns).await?;
                out.extend(names.into_iter().map(|n| format!("{prefix}{n}")));
            }
        }
        return Ok(out);
    }
    let ar = match live {
        Live::Clusters => apis.cluster().ok(),
        Live::MachineDeployments => apis.capi_kind("MachineDeployment").ok(),
        Live::Machines => apis.capi_kind("Machine").ok(),
        Live::Hosts => apis.byo_host(),
        Live::ControlPlanes => apis.kamaji_control_plane(),
        Live::TenantControlPlanes => apis.tenant_control_plane(),
        _ => None,
    };
    let Some(ar) = ar else {
        return Ok(Vec::new());
    };
    kclient::api::list_names(&conn, &ar, conn.list_namespace()).await
}

/// The answer to one `__complete` call on `root`: candidates and directive. Live lookups
/// that fail answer no candidates with the error directive (the shell shows nothing).
pub async fn answer(root: &Command, words: &[String]) -> (Vec<String>, u32) {
    let mut root = root.clone();
    root.build();
    let words: Vec<String> = if words.is_empty() {
        vec![String::new()]
    } else {
        words.to_vec()
    };
    match plan(&root, &words) {
        Answer::Static(c, d) => (c, d),
        Answer::Files => (Vec::new(), DIRECTIVE_DEFAULT),
        Answer::Live {
            live,
            prefix,
            insert,
        } => {
            let flags = kube_flags(&words[..words.len().saturating_sub(1)]);
            match live_names(live, &flags).await {
                Ok(names) => (
                    names
                        .into_iter()
                        .filter(|n| n.starts_with(&prefix))
                        .map(|n| format!("{insert}{n}"))
                        .collect(),
                    DIRECTIVE_NO_FILE_COMP,
                ),
                Err(e) => {
                    tracing::debug!("completion failed: {e}");
                    (Vec::new(), DIRECTIVE_ERROR)
                }
            }
        }
    }
}

/// Runs the hidden `__complete` verb: prints the [`answer`].
pub async fn run(root: &Command, args: &CompleteArgs) -> Result<(), Error> {
    let (candidates, directive) = answer(root, &args.words).await;
    kclient::render::completions(&candidates, directive);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{Parser, Subcommand};

    #[derive(Parser)]
    #[command(disable_help_subcommand = true)]
    struct Cli {
        #[command(flatten)]
        log: crate::flags::LogFlags,
        #[command(subcommand)]
        verb: Verb,
    }
    #[allow(clippy::large_enum_variant)] // parsed once per test
    #[derive(Subcommand)]
    enum Verb {
        Describe {
            #[arg(value_name = "CLUSTER")]
            name: Option<String>,
            #[command(flatten)]
            kube: KubeFlags,
            #[command(flatten)]
            out: crate::flags::OutputFlags,
        },
        Completion {
            #[arg(value_enum)]
            shell: clap_complete::Shell,
        },
        #[command(name = "__complete", hide = true)]
        Complete(CompleteArgs),
    }

    fn w(words: &[&str]) -> Vec<String> {
        words.iter().map(|s| s.to_string()).collect()
    }

    fn root() -> Command {
        use clap::CommandFactory;
        let mut c = Cli::command();
        c.build();
        c
    }

    #[test]
    fn verbs_flags_and_values() {
        let r = root();
        assert_eq!(
            plan(&r, &w(&[""])),
            Answer::Static(vec!["completion".into(), "describe".into()], 4)
        );
        assert_eq!(
            plan(&r, &w(&["de"])),
            Answer::Static(vec!["describe".into()], 4)
        );
        match plan(&r, &w(&["describe", "--no"])) {
            Answer::Static(f, 4) => assert_eq!(f, vec!["--no-headers"]),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            plan(&r, &w(&["describe", "-o", "j"])),
            Answer::Static(
                vec!["json".into(), "jsonpath=".into(), "jsonpath-file=".into()],
                4
            )
        );
        assert_eq!(
            plan(&r, &w(&["describe", "--color=al"])),
            Answer::Static(vec!["--color=always".into()], 4)
        );
        assert_eq!(
            plan(&r, &w(&["completion", "z"])),
            Answer::Static(vec!["zsh".into()], 4)
        );
        assert_eq!(
            plan(&r, &w(&["describe", "--kubeconfig", ""])),
            Answer::Files
        );
    }

    #[test]
    fn value_names_say_which_live_names_complete() {
        for (name, live) in [
            ("CLUSTER", Some(Live::Clusters)),
            ("TARGET", Some(Live::Targets)),
            ("FILE", None),
        ] {
            assert_eq!(Live::from_value_name(name), live, "{name}");
        }
    }

    #[test]
    fn live_positionals_and_flag_values() {
        let r = root();
        assert_eq!(
            plan(&r, &w(&["describe", "-n", "prod", "web"])),
            Answer::Live {
                live: Live::Clusters,
                prefix: "web".into(),
                insert: String::new()
            }
        );
        assert_eq!(
            plan(&r, &w(&["describe", "-n", ""])),
            Answer::Live {
                live: Live::Namespaces,
                prefix: String::new(),
                insert: String::new()
            }
        );
        assert_eq!(
            plan(&r, &w(&["describe", "--context=te"])),
            Answer::Live {
                live: Live::Contexts,
                prefix: "te".into(),
                insert: "--context=".into()
            }
        );
        // The positional is taken: nothing more to offer.
        assert_eq!(
            plan(&r, &w(&["describe", "web-1", ""])),
            Answer::Static(vec![], 4)
        );
    }

    #[test]
    fn connection_flags_are_picked_out_leniently() {
        let f = kube_flags(&w(&[
            "describe",
            "--kubeconfig",
            "/tmp/kc",
            "-nprod",
            "--context=ctx",
            "-A",
            "--bogus",
            "x",
        ]));
        assert_eq!(
            f.kubeconfig.as_deref(),
            Some(std::path::Path::new("/tmp/kc"))
        );
        assert_eq!(f.namespace.as_deref(), Some("prod"));
        assert_eq!(f.context.as_deref(), Some("ctx"));
        assert!(f.all_namespaces);
    }
}
