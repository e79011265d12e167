//! One reconcile of a KamajiControlPlane by kamaji-reconciler, decided with no I/O.
//!
//! The reconciler reads in one direction: it observes what exists (the KamajiControlPlane, its
//! Cluster, where its TenantControlPlane lives and that TenantControlPlane: a [`Found`]), decides
//! here what to write and which conditions say so ([`decide`] → [`KcpDecision`]), acts (the API
//! writes), then writes the status once, from what it found and what the writes did
//! ([`published`] reads the TenantControlPlane as applied, [`tcp_created`] and
//! [`SecretsPublished`] say how the writes went). A reconcile that cannot go on ends in a
//! [`Then`] saying why; no step writes the status on its own.
//!
//! `P` is how the reconciler reaches the TenantControlPlane's cluster and `E` why it could not:
//! opaque here, handed back in the decision to the act that needs them.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};

use super::api::ExternalClusterReference;
use super::api::v1alpha2::KamajiControlPlane;
use super::endpoint::{self, Endpoint};
use super::tcp::{self, ClusterNetwork, Fit};
use super::version::{self, Step};
use crate::labels::PAUSED_ANNOTATION;
use crate::version::KubeVersion;
use crate::version::releases::{PATCH_RELEASES_ANNOTATION, Releases};

/// The finalizer of a KamajiControlPlane whose TenantControlPlane lives in another cluster
/// (ownerReferences do not cross clusters): released once that TenantControlPlane is deleted.
pub const ECR_FINALIZER: &str = "ecr.kamaji.clastix.io/finalizer";

/// A TenantControlPlane in another cluster is watched there (the reconciler's remote watch, one
/// per KamajiControlPlane, re-established after that API server restarts); its
/// KamajiControlPlane is also looked at again this often, a safety net for a watch that cannot
/// reach that cluster (each reconcile then says why in its conditions).
const REMOTE_RESYNC: Duration = Duration::from_secs(300);

const CREATED: &str = "TenantControlPlaneCreated";
const EXTERNAL: &str = "FoundExternalReferenceClient";

/// A condition of the KamajiControlPlane as one reconcile computes it.
#[derive(Clone, Debug, PartialEq)]
pub struct Cond {
    pub type_: &'static str,
    pub ok: bool,
    pub reason: String,
    pub message: String,
}

impl Cond {
    /// A `True` condition, with no message.
    pub fn yes(type_: &'static str, reason: &str) -> Cond {
        Cond {
            type_,
            ok: true,
            reason: reason.into(),
            message: String::new(),
        }
    }

    /// A `False` condition saying why.
    pub fn no(type_: &'static str, reason: &str, message: impl Into<String>) -> Cond {
        Cond {
            type_,
            ok: false,
            reason: reason.into(),
            message: message.into(),
        }
    }

    fn with_message(mut self, m: String) -> Cond {
        self.message = m;
        self
    }
}

/// What one reconcile found, read in this order: the reading stops at the first of these facts
/// that leaves nothing more to read.
#[derive(Debug)]
pub enum Found<P, E> {
    /// Being deleted: whether it carries [`ECR_FINALIZER`], and (only then, with an external
    /// cluster reference the reconciler allows) the external cluster reached, or why not.
    Deleting {
        finalizer: bool,
        remote: Option<Result<P, E>>,
    },
    /// No ownerReference to a `cluster.x-k8s.io` Cluster yet.
    NoClusterOwner,
    /// The Cluster the ownerReference names does not exist.
    ClusterMissing { namespace: String, name: String },
    /// The Cluster or the KamajiControlPlane is paused ([`paused`]).
    Paused,
    /// `deployment.externalClusterReference` is set but the reconciler runs without
    /// `--external-cluster-reference`.
    ExternalReferenceDisabled,
    /// The external cluster cannot be reached.
    ExternalClusterUnreachable(E),
    /// The watch has yet to bring what this process last applied to the TenantControlPlane;
    /// that event reconciles again.
    TcpBehind,
    /// Everything a reconcile reads: the owning Cluster, where the TenantControlPlane lives and
    /// the TenantControlPlane as it is (none yet).
    All {
        cluster: Value,
        place: P,
        tcp: Option<Value>,
    },
}

