//! The real Kamaji operator (github.com/clastix/kamaji, the version in `versions.env`), run out
//! of cluster against the testbed, with a `default` DataStore on an etcd of the testbed's own.
//!
//! Kamaji runs in a network and mount namespace of its own ([`crate::netns`]); see there why.
//! Its mutating webhooks are registered (reached through a port exposed from that namespace):
//! the defaulting one fills in `spec.dataStore`, which Kamaji's reconciler needs. Its validating
//! TenantControlPlane webhook is registered only for namespaces labelled
//! [`KAMAJI_VALIDATION_LABEL`]: Kamaji v1.0.0's version check refuses any Kubernetes newer than
//! v1.30.2, while the testbed runs tenants on the releases it builds (see [`crate::pods`]), so
//! tenant versions are what those binaries really are, above what Kamaji v1.0.0 validates. A
//! test that wants Kamaji's real refusal labels its namespace.
//!
//! Tenant control planes really run: the SIMULATED kubelet in [`crate::pods`] runs their pods,
//! and every tenant's port and `<name>.<namespace>.svc` name are made reachable inside Kamaji's
//! namespace as soon as a TenantControlPlane names them.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use kube::discovery::ApiResource;
use serde_json::json;

use crate::netns::NetSandbox;
use crate::{Error, Proc, Testbed, certs, datastore, free_port};

/// The namespace Kamaji's own objects live in (as the upstream Helm chart installs it).
pub const NAMESPACE: &str = "kamaji-system";
const MANAGER: &str = "capi-testbed";

fn tcp_resource() -> ApiResource {
    crate::meta::ar(
        "kamaji.clastix.io",
        "v1alpha1",
        "TenantControlPlane",
        "tenantcontrolplanes",
    )
}

async fn apply(
    client: &Client,
    ar: &ApiResource,
    ns: Option<&str>,
    obj: serde_json::Value,
) -> Result<(), Error> {
    let name = obj["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let api: Api<DynamicObject> = match ns {
        Some(ns) => Api::namespaced_with(client.clone(), ns, ar),
        None => Api::all_with(client.clone(), ar),
    };
    api.patch(
        &name,
        &PatchParams::apply(MANAGER).force(),
        &Patch::Apply(&obj),
    )
    .await?;
    Ok(())
}

/// Starts the datastore etcd, Kamaji, the tenant pod runner and the tenant name/port plumbing;
/// the testbed keeps (and stops) all of them.
pub async fn start(tb: &Testbed, client: &Client) -> Result<(), Error> {
    let bin = crate::assets::built(&tb.assets.kamaji, "the Kamaji operator was not built")?
        .join("kamaji");
    let stores = start_datastores(tb)?;
    apply_datastores(client, &stores).await?;
    let ds_ports: Vec<(&str, u16)> = stores.ports.clone();

    // controller-runtime reads its webhook serving certificate from $TMPDIR.
    let tmp = tb.dir.join("kamaji-tmp");
    let certs_dir = tmp.join("k8s-webhook-server/serving-certs");
    std::fs::create_dir_all(&certs_dir).map_err(|e| Error::io(&certs_dir, e))?;
    let webhook_ca = certs::webhook_serving(&certs_dir)?;
    let work = tb.dir.join("kamaji-work");
    std::fs::create_dir_all(&work).map_err(|e| Error::io(&work, e))?;

    let sandbox = Arc::new(NetSandbox::for_controller(tb, "kamaji")?);
    if let Ok(mut v) = tb.sandboxes.lock() {
        v.push(sandbox.clone());
    }
    for (_, port) in &ds_ports {
        sandbox.forward(*port)?;
    }
    let webhook = sandbox.expose(9443)?;
    register_webhooks(tb, client, webhook, &webhook_ca).await?;

    let log = spawn_manager(tb, &bin, &sandbox, &tmp, &certs_dir, &work)?;
    // Ready when its log says its controllers started; reported with its own last error line
    // if it exits first.
    let ready =
        || async { std::fs::read_to_string(&log).is_ok_and(|t| t.contains("Starting workers")) };
    tb.wait_until("kamaji", &log, Duration::from_secs(60), ready)
        .await?;
    start_tenant_runner(tb, Some(&bin))?;
    tracing::info!(
        "Kamaji running (namespace-isolated, version webhook only where a namespace asks for it); tenants run Kubernetes {}",
        tb.assets.tenant_versions().join(", ")
    );
    Ok(())
}

