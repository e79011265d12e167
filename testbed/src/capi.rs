//! The real Cluster API v1.14 core manager and kubeadm bootstrap manager, run against the testbed.
//!
//! Its webhook server cannot be turned off and some controllers rely on its defaulting, so the
//! webhooks are registered the way envtest does it: a self-signed serving certificate, and the
//! upstream webhook configurations rewritten to point at `https://127.0.0.1:<port>` by URL.
//!
//! The CRDs of the groups each manager owns get its conversion webhook too, as clusterctl's
//! provider components wire it (`spec.conversion.strategy: Webhook`, path `/convert`), so that a
//! v1beta1 client (BYOH v0.5.0, clusterctl 1.10, CAPI 1.10 era tooling) reads v1beta2-stored
//! objects in real v1beta1 shapes.
//!
//! With the v1beta1 profile, [`start_v1beta1`] runs CAPI v1.10's core manager instead, against
//! CAPI v1.10's own CRDs and webhook configuration: a CAPI 1.10 management cluster, whose
//! controllers read and write the v1beta1 contract themselves.

use std::time::Duration;

use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::discovery::ApiResource;

use crate::{Error, Proc, Testbed, certs, free_port};

/// Starts the CAPI core manager and the kubeadm bootstrap manager (both real, v1.14); the
/// testbed keeps (and stops) them.
pub async fn start(tb: &Testbed, client: &Client) -> Result<(), Error> {
    let dir = crate::assets::built(&tb.assets.capi, "CAPI binaries were not built")?;
    let (port, ca) = start_one(
        tb,
        client,
        "capi-manager",
        &dir.join("capi-manager"),
        &tb.assets.crds.join("capi-webhooks.yaml"),
        &["--feature-gates=ClusterTopology=true".into()],
    )
    .await?;
    convert_through(client, &CORE_GROUPS, port, &ca).await?;
    let (port, ca) = start_one(
        tb,
        client,
        "kubeadm-bootstrap-manager",
        &dir.join("kubeadm-bootstrap-manager"),
        &tb.assets.crds.join("kubeadm-bootstrap-webhooks.yaml"),
        &[],
    )
    .await?;
    convert_through(client, &["bootstrap.cluster.x-k8s.io"], port, &ca).await
}

/// The API groups of the CAPI core provider's CRDs.
const CORE_GROUPS: [&str; 4] = [
    "cluster.x-k8s.io",
    "addons.cluster.x-k8s.io",
    "ipam.cluster.x-k8s.io",
    "runtime.cluster.x-k8s.io",
];

/// Starts CAPI v1.10's core manager (`build-bins.sh capi-v1beta1`: the binary and its
/// release's webhook configuration in one folder) on the v1beta1 profile's CRDs, which serve
/// v1beta1 only but for IPAM's (v1alpha1 too: converted through it, as clusterctl wires it).
/// No kubeadm bootstrap manager: the flows run on it (Kamaji control planes without workers)
/// have no KubeadmConfig.
pub async fn start_v1beta1(tb: &Testbed, client: &Client) -> Result<(), Error> {
    let dir = crate::assets::built(&tb.assets.capi, "CAPI v1.10 binaries were not built")?;
    let (port, ca) = start_one(
        tb,
        client,
        "capi-manager",
        &dir.join("capi-manager"),
        &dir.join("capi-webhooks.yaml"),
        &[],
    )
    .await?;
    convert_through(client, &CORE_GROUPS, port, &ca).await
}

/// Points the conversion of every multi-version CRD of `groups` at a manager's webhook server.
async fn convert_through(
    client: &Client,
    groups: &[&str],
    port: u16,
    ca: &str,
) -> Result<(), Error> {
    use base64::Engine;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let ca_b64 = base64::engine::general_purpose::STANDARD.encode(ca.as_bytes());
    for crd in crds.list(&Default::default()).await?.items {
        let served = crd.spec.versions.iter().filter(|v| v.served).count();
        if !groups.contains(&crd.spec.group.as_str()) || served < 2 {
            continue;
        }
        let name = crd.metadata.name.clone().unwrap_or_default();
        let patch = serde_json::json!({"spec": {"conversion": {
        "strategy": "Webhook",
        "webhook": {
            "clientConfig": {"url": format!("https://127.0.0.1:{port}/convert"), "caBundle": ca_b64},
            "conversionReviewVersions": ["v1", "v1beta1"],
        }}}});
        crds.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
    }
    Ok(())
}

