//! `kubectl kamaji create NAME`: a Kamaji-hosted cluster in one command.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args as ClapArgs;
use cli::{KubeFlags, OutputFlags, OutputFormat, parse_duration};
use serde_json::Value;
use shared::build::cni::{self, CniKind, CniManifest};
use shared::build::kamaji::{
    self, Addon, Built, CreateSpec, Infrastructure, Versions, fill_openstack_endpoint,
};
use shared::discovery::fields::object_json;
use shared::discovery::{KAMAJI_GROUP, ServerApis};
use shared::error::Error;
use shared::render::{self};

use crate::common::{self, DryRun};

mod versions;
mod wait;
pub(crate) use versions::versions;
use wait::{wait_endpoint, wait_ready};

#[derive(ClapArgs, Clone, Debug)]
#[command(after_help = "Examples:
  kubectl kamaji create prod --infrastructure byoh --kubernetes-version v1.35.0 --workers 3 --host-selector site=ams --cni calico
  kubectl kamaji create lab2 --infrastructure byoh --kubernetes-version v1.35.0 --preinstalled-hosts --cni-manifest cilium.yaml
  kubectl kamaji create edge --infrastructure openstack --kubernetes-version v1.35.0 --flavor m1.large --image ubuntu-2404-kube-v1.35.0 --network tenant-net
  kubectl kamaji create lab --infrastructure none --kubernetes-version v1.34.2 --dry-run=client -o yaml | kubectl apply -f -
  kubectl kamaji create c1 --class kamaji-byoh --kubernetes-version v1.35.0 --workers 2 --service-address 10.0.0.5
