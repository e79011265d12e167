//! `kubectl capi hosts remove HOST...`: take free hosts out of the BYOH pool for good.
//!
//! parse (names, bounded) → read every host and refuse any that serves a machine, before the
//! first delete (`kcore::plan::hosts::removal`) → show what goes and ask (or `--yes`) → delete
//! each host's ByoHost, BootstrapKubeconfig, bootstrap token Secret and agent CSR → one line
//! per host, and what to run on it. Idempotent: a re-run after an interruption finds the host's
//! leftovers by name and finishes; a host with nothing left is not found.

use clap::Args as ClapArgs;
use cli::{DryRun, DryRunFlag, KubeFlags};
use kclient::conn::Conn;
use kclient::discovery::ServerApis;
use kclient::error::Error;
use kcore::build::byoh;
use kcore::json;
use kcore::plan::hosts::removal;
use kube::discovery::ApiResource;

use crate::common::host_pool::find_host;
use crate::common::host_removal::HostRemoval;

#[derive(ClapArgs, Clone, Debug)]
#[command(
    mut_arg("yes", |a| a.help("Remove without asking (needed without a terminal)")),
    after_help = "Only hosts that serve no machine can go: drain a busy one first (kubectl capi hosts drain
HOST), or retire it if it stopped. For each host: its ByoHost, its BootstrapKubeconfig, the
bootstrap token BYOH issued with it and its agent's certificate request are deleted, then the
commands to run on the host are printed: stop the agent first (started again, it registers
the host anew), then remove its files. The agent's client certificate stays valid until it
expires (Kubernetes cannot revoke one); BYOH lets it write only its own ByoHost.

Examples:
  kubectl capi hosts remove host-07 --yes
  kubectl capi hosts remove host-07 host-08 --dry-run=client"
)]
pub struct RemoveArgs {
    /// The ByoHosts (at most 100)
    #[arg(value_name = "HOST", required = true, num_args = 1..)]
    pub hosts: Vec<String>,
    /// Where `hosts add` put the bootstrap kubeconfig on the hosts (for the printed clean-up)
    #[arg(
        long,
        value_name = "PATH",
        default_value = byoh::DEFAULT_HOST_PATH
    )]
    pub host_path: String,
    #[arg(long, short = 'y')]
    pub yes: bool,
    #[command(flatten)]
    pub dry_run: DryRunFlag,
    #[command(flatten)]
    pub kube: KubeFlags,
}

pub async fn run(a: &RemoveArgs) -> Result<(), Error> {
    let path = check_args(a)?;
    let conn = a.kube.connect().await?;
    let apis = ServerApis::discover(&conn).await?;
    let host_ar = super::byo_host_resource(&apis, &conn)?;
    let bk_ar = apis.provider_kind(kcore::groups::INFRASTRUCTURE_GROUP, "BootstrapKubeconfig");
    // Every host read and judged before the first delete: nothing half-removed.
    let mut plan = Vec::new();
    for name in &a.hosts {
        plan.push(removal_of(&conn, &host_ar, bk_ar.as_ref(), name).await?);
    }
    let what = plan
        .iter()
        .map(|r| format!("{}: {}", r.host, r.shown()))
        .collect::<Vec<_>>()
        .join("; ");
    if a.dry_run.mode == DryRun::Client {
        for r in &plan {
            kclient::render::line(&format!("would remove {} (dry run): {}", r.host, r.shown()));
        }
        return Ok(());
    }
    let server_dry = a.dry_run.mode == DryRun::Server;
    if !server_dry {
        super::confirm(
            a.yes,
            &format!("remove {} host(s) for good ({what})", plan.len()),
        )?;
    }
    for r in &plan {
        r.delete(&conn, server_dry).await?;
        if server_dry {
            kclient::render::line(&format!(
                "{} would be removed (server dry run): {}",
                r.host,
                r.shown()
            ));
        } else {
            kclient::render::line(&format!(
                "byohost.infrastructure.cluster.x-k8s.io/{} removed ({})",
                r.host,
                r.shown()
            ));
            kclient::render::line(&removal::on_host(&r.host, &path));
        }
    }
    Ok(())
}

