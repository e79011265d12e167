//! `completion install`'s plan (pure): the kubectl completion shim (`kubectl_complete-<plugin>`) and what to do
//! with whatever already sits at its path.
//!
//! kubectl (1.26 and later) completes `kubectl <plugin> …` by running an executable named
//! `kubectl_complete-<plugin>` found on PATH (kubectl's `cmd/kubectl/plugin_completion.go`). krew
//! installs a plugin into a versioned store (`store/<plugin>/<version>/`) and links only the
//! plugin's `bin` into `bin/`; `krew upgrade` deletes the old store directory. A shim linked from
//! the store (what our caveats used to say) therefore dangles after every upgrade. The shim written
//! here is a file of its own in the directory that holds the plugin's link (krew's `bin/`, which is
//! on PATH and which krew re-points on upgrade), and it calls the plugin next to it, so it keeps
//! working across upgrades.

/// The line that marks a shim as ours, so a later install may replace it without `--force`.
pub const SHIM_MARKER: &str = "# written by `kubectl <plugin> completion install`";

/// The shim's file name: `kubectl_complete-capi`.
pub fn shim_name(plugin: &str) -> String {
    format!("kubectl_complete-{plugin}")
}

/// The shim for `plugin` (`capi`), a POSIX sh script. It runs the plugin in its own directory if
/// there is one (krew's `bin/` link, re-pointed by every `krew upgrade`), else the one on PATH.
pub fn shim_script(plugin: &str) -> String {
    let exe = format!("kubectl-{plugin}");
    format!(
        "#!/bin/sh\n\
         {SHIM_MARKER}\n\
         # kubectl (>= 1.26) runs it to complete `kubectl {plugin} ...`: the plugin answers with one\n\
         # candidate a line and a final `:<directive>` line. It calls the {exe} next to it (krew's\n\
         # bin/ link, which `kubectl krew upgrade` re-points), so it survives upgrades.\n\
         here=$(dirname \"$0\")\n\
         if [ -x \"$here/{exe}\" ]; then exec \"$here/{exe}\" __complete \"$@\"; fi\n\
         exec {exe} __complete \"$@\"\n"
    )
}

/// What is at the shim's path before an install.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Existing {
    Nothing,
    /// A symbolic link (to anything, or dangling): what the old caveats told users to create
    /// (`ln -s …/store/<plugin>/<version>/kubectl_complete-<plugin> …/bin/`).
    Symlink {
        target: String,
    },
    /// A regular file with these contents (lossily decoded).
    File {
        contents: String,
    },
    /// A directory or something else that is not a file.
    Other,
}

/// What `completion install` does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ShimAction {
    Create,
    /// Replace an older shim of ours, or a link to a completion shim (the old set-up).
    Replace {
        why: &'static str,
    },
    /// The same shim is already there.
    Unchanged,
}

/// Why `completion install` refuses; the message names the way out.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ShimRefusal(pub String);

/// Decides what to do at `path` (shown in messages) for `plugin`, given what is there.
pub fn plan_shim(
    plugin: &str,
    path: &str,
    existing: &Existing,
    force: bool,
) -> Result<ShimAction, ShimRefusal> {
    let new = shim_script(plugin);
    let name = shim_name(plugin);
    match existing {
        Existing::Nothing => Ok(ShimAction::Create),
        Existing::File { contents } if *contents == new => Ok(ShimAction::Unchanged),
        Existing::File { contents } if contents.contains(SHIM_MARKER) => Ok(ShimAction::Replace {
            why: "an older shim of ours",
        }),
        // A link named like the shim and pointing at a file named like it is the old krew
        // set-up; replacing it is the point of this verb.
        Existing::Symlink { target } if target.ends_with(&name) => Ok(ShimAction::Replace {
            why: "a link to a completion shim (it dangles after krew upgrade)",
        }),
        _ if force => Ok(ShimAction::Replace {
            why: "an existing file (--force)",
        }),
        Existing::Other => Err(ShimRefusal(format!(
            "{path} exists and is not a file; remove it, or pass --dir DIR to install elsewhere"
        ))),
        Existing::Symlink { target } => Err(ShimRefusal(format!(
            "{path} is a link to {target}, which is not a completion shim; remove it or pass --force to replace it"
        ))),
        Existing::File { .. } => Err(ShimRefusal(format!(
            "{path} exists and was not written by `kubectl {plugin} completion install`; remove it or pass --force to replace it"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shim_calls_the_plugin_next_to_it_then_on_path() {
        let s = shim_script("capi");
        assert!(s.starts_with("#!/bin/sh\n"));
        assert!(s.contains(SHIM_MARKER));
        assert!(s.contains(r#"exec "$here/kubectl-capi" __complete "$@""#));
        assert!(s.ends_with("exec kubectl-capi __complete \"$@\"\n"));
    }

    #[test]
    fn decisions() {
        let p = "/k/bin/kubectl_complete-capi";
        let plan = |e: &Existing, force| plan_shim("capi", p, e, force);
        assert_eq!(plan(&Existing::Nothing, false), Ok(ShimAction::Create));
        let same = Existing::File {
            contents: shim_script("capi"),
        };
        assert_eq!(plan(&same, false), Ok(ShimAction::Unchanged));
        let older = Existing::File {
            contents: format!("#!/bin/sh\n{SHIM_MARKER}\nexec old\n"),
        };
        assert!(matches!(
            plan(&older, false),
            Ok(ShimAction::Replace { .. })
        ));
        let old_link = Existing::Symlink {
            target: "/k/store/capi/v0.1.0/kubectl_complete-capi".into(),
        };
        assert!(matches!(
            plan(&old_link, false),
            Ok(ShimAction::Replace { .. })
        ));
        let foreign = Existing::File {
            contents: "#!/bin/sh\necho mine\n".into(),
        };
        let e = plan(&foreign, false).unwrap_err().0;
        assert!(
            e.contains("was not written by") && e.contains("--force"),
            "{e}"
        );
        assert!(matches!(
            plan(&foreign, true),
            Ok(ShimAction::Replace { .. })
        ));
        let link = Existing::Symlink {
            target: "/usr/bin/true".into(),
        };
        assert!(plan(&link, false).unwrap_err().0.contains("/usr/bin/true"));
        assert!(
            plan(&Existing::Other, false)
                .unwrap_err()
                .0
                .contains("--dir")
        );
    }
}