Re-running with the same name converges the objects to the flags (server-side apply).")]
pub struct Args {
    /// The cluster name (also the KamajiControlPlane's)
    #[arg(value_name = "NAME")]
    pub name: String,
    /// A topology Cluster of this ClusterClass (kubectl kamaji generate clusterclass); the class decides the infrastructure and templates
    #[arg(long, value_name = "CLASS")]
    pub class: Option<String>,
    /// Where the workers run: byoh, openstack, kubevirt, metal3, aws, or none (control plane only)
    #[arg(long, value_name = "INFRA")]
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
    /// Addons Kamaji installs: coredns,kube-proxy,konnectivity (default all), or none
    #[arg(long, value_name = "LIST")]
    pub addons: Option<String>,
    /// Admission controllers to enable (comma separated, e.g. NodeRestriction,PodSecurity)
    #[arg(
        long = "admission-controllers",
        value_name = "LIST",
        value_delimiter = ','
    )]
    pub admission_controllers: Vec<String>,
    /// Extra kube-apiserver argument KEY=VALUE (repeatable)
    #[arg(long = "apiserver-arg", value_name = "KEY=VALUE")]
    pub apiserver_args: Vec<String>,
    /// Extra kube-controller-manager argument KEY=VALUE (repeatable)
    #[arg(long = "controller-manager-arg", value_name = "KEY=VALUE")]
    pub controller_manager_args: Vec<String>,
    /// Extra kube-scheduler argument KEY=VALUE (repeatable)
    #[arg(long = "scheduler-arg", value_name = "KEY=VALUE")]
    pub scheduler_args: Vec<String>,
    /// KamajiControlPlane fields from a YAML file (flags win); `-` reads stdin
    #[arg(long = "from-file", value_name = "FILE", value_hint = clap::ValueHint::FilePath)]
    pub from_file: Option<PathBuf>,
    /// Workers: OpenStack flavor, AWS instance type, KubeVirt CORESxMEMORY (e.g. 2x4Gi)
    #[arg(long, value_name = "FLAVOR", help_heading = "Infrastructure")]
    pub flavor: Option<String>,
    /// Workers: OpenStack image name, AWS AMI id, KubeVirt container disk, Metal3 image URL
    #[arg(long, value_name = "IMAGE", help_heading = "Infrastructure")]
    pub image: Option<String>,
    /// Metal3: image checksum (URL or SHA-256)
    #[arg(long, value_name = "CHECKSUM", help_heading = "Infrastructure")]
    pub image_checksum: Option<String>,
    /// OpenStack: network name of the workers
    #[arg(long, value_name = "NETWORK", help_heading = "Infrastructure")]
    pub network: Option<String>,
    /// OpenStack, AWS: SSH key name for the workers
    #[arg(long, value_name = "KEY", help_heading = "Infrastructure")]
    pub ssh_key: Option<String>,
    /// AWS: region
    #[arg(long, value_name = "REGION", help_heading = "Infrastructure")]
    pub region: Option<String>,
    /// OpenStack: cloud name in clouds.yaml (default openstack)
    #[arg(long, value_name = "CLOUD", help_heading = "Infrastructure")]
    pub cloud_name: Option<String>,
    /// OpenStack: Secret with clouds.yaml (default NAME-cloud-config)
    #[arg(long, value_name = "SECRET", help_heading = "Infrastructure")]
    pub identity_secret: Option<String>,
    /// OpenStack: Secret whose key cloud.conf the workers get as /etc/kubernetes/cloud.conf (kubelet --cloud-config)
    #[arg(long, value_name = "SECRET", help_heading = "Infrastructure")]
    pub cloud_conf_secret: Option<String>,
    /// OpenStack: key of that Secret holding the cloud's CA, written to /etc/certs/cacert on the workers
    #[arg(long, value_name = "KEY", help_heading = "Infrastructure")]
    pub cloud_ca_key: Option<String>,
    /// BYOH: labels a host needs to become a worker (KEY=VALUE, comma separated)
    #[arg(
        long = "host-selector",
        value_name = "KEY=VALUE",
        value_delimiter = ',',
        help_heading = "Infrastructure"
    )]
    pub host_selector: Vec<String>,
    /// BYOH: OCI repository of the Kubernetes installer bundles, written to the K8sInstallerConfigTemplate (default projects.registry.vmware.com/cluster_api_provider_bringyourownhost)
    #[arg(long, value_name = "REPO", help_heading = "Infrastructure")]
    pub bundle_repo: Option<String>,
    /// BYOH: installer bundle type (default k8s)
    #[arg(long, value_name = "TYPE", help_heading = "Infrastructure")]
    pub bundle_type: Option<String>,
    /// BYOH: the hosts have Kubernetes pre-installed (agents run with --skip-installation): no installer template
    #[arg(long, help_heading = "Infrastructure")]
    pub preinstalled_hosts: bool,
    /// Network plugin for the workload cluster: calico (Calico's release manifest, downloaded at create time; KUBECTL_KAMAJI_CALICO_URL names a mirror) or none (install one yourself). Cluster API applies it through a ClusterResourceSet [default: none]
    #[arg(long, value_name = "CNI", help_heading = "Network plugin")]
    pub cni: Option<String>,
    /// Network plugin manifest to install instead of --cni (YAML, at most 8 MiB; kept in ConfigMaps, or Secrets if it holds Secrets)
    #[arg(long = "cni-manifest", value_name = "FILE", value_hint = clap::ValueHint::FilePath, help_heading = "Network plugin")]
    pub cni_manifest: Option<PathBuf>,
    /// Print (client) or validate on the server (server) without changing anything
    #[arg(long, value_enum, default_value_t = DryRun::None, value_name = "MODE")]
    pub dry_run: DryRun,
    /// Take over fields another field manager owns
    #[arg(long)]
    pub force_conflicts: bool,
    /// Wait until the control plane is ready and the workers joined
    #[arg(long)]
    pub wait: bool,
    /// How long --wait (and the OpenStack endpoint wait) may take
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "10m")]
    pub timeout: Duration,
    #[command(flatten)]
    pub kube: KubeFlags,
    #[command(flatten)]
    pub output: OutputFlags,
}

