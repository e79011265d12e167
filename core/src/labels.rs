//! Labels of Cluster API's contract that the suite reads and writes, and the labels of our own
//! provider's objects, defined once (a leaf: the CRDs and the install manifests both read it).

/// Every object of a CAPI cluster carries its cluster's name here (`clusterv1.ClusterNameLabel`).
pub const CLUSTER_NAME_LABEL: &str = "cluster.x-k8s.io/cluster-name";

/// Control-plane Machines carry it, empty (`clusterv1.MachineControlPlaneLabel`).
pub const CONTROL_PLANE_LABEL: &str = "cluster.x-k8s.io/control-plane";

/// kamaji-reconciler's leader-election Lease: our own name, not CACPPK's `LeaderElectionID`
/// ([`CACPPK_LEASE`]), so that neither provider takes the other's Lease for its own.
pub const RECONCILER_LEASE: &str = "kamaji-reconciler.controlplane.cluster.x-k8s.io";

/// CACPPK's leader-election Lease (`LeaderElectionID` in its `main.go`, v0.11.0 to v0.20.0).
pub const CACPPK_LEASE: &str = "kamaji.controlplane.cluster.x-k8s.io";

/// A MachineSet's and Machine's MachineDeployment (`clusterv1.MachineDeploymentNameLabel`).
pub const DEPLOYMENT_NAME_LABEL: &str = "cluster.x-k8s.io/deployment-name";

/// A topology-managed MachineDeployment's name in its Cluster's topology
/// (`clusterv1.ClusterTopologyMachineDeploymentNameLabel`).
pub const TOPOLOGY_DEPLOYMENT_LABEL: &str = "topology.cluster.x-k8s.io/deployment-name";

/// An object with this annotation is left alone by CAPI's controllers and by ours
/// (`clusterv1.PausedAnnotation`); on a ByoHost it mirrors a paused Cluster or ByoMachine, and the
/// host agent skips the host.
pub const PAUSED_ANNOTATION: &str = "cluster.x-k8s.io/paused";

/// The reconciler's name: its Deployment, ServiceAccount, ClusterRole and bindings, its field
/// manager, and the value of [`OWNER_LABEL`].
pub const RECONCILER: &str = "kamaji-reconciler";
/// clusterctl's label on every object it manages (`ClusterctlLabel`, `cmd/clusterctl/api/v1alpha3/labels.go`,
/// CAPI v1.14.2). `clusterctl move` discovers the kinds to move from CRDs carrying it.
pub const CLUSTERCTL_LABEL: &str = "clusterctl.cluster.x-k8s.io";
/// CAPI's provider label (`cluster.x-k8s.io/provider`); clusterctl sets it to the provider's
/// manifest label, `control-plane-<name>`.
pub const PROVIDER_LABEL: &str = "cluster.x-k8s.io/provider";
/// Our manifest label: clusterctl's name for the control-plane provider `kamaji`.
pub const PROVIDER: &str = "control-plane-kamaji";
/// The label that tells our objects, CRDs included, from another provider's
/// (`app.kubernetes.io/name: kamaji-reconciler`).
pub const OWNER_LABEL: (&str, &str) = ("app.kubernetes.io/name", RECONCILER);

/// The Kubernetes version a BYOH host carries (its installed kubelet, `v1.35.4`), a label on
/// its ByoHost: the script `kubectl capi hosts add` prints reads `kubelet --version` on the host
/// and passes it to the agent's `--label`. BYOH itself records no version until a machine
/// claims the host; `create --preinstalled-hosts`, `scale` and `upgrade` pick hosts by it.
pub const KUBERNETES_VERSION_LABEL: &str = "capi-kamaji.io/kubernetes-version";