/// What the reconciler runs with: the flag allowing external cluster references and the
/// installed TenantControlPlane CRD.
#[derive(Clone, Copy, Debug)]
pub struct Setup<'a> {
    pub external_cluster_reference: bool,
    pub tcp_api_version: &'a str,
    pub tcp_spec_schema: &'a Value,
}

/// What one reconcile does, decided from what it found.
#[derive(Debug)]
pub struct KcpDecision<P, E> {
    /// Add [`ECR_FINALIZER`] before anything else is written (a TenantControlPlane in another
    /// cluster is about to be written, and only the finalizer deletes it).
    pub add_finalizer: bool,
    pub then: Then<P, E>,
    /// Reconcile again after this long even with no change (`None`: on the next change only).
    pub requeue: Option<Duration>,
}

/// The writes of one reconcile, and what its status reports.
#[derive(Debug)]
pub enum Then<P, E> {
    /// Deleted: the finalizer's work.
    Finalize(Finalize<P, E>),
    /// Nothing to write, not even the status.
    Nothing,
    /// Only the status, with these conditions (and the state of `tcp`, the TenantControlPlane as
    /// read, if any); a Warning Event the first time when `event` says so.
    Wait {
        conds: Vec<Cond>,
        tcp: Option<Value>,
        event: Option<Note>,
    },
    /// Only the status, then the reconcile fails with `error` (and backs off).
    Fail { conds: Vec<Cond>, error: E },
    /// Apply the TenantControlPlane and publish what it reports.
    Apply(Apply<P>),
}

/// A Warning Event on the KamajiControlPlane.
#[derive(Clone, Debug, PartialEq)]
pub struct Note {
    pub reason: &'static str,
    pub message: &'static str,
}

/// What a deleted KamajiControlPlane needs before it goes.
#[derive(Debug)]
pub enum Finalize<P, E> {
    /// No finalizer of ours: nothing to do (local objects go with their ownerReferences).
    NotOurs,
    /// Release the finalizer.
    Release,
    /// Delete the TenantControlPlane in the external cluster, then release the finalizer.
    DeleteRemote(P),
    /// The external cluster cannot be reached any more (its kubeconfig Secret is gone): release
    /// the finalizer anyway, saying why in the log.
    ReleaseUnreachable(E),
}

/// The TenantControlPlane to apply, and what the writes after it need.
#[derive(Debug)]
pub struct Apply<P> {
    /// The conditions so far (paused, external reference, version).
    pub conds: Vec<Cond>,
    /// The TenantControlPlane, server-side applied as it is.
    pub body: Value,
    pub place: P,
    /// The owning Cluster (its network, its name, its infrastructure reference).
    pub cluster: Value,
    /// The TenantControlPlane as read (none yet).
    pub tcp: Option<Value>,
}

/// Where a KamajiControlPlane's TenantControlPlane lives: next to it and named like it, or in
/// the cluster its external cluster reference points to, named `kcp-<uid>` there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TcpAt {
    pub namespace: String,
    pub name: String,
    pub remote: bool,
}

/// [`TcpAt`] for `kcp`.
pub fn tcp_at(kcp: &KamajiControlPlane) -> TcpAt {
    match external_reference(kcp) {
        Some(r) => TcpAt {
            namespace: r.deployment_namespace.clone(),
            name: format!("kcp-{}", kcp.uid().unwrap_or_default()),
            remote: true,
        },
        None => TcpAt {
            namespace: kcp.namespace().unwrap_or_default(),
            name: kcp.name_any(),
            remote: false,
        },
    }
}

/// The KamajiControlPlane's `deployment.externalClusterReference`.
pub fn external_reference(kcp: &KamajiControlPlane) -> Option<&ExternalClusterReference> {
    kcp.spec
        .fields
        .deployment
        .as_ref()
        .and_then(|d| d.external_cluster_reference.as_ref())
}

/// Whether reconciliation is paused: the Cluster's `spec.paused`, or the paused annotation on
/// the Cluster or the KamajiControlPlane.
pub fn paused(cluster: &Value, kcp: &KamajiControlPlane) -> bool {
    cluster["spec"]["paused"] == json!(true)
        || cluster["metadata"]["annotations"]
            .get(PAUSED_ANNOTATION)
            .is_some()
        || kcp.annotations().contains_key(PAUSED_ANNOTATION)
}