pub(crate) fn read_values(path: &PathBuf) -> Result<Value, Error> {
    let text = if path.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin())
    } else {
        std::fs::read_to_string(path)
    }
    .map_err(|e| Error::Usage {
        message: format!("cannot read --from-file {}: {e}", path.display()),
        hint: Some("check the path".into()),
    })?;
    serde_saphyr::from_str::<Value>(&text).map_err(|e| Error::Usage {
        message: format!(
            "--from-file {} is not valid YAML: {}",
            path.display(),
            e.to_string().lines().next().unwrap_or_default()
        ),
        hint: Some("fix the YAML and run again".into()),
    })
}

/// Reads `--cni-manifest FILE`, refusing files above the size `create` accepts.
fn read_cni_manifest(path: &PathBuf) -> Result<CniManifest, Error> {
    let unreadable = |e: std::io::Error| Error::Usage {
        message: format!("cannot read --cni-manifest {}: {e}", path.display()),
        hint: Some("check the path".into()),
    };
    let len = std::fs::metadata(path).map_err(unreadable)?.len();
    if len > cni::MAX_MANIFEST_BYTES as u64 {
        return Err(Error::Usage {
            message: format!(
                "--cni-manifest {} is {}; at most {} is accepted",
                path.display(),
                cni::human_bytes(usize::try_from(len).unwrap_or(usize::MAX)),
                cni::human_bytes(cni::MAX_MANIFEST_BYTES)
            ),
            hint: Some(
                "install a network plugin this large by hand in the workload cluster (kubectl capi kubeconfig NAME)".into(),
            ),
        });
    }
    let text = std::fs::read_to_string(path).map_err(unreadable)?;
    Ok(CniManifest {
        kind: CniKind::Custom,
        source: path.display().to_string(),
        text,
    })
}

/// The `--cni` choice: `Some(Calico)` to download, `None` for none; `--cni-manifest` is read
/// by [`spec_from`].
fn cni_choice(args: &Args) -> Result<Option<CniKind>, Error> {
    if args.cni.is_some() && args.cni_manifest.is_some() {
        return Err(Error::Usage {
            message: "--cni and --cni-manifest cannot be used together".into(),
            hint: Some(
                "--cni calico downloads Calico's manifest, --cni-manifest FILE installs that file: pick one".into(),
            ),
        });
    }
    args.cni
        .as_deref()
        .map(cni::parse_cni)
        .transpose()
        .map(Option::flatten)
        .map_err(Error::from)
}

/// How long `--cni calico` may take to download Calico's manifest.
const CALICO_DOWNLOAD_TIMEOUT: Duration = Duration::from_secs(60);

/// Downloads Calico's release manifest (bounded in size and time).
async fn download_calico() -> Result<CniManifest, Error> {
    let url = cni::calico_manifest_url();
    let text = shared::fetch::fetch_text(&url, cni::MAX_MANIFEST_BYTES, CALICO_DOWNLOAD_TIMEOUT)
        .await
        .map_err(|e| Error::Other {
            message: format!("cannot download Calico's manifest from {url}: {e}"),
            hint: Some(format!(
                "offline or behind a proxy? fetch that file another way and pass --cni-manifest FILE (or set {} to a mirror)",
                cni::CALICO_URL_ENV
            )),
        })?;
    Ok(CniManifest {
        kind: CniKind::Calico,
        source: url,
        text,
    })
}

pub(crate) fn parse_selector(pairs: &[String]) -> Result<BTreeMap<String, String>, Error> {
    let mut out = BTreeMap::new();
    for p in pairs {
        let (k, v) = p.split_once('=').ok_or_else(|| Error::Usage {
            message: format!("invalid --host-selector {p:?}"),
            hint: Some("use KEY=VALUE, e.g. --host-selector site=ams".into()),
        })?;
        out.insert(k.trim().to_string(), v.trim().to_string());
    }
    Ok(out)
}

