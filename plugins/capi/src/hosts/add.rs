//! `kubectl capi hosts add HOST... [--label k=v] [--apiserver URL] [--output DIR]`: bring
//! bare-metal hosts into the BYOH pool.
//!
//! parse (names, labels, the API server the hosts reach) → build (one BootstrapKubeconfig per
//! host, `kcore::build::byoh`) → apply (server-side, then wait for BYOH's controller to write the
//! bootstrap kubeconfig into its status) → render (one host: a script on stdout that runs the
//! preflight, writes the kubeconfig and starts the agent; with `--output`, the same as files
//! for configuration management).
//!
//! A BootstrapKubeconfig's token lives 30 minutes (BYOH v0.5.0) and BYOH never renews it: a
//! re-run after that replaces the object, so it always hands out a live token.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args as ClapArgs;
use cli::KubeFlags;
use kclient::discovery::ServerApis;
use kclient::error::Error;
use kclient::render::Poll;
use kcore::build::byoh;
use kcore::groups::INFRASTRUCTURE_GROUP;
use serde_json::Value;

use crate::common::writes::FIELD_MANAGER;

/// The most hosts one command onboards.
const MAX_HOSTS: usize = 200;

#[derive(ClapArgs, Clone, Debug)]
#[command(after_help = "Examples:
  kubectl capi hosts add node-17 -n pool-a --label site=apac
  kubectl capi hosts add node-{01..40} -n pool-a --output ./byoh   # files for Ansible & co.
  kubectl capi hosts add node-17 -n pool-a --preinstalled   # Kubernetes already on the host

One host: stdout is a POSIX sh script to run on it as root (e.g. piped to ssh HOST sudo sh):
it runs the preflight and stops if the host is not ready, writes the bootstrap kubeconfig to
--host-path (0600), then starts the agent, which registers the host as a ByoHost in the
namespace with the labels, and with capi-kamaji.io/kubernetes-version=<its kubelet's version>
when a kubelet is installed. PREFLIGHT_ARGS=--ipvs adds the IPVS checks.")]
pub struct AddArgs {
    /// The hosts' names (their hostnames: the agent registers the ByoHost under its hostname)
    #[arg(value_name = "HOST", required = true, num_args = 1..)]
    pub hosts: Vec<String>,
    /// A label for the ByoHosts (repeatable or comma-separated), passed to the agent's --label
    #[arg(long, value_name = "KEY=VALUE", value_delimiter = ',', value_parser = kcore::labels::parse_label_pair)]
    pub label: Vec<(String, String)>,
    /// The API server URL the hosts reach (https://host:port; default: the context's server)
    #[arg(long, value_name = "URL")]
    pub apiserver: Option<String>,
    /// Where the bootstrap kubeconfig lives on the host, as the printed command names it
    #[arg(
        long,
        value_name = "PATH",
        default_value = byoh::DEFAULT_HOST_PATH
    )]
    pub host_path: String,
    /// The hosts already have kubeadm, the kubelet and a container runtime (as for kamaji create
    /// --preinstalled-hosts): the agent runs with --skip-installation
    #[arg(long)]
    pub preinstalled: bool,
    /// Write DIR/HOST/bootstrap-kubeconfig.conf (0600), DIR/HOST/preflight.sh and DIR/HOST/agent.sh (which runs preflight.sh first) instead of printing
    #[arg(long, value_name = "DIR")]
    pub output: Option<PathBuf>,
    /// Print only HOST's preflight (a POSIX sh script, to run on the host as root) and issue
    /// nothing: e.g. kubectl capi hosts add node-17 --check | ssh node-17 sudo sh
    #[arg(long, conflicts_with_all = ["output", "force", "label", "apiserver", "preinstalled"])]
    pub check: bool,
    /// Issue a bootstrap kubeconfig even for a host already registered as a ByoHost (a host
    /// reinstalled under the same name); without it such a host is refused, naming its state
    #[arg(long)]
    pub force: bool,
    /// How long to wait for BYOH to issue each bootstrap kubeconfig
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = cli::parse_duration)]
    pub timeout: Duration,
    #[command(flatten)]
    pub kube: KubeFlags,
}

