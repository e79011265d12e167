//! The flags of the one kubeconfig surface both plugins share: `kubectl capi kubeconfig
//! CLUSTER` and `kubectl kamaji kubeconfig get CONTROL_PLANE` flatten [`KubeconfigFlags`] and
//! hand [`KubeconfigFlags::delivery`] to `kclient::kubeconfig::deliver`, so the two take the same
//! flags, print the same hints and merge the same way.
//!
//! - `-o yaml|json`, as kubectl: the kubeconfig as stored (default), or as JSON.
//! - `--write-to FILE`: clusterctl's name (`generate cluster --write-to`) for "into a file".
//! - `--merge[=FILE]`, `--context-name`, `--set-current`, `--force`: into your kubeconfig.
//!
//! Old spellings stay accepted, hidden, so scripts keep working: `--output FILE` (an earlier
//! `kubectl capi kubeconfig` took a file there; a value with a `/` or a `.` that is not a
//! format is still a file, with a warning), `--output-file FILE`, `--merge-into FILE` and
//! `--merge-file FILE` (with `--merge`), `--switch` (for `--set-current`).

use std::path::PathBuf;

use clap::Args;
use clap::builder::TypedValueParser;
use kclient::error::Error;
use kclient::kubeconfig::{Delivery, KubeconfigFormat};

/// `-o` of the kubeconfig verbs: a format, or (old spelling) a file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum KubeconfigOutput {
    #[default]
    Yaml,
    Json,
    /// `--output FILE`, as an earlier `kubectl capi kubeconfig` took it.
    LegacyFile(PathBuf),
}

/// kubectl's `-o` formats that make no sense for a kubeconfig here: refused with a pointer at
/// what works, rather than taken for a file name.
const KUBECTL_FORMATS: [&str; 10] = [
    "jsonpath",
    "jsonpath-file",
    "jsonpath-as-json",
    "go-template",
    "go-template-file",
    "template",
    "templatefile",
    "custom-columns",
    "custom-columns-file",
    "name",
];

fn parse_output(s: &str) -> Result<KubeconfigOutput, String> {
    match s {
        "yaml" => return Ok(KubeconfigOutput::Yaml),
        "json" => return Ok(KubeconfigOutput::Json),
        _ => {}
    }
    let head = s.split('=').next().unwrap_or_default();
    if KUBECTL_FORMATS.contains(&head) || ["wide", "table", "kyaml"].contains(&s) {
        return Err(format!(
            "a kubeconfig prints as yaml or json; use -o yaml, -o json, or kubectl config view -o {head} on a file written with --write-to"
        ));
    }
    if s.contains('/') || s.contains('.') {
        return Ok(KubeconfigOutput::LegacyFile(PathBuf::from(s)));
    }
    Err("use -o yaml or -o json; to write a file, --write-to FILE".into())
}

/// The kubeconfig flags. Flatten into a verb next to [`crate::KubeFlags`]; argument ids carry a
/// `kc-` prefix.
#[derive(Args, Clone, Debug, Default)]
#[command(next_help_heading = "Kubeconfig")]
pub struct KubeconfigFlags {
    /// Print format: yaml (the kubeconfig as stored) or json
    #[arg(
        id = "kc-output",
        short = 'o',
        long = "output",
        value_name = "FORMAT",
        value_parser = parse_output,
        default_value = "yaml",
        conflicts_with = "kc-merge"
    )]
    pub output: KubeconfigOutput,
    /// Write the kubeconfig to FILE (mode 0600, replaced atomically) instead of printing it
    #[arg(
        id = "kc-write_to",
        long = "write-to",
        alias = "output-file",
        value_name = "FILE",
        value_hint = clap::ValueHint::FilePath,
        conflicts_with = "kc-merge"
    )]
    pub write_to: Option<PathBuf>,
    /// Merge the cluster, user and context into your kubeconfig: FILE (--merge=FILE), else the first file of KUBECONFIG, else ~/.kube/config; atomic, 0600, previous file kept as <file>.bak, existing entries never overwritten unless --force
    #[arg(
        id = "kc-merge",
        long = "merge",
        value_name = "FILE",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "",
        // Not clap's PathBuf parser, which refuses the empty missing value.
        value_parser = clap::builder::OsStringValueParser::new().map(PathBuf::from),
        value_hint = clap::ValueHint::FilePath
    )]
    pub merge: Option<PathBuf>,
    /// Old spellings of --merge=FILE (with --merge)
    #[arg(
        id = "kc-merge_file",
        long = "merge-file",
        alias = "merge-into",
        value_name = "FILE",
        hide = true,
        requires = "kc-merge"
    )]
    pub merge_file: Option<PathBuf>,
    /// With --merge: the context's name (default NAME-admin@NAME, as Cluster API names it)
    #[arg(
        id = "kc-context_name",
        long = "context-name",
        value_name = "NAME",
        requires = "kc-merge"
    )]
    pub context_name: Option<String>,
    /// With --merge: make the merged context the current one
    #[arg(
        id = "kc-set_current",
        long = "set-current",
        alias = "switch",
        requires = "kc-merge"
    )]
    pub set_current: bool,
    /// With --merge: replace clusters, users and contexts of the same names
    #[arg(id = "kc-force", long = "force", requires = "kc-merge")]
    pub force: bool,
}

