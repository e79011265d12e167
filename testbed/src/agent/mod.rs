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
//! (host facts, interfaces, conditions) patched as `byoh:host:<name>`. When BYOH's controller
//! attaches it to a machine, the agent runs the installer's script (unless started with
//! `--skip-installation`) and the bootstrap data, and on release `kubeadm reset` and the
//! uninstall script, all under `/bin/bash` as on a real host: only the programs in them that
//! would change a real machine are SIMULATED ([`host`]: `kubeadm`, `imgpkg`, `dpkg`,
//! `systemctl`, …), and the testbed answers `kubeadm join` by joining the workload cluster as
//! the kubelet would ([`kubelet`]).

pub(crate) mod controlplane;
mod host;
pub mod inbox;
pub mod join;
mod kubelet;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::netns::NetSandbox;
use crate::{Error, Proc, Testbed};

pub use host::{OS_RELEASE, SIMULATED_COMMANDS};

/// Where `kubectl capi hosts add` tells the admin to put the bootstrap kubeconfig.
pub const BOOTSTRAP_KUBECONFIG: &str = "/etc/byoh/bootstrap-kubeconfig.conf";

/// The agent command in what `kubectl capi hosts add` printed (its stderr's comment, or the
/// script's `exec` line): the words from `byoh-hostagent` on, up to a shell expansion.
pub fn command_in(printed: &str) -> Option<Vec<String>> {
    let line = printed
        .lines()
        .find(|l| l.contains("byoh-hostagent --bootstrap-kubeconfig"))?;
    let from = line.find("byoh-hostagent")?;
    Some(
        line[from..]
            .split_whitespace()
            .take_while(|w| !w.starts_with('$'))
            .map(String::from)
            .collect(),
    )
}

/// The `--namespace` of an agent command (BYOH's default when absent).
fn namespace_in(command: &[String]) -> String {
    command
        .windows(2)
        .find(|w| w[0] == "--namespace")
        .map(|w| w[1].clone())
        .unwrap_or_else(|| "default".into())
}

/// The bootstrap kubeconfig in the script `kubectl capi hosts add HOST` printed: the
/// single-quoted word its `printf '%s'` writes (each `'` in it written `'\''`).
pub fn bootstrap_kubeconfig_in(script: &str) -> Option<String> {
    let from = script.find("printf '%s' '")? + "printf '%s' ".len();
    let mut rest = &script[from..];
    let mut out = String::new();
    loop {
        let body = rest.strip_prefix('\'')?;
        let end = body.find('\'')?;
        out.push_str(&body[..end]);
        rest = &body[end + 1..];
        match rest.strip_prefix("\\'") {
            Some(r) => {
                out.push('\'');
                rest = r;
            }
            None => return Some(out),
        }
    }
}

/// A distinct address for each host this process starts (192.0.2.0/24, TEST-NET-1; each host
/// has a network namespace of its own, so hosts of other processes may reuse them).
pub fn next_ip() -> std::net::Ipv4Addr {
    static NEXT: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(10);
    let n = NEXT.fetch_add(1, Ordering::SeqCst);
    // 10..=250, then around again: no test runs that many hosts at once.
    std::net::Ipv4Addr::new(192, 0, 2, 10 + n.wrapping_sub(10) % 241)
}

/// What the host's SIMULATED `kubeadm join` does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kubelet {
    /// Joins the workload cluster as kubeadm and the kubelet would, and keeps the Node's
    /// heartbeat ([`kubelet`]).
    Joins,
    /// Succeeds without joining: the test plays the host's Node (its workload cluster is the
    /// testbed's own API server, which no kubelet can join).
    Played,
}

