//! The KamajiControlPlane controller: watch-driven (no resync, no polling while it waits).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::core::PartialObjectMeta;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};
use serde_json::{Value, json};

use crate::Error;
use crate::api::v1alpha2::KamajiControlPlane;
use crate::endpoint::{self, Endpoint};
use crate::infra::{self, Plan};
use crate::metrics::Metrics;
use crate::tcp::{self, ClusterNetwork, Fit, KUBECONFIG_KEY_ANNOTATION};
use crate::version::{self, Step};

/// Field manager of everything this controller writes.
pub const MANAGER: &str = "kamaji-reconciler";
/// Finalizer used with an external cluster reference.
pub const ECR_FINALIZER: &str = "ecr.kamaji.clastix.io/finalizer";
const PAUSED: &str = "cluster.x-k8s.io/paused";
const CLUSTER_NAME_LABEL: &str = "cluster.x-k8s.io/cluster-name";

/// Settings of the controller.
#[derive(Clone, Debug, Default)]
pub struct Config {
    /// Watch one namespace only (all when `None`).
    pub namespace: Option<String>,
    /// More infrastructure-cluster kinds to patch generically (`spec.controlPlaneEndpoint`).
    pub extra_infra_kinds: Vec<String>,
    /// Do not touch infrastructure clusters at all.
    pub skip_infra_patch: bool,
    /// Allow `deployment.externalClusterReference` (TCP hosted in another cluster).
    pub external_cluster_reference: bool,
    /// Allow the external kubeconfig Secret in another namespace.
    pub external_cluster_reference_cross_namespace: bool,
    /// Concurrent reconciles.
    pub concurrency: u16,
}

/// Which CAPI contract the management cluster serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Contract {
    /// CAPI v1beta2 (1.11 and later): v1alpha2 status shape.
    V1Beta2,
    /// CAPI v1beta1 only (1.10 and earlier): v1alpha1 status shape.
    V1Beta1,
}

/// What was discovered from the API server at start-up.
#[derive(Clone, Debug)]
pub struct Discovered {
    pub contract: Contract,
    pub cluster: ApiResource,
    pub tcp: ApiResource,
    pub tcp_spec_schema: Value,
    pub infra: HashMap<String, ApiResource>,
}

