//! `kubectl capi generate cluster NAME --from FILE|URL|-`: clusterctl-compatible cluster
//! templates. Variables come from the flags, then the environment, then the clusterctl config
//! file (`--config`, else `~/.config/cluster-api/clusterctl.yaml`, else
//! `~/.cluster-api/clusterctl.yaml`). As clusterctl does, every object gets the target namespace
//! and the output is the objects as YAML documents; `-o json` prints them as a `v1 List` and
//! `-o name` as `kind.group/name` lines, as kubectl prints several objects.

use std::path::{Path, PathBuf};

use clap::{Args as ClapArgs, Subcommand};
use cli::{KubeFlags, OutputFlags, OutputFormat};
use kclient::error::Error;

use crate::common::clusterctl_config;
use kclient::render::{Human, Printer, Render};
use kcore::plan::template::{
    self, GenerateOptions, Source, TemplateError, VariableStatus, Variables,
};
use serde::Serialize;
use serde_json::Value;

#[derive(ClapArgs, Clone, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub what: GenerateCommand,
}

#[derive(Subcommand, Clone, Debug)]
pub enum GenerateCommand {
    /// Render a cluster template (clusterctl generate cluster)
    Cluster(ClusterArgs),
}

#[derive(ClapArgs, Clone, Debug)]
#[command(after_help = "Examples:
  CONTROL_PLANE_ENDPOINT_IP=10.141.168.1 kubectl capi generate cluster byoh-cluster \\
      --from cluster-template.yaml --kubernetes-version v1.34.2 \\
      --control-plane-machine-count 1 --worker-machine-count 1 > cluster.yaml
  kubectl capi generate cluster c1 --from templates/ --flavor kamaji --list-variables
  curl -fsSL https://example.com/cluster-template.yaml | kubectl capi generate cluster c1 --from -")]
pub struct ClusterArgs {
    /// The cluster name (CLUSTER_NAME)
    #[arg(value_name = "NAME")]
    pub name: String,
    /// The template: a file, a directory holding cluster-template[-FLAVOR].yaml, an http(s) URL, or - for stdin
    #[arg(long, value_name = "FILE|DIR|URL|-", value_hint = clap::ValueHint::AnyPath, conflicts_with_all = ["from_config_map", "infrastructure"])]
    pub from: Option<String>,
    /// Read the template from this ConfigMap (clusterctl's --from-config-map)
    #[arg(long, value_name = "NAME", conflicts_with = "infrastructure")]
    pub from_config_map: Option<String>,
    /// The ConfigMap's namespace (default: -n, else the context's namespace)
    #[arg(long, value_name = "NAMESPACE", requires = "from_config_map")]
    pub from_config_map_namespace: Option<String>,
    /// The ConfigMap key holding the template
    #[arg(
        long,
        value_name = "KEY",
        default_value = "template",
        requires = "from_config_map"
    )]
    pub from_config_map_key: String,
    /// The infrastructure provider whose template to use, NAME[:VERSION], from the providers: list of the clusterctl config file (a local repository, as clusterctl reads it); without --from, --from-config-map and -i, the only infrastructure provider listed there
    #[arg(short = 'i', long, value_name = "NAME[:VERSION]")]
    pub infrastructure: Option<String>,
    /// Write the YAML to FILE (atomically, mode 0600) instead of stdout
    #[arg(long, value_name = "FILE", value_hint = clap::ValueHint::FilePath)]
    pub write_to: Option<PathBuf>,
    /// KUBERNETES_VERSION, e.g. v1.34.2
    #[arg(long, value_name = "VERSION")]
    pub kubernetes_version: Option<String>,
    /// CONTROL_PLANE_MACHINE_COUNT (default: the environment or config file, else 1)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(0..=kcore::plan::MAX_CONTROL_PLANE_REPLICAS), allow_negative_numbers = true)]
    pub control_plane_machine_count: Option<u32>,
    /// WORKER_MACHINE_COUNT (default: the environment or config file, else 0)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(0..=kcore::plan::MAX_WORKERS), allow_negative_numbers = true)]
    pub worker_machine_count: Option<u32>,
    /// NAMESPACE, and the namespace of every object (default: -n, else the context's namespace)
    #[arg(long, value_name = "NAMESPACE")]
    pub target_namespace: Option<String>,
    /// Pick cluster-template-FLAVOR.yaml in the directory given to --from (or the provider's)
    #[arg(short = 'f', long, value_name = "FLAVOR")]
    pub flavor: Option<String>,
    /// List the template's variables and where their values come from, instead of rendering
    #[arg(long)]
    pub list_variables: bool,
    /// Render even when CONTROL_PLANE_ENDPOINT_IP is in no network the BYOH hosts report (a load balancer that lives elsewhere)
    #[arg(long)]
    pub allow_foreign_address: bool,
    /// The clusterctl config file (default: ~/.config/cluster-api/clusterctl.yaml, else ~/.cluster-api/clusterctl.yaml)
    #[arg(long, value_name = "FILE", value_hint = clap::ValueHint::FilePath)]
    pub config: Option<PathBuf>,
    /// Output format: yaml (the default, as clusterctl prints), json (a v1 List), name, jsonpath=TEMPLATE, jsonpath-file=FILE, custom-columns=SPEC, custom-columns-file=FILE; --list-variables prints a table by default
    // Not the shared OutputFlags: their default is `table`, and here an explicit `-o table`
    // must be told from no `-o` at all (YAML).
    #[arg(short = 'o', long = "output", value_parser = cli::flags::parse_output, value_name = "FORMAT")]
    pub output: Option<OutputFormat>,
    #[command(flatten)]
    pub kube: KubeFlags,
}

