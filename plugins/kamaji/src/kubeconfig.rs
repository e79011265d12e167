//! `kubectl kamaji kubeconfig get|rotate`: a tenant's kubeconfigs, with the command and flags
//! of clastix's `kamaji` plugin (`cmd/kubeconfig/{get,rotate}.go`,
//! github.com/clastix/kamaji-kubectl-plugin v1.0.0), and the kubeconfig flags `kubectl capi
//! kubeconfig` has (`-o`, `--write-to`, `--merge`: [`cli::KubeconfigFlags`]).

use clap::{Args as ClapArgs, Subcommand, ValueEnum};
use cli::{KubeFlags, KubeconfigFlags};
use kclient::discovery::ServerApis;
use kclient::error::Error;

use crate::common::clastix::CobraBool;
use crate::common::control_plane::resolve;
use crate::common::secrets::{rotate_named, rotation};
use crate::common::tenant_kubeconfig::{admin_kubeconfig, admin_secret_name};

#[derive(ClapArgs, Clone, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub verb: KubeconfigCommand,
}

#[derive(Subcommand, Clone, Debug)]
pub enum KubeconfigCommand {
    /// Print, write or merge a tenant control plane's admin kubeconfig
    Get(GetArgs),
    /// Have Kamaji regenerate kubeconfigs (their Secrets are deleted; Kamaji re-issues them)
    Rotate(KubeconfigRotateArgs),
}

#[derive(ClapArgs, Clone, Debug)]
#[command(
    after_help = "Without --write-to or --merge the kubeconfig is printed on stdout as the Secret holds it (-o json for JSON), as clastix's kamaji plugin prints it.

--merge adds the cluster, user and context (NAME, NAME-admin, NAME-admin@NAME, or --context-name) to your kubeconfig (--merge=FILE, else the first file of KUBECONFIG, else ~/.kube/config): the file is replaced atomically, the previous version is kept as <file>.bak, and existing entries with the same names are never overwritten unless --force. The same flags as kubectl capi kubeconfig.

Older spellings still work: --merge-file FILE (--merge=FILE), --output-file FILE (--write-to FILE), --secret-type (--secret-key).

Examples:
  kubectl kamaji kubeconfig get prod > prod.kubeconfig
  kubectl kamaji kubeconfig get prod --secret-key=admin.svc
  kubectl kamaji kubeconfig get prod --merge --set-current   # context prod-admin@prod
  kubectl kamaji kubeconfig get prod --write-to ~/prod.kubeconfig"
)]
pub struct GetArgs {
    /// The KamajiControlPlane (or TenantControlPlane)
    #[arg(value_name = "CONTROL_PLANE")]
    pub name: String,
    /// The key of the admin kubeconfig Secret (Kamaji v1.0.0 writes admin.conf and admin.svc)
    #[arg(
        long,
        alias = "secret-type",
        default_value = "admin.conf",
        value_name = "KEY",
        value_parser = secret_key
    )]
    pub secret_key: String,
    #[command(flatten)]
    pub kubeconfig: KubeconfigFlags,
    #[command(flatten)]
    pub kube: KubeFlags,
}

/// A Secret data key (`[-._a-zA-Z0-9]+`, as the API server checks it).
fn secret_key(s: &str) -> Result<String, String> {
    let valid = !s.is_empty()
        && s.len() <= 253
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if valid {
        Ok(s.to_string())
    } else {
        Err("a Secret key has letters, digits, '-', '_' and '.' only (e.g. admin.conf)".into())
    }
}

/// Kamaji's kubeconfig Secrets (`<tcp>-<suffix>`), by the names clastix's plugin gives them
/// (`pkg/commands/rotate_kubeconfig.go`, `RotateKubeconfigMap`, v1.0.0); the kebab-case names
/// work too.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum KubeconfigKind {
    #[value(alias = "Admin")]
    Admin,
    #[value(alias = "ControllerManager")]
    ControllerManager,
    #[value(alias = "Konnectivity")]
    Konnectivity,
    #[value(alias = "Scheduler")]
    Scheduler,
}