/// Checks the flags before anything is read; returns `--host-path` quoted for the printed
/// clean-up.
fn check_args(a: &RemoveArgs) -> Result<String, Error> {
    if a.hosts.len() > removal::MAX_HOSTS {
        return Err(Error::Usage {
            message: format!(
                "{} hosts given; hosts remove takes at most {}",
                a.hosts.len(),
                removal::MAX_HOSTS
            ),
            hint: Some("remove them in batches".into()),
        });
    }
    for (i, h) in a.hosts.iter().enumerate() {
        kcore::names::check_object_name("host", h)?;
        if a.hosts[..i].contains(h) {
            return Err(Error::Usage {
                message: format!("host {h} is given twice"),
                hint: Some("name each host once".into()),
            });
        }
    }
    byoh::check_host_path(&a.host_path).map_err(Error::usage)?;
    byoh::sh_word("the host path", &a.host_path).map_err(|e| Error::usage(e.to_string()))
}

/// What goes for host `name`: its ByoHost (refused if it serves a machine), and what was issued
/// for it. A host that is gone with nothing left is not found.
async fn removal_of(
    conn: &Conn,
    host_ar: &ApiResource,
    bk_ar: Option<&ApiResource>,
    name: &str,
) -> Result<HostRemoval, Error> {
    let prefer = conn.namespace_explicit.then(|| conn.namespace.clone());
    let host = match find_host(conn, host_ar, name, prefer.as_deref()).await {
        Ok(h) => Some(h),
        Err(Error::NotFound { .. }) => None,
        Err(e) => return Err(e),
    };
    if let Some(why) = host.as_ref().and_then(removal::refusal) {
        return Err(Error::Other {
            message: format!("{why}; nothing was removed"),
            hint: Some(format!("kubectl capi hosts describe {name}")),
        });
    }
    // The host's namespace, or (host gone: a re-run) the one the command names.
    let ns = host
        .as_ref()
        .map(|h| json::namespace(h).to_string())
        .unwrap_or_else(|| conn.namespace.clone());
    let r = HostRemoval::read(conn, host.is_some().then_some(host_ar), bk_ar, &ns, name).await?;
    if r.objects.is_empty() {
        return Err(Error::NotFound {
            kind: "ByoHost".into(),
            name: name.to_string(),
            namespace: None,
            suggestions: Vec::new(),
        });
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(hosts: &[&str]) -> RemoveArgs {
        RemoveArgs {
            hosts: hosts.iter().map(|h| h.to_string()).collect(),
            host_path: "/etc/byoh/bootstrap-kubeconfig.conf".into(),
            yes: true,
            dry_run: DryRunFlag { mode: DryRun::None },
            kube: KubeFlags::default(),
        }
    }

    #[test]
    fn names_are_checked_bounded_and_given_once() {
        assert!(check_args(&args(&["h1", "h2"])).is_ok());
        let mut bad = args(&["h1"]);
        bad.host_path = "/etc/byoh/a\nb".into();
        let e = check_args(&bad).unwrap_err().to_string();
        assert!(e.contains("control character"), "{e}");
        let e = check_args(&args(&["h1", "h1"])).unwrap_err().to_string();
        assert!(e.contains("given twice"), "{e}");
        let e = check_args(&args(&["Bad_Name"])).unwrap_err().to_string();
        assert!(e.contains("Bad_Name"), "{e}");
        let many: Vec<String> = (0..=removal::MAX_HOSTS).map(|i| format!("h{i}")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        let e = check_args(&args(&many)).unwrap_err().to_string();
        assert!(e.contains("at most 100"), "{e}");
    }
}