/// The datastore etcds of a testbed, running, with what a DataStore needs to reach them.
#[derive(Clone, Debug)]
pub struct DataStores {
    /// Client ports on the host's loopback, by DataStore name (`default`, then
    /// [`datastore::SECOND`]).
    pub ports: Vec<(&'static str, u16)>,
    ca: (String, String),
    client: (String, String),
}

/// Starts the datastore etcds; the testbed keeps (and stops) them.
pub(crate) fn start_datastores(tb: &Testbed) -> Result<DataStores, Error> {
    let datastore::DataStore {
        etcds,
        ca_crt,
        ca_key,
        client_crt,
        client_key,
    } = datastore::start(&tb.dir, &tb.assets.etcd())?;
    let mut ports = Vec::new();
    for (name, proc, port) in etcds {
        tb.push(proc);
        ports.push((name, port));
    }
    Ok(DataStores {
        ports,
        ca: (ca_crt, ca_key),
        client: (client_crt, client_key),
    })
}

impl DataStores {
    /// Kamaji's namespace and the Secrets of the datastores' CA and client certificate, as
    /// Kamaji's Helm chart and kamaji-etcd install them.
    pub fn secrets(&self) -> Vec<serde_json::Value> {
        let b64 = |s: &str| {
            use base64::Engine;
            base64::engine::general_purpose::STANDARD.encode(s.as_bytes())
        };
        let mut out =
            vec![json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})];
        for (name, data) in [
            (
                "kamaji-datastore-ca",
                json!({"ca.crt": b64(&self.ca.0), "ca.key": b64(&self.ca.1)}),
            ),
            (
                "kamaji-datastore-client",
                json!({"tls.crt": b64(&self.client.0), "tls.key": b64(&self.client.1)}),
            ),
        ] {
            out.push(json!({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": name, "namespace": NAMESPACE}, "data": data}));
        }
        out
    }

    /// One etcd DataStore per etcd, named `rename(name)` (a site names its own).
    pub fn datastores(&self, rename: impl Fn(&str) -> String) -> Vec<serde_json::Value> {
        let sref = |name: &str, key: &str| json!({"secretReference": {"name": name, "namespace": NAMESPACE, "keyPath": key}});
        self.ports.iter().map(|(name, port)| json!({
            "apiVersion": "kamaji.clastix.io/v1alpha1", "kind": "DataStore",
            "metadata": {"name": rename(name)},
            "spec": {"driver": "etcd", "endpoints": [format!("127.0.0.1:{port}")],
                     "tlsConfig": {
                        "certificateAuthority": {"certificate": sref("kamaji-datastore-ca", "ca.crt"),
                                                 "privateKey": sref("kamaji-datastore-ca", "ca.key")},
                        "clientCertificate": {"certificate": sref("kamaji-datastore-client", "tls.crt"),
                                              "privateKey": sref("kamaji-datastore-client", "tls.key")}}}})).collect()
    }
}

impl DataStores {
    /// Applies [`DataStores::secrets`]: what a site holds before it installs Kamaji (its
    /// datastore's namespace and certificates), for a day-0 testbed.
    pub async fn apply_secrets(&self, client: &Client) -> Result<(), Error> {
        for obj in self.secrets() {
            let (kind, plural) = if obj["kind"] == "Namespace" {
                ("Namespace", "namespaces")
            } else {
                ("Secret", "secrets")
            };
            let ns = (kind == "Secret").then_some(NAMESPACE);
            apply(client, &crate::meta::ar("", "v1", kind, plural), ns, obj).await?;
        }
        Ok(())
    }

    /// [`DataStores::datastores`] as one YAML stream (JSON documents), a `--datastore` file.
    pub fn datastores_file(&self, rename: impl Fn(&str) -> String) -> String {
        self.datastores(rename)
            .iter()
            .map(|d| d.to_string())
            .collect::<Vec<_>>()
            .join("\n---\n")
    }
}

/// Applies [`DataStores::secrets`] and one DataStore per etcd: `default` (the one `kamaji
/// manager --datastore=default` uses) and [`datastore::SECOND`].
async fn apply_datastores(client: &Client, stores: &DataStores) -> Result<(), Error> {
    stores.apply_secrets(client).await?;
    let ar = crate::meta::ar("kamaji.clastix.io", "v1alpha1", "DataStore", "datastores");
    for obj in stores.datastores(str::to_string) {
        apply(client, &ar, None, obj).await?;
    }
    Ok(())
}

/// Spawns `kamaji manager` inside its network namespace (`tmp` is its `$TMPDIR`, `work` its
/// `--tmp-directory`); returns its log's path.
fn spawn_manager(
    tb: &Testbed,
    bin: &Path,
    sandbox: &NetSandbox,
    tmp: &Path,
    certs_dir: &Path,
    work: &Path,
) -> Result<PathBuf, Error> {
    let health = free_port()?;
    let mut args = sandbox.enter_args();
    args.push(bin.display().to_string());
    args.extend([
        "manager".to_string(),
        "--datastore=default".into(),
        "--disable-telemetry".into(),
        "--leader-elect=false".into(),
        format!("--pod-namespace={NAMESPACE}"),
        "--serviceaccount-name=kamaji".into(),
        format!("--webhook-ca-path={}", certs_dir.join("ca.crt").display()),
        format!("--tmp-directory={}", work.display()),
        "--metrics-bind-address=0".into(),
        format!("--health-probe-bind-address=127.0.0.1:{health}"),
        "--zap-log-level=info".into(),
        "--zap-devel=false".into(),
        "--max-concurrent-tcp-reconciles=4".into(),
    ]);
    let log = tb.dir.join("kamaji.log");
    let proc = Proc::spawn_with_env(
        "kamaji",
        Path::new("nsenter"),
        &args,
        &log,
        &[
            ("TMPDIR", tmp.display().to_string()),
            ("KUBECONFIG", tb.kubeconfig.display().to_string()),
        ],
    )?;
    tb.push(proc);
    Ok(log)
}

/// Runs the SIMULATED kubelet of tenant pods ([`crate::pods`]) and [`plumb_tenants`] in the
/// background, as one task the testbed aborts when it stops.
/// Without `bin`, Kamaji's migration Jobs are not run (Kamaji runs from its image, and so would
/// its Jobs, whose image the registry does not hold).
pub(crate) fn start_tenant_runner(tb: &Testbed, bin: Option<&Path>) -> Result<(), Error> {
    let kubeconfig = tb.kubeconfig.clone();
    let pod_cfg = crate::pods::Config {
        dir: tb.dir.join("tenant-pods"),
        releases: tb.assets.tenant_releases.clone(),
        kamaji: bin.map(|bin| crate::pods::KamajiJobs {
            binary: bin.to_path_buf(),
            namespace: NAMESPACE.into(),
            kubeconfig: tb.kubeconfig.clone(),
        }),
        node_name: "testbed-tenant-node".into(),
        tick: Duration::from_millis(500),
        hosts: tb.cluster_hosts.clone(),
    };
    let sb = tb.sandboxes.clone();
    let task = crate::background()?.spawn(async move {
        let Ok(client) = crate::client_for(&kubeconfig).await else {
            tracing::warn!("tenant plumbing: no client");
            return;
        };
        // One task: aborting it stops the pod runner too, which kills the tenant processes.
        tokio::join!(
            crate::pods::run(client.clone(), pod_cfg),
            plumb_tenants(client, sb)
        );
    });
    tb.push_task(task.abort_handle());
    Ok(())
}

/// Makes each TenantControlPlane's port and service names reachable inside the namespaces of
/// the controllers that talk to tenants (Kamaji, BYOH).
async fn plumb_tenants(client: Client, sandboxes: Arc<std::sync::Mutex<Vec<Arc<NetSandbox>>>>) {
    let api: Api<DynamicObject> = Api::all_with(client, &tcp_resource());
    loop {
        if let Ok(list) = api.list(&ListParams::default()).await {
            let all: Vec<Arc<NetSandbox>> = sandboxes.lock().map(|v| v.clone()).unwrap_or_default();
            for tcp in list.items {
                let (Some(name), Some(ns)) = (
                    tcp.metadata.name.as_deref(),
                    tcp.metadata.namespace.as_deref(),
                ) else {
                    continue;
                };
                let port = tcp.data["spec"]["networkProfile"]["port"]
                    .as_u64()
                    .unwrap_or(6443);
                let Ok(port) = u16::try_from(port) else {
                    continue;
                };
                for sandbox in &all {
                    for host in [
                        format!("{name}.{ns}.svc"),
                        format!("{name}.{ns}.svc.cluster.local"),
                    ] {
                        if let Err(e) = sandbox.add_host(&host) {
                            tracing::warn!("tenant plumbing: {e}");
                        }
                    }
                    if let Err(e) = sandbox.forward(port) {
                        tracing::warn!("tenant plumbing: {e}");
                    }
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// The namespace label (value `enforced`) under which Kamaji's validating TenantControlPlane
/// webhook judges TenantControlPlanes (see the module documentation).
pub const KAMAJI_VALIDATION_LABEL: &str = "capi-testbed.io/kamaji-validation";

/// Registers Kamaji's MutatingWebhookConfiguration (upstream `config/webhook/manifests.yaml`)
/// by URL, and its TenantControlPlane validating webhook for the namespaces labelled
/// [`KAMAJI_VALIDATION_LABEL`] only (see the module documentation).
async fn register_webhooks(
    tb: &Testbed,
    client: &Client,
    port: u16,
    ca: &str,
) -> Result<(), Error> {
    let src = tb.assets.crds.join("kamaji-webhooks.yaml");
    let text = std::fs::read_to_string(&src).map_err(|e| Error::io(&src, e))?;
    let docs: Vec<serde_json::Value> =
        serde_saphyr::from_multiple(&text).map_err(|e| Error::Crd {
            file: src.display().to_string(),
            msg: e.to_string(),
        })?;
    let mut mutating: Vec<serde_json::Value> = Vec::new();
    for mut d in docs {
        if d["kind"] == "MutatingWebhookConfiguration" {
            mutating.push(d);
        } else if d["kind"] == "ValidatingWebhookConfiguration"
            && let Some(hooks) = d["webhooks"].as_array_mut()
        {
            hooks.retain(|h| h["name"] == "vtenantcontrolplane.kb.io");
            for h in hooks.iter_mut() {
                h["namespaceSelector"] =
                    serde_json::json!({"matchLabels": {KAMAJI_VALIDATION_LABEL: "enforced"}});
            }
            if !hooks.is_empty() {
                mutating.push(d);
            }
        }
    }
    let dir = tb.dir.join("kamaji-tmp");
    let file = dir.join("kamaji-webhooks-registered.yaml");
    let mut out = String::new();
    for d in &mutating {
        out.push_str("---\n");
        out.push_str(&serde_json::to_string(d).unwrap_or_default());
        out.push('\n');
    }
    std::fs::write(&file, out).map_err(|e| Error::io(&file, e))?;
    crate::capi::register_webhooks_from(client, "kamaji", &file, port, ca).await
}
