//! `kamaji-reconciler`: the KamajiControlPlane provider process.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Parser;
use kamaji_reconciler::controller::{self, Config};
use kamaji_reconciler::metrics::Metrics;
use kamaji_reconciler::{certificates, findings, leader, server};

/// The KamajiControlPlane provider for Cluster API: turns KamajiControlPlanes into Kamaji
/// TenantControlPlanes, publishes their endpoint and kubeconfig, and steps upgrades one minor
/// at a time. Watch-driven: idle, it makes no API requests.
#[derive(Parser, Debug)]
#[command(name = "kamaji-reconciler", version)]
struct Args {
    /// Kubeconfig to use (out of cluster); in-cluster config or $KUBECONFIG otherwise.
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: Option<PathBuf>,
    /// Kubeconfig context.
    #[arg(long)]
    context: Option<String>,
    /// Reconcile KamajiControlPlanes of this namespace only (default: all namespaces); the same
    /// as --namespaces with one namespace.
    #[arg(long, value_parser = one_namespace, conflicts_with = "namespaces")]
    namespace: Option<String>,
    /// Watch only these namespaces, comma-separated (at most 32): each is watched on its own,
    /// so Roles in them suffice (`kubectl kamaji install --namespaces` grants them so). Default:
    /// all namespaces, which needs the ClusterRole of the cluster-wide install.
    #[arg(long, value_name = "NS,NS", value_parser = namespace_list)]
    namespaces: Option<Namespaces>,
    /// Elect a leader through a coordination.k8s.io Lease before reconciling.
    #[arg(long)]
    leader_elect: bool,
    /// Namespace of the leader-election Lease.
    #[arg(long, env = "POD_NAMESPACE", default_value = kamaji_reconciler::DEFAULT_NAMESPACE)]
    leader_election_namespace: String,
    /// Address of /healthz, /readyz and /metrics ("0" disables).
    #[arg(long, default_value = ":8080", value_parser = bind_address)]
    metrics_bind_address: String,
    // The flag of CACPPK v0.20.0 (main.go of clastix/cluster-api-control-plane-provider-kamaji),
    // whose default there is ":8081".
    /// A second address for /healthz and /readyz (upstream's flag; "0" disables).
    #[arg(long, default_value = "0", value_parser = bind_address)]
    health_probe_bind_address: String,
    /// More infrastructure-cluster kinds whose spec.controlPlaneEndpoint is set (comma-separated
    /// kinds of group infrastructure.cluster.x-k8s.io; grant RBAC for them yourself).
    #[arg(long, value_delimiter = ',')]
    dynamic_infrastructure_clusters: Vec<String>,
    /// Do not patch or check infrastructure clusters.
    #[arg(long)]
    skip_infra_cluster_patch: bool,
    /// Allow deployment.externalClusterReference (TenantControlPlane in another cluster).
    #[arg(long)]
    external_cluster_reference: bool,
    /// Allow the external kubeconfig Secret in another namespace than the KamajiControlPlane's.
    #[arg(long)]
    external_cluster_reference_cross_namespace: bool,
    /// Concurrent reconciles.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=64))]
    max_concurrent_reconciles: u16,
    /// How often the TenantControlPlanes' certificates are read, for /metrics and the
    /// KamajiControlPlanes' CertificatesExpiring condition: one paged LIST of Kamaji's Secrets;
    /// then, with --findings-scan, the fleet doctor's findings are counted (10s to 24h; e.g.
    /// 10m, 1h).
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = scan_interval)]
    cert_scan_interval: Duration,
    /// CertificatesExpiring is True once a certificate of the tenant expires within this long
    /// (days or a Go duration: 30d, 720h; at most 3650d).
    #[arg(long, value_name = "DURATION", default_value = "30d", value_parser = kcore::text::parse_cert_warn)]
    cert_warn: Duration,
    /// A Machine, TenantControlPlane or upgrade step in a passing state longer than this counts
    /// as stuck among the findings on /metrics, counted at each certificate scan (1m to 24h;
    /// e.g. 15m, 1h).
    #[arg(long, value_name = "DURATION", default_value = "15m", value_parser = stuck_after)]
    stuck_after: Duration,
    /// Count the fleet doctor's findings on /metrics after each certificate scan: one paged LIST
    /// of each kind its checks read, held while they run (about 300 MiB at 10,000 hosts and
    /// 10,000 machines, against the reconciler's 30 MiB without it), hence off unless asked for.
    #[arg(long)]
    findings_scan: bool,
    /// A PersistentVolumeClaim mounted for TenantBackups' persistentVolumeClaim targets, as
    /// CLAIM=DIR (repeatable, at most 16); `kubectl kamaji install --backup-claim` sets it.
    #[arg(long = "backup-volume", value_name = "CLAIM=DIR")]
    backup_volumes: Vec<String>,
    /// Print the CRDs as YAML and exit.
    #[arg(long)]
    print_crds: bool,
    /// Benchmark aid: stop after this many seconds and print the reconcile count and peak RSS.
    #[arg(long, value_name = "SECONDS")]
    exit_after: Option<u64>,
    /// More logging (-v info, -vv debug, -vvv trace).
    #[arg(short, long, action = clap::ArgAction::Count)]
    verbose: u8,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(clap::Subcommand, Debug)]