fn ar(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

/// Discovers the CAPI contract, the TenantControlPlane schema and the served infrastructure kinds.
pub async fn discover(client: &Client, cfg: &Config) -> Result<Discovered, Error> {
    let capi = kube::discovery::group(client, "cluster.x-k8s.io")
        .await
        .map_err(|e| {
            Error::Other(format!(
                "Cluster API is not installed (API group cluster.x-k8s.io not served: {e}); install it with clusterctl init"
            ))
        })?;
    let versions: Vec<&str> = capi.versions().collect();
    let contract = if versions.contains(&"v1beta2") {
        Contract::V1Beta2
    } else if versions.contains(&"v1beta1") {
        Contract::V1Beta1
    } else {
        return Err(Error::Other(format!(
            "cluster.x-k8s.io serves {versions:?}; this provider needs v1beta2 or v1beta1"
        )));
    };
    let cluster = match contract {
        Contract::V1Beta2 => ar("cluster.x-k8s.io", "v1beta2", "Cluster", "clusters"),
        Contract::V1Beta1 => ar("cluster.x-k8s.io", "v1beta1", "Cluster", "clusters"),
    };
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let tcp_crd = crds
        .get_opt("tenantcontrolplanes.kamaji.clastix.io")
        .await?
        .ok_or_else(|| {
            Error::Other(
                "Kamaji is not installed: CRD tenantcontrolplanes.kamaji.clastix.io not found; install Kamaji first".into(),
            )
        })?;
    let ver = tcp_crd
        .spec
        .versions
        .iter()
        .find(|v| v.storage)
        .or_else(|| tcp_crd.spec.versions.first())
        .ok_or_else(|| Error::Other("the TenantControlPlane CRD has no versions".into()))?;
    let schema = ver
        .schema
        .as_ref()
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .map(|s| serde_json::to_value(s).unwrap_or(Value::Null))
        .unwrap_or(Value::Null);
    let tcp_spec_schema = schema["properties"]["spec"].clone();
    let tcp = ar(
        "kamaji.clastix.io",
        &ver.name,
        "TenantControlPlane",
        "tenantcontrolplanes",
    );
    let infra = discover_infra(client, cfg).await;
    Ok(Discovered {
        contract,
        cluster,
        tcp,
        tcp_spec_schema,
        infra,
    })
}

async fn discover_infra(client: &Client, cfg: &Config) -> HashMap<String, ApiResource> {
    let mut out = HashMap::new();
    let Ok(g) = kube::discovery::group(client, "infrastructure.cluster.x-k8s.io").await else {
        return out;
    };
    // Kinds of this group come in different versions: each at its most stable served one.
    for (res, _caps) in g.resources_by_stability() {
        if infra::action_for(&res.kind, &cfg.extra_infra_kinds).is_some() {
            out.insert(res.kind.clone(), res);
        }
    }
    out
}

struct Ctx {
    client: Client,
    cfg: Config,
    disc: Discovered,
    recorder: Recorder,
    metrics: Arc<Metrics>,
    /// (namespace, cluster name) → KamajiControlPlane name, learnt from Cluster events.
    clusters: Mutex<HashMap<(String, String), String>>,
    /// Consecutive failures per object, for a bounded exponential backoff.
    failures: Mutex<HashMap<ObjectRef<KamajiControlPlane>, u32>>,
}

/// A condition as computed by one reconcile.
#[derive(Clone, Debug, PartialEq)]
struct Cond {
    type_: &'static str,
    ok: bool,
    reason: String,
    message: String,
}

fn yes(type_: &'static str, reason: &str) -> Cond {
    Cond {
        type_,
        ok: true,
        reason: reason.into(),
        message: String::new(),
    }
}
fn no(type_: &'static str, reason: &str, message: impl Into<String>) -> Cond {
    Cond {
        type_,
        ok: false,
        reason: reason.into(),
        message: message.into(),
    }
}

/// Observed TCP state copied into the KCP status.
#[derive(Clone, Debug, Default)]
struct Observed {
    initialized: bool,
    ready: bool,
    version: String,
    replicas: Option<i64>,
    ready_replicas: Option<i64>,
    available_replicas: Option<i64>,
    updated_replicas: Option<i64>,
    unavailable_replicas: Option<i64>,
    selector: Option<String>,
}

/// Runs the controller until a shutdown signal. `ready` is set once the watches are running.
pub async fn run(
    client: Client,
    cfg: Config,
    metrics: Arc<Metrics>,
    ready: Arc<std::sync::atomic::AtomicBool>,
) -> Result<(), Error> {
    let disc = discover(&client, &cfg).await?;
    tracing::info!(
        contract = ?disc.contract,
        tcp_version = %disc.tcp.version,
        infra_kinds = ?disc.infra.keys().collect::<Vec<_>>(),
        "discovered"
    );
    let ns = cfg.namespace.clone();
    let kcps: Api<KamajiControlPlane> = match &ns {
        Some(n) => Api::namespaced(client.clone(), n),
        None => Api::all(client.clone()),
    };
    let dyn_api = |r: &ApiResource| -> Api<DynamicObject> {
        match &ns {
            Some(n) => Api::namespaced_with(client.clone(), n, r),
            None => Api::all_with(client.clone(), r),
        }
    };
    let meta_api = |r: &ApiResource| -> Api<PartialObjectMeta<DynamicObject>> {
        match &ns {
            Some(n) => Api::namespaced_with(client.clone(), n, r),
            None => Api::all_with(client.clone(), r),
        }
    };
    let secrets: Api<PartialObjectMeta<Secret>> = match &ns {
        Some(n) => Api::namespaced(client.clone(), n),
        None => Api::all(client.clone()),
    };
    let ctx = Arc::new(Ctx {
        recorder: Recorder::new(client.clone(), Reporter::from(MANAGER)),
        client: client.clone(),
        cfg: cfg.clone(),
        disc: disc.clone(),
        metrics: metrics.clone(),
        clusters: Mutex::new(HashMap::new()),
        failures: Mutex::new(HashMap::new()),
    });

    let wc = watcher::Config::default().any_semantic();
    let mut controller = Controller::new(kcps, wc.clone()).with_config(
        kube::runtime::controller::Config::default().concurrency(cfg.concurrency.max(1)),
    );

    // TenantControlPlanes (owned: controller ownerReference to the KCP).
    controller = controller.watches_with(meta_api(&disc.tcp), disc.tcp.clone(), wc.clone(), |o| {
        owner_kcp(o.meta()).into_iter()
    });

    // Secrets: our copies (owned by the KCP) and Kamaji's sources (owned by the TCP, whose name
    // is the KCP's).
    controller = controller.watches(secrets, wc.clone(), |s| {
        let m = s.meta();
        let ns = m.namespace.clone().unwrap_or_default();
        let mut out = owner_kcp(m);
        for o in m.owner_references.iter().flatten() {
            if o.kind == "TenantControlPlane" && o.api_version.starts_with("kamaji.clastix.io/") {
                out.push(ObjectRef::new(&o.name).within(&ns));
            }
        }
        out.into_iter()
    });

    // Clusters: map to the KCP named by spec.controlPlaneRef, remembering the pair.
    let ctx_c = ctx.clone();
    controller = controller.watches_with(
        dyn_api(&disc.cluster),
        disc.cluster.clone(),
        wc.clone(),
        move |c: DynamicObject| {
            let ns = c.namespace().unwrap_or_default();
            let r = &c.data["spec"]["controlPlaneRef"];
            let kind_ok = r["kind"] == "KamajiControlPlane";
            let name = r["name"].as_str().unwrap_or_default().to_string();
            if !kind_ok || name.is_empty() {
                return None.into_iter();
            }
            if let Ok(mut m) = ctx_c.clusters.lock() {
                m.insert((ns.clone(), c.name_any()), name.clone());
            }
            Some(ObjectRef::new(&name).within(&ns)).into_iter()
        },
    );

    // Infrastructure clusters: map through their Cluster (ownerReference or label).
    if !cfg.skip_infra_patch {
        for res in disc.infra.values() {
            let ctx_i = ctx.clone();
            controller = controller.watches_with(
                meta_api(res),
                res.clone(),
                wc.clone(),
                move |o: PartialObjectMeta<DynamicObject>| {
                    let m = o.meta();
                    let ns = m.namespace.clone().unwrap_or_default();
                    let cluster = m
                        .owner_references
                        .iter()
                        .flatten()
                        .find(|r| {
                            r.kind == "Cluster" && r.api_version.starts_with("cluster.x-k8s.io/")
                        })
                        .map(|r| r.name.clone())
                        .or_else(|| {
                            m.labels
                                .as_ref()
                                .and_then(|l| l.get(CLUSTER_NAME_LABEL).cloned())
                        });
                    let kcp = cluster.and_then(|c| {
                        ctx_i
                            .clusters
                            .lock()
                            .ok()
                            .and_then(|idx| idx.get(&(ns.clone(), c)).cloned())
                    });
                    kcp.map(|k: String| ObjectRef::new(&k).within(&ns))
                        .into_iter()
                },
            );
        }
    }

    ready.store(true, Ordering::SeqCst);
    controller
        .shutdown_on_signal()
        .run(reconcile, error_policy, ctx)
        .for_each(|r| async move {
            match r {
                Ok((o, _)) => tracing::debug!(kcp = %o, "reconciled"),
                Err(e) => tracing::debug!("reconcile: {e}"),
            }
        })
        .await;
    Ok(())
}

fn owner_kcp(m: &kube::core::ObjectMeta) -> Vec<ObjectRef<KamajiControlPlane>> {
    let ns = m.namespace.clone().unwrap_or_default();
    m.owner_references
        .iter()
        .flatten()
        .filter(|o| {
            o.kind == "KamajiControlPlane"
                && o.api_version.starts_with("controlplane.cluster.x-k8s.io/")
        })
        .map(|o| ObjectRef::new(&o.name).within(&ns))
        .collect()
}

fn error_policy(kcp: Arc<KamajiControlPlane>, err: &Error, ctx: Arc<Ctx>) -> Action {
    ctx.metrics.reconcile_errors.fetch_add(1, Ordering::Relaxed);
    let n = ctx
        .failures
        .lock()
        .map(|mut m| {
            let e = m.entry(ObjectRef::from(kcp.as_ref())).or_insert(0);
            *e = e.saturating_add(1);
            *e
        })
        .unwrap_or(1);
    let secs = (1u64 << n.min(8)).min(300);
    tracing::warn!(kcp = %kcp.name_any(), ns = ?kcp.namespace(), "reconcile failed (retry in {secs}s): {err}");
    Action::requeue(Duration::from_secs(secs))
}

async fn reconcile(kcp: Arc<KamajiControlPlane>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    ctx.metrics.reconciles.fetch_add(1, Ordering::Relaxed);
    let mut r = reconcile_inner(&kcp, &ctx).await;
    // A TenantControlPlane in another cluster is not watched: KamajiControlPlanes with an
    // external cluster reference are looked at again every 30 s (only those).
    let remote = ctx.cfg.external_cluster_reference
        && kcp.meta().deletion_timestamp.is_none()
        && kcp
            .spec
            .fields
            .deployment
            .as_ref()
            .is_some_and(|d| d.external_cluster_reference.is_some());
    if remote && r.is_ok() {
        r = Ok(Action::requeue(Duration::from_secs(30)));
    }
    if r.is_ok()
        && let Ok(mut m) = ctx.failures.lock()
    {
        m.remove(&ObjectRef::from(kcp.as_ref()));
    }
    r
}

fn kcp_ns(kcp: &KamajiControlPlane) -> String {
    kcp.namespace().unwrap_or_default()
}

async fn reconcile_inner(kcp: &KamajiControlPlane, ctx: &Ctx) -> Result<Action, Error> {
    let ns = kcp_ns(kcp);
    let name = kcp.name_any();
    if kcp.meta().deletion_timestamp.is_some() {
        return finalize(kcp, ctx).await;
    }

    // The owning Cluster (kind and group checked, not just the first ownerReference).
    let owner = kcp
        .owner_references()
        .iter()
        .find(|o| o.kind == "Cluster" && o.api_version.starts_with("cluster.x-k8s.io/"));
    let Some(owner) = owner else {
        let msg = "no ownerReference to a cluster.x-k8s.io Cluster; Cluster API adds it once a Cluster's spec.controlPlaneRef names this KamajiControlPlane, and nothing is created until then";
        let cond = no("TenantControlPlaneCreated", "WaitingForClusterOwner", msg);
        let already = has_condition(kcp, &cond);
        write_status(kcp, ctx, None, &[cond]).await?;
        if !already {
            event(ctx, kcp, EventType::Warning, "WaitingForClusterOwner", msg).await;
        }
        return Ok(Action::await_change());
    };
    let clusters: Api<DynamicObject> =
        Api::namespaced_with(ctx.client.clone(), &ns, &ctx.disc.cluster);
    let Some(cluster) = clusters.get_opt(&owner.name).await? else {
        let cond = no(
            "TenantControlPlaneCreated",
            "ClusterNotFound",
            format!("the owning Cluster {ns}/{} does not exist", owner.name),
        );
        write_status(kcp, ctx, None, &[cond]).await?;
        return Ok(Action::await_change());
    };
    if let Ok(mut m) = ctx.clusters.lock() {
        m.insert((ns.clone(), cluster.name_any()), name.clone());
    }
    let cluster_v = serde_json::to_value(&cluster).unwrap_or(Value::Null);

    // Pause.
    let paused = cluster_v["spec"]["paused"] == json!(true)
        || cluster.annotations().contains_key(PAUSED)
        || kcp.annotations().contains_key(PAUSED);
    if paused {
        let mut c = yes("Paused", "Paused");
        c.message = "reconciliation is paused (Cluster spec.paused or the cluster.x-k8s.io/paused annotation)".into();
        write_status(kcp, ctx, None, &[c]).await?;
        return Ok(Action::await_change());
    }
    let mut conds = vec![no("Paused", "NotPaused", "")];

    // External cluster reference.
    let ecr = kcp
        .spec
        .fields
        .deployment
        .as_ref()
        .and_then(|d| d.external_cluster_reference.clone());
    let (tcp_client, tcp_ns, tcp_name) = match &ecr {
        None => (ctx.client.clone(), ns.clone(), name.clone()),
        Some(r) => {
            if !ctx.cfg.external_cluster_reference {
                conds.push(no(
                    "FoundExternalReferenceClient",
                    "FeatureDisabled",
                    "deployment.externalClusterReference is set but the reconciler runs without --external-cluster-reference; restart it with that flag or remove the reference",
                ));
                write_status(kcp, ctx, None, &conds).await?;
                return Ok(Action::await_change());
            }
            match remote_client(kcp, r, ctx).await {
                Ok(c) => {
                    conds.push(yes("FoundExternalReferenceClient", "Succeeded"));
                    ensure_finalizer(kcp, ctx).await?;
                    (
                        c,
                        r.deployment_namespace.clone(),
                        format!("kcp-{}", kcp.uid().unwrap_or_default()),
                    )
                }
                Err(e) => {
                    conds.push(no("FoundExternalReferenceClient", "Failed", e.to_string()));
                    write_status(kcp, ctx, None, &conds).await?;
                    return Err(e);
                }
            }
        }
    };
    let remote = ecr.is_some();

    // Version: step one minor at a time.
    let tcps: Api<DynamicObject> = Api::namespaced_with(tcp_client.clone(), &tcp_ns, &ctx.disc.tcp);
    let existing = tcps.get_opt(&tcp_name).await?;
    let existing_v = existing
        .as_ref()
        .map(|t| serde_json::to_value(t).unwrap_or(Value::Null));
    let cur_version = existing_v.as_ref().and_then(|t| {
        t["spec"]["kubernetes"]["version"]
            .as_str()
            .map(str::to_string)
    });
    let ready_at_current = existing_v.as_ref().is_some_and(|t| {
        let v = &t["status"]["kubernetesResources"]["version"];
        v["status"] == "Ready" && v["version"].as_str() == cur_version.as_deref()
    });
    let desired = tcp::v_prefixed(&kcp.spec.version);
    let target = match version::next_step(&desired, cur_version.as_deref(), ready_at_current) {
        Step::Desired(v) => {
            let reported = existing_v.as_ref().map(|t| {
                let r = &t["status"]["kubernetesResources"]["version"];
                (
                    r["version"].as_str().unwrap_or_default().to_string(),
                    r["status"].as_str().unwrap_or_default().to_string(),
                )
            });
            match reported {
                Some((rv, rs)) if !rv.is_empty() && (rv != v || rs != "Ready") => {
                    conds.push(yes("VersionUpgrade", "RollingOut").with_message(format!(
                        "Kamaji is rolling out {v} (it reports {rv}, {rs})"
                    )));
                }
                _ => conds.push(no("VersionUpgrade", "UpToDate", "")),
            }
            v
        }
        Step::Intermediate { version, remaining } => {
            conds.push(yes("VersionUpgrade", "SteppingMinor").with_message(format!(
                "upgrading {} to {desired} one minor at a time: step {version} in progress ({remaining} more after it)",
                cur_version.clone().unwrap_or_default()
            )));
            version
        }
        Step::Wait { version, remaining } => {
            conds.push(yes("VersionUpgrade", "WaitingForStep").with_message(format!(
                "upgrading to {desired} one minor at a time: waiting for {version} to be Ready ({remaining} minor(s) to go)"
            )));
            version
        }
        Step::Refused(why) => {
            conds.push(no("TenantControlPlaneCreated", "VersionRefused", why));
            write_status(kcp, ctx, existing_v.as_ref(), &conds).await?;
            return Ok(Action::await_change());
        }
    };

    // Build and apply the TenantControlPlane.
    let net = ClusterNetwork::from_cluster(&cluster_v);
    let spec = match tcp::build_spec(&kcp.spec, &net, &target) {
        Ok(s) => s,
        Err(e) => {
            conds.push(no(
                "TenantControlPlaneCreated",
                "InvalidSpec",
                e.to_string(),
            ));
            write_status(kcp, ctx, existing_v.as_ref(), &conds).await?;
            return Ok(Action::await_change());
        }
    };
    let spec = match tcp::fit_to_schema(&spec, &ctx.disc.tcp_spec_schema) {
        Fit::Ok(s) => s,
        Fit::Unsupported(fields) => {
            conds.push(no(
                "TenantControlPlaneCreated",
                "UnsupportedByInstalledKamaji",
                format!(
                    "the installed TenantControlPlane CRD cannot hold: {}; upgrade Kamaji or remove these settings from the KamajiControlPlane/Cluster",
                    fields.join(", ")
                ),
            ));
            write_status(kcp, ctx, existing_v.as_ref(), &conds).await?;
            return Ok(Action::await_change());
        }
    };
    // Empty maps are left out: an empty map in an apply changes the object every time.
    let mut meta = json!({"name": tcp_name, "namespace": tcp_ns});
    if !kcp.labels().is_empty() {
        meta["labels"] = json!(kcp.labels());
    }
    let annotations = tcp::tcp_annotations(kcp.annotations());
    if !annotations.is_empty() {
        meta["annotations"] = json!(annotations);
    }
    if !remote && let Some(oref) = kcp.controller_owner_ref(&()) {
        meta["ownerReferences"] = json!([oref]);
    }
    let body = json!({
        "apiVersion": ctx.disc.tcp.api_version,
        "kind": "TenantControlPlane",
        "metadata": meta,
        "spec": spec,
    });
    let tcp_obj = match tcps
        .patch(
            &tcp_name,
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(&body),
        )
        .await
    {
        Ok(t) => t,
        Err(e) => {
            conds.push(no("TenantControlPlaneCreated", "Failed", e.to_string()));
            write_status(kcp, ctx, existing_v.as_ref(), &conds).await?;
            return Err(e.into());
        }
    };
    conds.push(yes("TenantControlPlaneCreated", "Succeeded"));
    let tcp_v = serde_json::to_value(&tcp_obj).unwrap_or(Value::Null);
    let observed = observe(&tcp_v, kcp, ctx.disc.contract);

    // Endpoint.
    let status_ep = tcp_v["status"]["controlPlaneEndpoint"]
        .as_str()
        .unwrap_or_default();
    let Some(ep) = endpoint::derive(status_ep, kcp.spec.fields.network.as_ref()) else {
        conds.push(no(
            "TenantControlPlaneAddressReady",
            "WaitingForKamaji",
            "waiting for Kamaji to report the TenantControlPlane's status.controlPlaneEndpoint",
        ));
        write_status_obs(kcp, ctx, &observed, &conds).await?;
        return Ok(Action::await_change());
    };
    conds.push(yes("TenantControlPlaneAddressReady", "Succeeded"));
    patch_endpoint(kcp, ctx, &ep).await?;
    conds.push(yes("ControlPlaneEndpointPatched", "Succeeded"));

    // Infrastructure cluster.
    if !ctx.cfg.skip_infra_patch {
        conds.push(infra_step(ctx, &cluster_v, &ns, &ep).await?);
    }

    // Secrets for CAPI.
    match publish_secrets(
        kcp,
        ctx,
        &cluster.name_any(),
        &tcp_v,
        &tcp_client,
        &tcp_ns,
        remote,
    )
    .await
    {
        Ok(()) => conds.push(yes("KubeadmResourcesCreated", "Succeeded")),
        Err(Error::Waiting(m)) => conds.push(no("KubeadmResourcesCreated", "WaitingForKamaji", m)),
        Err(e) => {
            conds.push(no("KubeadmResourcesCreated", "Failed", e.to_string()));
            write_status_obs(kcp, ctx, &observed, &conds).await?;
            return Err(e);
        }
    }

    if observed.initialized {
        conds.push(yes("KamajiControlPlaneIsInitialized", "Succeeded"));
    } else {
        conds.push(no(
            "KamajiControlPlaneIsInitialized",
            "Pending",
            "waiting for the TenantControlPlane to be Ready for the first time",
        ));
    }
    if observed.ready {
        conds.push(yes("KamajiControlPlaneIsReady", "Succeeded"));
        conds.push(yes("Available", "Available"));
    } else {
        let why = format!(
            "TenantControlPlane version status is {:?} with {} available replica(s); ready needs Ready or Upgrading and at least one available replica",
            tcp_v["status"]["kubernetesResources"]["version"]["status"]
                .as_str()
                .unwrap_or("unknown"),
            observed.available_replicas.unwrap_or(0)
        );
        conds.push(no("KamajiControlPlaneIsReady", "Pending", why.clone()));
        conds.push(no("Available", "NotAvailable", why));
    }
    write_status_obs(kcp, ctx, &observed, &conds).await?;
    Ok(Action::await_change())
}

impl Cond {
    fn with_message(mut self, m: String) -> Cond {
        self.message = m;
        self
    }
}

fn observe(tcp: &Value, kcp: &KamajiControlPlane, contract: Contract) -> Observed {
    let kr = &tcp["status"]["kubernetesResources"];
    let vs = kr["version"]["status"].as_str().unwrap_or_default();
    let dep = &kr["deployment"];
    // Kamaji inlines the Deployment's status, whose counts are `omitempty` (k8s.io/api apps/v1
    // DeploymentStatus): once the Deployment's status is there, a missing count is 0 (a
    // scaled-down control plane has none at all), or a merge patch would keep the old counts.
    let count = |k: &str| dep.is_object().then(|| dep[k].as_i64().unwrap_or(0));
    let available = count("availableReplicas");
    let prev_init = kcp.status.as_ref().is_some_and(|s| match contract {
        Contract::V1Beta2 => s
            .initialization
            .as_ref()
            .and_then(|i| i.control_plane_initialized)
            .unwrap_or(false),
        Contract::V1Beta1 => s.initialized.unwrap_or(false),
    });
    Observed {
        initialized: prev_init || vs == "Ready",
        ready: matches!(vs, "Ready" | "Upgrading") && available.unwrap_or(0) > 0,
        version: kr["version"]["version"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        replicas: count("replicas"),
        ready_replicas: count("readyReplicas"),
        available_replicas: available,
        updated_replicas: count("updatedReplicas"),
        unavailable_replicas: count("unavailableReplicas"),
        selector: dep["selector"].as_str().map(str::to_string),
    }
}

fn has_condition(kcp: &KamajiControlPlane, c: &Cond) -> bool {
    kcp.status.as_ref().is_some_and(|s| {
        s.conditions
            .iter()
            .any(|x| x.type_ == c.type_ && x.reason == c.reason && (x.status == "True") == c.ok)
    })
}

async fn event(ctx: &Ctx, kcp: &KamajiControlPlane, t: EventType, reason: &str, note: &str) {
    let ev = Event {
        type_: t,
        reason: reason.into(),
        note: Some(note.chars().take(1000).collect()),
        action: "Reconcile".into(),
        secondary: None,
    };
    if let Err(e) = ctx.recorder.publish(&ev, &kcp.object_ref(&())).await {
        tracing::warn!("publishing an event failed: {e}");
    }
}

/// Writes the status from the TCP `existing` (if any) plus conditions.
async fn write_status(
    kcp: &KamajiControlPlane,
    ctx: &Ctx,
    tcp: Option<&Value>,
    conds: &[Cond],
) -> Result<(), Error> {
    let obs = tcp
        .map(|t| observe(t, kcp, ctx.disc.contract))
        .unwrap_or_else(|| Observed {
            initialized: observe(&Value::Null, kcp, ctx.disc.contract).initialized,
            version: kcp
                .status
                .as_ref()
                .map(|s| s.version.clone())
                .unwrap_or_default(),
            ..Default::default()
        });
    write_status_obs(kcp, ctx, &obs, conds).await
}

fn now() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// Merges `conds` into the existing conditions (keeping transition times of unchanged ones) and
/// writes the status in the shape of the served contract, only when it changed.
async fn write_status_obs(
    kcp: &KamajiControlPlane,
    ctx: &Ctx,
    obs: &Observed,
    conds: &[Cond],
) -> Result<(), Error> {
    let existing = kcp.status.clone().unwrap_or_default();
    let gen_ = kcp.meta().generation;
    let mut merged: Vec<Value> = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    let ts = now();
    for c in conds {
        if seen.contains(&c.type_) {
            continue;
        }
        seen.push(c.type_);
        let status = if c.ok { "True" } else { "False" };
        let prev = existing.conditions.iter().find(|x| x.type_ == c.type_);
        let ltt = match prev {
            Some(p) if p.status == status => p.last_transition_time.clone(),
            _ => ts.clone(),
        };
        let mut v = json!({
            "type": c.type_, "status": status, "reason": c.reason,
            "message": c.message, "lastTransitionTime": ltt,
        });
        match ctx.disc.contract {
            Contract::V1Beta2 => v["observedGeneration"] = json!(gen_),
            Contract::V1Beta1 => {
                if !c.ok {
                    v["severity"] = json!(if c.reason == "Failed" {
                        "Error"
                    } else {
                        "Info"
                    });
                }
            }
        }
        merged.push(v);
    }
    for x in &existing.conditions {
        if !seen.contains(&x.type_.as_str()) {
            merged.push(serde_json::to_value(x).unwrap_or(Value::Null));
        }
    }
    let status = match ctx.disc.contract {
        Contract::V1Beta2 => {
            let mut s = json!({
                "ready": obs.ready,
                "version": obs.version,
                "externalManagedControlPlane": true,
                "conditions": merged,
            });
            if obs.initialized {
                s["initialization"] = json!({"controlPlaneInitialized": true});
            }
            for (k, v) in [
                ("replicas", obs.replicas),
                ("readyReplicas", obs.ready_replicas),
                ("availableReplicas", obs.available_replicas),
                ("upToDateReplicas", obs.updated_replicas),
            ] {
                if let Some(v) = v {
                    s[k] = json!(v);
                }
            }
            if let Some(sel) = &obs.selector {
                s["selector"] = json!(sel);
            }
            s
        }
        Contract::V1Beta1 => {
            let mut s = json!({
                "initialized": obs.initialized,
                "ready": obs.ready,
                "version": obs.version,
                "externalManagedControlPlane": true,
                "replicas": obs.replicas.unwrap_or(0),
                "readyReplicas": obs.ready_replicas.unwrap_or(0),
                "unavailableReplicas": obs.unavailable_replicas.unwrap_or(0),
                "updatedReplicas": obs.updated_replicas.unwrap_or(0),
                "conditions": merged,
            });
            if let Some(sel) = &obs.selector {
                s["selector"] = json!(sel);
            }
            s
        }
    };
    // Compare with what is there, ignoring transition times of unchanged conditions (kept).
    let current = serde_json::to_value(&existing).unwrap_or(Value::Null);
    if status_subset(&status, &current) {
        return Ok(());
    }
    let (ver, api_version) = match ctx.disc.contract {
        Contract::V1Beta2 => ("v1alpha2", "controlplane.cluster.x-k8s.io/v1alpha2"),
        Contract::V1Beta1 => ("v1alpha1", "controlplane.cluster.x-k8s.io/v1alpha1"),
    };
    let r = ar(
        "controlplane.cluster.x-k8s.io",
        ver,
        "KamajiControlPlane",
        "kamajicontrolplanes",
    );
    let api: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), &kcp_ns(kcp), &r);
    let body = json!({"apiVersion": api_version, "kind": "KamajiControlPlane", "status": status});
    match api
        .patch_status(
            &kcp.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&body),
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Whether every field of `want` already has that value in `have` (conditions compared by
/// type, status, reason and message).
fn status_subset(want: &Value, have: &Value) -> bool {
    let Some(w) = want.as_object() else {
        return false;
    };
    for (k, v) in w {
        let h = &have[k];
        if k == "conditions" {
            let (Some(wa), Some(ha)) = (v.as_array(), h.as_array()) else {
                return false;
            };
            if wa.len() != ha.len() {
                return false;
            }
            for c in wa {
                let found = ha.iter().any(|x| {
                    x["type"] == c["type"]
                        && x["status"] == c["status"]
                        && x["reason"] == c["reason"]
                        && x["message"].as_str().unwrap_or_default()
                            == c["message"].as_str().unwrap_or_default()
                        && (c.get("observedGeneration").is_none()
                            || x["observedGeneration"] == c["observedGeneration"])
                });
                if !found {
                    return false;
                }
            }
        } else if v.is_object() {
            if !status_subset(v, h) {
                return false;
            }
        } else if h != v {
            return false;
        }
    }
    true
}

/// Writes `spec.controlPlaneEndpoint` only when it differs.
async fn patch_endpoint(kcp: &KamajiControlPlane, ctx: &Ctx, ep: &Endpoint) -> Result<(), Error> {
    let cur = kcp.spec.control_plane_endpoint.as_ref();
    if cur.is_some_and(|c| c.host == ep.host && c.port == ep.port) {
        return Ok(());
    }
    let api: Api<KamajiControlPlane> = Api::namespaced(ctx.client.clone(), &kcp_ns(kcp));
    let body = json!({"spec": {"controlPlaneEndpoint": {"host": ep.host, "port": ep.port}}});
    api.patch(
        &kcp.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&body),
    )
    .await?;
    Ok(())
}

async fn infra_step(ctx: &Ctx, cluster: &Value, ns: &str, ep: &Endpoint) -> Result<Cond, Error> {
    const C: &str = "InfrastructureClusterPatched";
    let r = &cluster["spec"]["infrastructureRef"];
    let kind = r["kind"].as_str().unwrap_or_default();
    let name = r["name"].as_str().unwrap_or_default();
    if kind.is_empty() || name.is_empty() {
        return Ok(yes(C, "NoInfrastructureCluster"));
    }
    let group = r["apiGroup"]
        .as_str()
        .map(str::to_string)
        .or_else(|| {
            r["apiVersion"]
                .as_str()
                .map(|av| av.split_once('/').map(|(g, _)| g).unwrap_or("").to_string())
        })
        .unwrap_or_default();
    let Some(action) = infra::action_for(kind, &ctx.cfg.extra_infra_kinds) else {
        return Ok(no(
            C,
            "UnsupportedInfrastructureProvider",
            format!(
                "unsupported infrastructure provider kind {kind}; start the reconciler with --dynamic-infrastructure-clusters {kind} to set its spec.controlPlaneEndpoint"
            ),
        ));
    };
    let res = match ctx.disc.infra.get(kind).filter(|a| a.group == group) {
        Some(a) => a.clone(),
        None => {
            // Installed after start-up: resolve it now (its changes are not watched until a restart).
            let found = kube::discovery::group(&ctx.client, &group)
                .await
                .ok()
                .and_then(|g| {
                    g.resources_by_stability()
                        .into_iter()
                        .find(|(a, _)| a.kind == kind)
                        .map(|(a, _)| a)
                });
            match found {
                Some(a) => a,
                None => {
                    return Ok(no(
                        C,
                        "InfrastructureKindNotServed",
                        format!(
                            "{kind}.{group} is not served by the API server; install its provider"
                        ),
                    ));
                }
            }
        }
    };
    let api: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), ns, &res);
    let Some(obj) = api.get_opt(name).await? else {
        return Ok(no(
            C,
            "WaitingForInfrastructureCluster",
            format!("{kind} {ns}/{name} does not exist yet"),
        ));
    };
    let obj_v = serde_json::to_value(&obj).unwrap_or(Value::Null);
    match infra::plan(action, kind, &obj_v, ep) {
        Plan::UpToDate => Ok(yes(C, "Succeeded")),
        Plan::Mismatch(m) => Ok(no(C, "ControlPlaneEndpointMismatch", m)),
        Plan::Patch { spec, status_ready } => {
            if spec.as_object().is_some_and(|o| !o.is_empty()) {
                let mut body = json!({"spec": spec});
                if action == infra::Action::EndpointAndReady {
                    body["metadata"] =
                        json!({"annotations": {"cluster.x-k8s.io/managed-by": "kamaji"}});
                }
                api.patch(name, &PatchParams::default(), &Patch::Merge(&body))
                    .await?;
            }
            if status_ready {
                let body = json!({"status": {"ready": true}});
                match api
                    .patch_status(name, &PatchParams::default(), &Patch::Merge(&body))
                    .await
                {
                    Ok(_) => {}
                    // No status subresource: status is part of the main resource.
                    Err(kube::Error::Api(e)) if e.code == 404 => {
                        api.patch(name, &PatchParams::default(), &Patch::Merge(&body))
                            .await?;
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            Ok(yes(C, "Succeeded"))
        }
    }
}

fn secret_labels(cluster: &str, tcp: &str, which: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (CLUSTER_NAME_LABEL.to_string(), cluster.to_string()),
        (
            "kamaji.clastix.io/component".to_string(),
            "capi".to_string(),
        ),
        ("kamaji.clastix.io/secret".to_string(), which.to_string()),
        ("kamaji.clastix.io/cluster".to_string(), cluster.to_string()),
        ("kamaji.clastix.io/tcp".to_string(), tcp.to_string()),
    ])
}