/// Onboards `host` as an admin does: `kubectl capi hosts add HOST --label K=V… [--preinstalled]
/// -n NS` (the binary `capi`), then the script it printed run on a new host.
pub fn onboard(
    tb: &Testbed,
    capi: &Path,
    ns: &str,
    host: &str,
    labels: &[(String, String)],
    preinstalled: bool,
    kubelet: Kubelet,
) -> Result<HostAgent, Error> {
    onboard_image(
        tb,
        capi,
        ns,
        host,
        labels,
        preinstalled,
        kubelet,
        &HostImage::default(),
    )
}

/// [`onboard`] onto a host whose image is `image`.
#[allow(clippy::too_many_arguments)]
pub fn onboard_image(
    tb: &Testbed,
    capi: &Path,
    ns: &str,
    host: &str,
    labels: &[(String, String)],
    preinstalled: bool,
    kubelet: Kubelet,
    image: &HostImage,
) -> Result<HostAgent, Error> {
    let mut args = vec!["hosts".to_string(), "add".into(), host.to_string()];
    for (k, v) in labels {
        args.extend(["--label".to_string(), format!("{k}={v}")]);
    }
    if preinstalled {
        args.push("--preinstalled".into());
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let bin = capi
        .to_str()
        .ok_or_else(|| Error::Start(format!("{capi:?}: not UTF-8")))?;
    let o = crate::fixtures::run::plugin_in(bin, &tb.kubeconfig, ns, &args);
    let (out, err) = (
        crate::fixtures::run::stdout(&o),
        crate::fixtures::run::stderr(&o),
    );
    if !o.status.success() {
        return Err(Error::Start(format!(
            "kubectl capi hosts add {host}: {err}"
        )));
    }
    HostAgent::start_script(tb, host, next_ip(), &out, kubelet, image)
}

/// What a host's image carries, as its preflight and the script `hosts add` printed read it:
/// SIMULATED, standing in for a real machine's kernel state (`/proc`, `/sys`, as kubeadm's own
/// preflight reads them, `cmd/kubeadm/app/preflight/checks.go`) and installed packages.
#[derive(Clone, Debug, Default)]
pub struct HostImage {
    /// What `kubelet --version` says on the host (`v1.35.4`); `None`: no kubelet installed.
    pub kubelet_version: Option<String>,
    /// A kernel module the host has not loaded (its preflight fails on it).
    pub missing_module: Option<String>,
}

pub struct HostAgent {
    pub host: String,
    /// The agent's `$HOME` (its kubeconfig is `.byoh/config` there).
    pub home: PathBuf,
    pub log: PathBuf,
    /// The host's directory (its `/etc` upper layer, its SIMULATED programs and their log).
    pub dir: PathBuf,
    /// Held for the agent's lifetime (the testbed holds it too, to forward tenant ports).
    _sandbox: Arc<NetSandbox>,
    proc: Proc,
    powered: Arc<AtomicBool>,
    kubelet: Option<tokio::task::JoinHandle<()>>,
    /// The SIMULATED containerd socket the preflight looks for (bound while the host runs).
    _containerd: Option<std::os::unix::net::UnixListener>,
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
        HostAgent::start_with(tb, host, ip, bootstrap_kubeconfig, command, Kubelet::Joins)
    }

    /// [`HostAgent::start`] with the given [`Kubelet`].
    pub fn start_with(
        tb: &Testbed,
        host: &str,
        ip: std::net::Ipv4Addr,
        bootstrap_kubeconfig: &str,
        command: &[String],
        kubelet: Kubelet,
    ) -> Result<HostAgent, Error> {
        let Some((program, args)) = command.split_first() else {
            return Err(Error::Start("no agent command given".into()));
        };
        if program != "byoh-hostagent" {
            return Err(Error::Start(format!(
                "the agent command starts with {program:?}, not byoh-hostagent"
            )));
        }
        let agent_bin = crate::assets::built(&tb.assets.byoh, "the BYOH host agent was not built")?
            .join("byoh-hostagent");
        let dir = tb.dir.join("hosts").join(host);
        let conf = dir
            .join("etc")
            .join(BOOTSTRAP_KUBECONFIG.trim_start_matches("/etc/"));
        if let Some(parent) = conf.parent() {
            std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
        }
        std::fs::write(&conf, bootstrap_kubeconfig).map_err(|e| Error::io(&conf, e))?;
        let mut argv = vec![agent_bin.display().to_string()];
        argv.extend(args.iter().cloned());
        Self::boot(tb, host, ip, namespace_in(command), argv, kubelet, None)
    }

    /// Runs `script` (what `kubectl capi hosts add HOST` printed on stdout) with `/bin/sh` on
    /// a new host whose image is `image`, as root runs it there: its preflight reads the
    /// image's SIMULATED kernel state (`PREFLIGHT_ROOT`), then it writes the bootstrap
    /// kubeconfig and execs the real agent, which is on the host's `PATH`. A preflight that
    /// fails ends the script: [`HostAgent::running`] turns false and the log says why.
    pub fn start_script(
        tb: &Testbed,
        host: &str,
        ip: std::net::Ipv4Addr,
        script: &str,
        kubelet: Kubelet,
        image: &HostImage,
    ) -> Result<HostAgent, Error> {
        let command = command_in(script)
            .ok_or_else(|| Error::Start(format!("no agent command in:\n{script}")))?;
        let agent_bin = crate::assets::built(&tb.assets.byoh, "the BYOH host agent was not built")?
            .join("byoh-hostagent");
        let dir = tb.dir.join("hosts").join(host);
        let (root, socket) = host::image(&dir, host, image, &agent_bin)?;
        let path = dir.join("onboard.sh");
        std::fs::write(&path, script).map_err(|e| Error::io(&path, e))?;
        let argv = vec!["/bin/sh".to_string(), path.display().to_string()];
        Self::boot(
            tb,
            host,
            ip,
            namespace_in(&command),
            argv,
            kubelet,
            Some((root, socket)),
        )
    }

    /// A new host of the testbed running `argv` (the agent, or a script that execs it) in its
    /// namespaces; `image`: the preflight's root and the containerd socket held for it.
    fn boot(
        tb: &Testbed,
        host: &str,
        ip: std::net::Ipv4Addr,
        namespace: String,
        argv: Vec<String>,
        kubelet: Kubelet,
        image: Option<(PathBuf, std::os::unix::net::UnixListener)>,
    ) -> Result<HostAgent, Error> {
        let dir = tb.dir.join("hosts").join(host);
        let etc = dir.join("etc");
        let bin = dir.join("bin");
        host::write(&dir, &bin, &etc)?;
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
        let mut nsenter = vec![
            "--target".to_string(),
            sandbox.pid().to_string(),
            "--net".into(),
            "--mount".into(),
            "--uts".into(),
            format!("--wd={}", work.display()),
            "--".into(),
        ];
        nsenter.extend(argv);
        let log = dir.join("byoh-hostagent.log");
        let path = std::env::var("PATH").unwrap_or_else(|_| "/usr/sbin:/usr/bin:/sbin:/bin".into());
        let mut env = vec![
            ("HOME", home.display().to_string()),
            // The SIMULATED programs first ([`host`]).
            ("PATH", format!("{}:{path}", bin.display())),
        ];
        let containerd = image.map(|(root, socket)| {
            env.push(("PREFLIGHT_ROOT", root.display().to_string()));
            socket
        });
        let proc = Proc::spawn_with_env(
            &format!("byoh-hostagent-{host}"),
            Path::new("nsenter"),
            &nsenter,
            &log,
            &env,
        )?;
        let hosts_file = kubelet_hosts(tb, host)?;
        let powered = Arc::new(AtomicBool::new(true));
        // The kubelet side needs a runtime; a caller without one gets an agent that registers
        // and bootstraps but whose `kubeadm` is never answered (and says so after its wait).
        let kubelet = tokio::runtime::Handle::try_current().ok().map(|rt| {
            rt.spawn(kubelet::run(kubelet::Host {
                kubeconfig: tb.kubeconfig.clone(),
                name: host.to_string(),
                namespace,
                ip,
                spool: dir.join("spool"),
                powered: powered.clone(),
                joins: kubelet == Kubelet::Joins,
                etc: etc.clone(),
                dir: dir.clone(),
                assets: tb.assets.clone(),
                hosts_file,
                sandboxes: tb.sandboxes.clone(),
            }))
        });
        Ok(HostAgent {
            host: host.to_string(),
            home,
            log,
            dir,
            _sandbox: sandbox,
            proc,
            powered,
            kubelet,
            _containerd: containerd,
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

    /// Whether the agent finished starting: its ByoHost controller runs workers (controller-
    /// runtime logs "Starting workers" once its caches synced). Before that a stopped agent
    /// ([`HostAgent::power`]) can hold a start-up request whose client timeout runs out while it
    /// is stopped, and v0.5.0 exits on it ("unable to start manager") instead of retrying.
    pub fn started(&self) -> bool {
        std::fs::read_to_string(&self.log).is_ok_and(|t| t.contains("\"msg\"=\"Starting workers\""))
    }

    /// The SIMULATED programs the host ran, one line each (`kubeadm reset --force`, …).
    pub fn commands(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.join("commands.log"))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// Fault injection: powers the host off (`on` false) or back on. Off, the agent's process
    /// is stopped (SIGSTOP) and its SIMULATED kubelet sends no heartbeat, as a host that lost
    /// power or network; back on, both carry on with their state intact.
    pub fn power(&self, on: bool) {
        self.powered.store(on, Ordering::SeqCst);
        let signal = if on { "-CONT" } else { "-STOP" };
        let _ = std::process::Command::new("kill")
            .args([signal, &self.proc.pid().to_string()])
            .status();
    }

    /// Whether the agent process still runs.
    pub fn running(&mut self) -> bool {
        self.proc.exited().is_none()
    }
}

/// The testbed's hosts file of host names to 127.0.0.1, where each host's SIMULATED kubelet
/// API listens (the hosts' own addresses are not routable from the testbed's processes), with
/// `host` added: what the control planes' kube-apiservers resolve Nodes' `Hostname` addresses
/// by (kube-apiserver's default `--kubelet-preferred-address-types` tries it first). Appended
/// in place, so a bind mount of it sees each new line.
fn kubelet_hosts(tb: &Testbed, host: &str) -> Result<PathBuf, Error> {
    use std::io::Write;
    let path = tb.dir.join("kubelet-hosts");
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(|e| Error::io(&path, e))?;
    let line = if f.metadata().map(|m| m.len()).unwrap_or(0) == 0 {
        format!("127.0.0.1 localhost\n::1 localhost\n127.0.0.1 {host}\n")
    } else {
        format!("127.0.0.1 {host}\n")
    };
    f.write_all(line.as_bytes())
        .map_err(|e| Error::io(&path, e))?;
    Ok(path)
}

impl Drop for HostAgent {
    fn drop(&mut self) {
        if let Some(k) = self.kubelet.take() {
            k.abort();
        }
        // A stopped process takes SIGKILL too.
        self.proc.kill();
    }
}

#[cfg(test)]
mod script_tests {
    #[test]
    fn the_kubeconfig_comes_out_of_the_script_quotes_and_all() {
        let script = "umask 077\nprintf '%s' 'apiVersion: v1\n# it'\\''s '\\''quoted'\\''\n' >'/etc/b.conf'.tmp && mv\n";
        assert_eq!(
            super::bootstrap_kubeconfig_in(script).as_deref(),
            Some("apiVersion: v1\n# it's 'quoted'\n")
        );
        assert_eq!(super::bootstrap_kubeconfig_in("exec byoh-hostagent"), None);
    }
}
