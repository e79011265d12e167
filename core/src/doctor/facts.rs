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