/// The real KubeadmControlPlane manager (CAPI v1.14's `controlplane/kubeadm`) for one
/// namespace's clusters, so that tests on the real controller share a testbed with tests of
/// other namespaces: it reconciles only objects labelled
/// `cluster.x-k8s.io/watch-filter=<namespace>` (`--watch-filter`, CAPI's way to run several
/// instances; v1.14.2's `--namespace` cannot be used: its consistency check
/// (`util/controller/consistency.go`) fails every reconcile with "failed to cast Machine
/// informer to SharedIndexInformer" on a namespace-restricted cache), and its webhooks are
/// scoped to that namespace by a namespace selector. Stopped, and its webhooks removed, when
/// dropped.
pub struct KcpManager {
    proc: Option<Proc>,
    log: std::path::PathBuf,
    client: Client,
    webhooks: Vec<(ApiResource, String)>,
}

/// Starts [`KcpManager`] for `namespace`.
pub async fn start_kcp(
    tb: &Testbed,
    client: &Client,
    namespace: &str,
) -> Result<KcpManager, Error> {
    let dir = crate::assets::built(&tb.assets.capi, "CAPI binaries were not built")?;
    let name = format!("kcp-manager-{namespace}");
    let (proc, _, webhooks) = spawn_manager(
        tb,
        client,
        &name,
        &dir.join("kubeadm-control-plane-manager"),
        &tb.assets.crds.join("kcp-webhooks.yaml"),
        Some(namespace),
        &[format!("--watch-filter={namespace}")],
    )
    .await?;
    Ok(KcpManager {
        proc: Some(proc),
        log: tb.dir.join(format!("{name}.log")),
        client: client.clone(),
        webhooks,
    })
}

impl KcpManager {
    /// The manager's log's last lines that say more than that a reconcile started, for a
    /// failure message.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text
            .lines()
            .filter(|l| !l.contains("\"Reconcile KubeadmControlPlane\""))
            .collect();
        lines[lines.len().saturating_sub(25)..].join("\n")
    }

    /// Stops the manager and removes its webhook configurations.
    pub async fn stop(mut self) {
        self.stop_proc();
        for (ar, name) in std::mem::take(&mut self.webhooks) {
            let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &ar);
            let _ = api.delete(&name, &Default::default()).await;
        }
    }

    fn stop_proc(&mut self) {
        if let Some(p) = self.proc.take() {
            p.terminate(Duration::from_secs(5));
        }
    }
}

impl Drop for KcpManager {
    fn drop(&mut self) {
        self.stop_proc();
        let webhooks = std::mem::take(&mut self.webhooks);
        if webhooks.is_empty() {
            return;
        }
        let client = self.client.clone();
        if let Ok(rt) = crate::background() {
            rt.spawn(async move {
                for (ar, name) in webhooks {
                    let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
                    let _ = api.delete(&name, &Default::default()).await;
                }
            });
        }
    }
}

async fn start_one(
    tb: &Testbed,
    client: &Client,
    name: &str,
    bin: &std::path::Path,
    webhooks: &std::path::Path,
    extra: &[String],
) -> Result<(u16, String), Error> {
    let (proc, port, _) = spawn_manager(tb, client, name, bin, webhooks, None, extra).await?;
    tb.push(proc);
    Ok(port)
}

