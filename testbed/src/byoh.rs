//! The real BYOH controller manager (cluster-api-provider-bringyourownhost, the version in
//! `versions.env`), run out of cluster against the testbed with its admission webhooks
//! registered.
//!
//! BYOH v0.5.0 is a CAPI v1beta1 client, so it needs the CAPI manager's conversion webhook on
//! the CAPI CRDs ([`crate::capi`] sets that up). Its ByoHost webhook lets only
//! `system:serviceaccount:byoh-system:byoh-controller-manager` and `byoh:host:<name>` users
//! change hosts (`apis/infrastructure/v1beta1/byohost_webhook.go`), so the manager runs as that
//! service-account user (a token of the testbed's), and the real host agents
//! (`crate::agent`) are their `byoh:host:<name>` users by the certificates their CSRs got. Its webhook port, 9443, is hard-coded upstream, so it runs in
//! a network namespace of its own ([`crate::netns`]), with its webhook and health ports exposed
//! on free host ports and the API server's and every tenant's port forwarded in: several
//! testbeds (tests, the demo) can then run at once.

use std::time::Duration;

use kube::Client;

use crate::{BYOH_MANAGER_TOKEN, Error, Proc, Testbed, certs, free_port};

/// The port BYOH's webhook server listens on (`main.go` upstream: `Port: 9443`).
pub const WEBHOOK_PORT: u16 = 9443;

pub async fn start(tb: &Testbed, client: &Client) -> Result<(), Error> {
    agent_rbac(tb, client).await?;
    let bin = crate::assets::built(&tb.assets.byoh, "the BYOH controller manager was not built")?
        .join("byoh-manager");
    // controller-runtime v0.14 reads the serving certificate from $TMPDIR.
    let tmp = tb.dir.join("byoh-tmp");
    let certs_dir = tmp.join("k8s-webhook-server/serving-certs");
    std::fs::create_dir_all(&certs_dir).map_err(|e| Error::io(&certs_dir, e))?;
    let ca = certs::webhook_serving(&certs_dir)?;
    let sandbox = std::sync::Arc::new(crate::netns::NetSandbox::for_controller(tb, "byoh")?);
    let webhook = sandbox.expose(WEBHOOK_PORT)?;
    crate::capi::register_webhooks(tb, client, "byoh", "byoh-webhooks.yaml", webhook, &ca).await?;
    let kubeconfig = tb.kubeconfig_with_token("byoh-controller-manager", BYOH_MANAGER_TOKEN)?;
    let (metrics, health) = (free_port()?, free_port()?);
    let log = tb.dir.join("byoh-manager.log");
    let health_outside = sandbox.expose(health)?;
    let mut args = sandbox.enter_args();
    args.extend([
        bin.display().to_string(),
        format!("-metrics-addr=127.0.0.1:{metrics}"),
        format!("-health-probe-bind-address=127.0.0.1:{health}"),
        format!("-kubeconfig={}", kubeconfig.display()),
        "-v=2".into(),
    ]);
    let proc = Proc::spawn_with_env(
        "byoh-manager",
        std::path::Path::new("nsenter"),
        &args,
        &log,
        &[("TMPDIR", tmp.display().to_string())],
    )?;
    tb.push(proc);
    if let Ok(mut v) = tb.sandboxes.lock() {
        v.push(sandbox);
    }
    let ready = || async {
        crate::http_get_ok(health_outside, "/readyz")
            && std::fs::read_to_string(&log).is_ok_and(|t| t.contains("Serving webhook server"))
    };
    tb.wait_until("byoh-manager", &log, Duration::from_secs(90), ready)
        .await?;
    tracing::info!("BYOH controller manager ready (namespace-isolated; webhooks on :{webhook})");
    Ok(())
}

/// What BYOH's release grants its host agents (upstream `config/rbac`, copied by
/// `build-bins.sh crds`): bootstrap-token users create CSRs, `byoh:hosts` edit ByoHosts and read
/// Secrets. The real agent (`testbed::agent`) needs nothing else.
async fn agent_rbac(tb: &Testbed, client: &Client) -> Result<(), Error> {
    use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
    let path = tb.assets.crds.join("byoh-agent-rbac.yaml");
    let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
    let docs: Vec<serde_json::Value> =
        serde_saphyr::from_multiple(&text).map_err(|e| Error::Crd {
            file: path.display().to_string(),
            msg: e.to_string(),
        })?;
    for d in docs.into_iter().filter(|d| d.is_object()) {
        let kind = d["kind"].as_str().unwrap_or_default().to_string();
        let name = d["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let plural = format!("{}s", kind.to_lowercase());
        let ar = ApiResource {
            group: "rbac.authorization.k8s.io".into(),
            version: "v1".into(),
            api_version: "rbac.authorization.k8s.io/v1".into(),
            kind,
            plural,
        };
        Api::<DynamicObject>::all_with(client.clone(), &ar)
            .patch(
                &name,
                &PatchParams::apply("capi-testbed").force(),
                &Patch::Apply(&d),
            )
            .await?;
    }
    Ok(())
}
