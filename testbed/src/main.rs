//! `capi-testbed`: runs the testbed as a sandbox for people (and `make sandbox` / `make demo`).
//!
//! ```text
//! capi-testbed up   --dir .sandbox [--profile full|v1beta1|bare] [--capi] [--real|--day0]
//! capi-testbed down --dir .sandbox
//! capi-testbed host --dir .sandbox NAME SCRIPT    # a host runs what `hosts add` printed
//! capi-testbed build [--capi]                                               # assets only
//! capi-testbed seed [--dir DIR | --kubeconfig FILE] [--namespace NS] [--hosts N] [--machines N]
//!                   [--clusters N] [--deployments N]                          # fixtures
//! ```
//! `seed` writes a fixture fleet (`testbed::fixtures::fleet`) into a running sandbox: ByoHosts in
//! every state, Machines, ByoMachines, MachineDeployments, clusters (one Kamaji) with status, as
//! the real controllers would have written them. Defaults: `--namespace bench`, 30 hosts, 20
//! machines, 3 clusters, 2 MachineDeployments.
//! `up` writes `<dir>/kubeconfig`, then `<dir>/ready`, and runs until SIGINT or SIGTERM, when it
//! stops every process it started. Each `up` is a fresh cluster: the etcd data an earlier run
//! left in `<dir>` is removed (the new API server has a new port and new certificates, so
//! objects naming the old one would mislead), and `up` refuses while a sandbox runs there.
//! `host` onboards a host into a running `up --real`: the script `kubectl capi hosts add`
//! printed (its preflight, the bootstrap kubeconfig, the agent) runs on a new host of the
//! sandbox with the real BYOH agent (`testbed::agent`). `up --day0` is a bare cluster for `kubectl capi init`
//! ([`testbed::shared_day0`]): every upstream controller's image in the registry
//! (`<dir>/registry`), the site's datastore certificates applied and its DataStores written to
//! `<dir>/datastores.yaml`, hosts served as with `--real`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use testbed::{Options, Profile, Testbed};

fn usage() -> ExitCode {
    eprintln!(
        "usage: capi-testbed up --dir DIR [--profile full|v1beta1|bare] [--capi] [--real|--day0] [--audit]\n       capi-testbed down --dir DIR\n       capi-testbed host --dir DIR [--kubelet-version V] NAME SCRIPT\n       capi-testbed build [--capi]\n       capi-testbed seed [--dir DIR | --kubeconfig FILE] [--namespace NS] [--hosts N] [--machines N] [--clusters N] [--deployments N]"
    );
    ExitCode::from(2)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("TESTBED_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,kube_client=off")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(testbed::log_colours())
        .try_init();
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().is_some_and(|a| a == "host") {
        return host(&args[1..]);
    }
    let Some(mut cli) = Cli::parse(&args) else {
        return usage();
    };
    match cli.cmd.as_str() {
        "build" => match testbed::Assets::ensure_for(cli.capi, cli.real, cli.real) {
            Ok(a) => {
                println!("{}", a.k8s.display());
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
        },
        "up" if cli.day0 && (cli.real || cli.capi) => usage(),
        "up" => {
            up(
                cli.dir,
                cli.profile,
                cli.capi,
                cli.real,
                cli.day0,
                cli.audit,
            )
            .await
        }
        "down" => down(cli.dir),
        "seed" => {
            if let Some(n) = cli.hosts_given {
                cli.seed.hosts = n;
            }
            // Big fleets skip the per-host events.
            cli.seed.events = cli.seed.hosts <= 1000;
            let kubeconfig = cli.kubeconfig.unwrap_or_else(|| cli.dir.join("kubeconfig"));
            seed_fleet(&kubeconfig, &cli.seed_ns, &cli.seed).await
        }
        _ => usage(),
    }
}

/// The command line: the command and every flag (each command reads the ones it takes).
struct Cli {
    cmd: String,
    dir: PathBuf,
    profile: Profile,
    capi: bool,
    real: bool,
    day0: bool,
    audit: bool,
    seed: testbed::fixtures::FleetSpec,
    seed_ns: String,
    kubeconfig: Option<PathBuf>,
    /// `--hosts`: the fleet's host count for `seed`.
    hosts_given: Option<usize>,
}

impl Cli {
    /// `None` when the command line is not one [`usage`] shows.
    fn parse(args: &[String]) -> Option<Cli> {
        let mut cli = Cli {
            cmd: args.first()?.clone(),
            dir: PathBuf::from(".sandbox"),
            profile: Profile::Full,
            capi: false,
            real: false,
            day0: false,
            audit: false,
            seed: testbed::fixtures::FleetSpec::small(),
            seed_ns: "bench".to_string(),
            kubeconfig: None,
            hosts_given: None,
        };
        let mut it = args.iter().skip(1);
        while let Some(a) = it.next() {
            cli.flag(a, &mut it)?;
        }
        Some(cli)
    }

    /// Applies flag `a`, taking its value from `it`; `None` for an unknown flag or a missing or
    /// bad value.
    fn flag<'a>(&mut self, a: &str, it: &mut impl Iterator<Item = &'a String>) -> Option<()> {
        match a {
            "--dir" => self.dir = PathBuf::from(it.next()?),
            "--profile" => self.profile = Profile::parse(it.next()?)?,
            "--capi" => self.capi = true,
            // The real Kamaji operator and BYOH controller (and so the CAPI manager too).
            "--real" => {
                self.capi = true;
                self.real = true;
            }
            "--day0" => self.day0 = true,
            "--audit" => self.audit = true,
            "--hosts" => self.hosts_given = Some(it.next()?.parse().ok()?),
            "--machines" => self.seed.machines = it.next()?.parse().ok()?,
            "--clusters" => self.seed.clusters = it.next()?.parse().ok().filter(|n| *n > 0)?,
            "--deployments" => self.seed.machine_deployments = it.next()?.parse().ok()?,
            "--namespace" => self.seed_ns = it.next()?.clone(),
            "--kubeconfig" => self.kubeconfig = Some(PathBuf::from(it.next()?)),
            _ => return None,
        }
        Some(())
    }
}

