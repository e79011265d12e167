//! The real BYOH host agent (`byoh-hostagent`, BYOH v0.5.0, built by `build-bins.sh byoh`), run
//! for one host exactly as `kubectl capi hosts add` prints its command.
//!
//! Each host is a machine of its own as far as the agent can tell ([`NetSandbox::start_host`]):
//! its own hostname (the agent names its ByoHost, its CSR and its user after it), network
//! namespace with an `eth0` and a default route (the agent reports its interfaces and finds its
//! default one in `/proc/net/route`; without a default route v0.5.0 crashes on its first
//! bootstrap file), `/etc` an overlay of the machine's (the bootstrap kubeconfig is placed at the
//! path `hosts add` names, `/etc/byoh/bootstrap-kubeconfig.conf`; `/etc/os-release` reads
//! through), a private `/run`, `HOME` and working directory. The API server's port is forwarded
//! into its loopback, and the testbed forwards every tenant's port too (it is one of the
//! testbed's sandboxes).
//!
//! Everything the agent does on start-up is its own code against the real API: its CSR
//! (`kubernetes.io/kube-apiserver-client`, as the bootstrap token's user), approved by the real
//! BYOH manager and signed by kube-controller-manager's csrsigning controller with the client
//! CA; its kubeconfig written to `$HOME/.byoh/config`; its ByoHost created and its status
//! (host facts, interfaces, conditions) patched as `byoh:host:<name>`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::netns::NetSandbox;
use crate::{Error, Proc, Testbed};

/// Where `kubectl capi hosts add` tells the admin to put the bootstrap kubeconfig.
pub const BOOTSTRAP_KUBECONFIG: &str = "/etc/byoh/bootstrap-kubeconfig.conf";

pub struct HostAgent {
    pub host: String,
    /// The agent's `$HOME` (its kubeconfig is `.byoh/config` there).
    pub home: PathBuf,
    pub log: PathBuf,
    /// Held for the agent's lifetime (the testbed holds it too, to forward tenant ports).
    _sandbox: Arc<NetSandbox>,
    proc: Proc,
}

impl HostAgent {
    /// Starts the agent of `host` (address `ip` on its `eth0`) with `bootstrap_kubeconfig` (the
    /// text `hosts add` wrote) at [`BOOTSTRAP_KUBECONFIG`], running `command`: the words `hosts
    /// add` printed, from `byoh-hostagent` on.
    pub fn start(
        tb: &Testbed,
        host: &str,
        ip: std::net::Ipv4Addr,
        bootstrap_kubeconfig: &str,
        command: &[String],
    ) -> Result<HostAgent, Error> {
        let Some((program, args)) = command.split_first() else {
            return Err(Error::Start("no agent command given".into()));
        };
        if program != "byoh-hostagent" {
            return Err(Error::Start(format!(
                "the agent command starts with {program:?}, not byoh-hostagent"
            )));
        }
        let bin = crate::assets::built(&tb.assets.byoh, "the BYOH host agent was not built")?
            .join("byoh-hostagent");
        let dir = tb.dir.join("hosts").join(host);
        let etc = dir.join("etc");
        let conf = etc.join(BOOTSTRAP_KUBECONFIG.trim_start_matches("/etc/"));
        if let Some(parent) = conf.parent() {
            std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
        }
        std::fs::write(&conf, bootstrap_kubeconfig).map_err(|e| Error::io(&conf, e))?;
        let (home, work) = (dir.join("home"), dir.join("work"));
        for d in [&home, &work] {
            std::fs::create_dir_all(d).map_err(|e| Error::io(d, e))?;
        }
        let sandbox = NetSandbox::start_host(&dir, "host", host, ip, &etc)?;
        sandbox.forward(tb.api_port()?)?;
        let sandbox = Arc::new(sandbox);
        if let Ok(mut v) = tb.sandboxes.lock() {
            v.push(sandbox.clone());
        }
        let mut argv = vec![
            "--target".to_string(),
            sandbox.pid().to_string(),
            "--net".into(),
            "--mount".into(),
            "--uts".into(),
            format!("--wd={}", work.display()),
            "--".into(),
            bin.display().to_string(),
        ];
        argv.extend(args.iter().cloned());
        let log = dir.join("byoh-hostagent.log");
        let proc = Proc::spawn_with_env(
            &format!("byoh-hostagent-{host}"),
            Path::new("nsenter"),
            &argv,
            &log,
            &[("HOME", home.display().to_string())],
        )?;
        Ok(HostAgent {
            host: host.to_string(),
            home,
            log,
            _sandbox: sandbox,
            proc,
        })
    }

    /// The agent's kubeconfig, once its CSR was signed.
    pub fn kubeconfig(&self) -> PathBuf {
        self.home.join(".byoh").join("config")
    }

    /// The agent's log's last lines, for a failure message.
    pub fn log_tail(&self) -> String {
        let t = std::fs::read_to_string(&self.log).unwrap_or_default();
        let l: Vec<&str> = t.lines().collect();
        l[l.len().saturating_sub(30)..].join("\n")
    }

    /// Whether the agent process still runs.
    pub fn running(&mut self) -> bool {
        self.proc.exited().is_none()
    }
}

impl Drop for HostAgent {
    fn drop(&mut self) {
        self.proc.kill();
    }
}