/// The controller ownerReference to `kcp` that the TenantControlPlane and both CAPI Secrets
/// carry, with `blockOwnerDeletion: true` as controller-runtime's `SetControllerReference`
/// writes it for CACPPK (`controllers/`, CACPPK v0.20.0): a foreground deletion of the
/// KamajiControlPlane then waits for them.
pub fn owner_ref(kcp: &KamajiControlPlane) -> Option<OwnerReference> {
    let mut o = kcp.controller_owner_ref(&())?;
    o.block_owner_deletion = Some(true);
    Some(o)
}

/// Decides one reconcile from what it found: in order, deletion, the owning Cluster, the pause,
/// where the TenantControlPlane lives, the spec's bounds, the version step, the
/// TenantControlPlane's spec fitted to the installed CRD.
pub fn decide<P, E: std::fmt::Display>(
    kcp: &KamajiControlPlane,
    found: Found<P, E>,
    setup: &Setup<'_>,
) -> KcpDecision<P, E> {
    let deleting = matches!(found, Found::Deleting { .. });
    let requeue =
        (setup.external_cluster_reference && !deleting && external_reference(kcp).is_some())
            .then_some(REMOTE_RESYNC);
    let add_finalizer = matches!(found, Found::All { .. })
        && tcp_at(kcp).remote
        && !kcp.finalizers().iter().any(|f| f == ECR_FINALIZER);
    KcpDecision {
        add_finalizer,
        then: then(kcp, found, setup),
        requeue,
    }
}

fn then<P, E: std::fmt::Display>(
    kcp: &KamajiControlPlane,
    found: Found<P, E>,
    setup: &Setup<'_>,
) -> Then<P, E> {
    match found {
        Found::Deleting { finalizer, remote } => Then::Finalize(match (finalizer, remote) {
            (false, _) => Finalize::NotOurs,
            (true, None) => Finalize::Release,
            (true, Some(Ok(p))) => Finalize::DeleteRemote(p),
            (true, Some(Err(e))) => Finalize::ReleaseUnreachable(e),
        }),
        Found::NoClusterOwner => {
            let message = "no ownerReference to a cluster.x-k8s.io Cluster; Cluster API adds it once a Cluster's spec.controlPlaneRef names this KamajiControlPlane, and nothing is created until then";
            let reason = "WaitingForClusterOwner";
            let cond = Cond::no(CREATED, reason, message);
            // Said once: not again while the status already says so.
            let event = (!has_condition(kcp, &cond)).then_some(Note { reason, message });
            Then::Wait {
                conds: vec![cond],
                tcp: None,
                event,
            }
        }
        Found::ClusterMissing { namespace, name } => wait(
            vec![Cond::no(
                CREATED,
                "ClusterNotFound",
                format!("the owning Cluster {namespace}/{name} does not exist"),
            )],
            None,
        ),
        Found::Paused => wait(
            vec![Cond::yes("Paused", "Paused").with_message(
                "reconciliation is paused (Cluster spec.paused or the cluster.x-k8s.io/paused annotation)".into(),
            )],
            None,
        ),
        Found::ExternalReferenceDisabled => {
            let why = "deployment.externalClusterReference is set but the reconciler runs without --external-cluster-reference; restart it with that flag or remove the reference";
            let cond = Cond::no(EXTERNAL, "FeatureDisabled", why);
            wait(vec![not_paused(), cond], None)
        }
        Found::ExternalClusterUnreachable(error) => Then::Fail {
            conds: vec![not_paused(), Cond::no(EXTERNAL, "Failed", error.to_string())],
            error,
        },
        Found::TcpBehind => Then::Nothing,
        Found::All {
            cluster,
            place,
            tcp,
        } => apply_or_wait(kcp, cluster, place, tcp, setup),
    }
}

