//! Verbs both plugins share: `version` and `completion`. Each binary exposes them as its own
//! verb modules.

pub mod version {
    //! `version`: the client version and what discovery found on the server.

    use clap::Args as ClapArgs;
    use serde::Serialize;

    use crate::flags::{KubeFlags, OutputFlags};
    use crate::harness::Program;
    use kclient::discovery::{ProviderInfo, ServerApis};
    use kclient::error::{Error, Op};
    use kclient::render::{Cell, Fields, Human, Printer, Render, Tone};
    use kcore::groups::{CONTROLPLANE_GROUP, INFRASTRUCTURE_GROUP, KAMAJI_GROUP};

    #[derive(ClapArgs, Clone, Debug, Default)]
    pub struct Args {
        /// Print only the client version (no server access)
        #[arg(long)]
        pub client: bool,
        #[command(flatten)]
        pub kube: KubeFlags,
        #[command(flatten)]
        pub output: OutputFlags,
    }

    #[derive(Serialize, Clone, Debug)]
    #[serde(rename_all = "camelCase")]
    pub struct ClientVersion {
        pub name: String,
        pub version: String,
        /// The pinned set `kubectl capi init` installs (`kcore::init::set`), in install order.
        pub init_set: Vec<SetMember>,
    }

    /// One component of the init set.
    #[derive(Serialize, Clone, Debug)]
    pub struct SetMember {
        pub component: String,
        pub version: String,
    }

    #[derive(Serialize, Clone, Debug, Default)]
    #[serde(rename_all = "camelCase")]
    pub struct ServerVersion {
        pub context: String,
        pub url: String,
        pub kubernetes_version: Option<String>,
        /// cluster.x-k8s.io: `version` is the CAPI core version used (v1beta2 on CAPI ≥ 1.11).
        #[serde(rename = "clusterAPI")]
        pub cluster_api: Option<ProviderInfo>,
        /// KamajiControlPlane (controlplane.cluster.x-k8s.io).
        pub kamaji_control_plane: Option<ProviderInfo>,
        /// TenantControlPlane (kamaji.clastix.io).
        pub kamaji: Option<ProviderInfo>,
        /// ByoHost (infrastructure.cluster.x-k8s.io).
        pub byoh: Option<ProviderInfo>,
    }

    #[derive(Serialize, Clone, Debug)]
    #[serde(rename_all = "camelCase")]
    pub struct VersionReport {
        pub client_version: ClientVersion,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub server: Option<ServerVersion>,
    }

    fn describe(p: &Option<ProviderInfo>) -> Cell {
        match p {
            None => Cell::new("not installed", Tone::Dim),
            Some(p) => {
                let mut extra = Vec::new();
                if p.served.len() > 1 {
                    extra.push(format!("served: {}", p.served.join(", ")));
                }
                if let Some(c) = &p.contract {
                    extra.push(format!("contract {c}"));
                }
                let text = if extra.is_empty() {
                    format!("{}/{}", p.group, p.version)
                } else {
                    format!("{}/{} ({})", p.group, p.version, extra.join("; "))
                };
                Cell::new(text, Tone::Good)
            }
        }
    }

    impl Render for VersionReport {
        fn human(&self) -> Human {
            let mut f = Fields::new();
            f.add(
                "Client Version",
                format!(
                    "{} v{}",
                    self.client_version.name, self.client_version.version
                ),
            );
            let set: Vec<String> = self
                .client_version
                .init_set
                .iter()
                .map(|m| format!("{} {}", m.component, m.version))
                .collect();
            f.add("Init Set", set.join(", "));
            if let Some(s) = &self.server {
                f.add("Server", format!("{} (context \"{}\")", s.url, s.context));
                if let Some(v) = &s.kubernetes_version {
                    f.add("Kubernetes Version", v.as_str());
                }
                f.add("Cluster API", describe(&s.cluster_api));
                f.add("KamajiControlPlane", describe(&s.kamaji_control_plane));
                f.add("Kamaji", describe(&s.kamaji));
                f.add("BYOH", describe(&s.byoh));
            }
            Human::Fields(f)
        }
    }