enum Command {
    /// Print the clusterctl release assets (components.yaml), or write them as a clusterctl
    /// local repository: the same objects as `kubectl kamaji install`, with the image as the
    /// clusterctl variable KAMAJI_RECONCILER_IMAGE
    Manifests {
        /// Write DIR/control-plane-kamaji/<version>/components.yaml and metadata.yaml
        /// (clusterctl's local-repository layout) instead of printing components.yaml
        #[arg(long, value_name = "DIR")]
        output_dir: Option<PathBuf>,
    },
}

/// The namespaces of `--namespaces`, checked when the flags are parsed (exit 2).
#[derive(Clone, Debug)]
struct Namespaces(Vec<String>);

fn namespace_list(s: &str) -> std::result::Result<Namespaces, String> {
    kcore::install::parse_namespaces(s).map(Namespaces)
}

/// `--namespace`: one namespace name.
fn one_namespace(s: &str) -> std::result::Result<String, String> {
    match kcore::install::parse_namespaces(s)?.as_slice() {
        [one] => Ok(one.clone()),
        _ => Err("one namespace only; use --namespaces for several".into()),
    }
}

impl Args {
    /// The namespaces watched (all when empty): `--namespaces`, or `--namespace`.
    fn namespaces(&self) -> Vec<String> {
        match (&self.namespaces, &self.namespace) {
            (Some(Namespaces(list)), _) => list.clone(),
            (None, Some(one)) => vec![one.clone()],
            (None, None) => Vec::new(),
        }
    }
}

/// A bind address flag, checked when the flags are parsed (exit 2) rather than at start-up.
fn bind_address(s: &str) -> std::result::Result<String, String> {
    parse_addr(s)
        .map(|_| s.to_string())
        .map_err(|e| e.to_string())
}

/// The shortest and longest `--cert-scan-interval`: each scan is a paged LIST of every
/// certificate Secret, and a day is as stale as an alert may be.
const SCAN_INTERVAL: std::ops::RangeInclusive<Duration> =
    Duration::from_secs(10)..=Duration::from_secs(24 * 3600);

/// `--cert-scan-interval`: a Go duration within [`SCAN_INTERVAL`].
fn scan_interval(s: &str) -> std::result::Result<Duration, String> {
    duration_within(s, &SCAN_INTERVAL, "10s to 24h")
}

/// The shortest and longest `--stuck-after`: a Machine takes minutes to move on, and a day
/// stuck is as long as an alert may wait.
const STUCK_AFTER: std::ops::RangeInclusive<Duration> =
    Duration::from_secs(60)..=Duration::from_secs(24 * 3600);

/// `--stuck-after`: a Go duration within [`STUCK_AFTER`].
fn stuck_after(s: &str) -> std::result::Result<Duration, String> {
    duration_within(s, &STUCK_AFTER, "1m to 24h")
}

/// A Go duration within `range` (`says` in words, for the error).
fn duration_within(
    s: &str,
    range: &std::ops::RangeInclusive<Duration>,
    says: &str,
) -> std::result::Result<Duration, String> {
    let d = kcore::text::parse_duration(s)?;
    if !range.contains(&d) {
        return Err(format!("{s:?} is out of range ({says})"));
    }
    Ok(d)
}

fn parse_addr(s: &str) -> Result<Option<SocketAddr>> {
    if s == "0" || s.is_empty() {
        return Ok(None);
    }
    let s = if s.starts_with(':') {
        format!("0.0.0.0{s}")
    } else {
        s.to_string()
    };
    Ok(Some(s.parse().with_context(|| {
        format!("invalid bind address {s:?}; use host:port or :port")
    })?))
}

fn peak_rss_kib() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