/// With everything read: the TenantControlPlane to apply, or the condition saying why not (the
/// spec's bounds, the version step, the spec the installed CRD cannot hold).
fn apply_or_wait<P, E>(
    kcp: &KamajiControlPlane,
    cluster: Value,
    place: P,
    tcp: Option<Value>,
    setup: &Setup<'_>,
) -> Then<P, E> {
    let at = tcp_at(kcp);
    let mut conds = vec![not_paused()];
    if at.remote {
        conds.push(Cond::yes(EXTERNAL, "Succeeded"));
    }
    // A count or a version the CRD refuses now, kept from before it did: not copied into the
    // TenantControlPlane, which stays as it is until the KamajiControlPlane is fixed.
    if let Some(why) = kcp.spec.out_of_bounds() {
        conds.push(Cond::no(CREATED, "InvalidSpec", why));
        return wait(conds, tcp);
    }
    let target = match version_step(kcp, tcp.as_ref()) {
        Ok((target, cond)) => {
            conds.push(cond);
            target
        }
        Err(refused) => {
            conds.push(refused);
            return wait(conds, tcp);
        }
    };
    match tcp_spec(kcp, &cluster, &target, setup.tcp_spec_schema) {
        Ok(spec) => Then::Apply(Apply {
            conds,
            body: tcp_body(kcp, &at, setup.tcp_api_version, spec),
            place,
            cluster,
            tcp,
        }),
        Err(c) => {
            conds.push(c);
            wait(conds, tcp)
        }
    }
}

/// Once the Cluster is read and not paused.
fn not_paused() -> Cond {
    Cond::no("Paused", "NotPaused", "")
}

fn wait<P, E>(conds: Vec<Cond>, tcp: Option<Value>) -> Then<P, E> {
    Then::Wait {
        conds,
        tcp,
        event: None,
    }
}

/// Whether the KamajiControlPlane's status already has `c` (type, status and reason).
fn has_condition(kcp: &KamajiControlPlane, c: &Cond) -> bool {
    kcp.status.as_ref().is_some_and(|s| {
        s.conditions
            .iter()
            .any(|x| x.type_ == c.type_ && x.reason == c.reason && (x.status == "True") == c.ok)
    })
}

/// The version to apply now and the `VersionUpgrade` condition, or the condition refusing it: a
/// later minor is reached through the newest patch of the current minor and of each minor
/// between (those recorded on the KamajiControlPlane, else the shipped table), each step waiting
/// until Kamaji reports the previous one Ready; downgrades of the minor are refused.
fn version_step(
    kcp: &KamajiControlPlane,
    existing: Option<&Value>,
) -> Result<(String, Cond), Cond> {
    let cur_version = existing.and_then(|t| {
        t["spec"]["kubernetes"]["version"]
            .as_str()
            .map(str::to_string)
    });
    let ready_at_current = existing.is_some_and(|t| {
        let v = &t["status"]["kubernetesResources"]["version"];
        v["status"] == "Ready" && v["version"].as_str() == cur_version.as_deref()
    });
    let desired = version::v_prefixed(&kcp.spec.version);
    // The patch releases the planning command recorded, over the shipped table; an upgrade
    // nobody planned (a hand edit, a ClusterClass's topology) gets no extra step within the
    // current minor.
    let releases = match kcp.annotations().get(PATCH_RELEASES_ANNOTATION) {
        Some(a) => Releases::shipped().with_recorded(Some(a)),
        None => match cur_version.as_deref().map(KubeVersion::parse) {
            Some(Ok(c)) => Releases::shipped().without_minor_of(&c),
            _ => Releases::shipped(),
        },
    };
    let step = version::next_step(
        &desired,
        cur_version.as_deref(),
        ready_at_current,
        &releases,
    );
    Ok(match step {
        Step::Desired(v) => {
            let c = rollout_condition(existing, &v);
            (v, c)
        }
        Step::Intermediate { version, remaining } => {
            let c = Cond::yes("VersionUpgrade", "SteppingMinor").with_message(format!(
                "upgrading {} to {desired} one minor at a time: step {version} in progress ({remaining} more after it)",
                cur_version.clone().unwrap_or_default()
            ));
            (version, c)
        }
        Step::Wait { version, remaining } => {
            let c = Cond::yes("VersionUpgrade", "WaitingForStep").with_message(format!(
                "upgrading to {desired} one minor at a time: waiting for {version} to be Ready ({remaining} minor(s) to go)"
            ));
            (version, c)
        }
        Step::Refused(why) => return Err(Cond::no(CREATED, "VersionRefused", why)),
    })
}