impl KubeconfigKind {
    pub const ALL: [KubeconfigKind; 4] = [
        KubeconfigKind::Admin,
        KubeconfigKind::ControllerManager,
        KubeconfigKind::Konnectivity,
        KubeconfigKind::Scheduler,
    ];
    fn suffix(self) -> &'static str {
        match self {
            KubeconfigKind::Admin => "admin-kubeconfig",
            KubeconfigKind::ControllerManager => "controller-manager-kubeconfig",
            KubeconfigKind::Scheduler => "scheduler-kubeconfig",
            KubeconfigKind::Konnectivity => "konnectivity-kubeconfig",
        }
    }
}

#[derive(ClapArgs, Clone, Debug)]
#[command(
    after_help = "Components: Admin, ControllerManager, Konnectivity, Scheduler (or admin, controller-manager, ...), comma-separated or with --components repeated. Kamaji re-issues each deleted Secret and restarts the components that use it (all but Admin).

Without --components or --all the admin kubeconfig is rotated (clastix's plugin asks for one of them): it is the one handed out to people, so the one to rotate when it leaks. A component named with --components whose Secret does not exist is an error and nothing is rotated; with --all it is skipped.

Examples:
  kubectl kamaji kubeconfig rotate prod --all=true
  kubectl kamaji kubeconfig rotate prod --components=Admin
  kubectl kamaji kubeconfig rotate prod --components=Admin,ControllerManager"
)]
pub struct KubeconfigRotateArgs {
    /// The KamajiControlPlane (or TenantControlPlane)
    #[arg(value_name = "CONTROL_PLANE")]
    pub name: String,
    /// The components whose kubeconfigs to rotate (default: Admin)
    #[arg(
        long = "components",
        // `--kubeconfig-type` is this plugin's old name; `--certificates` is what the third
        // example of clastix's `kubeconfig rotate --help` says (v1.0.0, `cmd/kubeconfig/rotate.go`).
        aliases = ["kubeconfig-type", "certificates"],
        value_enum,
        value_delimiter = ',',
        value_name = "LIST"
    )]
    pub kinds: Vec<KubeconfigKind>,
    /// Every component's kubeconfig (--all=false is accepted, as cobra's flags take it)
    #[arg(long, cobra_bool = false)]
    pub all: bool,
    #[command(flatten)]
    pub kube: KubeFlags,
}

impl KubeconfigRotateArgs {
    /// The kubeconfigs asked for, and whether a missing one is an error.
    fn kinds(&self) -> Result<(Vec<KubeconfigKind>, bool), Error> {
        let none = Ok(vec![KubeconfigKind::Admin]);
        rotation(
            self.all,
            &KubeconfigKind::ALL,
            "--components",
            &self.kinds,
            none,
        )
    }
}

pub async fn run(args: &Args) -> Result<(), Error> {
    match &args.verb {
        KubeconfigCommand::Get(a) => get(a).await,
        KubeconfigCommand::Rotate(a) => rotate(a).await,
    }
}

async fn get(args: &GetArgs) -> Result<(), Error> {
    let delivery = args.kubeconfig.delivery()?;
    let conn = args.kube.connect().await?;
    let apis = ServerApis::discover(&conn).await?;
    let t = resolve(&conn, &apis, &args.name).await?;
    let text = admin_kubeconfig(&conn, &t, &args.secret_key).await?;
    let secret = format!("{}/{}", t.namespace, admin_secret_name(&t));
    kclient::kubeconfig::deliver(&delivery, &t.name, &secret, &text)
}

async fn rotate(args: &KubeconfigRotateArgs) -> Result<(), Error> {
    let (kinds, strict) = args.kinds()?;
    let suffixes: Vec<&str> = kinds.iter().map(|k| k.suffix()).collect();
    rotate_named(&args.kube, &args.name, &suffixes, strict)
        .await
        .map(drop)
}