pub async fn run(args: &AddArgs) -> Result<(), Error> {
    check_args(args)?;
    if args.check {
        return check_only(args);
    }
    let (apiserver, ca) = bootstrap_endpoint(args).await?;
    let conn = args.kube.connect().await?;
    let apis = ServerApis::discover(&conn).await?;
    let not_installed = || Error::NotInstalled {
        product: "BYOH".into(),
        group: INFRASTRUCTURE_GROUP.into(),
        install: "install the BYOH provider (clusterctl init --infrastructure byoh)".into(),
        context: conn.context.clone(),
    };
    let ar = apis
        .provider_kind(INFRASTRUCTURE_GROUP, "BootstrapKubeconfig")
        .ok_or_else(not_installed)?;
    let hosts_ar = apis
        .provider_kind(INFRASTRUCTURE_GROUP, "ByoHost")
        .ok_or_else(not_installed)?;
    let ns = conn.namespace.clone();
    // Everything that can be known before a token exists is checked first: a token is a
    // credential that lives 30 minutes, and one issued for nothing is one too many.
    if !args.force {
        for host in &args.hosts {
            refuse_registered(&conn, &hosts_ar, &ns, host).await?;
        }
    }
    if let Some(dir) = &args.output {
        for host in &args.hosts {
            prepare_host_dir(&dir.join(host))?;
        }
    }
    for host in &args.hosts {
        let obj = byoh::bootstrap_kubeconfig(host, &ns, &apiserver, &ca);
        let (kubeconfig, issued) = issue(&conn, &ar, &ns, host, &obj, args.timeout).await?;
        if let Err(e) = render_host(args, &ns, host, &kubeconfig, issued) {
            return Err(withdraw(&conn, &ar, &ns, host, e).await);
        }
    }
    Ok(())
}

/// A host's files could not be written after its token was issued: the BootstrapKubeconfig
/// (and so its token, which BYOH deletes with it) is deleted, and the error says so; if even
/// that fails, it names the object to delete by hand.
async fn withdraw(
    conn: &kclient::conn::Conn,
    ar: &kube::discovery::ApiResource,
    ns: &str,
    host: &str,
    e: Error,
) -> Error {
    let what = format!("bootstrapkubeconfig.infrastructure.cluster.x-k8s.io/{host} in {ns}");
    let (message, hint) =
        match kclient::api::delete_if_present(conn, ar, Some(ns), host, false).await {
            Ok(_) => (
                format!("{e}; the token just issued was withdrawn ({what} deleted)"),
                e.hint(),
            ),
            Err(d) => (
                format!("{e}; the token just issued could not be withdrawn ({d})"),
                Some(format!(
                    "delete it by hand: kubectl delete bootstrapkubeconfig {host} -n {ns}"
                )),
            ),
        };
    Error::Other { message, hint }
}

/// A host that already registered (its agent made a ByoHost under its name) is refused
/// unless `--force`: a new token for it would let a second agent claim the name.
async fn refuse_registered(
    conn: &kclient::conn::Conn,
    ar: &kube::discovery::ApiResource,
    ns: &str,
    host: &str,
) -> Result<(), Error> {
    let Some(h) = kclient::api::get_json_opt(conn, ar, Some(ns), host).await? else {
        return Ok(());
    };
    // A claim whose ByoMachine is gone reads as Releasing here only if the host says so; one
    // GET is enough to name the state, not to judge it.
    let state = kcore::plan::hosts::HostFacts::of(&h).state(|_, _| true);
    Err(Error::Usage {
        message: format!(
            "{host} is already registered in {ns} (ByoHost, {}); no token was issued",
            state.as_str()
        ),
        hint: Some(format!(
            "to onboard it again (reinstalled under the same name), pass --force; to see it: kubectl capi hosts describe {host} -n {ns}"
        )),
    })
}

