//! `kubectl kamaji certificates rotate NAME --all|--certificates ...`: Kamaji re-issues the
//! certificates whose Secrets are deleted (see `kubeconfig::rotate_secrets`).

use clap::{Args as ClapArgs, Subcommand, ValueEnum};
use cli::KubeFlags;
use shared::discovery::ServerApis;
use shared::error::Error;

use crate::common;

#[derive(ClapArgs, Clone, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub verb: Verb,
}

#[derive(Subcommand, Clone, Debug)]
pub enum Verb {
    /// Have Kamaji re-issue certificates (their Secrets are deleted and re-created)
    Rotate(RotateArgs),
}

/// Kamaji's certificate Secrets (`<tcp>-<suffix>`).
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cert {
    #[value(alias = "APIServer")]
    ApiServer,
    #[value(alias = "APIServerKubeletClient")]
    ApiServerKubeletClient,
    #[value(alias = "FrontProxyCA")]
    FrontProxyCa,
    #[value(alias = "FrontProxyClient")]
    FrontProxyClient,
    #[value(alias = "Konnectivity")]
    Konnectivity,
    /// The cluster CA (every certificate is re-issued; workers need the new CA)
    #[value(alias = "CA")]
    Ca,
    #[value(alias = "Datastore")]
    Datastore,
}

impl Cert {
    pub fn suffix(self) -> &'static str {
        match self {
            Cert::ApiServer => "api-server-certificate",
            Cert::ApiServerKubeletClient => "api-server-kubelet-client-certificate",
            Cert::FrontProxyCa => "front-proxy-ca-certificate",
            Cert::FrontProxyClient => "front-proxy-client-certificate",
            Cert::Konnectivity => "konnectivity-certificate",
            Cert::Ca => "ca",
            Cert::Datastore => "datastore-certificate",
        }
    }
}

#[derive(ClapArgs, Clone, Debug)]
#[command(
    after_help = "--all rotates every leaf certificate (not the CA: name it with --certificates ca)."
)]
pub struct RotateArgs {
    /// The KamajiControlPlane (or TenantControlPlane)
    #[arg(value_name = "CONTROL_PLANE")]
    pub name: String,
    /// The certificates to rotate
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        value_name = "LIST",
        required_unless_present = "all"
    )]
    pub certificates: Vec<Cert>,
    /// Every leaf certificate
    #[arg(long, conflicts_with = "certificates")]
    pub all: bool,
    #[command(flatten)]
    pub kube: KubeFlags,
}

pub async fn run(args: &Args) -> Result<(), Error> {
    let Verb::Rotate(a) = &args.verb;
    let conn = a.kube.connect().await?;
    let apis = ServerApis::discover(&conn).await?;
    let t = common::resolve(&conn, &apis, &a.name).await?;
    let certs: Vec<Cert> = if a.all {
        vec![
            Cert::ApiServer,
            Cert::ApiServerKubeletClient,
            Cert::FrontProxyCa,
            Cert::FrontProxyClient,
            Cert::Konnectivity,
            Cert::Datastore,
        ]
    } else {
        a.certificates.clone()
    };
    let names: Vec<String> = certs
        .iter()
        .map(|c| format!("{}-{}", t.tcp_name(), c.suffix()))
        .collect();
    crate::kubeconfig::rotate_secrets(&conn, &t, &names, !a.all).await
}
