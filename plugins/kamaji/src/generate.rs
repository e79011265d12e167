//! `kubectl kamaji generate clusterclass NAME --infrastructure INFRA [flags]`: a ClusterClass
//! whose control plane is a KamajiControlPlaneTemplate, with the infrastructure's cluster
//! template and one worker class, at the versions the server serves. Printed as YAML (as
//! `kubectl capi generate` prints), or server-side applied with `--apply`. Clusters of the class:
//! `kubectl kamaji create NAME --class CLASS`. Builder: `kcore::build::kamaji::build_class`.

use std::path::PathBuf;

use clap::{Args as ClapArgs, Subcommand};
use cli::{KubeFlags, OutputFlags, OutputFormat};
use shared::build::kamaji::{self, Addon, CreateSpec, Infrastructure};
use shared::discovery::{CONTROLPLANE_GROUP, ServerApis};
use shared::error::Error;
use shared::render;

use crate::common::DryRun;
use crate::create::{apply_objects, parse_selector, read_values, versions};

#[derive(ClapArgs, Clone, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub what: What,
}

#[derive(Subcommand, Clone, Debug)]
pub enum What {
    /// A ClusterClass with a KamajiControlPlaneTemplate, infrastructure and worker templates
    #[command(name = "clusterclass")]
    ClusterClass(ClassArgs),
}

#[derive(ClapArgs, Clone, Debug)]
#[command(after_help = "Examples:
  kubectl kamaji generate clusterclass kamaji-byoh --infrastructure byoh --host-selector site=ams --apply
  kubectl kamaji generate clusterclass kamaji-os --infrastructure openstack --flavor m1.large --image ubuntu-2404 > class.yaml
Then: kubectl kamaji create c1 --class kamaji-byoh --kubernetes-version v1.35.0 --workers 2 --service-address 10.0.0.5
The control plane of each cluster is named after the cluster; --service-address fills the class's controlPlaneAddress variable.")]
pub struct ClassArgs {
    /// The ClusterClass name (also its templates')
    #[arg(value_name = "NAME")]
    pub name: String,
    /// Where the workers run: byoh, openstack, kubevirt or aws
    #[arg(long, value_name = "INFRA")]
    pub infrastructure: Option<String>,
    /// Kamaji DataStore of every cluster of the class (default: Kamaji's default)
    #[arg(long, value_name = "DATASTORE")]
    pub datastore: Option<String>,
    /// How the API servers are exposed: ClusterIP, NodePort or LoadBalancer (default)
    #[arg(long, value_name = "TYPE")]
    pub service_type: Option<String>,
    /// Extra subject alternative names of the API server certificates (comma separated)
    #[arg(long = "cert-san", value_name = "SAN", value_delimiter = ',')]
    pub cert_sans: Vec<String>,
    /// Addons Kamaji installs: coredns,kube-proxy,konnectivity (default all), or none
    #[arg(long, value_name = "LIST")]
    pub addons: Option<String>,
    /// Admission controllers to enable (comma separated)
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
    /// KamajiControlPlaneTemplate fields from a YAML file (flags win); `-` reads stdin
    #[arg(long = "from-file", value_name = "FILE", value_hint = clap::ValueHint::FilePath)]
    pub from_file: Option<PathBuf>,
    /// Workers: OpenStack flavor, AWS instance type, KubeVirt CORESxMEMORY
    #[arg(long, value_name = "FLAVOR", help_heading = "Infrastructure")]
    pub flavor: Option<String>,
    /// Workers: OpenStack image name, AWS AMI id, KubeVirt container disk
    #[arg(long, value_name = "IMAGE", help_heading = "Infrastructure")]
    pub image: Option<String>,
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
    /// OpenStack: Secret whose key cloud.conf the workers get as /etc/kubernetes/cloud.conf
    #[arg(long, value_name = "SECRET", help_heading = "Infrastructure")]
    pub cloud_conf_secret: Option<String>,
    /// OpenStack: key of that Secret holding the cloud's CA, written to /etc/certs/cacert
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
    /// BYOH: OCI repository of the Kubernetes installer bundles
    #[arg(long, value_name = "REPO", help_heading = "Infrastructure")]
    pub bundle_repo: Option<String>,
    /// BYOH: installer bundle type (default k8s)
    #[arg(long, value_name = "TYPE", help_heading = "Infrastructure")]
    pub bundle_type: Option<String>,
    /// BYOH: the hosts have Kubernetes pre-installed: no installer template
    #[arg(long, help_heading = "Infrastructure")]
    pub preinstalled_hosts: bool,
    /// Server-side apply the objects instead of printing them
    #[arg(long)]
    pub apply: bool,
    /// With --apply: server (validate on the server without storing anything)
    #[arg(long, value_enum, default_value_t = DryRun::None, value_name = "MODE")]
    pub dry_run: DryRun,
    /// With --apply: take over fields another field manager owns
    #[arg(long)]
    pub force_conflicts: bool,
    #[command(flatten)]
    pub kube: KubeFlags,
    #[command(flatten)]
    pub output: OutputFlags,
}