/// The create spec from the flags (no I/O but the values file).
pub fn spec_from(args: &Args, namespace: &str) -> Result<CreateSpec, Error> {
    let infrastructure = args
        .infrastructure
        .as_deref()
        .map(Infrastructure::parse)
        .transpose()?;
    let addons = args.addons.as_deref().map(Addon::parse_list).transpose()?;
    let values = args.from_file.as_ref().map(read_values).transpose()?;
    cni_choice(args)?;
    let cni = args
        .cni_manifest
        .as_ref()
        .map(read_cni_manifest)
        .transpose()?;
    Ok(CreateSpec {
        name: args.name.clone(),
        namespace: namespace.to_string(),
        infrastructure,
        kubernetes_version: args.kubernetes_version.clone(),
        replicas: args.replicas,
        workers: args.workers,
        datastore: args.datastore.clone(),
        service_type: args.service_type.clone(),
        service_address: args.service_address.clone(),
        cert_sans: args.cert_sans.clone(),
        pod_cidrs: args.pod_cidrs.clone(),
        service_cidrs: args.service_cidrs.clone(),
        port: args.port,
        addons,
        admission_controllers: args.admission_controllers.clone(),
        apiserver_args: args.apiserver_args.clone(),
        controller_manager_args: args.controller_manager_args.clone(),
        scheduler_args: args.scheduler_args.clone(),
        flavor: args.flavor.clone(),
        image: args.image.clone(),
        image_checksum: args.image_checksum.clone(),
        network: args.network.clone(),
        ssh_key: args.ssh_key.clone(),
        region: args.region.clone(),
        cloud_name: args.cloud_name.clone(),
        identity_secret: args.identity_secret.clone(),
        cloud_conf_secret: args.cloud_conf_secret.clone(),
        cloud_ca_key: args.cloud_ca_key.clone(),
        host_selector: parse_selector(&args.host_selector)?,
        bundle_repo: args.bundle_repo.clone(),
        bundle_type: args.bundle_type.clone(),
        preinstalled_hosts: args.preinstalled_hosts,
        cni,
        cni_none_explicit: args
            .cni
            .as_deref()
            .is_some_and(|c| c.trim().eq_ignore_ascii_case("none")),
        values,
        class: args.class.clone(),
    })
}

async fn check_datastore(conn: &cli::Conn, apis: &ServerApis, name: &str) -> Result<(), Error> {
    let Some(k) = apis.kind(KAMAJI_GROUP, "DataStore") else {
        return Err(apis.not_installed(
            "Kamaji",
            KAMAJI_GROUP,
            "install Kamaji (helm install kamaji clastix/kamaji)",
        ));
    };
    let ar = k.resource(k.version());
    if common::get_opt(conn, &ar, None, name).await?.is_some() {
        return Ok(());
    }
    let names = shared::api::list_names(conn, &ar, None)
        .await
        .unwrap_or_default();
    let close = shared::error::closest_names(name, names.iter().map(String::as_str));
    Err(Error::Other {
        message: format!("DataStore \"{name}\" not found"),
        hint: Some(if close.is_empty() {
            if names.is_empty() {
                "there is no DataStore; create one (see kubectl kamaji datastores) or omit --datastore to use Kamaji's default".into()
            } else {
                format!(
                    "existing DataStores: {} (kubectl kamaji datastores)",
                    names.join(", ")
                )
            }
        } else {
            format!("did you mean \"{}\"? (kubectl kamaji datastores)", close[0])
        }),
    })
}

fn print_objects(output: &OutputFlags, objects: &[Value], suffix: &str) -> Result<(), Error> {
    render::print_objects(&output.output, objects, suffix)
}

/// Checks the flags before connecting: a typo fails fast and offline.
fn check_offline(args: &Args) -> Result<(), Error> {
    if args.wait && args.dry_run != DryRun::None {
        return Err(Error::Usage {
            message: "--wait and --dry-run cannot be used together".into(),
            hint: Some("drop one of them".into()),
        });
    }
    let offline = spec_from(args, "default")?;
    if offline.class.is_some() {
        kamaji::check_topology(&offline)?;
        return Ok(());
    }
    let infra_hint = offline.infrastructure;
    shared::build::kamaji::build(
        &offline,
        &Versions::latest(infra_hint.unwrap_or(Infrastructure::None)),
    )?;
    Ok(())
}

