//! SIMULATED Kamaji: TenantControlPlanes become Ready with an endpoint, and Kamaji's secrets
//! appear, with the admin kubeconfig pointing at the sandbox's own API server (so a tenant
//! "cluster" is the sandbox itself, and `kubeconfig get`, `token join` and the CAPI workload
//! cluster connection all talk to a real server).

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use base64::Engine;
use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::json;

use super::{SimOptions, ar, name, namespace, now};

/// What the simulator needs to know about the sandbox.
#[derive(Clone, Debug)]
pub struct Sandbox {
    /// `host:port` of the sandbox API server, published as every tenant's endpoint.
    pub endpoint: String,
    /// The admin kubeconfig of the sandbox (becomes each tenant's `admin.conf`).
    pub admin_kubeconfig: String,
    /// PEM of the serving CA and its key (each tenant's CA secret).
    pub ca_crt: String,
    pub ca_key: String,
    /// PEM of the sandbox API server's serving certificate (the tenant "API server" certificate).
    pub apiserver_crt: String,
}

impl Sandbox {
    /// Reads the sandbox facts from a testbed directory.
    pub fn from_dir(dir: &std::path::Path, server: &str) -> std::io::Result<Sandbox> {
        Ok(Sandbox {
            endpoint: server.trim_start_matches("https://").to_string(),
            admin_kubeconfig: std::fs::read_to_string(dir.join("kubeconfig"))?,
            ca_crt: std::fs::read_to_string(dir.join("pki/serving-ca.crt"))?,
            ca_key: std::fs::read_to_string(dir.join("pki/serving-ca.key"))?,
            apiserver_crt: std::fs::read_to_string(dir.join("pki/apiserver.crt"))?,
        })
    }
}

#[derive(Default)]
struct Progress {
    /// The spec we are converging to, and since when.
    target: Option<(String, i64, Instant)>,
}

/// Runs until the future is dropped.
pub async fn run(client: Client, sandbox: Sandbox, opts: SimOptions) {
    let tcps: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ar(
            "kamaji.clastix.io",
            "v1alpha1",
            "TenantControlPlane",
            "tenantcontrolplanes",
        ),
    );
    let mut progress: HashMap<String, Progress> = HashMap::new();
    let sleeping = supports_sleeping(&client).await;
    tracing::info!(
        "simulated Kamaji: watching TenantControlPlanes (0 replicas report {})",
        if sleeping {
            "Sleeping"
        } else {
            "Ready, as Kamaji v1.0.0 has no Sleeping state"
        }
    );
    loop {
        match tcps.list(&ListParams::default()).await {
            Ok(list) => {
                for tcp in list.items {
                    if let Err(e) = step(
                        &client,
                        &tcps,
                        &sandbox,
                        &opts,
                        sleeping,
                        &mut progress,
                        &tcp,
                    )
                    .await
                    {
                        tracing::warn!("simulated Kamaji: {}/{}: {e}", namespace(&tcp), name(&tcp));
                    }
                }
            }
            Err(e) => tracing::warn!("simulated Kamaji: listing TenantControlPlanes: {e}"),
        }
        tokio::time::sleep(opts.tick).await;
    }
}

async fn step(
    client: &Client,
    tcps: &Api<DynamicObject>,
    sandbox: &Sandbox,
    opts: &SimOptions,
    sleeping: bool,
    progress: &mut HashMap<String, Progress>,
    tcp: &DynamicObject,
) -> Result<(), kube::Error> {
    if tcp.metadata.deletion_timestamp.is_some() {
        return Ok(());
    }
    let (ns, tcp_name) = (namespace(tcp), name(tcp));
    let uid = tcp.metadata.uid.clone().unwrap_or_default();
    let spec = &tcp.data["spec"];
    let mut version = spec["kubernetes"]["version"]
        .as_str()
        .unwrap_or("")
        .to_string();
    if !version.is_empty() && !version.starts_with('v') {
        version = format!("v{version}");
    }
    let replicas = spec["controlPlane"]["deployment"]["replicas"]
        .as_i64()
        .unwrap_or(2);
    let status = &tcp.data["status"];
    let cur_version = status["kubernetesResources"]["version"]["version"]
        .as_str()
        .unwrap_or("");
    let cur_status = status["kubernetesResources"]["version"]["status"]
        .as_str()
        .unwrap_or("");
    let cur_replicas = status["kubernetesResources"]["deployment"]["replicas"].as_i64();
    let want_status = if replicas == 0 && sleeping {
        "Sleeping"
    } else {
        "Ready"
    };
    if cur_version == version && cur_status == want_status && cur_replicas == Some(replicas) {
        progress.remove(&uid);
        return Ok(());
    }
    let p = progress.entry(uid.clone()).or_default();
    let target = (version.clone(), replicas);
    let since = match &p.target {
        Some((v, r, since)) if (v.as_str(), *r) == (target.0.as_str(), target.1) => *since,
        _ => {
            let now = Instant::now();
            p.target = Some((target.0.clone(), target.1, now));
            let phase = if cur_version.is_empty() {
                "Provisioning"
            } else {
                "Upgrading"
            };
            tracing::info!(
                "simulated Kamaji: {ns}/{tcp_name}: {phase} {version} ({replicas} replicas)"
            );
            let shown = if cur_version.is_empty() {
                version.as_str()
            } else {
                cur_version
            };
            write_status(
                tcps,
                tcp,
                sandbox,
                shown,
                phase,
                cur_replicas.unwrap_or(0),
                false,
            )
            .await?;
            now
        }
    };
    if since.elapsed() < opts.delay {
        return Ok(());
    }
    ensure_secrets(client, tcp, sandbox).await?;
    ensure_pods(client, tcp, &version, replicas).await?;
    write_status(tcps, tcp, sandbox, &version, want_status, replicas, true).await?;
    tracing::info!("simulated Kamaji: {ns}/{tcp_name}: {want_status} at {version}");
    progress.remove(&uid);
    Ok(())
}

