//! The tenant cluster's admin kubeconfig, as Kamaji keeps it in a Secret: the Secret's name,
//! its text, and a client of the tenant cluster made from it.

use base64::Engine;
use cli::Conn;
use kclient::error::{ApiServer, Error};
use kcore::fields;
use serde_json::Value;

use super::control_plane::ControlPlane;
use super::secrets::secret_data;

/// The admin kubeconfig Secret of a TenantControlPlane: from its status, else `<tcp>-admin-kubeconfig`.
pub fn admin_secret_name(cp: &ControlPlane) -> String {
    cp.tcp
        .as_ref()
        .and_then(|tcp| fields::at(tcp, &["status", "kubeconfig", "admin", "secretName"]))
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| format!("{}-admin-kubeconfig", cp.tcp_name()))
}

/// Reads the tenant's admin kubeconfig text.
pub async fn admin_kubeconfig(conn: &Conn, cp: &ControlPlane, key: &str) -> Result<String, Error> {
    let secret = admin_secret_name(cp);
    let Some((_, data)) = secret_data(conn, &cp.namespace, &secret).await? else {
        return Err(Error::Other {
            message: format!(
                "Secret \"{secret}\" not found in namespace \"{}\": the control plane has no kubeconfig yet",
                cp.namespace
            ),
            hint: Some(format!(
                "wait until it is ready (kubectl kamaji status {})",
                cp.name
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

/// A client of the tenant cluster as its admin (Kamaji's `admin.conf`), with the server URL and
/// the CA it names.
pub struct TenantAdmin {
    pub client: kube::Client,
    pub target: ApiServer,
    pub server: String,
    pub ca: Vec<u8>,
}

/// The current context's cluster of a parsed kubeconfig: its server URL and its
/// `certificate-authority-data` (base64), empty when absent.
pub fn current_cluster(kc: &serde_json::Value) -> (&str, &str) {
    let current = kc["current-context"].as_str().unwrap_or_default();
    let contexts = kc["contexts"].as_array();
    let ctx = contexts.and_then(|cs| {
        cs.iter()
            .find(|c| c["name"] == current)
            .or_else(|| cs.first())
    });
    let cluster = ctx.and_then(|ctx| {
        kc["clusters"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["name"] == ctx["context"]["cluster"]))
    });
    let field = |f: &str| {
        cluster
            .and_then(|c| c["cluster"][f].as_str())
            .unwrap_or_default()
    };
    (field("server"), field("certificate-authority-data"))
}

pub async fn tenant_admin(conn: &Conn, cp: &ControlPlane) -> Result<TenantAdmin, Error> {
    let text = admin_kubeconfig(conn, cp, "admin.conf").await?;
    let kc_value = kclient::kubeconfig::parse(&text, "the tenant admin kubeconfig")?;
    let (server, ca_b64) = current_cluster(&kc_value);
    let server = server.to_string();
    let ca = base64::engine::general_purpose::STANDARD
        .decode(ca_b64)
        .map_err(|_| Error::Other {
            message: "the tenant admin kubeconfig has no readable certificate-authority-data"
                .into(),
            hint: Some(format!(
                "check Secret {} (kubectl kamaji kubeconfig get {})",
                admin_secret_name(cp),
                cp.name
            )),
        })?;

    // The tenant cluster's API.
    let (client, tenant_target) =
        kclient::kubeconfig::client_of(&text, &format!("tenant {}", cp.name)).await?;
    Ok(TenantAdmin {
        client,
        target: tenant_target,
        server,
        ca,
    })
}