/// Copies Kamaji's admin kubeconfig and CA into `<cluster>-kubeconfig` and `<cluster>-ca`.
async fn publish_secrets(
    kcp: &KamajiControlPlane,
    ctx: &Ctx,
    cluster: &str,
    tcp: &Value,
    tcp_client: &Client,
    tcp_ns: &str,
    remote: bool,
) -> Result<(), Error> {
    let ns = kcp_ns(kcp);
    let tcp_name = tcp["metadata"]["name"].as_str().unwrap_or_default();
    let kc_name = tcp["status"]["kubeconfig"]["admin"]["secretName"]
        .as_str()
        .unwrap_or_default();
    let ca_name = tcp["status"]["certificates"]["ca"]["secretName"]
        .as_str()
        .unwrap_or_default();
    if kc_name.is_empty() || ca_name.is_empty() {
        return Err(Error::Waiting(
            "waiting for Kamaji to publish the admin kubeconfig and CA Secret names in the TenantControlPlane status".into(),
        ));
    }
    let src: Api<Secret> = Api::namespaced(tcp_client.clone(), tcp_ns);
    let dst: Api<Secret> = Api::namespaced(ctx.client.clone(), &ns);
    let owner = kcp.controller_owner_ref(&());
    let pp = PatchParams::apply(MANAGER).force();

    // Kubeconfig.
    let key = kcp
        .annotations()
        .get(KUBECONFIG_KEY_ANNOTATION)
        .cloned()
        .unwrap_or_else(|| {
            let adv = kcp
                .spec
                .fields
                .network
                .as_ref()
                .is_some_and(|n| !n.advertise_address.is_empty());
            if adv { "admin.svc" } else { "admin.conf" }.to_string()
        });
    let Some(kc) = src.get_opt(kc_name).await? else {
        return Err(Error::Waiting(format!(
            "waiting for Kamaji's Secret {tcp_ns}/{kc_name}"
        )));
    };
    let Some(value) = kc.data.as_ref().and_then(|d| d.get(&key)).cloned() else {
        return Err(Error::Other(format!(
            "Secret {tcp_ns}/{kc_name} has no key {key:?} (chosen by the {KUBECONFIG_KEY_ANNOTATION} annotation or the default); set the annotation to one of its keys"
        )));
    };
    let target = format!("{cluster}-kubeconfig");
    let mut s = Secret::default();
    s.metadata.name = Some(target.clone());
    s.metadata.namespace = Some(ns.clone());
    s.metadata.labels = Some(secret_labels(cluster, tcp_name, "kubeconfig"));
    s.metadata.owner_references = owner.clone().map(|o| vec![o]);
    s.type_ = Some("cluster.x-k8s.io/secret".into());
    s.data = Some(BTreeMap::from([("value".to_string(), value)]));
    apply_secret(&dst, &target, s, &pp).await?;

    // CA.
    let target = format!("{cluster}-ca");
    if !remote && target == ca_name {
        return Ok(()); // Kamaji's own `<tcp>-ca` already is `<cluster>-ca`.
    }
    if let Some(existing) = dst.get_opt(&target).await?
        && existing
            .owner_references()
            .first()
            .is_some_and(|o| o.kind == "TenantControlPlane")
    {
        return Ok(());
    }
    let Some(ca) = src.get_opt(ca_name).await? else {
        return Err(Error::Waiting(format!(
            "waiting for Kamaji's Secret {tcp_ns}/{ca_name}"
        )));
    };
    let data = ca.data.clone().unwrap_or_default();
    let (Some(crt), Some(key)) = (data.get("ca.crt"), data.get("ca.key")) else {
        return Err(Error::Waiting(format!(
            "Kamaji's Secret {tcp_ns}/{ca_name} has no ca.crt/ca.key yet"
        )));
    };
    let mut labels = ca.labels().clone();
    labels.extend(secret_labels(cluster, tcp_name, "ca"));
    let mut s = Secret::default();
    s.metadata.name = Some(target.clone());
    s.metadata.namespace = Some(ns.clone());
    s.metadata.labels = Some(labels);
    s.metadata.owner_references = owner.map(|o| vec![o]);
    s.type_ = Some("cluster.x-k8s.io/secret".into());
    s.data = Some(BTreeMap::from([
        ("tls.crt".to_string(), ByteString(crt.0.clone())),
        ("tls.key".to_string(), ByteString(key.0.clone())),
    ]));
    apply_secret(&dst, &target, s, &pp).await
}