/// Whether the installed TenantControlPlane CRD knows the `Sleeping` version status (newer
/// Kamaji releases put 0-replica control planes to sleep; v1.0.0 does not).
async fn supports_sleeping(client: &Client) -> bool {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let Ok(crd) = crds.get("tenantcontrolplanes.kamaji.clastix.io").await else {
        return false;
    };
    serde_json::to_string(&crd.spec).is_ok_and(|s| s.contains("\"Sleeping\""))
}

async fn write_status(
    tcps: &Api<DynamicObject>,
    tcp: &DynamicObject,
    sandbox: &Sandbox,
    version: &str,
    phase: &str,
    replicas: i64,
    done: bool,
) -> Result<(), kube::Error> {
    let (ns, n) = (namespace(tcp), name(tcp));
    let ts = now();
    let ready = if done { replicas } else { 0 };
    let datastore = tcp.data["spec"]["dataStore"].as_str().unwrap_or("default");
    let mut status = json!({
        "kubernetesResources": {
            "version": {"version": version, "status": phase},
            "deployment": {
                "name": n, "namespace": ns,
                "selector": format!("kamaji.clastix.io/name={n}"),
                "replicas": replicas, "readyReplicas": ready, "availableReplicas": ready,
                "updatedReplicas": ready, "lastUpdate": ts,
            },
            "service": {"name": n, "namespace": ns, "port": 6443},
        },
        "storage": {"driver": "etcd", "dataStoreName": datastore,
                    "setup": {"schema": format!("{ns}_{n}"), "user": format!("{ns}_{n}")}},
    });
    if done {
        status["controlPlaneEndpoint"] = sandbox.endpoint.clone().into();
        status["kubeconfig"] = json!({
            "admin": {"secretName": format!("{n}-admin-kubeconfig"), "lastUpdate": ts},
            "controllerManager": {"secretName": format!("{n}-controller-manager-kubeconfig")},
            "scheduler": {"secretName": format!("{n}-scheduler-kubeconfig")},
        });
        status["certificates"] = json!({
            "ca": {"secretName": format!("{n}-ca"), "lastUpdate": ts},
            "apiServer": {"secretName": format!("{n}-api-server-certificate"), "lastUpdate": ts},
        });
        status["kubeadmPhase"] =
            json!({"bootstrapToken": {"checksum": "simulated", "lastUpdate": ts}});
    }
    let api: Api<DynamicObject> = Api::namespaced_with(
        tcps.clone().into_client(),
        &ns,
        &ar(
            "kamaji.clastix.io",
            "v1alpha1",
            "TenantControlPlane",
            "tenantcontrolplanes",
        ),
    );
    api.patch_status(
        &n,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": status})),
    )
    .await?;
    Ok(())
}

