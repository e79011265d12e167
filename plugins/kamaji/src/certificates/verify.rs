//! `certificates rotate --verify`: after Kamaji re-issued what was rotated, each path that uses
//! the tenant's certificates is tried for real (`kcore::kamaji::certificates::CertPath`), until
//! they all work or the timeout; then the first one still failing is named with its cause and
//! how to roll back. After a CA rotation, `kubectl exec` and `logs` have failed for every
//! tenant while every health endpoint stayed green (clastix/kamaji#1151): health is not enough.

use std::time::{Duration, Instant};

use base64::Engine;
use cli::Conn;
use k8s_openapi::api::core::v1::Pod;
use kclient::error::Error;
use kclient::render;
use kcore::build::pki;
use kcore::kamaji::certificates::{CertPath, PathCheck, PathOutcome, first_failure};
use kube::api::{Api, ListParams, LogParams};

use crate::common::control_plane::ControlPlane;
use crate::common::secrets::secret_data;
use crate::common::tenant_kubeconfig::{current_cluster, tenant_admin};
use crate::common::tenant_status::tcp_phase;

/// Between two tries of the paths.
const INTERVAL: Duration = Duration::from_secs(2);

/// Waits until the `rotated` Secrets exist again and every path works; prints each path's line.
/// Past `timeout`, fails naming the first path that still fails.
pub async fn verify(
    conn: &Conn,
    cp_now: impl AsyncFn() -> Result<ControlPlane, Error>,
    rotated: &[String],
    timeout: Duration,
) -> Result<(), Error> {
    let started = Instant::now();
    let mut last = String::new();
    loop {
        let cp = cp_now().await?;
        let (checks, waiting) = match reissued(conn, &cp, rotated).await? {
            Some(why) => (Vec::new(), Some(why)),
            None => {
                let checks = checks(conn, &cp).await?;
                let failing = first_failure(&checks).map(PathCheck::line);
                (checks, failing)
            }
        };
        let Some(waiting) = waiting else {
            for c in &checks {
                render::line(&c.line());
            }
            render::line(&format!(
                "{}: every path that uses its certificates works ({}s after the rotation)",
                cp.name,
                started.elapsed().as_secs()
            ));
            return Ok(());
        };
        if started.elapsed() >= timeout {
            for c in &checks {
                render::info(&c.line());
            }
            let Some(failed) = first_failure(&checks) else {
                return Err(Error::Other {
                    message: format!("{}: {waiting} after {}s", cp.name, timeout.as_secs()),
                    hint: Some(format!(
                        "kubectl kamaji status {} shows where it stands",
                        cp.name
                    )),
                });
            };
            let PathOutcome::Failed { cause } = &failed.outcome else {
                return Err(Error::other(waiting));
            };
            return Err(Error::Other {
                message: format!(
                    "{}: after the rotation, the {} fails: {cause}",
                    cp.name,
                    failed.path.label()
                ),
                hint: Some(failed.path.rollback(&cp.name)),
            });
        }
        if waiting != last {
            render::info(&format!("{}: {waiting}", cp.name));
            last = waiting;
        }
        tokio::time::sleep(INTERVAL).await;
    }
}

/// Why the rotation is not done yet (a Secret not re-issued, the control plane not Ready), or
/// `None` when it is.
async fn reissued(
    conn: &Conn,
    cp: &ControlPlane,
    rotated: &[String],
) -> Result<Option<String>, Error> {
    for name in rotated {
        if secret_data(conn, &cp.namespace, name).await?.is_none() {
            return Ok(Some(format!(
                "waiting for Kamaji to re-issue Secret {name}"
            )));
        }
    }
    let phase = cp.tcp.as_ref().and_then(tcp_phase).unwrap_or_default();
    Ok((phase != "Ready")
        .then(|| format!("waiting for the TenantControlPlane to be Ready (now {phase:?})")))
}

/// The first certificate in key `key` of the Secret `name`, as DER.
async fn secret_cert(
    conn: &Conn,
    ns: &str,
    name: &str,
    key: &str,
) -> Result<Option<Vec<u8>>, Error> {
    Ok(secret_data(conn, ns, name).await?.and_then(|(_, data)| {
        data.get(key)
            .and_then(|pem| pki::pem_der(pem).into_iter().next())
    }))
}

