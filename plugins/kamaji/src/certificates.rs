//! `kubectl kamaji certificates rotate NAME --all|--certificates ...`: Kamaji re-issues the
//! certificates whose Secrets are deleted (see `common::secrets::rotate_secrets`). The command,
//! flags and names are clastix's `kamaji` plugin's (`cmd/certificates/rotate.go`,
//! github.com/clastix/kamaji-kubectl-plugin v1.0.0).

use clap::{Args as ClapArgs, Subcommand, ValueEnum};
use cli::KubeFlags;
use kclient::error::Error;

use crate::common::clastix::CobraBool;
use crate::common::secrets::{rotate_named, rotation};

#[derive(ClapArgs, Clone, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub verb: CertificatesCommand,
}

#[derive(Subcommand, Clone, Debug)]
pub enum CertificatesCommand {
    /// Have Kamaji re-issue certificates (their Secrets are deleted and re-created)
    Rotate(CertificatesRotateArgs),
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

impl Cert {
    /// What `--all` rotates: the certificates clastix's plugin rotates
    /// (`pkg/commands/rotate_cert.go`, `RotateCertificatesMap`, v1.0.0). The CA and the
    /// datastore client certificate are rotated only when named.
    pub const ALL: [Cert; 5] = [
        Cert::ApiServer,
        Cert::ApiServerKubeletClient,
        Cert::FrontProxyCa,
        Cert::FrontProxyClient,
        Cert::Konnectivity,
    ];
}

#[derive(ClapArgs, Clone, Debug)]
#[command(
    after_help = "Certificates: APIServer, APIServerKubeletClient, FrontProxyCA, FrontProxyClient, Konnectivity (or api-server, api-server-kubelet-client, ...), and, only when named, CA and Datastore; comma-separated or with --certificates repeated. --all rotates the first five, as clastix's kamaji plugin does (not the CA: every certificate and worker depends on it).

Kamaji re-issues each deleted Secret and rolls the control plane onto it. A certificate named with --certificates whose Secret does not exist (Konnectivity without the addon) is an error and nothing is rotated; with --all it is skipped.

Examples:
  kubectl kamaji certificates rotate prod --all=true
  kubectl kamaji certificates rotate prod --certificates=APIServer
  kubectl kamaji certificates rotate prod --certificates=FrontProxyCA,FrontProxyClient"
)]
pub struct CertificatesRotateArgs {
    /// The KamajiControlPlane (or TenantControlPlane)
    #[arg(value_name = "CONTROL_PLANE")]
    pub name: String,
    /// The certificates to rotate
    #[arg(long, value_enum, value_delimiter = ',', value_name = "LIST")]
    pub certificates: Vec<Cert>,
    /// Every certificate but the CA and the datastore's (--all=false is accepted, as cobra's flags take it)
    #[arg(long, cobra_bool = false)]
    pub all: bool,
    #[command(flatten)]
    pub kube: KubeFlags,
}

impl CertificatesRotateArgs {
    /// The certificates asked for, and whether a missing one is an error.
    fn certs(&self) -> Result<(Vec<Cert>, bool), Error> {
        let none = Err(Error::Usage {
            message: "no certificate to rotate: --certificates or --all is required".into(),
            hint: Some(
                "name them with --certificates=APIServer,... or pass --all (see --help)".into(),
            ),
        });
        rotation(
            self.all,
            &Cert::ALL,
            "--certificates",
            &self.certificates,
            none,
        )
    }
}

pub async fn run(args: &Args) -> Result<(), Error> {
    let CertificatesCommand::Rotate(a) = &args.verb;
    let (certs, strict) = a.certs()?;
    let suffixes: Vec<&str> = certs.iter().map(|c| c.suffix()).collect();
    rotate_named(&a.kube, &a.name, &suffixes, strict).await
}
