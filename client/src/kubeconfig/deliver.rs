//! Where a fetched kubeconfig goes (`kubectl capi kubeconfig`, `kubectl kamaji kubeconfig get`):
//! printed, written to a file of its own, or merged into the user's kubeconfig.

use std::path::{Path, PathBuf};

use super::{
    MergeOptions, MergeReport, default_merge_file, merge_into_file, parse, rename, write_atomic,
};
use crate::error::Error;

/// Where a fetched kubeconfig goes: the one behaviour of `kubectl capi kubeconfig` and
/// `kubectl kamaji kubeconfig get` (their flags parse into this in `cli`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Delivery {
    /// On stdout: the kubeconfig as stored (`yaml`) or as JSON.
    Print { format: KubeconfigFormat },
    /// Into a file of its own (mode 0600, replaced atomically). `legacy_flag` names the old
    /// spelling that asked for it, to warn about.
    Write {
        path: PathBuf,
        format: KubeconfigFormat,
        legacy_flag: Option<&'static str>,
    },
    /// Merged into a kubeconfig file (see [`merge_into_file`]); `file` None is
    /// [`default_merge_file`].
    Merge {
        file: Option<PathBuf>,
        context_name: Option<String>,
        set_current: bool,
        force: bool,
    },
}

/// `-o` of the kubeconfig verbs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum KubeconfigFormat {
    /// The kubeconfig text exactly as the Secret holds it (what clusterctl and clastix's
    /// plugin print).
    #[default]
    Yaml,
    Json,
}

/// What to do about a merge conflict, in the flags of [`Delivery`] (the same for both plugins).
pub const CONFLICT_HINT: &str = "pass --force to replace them, --context-name NAME to merge under another name, or --write-to FILE for a kubeconfig of its own";

/// The entry names a merge uses for cluster `name`: cluster `name`, user `name-admin`, context
/// `name-admin@name` (what Cluster API writes in `<cluster>-kubeconfig`, so `kubectl capi
/// delete` finds it again), or `context_name`.
pub fn merge_names(name: &str, context_name: Option<&str>) -> (String, String, String) {
    let context = context_name
        .map(str::to_string)
        .unwrap_or_else(|| format!("{name}-admin@{name}"));
    (name.to_string(), format!("{name}-admin"), context)
}

/// Prints, writes or merges the kubeconfig `text` of cluster `name`, read from `secret`
/// (`namespace/name`, for messages), as `delivery` says. Only the kubeconfig goes to stdout;
/// what a write or merge did goes to stderr. A merge first checks that kubectl can load the
/// Secret's kubeconfig ([`super::usable`]).
pub fn deliver(delivery: &Delivery, name: &str, secret: &str, text: &str) -> Result<(), Error> {
    let formatted = |format: KubeconfigFormat| -> Result<String, Error> {
        let mut out = match format {
            KubeconfigFormat::Yaml => text.to_string(),
            KubeconfigFormat::Json => crate::render::to_json(&parse(text, "the kubeconfig")?)?,
        };
        if !out.ends_with('\n') {
            out.push('\n');
        }
        Ok(out)
    };
    match delivery {
        Delivery::Print { format } => {
            crate::render::raw(formatted(*format)?.as_bytes());
            Ok(())
        }
        Delivery::Write {
            path,
            format,
            legacy_flag,
        } => {
            if let Some(flag) = legacy_flag {
                crate::render::warn(&format!(
                    "{flag} FILE is the old spelling of --write-to FILE (-o now takes a format, as in kubectl)"
                ));
            }
            write_atomic(path, formatted(*format)?.as_bytes(), false)?;
            crate::render::info(&format!(
                "wrote the kubeconfig of {name} to {}",
                path.display()
            ));
            Ok(())
        }
        Delivery::Merge {
            file,
            context_name,
            set_current,
            force,
        } => {
            let file = merge_file(file.clone(), "--merge")?;
            let opts = MergeOptions {
                force: *force,
                set_current: *set_current,
                conflict_hint: CONFLICT_HINT,
            };
            merge_fetched(&file, name, secret, text, context_name.as_deref(), opts)
        }
    }
}

/// The file a merge writes to: `file`, else [`default_merge_file`]; `flag` is the flag that
/// names one (`--merge`: the hint says `--merge=FILE`).
pub fn merge_file(file: Option<PathBuf>, flag: &str) -> Result<PathBuf, Error> {
    file.or_else(default_merge_file)
        .ok_or_else(|| Error::Usage {
            message: "cannot tell where your kubeconfig is: neither KUBECONFIG nor HOME is set"
                .into(),
            hint: Some(format!("pass {flag}=FILE")),
        })
}

/// Merges the kubeconfig `text` of cluster `name`, read from `secret` (`namespace/name`, for
/// messages), into `file` under the [`merge_names`] of `name` (or `context_name`), as
/// [`Delivery::Merge`] does for the kubeconfig verbs and `kubectl kamaji create
/// --merge-kubeconfig` does for a new cluster (`opts.conflict_hint` in the caller's flags), and
/// says on stderr what it did. First checks that kubectl can load the Secret's kubeconfig
/// ([`super::usable`]).
pub fn merge_fetched(
    file: &Path,
    name: &str,
    secret: &str,
    text: &str,
    context_name: Option<&str>,
    opts: MergeOptions,
) -> Result<(), Error> {
    super::usable(text).map_err(|why| Error::Other {
        message: format!(
            "Secret {secret} holds a kubeconfig kubectl cannot load: {why}; nothing was changed"
        ),
        hint: Some(
            "its writer (the control-plane provider) must fix it; --write-to FILE or no flag shows it as it is"
                .into(),
        ),
    })?;
    let fetched = parse(text, &format!("Secret {secret}"))?;
    let (cluster, user, context) = merge_names(name, context_name);
    let renamed = rename(&fetched, &cluster, &user, &context)?;
    let report = merge_into_file(file, &renamed, opts)?;
    crate::render::info(&merge_message(&report));
    Ok(())
}

/// The message after a merge, like kubectl's `config` verbs.
pub fn merge_message(r: &MergeReport) -> String {
    let mut parts = Vec::new();
    if !r.added.is_empty() {
        parts.push(format!("added {}", r.added.join(", ")));
    }
    if !r.replaced.is_empty() {
        parts.push(format!("replaced {}", r.replaced.join(", ")));
    }
    if parts.is_empty() {
        parts.push("already up to date".into());
    }
    let mut s = format!(
        "merged context \"{}\" into {}: {}",
        r.context,
        r.file,
        parts.join("; ")
    );
    if let Some(b) = &r.backup {
        s.push_str(&format!(" (previous file kept as {b})"));
    }
    if r.current_context_set {
        s.push_str(&format!("; current context is now \"{}\"", r.context));
    } else {
        s.push_str(&format!(
            "; use it with kubectl config use-context {}",
            r.context
        ));
    }
    s
}