pub async fn run(args: &Args) -> Result<(), Error> {
    match &args.what {
        GenerateCommand::Cluster(a) => cluster(a).await,
    }
}

/// How long a template download may take.
const FETCH_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Reads the template from wherever the flags say: `--from`, `--from-config-map` or `-i`.
async fn template_source(a: &ClusterArgs) -> Result<(String, String), Error> {
    if let Some(cm) = &a.from_config_map {
        return read_config_map(a, cm).await;
    }
    if let Some(from) = &a.from {
        return read_template(from, a.flavor.as_deref()).await;
    }
    let dir = provider_dir(a, a.infrastructure.as_deref())?;
    read_template(&dir.display().to_string(), a.flavor.as_deref()).await
}

/// clusterctl's `--from-config-map NAME [--from-config-map-namespace NS] [--from-config-map-key KEY]`.
async fn read_config_map(a: &ClusterArgs, name: &str) -> Result<(String, String), Error> {
    use k8s_openapi::api::core::v1::ConfigMap;
    kcore::names::check_object_name("ConfigMap", name)?;
    if a.flavor.is_some() {
        return Err(Error::usage(
            "--flavor picks a file of a template directory; it cannot apply to --from-config-map",
        ));
    }
    let conn = a.kube.connect().await?;
    let ns = a
        .from_config_map_namespace
        .clone()
        .unwrap_or_else(|| conn.namespace.clone());
    let api: kube::Api<ConfigMap> = kube::Api::namespaced(conn.client.clone(), &ns);
    let op = kclient::error::Op::new("get", "", "configmaps", "ConfigMap")
        .in_namespace(Some(&ns))
        .named(name);
    let cm = api.get_opt(name).await.map_err(|e| conn.error(e, &op))?.ok_or_else(|| Error::Other {
        message: format!("ConfigMap {ns}/{name} not found"),
        hint: Some("check the name and --from-config-map-namespace (kubectl get configmaps -n NAMESPACE)".into()),
    })?;
    let key = &a.from_config_map_key;
    let text = cm
        .data
        .as_ref()
        .and_then(|d| d.get(key))
        .cloned()
        .ok_or_else(|| {
            let keys: Vec<String> = cm.data.iter().flat_map(|d| d.keys().cloned()).collect();
            Error::Other {
                message: format!("ConfigMap {ns}/{name} has no key {key:?}"),
                hint: Some(format!(
                    "its keys: {}; pick one with --from-config-map-key",
                    if keys.is_empty() {
                        "none".into()
                    } else {
                        keys.join(", ")
                    }
                )),
            }
        })?;
    Ok((text, format!("ConfigMap {ns}/{name} key {key}")))
}

