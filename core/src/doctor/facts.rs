//! The fleet-sized kinds as the checks read them: a few fields cut from each object as its LIST
//! page arrives. A pruned object is still a tree of maps (each at least one B-tree leaf, 632
//! bytes, however few its keys: heaptrack of doctor at 5,000 hosts and 5,000 machines put 97 of
//! 104 MB of heap there); these are a few strings each.

use serde_json::Value;

use crate::fields;
use crate::json::{self, str_at};

/// A Machine as the checks read it (either CAPI contract).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MachineFacts {
    pub namespace: String,
    pub name: String,
    /// `spec.clusterName`, else the cluster-name label.
    pub cluster: Option<String>,
    /// Carries Cluster API's control-plane label.
    pub control_plane: bool,
    /// `spec.version`.
    pub version: Option<String>,
    /// `status.phase` (none: not reported yet, which CAPI shows as Pending).
    pub phase: Option<String>,
    /// Unix seconds of `metadata.creationTimestamp`.
    pub created_unix: Option<i64>,
    /// Unix seconds of `metadata.deletionTimestamp`.
    pub deleting_unix: Option<i64>,
    /// The Ready condition's message (else its reason) while it is not True.
    pub not_ready: Option<String>,
    /// Its infrastructure is a BYOH ByoMachine.
    pub byoh: bool,
    /// The host named by a `byoh://<host>/<id>` `spec.providerID`.
    pub provider_host: Option<String>,
    /// Its Node stopped reporting ([`fields::node_silence`]).
    pub node_silent: Option<fields::NodeSilence>,
}

fn unix_at(obj: &Value, path: &[&str]) -> Option<i64> {
    let t: jiff::Timestamp = str_at(obj, path)?.parse().ok()?;
    Some(t.as_second())
}

impl MachineFacts {
    /// The facts of one Machine as the server sent it.
    pub(crate) fn of(m: &Value) -> MachineFacts {
        let s = |v: Option<&str>| v.map(str::to_string);
        MachineFacts {
            namespace: json::namespace(m).to_string(),
            name: json::name(m).to_string(),
            cluster: s(str_at(m, &["spec", "clusterName"])
                .or_else(|| json::label(m, crate::labels::CLUSTER_NAME_LABEL))),
            control_plane: json::label(m, crate::labels::CONTROL_PLANE_LABEL).is_some(),
            version: s(str_at(m, &["spec", "version"])),
            phase: s(str_at(m, &["status", "phase"])),
            created_unix: unix_at(m, &["metadata", "creationTimestamp"]),
            deleting_unix: unix_at(m, &["metadata", "deletionTimestamp"]),
            not_ready: fields::condition(m, "Ready")
                .filter(|r| !r.is_true())
                .and_then(|r| r.message.or(r.reason)),
            byoh: fields::machine_infrastructure_ref(m).is_some_and(|r| r.kind == "ByoMachine"),
            provider_host: s(str_at(m, &["spec", "providerID"])
                .and_then(crate::plan::hosts::host_from_provider_id)),
            node_silent: fields::node_silence(m),
        }
    }
}

/// The reasons of the Warning Events BYOH v0.5.0's host agent records when it fails to install
/// or bootstrap its host (`HostReconciler.reconcileNormal` and `executeInstallerController`,
/// `agent/reconciler/host_reconciler.go`): each failure returns its error, so controller-runtime
/// runs the reconcile again with back-off, and after a failed bootstrap the agent resets the
/// node (`kubeadm reset`) and tries again, forever.
pub(crate) const HOST_FAILURE_EVENTS: [&str; 3] = [
    "BootstrapK8sNodeFailed",
    "InstallScriptExecutionFailed",
    "CleanK8sDirectoriesFailed",
];

/// A Warning Event about a ByoHost whose reason is one of [`HOST_FAILURE_EVENTS`], as the
/// checks read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostEvent {
    /// The host's namespace and name (the Event's `involvedObject`).
    pub namespace: String,
    pub host: String,
    pub reason: String,
    pub message: String,
    /// How many times it happened: client-go's recorder counts a repeat of the same Event in
    /// the one object (`count`; `series.count` for an `events.k8s.io` Event).
    pub count: u64,
    /// Unix seconds of the first and the last time.
    pub first_unix: Option<i64>,
    pub last_unix: Option<i64>,
}

impl HostEvent {
    /// The facts of one Event as the server sent it; `None` for any other Event.
    pub(crate) fn of(event: &Value) -> Option<HostEvent> {
        let reason = str_at(event, &["reason"])?;
        if str_at(event, &["involvedObject", "kind"]) != Some("ByoHost")
            || str_at(event, &["type"]) != Some("Warning")
            || !HOST_FAILURE_EVENTS.contains(&reason)
        {
            return None;
        }
        let count = json::at(event, &["count"])
            .or_else(|| json::at(event, &["series", "count"]))
            .and_then(Value::as_u64)
            .unwrap_or(1)
            .max(1);
        let first_unix = unix_at(event, &["firstTimestamp"])
            .or_else(|| unix_at(event, &["eventTime"]))
            .or_else(|| unix_at(event, &["metadata", "creationTimestamp"]));
        let last_unix = unix_at(event, &["series", "lastObservedTime"])
            .or_else(|| unix_at(event, &["lastTimestamp"]))
            .or_else(|| unix_at(event, &["eventTime"]))
            .or(first_unix);
        Some(HostEvent {
            namespace: str_at(event, &["involvedObject", "namespace"])
                .unwrap_or_else(|| json::namespace(event))
                .to_string(),
            host: str_at(event, &["involvedObject", "name"])?.to_string(),
            reason: reason.to_string(),
            message: str_at(event, &["message"]).unwrap_or("").trim().to_string(),
            count,
            first_unix,
            last_unix,
        })
    }
}

/// An object's `(namespace, name)`: how [`super::Fleet`] holds ByoMachines.
pub(crate) fn object_key(obj: &Value) -> (String, String) {
    (
        json::namespace(obj).to_string(),
        json::name(obj).to_string(),
    )
}

/// The `(namespace, cluster)` a Secret's cluster-name label names (metadata is enough): how
/// [`super::Fleet`] counts Cluster API's Secrets.
pub(crate) fn secret_cluster(secret: &Value) -> Option<(String, String)> {
    let cluster = json::label(secret, crate::labels::CLUSTER_NAME_LABEL)?;
    Some((json::namespace(secret).to_string(), cluster.to_string()))
}