/// parse: everything the user typed is checked before anything is written.
/// `--check`: HOST's preflight on stdout, nothing issued and the cluster not reached (the
/// namespace in its messages is -n's, else the context's).
fn check_only(args: &AddArgs) -> Result<(), Error> {
    let [host] = args.hosts.as_slice() else {
        return Err(Error::Usage {
            message: format!(
                "--check prints one host's preflight; {} hosts were named",
                args.hosts.len()
            ),
            hint: Some("name one host: kubectl capi hosts add HOST --check".into()),
        });
    };
    let ns = args.kube.namespace.clone().unwrap_or_else(|| {
        args.kube
            .load_kubeconfig()
            .ok()
            .flatten()
            .and_then(|kc| {
                let current = args.kube.context.clone().or(kc.current_context.clone())?;
                kc.contexts
                    .iter()
                    .find(|c| c.name == current)?
                    .context
                    .as_ref()?
                    .namespace
                    .clone()
            })
            .unwrap_or_else(|| "default".into())
    });
    let script = byoh::check_script(host, &ns, jiff::Timestamp::now().as_second())
        .map_err(|e| Error::usage(e.to_string()))?;
    kclient::render::info(&format!(
        "# the preflight of {host} (nothing issued): run it there as root, e.g. kubectl capi hosts add {host} --check | ssh {host} sudo sh"
    ));
    kclient::render::raw(script.as_bytes());
    Ok(())
}

fn check_args(args: &AddArgs) -> Result<(), Error> {
    if args.hosts.len() > MAX_HOSTS {
        return Err(Error::usage(format!(
            "{} hosts named; at most {MAX_HOSTS} at a time",
            args.hosts.len()
        )));
    }
    for h in &args.hosts {
        kcore::names::check_object_name("host", h)?;
    }
    byoh::check_host_path(&args.host_path).map_err(|m| Error::Usage {
        message: m,
        hint: Some(
            "pass --host-path /ABSOLUTE/PATH, where the kubeconfig will be on the host".into(),
        ),
    })?;
    let mut seen = std::collections::BTreeMap::new();
    for (k, v) in &args.label {
        if let Some(was) = seen.insert(k.as_str(), v.as_str())
            && was != v
        {
            return Err(Error::Usage {
                message: format!(
                    "--label {k} is given twice ({was} and {v}); a label has one value"
                ),
                hint: Some(format!("keep one of --label {k}={was} and --label {k}={v}")),
            });
        }
    }
    if args.output.is_none() && args.hosts.len() > 1 && !args.check {
        return Err(Error::Usage {
            message: "several hosts: their bootstrap kubeconfigs need --output DIR".into(),
            hint: Some("pass --output DIR (one directory per host), or one host at a time".into()),
        });
    }
    if let Some(dir) = &args.output
        && dir.exists()
        && !dir.is_dir()
    {
        return Err(Error::usage(format!(
            "{} is not a directory",
            dir.display()
        )));
    }
    if let Some(dir) = &args.output {
        for h in &args.hosts {
            check_host_dir(&dir.join(h))?;
        }
    }
    Ok(())
}

/// `--output DIR`: each host's directory is ours to write in only when it is a real directory
/// or absent, and no one else can write in it. A symlink there would send the bootstrap
/// credentials wherever it points; a directory others can write in would let them swap
/// `agent.sh`, which runs as root on the host.
fn check_host_dir(d: &std::path::Path) -> Result<(), Error> {
    use std::os::unix::fs::PermissionsExt;
    let (what, fix) = match std::fs::symlink_metadata(d) {
        Ok(m) if m.file_type().is_symlink() => ("a symlink", "remove"),
        Ok(m) if !m.is_dir() => ("not a directory", "remove"),
        Ok(m) if m.permissions().mode() & 0o022 != 0 => {
            ("writable by others than its owner", "chmod 700")
        }
        _ => return Ok(()),
    };
    Err(Error::Usage {
        message: format!("--output: {} is {what}; nothing was written", d.display()),
        hint: Some(format!(
            "{fix} {} (a host's files go in a private directory of its own) or pass another --output DIR",
            d.display()
        )),
    })
}

