//! `kubectl kamaji create NAME`: a Kamaji-hosted cluster in one command.
//!
//! Parse ([`spec`]: the flags into a `CreateSpec`), plan (`plan`: the builders in `kcore`, in
//! the versions the server serves (`common::api_versions`), after the [`preflight`] checks),
//! apply ([`apply`]) and, with `--wait`, [`wait`].

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::Args as ClapArgs;
use clap::builder::TypedValueParser;
use cli::{DryRun, DryRunFlag, KubeFlags, OutputFlags, parse_duration};
use kclient::discovery::ServerApis;
use kclient::error::Error;
use kclient::render::{self};
use kcore::build::cni::CniKind;
use kcore::kamaji::create::{self as kamaji, Built, CreateSpec, Versions, fill_openstack_endpoint};
use serde_json::Value;

use crate::common::api_versions::versions;
use crate::common::control_plane;
use crate::common::spec_flags::{ControlPlaneFlags, InfraFlags, InfraValues, infrastructure_help};
use crate::common::tenant_kubeconfig::{admin_kubeconfig, admin_secret_name};
use crate::common::tenant_status;

/// The key of Kamaji's admin kubeconfig Secret `--merge-kubeconfig` reads (what `kubeconfig get`
/// prints by default).
const ADMIN_KUBECONFIG_KEY: &str = "admin.conf";

mod apply;
mod preflight;
mod spec;
mod wait;
use apply::{apply, print_client_dry_run};
use preflight::{
    HostPool, check_address_in_host_networks, check_datastore, check_endpoint_unused,
    check_host_pool, check_kamaji_accepts, cluster_class,
};
use spec::{cni_choice, download_calico, spec_from};
use wait::{wait_control_plane, wait_ready};

#[derive(ClapArgs, Clone, Debug)]
#[command(after_help = "Examples:
  kubectl kamaji create prod --infrastructure byoh --kubernetes-version v1.35.0 --workers 3 --host-selector site=ams --cni calico
  kubectl kamaji create dc1 --infrastructure byoh --kubernetes-version v1.35.0 --service-address 192.0.2.10 --kube-proxy-mode ipvs --cni calico
  kubectl kamaji create lab2 --infrastructure byoh --kubernetes-version v1.35.0 --preinstalled-hosts --cni-manifest cilium.yaml
  kubectl kamaji create edge --infrastructure openstack --kubernetes-version v1.35.0 --flavor m1.large --image ubuntu-2404-kube-v1.35.0 --network tenant-net
  kubectl kamaji create lab --infrastructure none --kubernetes-version v1.34.2 --dry-run=client -o yaml | kubectl apply -f -
  kubectl kamaji create c1 --class kamaji-byoh --kubernetes-version v1.35.0 --workers 2 --service-address 10.0.0.5
  kubectl kamaji create eu1 --infrastructure byoh --kubernetes-version v1.35.0 --workers 3 --failure-domain fd-a --cluster-dns 169.254.20.10 --merge-kubeconfig