async fn apply_secret(
    api: &Api<Secret>,
    name: &str,
    s: Secret,
    pp: &PatchParams,
) -> Result<(), Error> {
    // Skip the request when nothing would change.
    if let Some(cur) = api.get_opt(name).await? {
        let same_data = cur.data == s.data && cur.type_ == s.type_;
        let labels_ok = s
            .metadata
            .labels
            .iter()
            .flatten()
            .all(|(k, v)| cur.labels().get(k) == Some(v));
        let owner_ok = s.metadata.owner_references.iter().flatten().all(|o| {
            cur.owner_references()
                .iter()
                .any(|c| c.uid == o.uid && c.controller == Some(true))
        });
        if same_data && labels_ok && owner_ok {
            return Ok(());
        }
    }
    let mut v = serde_json::to_value(&s).map_err(|e| Error::Other(e.to_string()))?;
    v["apiVersion"] = json!("v1");
    v["kind"] = json!("Secret");
    api.patch(name, pp, &Patch::Apply(&v)).await?;
    Ok(())
}

async fn ensure_finalizer(kcp: &KamajiControlPlane, ctx: &Ctx) -> Result<(), Error> {
    if kcp.finalizers().iter().any(|f| f == ECR_FINALIZER) {
        return Ok(());
    }
    let mut f = kcp.finalizers().to_vec();
    f.push(ECR_FINALIZER.into());
    let api: Api<KamajiControlPlane> = Api::namespaced(ctx.client.clone(), &kcp_ns(kcp));
    let body = json!({"metadata": {"finalizers": f, "resourceVersion": kcp.resource_version()}});
    api.patch(
        &kcp.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&body),
    )
    .await?;
    Ok(())
}

