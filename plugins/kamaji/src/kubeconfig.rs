//! `kubectl kamaji kubeconfig get|rotate`: a tenant's admin kubeconfig (clastix's verbs and
//! flags, plus `--merge`).

use std::path::PathBuf;

use clap::{Args as ClapArgs, Subcommand, ValueEnum};
use cli::KubeFlags;
use shared::discovery::ServerApis;
use shared::error::Error;
use shared::render;

use crate::common;

#[derive(ClapArgs, Clone, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub verb: Verb,
}

#[derive(Subcommand, Clone, Debug)]
pub enum Verb {
    /// Print (or --merge) the admin kubeconfig of a tenant control plane
    Get(GetArgs),
    /// Have Kamaji regenerate kubeconfigs (their Secrets are deleted; Kamaji re-issues them)
    Rotate(RotateArgs),
}

#[derive(ClapArgs, Clone, Debug)]
#[command(after_help = "Examples:
  kubectl kamaji kubeconfig get prod > prod.kubeconfig
  kubectl kamaji kubeconfig get prod --merge            # into $KUBECONFIG or ~/.kube/config, context prod-admin@prod
  kubectl kamaji kubeconfig get prod --secret-key admin.svc")]
pub struct GetArgs {
    /// The KamajiControlPlane (or TenantControlPlane)
    #[arg(value_name = "CONTROL_PLANE")]
    pub name: String,
    /// The key of the admin kubeconfig Secret: admin.conf, admin.svc, super-admin.conf, super-admin.svc
    #[arg(long, default_value = "admin.conf", value_name = "KEY")]
    pub secret_key: String,
    /// Merge into a kubeconfig file instead of printing (atomic, 0600, keeps a .bak)
    #[arg(long)]
    pub merge: bool,
    /// The file --merge writes (default: first entry of $KUBECONFIG, else ~/.kube/config)
    #[arg(long, value_name = "FILE", requires = "merge")]
    pub merge_file: Option<PathBuf>,
    /// Context name for --merge (default NAME-admin@NAME)
    #[arg(long, value_name = "NAME", requires = "merge")]
    pub context_name: Option<String>,
    /// Make the merged context the current one
    #[arg(long, requires = "merge")]
    pub set_current: bool,
    /// Replace existing entries with the same names
    #[arg(long, requires = "merge")]
    pub force: bool,
    #[command(flatten)]
    pub kube: KubeFlags,
}

/// Kamaji's kubeconfig Secrets.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum KubeconfigKind {
    Admin,
    ControllerManager,
    Scheduler,
    Konnectivity,
}

impl KubeconfigKind {
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
pub struct RotateArgs {
    /// The KamajiControlPlane (or TenantControlPlane)
    #[arg(value_name = "CONTROL_PLANE")]
    pub name: String,
    /// Which kubeconfigs (default: admin)
    #[arg(
        long = "kubeconfig-type",
        value_enum,
        value_delimiter = ',',
        value_name = "TYPE"
    )]
    pub kinds: Vec<KubeconfigKind>,
    /// All of them
    #[arg(long, conflicts_with = "kinds")]
    pub all: bool,
    #[command(flatten)]
    pub kube: KubeFlags,
}

pub async fn run(args: &Args) -> Result<(), Error> {
    match &args.verb {
        Verb::Get(a) => get(a).await,
        Verb::Rotate(a) => rotate(a).await,
    }
}

const KEYS: [&str; 4] = [
    "admin.conf",
    "admin.svc",
    "super-admin.conf",
    "super-admin.svc",
];

/// Reads the tenant's admin kubeconfig text.
pub async fn admin_kubeconfig(
    conn: &cli::Conn,
    t: &common::Target,
    key: &str,
) -> Result<String, Error> {
    let secret = common::admin_secret_name(t);
    let Some((_, data)) = common::secret_data(conn, &t.namespace, &secret).await? else {
        return Err(Error::Other {
            message: format!(
                "Secret \"{secret}\" not found in namespace \"{}\": the control plane has no kubeconfig yet",
                t.namespace
            ),
            hint: Some(format!(
                "wait until it is ready (kubectl kamaji status {})",
                t.name
            )),
        });
    };
    let bytes = data.get(key).ok_or_else(|| {
        let keys: Vec<&str> = data.keys().map(String::as_str).collect();
        Error::Usage {
            message: format!("Secret \"{secret}\" has no key {key:?}"),
            hint: Some(format!("use --secret-key with one of: {}", keys.join(", "))),
        }
    })?;
    String::from_utf8(bytes.clone())
        .map_err(|_| Error::other(format!("Secret \"{secret}\" key {key} is not text")))
}