/// `VersionUpgrade` once the desired version is applied: rolling out until Kamaji reports it Ready.
fn rollout_condition(existing: Option<&Value>, v: &str) -> Cond {
    let reported = existing.map(|t| {
        let r = &t["status"]["kubernetesResources"]["version"];
        (
            r["version"].as_str().unwrap_or_default().to_string(),
            r["status"].as_str().unwrap_or_default().to_string(),
        )
    });
    match reported {
        Some((rv, rs)) if !rv.is_empty() && (rv != v || rs != "Ready") => {
            Cond::yes("VersionUpgrade", "RollingOut")
                .with_message(format!("Kamaji is rolling out {v} (it reports {rv}, {rs})"))
        }
        _ => Cond::no("VersionUpgrade", "UpToDate", ""),
    }
}

/// The TenantControlPlane `spec`, fitted to the installed CRD, or the condition saying why
/// there is none.
fn tcp_spec(
    kcp: &KamajiControlPlane,
    cluster: &Value,
    target: &str,
    schema: &Value,
) -> Result<Value, Cond> {
    let net = ClusterNetwork::from_cluster(cluster);
    let spec = tcp::build_spec(&kcp.spec, &net, target)
        .map_err(|e| Cond::no(CREATED, "InvalidSpec", e.to_string()))?;
    match tcp::fit_to_schema(&spec, schema) {
        Fit::Ok(s) => Ok(s),
        Fit::Unsupported(fields) => Err(Cond::no(
            CREATED,
            "UnsupportedByInstalledKamaji",
            format!(
                "the installed TenantControlPlane CRD cannot hold: {}; upgrade Kamaji or remove these settings from the KamajiControlPlane/Cluster",
                fields.join(", ")
            ),
        )),
    }
}

/// The applied TenantControlPlane: the KCP's labels and annotations, and (when local) a
/// controller ownerReference to the KCP.
fn tcp_body(kcp: &KamajiControlPlane, at: &TcpAt, api_version: &str, spec: Value) -> Value {
    // Empty maps are left out: an empty map in an apply changes the object every time.
    let mut meta = json!({"name": at.name, "namespace": at.namespace});
    if !kcp.labels().is_empty() {
        meta["labels"] = json!(kcp.labels());
    }
    let annotations = tcp::tcp_annotations(kcp.annotations());
    if !annotations.is_empty() {
        meta["annotations"] = json!(annotations);
    }
    if !at.remote
        && let Some(oref) = owner_ref(kcp)
    {
        meta["ownerReferences"] = json!([oref]);
    }
    json!({
        "apiVersion": api_version,
        "kind": "TenantControlPlane",
        "metadata": meta,
        "spec": spec,
    })
}

/// `TenantControlPlaneCreated` after the apply: `Succeeded`, or why it failed.
pub fn tcp_created(failed: Option<String>) -> Cond {
    match failed {
        None => Cond::yes(CREATED, "Succeeded"),
        Some(e) => Cond::no(CREATED, "Failed", e),
    }
}

/// The TenantControlPlane's state the KamajiControlPlane's status copies.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TcpState {
    pub initialized: bool,
    pub ready: bool,
    pub version: String,
    pub replicas: Option<i64>,
    pub ready_replicas: Option<i64>,
    pub available_replicas: Option<i64>,
    pub updated_replicas: Option<i64>,
    pub unavailable_replicas: Option<i64>,
    pub selector: Option<String>,
}

/// The counts of the Deployment's status that Kamaji inlines and [`TcpState`] reads.
pub const DEPLOYMENT_COUNTS: [&str; 5] = [
    "replicas",
    "readyReplicas",
    "availableReplicas",
    "updatedReplicas",
    "unavailableReplicas",
];