/// Deletion: local TCPs and Secrets go with ownerReference garbage collection; a remote TCP is
/// deleted here. The external-reference finalizer is always released (also on NotFound).
async fn finalize(kcp: &KamajiControlPlane, ctx: &Ctx) -> Result<Action, Error> {
    if !kcp.finalizers().iter().any(|f| f == ECR_FINALIZER) {
        return Ok(Action::await_change());
    }
    let ecr = kcp
        .spec
        .fields
        .deployment
        .as_ref()
        .and_then(|d| d.external_cluster_reference.clone());
    if let Some(r) = ecr
        && ctx.cfg.external_cluster_reference
    {
        match remote_client(kcp, &r, ctx).await {
            Ok(c) => {
                let api: Api<DynamicObject> =
                    Api::namespaced_with(c, &r.deployment_namespace, &ctx.disc.tcp);
                let name = format!("kcp-{}", kcp.uid().unwrap_or_default());
                match api.delete(&name, &Default::default()).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(e)) if e.code == 404 => {}
                    Err(e) => return Err(e.into()),
                }
            }
            // The kubeconfig Secret is gone: nothing can be reached any more; release.
            Err(e) => {
                tracing::warn!(kcp = %kcp.name_any(), "remote cluster unreachable, releasing the finalizer: {e}")
            }
        }
    }
    let f: Vec<String> = kcp
        .finalizers()
        .iter()
        .filter(|f| *f != ECR_FINALIZER)
        .cloned()
        .collect();
    let api: Api<KamajiControlPlane> = Api::namespaced(ctx.client.clone(), &kcp_ns(kcp));
    let body = json!({"metadata": {"finalizers": f, "resourceVersion": kcp.resource_version()}});
    match api
        .patch(
            &kcp.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&body),
        )
        .await
    {
        Ok(_) => Ok(Action::await_change()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(Action::await_change()),
        Err(e) => Err(e.into()),
    }
}