/// Before any token is issued: the host's directory exists (made 0700) and takes a file, so a
/// read-only or full file system fails here, with nothing created in the cluster.
fn prepare_host_dir(d: &std::path::Path) -> Result<(), Error> {
    let refused = |e: String| Error::Other {
        message: format!("{e}; no token was issued"),
        hint: Some("pass an --output DIR you can write in".into()),
    };
    kclient::kubeconfig::create_private_dir(d).map_err(|e| refused(e.to_string()))?;
    tempfile::Builder::new()
        .prefix(".hosts-add-probe.")
        .tempfile_in(d)
        .map(drop)
        .map_err(|e| refused(format!("cannot write in {}: {e}", d.display())))
}

/// The API server URL the hosts reach and its CA bundle (PEM), both from the context unless
/// `--apiserver` names the URL.
async fn bootstrap_endpoint(args: &AddArgs) -> Result<(String, String), Error> {
    let (config, _) = args.kube.config().await?;
    let apiserver = match &args.apiserver {
        Some(u) => u.clone(),
        None => config
            .cluster_url
            .to_string()
            .trim_end_matches('/')
            .to_string(),
    };
    byoh::check_apiserver(&apiserver).map_err(|m| Error::Usage {
        message: m,
        hint: Some("pass --apiserver https://HOST:PORT, the address the hosts reach".into()),
    })?;
    let ca = match &config.root_cert {
        Some(ders) if !ders.is_empty() => byoh::pem_of_ders(ders),
        _ => {
            return Err(Error::other(
                "the context names no certificate authority for its API server, and BYOH's bootstrap kubeconfig needs one",
            ));
        }
    };
    Ok((apiserver, ca))
}

/// apply: replaces an object whose token has expired or that names another API server or CA
/// than `obj` (see [`outdated`]), applies `obj`, and waits for the bootstrap kubeconfig BYOH
/// writes into its status; returns it with the object's creation (Unix seconds), when its
/// token's life began.
async fn issue(
    conn: &kclient::conn::Conn,
    ar: &kube::discovery::ApiResource,
    ns: &str,
    host: &str,
    obj: &Value,
    timeout: Duration,
) -> Result<(String, i64), Error> {
    if let Some(old) = kclient::api::get_json_opt(conn, ar, Some(ns), host).await?
        && let Some(why) = outdated(&old, obj)
    {
        kclient::render::info(&format!(
            "replacing the bootstrap kubeconfig of {host}: {why}"
        ));
        kclient::api::delete(conn, ar, ns, host).await?;
        wait_gone(conn, ar, ns, host, timeout).await?;
    }
    let write = kclient::api::Write {
        manager: FIELD_MANAGER,
        dry_run: false,
        force: true,
    };
    kclient::api::apply(conn, ar, obj, write).await?;
    let what = format!("waiting for BYOH to issue the bootstrap kubeconfig of {host}");
    kclient::render::wait_until(&what, timeout, Duration::from_millis(300), || async move {
        let v = kclient::api::get_json_opt(conn, ar, Some(ns), host).await?;
        Ok(
            match v
                .as_ref()
                .and_then(|v| v.pointer("/status/bootstrapKubeconfigData"))
                .and_then(Value::as_str)
            {
                Some(k) => {
                    let created = v
                        .as_ref()
                        .and_then(|v| v.pointer("/metadata/creationTimestamp"))
                        .and_then(Value::as_str)
                        .and_then(|t| t.parse::<jiff::Timestamp>().ok())
                        .unwrap_or_else(jiff::Timestamp::now);
                    Poll::Ready((k.to_string(), created.as_second()))
                }
                None => Poll::Pending("no status.bootstrapKubeconfigData yet".into()),
            },
        )
    })
    .await
}

