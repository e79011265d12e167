//! `kubectl kamaji generate clusterclass NAME --infrastructure INFRA [flags]`: a ClusterClass
//! whose control plane is a KamajiControlPlaneTemplate, with the infrastructure's cluster
//! template and one worker class, at the versions the server serves. Printed as YAML (as
//! `kubectl capi generate` prints), or server-side applied with `--apply`. Clusters of the class:
//! `kubectl kamaji create NAME --class CLASS`. Builder: `kcore::kamaji::create::build_class`.

use clap::{Args as ClapArgs, Subcommand};
use cli::{DryRun, DryRunFlag, KubeFlags, OutputFlags, OutputFormat};
use kclient::discovery::ServerApis;
use kclient::error::Error;
use kclient::render;
use kcore::groups::CONTROLPLANE_GROUP;
use kcore::kamaji::create::{self as kamaji, CreateSpec, Infrastructure};

use crate::common::api_versions::versions;
use crate::common::spec_flags::{
    ControlPlaneFlags, InfraFlags, InfraValues, base_spec, infrastructure_help,
};
use crate::common::writes::apply_objects;

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
// The flags shared with `create` (crate::common::spec_flags), worded for a class: its template
// (the providers' flags: `InfraFlags<true>`, their class wording, no Metal3).
#[command(
    mut_arg("admission_controllers", |a| a.help("Admission controllers to enable (comma separated)")),
    mut_arg("from_file", |a| a.help("KamajiControlPlaneTemplate fields from a YAML file (flags win); `-` reads stdin"))
)]
#[command(mut_arg("dry-run", |a| a.help("With --apply: server (validate on the server without storing anything)")))]
pub struct ClassArgs {
    /// The ClusterClass name (also its templates')
    #[arg(value_name = "NAME")]
    pub name: String,
    #[arg(long, value_name = "INFRA", value_parser = InfraValues { class: true }, hide_possible_values = true, help = infrastructure_help(true))]
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
    /// DNS server the workers' kubelets give pods, e.g. NodeLocal DNSCache's 169.254.20.10 (kubelet --cluster-dns in the class's KubeadmConfigTemplate, for every cluster of the class; one IPv4 or IPv6 address)
    #[arg(long, value_name = "IP")]
    pub cluster_dns: Option<String>,
    #[command(flatten)]
    pub control_plane: ControlPlaneFlags,
    #[command(flatten)]
    pub infra: InfraFlags<true>,
    /// Server-side apply the objects instead of printing them
    #[arg(long)]
    pub apply: bool,
    #[command(flatten)]
    pub dry_run: DryRunFlag,
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
        cluster_dns: a.cluster_dns.clone(),
        ..base_spec(&a.control_plane, &a.infra)?
    })
}

async fn cluster_class(a: &ClassArgs) -> Result<(), Error> {
    match *a.dry_run {
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
    let infra = offline.infrastructure.unwrap_or_default();
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