fn passed(path: CertPath, detail: String) -> PathCheck {
    PathCheck {
        path,
        outcome: PathOutcome::Passed { detail },
    }
}
fn failed(path: CertPath, cause: String) -> PathCheck {
    PathCheck {
        path,
        outcome: PathOutcome::Failed { cause },
    }
}
fn not_checked(path: CertPath, why: &str) -> PathCheck {
    PathCheck {
        path,
        outcome: PathOutcome::NotChecked { why: why.into() },
    }
}

/// Every path, in order.
async fn checks(conn: &Conn, cp: &ControlPlane) -> Result<Vec<PathCheck>, Error> {
    let tcp = cp.tcp_name();
    let ns = &cp.namespace;
    let ca = secret_data(conn, ns, &format!("{tcp}-ca"))
        .await?
        .and_then(|(_, d)| d.get("ca.crt").cloned())
        .unwrap_or_default();
    let mut out = Vec::new();

    // The endpoint, as the admin kubeconfig names it.
    let admin = tenant_admin(conn, cp).await;
    out.push(match &admin {
        Err(e) => failed(
            CertPath::Serving,
            format!("the admin kubeconfig cannot be read: {e}"),
        ),
        Ok(a) => serving(conn, ns, &tcp, &a.server, &ca).await?,
    });
    out.push(match &admin {
        Err(e) => failed(CertPath::Admin, e.to_string()),
        Ok(a) => match a.client.apiserver_version().await {
            Ok(v) => passed(CertPath::Admin, format!("Kubernetes {}", v.git_version)),
            Err(e) => failed(CertPath::Admin, e.to_string()),
        },
    });
    match cp.cluster_name() {
        None => {
            let why = "a standalone TenantControlPlane has no Cluster";
            out.push(not_checked(CertPath::ClusterApiKubeconfig, why));
            out.push(not_checked(CertPath::ClusterApiCa, why));
        }
        Some(cluster) => {
            let secret = format!("{cluster}-kubeconfig");
            let kc = secret_data(conn, ns, &secret)
                .await?
                .and_then(|(_, d)| d.get("value").cloned());
            out.push(match kc.map(String::from_utf8) {
                None => failed(
                    CertPath::ClusterApiKubeconfig,
                    format!("Secret {ns}/{secret} does not exist"),
                ),
                Some(Err(_)) => failed(
                    CertPath::ClusterApiKubeconfig,
                    format!("Secret {ns}/{secret} is not text"),
                ),
                Some(Ok(text)) => capi_kubeconfig(&text, &format!("Secret {ns}/{secret}")).await,
            });
            let secret = format!("{cluster}-ca");
            let copied = secret_cert(conn, ns, &secret, "tls.crt").await?;
            let tenant_ca = pki::pem_der(&ca).into_iter().next();
            out.push(match (copied, tenant_ca) {
                (Some(a), Some(b)) if a == b && secret == format!("{tcp}-ca") => passed(
                    CertPath::ClusterApiCa,
                    format!("Secret {ns}/{secret} is Kamaji's own: the Cluster and the TenantControlPlane share the name"),
                ),
                (Some(a), Some(b)) if a == b => passed(
                    CertPath::ClusterApiCa,
                    format!("Secret {ns}/{secret} holds the tenant's CA"),
                ),
                (Some(_), Some(_)) => failed(
                    CertPath::ClusterApiCa,
                    format!("Secret {ns}/{secret} holds another CA than {tcp}-ca"),
                ),
                (None, _) => failed(
                    CertPath::ClusterApiCa,
                    format!("Secret {ns}/{secret} has no tls.crt"),
                ),
                (_, None) => failed(
                    CertPath::ClusterApiCa,
                    format!("Secret {ns}/{tcp}-ca has no ca.crt"),
                ),
            });
        }
    }
    out.push(match &admin {
        Err(e) => failed(CertPath::Kubelet, e.to_string()),
        Ok(a) => kubelet(a.client.clone(), cp).await,
    });
    Ok(out)
}

/// Cluster API's kubeconfig answers; when it does not, a handshake with its own CA says why
/// (a client error alone reads "client error (Connect)").
async fn capi_kubeconfig(text: &str, label: &str) -> PathCheck {
    let path = CertPath::ClusterApiKubeconfig;
    let answered = match kclient::kubeconfig::client_of(text, label).await {
        Err(e) => return failed(path, e.to_string()),
        Ok((client, _)) => client.apiserver_version().await,
    };
    let e = match answered {
        Ok(v) => {
            return passed(
                path,
                format!("{label} answers with Kubernetes {}", v.git_version),
            );
        }
        Err(e) => e,
    };
    let why = match kclient::kubeconfig::parse(text, label) {
        Ok(kc) => {
            let (server, ca_b64) = current_cluster(&kc);
            let ca = base64::engine::general_purpose::STANDARD
                .decode(ca_b64)
                .unwrap_or_default();
            match host_port(server) {
                Some((host, port)) => match kclient::tls::handshake(&host, port, &ca).await {
                    Err(tls) => format!("{tls} (with the CA it holds)"),
                    Ok(_) => e.to_string(),
                },
                None => e.to_string(),
            }
        }
        Err(_) => e.to_string(),
    };
    failed(path, format!("{label}: {why}"))
}