/// render: the host's script on stdout (the preflight, the kubeconfig, the agent), or, with
/// `--output`, the kubeconfig, `preflight.sh` and `agent.sh` as files.
fn render_host(
    args: &AddArgs,
    ns: &str,
    host: &str,
    kubeconfig: &str,
    issued_unix: i64,
) -> Result<(), Error> {
    let unsafe_text = |e: byoh::ControlCharacter| Error::usage(e.to_string());
    let command = byoh::agent_command(&args.host_path, ns, &args.label, args.preinstalled)
        .map_err(unsafe_text)?;
    // The admin's own version label wins over the one the script would read on the host.
    let detect = !args
        .label
        .iter()
        .any(|(k, _)| k == kcore::labels::KUBERNETES_VERSION_LABEL);
    match &args.output {
        Some(dir) => {
            let d = dir.join(host);
            let preflight = byoh::preflight_script(host, ns, issued_unix).map_err(unsafe_text)?;
            let script = byoh::agent_script(host, ns, &args.host_path, &command, detect)
                .map_err(unsafe_text)?;
            let conf = d.join("bootstrap-kubeconfig.conf");
            kclient::kubeconfig::write_atomic(&conf, kubeconfig.as_bytes(), true)?;
            kclient::kubeconfig::write_atomic_mode(
                &d.join("preflight.sh"),
                preflight.as_bytes(),
                false,
                0o755,
            )?;
            kclient::kubeconfig::write_atomic_mode(
                &d.join("agent.sh"),
                script.as_bytes(),
                false,
                0o755,
            )?;
            kclient::render::line(&format!(
                "bootstrapkubeconfig.infrastructure.cluster.x-k8s.io/{host} ready: {}",
                d.display()
            ));
        }
        None => {
            let script = byoh::host_script(
                host,
                ns,
                &args.host_path,
                kubeconfig,
                issued_unix,
                &command,
                detect,
            )
            .map_err(unsafe_text)?;
            kclient::render::info(&format!(
                "# Run this script on {host} as root within {} minutes (its token's life), e.g. kubectl capi hosts add {host} -n {ns} | ssh {host} sudo sh\n# It runs the preflight, writes the bootstrap kubeconfig to {}, then starts:\n#   {command}",
                byoh::BOOTSTRAP_TOKEN_TTL_MINUTES,
                byoh::sh_word("the host path", &args.host_path).map_err(unsafe_text)?,
            ));
            kclient::render::raw(script.as_bytes());
        }
    }
    Ok(())
}

/// Why an existing BootstrapKubeconfig cannot be reused for `want`, if it cannot: its token
/// has expired, or it names another API server or CA (the management cluster moved, e.g. a
/// sandbox restarted on a new port). BYOH issues the kubeconfig in its status once, from the
/// spec it saw first (BYOH v0.5.0, its BootstrapKubeconfig controller), so a changed spec
/// would never be issued again: the object is replaced.
fn outdated(old: &Value, want: &Value) -> Option<String> {
    if expired(old) {
        return Some("its token has expired".into());
    }
    let field = |v: &Value, f: &str| {
        v.pointer(&format!("/spec/{f}"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let (was, now) = (field(old, "apiserver"), field(want, "apiserver"));
    if was != now {
        return Some(format!("it names the API server {was}, not {now}"));
    }
    if field(old, "certificate-authority-data") != field(want, "certificate-authority-data") {
        return Some("it names another certificate authority than the API server's".into());
    }
    None
}

/// Whether BYOH's token in `obj` has expired (it was issued when the object was created).
fn expired(obj: &Value) -> bool {
    let created = obj
        .pointer("/metadata/creationTimestamp")
        .and_then(Value::as_str)
        .and_then(|t| t.parse::<jiff::Timestamp>().ok());
    let ttl = i64::from(byoh::BOOTSTRAP_TOKEN_TTL_MINUTES).saturating_mul(60);
    match created {
        // A minute of margin: a token about to expire is no use to a host still booting.
        Some(c) => {
            jiff::Timestamp::now()
                .as_second()
                .saturating_sub(c.as_second())
                > ttl - 60
        }
        None => false,
    }
}

async fn wait_gone(
    conn: &kclient::conn::Conn,
    ar: &kube::discovery::ApiResource,
    ns: &str,
    name: &str,
    timeout: Duration,
) -> Result<(), Error> {
    let what = format!("replacing the bootstrap kubeconfig of {name}");
    kclient::render::wait_until(&what, timeout, Duration::from_millis(300), || async move {
        Ok(
            match kclient::api::get_json_opt(conn, ar, Some(ns), name).await? {
                None => Poll::Ready(()),
                Some(_) => Poll::Pending("still there".into()),
            },
        )
    })
    .await
}
