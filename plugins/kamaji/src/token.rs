//! `kubectl kamaji token join NAME --flavour kubeadm|yaki`: a worker join command, with a
//! bootstrap token of the tenant cluster and the CA public-key hash. The command, flags and
//! lines are clastix's `kamaji` plugin's (`cmd/token/join.go`, `pkg/commands/join_token.go`,
//! github.com/clastix/kamaji-kubectl-plugin v1.0.0), but for the default flavour (see the
//! `--help` text of [`JoinArgs`]).

use std::time::Duration;

use clap::{Args as ClapArgs, Subcommand, ValueEnum};
use cli::{KubeFlags, parse_duration};
use k8s_openapi::api::core::v1::Secret;
use kclient::discovery::ServerApis;
use kclient::error::{ApiServer, Error, Op};
use kclient::render;
use kcore::build::pki;
use kcore::fields;
use kube::api::{Api, ListParams, PostParams};

use crate::common::clastix::CobraBool;
use crate::common::control_plane::{ControlPlane, resolve};
use crate::common::tenant_kubeconfig::{TenantAdmin, tenant_admin};
use crate::common::tenant_status::bootstrap_token_phase_done;

#[derive(ClapArgs, Clone, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub verb: TokenCommand,
}

#[derive(Subcommand, Clone, Debug)]
pub enum TokenCommand {
    /// Print a command that joins a worker to the tenant cluster
    Join(JoinArgs),
}

#[derive(ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Flavour {
    /// kubeadm join ... (the default here)
    #[default]
    Kubeadm,
    /// Clastix's yaki script (goyaki.clastix.io; clastix's kamaji plugin's default)
    Yaki,
}

#[derive(ClapArgs, Clone, Debug)]
#[command(
    after_help = "The default flavour is kubeadm, where clastix's kamaji plugin prints the yaki one-liner by default: the kubeadm line runs with what a node already has (kubeadm, as Cluster API's bootstrap and BYOH hosts use it), while the yaki line pipes a script downloaded from goyaki.clastix.io into sudo bash, which this plugin does not print unless asked. --flavour=yaki prints clastix's line exactly, with KUBERNETES_VERSION set to the tenant's version.

A valid bootstrap token in the tenant is reused (the one that lives longest; never kubeadm's well-known placeholder abcdef.0123456789abcdef), else one is created for --ttl. clastix's plugin reuses the first token it finds and creates none.

Examples:
  kubectl kamaji token join prod
  kubectl kamaji token join prod --flavour=yaki
  kubectl kamaji token join prod --new-token --ttl 2h"
)]
pub struct JoinArgs {
    /// The KamajiControlPlane (or TenantControlPlane)
    #[arg(value_name = "CONTROL_PLANE")]
    pub name: String,
    /// The join command's style (clastix's plugin defaults to yaki; see below)
    #[arg(long, alias = "flavor", value_enum, default_value_t = Flavour::Kubeadm)]
    pub flavour: Flavour,
    /// Lifetime of a new token (1m to 720h)
    #[arg(long, value_parser = token_ttl, default_value = "24h", value_name = "DURATION")]
    pub ttl: Duration,
    /// Ignore expired tokens (clastix's flag; expired tokens are never offered here, since a join with one fails, so =false changes nothing)
    #[arg(long, cobra_bool = true)]
    pub skip_expired: bool,
    /// Create a new token even if a valid one exists
    #[arg(long)]
    pub new_token: bool,
    #[command(flatten)]
    pub kube: KubeFlags,
}

/// The TenantControlPlane, once Kamaji has run its bootstrap-token phase.
fn joinable_tcp(t: &ControlPlane) -> Result<serde_json::Value, Error> {
    let tcp = t.tcp.clone().ok_or_else(|| Error::Other {
        message: format!("{} has no TenantControlPlane yet", t.name),
        hint: Some(format!(
            "wait until it is ready (kubectl kamaji status {})",
            t.name
        )),
    })?;
    if !bootstrap_token_phase_done(&tcp) {
        return Err(Error::Other {
            message: format!(
                "the bootstrap-token phase of {} has not run yet",
                t.tcp_name()
            ),
            hint: Some(format!(
                "wait until the control plane is ready (kubectl kamaji status {})",
                t.name
            )),
        });
    }
    Ok(tcp)
}