/// The endpoint presents the re-issued serving certificate, verified against the tenant's CA
/// for the host the kubeconfigs name.
async fn serving(
    conn: &Conn,
    ns: &str,
    tcp: &str,
    server: &str,
    ca: &[u8],
) -> Result<PathCheck, Error> {
    let Some((host, port)) = host_port(server) else {
        return Ok(failed(
            CertPath::Serving,
            format!("the admin kubeconfig's server {server:?} is not https://HOST:PORT"),
        ));
    };
    let secret = format!("{tcp}-api-server-certificate");
    let issued = secret_cert(conn, ns, &secret, "apiserver.crt").await?;
    Ok(match kclient::tls::handshake(&host, port, ca).await {
        Err(e) => failed(
            CertPath::Serving,
            format!("{e} (verified against Secret {ns}/{tcp}-ca)"),
        ),
        Ok(presented) if Some(&presented) == issued.as_ref() => passed(
            CertPath::Serving,
            format!(
                "{host}:{port} presents {}, signed by the tenant's CA",
                pki::der_summary(&presented).unwrap_or_default()
            ),
        ),
        Ok(presented) => failed(
            CertPath::Serving,
            format!(
                "{host}:{port} presents {}, not the one in Secret {ns}/{secret} ({}): Kamaji has not rolled the control plane onto it",
                pki::der_summary(&presented).unwrap_or_default(),
                issued
                    .as_deref()
                    .and_then(pki::der_summary)
                    .unwrap_or_else(|| "none".into())
            ),
        ),
    })
}

/// `https://HOST:PORT` as `kcore::kamaji::endpoint` splits it; `None` for anything not https.
fn host_port(server: &str) -> Option<(String, u16)> {
    server.strip_prefix("https://")?;
    kcore::kamaji::endpoint::split_endpoint(server.trim_end_matches('/'))
}

/// The API server reads a running pod's log from its kubelet: the API server's kubelet client
/// certificate against the kubelet's client CA (through Konnectivity when the tenant uses it).
async fn kubelet(client: kube::Client, cp: &ControlPlane) -> PathCheck {
    let pods: Api<Pod> = Api::all(client.clone());
    let lp = ListParams::default()
        .fields("status.phase=Running")
        .limit(50);
    let listed = match pods.list(&lp).await {
        Ok(l) => l.items,
        Err(e) => return failed(CertPath::Kubelet, format!("listing the tenant's pods: {e}")),
    };
    let Some(pod) = listed
        .iter()
        .find(|p| p.spec.as_ref().is_some_and(|s| s.node_name.is_some()))
    else {
        return not_checked(CertPath::Kubelet, "no pod runs on a node of the tenant");
    };
    let (ns, name) = (
        pod.metadata.namespace.clone().unwrap_or_default(),
        pod.metadata.name.clone().unwrap_or_default(),
    );
    let node = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .unwrap_or_default();
    let through = if cp
        .tcp
        .as_ref()
        .is_some_and(|t| t["spec"]["addons"]["konnectivity"].is_object())
    {
        ", through Konnectivity"
    } else {
        ""
    };
    let lp = LogParams {
        tail_lines: Some(1),
        ..LogParams::default()
    };
    match Api::<Pod>::namespaced(client, &ns).logs(&name, &lp).await {
        Ok(_) => passed(
            CertPath::Kubelet,
            format!("logs of {ns}/{name} from node {node}{through}"),
        ),
        Err(e) => failed(
            CertPath::Kubelet,
            format!("logs of {ns}/{name} from node {node}{through}: {e}"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::host_port;

    #[test]
    fn the_endpoint_is_read_from_the_server_url() {
        assert_eq!(
            host_port("https://127.0.0.1:6443"),
            Some(("127.0.0.1".into(), 6443))
        );
        assert_eq!(
            host_port("https://[fd00::1]:6443/"),
            Some(("fd00::1".into(), 6443))
        );
        assert_eq!(host_port("http://x:1"), None);
    }
}