    /// Runs `version`. Prints what it found, then fails (exit 1) when the server cannot be
    /// reached, refuses, or has no Cluster API.
    pub async fn run(program: &Program, args: &Args) -> Result<(), Error> {
        let printer = Printer::new(&args.output);
        let client_version = ClientVersion {
            name: program.executable(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            init_set: kcore::init::set::COMPONENTS
                .iter()
                .map(|c| SetMember {
                    component: c.id.to_string(),
                    version: c.version.to_string(),
                })
                .collect(),
        };
        if args.client {
            return printer.print(&VersionReport {
                client_version,
                server: None,
            });
        }
        let server = async {
            let conn = args.kube.connect().await?;
            let info = conn
                .client
                .apiserver_version()
                .await
                .map_err(|e| conn.error(e, &Op::discovery()))?;
            let apis = ServerApis::discover(&conn).await?;
            let report = ServerVersion {
                context: conn.context.clone(),
                url: conn.server.clone(),
                kubernetes_version: Some(info.git_version),
                cluster_api: apis.capi_info(),
                kamaji_control_plane: apis.provider_info(CONTROLPLANE_GROUP, "KamajiControlPlane"),
                kamaji: apis.provider_info(KAMAJI_GROUP, "TenantControlPlane"),
                byoh: apis.provider_info(INFRASTRUCTURE_GROUP, "ByoHost"),
            };
            Ok::<_, Error>((report, apis))
        }
        .await;
        match server {
            Err(e) => {
                // Like kubectl version: the client part, then the error.
                if !matches!(
                    args.output.output,
                    kclient::render::OutputFormat::Json | kclient::render::OutputFormat::Yaml
                ) {
                    printer.print(&VersionReport {
                        client_version,
                        server: None,
                    })?;
                }
                Err(e)
            }
            Ok((report, apis)) => {
                printer.print(&VersionReport {
                    client_version,
                    server: Some(report),
                })?;
                apis.require_capi()?;
                apis.require_contracts()
            }
        }
    }
}

pub mod completion {
    //! `completion bash|zsh|fish`: shell completion scripts for the executable itself.

    use clap::Args as ClapArgs;

    use crate::harness::Program;
    use kclient::error::Error;

    /// What `completion` prints or does: a shell's script, or `install` for kubectl's shim.
    #[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
    pub enum CompletionTarget {
        Bash,
        Zsh,
        Fish,
        Powershell,
        Elvish,
        /// Write the kubectl_complete-<plugin> shim next to the plugin on PATH (krew's bin/)
        Install,
    }

    #[derive(ClapArgs, Clone, Debug)]
    #[command(
        after_help = "Inside kubectl (`kubectl capi <TAB>`), completion goes through kubectl's plugin \
completion protocol instead (kubectl 1.26 and later): `completion install` writes the \
kubectl_complete-<plugin> shim into the directory kubectl found the plugin in (krew's bin/), where \
it calls the plugin's own link and so keeps working after `kubectl krew upgrade`. It calls the \
hidden `__complete` verb, which also offers live names (clusters, hosts, control planes) from the \
current context."
    )]
    pub struct Args {
        /// The shell whose script to print, or `install` to write kubectl's completion shim
        #[arg(value_enum, value_name = "SHELL|install")]
        pub shell: CompletionTarget,
        /// With install: the directory for the shim (default: the one holding the plugin on PATH)
        #[arg(long, value_name = "DIR")]
        pub dir: Option<std::path::PathBuf>,
        /// With install: replace a file at the shim's path that is not ours
        #[arg(long, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
        pub force: Option<bool>,
    }

    /// bash: asks the executable for candidates (`__complete`, kubectl's plugin completion
    /// protocol: one candidate a line, `name<TAB>description` allowed, then `:<directive>`), so
    /// cluster, host and control-plane names come live from the current context.
    const BASH: &str = r#"# bash completion for @EXE@: candidates, live names included, come from `@EXE@ __complete`.