/// Starts a CAPI manager with its webhooks registered (scoped to `scope`'s namespace when
/// given) and waits until it is ready: the process, (webhook port, CA) and the webhook
/// configurations written.
async fn spawn_manager(
    tb: &Testbed,
    client: &Client,
    name: &str,
    bin: &std::path::Path,
    webhooks: &std::path::Path,
    scope: Option<&str>,
    extra: &[String],
) -> Result<(Proc, (u16, String), Vec<(ApiResource, String)>), Error> {
    let cert_dir = tb.dir.join(format!("{name}-certs"));
    std::fs::create_dir_all(&cert_dir).map_err(|e| Error::io(&cert_dir, e))?;
    let ca = certs::webhook_serving(&cert_dir)?;
    let (webhook, health, diag) = (free_port()?, free_port()?, free_port()?);

    // Register the webhooks first: the manager's own start-up writes objects that they default.
    let written = register_scoped(client, name, webhooks, webhook, &ca, scope).await?;

    let log = tb.dir.join(format!("{name}.log"));
    let mut args = vec![
        format!("--kubeconfig={}", tb.kubeconfig.display()),
        format!("--webhook-port={webhook}"),
        format!("--webhook-cert-dir={}", cert_dir.display()),
        format!("--health-addr=127.0.0.1:{health}"),
        format!("--diagnostics-address=127.0.0.1:{diag}"),
        "--insecure-diagnostics=true".into(),
        "--leader-elect=false".into(),
        "--v=2".into(),
    ];
    args.extend_from_slice(extra);
    let proc = Proc::spawn_with_env(
        name,
        bin,
        &args,
        &log,
        &[("KUBECONFIG", tb.kubeconfig.display().to_string())],
    )?;
    // Ready when the health endpoint answers and the webhook server accepts connections; a
    // manager that exits first is reported with its own last error line.
    let ready = tb
        .wait_until(name, &log, Duration::from_secs(90), || async move {
            crate::http_get_ok(health, "/readyz")
                && std::net::TcpStream::connect(("127.0.0.1", webhook)).is_ok()
        })
        .await;
    match ready {
        Ok(()) => Ok((proc, (webhook, ca), written)),
        Err(e) => {
            proc.terminate(Duration::from_secs(1));
            Err(e)
        }
    }
}

pub(crate) async fn register_webhooks(
    tb: &Testbed,
    client: &Client,
    prefix: &str,
    file: &str,
    port: u16,
    ca: &str,
) -> Result<(), Error> {
    register_webhooks_from(client, prefix, &tb.assets.crds.join(file), port, ca).await
}

/// Like [`register_webhooks`], from a manifest file anywhere.
pub(crate) async fn register_webhooks_from(
    client: &Client,
    prefix: &str,
    path: &std::path::Path,
    port: u16,
    ca: &str,
) -> Result<(), Error> {
    register_scoped(client, prefix, path, port, ca, None)
        .await
        .map(drop)
}

/// [`register_webhooks_from`], each webhook limited to the namespace `scope` when given; the
/// configurations written (resource, name).
async fn register_scoped(
    client: &Client,
    prefix: &str,
    path: &std::path::Path,
    port: u16,
    ca: &str,
    scope: Option<&str>,
) -> Result<Vec<(ApiResource, String)>, Error> {
    use base64::Engine;
    let mut written = Vec::new();
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    let docs: Vec<serde_json::Value> =
        serde_saphyr::from_multiple(&text).map_err(|e| Error::Crd {
            file: path.display().to_string(),
            msg: e.to_string(),
        })?;
    let ca_b64 = base64::engine::general_purpose::STANDARD.encode(ca.as_bytes());
    for mut doc in docs.into_iter().filter(|d| !d.is_null()) {
        let kind = doc["kind"].as_str().unwrap_or_default().to_string();
        let name = format!(
            "{prefix}-{}",
            doc["metadata"]["name"].as_str().unwrap_or_default()
        );
        doc["metadata"]["name"] = name.clone().into();
        if let Some(hooks) = doc["webhooks"].as_array_mut() {
            for h in hooks {
                let p = h["clientConfig"]["service"]["path"]
                    .as_str()
                    .unwrap_or("/")
                    .to_string();
                h["clientConfig"] = serde_json::json!({
                    "url": format!("https://127.0.0.1:{port}{p}"),
                    "caBundle": ca_b64,
                });
                if let Some(ns) = scope {
                    h["namespaceSelector"] = serde_json::json!({
                        "matchLabels": {"kubernetes.io/metadata.name": ns}});
                }
            }
        }
        let ar = ApiResource {
            group: "admissionregistration.k8s.io".into(),
            version: "v1".into(),
            api_version: "admissionregistration.k8s.io/v1".into(),
            kind: kind.clone(),
            plural: format!("{}s", kind.to_lowercase()),
        };
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
        api.patch(
            &name,
            &PatchParams::apply("capi-testbed").force(),
            &Patch::Apply(&doc),
        )
        .await?;
        written.push((ar, name));
    }
    Ok(written)
}