/// `-i NAME[:VERSION]`: the directory of that provider's release in the clusterctl config
/// file's `providers:` list (a local repository: `<base>/<provider>/<version>/components.yaml`
/// next to `cluster-template[-FLAVOR].yaml`, as clusterctl's local repositories are laid out).
fn provider_dir(a: &ClusterArgs, provider: Option<&str>) -> Result<PathBuf, Error> {
    let path = clusterctl_config::path(a.config.as_deref());
    let providers = match &path {
        Some(p) => read_providers(p)?,
        None => vec![],
    };
    let infra: Vec<&str> = providers
        .iter()
        .filter(|(_, t, _)| t == "InfrastructureProvider")
        .map(|(n, _, _)| n.as_str())
        .collect();
    let provider = match (provider, infra.as_slice()) {
        (Some(p), _) => p,
        (None, [only]) => only,
        (None, _) => {
            return Err(Error::Usage {
                message: "no template source: pass --from FILE|DIR|URL|-, --from-config-map NAME or --infrastructure NAME".into(),
                hint: Some(if infra.is_empty() {
                    "the clusterctl config file lists no infrastructure provider to take the template from".into()
                } else {
                    format!(
                        "the clusterctl config file lists several infrastructure providers ({}); pick one with -i",
                        infra.join(", ")
                    )
                }),
            });
        }
    };
    let (name, version) = provider
        .split_once(':')
        .map(|(n, v)| (n, Some(v)))
        .unwrap_or((provider, None));
    let Some(url) = providers
        .iter()
        .find(|(n, t, _)| n == name && t == "InfrastructureProvider")
        .map(|(_, _, u)| u.clone())
    else {
        return Err(Error::Usage {
            message: format!("infrastructure provider {name:?} is not in the providers: list of the clusterctl config file"),
            hint: Some("add it there with a local url (clusterctl's local repository layout), or pass --from FILE|URL; clusterctl's built-in GitHub repositories are not read".into()),
        });
    };
    let components = PathBuf::from(url.strip_prefix("file://").unwrap_or(&url));
    let release = components
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    Ok(match version {
        Some(v) => release.parent().map(|base| base.join(v)).unwrap_or(release),
        None => release,
    })
}

/// The `providers:` entries of a clusterctl config file: (name, type, url).
fn read_providers(path: &Path) -> Result<Vec<(String, String, String)>, Error> {
    let text = config_input()
        .read_text(path)
        .map_err(kclient::input::InputError::failure)?;
    let v: Value = serde_saphyr::from_str(&text).unwrap_or(Value::Null);
    Ok(v.get("providers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|p| {
            let s = |k: &str| p.get(k).and_then(Value::as_str).map(str::to_string);
            Some((s("name")?, s("type")?, s("url")?))
        })
        .collect())
}

/// How `--from` is read: bounded as the template engine is, `-` for stdin.
fn template_input() -> kclient::input::Input<'static> {
    kclient::input::Input {
        flag: "--from",
        limit: kcore::plan::template::MAX_TEMPLATE_BYTES,
        stdin: true,
    }
}

/// How clusterctl's `--config` file is read (bounded; no stdin).
fn config_input() -> kclient::input::Input<'static> {
    kclient::input::Input::new("--config", false)
}

/// Reads the template text and says where it came from.
async fn read_template(from: &str, flavor: Option<&str>) -> Result<(String, String), Error> {
    if from.starts_with("http://") || from.starts_with("https://") {
        if flavor.is_some() {
            return Err(Error::usage(
                "--flavor picks a file of a template directory; it cannot apply to a URL",
            ));
        }
        let text = kclient::fetch::fetch_text(
            from,
            kcore::plan::template::MAX_TEMPLATE_BYTES,
            FETCH_TIMEOUT,
        )
        .await
        .map_err(|e| Error::Other {
            message: format!("cannot download the template {from}: {e}"),
            hint: Some(format!(
                "check the URL, or download it and pass the file: curl -fsSLo t.yaml {from}"
            )),
        })?;
        return Ok((text, from.to_string()));
    }
    if from == "-" {
        if flavor.is_some() {
            return Err(Error::usage(
                "--flavor picks cluster-template-FLAVOR.yaml in a directory; it cannot apply to --from -",
            ));
        }
        let s = template_input()
            .read_text(Path::new("-"))
            .map_err(kclient::input::InputError::failure)?;
        return Ok((s, "stdin".into()));
    }
    let p = Path::new(from);
    let file = if p.is_dir() {
        p.join(template::template_file_name(flavor))
    } else {
        if let Some(f) = flavor {
            return Err(Error::Usage {
                message: format!(
                    "--flavor {f} picks cluster-template-{f}.yaml in a directory, but --from {from} is a file"
                ),
                hint: Some("pass the directory to --from, or drop --flavor".into()),
            });
        }
        p.to_path_buf()
    };
    let text = template_input().read_text(&file).map_err(|e| match e {
        kclient::input::InputError::Io { source, .. } => Error::Other {
            message: format!("cannot read the template {}: {source}", file.display()),
            hint: match flavor {
                Some(_) if p.is_dir() => Some(format!(
                    "flavors found in {from}: {}",
                    flavors_in(p).join(", ")
                )),
                _ => Some("check the path".into()),
            },
        },
        other => other.failure(),
    })?;
    Ok((text, file.display().to_string()))
}

