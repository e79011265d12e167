//! Verbs both plugins share: `version` and `completion`. Each binary exposes them as its own
//! verb modules.

pub mod version {
    //! `version`: the client version and what discovery found on the server.

    use clap::Args as ClapArgs;
    use serde::Serialize;

    use crate::flags::{KubeFlags, OutputFlags};
    use crate::harness::Program;
    use shared::discovery::{
        CONTROLPLANE_GROUP, INFRASTRUCTURE_GROUP, KAMAJI_GROUP, ProviderInfo, ServerApis,
    };
    use shared::error::{Error, Op};
    use shared::render::{Cell, Fields, Human, Printer, Render, Tone};

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
                    shared::render::OutputFormat::Json | shared::render::OutputFormat::Yaml
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
    use shared::error::Error;

    #[derive(ClapArgs, Clone, Debug)]
    #[command(
        after_help = "Inside kubectl (`kubectl capi <TAB>`), completion goes through kubectl's plugin \
completion protocol instead: put the kubectl_complete-<plugin> shim from completions/ on your PATH. \
It calls the hidden `__complete` verb, which also offers live names (clusters, hosts, control \
planes) from the current context."
    )]
    pub struct Args {
        /// The shell
        #[arg(value_enum, value_name = "SHELL")]
        pub shell: clap_complete::Shell,
    }

    /// Prints the completion script for `program`'s executable.
    pub fn run(program: &Program, root: &clap::Command, args: &Args) -> Result<(), Error> {
        // The scripts offer only the visible verbs (clap_complete would include hidden ones).
        let mut cmd = clap::Command::new(program.executable())
            .args(root.get_arguments().cloned())
            .subcommands(root.get_subcommands().filter(|s| !s.is_hide_set()).cloned());
        let bin = program.executable();
        let mut buf: Vec<u8> = Vec::new();
        clap_complete::generate(args.shell, &mut cmd, bin, &mut buf);
        shared::render::raw(&buf);
        Ok(())
    }
}