Re-running with the same name converges the objects to the flags (server-side apply).")]
#[command(mut_arg("dry-run", |a| a.help("Print (client) or validate on the server (server) without changing anything")))]
pub struct Args {
    /// The cluster name (also the KamajiControlPlane's)
    #[arg(value_name = "NAME")]
    pub name: String,
    /// A topology Cluster of this ClusterClass (kubectl kamaji generate clusterclass); the class decides the infrastructure and templates
    #[arg(long, value_name = "CLASS")]
    pub class: Option<String>,
    #[arg(long, value_name = "INFRA", value_parser = InfraValues { class: false }, hide_possible_values = true, help = infrastructure_help(false))]
    pub infrastructure: Option<String>,
    /// Kubernetes version of the control plane and workers (e.g. v1.35.0)
    #[arg(long, value_name = "VERSION")]
    pub kubernetes_version: Option<String>,
    /// Control-plane replicas (pods); 0 = asleep (default 2)
    #[arg(long, value_name = "N", value_parser = cli::count(kcore::plan::MAX_CONTROL_PLANE_REPLICAS), allow_negative_numbers = true)]
    pub replicas: Option<i64>,
    /// Worker machines (default 1; not with --infrastructure none)
    #[arg(long, value_name = "N", value_parser = cli::count(kcore::plan::MAX_WORKERS), allow_negative_numbers = true)]
    pub workers: Option<i64>,
    /// Failure domain of the workers' machines, one the infrastructure lists in the Cluster's status.failureDomains (the MachineDeployment's spec.template.spec.failureDomain; with --class, the topology's; not with --infrastructure none)
    #[arg(long, value_name = "NAME")]
    pub failure_domain: Option<String>,
    /// DNS server the workers' kubelets give pods, e.g. NodeLocal DNSCache's 169.254.20.10 (kubelet --cluster-dns in the workers' KubeadmConfigTemplate; one IPv4 or IPv6 address; not with --infrastructure none or --class)
    #[arg(long, value_name = "IP")]
    pub cluster_dns: Option<String>,
    /// Kamaji DataStore holding the control plane's state (default: Kamaji's default)
    #[arg(long, value_name = "DATASTORE")]
    pub datastore: Option<String>,
    /// How the API server is exposed: ClusterIP, NodePort or LoadBalancer (default)
    #[arg(long, value_name = "TYPE")]
    pub service_type: Option<String>,
    /// A pre-assigned IP (VIP) for the API server
    #[arg(long, value_name = "IP")]
    pub service_address: Option<String>,
    /// Extra subject alternative names of the API server certificate (repeatable, comma separated)
    #[arg(long = "cert-san", value_name = "SAN", value_delimiter = ',')]
    pub cert_sans: Vec<String>,
    /// Pod CIDR(s), two for dual-stack (default 10.244.0.0/16)
    #[arg(long = "pod-cidr", value_name = "CIDR", value_delimiter = ',')]
    pub pod_cidrs: Vec<String>,
    /// Service CIDR(s), two for dual-stack (default 10.96.0.0/16)
    #[arg(long = "service-cidr", value_name = "CIDR", value_delimiter = ',')]
    pub service_cidrs: Vec<String>,
    /// API server port (default 6443)
    #[arg(long, value_name = "PORT")]
    pub port: Option<u16>,
    #[command(flatten)]
    pub control_plane: ControlPlaneFlags,
    #[command(flatten)]
    pub infra: InfraFlags<false>,
    /// kube-proxy's mode in the workload cluster: iptables (Kamaji's kube-proxy addon, as without this flag), ipvs or nftables (Kubernetes v1.31 or later; both need --service-address)
    ///
    /// Kamaji v1.0.0's TenantControlPlane cannot set a mode, so ipvs and nftables turn Kamaji's kube-proxy addon off and Cluster API installs kube-proxy through a ClusterResourceSet, NAME-kube-proxy, matched by the Cluster's kube-proxy-mode label: a ServiceAccount, a ClusterRoleBinding to system:node-proxier, a ConfigMap (KubeProxyConfiguration mode and a kubeconfig for --service-address:--port) and a DaemonSet, all named capi-kube-proxy in kube-system (Kamaji deletes objects named kube-proxy while its addon is off), running registry.k8s.io/kube-proxy at --kubernetes-version (the --from-file addons.kubeProxy image fields still apply). It is applied once: after an upgrade, set the DaemonSet's image yourself (kube-proxy may lag the control plane by three minors). ipvs needs the ip_vs, ip_vs_rr, ip_vs_wrr, ip_vs_sh and nf_conntrack kernel modules and ipset on the worker hosts; loading them is the hosts' job. kube-proxy v1.35 deprecates ipvs in favour of nftables. `kubectl kamaji delete` removes the ClusterResourceSet and its ConfigMap with the cluster.
    #[arg(long, value_name = "MODE", help_heading = "Network plugin")]
    pub kube_proxy_mode: Option<String>,
    /// Network plugin for the workload cluster: calico (Calico's release manifest, downloaded at create time; KUBECTL_KAMAJI_CALICO_URL names a mirror) or none (install one yourself). Cluster API applies it through a ClusterResourceSet [default: none]
    #[arg(long, value_name = "CNI", help_heading = "Network plugin")]
    pub cni: Option<String>,
    /// Network plugin manifest to install instead of --cni (YAML, at most 8 MiB, `-` reads stdin; kept in ConfigMaps, or Secrets if it holds Secrets)
    #[arg(long = "cni-manifest", value_name = "FILE", value_hint = clap::ValueHint::FilePath, help_heading = "Network plugin")]
    pub cni_manifest: Option<PathBuf>,
    #[command(flatten)]
    pub dry_run: DryRunFlag,
    /// Take over fields another field manager owns
    #[arg(long)]
    pub force_conflicts: bool,
    /// Create even when fewer free BYOH hosts match than --workers (the missing machines wait in Pending for hosts)
    #[arg(long)]
    pub allow_pending: bool,
    /// Create even when --service-address is in no network the BYOH hosts report (a load balancer that lives elsewhere)
    #[arg(long)]
    pub allow_foreign_address: bool,
    /// Wait until the control plane is ready and the workers joined
    #[arg(long)]
    pub wait: bool,
    /// Once the control plane answers, merge its admin kubeconfig into your kubeconfig (FILE, else the first file of KUBECONFIG, else ~/.kube/config), as kubectl kamaji kubeconfig get --merge does: context NAME-admin@NAME, replaced atomically (0600 when new, else its owner's bits kept), previous file kept as <file>.bak, existing entries never overwritten. Waits for the control plane even without --wait (--wait then goes on to the workers); not with --dry-run
    #[arg(
        long,
        value_name = "FILE",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "",
        // Not clap's PathBuf parser, which refuses the empty missing value.
        value_parser = clap::builder::OsStringValueParser::new().map(PathBuf::from),
        value_hint = clap::ValueHint::FilePath
    )]
    pub merge_kubeconfig: Option<PathBuf>,
    /// How long --wait and --merge-kubeconfig (and the OpenStack endpoint wait) may take, in all
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "10m")]
    pub timeout: Duration,
    #[command(flatten)]
    pub kube: KubeFlags,
    #[command(flatten)]
    pub output: OutputFlags,
}