_@FUNC@() {
    local cur="${COMP_WORDS[COMP_CWORD]}" out directive line
    out=$(@EXE@ __complete "${COMP_WORDS[@]:1:COMP_CWORD-1}" "$cur" 2>/dev/null) || return 0
    directive=$(printf '%s\n' "$out" | tail -n 1)
    directive=${directive#:}
    [[ "$directive" =~ ^[0-9]+$ ]] || directive=0
    (( directive & 1 )) && return 0
    (( directive & 2 )) && compopt -o nospace 2>/dev/null
    COMPREPLY=()
    while IFS= read -r line; do
        [[ -n "$line" ]] && COMPREPLY+=("${line%%$'\t'*}")
    done < <(printf '%s\n' "$out" | sed '$d')
    if (( ${#COMPREPLY[@]} == 0 )) && (( ! (directive & 4) )); then
        mapfile -t COMPREPLY < <(compgen -f -- "$cur")
    fi
    return 0
}
complete -F _@FUNC@ @EXE@
"#;

    /// zsh: the same protocol, with descriptions.
    const ZSH: &str = r#"#compdef @EXE@
# zsh completion for @EXE@: candidates, live names included, come from `@EXE@ __complete`.
_@FUNC@() {
    local out directive
    local -a lines cands
    out=$(@EXE@ __complete "${(@)words[2,CURRENT-1]}" "${words[CURRENT]}" 2>/dev/null) || return 1
    lines=("${(@f)out}")
    directive=${lines[-1]#:}
    lines=("${(@)lines[1,-2]}")
    [[ "$directive" == <-> ]] || directive=0
    (( directive & 1 )) && return 1
    local l
    for l in "${lines[@]}"; do
        [[ -n "$l" ]] && cands+=("${l//$'\t'/:}")
    done
    if (( ${#cands} == 0 )); then
        (( directive & 4 )) || _files
        return
    fi
    if (( directive & 2 )); then
        _describe -t values 'values' cands -S ''
    else
        _describe -t values 'values' cands
    fi
}
compdef _@FUNC@ @EXE@
"#;

    /// fish: the same protocol (fish reads `name<TAB>description` itself).
    const FISH: &str = r#"# fish completion for @EXE@: candidates, live names included, come from `@EXE@ __complete`.
function __@FUNC@
    set -l tokens (commandline -opc)
    set -l cur (commandline -ct)
    set -l out (@EXE@ __complete $tokens[2..-1] $cur 2>/dev/null)
    or return
    set -l directive (string replace -r '^:' '' -- $out[-1])
    set -e out[-1]
    string match -qr '^[0-9]+$' -- $directive; or set directive 0
    if test (math "$directive % 2") -eq 1
        return
    end
    if test (count $out) -eq 0; and test (math "floor($directive / 4) % 2") -eq 0
        __fish_complete_path $cur
        return
    end
    printf '%s\n' $out
end
complete -c @EXE@ -f -a '(__@FUNC@)'
"#;

    /// The script for `shell`, calling `exe`.
    pub fn script(shell: clap_complete::Shell, exe: &str) -> Option<String> {
        let template = match shell {
            clap_complete::Shell::Bash => BASH,
            clap_complete::Shell::Zsh => ZSH,
            clap_complete::Shell::Fish => FISH,
            _ => return None,
        };
        let func: String = exe
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        Some(template.replace("@EXE@", exe).replace("@FUNC@", &func))
    }

    /// Prints the completion script for `program`'s executable: bash, zsh and fish ask the
    /// executable for live candidates; other shells get clap's static script. `install` writes
    /// kubectl's completion shim instead.
    pub fn run(program: &Program, root: &clap::Command, args: &Args) -> Result<(), Error> {
        let shell = match args.shell {
            CompletionTarget::Install => return install(program, args),
            CompletionTarget::Bash => clap_complete::Shell::Bash,
            CompletionTarget::Zsh => clap_complete::Shell::Zsh,
            CompletionTarget::Fish => clap_complete::Shell::Fish,
            CompletionTarget::Powershell => clap_complete::Shell::PowerShell,
            CompletionTarget::Elvish => clap_complete::Shell::Elvish,
        };
        if args.dir.is_some() || args.force.is_some() {
            return Err(Error::usage(
                "--dir and --force go with `completion install`, not with a shell's script",
            ));
        }
        let bin = program.executable();
        if let Some(s) = script(shell, &bin) {
            kclient::render::raw(s.as_bytes());
            return Ok(());
        }
        // The static scripts offer only the visible verbs (clap_complete would include hidden ones).
        let mut cmd = clap::Command::new(program.executable())
            .args(root.get_arguments().cloned())
            .subcommands(root.get_subcommands().filter(|s| !s.is_hide_set()).cloned());
        let mut buf: Vec<u8> = Vec::new();
        clap_complete::generate(shell, &mut cmd, bin, &mut buf);
        kclient::render::raw(&buf);
        Ok(())
    }

    /// `completion install`: parse (the directory) → plan ([`crate::completion_shim::plan_shim`]
    /// over what is at the path) → write atomically → one line.
    fn install(program: &Program, args: &Args) -> Result<(), Error> {
        use crate::completion_shim::{ShimAction, plan_shim, shim_name, shim_script};
        let plugin = &program.plugin;
        let dir = match &args.dir {
            Some(d) => d.clone(),
            None => plugin_dir(plugin).ok_or_else(|| Error::Usage {
                message: format!("cannot tell which directory on PATH holds kubectl-{plugin}"),
                hint: Some(
                    "pass --dir DIR, a directory on your PATH (krew's is ~/.krew/bin)".into(),
                ),
            })?,
        };
        if !dir.is_dir() {
            return Err(Error::Usage {
                message: format!("{} is not a directory", dir.display()),
                hint: Some("pass --dir DIR, an existing directory on your PATH".into()),
            });
        }
        let path = dir.join(shim_name(plugin));
        let existing = existing_at(&path);
        let action = plan_shim(
            plugin,
            &path.display().to_string(),
            &existing,
            args.force.unwrap_or(false),
        )
        .map_err(|r| Error::other(r.0))?;
        let verb = match action {
            ShimAction::Unchanged => "unchanged",
            ShimAction::Create | ShimAction::Replace { .. } => {
                if matches!(existing, crate::completion_shim::Existing::Symlink { .. }) {
                    // persist() would replace the link itself, but remove it first so an
                    // unwritable link target can never be written through.
                    std::fs::remove_file(&path).map_err(|e| {
                        Error::other(format!("cannot remove the link {}: {e}", path.display()))
                    })?;
                }
                kclient::kubeconfig::write_atomic_mode(
                    &path,
                    shim_script(plugin).as_bytes(),
                    false,
                    0o755,
                )?;
                if matches!(action, ShimAction::Create) {
                    "created"
                } else {
                    "replaced"
                }
            }
        };
        kclient::render::line(&format!("completion shim {} {verb}", path.display()));
        if !on_path(&dir) {
            kclient::render::warn(&format!(
                "{} is not on PATH, so kubectl will not find the shim; add it to PATH",
                dir.display()
            ));
        }
        Ok(())
    }

    /// The directory kubectl found the plugin in: kubectl and krew run a plugin by its full
    /// path on PATH (argv[0] is `…/.krew/bin/kubectl-capi`), so that path's directory; run by
    /// a bare name, the first PATH directory holding `kubectl-<plugin>`.
    fn plugin_dir(plugin: &str) -> Option<std::path::PathBuf> {
        let argv0 = std::env::args_os().next()?;
        let argv0 = std::path::Path::new(&argv0);
        if argv0.components().count() > 1 {
            return argv0
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .map(|p| p.to_path_buf());
        }
        let exe = format!("kubectl-{plugin}");
        std::env::split_paths(&std::env::var_os("PATH")?).find(|d| d.join(&exe).is_file())
    }

    fn on_path(dir: &std::path::Path) -> bool {
        let Some(path) = std::env::var_os("PATH") else {
            return false;
        };
        let want = std::fs::canonicalize(dir).ok();
        std::env::split_paths(&path)
            .any(|d| d == dir || (want.is_some() && std::fs::canonicalize(&d).ok() == want))
    }

    /// What is at `path`, without following a link.
    fn existing_at(path: &std::path::Path) -> crate::completion_shim::Existing {
        use crate::completion_shim::Existing;
        // The shim is a few hundred bytes: a bigger file is not ours, and is not read whole.
        const MAX_SHIM_BYTES: u64 = 64 * 1024;
        match std::fs::symlink_metadata(path) {
            Err(_) => Existing::Nothing,
            Ok(m) if m.file_type().is_symlink() => Existing::Symlink {
                target: std::fs::read_link(path)
                    .map(|t| t.display().to_string())
                    .unwrap_or_default(),
            },
            Ok(m) if m.is_file() && m.len() <= MAX_SHIM_BYTES => Existing::File {
                contents: std::fs::read(path)
                    .map(|b| String::from_utf8_lossy(&b).into_owned())
                    .unwrap_or_default(),
            },
            Ok(m) if m.is_file() => Existing::File {
                contents: String::new(),
            },
            Ok(_) => Existing::Other,
        }
    }
}
