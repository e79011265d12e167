//! The KamajiControlPlanes as the controller's store holds them: the metadata typed (the
//! triggers, the watches' object references and the retries read it), the rest as the compact
//! JSON text it serializes to, parsed back into a [`KamajiControlPlane`] when a reconcile starts.
//!
//! Why: the store holds every KamajiControlPlane for the life of the process, and typed, most of
//! one is its status conditions, five strings each (about 4.7 KB a KCP in a heaptrack profile at
//! 3,000 KCPs, 14 of the 24.5 MB heap). As text a KCP is its JSON size; a reconcile
//! parses one in microseconds, against the milliseconds of its API requests.

use std::borrow::Cow;

use kube::Resource;
use kube::core::{NamespaceResourceScope, ObjectMeta};
use serde::{Deserialize, Deserializer};

use crate::Error;
use crate::api::v1alpha2::KamajiControlPlane;

/// A KamajiControlPlane with all but its metadata as JSON text.
#[derive(Clone, Debug)]
pub(super) struct StoredKcp {
    metadata: ObjectMeta,
    /// The object without its metadata, as serde_json writes it.
    rest: Box<str>,
}

impl StoredKcp {
    /// Keeps `kcp` without what no reconcile reads: managedFields and kubectl's last-applied
    /// annotation (a copy of the whole object).
    pub(super) fn new(mut kcp: KamajiControlPlane) -> StoredKcp {
        let mut metadata = std::mem::take(&mut kcp.metadata);
        metadata.managed_fields = None;
        if let Some(a) = metadata.annotations.as_mut() {
            a.remove(crate::tcp::LAST_APPLIED);
        }
        // Serializing a typed object whose maps have string keys cannot fail; were it to, the
        // reconcile's parse reports it (an empty text is no KamajiControlPlane).
        let rest = serde_json::to_string(&kcp).unwrap_or_default();
        StoredKcp {
            metadata,
            rest: rest.into_boxed_str(),
        }
    }

    /// The whole KamajiControlPlane again, for one reconcile.
    pub(super) fn parse(&self) -> Result<KamajiControlPlane, Error> {
        let mut kcp: KamajiControlPlane = serde_json::from_str(&self.rest).map_err(|e| {
            Error::Other(format!(
                "KamajiControlPlane {}: the stored copy does not parse back: {e}",
                self.metadata.name.as_deref().unwrap_or_default()
            ))
        })?;
        kcp.metadata = self.metadata.clone();
        Ok(kcp)
    }
}

impl Resource for StoredKcp {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind(dt: &()) -> Cow<'_, str> {
        KamajiControlPlane::kind(dt)
    }
    fn group(dt: &()) -> Cow<'_, str> {
        KamajiControlPlane::group(dt)
    }
    fn version(dt: &()) -> Cow<'_, str> {
        KamajiControlPlane::version(dt)
    }
    fn plural(dt: &()) -> Cow<'_, str> {
        KamajiControlPlane::plural(dt)
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// As a KamajiControlPlane reads (the controller's bounds ask for it; the watch itself reads
/// typed KamajiControlPlanes and hands them to [`StoredKcp::new`]).
impl<'de> Deserialize<'de> for StoredKcp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        KamajiControlPlane::deserialize(d).map(StoredKcp::new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn kcp() -> KamajiControlPlane {
        serde_json::from_value(json!({
            "apiVersion": "controlplane.cluster.x-k8s.io/v1alpha2",
            "kind": "KamajiControlPlane",
            "metadata": {
                "name": "k", "namespace": "ns", "uid": "u1", "generation": 3,
                "labels": {"cluster.x-k8s.io/cluster-name": "c"},
                "annotations": {
                    "kubectl.kubernetes.io/last-applied-configuration": "{\"big\":true}",
                    "keep": "me"
                },
                "managedFields": [{"manager": "kubectl", "operation": "Apply"}],
                "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
                                     "name": "c", "uid": "cu", "controller": true}]
            },
            "spec": {"version": "v1.33.0", "replicas": 2,
                     "dataStoreName": "default", "network": {"serviceType": "LoadBalancer"}},
            "status": {"ready": true, "version": "v1.33.0", "conditions": [
                {"type": "Ready", "status": "True", "reason": "Ready", "message": "",
                 "lastTransitionTime": "2026-12-03T10:00:00Z", "observedGeneration": 3},
                {"type": "CertificatesExpiring", "status": "False", "reason": "NotExpiring",
                 "message": "none in 30 days", "lastTransitionTime": "2026-12-03T10:00:00Z"}
            ]}
        }))
        .unwrap()
    }

    #[test]
    fn parses_back_to_the_object_without_what_is_dropped() {
        let full = kcp();
        let stored = StoredKcp::new(full.clone());
        let back = stored.parse().unwrap();
        let mut want = full;
        want.metadata.managed_fields = None;
        want.metadata
            .annotations
            .as_mut()
            .unwrap()
            .remove(crate::tcp::LAST_APPLIED);
        assert_eq!(
            serde_json::to_value(&back).unwrap(),
            serde_json::to_value(&want).unwrap()
        );
        assert_eq!(back.metadata.annotations.unwrap().len(), 1);
        assert_eq!(back.status.unwrap().conditions.len(), 2);
    }

    #[test]
    fn deserializes_as_a_kamaji_control_plane_and_names_its_kind() {
        let v = serde_json::to_value(kcp()).unwrap();
        let stored: StoredKcp = serde_json::from_value(v).unwrap();
        assert_eq!(stored.meta().name.as_deref(), Some("k"));
        assert!(stored.meta().managed_fields.is_none());
        assert!(!stored.rest.contains("last-applied"));
        assert_eq!(
            StoredKcp::api_version(&()),
            KamajiControlPlane::api_version(&())
        );
        assert_eq!(StoredKcp::plural(&()), "kamajicontrolplanes");
    }

    #[test]
    fn a_text_that_does_not_parse_is_an_error_naming_the_object() {
        let mut stored = StoredKcp::new(kcp());
        stored.rest = "{".into();
        let e = stored.parse().unwrap_err().to_string();
        assert!(e.contains("KamajiControlPlane k"), "{e}");
    }
}