async fn client(args: &Args, metrics: Arc<Metrics>) -> Result<kube::Client> {
    use kube::config::{KubeConfigOptions, Kubeconfig};
    let opts = KubeConfigOptions {
        context: args.context.clone(),
        ..Default::default()
    };
    let cfg = match &args.kubeconfig {
        Some(p) => {
            let kc = Kubeconfig::read_from(p)
                .with_context(|| format!("reading kubeconfig {}", p.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &opts).await?
        }
        None => kube::Config::infer()
            .await
            .context("no kubeconfig: pass --kubeconfig, set KUBECONFIG, or run in a cluster")?,
    };
    Ok(kamaji_reconciler::metrics::counting_client(cfg, metrics)?)
}

/// `--print-crds`: the CRDs as a YAML stream (the KamajiControlPlane's and the upgrades').
fn print_crds() -> Result<()> {
    let ops = kcore::ops::try_crds().map_err(|e| anyhow::anyhow!("{e}"))?;
    for c in kamaji_reconciler::try_crds()?.into_iter().chain(ops) {
        let mut v = serde_json::to_value(&c)?;
        v["apiVersion"] = "apiextensions.k8s.io/v1".into();
        v["kind"] = "CustomResourceDefinition".into();
        print!("---\n{}", serde_saphyr::to_string(&v)?);
    }
    Ok(())
}

/// `manifests`: components.yaml on stdout, or both assets written (atomically) into a clusterctl
/// local repository under `dir`.
fn manifests(dir: Option<&std::path::Path>) -> Result<()> {
    use kamaji_reconciler::provider;
    let components = provider::components_yaml()?;
    let Some(dir) = dir else {
        print!("{components}");
        return Ok(());
    };
    for (file, text) in [
        (provider::COMPONENTS_FILE, components),
        (provider::METADATA_FILE, provider::metadata_yaml()),
    ] {
        let path = dir.join(provider::repository_path(file));
        let parent = path
            .parent()
            .with_context(|| format!("{} has no parent directory", path.display()))?;
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
        let tmp = path.with_extension("yaml.tmp");
        std::fs::write(&tmp, text).with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::rename(&tmp, &path).with_context(|| format!("writing {}", path.display()))?;
        println!("{}", path.display());
    }
    Ok(())
}

/// Starts `/healthz`, `/readyz` and `/metrics` on each distinct bind address (both flags may
/// name the same one).
fn serve_http(args: &Args, metrics: &Arc<Metrics>, ready: &Arc<AtomicBool>) -> Result<()> {
    let mut addrs = Vec::new();
    for a in [&args.metrics_bind_address, &args.health_probe_bind_address] {
        if let Some(a) = parse_addr(a)?
            && !addrs.contains(&a)
        {
            addrs.push(a);
        }
    }
    for a in addrs {
        let (m, r) = (metrics.clone(), ready.clone());
        tokio::spawn(async move {
            if let Err(e) = server::serve(a, m, r).await {
                tracing::error!("HTTP server on {a}: {e}");
            }
        });
    }
    Ok(())
}

/// With `--leader-elect`, waits for the Lease; the handle ends when the Lease is lost.
/// With `--leader-elect`, blocks until this process holds the Lease; returns the renewal task
/// (it ends when leadership is lost) and this process's identity.
async fn leader_lease(
    args: &Args,
    client: &kube::Client,
) -> Result<Option<(tokio::task::JoinHandle<()>, String)>> {
    if !args.leader_elect {
        return Ok(None);
    }
    let id = std::env::var("POD_NAME").unwrap_or_else(|_| {
        format!(
            "{}-{}",
            std::env::var("HOSTNAME").unwrap_or_else(|_| "kamaji-reconciler".into()),
            std::process::id()
        )
    });
    let renewal =
        leader::acquire(client.clone(), &args.leader_election_namespace, id.clone()).await?;
    Ok(Some((renewal, id)))
}

fn config(args: &Args) -> Config {
    Config {
        namespaces: args.namespaces(),
        extra_infra_kinds: args.dynamic_infrastructure_clusters.clone(),
        skip_infra_patch: args.skip_infra_cluster_patch,
        external_cluster_reference: args.external_cluster_reference,
        external_cluster_reference_cross_namespace: args.external_cluster_reference_cross_namespace,
        concurrency: args.max_concurrent_reconciles,
    }
}

/// Ends when the leader-election Lease is lost (never without leader election).
async fn lease_lost(lease: Option<&mut tokio::task::JoinHandle<()>>) {
    match lease {
        Some(h) => {
            let _ = h.await;
        }
        None => std::future::pending::<()>().await,
    }
}

/// Ends `seconds` after the start (`--exit-after`; never without it).
async fn exit_timer(seconds: Option<u64>) {
    match seconds {
        Some(s) => tokio::time::sleep(Duration::from_secs(s)).await,
        None => std::future::pending::<()>().await,
    }
}

/// Ends 5 s after SIGINT or SIGTERM. kube-runtime shuts the controller down gracefully on
/// either; should a reconcile hang there, the process exits anyway, as a Deployment's pod must.
async fn shutdown_grace_over() {
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {},
                _ = term.recv() => {},
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
    tokio::time::sleep(Duration::from_secs(5)).await;
}

/// The process: HTTP endpoints, leader election, then the controller until it stops, the
/// shutdown grace period ends, the Lease is lost or `--exit-after` expires.
async fn real_main(args: Args) -> Result<()> {
    if args.print_crds {
        return print_crds();
    }
    if let Some(Command::Manifests { output_dir }) = &args.command {
        return manifests(output_dir.as_deref());
    }
    let volumes = kamaji_reconciler::backups::Volumes::parse(&args.backup_volumes)
        .map_err(anyhow::Error::msg)?;
    kamaji_reconciler::backups::s3::install_crypto();
    let metrics = Arc::new(Metrics::default());
    let client = client(&args, metrics.clone()).await?;
    // A replica waiting for the Lease is ready: healthy and standing by. A Deployment's rolling
    // update (maxUnavailable 0) needs its new pod Ready while the old one still leads, or it
    // never finishes. The leader is ready once its caches have synced (controller::run).
    let ready = Arc::new(AtomicBool::new(args.leader_elect));
    serve_http(&args, &metrics, &ready)?;
    let mut lease = leader_lease(&args, &client).await?;
    ready.store(false, Ordering::SeqCst);
    metrics.leader.store(true, Ordering::SeqCst);
    let renewal = lease.as_ref().map(|(h, _)| h.abort_handle());
    let scan = certificates::ScanConfig {
        namespaces: args.namespaces(),
        interval: args.cert_scan_interval,
        warn: args.cert_warn,
    };
    let run = async {
        // The first certificate scan before the controller starts, so that its first reconcile
        // of each KamajiControlPlane writes CertificatesExpiring; then, beside the controllers
        // (ended with them), the findings scan with the certificates it read, and both again
        // every interval (one timer: findings::run).
        let first = match certificates::scan(&client, &scan, &metrics).await {
            Ok(certs) => Some(certs),
            Err(e) => {
                tracing::warn!(
                    "certificates: first scan failed (next in {:?}): {e}",
                    scan.interval
                );
                None
            }
        };
        let controllers = async {
            tokio::try_join!(
                controller::run(
                    client.clone(),
                    config(&args),
                    metrics.clone(),
                    ready.clone()
                ),
                kamaji_reconciler::upgrades::run(client.clone(), config(&args), metrics.clone()),
                kamaji_reconciler::backups::run(
                    client.clone(),
                    config(&args),
                    metrics.clone(),
                    volumes.clone()
                ),
            )
            .map(|_| ())
        };
        tokio::select! {
            r = controllers => r,
            () = findings::run(client.clone(), scan.clone(), args.findings_scan.then_some(args.stuck_after), metrics.clone(), first) => Ok(()),
        }
    };
    tokio::select! {
        r = run => r?,
        _ = shutdown_grace_over() => tracing::warn!("shutdown grace period over; exiting"),
        _ = lease_lost(lease.as_mut().map(|(h, _)| h)) => anyhow::bail!("lost the leader-election Lease; exiting so that another replica takes over"),
        _ = exit_timer(args.exit_after) => {
            eprintln!(
                "kamaji-reconciler: reconciles={} errors={} api_requests={} peak_rss_kib={}",
                metrics.reconciles.load(Ordering::Relaxed),
                metrics.reconcile_errors.load(Ordering::Relaxed),
                metrics.api_requests.load(Ordering::Relaxed),
                peak_rss_kib().unwrap_or(0)
            );
        }
    }
    // The controllers have stopped: stop renewing and hand the Lease over at once.
    if let (Some(renewal), Some((_, id))) = (renewal, &lease) {
        renewal.abort();
        metrics.leader.store(false, Ordering::SeqCst);
        if let Err(e) = leader::release(client.clone(), &args.leader_election_namespace, id).await {
            tracing::warn!("releasing the leader-election Lease: {e}");
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let args = match Args::try_parse() {
        Ok(a) => a,
        Err(e) if !e.use_stderr() => {
            // --help and --version.
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            let (message, hint) = kcore::text::usage_line(&e.to_string(), "kamaji-reconciler");
            eprintln!("error: {message}\nhint: {hint}");
            return ExitCode::from(2);
        }
    };
    let level = match args.verbose {
        0 => "warn,kamaji_reconciler=info",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("RUST_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level)),
        )
        .with_writer(std::io::stderr)
        // Colours only on a terminal, never into a log file or a pod's log.
        .with_ansi(
            std::io::IsTerminal::is_terminal(&std::io::stderr())
                && std::env::var_os("NO_COLOR").is_none(),
        )
        .try_init();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}\nhint: check the process limits");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(real_main(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // One line: the chain without the repeats some errors carry of their source.
            let mut line = String::new();
            for cause in e.chain() {
                let c = cause.to_string();
                if !line.contains(&c) {
                    if !line.is_empty() {
                        line.push_str(": ");
                    }
                    line.push_str(&c);
                }
            }
            eprintln!(
                "error: {line}\nhint: check the flags (kamaji-reconciler --help) and the kubeconfig or service account it runs with"
            );
            ExitCode::FAILURE
        }
    }
}