async fn get(args: &GetArgs) -> Result<(), Error> {
    if !KEYS.contains(&args.secret_key.as_str()) {
        return Err(Error::Usage {
            message: format!("invalid --secret-key {:?}", args.secret_key),
            hint: Some(format!("use one of: {}", KEYS.join(", "))),
        });
    }
    let conn = args.kube.connect().await?;
    let apis = ServerApis::discover(&conn).await?;
    let t = common::resolve(&conn, &apis, &args.name).await?;
    let text = admin_kubeconfig(&conn, &t, &args.secret_key).await?;
    if !args.merge {
        render::raw(text.as_bytes());
        if !text.ends_with('\n') {
            render::raw(b"\n");
        }
        return Ok(());
    }
    let fetched = shared::kubeconfig::parse(&text, "the tenant kubeconfig")?;
    let name = &t.name;
    let context = args
        .context_name
        .clone()
        .unwrap_or_else(|| format!("{name}-admin@{name}"));
    let renamed = shared::kubeconfig::rename(&fetched, name, &format!("{name}-admin"), &context)?;
    let file = args
        .merge_file
        .clone()
        .or_else(shared::kubeconfig::default_merge_file)
        .ok_or_else(|| Error::Usage {
            message: "no kubeconfig file to merge into".into(),
            hint: Some("pass --merge-file, or set KUBECONFIG or HOME".into()),
        })?;
    let opts = shared::kubeconfig::MergeOptions {
        force: args.force,
        set_current: args.set_current,
        conflict_hint: "pass --force to replace them, or --context-name to merge under another name",
    };
    let report = shared::kubeconfig::merge_into_file(&file, &renamed, opts)?;
    let what = if !report.added.is_empty() {
        "merged"
    } else if !report.replaced.is_empty() {
        "replaced"
    } else {
        "already present"
    };
    let mut msg = format!("context \"{}\" {what} in {}", report.context, report.file);
    if let Some(b) = &report.backup {
        msg.push_str(&format!(" (previous file kept as {b})"));
    }
    render::line(&msg);
    if report.current_context_set {
        render::line(&format!("current context is now \"{}\"", report.context));
    } else {
        render::line(&format!(
            "use it with: kubectl --context {} get nodes",
            report.context
        ));
    }
    Ok(())
}

async fn rotate(args: &RotateArgs) -> Result<(), Error> {
    let conn = args.kube.connect().await?;
    let apis = ServerApis::discover(&conn).await?;
    let t = common::resolve(&conn, &apis, &args.name).await?;
    let kinds: Vec<KubeconfigKind> = if args.all {
        vec![
            KubeconfigKind::Admin,
            KubeconfigKind::ControllerManager,
            KubeconfigKind::Scheduler,
            KubeconfigKind::Konnectivity,
        ]
    } else if args.kinds.is_empty() {
        vec![KubeconfigKind::Admin]
    } else {
        args.kinds.clone()
    };
    let names: Vec<String> = kinds
        .iter()
        .map(|k| format!("{}-{}", t.tcp_name(), k.suffix()))
        .collect();
    rotate_secrets(&conn, &t, &names, !args.all).await
}

/// Puts Kamaji's rotation annotation on Secrets. Missing ones fail when `strict`, else are
/// reported and skipped.
pub async fn rotate_secrets(
    conn: &cli::Conn,
    t: &common::Target,
    names: &[String],
    strict: bool,
) -> Result<(), Error> {
    let ar = kube::api::ApiResource::erase::<k8s_openapi::api::core::v1::Secret>(&());
    // Check every Secret first, so a strict run changes nothing when one is missing.
    let mut present = Vec::new();
    for name in names {
        if common::secret_data(conn, &t.namespace, name)
            .await?
            .is_none()
        {
            if strict {
                return Err(Error::Other {
                    message: format!(
                        "Secret \"{name}\" not found in namespace \"{}\"",
                        t.namespace
                    ),
                    hint: Some(format!(
                        "Kamaji has not created it; check kubectl kamaji status {}",
                        t.name
                    )),
                });
            }
            render::info(&format!("secret/{name} not found, skipped"));
            continue;
        }
        present.push(name);
    }
    if present.is_empty() {
        return Err(Error::other("nothing to rotate: none of the Secrets exist"));
    }
    for name in present {
        // Deleting is the trigger every Kamaji release honours: Kamaji re-issues a missing
        // certificate or kubeconfig Secret on its next reconcile (the Secrets are owned by the
        // TenantControlPlane, so the deletion itself triggers it) and rolls the control plane
        // onto it. The `certs.kamaji.clastix.io/rotate` annotation only exists in newer Kamaji
        // releases; v1.0.0 ignores it (see its `internal/resources/*_certificate.go`).
        common::delete(conn, &ar, &t.namespace, name).await?;
        render::line(&format!(
            "secret/{name} deleted: Kamaji re-issues it and rolls the control plane"
        ));
    }
    Ok(())
}