/// The objects to apply, in the versions the server serves (`--cni calico` downloaded).
async fn plan(
    conn: &cli::Conn,
    apis: &ServerApis,
    spec: &mut CreateSpec,
    calico: bool,
    client_only: bool,
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
    let mut built = shared::build::kamaji::build(spec, &versions)?;
    if !client_only {
        check_endpoint_unused(conn, apis, spec, &built).await?;
    }

    // OpenStack without an address: use Kamaji's endpoint if it is already known (a re-run).
    if let Some(osc) = built.deferred.as_mut()
        && !client_only
        && let Ok(t) = common::resolve(conn, apis, &spec.name).await
        && let Some((host, port)) = common::endpoint(&t)
    {
        fill_openstack_endpoint(osc, &host, port);
        built.objects.insert(1, osc.clone());
        built.deferred = None;
    }
    Ok(built)
}

/// `create --class`'s preflight: the ClusterClass exists in the namespace (one line otherwise,
/// naming the classes there); what `build_topology` needs of it.
async fn cluster_class(
    conn: &cli::Conn,
    apis: &ServerApis,
    ns: &str,
    class: &str,
) -> Result<kamaji::ClassInfo, Error> {
    let ar = apis.capi_kind("ClusterClass")?;
    if let Some(c) = common::get_opt(conn, &ar, Some(ns), class).await? {
        return Ok(kamaji::ClassInfo::read(&object_json(&c)));
    }
    let names = shared::api::list_names(conn, &ar, Some(ns))
        .await
        .unwrap_or_default();
    let close = shared::error::closest_names(class, names.iter().map(String::as_str));
    Err(Error::Other {
        message: format!(
            "ClusterClass \"{class}\" not found in namespace {ns}; nothing was created"
        ),
        hint: Some(match (close.first(), names.is_empty()) {
            (Some(c), _) => format!("did you mean \"{c}\"?"),
            (None, true) => format!(
                "create one first: kubectl kamaji generate clusterclass {class} --infrastructure byoh --apply -n {ns}"
            ),
            (None, false) => format!("ClusterClasses in {ns}: {}", names.join(", ")),
        }),
    })
}

/// BCM's preflight: the control plane's pre-assigned address (`--service-address`, or
/// `serviceAddress` from `--from-file`) and port must not be another cluster's endpoint.
async fn check_endpoint_unused(
    conn: &cli::Conn,
    apis: &ServerApis,
    spec: &CreateSpec,
    built: &Built,
) -> Result<(), Error> {
    // A topology Cluster carries the address in its class's variable.
    let Some(address) = built
        .objects
        .iter()
        .find(|o| o["kind"] == "KamajiControlPlane")
        .and_then(|k| k.pointer("/spec/network/serviceAddress"))
        .and_then(Value::as_str)
        .or(spec.class.as_ref().and(spec.service_address.as_deref()))
    else {
        return Ok(());
    };
    let lp = kube::api::ListParams::default();
    let list = |ar: Option<kube::discovery::ApiResource>| {
        let lp = lp.clone();
        async move {
            match ar {
                Some(ar) => shared::api::list_json(conn, &ar, None, &lp).await,
                None => Ok(Vec::new()),
            }
        }
    };
    let (clusters, kcps, tcps) = tokio::try_join!(
        list(apis.cluster().ok()),
        list(apis.kamaji_control_plane()),
        list(apis.tenant_control_plane())
    )?;
    let port = spec.port.unwrap_or(kcore::build::kamaji::DEFAULT_PORT);
    let users = kcore::plan::kamaji::endpoint_users(
        address,
        &spec.namespace,
        &spec.name,
        port,
        &clusters,
        &kcps,
        &tcps,
    );
    if users.is_empty() {
        return Ok(());
    }
    Err(Error::Other {
        message: format!(
            "the control-plane endpoint {address}:{port} is already used by {}; nothing was created",
            users.join(", ")
        ),
        hint: Some("pick a free address for --service-address, or another --port".into()),
    })
}

/// `--dry-run=client`: prints every object, the deferred OpenStackCluster included.
fn print_client_dry_run(args: &Args, spec: &CreateSpec, built: &Built) -> Result<(), Error> {
    if built.deferred.is_some() {
        render::info(&format!(
            "note: OpenStackCluster {} is created once Kamaji announces the endpoint; its apiServerFixedIP is empty here",
            spec.name
        ));
    }
    print_objects(&args.output, &built.all(), "created (dry run)")
}