impl TcpState {
    /// The state of `tcp`; with none (not read, or none yet), the version the status already
    /// states. `initialized_before`: the status said the control plane was initialized, which
    /// it stays.
    pub fn of(tcp: Option<&Value>, kcp: &KamajiControlPlane, initialized_before: bool) -> TcpState {
        let Some(tcp) = tcp else {
            return TcpState {
                initialized: initialized_before,
                version: kcp
                    .status
                    .as_ref()
                    .map(|s| s.version.clone())
                    .unwrap_or_default(),
                ..Default::default()
            };
        };
        let kr = &tcp["status"]["kubernetesResources"];
        let vs = kr["version"]["status"].as_str().unwrap_or_default();
        let dep = &kr["deployment"];
        // Kamaji inlines the Deployment's status, whose counts are `omitempty` (DeploymentStatus
        // in k8s.io/api v0.35.4 apps/v1/types.go): once the Deployment's status is there, a
        // missing count is 0 (a scaled-down control plane has none at all), or a merge patch
        // would keep the old counts.
        let count = |k: &str| dep.is_object().then(|| dep[k].as_i64().unwrap_or(0));
        let available = count("availableReplicas");
        TcpState {
            initialized: initialized_before || vs == "Ready",
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
}

/// What the TenantControlPlane as applied lets a reconcile publish.
#[derive(Clone, Debug, PartialEq)]
pub struct Published {
    pub state: TcpState,
    /// The endpoint for the KamajiControlPlane and the infrastructure cluster; `None` until
    /// Kamaji reports one, and the reconcile waits.
    pub endpoint: Option<Endpoint>,
    /// `TenantControlPlaneAddressReady`.
    pub address: Cond,
    /// Initialized, Ready and Available, once the Secrets are published.
    pub readiness: Vec<Cond>,
}

/// [`Published`] for `tcp`, the TenantControlPlane as applied.
pub fn published(kcp: &KamajiControlPlane, tcp: &Value, initialized_before: bool) -> Published {
    let state = TcpState::of(Some(tcp), kcp, initialized_before);
    let status_ep = tcp["status"]["controlPlaneEndpoint"]
        .as_str()
        .unwrap_or_default();
    let endpoint = endpoint::derive(status_ep, kcp.spec.fields.network.as_deref());
    let address = match endpoint {
        Some(_) => Cond::yes("TenantControlPlaneAddressReady", "Succeeded"),
        None => Cond::no(
            "TenantControlPlaneAddressReady",
            "WaitingForKamaji",
            "waiting for Kamaji to report the TenantControlPlane's status.controlPlaneEndpoint",
        ),
    };
    let readiness = readiness(tcp, &state);
    Published {
        state,
        endpoint,
        address,
        readiness,
    }
}

/// Initialized once Ready for the first time; Ready (and Available) needs the version status
/// `Ready` or `Upgrading` and at least one available replica.
fn readiness(tcp: &Value, state: &TcpState) -> Vec<Cond> {
    let mut conds = vec![if state.initialized {
        Cond::yes("KamajiControlPlaneIsInitialized", "Succeeded")
    } else {
        Cond::no(
            "KamajiControlPlaneIsInitialized",
            "Pending",
            "waiting for the TenantControlPlane to be Ready for the first time",
        )
    }];
    if state.ready {
        conds.push(Cond::yes("KamajiControlPlaneIsReady", "Succeeded"));
        conds.push(Cond::yes("Available", "Available"));
    } else {
        let why = format!(
            "TenantControlPlane version status is {:?} with {} available replica(s); ready needs Ready or Upgrading and at least one available replica",
            tcp["status"]["kubernetesResources"]["version"]["status"]
                .as_str()
                .unwrap_or("unknown"),
            state.available_replicas.unwrap_or(0)
        );
        conds.push(Cond::no(
            "KamajiControlPlaneIsReady",
            "Pending",
            why.clone(),
        ));
        conds.push(Cond::no("Available", "NotAvailable", why));
    }
    conds
}

/// How publishing the Secrets Cluster API reads (`<cluster>-kubeconfig`, `<cluster>-ca`) went.
#[derive(Clone, Debug, PartialEq)]
pub enum SecretsPublished {
    Done,
    /// Kamaji has yet to write what they are copied from: no failure.
    Waiting(String),
    /// The reconcile fails (and backs off).
    Failed(String),
}

impl SecretsPublished {
    /// `KubeadmResourcesCreated`.
    pub fn condition(&self) -> Cond {
        let c = "KubeadmResourcesCreated";
        match self {
            SecretsPublished::Done => Cond::yes(c, "Succeeded"),
            SecretsPublished::Waiting(m) => Cond::no(c, "WaitingForKamaji", m.clone()),
            SecretsPublished::Failed(m) => Cond::no(c, "Failed", m.clone()),
        }
    }
}

#[cfg(test)]
mod tests;