/// The usable bootstrap token that lives longest, if any.
async fn reusable_token(
    secrets: &Api<Secret>,
    target: &ApiServer,
    now: jiff::Timestamp,
) -> Result<Option<String>, Error> {
    let op = Op::new("list", "", "secrets", "Secret").in_namespace(Some("kube-system"));
    let list = secrets
        .list(&ListParams::default().fields("type=bootstrap.kubernetes.io/token"))
        .await
        .map_err(|e| kclient::error::from_kube(e, target, &op))?;
    let mut found: Vec<(String, String)> = list
        .items
        .iter()
        .filter_map(|s| {
            let v = serde_json::to_value(s).ok()?;
            let tok = pki::usable_token(&v, now)?;
            let exp = v["data"]["expiration"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            Some((exp, tok))
        })
        .collect();
    found.sort();
    Ok(found.pop().map(|(_, t)| t))
}

/// `--ttl`: a kubectl duration of at least a minute. kubeadm reads 0 as "never expires"; a join
/// token that never expires is not offered here, and a shorter one would be stale before a
/// host could use it.
fn token_ttl(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d < Duration::from_secs(60) {
        return Err(format!(
            "a token living {s} expires before a host can join; use at least 1m"
        ));
    }
    Ok(d)
}

/// Creates a bootstrap token Secret living `ttl` and returns the token.
async fn create_token(
    secrets: &Api<Secret>,
    target: &ApiServer,
    now: jiff::Timestamp,
    ttl: Duration,
) -> Result<String, Error> {
    let (id, secret) = pki::new_token()?;
    let ttl = jiff::SignedDuration::try_from(ttl).unwrap_or(jiff::SignedDuration::from_hours(24));
    let exp = now
        .checked_add(ttl)
        .unwrap_or(now)
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    let body: Secret = serde_json::from_value(pki::bootstrap_token_secret(
        &id,
        &secret,
        &exp,
        "created by kubectl kamaji token join",
    ))
    .map_err(|e| Error::other(format!("building the token Secret: {e}")))?;
    secrets
        .create(
            &PostParams {
                field_manager: Some(kcore::kamaji::create::FIELD_MANAGER.into()),
                ..Default::default()
            },
            &body,
        )
        .await
        .map_err(|e| {
            kclient::error::from_kube(
                e,
                target,
                &Op::new("create", "", "secrets", "Secret").in_namespace(Some("kube-system")),
            )
        })?;
    Ok(format!("{id}.{secret}"))
}

/// The join command in the flavour asked for.
fn join_line(
    flavour: Flavour,
    tcp: &serde_json::Value,
    endpoint: &str,
    token: &str,
    hash: &str,
) -> String {
    match flavour {
        Flavour::Kubeadm => {
            format!("kubeadm join {endpoint} --token {token} --discovery-token-ca-cert-hash {hash}")
        }
        Flavour::Yaki => {
            let version = fields::at(
                tcp,
                &["status", "kubernetesResources", "version", "version"],
            )
            .or_else(|| fields::at(tcp, &["spec", "kubernetes", "version"]))
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_string();
            // clastix's line, byte for byte (`joinTokenYakiFlavour`,
            // `pkg/commands/join_token.go`, kamaji-kubectl-plugin v1.0.0).
            format!(
                "wget -O- https://goyaki.clastix.io | sudo KUBERNETES_VERSION={version} JOIN_URL={endpoint} JOIN_TOKEN={token} JOIN_TOKEN_CACERT_HASH={hash} bash -s join"
            )
        }
    }
}

pub async fn run(args: &Args) -> Result<(), Error> {
    let TokenCommand::Join(a) = &args.verb;
    let conn = a.kube.connect().await?;
    let apis = ServerApis::discover(&conn).await?;
    let t = resolve(&conn, &apis, &a.name).await?;
    let tcp = joinable_tcp(&t)?;
    let TenantAdmin {
        client,
        target: tenant_target,
        server,
        ca,
    } = tenant_admin(&conn, &t).await?;
    let hash = pki::ca_cert_hash(&ca)?;
    let endpoint = server
        .trim_start_matches("https://")
        .trim_end_matches('/')
        .to_string();
    let secrets: Api<Secret> = Api::namespaced(client, "kube-system");
    let now = jiff::Timestamp::now();
    let reused = if a.new_token {
        None
    } else {
        reusable_token(&secrets, &tenant_target, now).await?
    };
    let token = match reused {
        Some(t) => t,
        None => create_token(&secrets, &tenant_target, now, a.ttl).await?,
    };
    render::line(&join_line(a.flavour, &tcp, &endpoint, &token, &hash));
    Ok(())
}