/// Applies the objects in order; once the Cluster exists, it owns the objects after it.
pub(crate) async fn apply_objects(
    conn: &cli::Conn,
    apis: &ServerApis,
    name: &str,
    objects: &[Value],
    server_dry: bool,
    force_conflicts: bool,
) -> Result<Vec<Value>, Error> {
    let mut applied = Vec::new();
    let mut cluster_owner: Option<(String, String)> = None;
    for o in objects {
        let mut o = o.clone();
        if let Some((api_version, uid)) = &cluster_owner {
            kamaji::own_by_cluster(&mut o, api_version, name, uid);
        }
        let r = common::apply(conn, apis, &o, server_dry, force_conflicts).await?;
        if o["kind"] == "Cluster" {
            cluster_owner = r.metadata.uid.clone().map(|uid| {
                (
                    o["apiVersion"].as_str().unwrap_or_default().to_string(),
                    uid,
                )
            });
        }
        applied.push(object_json(&r));
    }
    Ok(applied)
}

/// Applies the objects (server dry run: all of them, the deferred OpenStackCluster included;
/// otherwise that one once Kamaji announces the endpoint) and prints them.
async fn apply(
    args: &Args,
    conn: &cli::Conn,
    apis: &ServerApis,
    spec: &CreateSpec,
    built: &Built,
) -> Result<(), Error> {
    let server_dry = args.dry_run == DryRun::Server;
    let to_apply = if server_dry {
        built.all()
    } else {
        built.objects.clone()
    };
    if !server_dry {
        // The server validates every object first (a dry run of the same applies, webhooks and
        // admission policies included), so a refusal of the last one leaves nothing behind.
        apply_objects(
            conn,
            apis,
            &spec.name,
            &to_apply,
            true,
            args.force_conflicts,
        )
        .await?;
    }
    let mut applied = apply_objects(
        conn,
        apis,
        &spec.name,
        &to_apply,
        server_dry,
        args.force_conflicts,
    )
    .await?;
    let suffix = if server_dry {
        "serverside-applied (server dry run)"
    } else {
        "serverside-applied"
    };
    let human = matches!(args.output.output, OutputFormat::Table | OutputFormat::Wide);
    if human {
        print_objects(&args.output, &to_apply, suffix)?;
    }
    if server_dry {
        if !human {
            print_objects(&args.output, &applied, suffix)?;
        }
        return Ok(());
    }

    if let Some(mut osc) = built.deferred.clone() {
        let (host, port) = wait_endpoint(conn, apis, &spec.name, args.timeout).await?;
        fill_openstack_endpoint(&mut osc, &host, port);
        let r = common::apply(conn, apis, &osc, false, args.force_conflicts).await?;
        applied.push(object_json(&r));
        if human {
            print_objects(
                &args.output,
                std::slice::from_ref(&osc),
                &format!("serverside-applied (apiServerFixedIP {host}, port {port})"),
            )?;
        }
    }
    if !human {
        print_objects(&args.output, &applied, suffix)?;
    }
    Ok(())
}

pub async fn run(args: &Args) -> Result<(), Error> {
    check_offline(args)?;
    let conn = args.kube.connect().await?;
    let mut spec = spec_from(args, &conn.namespace)?;
    let calico = cni_choice(args)? == Some(CniKind::Calico);
    let apis = ServerApis::discover(&conn).await?;
    let client_only = args.dry_run == DryRun::Client;
    let built = plan(&conn, &apis, &mut spec, calico, client_only).await?;
    for note in &built.notes {
        render::info(&format!("note: {note}"));
    }
    if client_only {
        return print_client_dry_run(args, &spec, &built);
    }
    apply(args, &conn, &apis, &spec, &built).await?;
    if args.wait {
        let summary = wait_ready(&conn, &apis, &spec.name, args.timeout).await?;
        render::info(&summary);
    }
    Ok(())
}