async fn remote_client(
    kcp: &KamajiControlPlane,
    r: &crate::api::ExternalClusterReference,
    ctx: &Ctx,
) -> Result<Client, Error> {
    let ns = if r.kubeconfig_secret_namespace.is_empty() {
        kcp_ns(kcp)
    } else {
        if r.kubeconfig_secret_namespace != kcp_ns(kcp)
            && !ctx.cfg.external_cluster_reference_cross_namespace
        {
            return Err(Error::Other(format!(
                "externalClusterReference.kubeconfigSecretNamespace {:?} differs from the KamajiControlPlane's namespace; start the reconciler with --external-cluster-reference-cross-namespace to allow it",
                r.kubeconfig_secret_namespace
            )));
        }
        r.kubeconfig_secret_namespace.clone()
    };
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &ns);
    let s = secrets
        .get_opt(&r.kubeconfig_secret_name)
        .await?
        .ok_or_else(|| {
            Error::Other(format!(
                "external cluster kubeconfig Secret {ns}/{} not found",
                r.kubeconfig_secret_name
            ))
        })?;
    let data = s
        .data
        .as_ref()
        .and_then(|d| d.get(&r.kubeconfig_secret_key))
        .ok_or_else(|| {
            Error::Other(format!(
                "Secret {ns}/{} has no key {:?}",
                r.kubeconfig_secret_name, r.kubeconfig_secret_key
            ))
        })?;
    let text = String::from_utf8_lossy(&data.0).to_string();
    let kc = kube::config::Kubeconfig::from_yaml(&text)
        .map_err(|e| Error::Other(format!("external cluster kubeconfig: {e}")))?;
    let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .map_err(|e| Error::Other(format!("external cluster kubeconfig: {e}")))?;
    Ok(Client::try_from(cfg)?)
}
