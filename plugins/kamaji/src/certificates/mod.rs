//! `kubectl kamaji certificates [NAME | -A]`: every certificate of each tenant, its issuer,
//! expiry and what renews it, soonest expiry first (`kcore::kamaji::certificates`).
//!
//! `kubectl kamaji certificates rotate NAME --all|--certificates ...`: Kamaji re-issues the
//! certificates whose Secrets are deleted (see `common::secrets::rotate_secrets`). The command,
//! flags and names are clastix's `kamaji` plugin's (`cmd/certificates/rotate.go`,
//! github.com/clastix/kamaji-kubectl-plugin v1.0.0).

use clap::{Args as ClapArgs, Subcommand, ValueEnum};
use cli::{KubeFlags, OutputFlags};
use kclient::discovery::ServerApis;
use kclient::error::Error;
use kclient::render::{Cell, Human, Printer, Render, Table, Tone};
use kcore::kamaji::certificates::{self as certs, CertificateRow};
use serde::Serialize;

use crate::common::clastix::CobraBool;
use crate::common::control_plane;
use crate::common::secrets::{self, rotate_named, rotation};

mod verify;

#[derive(ClapArgs, Clone, Debug)]
#[command(
    args_conflicts_with_subcommands = true,
    after_help = "Without a command: every certificate of the control plane NAME (a KamajiControlPlane or TenantControlPlane), of every one in the namespace without NAME, or in every namespace with -A: its Secret and key, subject, issuer, expiry, days left and what renews it (Kamaji re-issues the labelled ones a day before they expire; the CAs only when asked), soonest expiry first.

Examples:
  kubectl kamaji certificates prod
  kubectl kamaji certificates -A -o json
  kubectl kamaji certificates rotate prod --all=true"
)]
pub struct Args {
    #[command(subcommand)]
    pub verb: Option<CertificatesCommand>,
    /// The control plane whose certificates to list (all of the namespace without it)
    #[arg(value_name = "CONTROL_PLANE")]
    pub name: Option<String>,
    #[command(flatten)]
    pub kube: KubeFlags,
    #[command(flatten)]
    pub output: OutputFlags,
}

/// `kubectl kamaji certificates`'s rows (`-o json`: `{"items": [CertificateRow...]}`).
#[derive(Serialize, Clone, Debug)]
pub struct Certificates {
    pub items: Vec<CertificateRow>,
}

impl Render for Certificates {
    fn human(&self) -> Human {
        let mut t = Table::new([
            "namespace",
            "control plane",
            "secret",
            "key",
            "expires",
            "days",
            "renewed by",
        ])
        .wide(["subject", "issuer"]);
        for c in &self.items {
            let tone = match c.days_left {
                d if d < 0 => Tone::Bad,
                d if d < 30 => Tone::Warn,
                _ => Tone::Good,
            };
            let cert = &c.certificate;
            t.row([
                Cell::from(cert.namespace.as_str()),
                Cell::from(cert.tenant.as_str()),
                Cell::from(cert.secret.as_str()),
                Cell::from(cert.key.as_str()),
                Cell::from(cert.not_after.as_str()),
                Cell::new(c.days_left.to_string(), tone),
                Cell::from(c.renewed_by.as_str()),
                Cell::from(c.subject.as_str()),
                Cell::from(c.issuer.as_str()),
            ]);
        }
        Human::Table(t)
    }
}

/// Lists the certificates of one control plane, of the namespace's, or of every namespace's.
async fn list(args: &Args) -> Result<(), Error> {
    let conn = args.kube.connect().await?;
    let apis = ServerApis::discover(&conn).await?;
    // (namespace, TenantControlPlane name) of each control plane to read.
    let tenants: Vec<(String, String)> = match &args.name {
        Some(name) => {
            let t = control_plane::resolve(&conn, &apis, name).await?;
            vec![(t.namespace.clone(), t.tcp_name())]
        }
        None => {
            let ar = control_plane::tcp_resource(&apis)?;
            let ns = (!conn.all_namespaces).then_some(conn.namespace.as_str());
            kclient::api::list_values(&conn, &ar, ns, None)
                .await?
                .iter()
                .map(|t| {
                    (
                        kcore::json::namespace(t).to_string(),
                        kcore::json::name(t).to_string(),
                    )
                })
                .collect()
        }
    };
    let now = jiff::Timestamp::now().as_second();
    let mut items = Vec::new();
    for (ns, tenant) in &tenants {
        for suffix in certs::SECRET_SUFFIXES {
            let name = format!("{tenant}-{suffix}");
            if let Some((secret, data)) = secrets::secret_data(&conn, ns, &name).await? {
                let labels = secret.metadata.labels.unwrap_or_default();
                items.extend(certs::of_secret(ns, tenant, &name, &labels, &data, now));
            }
        }
    }
    certs::sort(&mut items);
    if items.is_empty()
        && matches!(
            args.output.output,
            cli::OutputFormat::Table | cli::OutputFormat::Wide
        )
    {
        let ns = (!conn.all_namespaces).then_some(conn.namespace.as_str());
        kclient::render::none_found("tenant certificates", ns);
        return Ok(());
    }
    Printer::new(&args.output).print(&Certificates { items })
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
  kubectl kamaji certificates rotate prod --certificates=FrontProxyCA,FrontProxyClient
  kubectl kamaji certificates rotate prod --certificates=CA --verify"
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
    /// Then wait until Kamaji re-issued them, and try each path that uses them (the endpoint, the admin and Cluster API kubeconfigs, Cluster API's CA, the API server to a kubelet); name the first that fails
    #[arg(long)]
    pub verify: bool,
    /// With --verify: how long the paths may take to work
    #[arg(long, value_parser = cli::parse_duration, default_value = "5m", value_name = "DURATION", requires = "verify")]
    pub timeout: std::time::Duration,
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
    let Some(CertificatesCommand::Rotate(a)) = &args.verb else {
        return list(args).await;
    };
    let (certs, strict) = a.certs()?;
    let suffixes: Vec<&str> = certs.iter().map(|c| c.suffix()).collect();
    if !a.verify {
        return rotate_named(&a.kube, &a.name, &suffixes, strict)
            .await
            .map(drop);
    }
    let conn = a.kube.connect().await?;
    let apis = ServerApis::discover(&conn).await?;
    let t = control_plane::resolve(&conn, &apis, &a.name).await?;
    let names: Vec<String> = suffixes
        .iter()
        .map(|s| format!("{}-{s}", t.tcp_name()))
        .collect();
    let rotated = secrets::rotate_secrets(&conn, &t, &names, strict).await?;
    let now = async || control_plane::resolve(&conn, &apis, &a.name).await;
    verify::verify(&conn, now, &rotated, a.timeout).await
}