/// The flavors of the templates in a directory (`cluster-template-<flavor>.yaml`).
fn flavors_in(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter_map(|e| {
                    let n = e.file_name().to_string_lossy().to_string();
                    n.strip_prefix("cluster-template-")
                        .and_then(|r| r.strip_suffix(".yaml"))
                        .map(str::to_string)
                })
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    if out.is_empty() {
        out.push("none".into());
    }
    out
}

/// `vMAJOR.MINOR.PATCH[-pre][+build]`.
pub fn check_version(flag: &str, v: &str) -> Result<(), Error> {
    if kcore::version::KubeVersion::parse_v(v).is_ok() {
        Ok(())
    } else {
        Err(Error::Usage {
            message: format!("{flag} {v:?} is not a Kubernetes version"),
            hint: Some("write it as v<major>.<minor>.<patch>, for example v1.34.2".into()),
        })
    }
}

/// The namespace for the objects: --target-namespace, -n, the context's, else `default`.
fn target_namespace(a: &ClusterArgs) -> String {
    if let Some(n) = &a.target_namespace {
        return n.clone();
    }
    if let Some(n) = &a.kube.namespace {
        return n.clone();
    }
    let from_context = a.kube.load_kubeconfig().ok().flatten().and_then(|kc| {
        let ctx = a.kube.context.clone().or(kc.current_context.clone())?;
        kc.contexts
            .iter()
            .find(|c| c.name == ctx)
            .and_then(|c| c.context.as_ref())
            .and_then(|c| c.namespace.clone())
    });
    from_context.unwrap_or_else(|| "default".into())
}

fn variables(a: &ClusterArgs, namespace: &str) -> Result<Variables, Error> {
    let mut vars = Variables {
        env: std::env::vars().collect(),
        ..Default::default()
    };
    let path = clusterctl_config::path(a.config.as_deref());
    if let Some(p) = &path {
        vars.config = clusterctl_config::variables(p, a.config.is_some())?;
    }
    if a.kubernetes_version.is_none()
        && let Some(v) = vars.lookup("KUBERNETES_VERSION").map(str::to_string)
    {
        check_version("KUBERNETES_VERSION", &v)?;
    }
    vars.apply_generate_options(&GenerateOptions {
        cluster_name: a.name.clone(),
        target_namespace: namespace.to_string(),
        kubernetes_version: a.kubernetes_version.clone(),
        control_plane_machine_count: a.control_plane_machine_count.map(i64::from),
        worker_machine_count: a.worker_machine_count.map(i64::from),
    })
    .map_err(|e| Error::usage(e.to_string()))?;
    Ok(vars)
}

fn template_error(e: TemplateError, source: &str, config: Option<&Path>) -> Error {
    match e {
        TemplateError::MissingVariables(names) => Error::Other {
            message: format!(
                "the template {source} needs variables that are not set: {}",
                names.join(", ")
            ),
            hint: Some(format!(
                "export them (e.g. export {}=...) or add them to {}; --list-variables shows every variable",
                names.first().map(String::as_str).unwrap_or("NAME"),
                config
                    .map(|p| p.display().to_string())
                    .unwrap_or_else(|| "~/.config/cluster-api/clusterctl.yaml".into())
            )),
        },
        TemplateError::InvalidOption(m) => Error::usage(m),
        TemplateError::TooLarge(m) => Error::Other {
            message: m,
            hint: Some("check that --from names a cluster template".into()),
        },
        TemplateError::Parse { .. } => Error::Other {
            message: format!("the template {source}: {e}"),
            hint: Some(
                "variables are written ${NAME} or ${NAME:=default}; a literal $ is $$".into(),
            ),
        },
    }
}

/// `--list-variables`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct VariableList {
    template: String,
    variables: Vec<VariableStatus>,
}