fn print_objects(output: &OutputFlags, objects: &[Value], suffix: &str) -> Result<(), Error> {
    render::print_objects(&output.output, objects, suffix)
}

/// Checks the flags before connecting: a typo fails fast and offline. Returns the file
/// `--merge-kubeconfig` merges into.
fn check_offline(args: &Args) -> Result<Option<PathBuf>, Error> {
    if args.wait && args.dry_run != DryRun::None {
        return Err(Error::Usage {
            message: "--wait and --dry-run cannot be used together".into(),
            hint: Some("drop one of them".into()),
        });
    }
    let merge_file = match &args.merge_kubeconfig {
        Some(_) if args.dry_run != DryRun::None => {
            return Err(Error::Usage {
                message: "--merge-kubeconfig and --dry-run cannot be used together".into(),
                hint: Some(format!(
                    "a dry run creates no control plane to merge: drop one of them (once it runs, kubectl kamaji kubeconfig get {} --merge)",
                    args.name
                )),
            });
        }
        // `--merge-kubeconfig` alone is the default file; where that is must be known before
        // anything is written.
        Some(f) => Some(kclient::kubeconfig::merge_file(
            (!f.as_os_str().is_empty()).then(|| f.clone()),
            "--merge-kubeconfig",
        )?),
        None => None,
    };
    let offline = spec_from(args, "default")?;
    if offline.class.is_some() {
        kamaji::check_topology(&offline)?;
        return Ok(merge_file);
    }
    let infra_hint = offline.infrastructure;
    kcore::kamaji::create::build(&offline, &Versions::latest(infra_hint.unwrap_or_default()))?;
    Ok(merge_file)
}