/// The labels every object of the reconciler's install carries, CRDs included, whoever installs
/// it (`kubectl kamaji install` or `clusterctl init`, which sets the same two clusterctl labels).
fn provider_label_pairs() -> [(&'static str, &'static str); 4] {
    [
        OWNER_LABEL,
        ("app.kubernetes.io/part-of", "kubectl-kamaji"),
        (PROVIDER_LABEL, PROVIDER),
        (CLUSTERCTL_LABEL, ""),
    ]
}

/// [`provider_label_pairs`] as an object's `metadata.labels`.
pub(crate) fn provider_labels() -> serde_json::Value {
    serde_json::Value::Object(
        provider_label_pairs()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.into()))
            .collect(),
    )
}

/// The labels of the KamajiControlPlane CRDs: the provider's labels (clusterctl's among them:
/// without it `clusterctl move` does not look for KamajiControlPlanes at all: it lists only CRDs
/// that carry it, `getCRDList` in `cmd/clusterctl/client/cluster/objectgraph.go`, CAPI v1.14.2;
/// our owner label tells our CRDs from CACPPK's) and the CAPI contract labels (clusterctl and
/// CAPI read `cluster.x-k8s.io/<contract>: <versions>`).
pub fn contract_labels() -> std::collections::BTreeMap<String, String> {
    provider_label_pairs()
        .into_iter()
        .chain([
            ("cluster.x-k8s.io/v1beta2", "v1alpha2"),
            ("cluster.x-k8s.io/v1beta1", "v1alpha1"),
        ])
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// NVIDIA Base Command Manager's KubeCluster template for a CAPI cluster (BCM 11's manual, the
/// CAPI chapter); BCM's example sets it as a label, its prose calls it an annotation, so readers
/// accept both ([`bcm_template`]).
pub(crate) const BCM_TEMPLATE_KEY: &str = "infrav1.nvidia.x-k8s.io/capi-kube-template";

/// The BCM KubeCluster template a Cluster names, as a label or an annotation.
pub fn bcm_template(obj: &serde_json::Value) -> Option<&str> {
    crate::json::label(obj, BCM_TEMPLATE_KEY)
        .or_else(|| crate::json::annotation(obj, BCM_TEMPLATE_KEY))
}

/// Parses `key=value` as a Kubernetes label (apimachinery's `IsQualifiedName` and
/// `IsValidLabelValue`): an optional DNS-subdomain prefix and `/`, a name of at most 63
/// characters of alphanumerics, `-`, `_` and `.` starting and ending alphanumeric, and a value of
/// the same form or empty.
pub fn parse_label_pair(s: &str) -> Result<(String, String), String> {
    fn name_ok(n: &str) -> bool {
        n.len() <= 63
            && n.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
            && n.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
            && n.bytes().last().is_some_and(|b| b.is_ascii_alphanumeric())
    }
    let (key, value) = s
        .split_once('=')
        .ok_or_else(|| format!("label {s:?} is not key=value"))?;
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|part| {
                !part.is_empty()
                    && part
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                    && !part.starts_with('-')
                    && !part.ends_with('-')
            })
    });
    if !prefix_ok || !name_ok(name) {
        return Err(format!(
            "label key {key:?} is not valid (an optional DNS prefix and /, then at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit)"
        ));
    }
    if !value.is_empty() && !name_ok(value) {
        return Err(format!(
            "label value {value:?} is not valid (at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit)"
        ));
    }
    Ok((key.to_string(), value.to_string()))
}

#[cfg(test)]
mod label_tests {
    use super::parse_label_pair;

    #[test]
    fn label_pairs() {
        assert_eq!(
            parse_label_pair("site=apac").unwrap(),
            ("site".to_string(), "apac".to_string())
        );
        assert!(parse_label_pair("example.com/gpu=a100").is_ok());
        assert!(parse_label_pair("empty=").is_ok());
        for bad in [
            "novalue",
            "=x",
            "a b=c",
            "k=-x",
            "Ex.com/k=v",
            &format!("k={}", "a".repeat(64)),
        ] {
            assert!(parse_label_pair(bad).is_err(), "{bad}");
        }
    }
}