impl Render for VariableList {
    fn human(&self) -> Human {
        let width = self
            .variables
            .iter()
            .map(|v| v.name.len())
            .max()
            .unwrap_or(0)
            + 2;
        let source = |v: &VariableStatus| match v.source {
            Some(Source::Flag) => "set by a flag".to_string(),
            Some(Source::Env) => "set in the environment".to_string(),
            Some(Source::Config) => "set in the config file".to_string(),
            None if v.missing => "NOT SET".to_string(),
            None => format!("defaults to {:?}", v.default.clone().unwrap_or_default()),
        };
        let mut s = String::from("Required Variables:\n");
        for v in self.variables.iter().filter(|v| v.required) {
            s.push_str(&format!("  - {:<width$}({})\n", v.name, source(v)));
        }
        s.push_str("\nOptional Variables:\n");
        for v in self.variables.iter().filter(|v| !v.required) {
            s.push_str(&format!("  - {:<width$}({})\n", v.name, source(v)));
        }
        Human::Text(s)
    }
}

/// Kinds that have no namespace, left alone when the target namespace is set.
const CLUSTER_SCOPED: [&str; 9] = [
    "Namespace",
    "ClusterRole",
    "ClusterRoleBinding",
    "CustomResourceDefinition",
    "StorageClass",
    "PriorityClass",
    "ValidatingWebhookConfiguration",
    "MutatingWebhookConfiguration",
    "IngressClass",
];

/// The format the rendered objects print in: YAML unless `-o` says otherwise; the table
/// formats are refused (there is no table of objects that do not exist yet).
fn objects_format(a: &ClusterArgs) -> Result<OutputFormat, Error> {
    match &a.output {
        None => Ok(OutputFormat::Yaml),
        Some(f @ (OutputFormat::Table | OutputFormat::Wide)) => Err(Error::Usage {
            message: format!(
                "-o {f} does not apply to generate cluster: it prints objects, not a table"
            ),
            hint: Some(
                "use -o yaml (the default), json, name, jsonpath=TEMPLATE or custom-columns=SPEC; --list-variables prints a table".into(),
            ),
        }),
        Some(f) => Ok(f.clone()),
    }
}

async fn cluster(a: &ClusterArgs) -> Result<(), Error> {
    let format = if a.list_variables {
        OutputFormat::Table
    } else {
        objects_format(a)?
    };
    crate::common::names::check_name(&a.name)?;
    if a.name.len() > 63 {
        return Err(Error::usage(format!(
            "cluster name {:?} is longer than 63 characters (it is used in labels)",
            a.name
        )));
    }
    let namespace = target_namespace(a);
    let config = clusterctl_config::path(a.config.as_deref());
    let (text, source) = template_source(a).await?;
    let vars = variables(a, &namespace)?;
    if a.list_variables {
        let variables = template::variable_status(&text, &vars)
            .map_err(|e| template_error(e, &source, config.as_deref()))?;
        let output = OutputFlags {
            output: a.output.clone().unwrap_or(format),
            ..OutputFlags::default()
        };
        return Printer::new(&output).print(&VariableList {
            template: source,
            variables,
        });
    }
    let rendered = template::substitute(&text, &vars)
        .map_err(|e| template_error(e, &source, config.as_deref()))?;
    let docs: Vec<Value> = serde_saphyr::from_multiple(&rendered).map_err(|e| Error::Other {
        message: format!(
            "the template {source} does not render to valid YAML: {}",
            kcore::yaml::error_line(&e)
        ),
        hint: Some("check the template around that line, and the values of its variables".into()),
    })?;
    let mut objects = Vec::new();
    for mut d in docs.into_iter().filter(|d| !d.is_null()) {
        let kind = d.get("kind").and_then(Value::as_str).unwrap_or("");
        if kind.is_empty() || d.get("apiVersion").is_none() {
            return Err(Error::other(format!(
                "the template {source} holds a document without apiVersion and kind"
            )));
        }
        if !CLUSTER_SCOPED.contains(&kind)
            && let Some(meta) = d.get_mut("metadata").and_then(Value::as_object_mut)
        {
            meta.insert("namespace".into(), Value::String(namespace.clone()));
        }
        objects.push(d);
    }
    if objects.is_empty() {
        return Err(Error::other(format!(
            "the template {source} holds no objects"
        )));
    }
    if !a.allow_foreign_address {
        check_endpoint_in_host_networks(a, &text, &vars, &objects, &namespace).await?;
    }
    let out = kclient::render::objects_text(&format, &objects, "")?;
    match &a.write_to {
        Some(p) => kclient::kubeconfig::write_atomic(p, out.as_bytes(), false),
        None => {
            kclient::render::raw(out.as_bytes());
            Ok(())
        }
    }
}