pub async fn run(args: &Args) -> Result<(), Error> {
    match &args.what {
        What::ClusterClass(a) => cluster_class(a).await,
    }
}

/// The class spec from the flags (no I/O but the values file).
fn spec_from(a: &ClassArgs, namespace: &str) -> Result<CreateSpec, Error> {
    Ok(CreateSpec {
        name: a.name.clone(),
        namespace: namespace.to_string(),
        infrastructure: a
            .infrastructure
            .as_deref()
            .map(Infrastructure::parse)
            .transpose()?,
        datastore: a.datastore.clone(),
        service_type: a.service_type.clone(),
        cert_sans: a.cert_sans.clone(),
        addons: a.addons.as_deref().map(Addon::parse_list).transpose()?,
        admission_controllers: a.admission_controllers.clone(),
        apiserver_args: a.apiserver_args.clone(),
        controller_manager_args: a.controller_manager_args.clone(),
        scheduler_args: a.scheduler_args.clone(),
        values: a.from_file.as_ref().map(read_values).transpose()?,
        flavor: a.flavor.clone(),
        image: a.image.clone(),
        network: a.network.clone(),
        ssh_key: a.ssh_key.clone(),
        region: a.region.clone(),
        cloud_name: a.cloud_name.clone(),
        identity_secret: a.identity_secret.clone(),
        cloud_conf_secret: a.cloud_conf_secret.clone(),
        cloud_ca_key: a.cloud_ca_key.clone(),
        host_selector: parse_selector(&a.host_selector)?,
        bundle_repo: a.bundle_repo.clone(),
        bundle_type: a.bundle_type.clone(),
        preinstalled_hosts: a.preinstalled_hosts,
        ..CreateSpec::default()
    })
}

async fn cluster_class(a: &ClassArgs) -> Result<(), Error> {
    match a.dry_run {
        DryRun::Client => {
            return Err(Error::usage(
                "--dry-run=client does not apply to generate: without --apply it only prints",
            ));
        }
        DryRun::Server if !a.apply => {
            return Err(Error::usage("--dry-run=server needs --apply"));
        }
        _ => {}
    }
    // The flags are checked before connecting: a typo fails fast and offline.
    let offline = spec_from(a, "default")?;
    let infra = offline.infrastructure.unwrap_or(Infrastructure::None);
    kamaji::build_class(&offline, &kamaji::Versions::latest(infra))?;

    let conn = a.kube.connect().await?;
    let spec = spec_from(a, &conn.namespace)?;
    let apis = ServerApis::discover(&conn).await?;
    // Printing falls back to the newest shapes for kinds the server does not serve (as
    // `create --dry-run=client` does); applying needs them served.
    let versions = versions(&apis, &spec, false, !a.apply)?;
    if a.apply {
        apis.require_provider_kind(
            CONTROLPLANE_GROUP,
            "KamajiControlPlaneTemplate",
            "The KamajiControlPlaneTemplate kind",
            "install the provider with kubectl kamaji install",
        )?;
        apis.capi_kind("ClusterClass")?;
    }
    let built = kamaji::build_class(&spec, &versions)?;
    for note in &built.notes {
        render::info(&format!("note: {note}"));
    }
    if !a.apply {
        let format = match &a.output.output {
            OutputFormat::Table | OutputFormat::Wide => OutputFormat::Yaml,
            f => f.clone(),
        };
        return render::print_objects(&format, &built.objects, "generated");
    }
    let server_dry = a.dry_run == DryRun::Server;
    if !server_dry {
        // The server validates every object first, so a refusal of the last leaves nothing.
        apply_objects(
            &conn,
            &apis,
            &spec.name,
            &built.objects,
            true,
            a.force_conflicts,
        )
        .await?;
    }
    let applied = apply_objects(
        &conn,
        &apis,
        &spec.name,
        &built.objects,
        server_dry,
        a.force_conflicts,
    )
    .await?;
    let suffix = format!("serverside-applied{}", a.dry_run.suffix());
    match &a.output.output {
        OutputFormat::Table | OutputFormat::Wide => {
            render::print_objects(&a.output.output, &built.objects, &suffix)
        }
        f => render::print_objects(f, &applied, &suffix),
    }
}