/// The control-plane pods Kamaji's Deployment would run, with the status a kubelet would
/// report: one pod per replica at the current version, replaced on upgrade (blue/green).
async fn ensure_pods(
    client: &Client,
    tcp: &DynamicObject,
    version: &str,
    replicas: i64,
) -> Result<(), kube::Error> {
    use k8s_openapi::api::core::v1::Pod;
    let (ns, n) = (namespace(tcp), name(tcp));
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let selector = format!("kamaji.clastix.io/name={n}");
    let existing = pods
        .list(&ListParams::default().labels(&selector))
        .await?
        .items;
    let tag = version.replace(['.', '+'], "-");
    let wanted: Vec<String> = (0..replicas.max(0))
        .map(|i| format!("{n}-{tag}-{i}"))
        .collect();
    for p in &existing {
        let pname = p.metadata.name.clone().unwrap_or_default();
        if !wanted.contains(&pname) {
            pods.delete(&pname, &Default::default()).await?;
        }
    }
    let owner = json!([{
        "apiVersion": "kamaji.clastix.io/v1alpha1", "kind": "TenantControlPlane",
        "name": n, "uid": tcp.metadata.uid, "controller": false, "blockOwnerDeletion": true,
    }]);
    for pname in wanted {
        if existing
            .iter()
            .any(|p| p.metadata.name.as_deref() == Some(pname.as_str()))
        {
            continue;
        }
        let containers: Vec<serde_json::Value> = [
            "kube-apiserver",
            "kube-controller-manager",
            "kube-scheduler",
        ]
        .iter()
        .map(|c| json!({"name": c, "image": format!("registry.k8s.io/{c}:{version}")}))
        .collect();
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": pname, "labels": {"kamaji.clastix.io/name": n, "kamaji.clastix.io/simulated": "true"},
                         "ownerReferences": owner},
            "spec": {"containers": containers},
        }))
        .map_err(kube::Error::SerdeError)?;
        pods.create(&Default::default(), &pod).await?;
        let ts = now();
        let statuses: Vec<serde_json::Value> = [
            "kube-apiserver",
            "kube-controller-manager",
            "kube-scheduler",
        ]
        .iter()
        .map(|c| {
            json!({"name": c, "ready": true, "restartCount": 0, "started": true,
                            "image": format!("registry.k8s.io/{c}:{version}"), "imageID": "",
                            "state": {"running": {"startedAt": ts}}})
        })
        .collect();
        pods.patch_status(&pname, &PatchParams::default(), &Patch::Merge(json!({"status": {
            "phase": "Running", "podIP": "10.244.0.10", "startTime": ts,
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": ts},
                           {"type": "ContainersReady", "status": "True", "lastTransitionTime": ts}],
            "containerStatuses": statuses,
        }})))
        .await?;
    }
    Ok(())
}

async fn ensure_secrets(
    client: &Client,
    tcp: &DynamicObject,
    sandbox: &Sandbox,
) -> Result<(), kube::Error> {
    let (ns, n) = (namespace(tcp), name(tcp));
    let owner = json!([{
        "apiVersion": "kamaji.clastix.io/v1alpha1", "kind": "TenantControlPlane",
        "name": n, "uid": tcp.metadata.uid, "controller": true, "blockOwnerDeletion": true,
    }]);
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s.as_bytes());
    let svc_kubeconfig = sandbox.admin_kubeconfig.clone();
    let mut secrets: Vec<(String, BTreeMap<&str, String>)> = vec![
        (
            format!("{n}-admin-kubeconfig"),
            BTreeMap::from([
                ("admin.conf", b64(&sandbox.admin_kubeconfig)),
                ("admin.svc", b64(&svc_kubeconfig)),
                ("super-admin.conf", b64(&sandbox.admin_kubeconfig)),
                ("super-admin.svc", b64(&svc_kubeconfig)),
            ]),
        ),
        (
            format!("{n}-ca"),
            BTreeMap::from([
                ("ca.crt", b64(&sandbox.ca_crt)),
                ("ca.key", b64(&sandbox.ca_key)),
                ("tls.crt", b64(&sandbox.ca_crt)),
                ("tls.key", b64(&sandbox.ca_key)),
            ]),
        ),
    ];
    for component in ["controller-manager", "scheduler"] {
        secrets.push((
            format!("{n}-{component}-kubeconfig"),
            BTreeMap::from([(
                if component == "scheduler" {
                    "scheduler.conf"
                } else {
                    "controller-manager.conf"
                },
                b64(&sandbox.admin_kubeconfig),
            )]),
        ));
    }
    secrets.push((
        format!("{n}-api-server-certificate"),
        BTreeMap::from([("apiserver.crt", b64(&sandbox.apiserver_crt))]),
    ));
    let api: Api<Secret> = Api::namespaced(client.clone(), &ns);
    for (secret_name, data) in secrets {
        let body = json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": secret_name, "namespace": ns, "ownerReferences": owner,
                         "labels": {"kamaji.clastix.io/name": n, "kamaji.clastix.io/simulated": "true"}},
            "type": "Opaque",
            "data": data,
        });
        api.patch(
            &secret_name,
            &PatchParams::apply("simulated-kamaji").force(),
            &Patch::Apply(&body),
        )
        .await?;
    }
    Ok(())
}