/// The variable clusterctl's cluster templates (BYOH's among them) put the control plane's
/// address in.
const ENDPOINT_IP: &str = "CONTROL_PLANE_ENDPOINT_IP";

/// How long reading the BYOH hosts may take: `generate` renders offline, and a cluster that
/// does not answer must not hold it up.
const HOSTS_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(15);

/// BCM: the control-plane address is "a valid unused IP address within the internal network
/// of the nodes". When the template's machines run on BYOH hosts (it holds ByoMachineTemplates)
/// and it uses CONTROL_PLANE_ENDPOINT_IP, the address must lie in a network that one of the
/// hosts they would use reports, in the cluster the kubeconfig names. Without a kubeconfig the
/// template is rendered unchecked, as `generate` needs no cluster; a cluster that cannot be
/// read is said in a note. Hosts that report no network judge nothing.
async fn check_endpoint_in_host_networks(
    a: &ClusterArgs,
    text: &str,
    vars: &Variables,
    objects: &[Value],
    namespace: &str,
) -> Result<(), Error> {
    let Some(address) = template::variable_status(text, vars)
        .ok()
        .and_then(|all| all.into_iter().find(|v| v.name == ENDPOINT_IP))
        .and_then(|v| vars.lookup(ENDPOINT_IP).map(str::to_string).or(v.default))
        .filter(|v| !v.trim().is_empty())
    else {
        return Ok(());
    };
    if kcore::plan::hosts::template_pool(objects, &[], namespace, &a.name).is_none() {
        return Ok(());
    }
    if matches!(a.kube.load_kubeconfig(), Ok(None))
        && std::env::var_os("KUBERNETES_SERVICE_HOST").is_none()
    {
        tracing::debug!("no kubeconfig: {ENDPOINT_IP} not checked against the BYOH hosts");
        return Ok(());
    }
    let hosts = match tokio::time::timeout(HOSTS_TIMEOUT, byo_hosts(a)).await {
        Ok(Ok(Some(hosts))) => hosts,
        Ok(Ok(None)) => return Ok(()),
        Ok(Err(e)) => {
            kclient::render::info(&format!(
                "note: {ENDPOINT_IP} {address} not checked against the BYOH hosts' networks: {e}"
            ));
            return Ok(());
        }
        Err(_) => {
            kclient::render::info(&format!(
                "note: {ENDPOINT_IP} {address} not checked against the BYOH hosts' networks: the cluster did not answer within {}s",
                HOSTS_TIMEOUT.as_secs()
            ));
            return Ok(());
        }
    };
    let pool =
        kcore::plan::hosts::template_pool(objects, &hosts, namespace, &a.name).unwrap_or_default();
    let n = pool.len();
    match kcore::plan::hosts::address_fit(&address, pool) {
        kcore::plan::hosts::AddressFit::Outside(networks) => Err(Error::Other {
            message: format!(
                "{ENDPOINT_IP} {address} is in no network of the {n} BYOH host(s) the template's machines would use ({}); nothing was written",
                kcore::plan::hosts::named_networks(&networks)
            ),
            hint: Some(format!(
                "set {ENDPOINT_IP} to an unused address in one of those networks, or pass --allow-foreign-address if a load balancer outside them serves it"
            )),
        }),
        fit => {
            tracing::debug!("{ENDPOINT_IP} {address} against {n} BYOH host(s): {fit:?}");
            Ok(())
        }
    }
}

/// The ByoHosts of every namespace (BYOH picks from all of them); `None` when BYOH is not
/// served.
async fn byo_hosts(a: &ClusterArgs) -> Result<Option<Vec<Value>>, Error> {
    let conn = a.kube.connect().await?;
    let apis = kclient::discovery::ServerApis::discover(&conn).await?;
    let Some(ar) = apis.byo_host() else {
        return Ok(None);
    };
    let lp = kube::api::ListParams::default();
    Ok(Some(kclient::api::list_json(&conn, &ar, None, &lp).await?))
}
