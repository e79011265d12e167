//! `kubectl capi hosts add HOST... [--label k=v] [--apiserver URL] [--output DIR]`: bring
//! bare-metal hosts into the BYOH pool.
//!
//! parse (names, labels, the API server the hosts reach) → build (one BootstrapKubeconfig per
//! host, `kcore::build::byoh`) → apply (server-side, then wait for BYOH's controller to write the
//! bootstrap kubeconfig into its status) → render (the agent command, and the kubeconfig on
//! stdout or, with `--output`, as files for configuration management).
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

On each host, run the printed command as root with the bootstrap kubeconfig saved to the
path it names; the agent registers the host as a ByoHost in the namespace, with the labels.")]
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
        default_value = "/etc/byoh/bootstrap-kubeconfig.conf"
    )]
    pub host_path: String,
    /// The hosts already have kubeadm, the kubelet and a container runtime (as for kamaji create
    /// --preinstalled-hosts): the agent runs with --skip-installation
    #[arg(long)]
    pub preinstalled: bool,
    /// Write DIR/HOST/bootstrap-kubeconfig.conf (0600), DIR/HOST/preflight.sh and DIR/HOST/agent.sh (which runs preflight.sh first) instead of printing
    #[arg(long, value_name = "DIR")]
    pub output: Option<PathBuf>,
    /// How long to wait for BYOH to issue each bootstrap kubeconfig
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = cli::parse_duration)]
    pub timeout: Duration,
    #[command(flatten)]
    pub kube: KubeFlags,
}

pub async fn run(args: &AddArgs) -> Result<(), Error> {
    check_args(args)?;
    let (apiserver, ca) = bootstrap_endpoint(args).await?;
    let conn = args.kube.connect().await?;
    let apis = ServerApis::discover(&conn).await?;
    let ar = apis
        .provider_kind(INFRASTRUCTURE_GROUP, "BootstrapKubeconfig")
        .ok_or_else(|| Error::NotInstalled {
            product: "BYOH".into(),
            group: INFRASTRUCTURE_GROUP.into(),
            install: "install the BYOH provider (clusterctl init --infrastructure byoh)".into(),
            context: conn.context.clone(),
        })?;
    let ns = conn.namespace.clone();
    for host in &args.hosts {
        let obj = byoh::bootstrap_kubeconfig(host, &ns, &apiserver, &ca);
        let (kubeconfig, issued) = issue(&conn, &ar, &ns, host, &obj, args.timeout).await?;
        render_host(args, &ns, host, &kubeconfig, issued)?;
    }
    Ok(())
}

/// parse: everything the user typed is checked before anything is written.
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
    if args.output.is_none() && args.hosts.len() > 1 {
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
/// or absent. A symlink there would send the bootstrap credentials wherever it points.
fn check_host_dir(d: &std::path::Path) -> Result<(), Error> {
    let what = match std::fs::symlink_metadata(d) {
        Ok(m) if m.file_type().is_symlink() => "a symlink",
        Ok(m) if !m.is_dir() => "not a directory",
        _ => return Ok(()),
    };
    Err(Error::Usage {
        message: format!("--output: {} is {what}; nothing was written", d.display()),
        hint: Some(format!(
            "remove {} (a host's files go in a directory of its own) or pass another --output DIR",
            d.display()
        )),
    })
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

/// render: the agent command with the kubeconfig on stdout, or both as files under `--output`.
fn render_host(
    args: &AddArgs,
    ns: &str,
    host: &str,
    kubeconfig: &str,
    issued_unix: i64,
) -> Result<(), Error> {
    let command = byoh::agent_command(&args.host_path, ns, &args.label, args.preinstalled);
    match &args.output {
        Some(dir) => {
            let d = dir.join(host);
            let conf = d.join("bootstrap-kubeconfig.conf");
            kclient::kubeconfig::write_atomic(&conf, kubeconfig.as_bytes(), true)?;
            kclient::kubeconfig::write_atomic_mode(
                &d.join("preflight.sh"),
                byoh::preflight_script(host, ns, issued_unix).as_bytes(),
                false,
                0o755,
            )?;
            let script = format!(
                "#!/bin/sh\n# Registers this host ({host}) as a ByoHost in {ns}. Copy \
                 bootstrap-kubeconfig.conf to {} first; its token expires {} minutes after \
                 `kubectl capi hosts add` ran.\n# preflight.sh first (pass --ipvs for kube-proxy's \
                 IPVS mode): it says what the host lacks, before the agent fails on it.\n\
                 sh \"$(dirname \"$0\")/preflight.sh\" ${{PREFLIGHT_ARGS:-}} || exit 1\n\
                 exec {command} \"$@\"\n",
                args.host_path,
                byoh::BOOTSTRAP_TOKEN_TTL_MINUTES
            );
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
            kclient::render::info(&format!(
                "# Save this as {} on {host} (its token expires in {} minutes), then run as root:\n#   {command}",
                args.host_path,
                byoh::BOOTSTRAP_TOKEN_TTL_MINUTES
            ));
            kclient::render::raw(kubeconfig.as_bytes());
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