async fn seed_fleet(
    kubeconfig: &std::path::Path,
    ns: &str,
    spec: &testbed::fixtures::FleetSpec,
) -> ExitCode {
    let t0 = std::time::Instant::now();
    let client = match testbed::client_for(kubeconfig).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {}: {e}", kubeconfig.display());
            return ExitCode::FAILURE;
        }
    };
    if let Err(e) = testbed::fixtures::ensure_namespace(&client, ns).await {
        eprintln!("error: creating namespace {ns}: {e}");
        return ExitCode::FAILURE;
    }
    match testbed::fixtures::fleet(&client, ns, spec).await {
        Ok(f) => {
            eprintln!(
                "seeded namespace {ns} ({}): {} clusters, {} MachineDeployments, {} Machines, {} ByoHosts in {:.1?}",
                f.capi_version,
                f.clusters.len(),
                f.machine_deployments.len(),
                f.machines.len(),
                f.hosts.len(),
                t0.elapsed()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: seeding namespace {ns}: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn up(
    dir: PathBuf,
    profile: Profile,
    capi: bool,
    real: bool,
    day0: bool,
    audit: bool,
) -> ExitCode {
    let dir = match std::path::absolute(&dir) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: {}: {e}", dir.display());
            return ExitCode::FAILURE;
        }
    };
    // Each `up` starts clean (see `Options::dir`), so it must not wipe a sandbox still running.
    if let Some(pid) = running_in(&dir) {
        eprintln!(
            "error: a sandbox is already running in {} (pid {pid})\nhint: stop it first: capi-testbed down --dir {}",
            dir.display(),
            dir.display()
        );
        return ExitCode::FAILURE;
    }
    let _ = std::fs::remove_file(dir.join("ready"));
    let _ = std::fs::create_dir_all(&dir);
    let _ = std::fs::write(dir.join("pid"), std::process::id().to_string());
    let tb = match Testbed::start(Options {
        profile: if day0 { Profile::Bare } else { profile },
        controller_manager: true,
        capi_manager: capi,
        kamaji: real,
        byoh: real,
        // The local registry and its pods' kubelet: `kubectl kamaji install --image` of the
        // reconciler's image (`make image`) runs in the sandbox as it would on a cluster, and on
        // day 0 every controller `kubectl capi init` installs.
        images: real || day0,
        tenants: day0,
        node: false,
        audit,
        dir: Some(dir.clone()),
    })
    .await
    {
        Ok(tb) => {
            if let Some(r) = &tb.registry {
                let _ = std::fs::write(dir.join("registry"), r);
            }
            tb
        }
        Err(e) => {
            eprintln!("error: the sandbox did not start: {e}");
            let _ = std::fs::write(dir.join("failed"), e.to_string());
            return ExitCode::FAILURE;
        }
    };
    if day0 && let Err(e) = day0_site(&tb, &dir).await {
        eprintln!("error: the day-0 sandbox did not start: {e}");
        let _ = std::fs::write(dir.join("failed"), &e);
        tb.stop();
        return ExitCode::FAILURE;
    }
    let _ = std::fs::write(dir.join("ready"), tb.server.as_bytes());
    eprintln!(
        "sandbox ready: {} ({} profile{})",
        tb.server,
        profile.as_str(),
        if day0 {
            ", day 0: every controller's image in the registry, for kubectl capi init"
        } else if real {
            ", real CAPI v1.14, Kamaji and BYOH controllers"
        } else if capi {
            ", real CAPI v1.14 core manager"
        } else {
            ""
        }
    );
    // Hosts onboarded meanwhile (`capi-testbed host`) get their real agent.
    let mut agents = Vec::new();
    let stop = stop_signal();
    tokio::pin!(stop);
    loop {
        tokio::select! {
            r = &mut stop => {
                if let Err(e) = r {
                    eprintln!("error: cannot watch SIGTERM: {e}");
                    return ExitCode::FAILURE;
                }
                break;
            }
            _ = tokio::time::sleep(Duration::from_millis(300)), if real || day0 => {
                testbed::agent::inbox::serve(&tb, &dir, &mut agents);
            }
        }
    }
    drop(agents);
    tb.stop();
    let _ = std::fs::remove_file(dir.join("ready"));
    let _ = std::fs::remove_file(dir.join("pid"));
    eprintln!("sandbox stopped");
    ExitCode::SUCCESS
}

/// `capi-testbed host --dir DIR [--kubelet-version V] NAME SCRIPT`: runs the script `kubectl
/// capi hosts add NAME` printed on a new host of the sandbox in DIR (a machine of its own,
/// `testbed::agent`, with a kubelet of version V installed if given): its preflight, the
/// bootstrap kubeconfig it writes, and the real agent it starts, by the sandbox's runner.
fn host(args: &[String]) -> ExitCode {
    let (dir, rest) = match args {
        [flag, dir, rest @ ..] if flag == "--dir" => (PathBuf::from(dir), rest),
        rest => (PathBuf::from(".sandbox"), rest),
    };
    let (kubelet, rest) = match rest {
        [flag, v, rest @ ..] if flag == "--kubelet-version" => (Some(v.as_str()), rest),
        rest => (None, rest),
    };
    let [name, script] = rest else {
        return usage();
    };
    // The script holds a bootstrap kubeconfig and the preflight: a few KiB; past 1 MiB it is not one.
    const MAX: u64 = 1 << 20;
    let text = match std::fs::metadata(script).and_then(|m| {
        if m.len() > MAX {
            Err(std::io::Error::other(
                "larger than 1 MiB: not what kubectl capi hosts add prints",
            ))
        } else {
            std::fs::read_to_string(script)
        }
    }) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {script}: {e}");
            return ExitCode::from(2);
        }
    };
    match testbed::agent::inbox::request(&dir, name, &text, kubelet) {
        Ok(msg) => {
            eprintln!("{msg}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The pid of a `capi-testbed` still running in `dir` (its `pid` file names a live process of
/// this program), if any.
/// What a site has before `kubectl capi init` on day 0: the controllers' images in its mirror,
/// and its datastore's certificates, with the DataStores to give init in `<dir>/datastores.yaml`.
async fn day0_site(tb: &Testbed, dir: &std::path::Path) -> Result<(), String> {
    let pushed = testbed::images::push_upstream(tb)
        .await
        .map_err(|e| e.to_string())?;
    eprintln!(
        "pushed {} upstream controller images to the registry",
        pushed.len()
    );
    let stores = tb
        .datastores
        .as_ref()
        .ok_or("the day-0 testbed started no datastore")?;
    let client = tb.client().await;
    stores
        .apply_secrets(&client)
        .await
        .map_err(|e| e.to_string())?;
    let file = dir.join("datastores.yaml");
    std::fs::write(&file, stores.datastores_file(|n| format!("site-{n}")))
        .map_err(|e| format!("{}: {e}", file.display()))
}

fn running_in(dir: &std::path::Path) -> Option<i32> {
    let pid: i32 = std::fs::read_to_string(dir.join("pid"))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let ours = pid != std::process::id() as i32
        && String::from_utf8_lossy(&cmdline).contains("capi-testbed");
    ours.then_some(pid)
}

/// Returns on SIGINT or SIGTERM.
async fn stop_signal() -> std::io::Result<()> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {},
        _ = term.recv() => {},
    }
    Ok(())
}

fn down(dir: PathBuf) -> ExitCode {
    let pid_file = dir.join("pid");
    let Ok(pid) = std::fs::read_to_string(&pid_file) else {
        eprintln!("no sandbox is running in {}", dir.display());
        return ExitCode::SUCCESS;
    };
    let Ok(pid) = pid.trim().parse::<i32>() else {
        let _ = std::fs::remove_file(&pid_file);
        return ExitCode::SUCCESS;
    };
    // SAFETY: plain syscalls on a pid we wrote ourselves.
    unsafe {
        libc::kill(pid, libc::SIGTERM);
    }
    for _ in 0..100 {
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_file(&pid_file);
            eprintln!("sandbox stopped");
            return ExitCode::SUCCESS;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    // SAFETY: as above.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
    let _ = std::fs::remove_file(&pid_file);
    eprintln!("sandbox killed");
    ExitCode::SUCCESS
}