impl KubeconfigFlags {
    /// What the flags ask for; a contradiction is a usage error (exit 2), found before any
    /// request.
    pub fn delivery(&self) -> Result<Delivery, Error> {
        let format = match &self.output {
            KubeconfigOutput::Json => KubeconfigFormat::Json,
            _ => KubeconfigFormat::Yaml,
        };
        if let Some(merge) = &self.merge {
            let inline = (!merge.as_os_str().is_empty()).then(|| merge.clone());
            let file = match (inline, &self.merge_file) {
                (Some(a), Some(b)) if a != *b => {
                    return Err(Error::Usage {
                        message: format!(
                            "--merge={} and --merge-file {} name two files",
                            a.display(),
                            b.display()
                        ),
                        hint: Some("name one: --merge=FILE".into()),
                    });
                }
                (a, b) => a.or_else(|| b.clone()),
            };
            if let Some(c) = &self.context_name
                && (c.is_empty() || c.chars().any(|ch| ch.is_whitespace() || ch.is_control()))
            {
                return Err(Error::Usage {
                    message: format!("--context-name {c:?} is empty or has spaces"),
                    hint: Some("use a name such as prod-admin@prod".into()),
                });
            }
            return Ok(Delivery::Merge {
                file,
                context_name: self.context_name.clone(),
                set_current: self.set_current,
                force: self.force,
            });
        }
        match (&self.output, &self.write_to) {
            (KubeconfigOutput::LegacyFile(a), Some(b)) => Err(Error::Usage {
                message: format!(
                    "--output {} and --write-to {} name two files",
                    a.display(),
                    b.display()
                ),
                hint: Some("name one: --write-to FILE".into()),
            }),
            (KubeconfigOutput::LegacyFile(path), None) => Ok(Delivery::Write {
                path: path.clone(),
                format,
                legacy_flag: Some("--output"),
            }),
            (_, Some(path)) => Ok(Delivery::Write {
                path: path.clone(),
                format,
                legacy_flag: None,
            }),
            (_, None) => Ok(Delivery::Print { format }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, Parser};

    #[derive(Parser, Debug)]
    struct Verb {
        #[arg(value_name = "CLUSTER")]
        cluster: String,
        #[command(flatten)]
        kc: KubeconfigFlags,
        #[command(flatten)]
        kube: crate::KubeFlags,
    }

    fn parse(args: &[&str]) -> Result<Delivery, String> {
        let mut all = vec!["x"];
        all.extend_from_slice(args);
        let v = Verb::try_parse_from(all).map_err(|e| e.to_string())?;
        v.kc.delivery().map_err(|e| e.to_string())
    }

    fn merge(file: Option<&str>, ctx: Option<&str>, set_current: bool, force: bool) -> Delivery {
        Delivery::Merge {
            file: file.map(PathBuf::from),
            context_name: ctx.map(str::to_string),
            set_current,
            force,
        }
    }

    #[test]
    fn the_command_is_well_formed() {
        Verb::command().debug_assert();
    }

    #[test]
    fn formats_print() {
        let print = |format| Ok(Delivery::Print { format });
        assert_eq!(parse(&["c"]), print(KubeconfigFormat::Yaml));
        assert_eq!(parse(&["c", "-o", "yaml"]), print(KubeconfigFormat::Yaml));
        assert_eq!(parse(&["c", "-o", "json"]), print(KubeconfigFormat::Json));
        assert_eq!(parse(&["c", "-ojson"]), print(KubeconfigFormat::Json));
        assert_eq!(
            parse(&["c", "--output=json"]),
            print(KubeconfigFormat::Json)
        );
    }

    #[test]
    fn files_are_written_under_every_spelling() {
        let write = |p: &str, format, legacy_flag| {
            Ok(Delivery::Write {
                path: PathBuf::from(p),
                format,
                legacy_flag,
            })
        };
        assert_eq!(
            parse(&["c", "--write-to", "a.yaml"]),
            write("a.yaml", KubeconfigFormat::Yaml, None)
        );
        assert_eq!(
            parse(&["c", "--write-to", "a.json", "-o", "json"]),
            write("a.json", KubeconfigFormat::Json, None)
        );
        assert_eq!(
            parse(&["c", "--output-file", "a"]),
            write("a", KubeconfigFormat::Yaml, None)
        );
        assert_eq!(
            parse(&["c", "--output", "/tmp/c1"]),
            write("/tmp/c1", KubeconfigFormat::Yaml, Some("--output"))
        );
        assert_eq!(
            parse(&["c", "--output", "c1.kubeconfig"]),
            write("c1.kubeconfig", KubeconfigFormat::Yaml, Some("--output"))
        );
    }

    #[test]
    fn merges_under_every_spelling() {
        assert_eq!(
            parse(&["c", "--merge"]),
            Ok(merge(None, None, false, false))
        );
        assert_eq!(
            parse(&["--merge", "c"]),
            Ok(merge(None, None, false, false)),
            "--merge takes its FILE only after ="
        );
        assert_eq!(
            parse(&["c", "--merge=/k/config", "--set-current", "--force"]),
            Ok(merge(Some("/k/config"), None, true, true))
        );
        assert_eq!(
            parse(&["c", "--merge", "--merge-into", "/k/a", "--switch"]),
            Ok(merge(Some("/k/a"), None, true, false))
        );
        assert_eq!(
            parse(&[
                "c",
                "--merge",
                "--merge-file",
                "/k/b",
                "--context-name",
                "x@y"
            ]),
            Ok(merge(Some("/k/b"), Some("x@y"), false, false))
        );
        assert_eq!(
            parse(&["c", "--merge=/k/b", "--merge-file", "/k/b"]),
            Ok(merge(Some("/k/b"), None, false, false))
        );
    }

    #[test]
    fn contradictions_are_refused() {
        for (args, want) in [
            (&["c", "--merge-into", "x"][..], "--merge"),
            (&["c", "--switch"], "--merge"),
            (&["c", "--set-current"], "--merge"),
            (&["c", "--force"], "--merge"),
            (&["c", "--context-name", "a"], "--merge"),
            (
                &["c", "--output", "x.yaml", "--merge"],
                "cannot be used with",
            ),
            (&["c", "-o", "json", "--merge"], "cannot be used with"),
            (&["c", "--write-to", "f", "--merge"], "cannot be used with"),
            (&["c", "--merge=/a", "--merge-file", "/b"], "two files"),
            (&["c", "--output", "a.yaml", "--write-to", "b"], "two files"),
            (&["c", "-o", "jsn"], "use -o yaml or -o json"),
            (&["c", "-o", "wide"], "yaml or json"),
            (&["c", "-o", "jsonpath={.clusters[0].name}"], "yaml or json"),
            (&["c", "--merge", "--context-name", "a b"], "--context-name"),
        ] {
            let got = parse(args);
            assert!(
                got.as_ref().is_err_and(|e| e.contains(want)),
                "{args:?}: {got:?}"
            );
        }
    }
}