/// The objects to apply, in the versions the server serves (`--cni calico` downloaded).
async fn plan(
    conn: &cli::Conn,
    apis: &ServerApis,
    spec: &mut CreateSpec,
    calico: bool,
    client_only: bool,
    allow_pending: bool,
    allow_foreign_address: bool,
) -> Result<Built, Error> {
    let versions = versions(apis, spec, calico, client_only)?;
    if let Some(class) = spec.class.clone() {
        let info = cluster_class(conn, apis, &spec.namespace, &class).await?;
        if calico {
            spec.cni = Some(download_calico().await?);
        }
        let built = kamaji::build_topology(spec, &versions, &info)?;
        if !client_only {
            check_endpoint_unused(conn, apis, spec, &built).await?;
        }
        return Ok(built);
    }
    if let Some(ds) = &spec.datastore
        && !client_only
    {
        check_datastore(conn, apis, ds).await?;
    }
    if calico {
        spec.cni = Some(download_calico().await?);
    }
    let mut built = kcore::kamaji::create::build(spec, &versions)?;
    if !client_only {
        check_endpoint_unused(conn, apis, spec, &built).await?;
        if !(allow_pending && allow_foreign_address)
            && let Some(pool) = HostPool::read(conn, apis, spec).await?
        {
            if !allow_foreign_address {
                check_address_in_host_networks(spec, &built, &pool)?;
            }
            if !allow_pending {
                check_host_pool(spec, &built, &pool)?;
            }
        }
        check_kamaji_accepts(conn, apis, spec, &built).await?;
    }

    // OpenStack without an address: use Kamaji's endpoint if it is already known (a re-run).
    if let Some(osc) = built.deferred.as_mut()
        && !client_only
        && let Ok(t) = control_plane::resolve(conn, apis, &spec.name).await
        && let Some((host, port)) = tenant_status::endpoint(&t)
    {
        fill_openstack_endpoint(osc, &host, port);
        built.objects.insert(1, osc.clone());
        built.deferred = None;
    }
    Ok(built)
}

pub async fn run(args: &Args) -> Result<(), Error> {
    let merge_file = check_offline(args)?;
    let conn = args.kube.connect().await?;
    let mut spec = spec_from(args, &conn.namespace)?;
    let calico = cni_choice(args)? == Some(CniKind::Calico);
    let apis = ServerApis::discover(&conn).await?;
    let client_only = args.dry_run == DryRun::Client;
    let built = plan(
        &conn,
        &apis,
        &mut spec,
        calico,
        client_only,
        args.allow_pending,
        args.allow_foreign_address,
    )
    .await?;
    for note in &built.notes {
        render::info(&format!("note: {note}"));
    }
    if client_only {
        return print_client_dry_run(args, &spec, &built);
    }
    // One --timeout for everything after the objects are applied (the OpenStack endpoint wait
    // in `apply` has its own).
    apply(args, &conn, &apis, &spec, &built).await?;
    let started = Instant::now();
    if let Some(file) = &merge_file {
        // The control plane first, so that the kubeconfig is merged even if the workers never
        // join: with it, the user can look at why.
        let answers = wait_control_plane(&conn, &apis, &spec.name, args.timeout).await?;
        render::info(&answers);
        merge_admin_kubeconfig(&conn, &apis, &spec.name, file).await?;
    }
    if args.wait {
        // What the merge's wait left of --timeout; the whole of it without one, so that a
        // timeout names the --timeout given.
        let left = match merge_file {
            Some(_) => args.timeout.saturating_sub(started.elapsed()),
            None => args.timeout,
        };
        let summary = wait_ready(&conn, &apis, &spec.name, left).await?;
        render::info(&summary);
    }
    Ok(())
}

/// `--merge-kubeconfig`: the tenant's admin kubeconfig (`admin.conf` of Kamaji's Secret) merged
/// into `file` by the one merge of the kubeconfig verbs.
async fn merge_admin_kubeconfig(
    conn: &cli::Conn,
    apis: &ServerApis,
    name: &str,
    file: &Path,
) -> Result<(), Error> {
    let t = control_plane::resolve(conn, apis, name).await?;
    let text = admin_kubeconfig(conn, &t, ADMIN_KUBECONFIG_KEY).await?;
    let secret = format!("{}/{}", t.namespace, admin_secret_name(&t));
    let get = format!(
        "kubectl kamaji kubeconfig get {name} -n {} --merge={}",
        t.namespace,
        file.display()
    );
    let hint = format!(
        "the cluster is created; {get} --force replaces them, {get} --context-name OTHER merges it under another name"
    );
    let opts = kclient::kubeconfig::MergeOptions {
        force: false,
        set_current: false,
        conflict_hint: &hint,
    };
    kclient::kubeconfig::merge_fetched(file, &t.name, &secret, &text, None, opts)
}
