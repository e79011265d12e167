//! What `kubectl kamaji install` applies: the CRDs (the KamajiControlPlane API's, `kamaji::crd`,
//! and our own `ops` API's), RBAC and a hardened Deployment; and, in [`provider`], the same
//! objects as clusterctl's release assets. It sits above both `kamaji` and `ops`, whose CRDs it
//! puts together.

pub mod provider;

use serde_json::{Value, json};

use crate::kamaji::endpoint::Action;
use crate::kamaji::infra::TABLE;
use crate::labels::{OWNER_LABEL, RECONCILER as NAME, provider_labels as labels};

/// The image of this very version (the crates share the workspace version), never `:latest`:
/// an install is reproducible and `kubectl kamaji install` of a newer plugin upgrades it.
pub const DEFAULT_IMAGE: &str = concat!(
    "ghcr.io/capi-kamaji/kamaji-reconciler:v",
    env!("CARGO_PKG_VERSION")
);
/// The default namespace. Not `kamaji-system`: that is where Kamaji itself and CACPPK
/// (`config/default/kustomization.yaml`, CACPPK v0.20.0) live, and two providers of the same
/// kind in one namespace would share names and a Lease.
pub const DEFAULT_NAMESPACE: &str = "kamaji-reconciler-system";
/// CAPI's kubeadm bootstrap controller, which reads KamajiControlPlanes (CAPI v1.14).
pub(crate) const KUBEADM_BOOTSTRAP_SA: (&str, &str) = (
    "capi-kubeadm-bootstrap-system",
    "capi-kubeadm-bootstrap-manager",
);

fn plural(kind: &str) -> String {
    format!("{}s", kind.to_lowercase())
}

fn capi_aggregated_labels() -> Value {
    let mut l = labels();
    l["cluster.x-k8s.io/aggregate-to-manager"] = json!("true");
    l
}

/// The user name of CAPI's kubeadm bootstrap controller's service account.
pub(crate) fn kubeadm_bootstrap_user() -> String {
    format!(
        "system:serviceaccount:{}:{}",
        KUBEADM_BOOTSTRAP_SA.0, KUBEADM_BOOTSTRAP_SA.1
    )
}

/// The least-privilege ClusterRole of the reconciler.
pub fn cluster_role() -> Value {
    let infra: Vec<String> = TABLE.iter().map(|(k, _)| plural(k)).collect();
    // Machine templates of the same providers: a ClusterUpgrade step clones one when it names
    // the old version (templates are immutable), with a server-side apply.
    let machine_templates: Vec<String> = TABLE
        .iter()
        .filter_map(|(k, _)| k.strip_suffix("Cluster"))
        .map(|p| plural(&format!("{p}MachineTemplate")))
        .collect();
    let infra_status: Vec<String> = TABLE
        .iter()
        .filter(|(_, a)| *a == Action::EndpointAndReady)
        .map(|(k, _)| format!("{}/status", plural(k)))
        .collect();
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": NAME, "labels": labels()},
        // Exactly what the controllers call. plugins/reconciler/tests/rbac.rs runs the
        // reconciler as this service account through a KamajiControlPlane's create, upgrade
        // and delete, a ClusterUpgrade of a KubeadmControlPlane cluster on BYOH, a
        // FleetUpgrade, a ClusterClass cluster's upgrade and a missing Cluster's repeated
        // warning, and fails on any refusal. The KamajiControlPlane controller lists, watches
        // and patches (finalizers, status); the TenantControlPlane and the Secrets are
        // server-side applied, and an apply that creates is authorized as `create`
        // (`createAuthorizerAttributes` in apiserver's endpoints/handlers/patch.go, Kubernetes
        // v1.36.3). Kubernetes RBAC cannot scope list/watch by label, so Secrets stay
        // cluster-wide for watching (CAPI's contract names Secrets by cluster, not by label).
        // Events: kube-runtime 5.0.0's Recorder creates an event and patches its series when
        // the same one repeats. Kept without a test of their own kind: the machine templates
        // and infrastructure clusters of providers other than BYOH (the testbed serves only
        // BYOH's; each follows the same rule as BYOH's, from the provider table).
        "rules": [
            {"apiGroups": ["controlplane.cluster.x-k8s.io"], "resources": ["kamajicontrolplanes"], "verbs": ["get", "list", "watch", "patch"]},
            {"apiGroups": ["controlplane.cluster.x-k8s.io"], "resources": ["kamajicontrolplanes/status"], "verbs": ["patch"]},
            {"apiGroups": ["controlplane.cluster.x-k8s.io"], "resources": ["kamajicontrolplanes/finalizers"], "verbs": ["update"]},
            {"apiGroups": ["kamaji.clastix.io"], "resources": ["tenantcontrolplanes"], "verbs": ["get", "list", "watch", "create", "patch"]},
            {"apiGroups": ["cluster.x-k8s.io"], "resources": ["clusters"], "verbs": ["get", "list", "watch", "patch"]},
            // The ClusterUpgrade controller: its own objects, and what a step reads and patches
            // (a control plane's or MachineDeployment's version, a topology's version).
            // A FleetUpgrade creates its clusters' ClusterUpgrades (renewing a finished one).
            {"apiGroups": ["ops.capi-kamaji.io"], "resources": ["clusterupgrades"], "verbs": ["get", "list", "watch", "create", "patch"]},
            {"apiGroups": ["ops.capi-kamaji.io"], "resources": ["clusterupgrades/status"], "verbs": ["patch"]},
            {"apiGroups": ["ops.capi-kamaji.io"], "resources": ["fleetupgrades"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["ops.capi-kamaji.io"], "resources": ["fleetupgrades/status"], "verbs": ["patch"]},
            {"apiGroups": ["cluster.x-k8s.io"], "resources": ["machinedeployments"], "verbs": ["list", "watch", "patch"]},
            {"apiGroups": ["cluster.x-k8s.io"], "resources": ["machines"], "verbs": ["list"]},
            {"apiGroups": ["controlplane.cluster.x-k8s.io"], "resources": ["kubeadmcontrolplanes"], "verbs": ["get", "list", "watch", "patch"]},
            {"apiGroups": ["infrastructure.cluster.x-k8s.io"], "resources": machine_templates, "verbs": ["get", "create", "patch"]},
            {"apiGroups": ["infrastructure.cluster.x-k8s.io"], "resources": ["byohosts"], "verbs": ["list"]},
            // The findings scan (plugins/reconciler/src/findings.rs) lists what `kubectl capi
            // doctor` reads (the kinds above, and BYOH's machines and templates), and the two
            // providers' Leases by name, in every namespace (RBAC authorizes a LIST with the
            // field selector metadata.name=X as a request for X: `requestinfo.go` of
            // k8s.io/apiserver, Kubernetes v1.36.3).
            {"apiGroups": ["infrastructure.cluster.x-k8s.io"], "resources": ["byomachines", "byomachinetemplates", "k8sinstallerconfigtemplates"], "verbs": ["list"]},
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": [crate::labels::RECONCILER_LEASE, crate::labels::CACPPK_LEASE], "verbs": ["list"]},
            {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list", "watch", "create", "patch"]},
            {"apiGroups": ["infrastructure.cluster.x-k8s.io"], "resources": infra, "verbs": ["get", "list", "watch", "patch"]},
            {"apiGroups": ["infrastructure.cluster.x-k8s.io"], "resources": infra_status, "verbs": ["patch"]},
            {"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"], "resourceNames": ["tenantcontrolplanes.kamaji.clastix.io"], "verbs": ["get"]},
            {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]}
        ]
    })
}

/// Every object `kubectl kamaji install` applies, in apply order.
pub fn install_manifests(image: &str, namespace: &str, replicas: u8) -> Vec<Value> {
    let mut out: Vec<Value> = crate::kamaji::crd::crds()
        .into_iter()
        .chain(crate::ops::crds())
        .map(|c| {
            let mut v = serde_json::to_value(&c).unwrap_or(Value::Null);
            v["apiVersion"] = json!("apiextensions.k8s.io/v1");
            v["kind"] = json!("CustomResourceDefinition");
            v
        })
        .collect();
    let sa_ref = json!({"kind": "ServiceAccount", "name": NAME, "namespace": namespace});
    out.push(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace, "labels": labels()}}));
    out.push(json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": NAME, "namespace": namespace, "labels": labels()}}));
    out.push(cluster_role());
    out.push(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": NAME, "labels": labels()},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": NAME},
        "subjects": [sa_ref.clone()]
    }));
    // Leader election, in the reconciler's own namespace only.
    out.push(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": format!("{NAME}-leader-election"), "namespace": namespace, "labels": labels()},
        "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "create", "update"]}]
    }));
    out.push(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": format!("{NAME}-leader-election"), "namespace": namespace, "labels": labels()},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": format!("{NAME}-leader-election")},
        "subjects": [sa_ref]
    }));
    // CAPI core aggregates roles with this label into its manager role; the kubeadm bootstrap
    // controller of CAPI v1.14 reads KamajiControlPlanes too and gets an explicit binding.
    out.push(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": format!("{NAME}-capi"), "labels": capi_aggregated_labels()},
        "rules": [
            {"apiGroups": ["controlplane.cluster.x-k8s.io"], "resources": ["kamajicontrolplanes", "kamajicontrolplanetemplates"], "verbs": ["get", "list", "watch", "patch", "update"]},
            {"apiGroups": ["controlplane.cluster.x-k8s.io"], "resources": ["kamajicontrolplanes/status"], "verbs": ["get", "patch", "update"]}
        ]
    }));
    out.push(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": format!("{NAME}-kubeadm-bootstrap-reader"), "labels": labels()},
        "rules": [{"apiGroups": ["controlplane.cluster.x-k8s.io"], "resources": ["kamajicontrolplanes"], "verbs": ["get", "list", "watch"]}]
    }));
    out.push(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": format!("{NAME}-kubeadm-bootstrap-reader"), "labels": labels()},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": format!("{NAME}-kubeadm-bootstrap-reader")},
        // The service account as its user name, not a ServiceAccount subject: clusterctl moves
        // every namespaced subject of a binding into the provider's target namespace
        // (`fixTargetNamespace`, `cmd/clusterctl/client/repository/components.go`, CAPI
        // v1.14.2), which would bind a ServiceAccount of ours instead of CAPI's.
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": kubeadm_bootstrap_user()}]
    }));
    out.push(deployment(image, namespace, replicas));
    out
}

/// What `kubectl kamaji uninstall` deletes, in delete order (the Deployment first, the CRDs
/// last; deleting the CRDs deletes every KamajiControlPlane, so the verb must refuse while any
/// exists unless forced). Objects are the same as [`install_manifests`], reversed.
pub fn uninstall_manifests(namespace: &str) -> Vec<Value> {
    let mut v = install_manifests(DEFAULT_IMAGE, namespace, 1);
    v.reverse();
    v
}

/// The hardened Deployment: non-root, read-only root filesystem, no capabilities, limits.
pub fn deployment(image: &str, namespace: &str, replicas: u8) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": NAME, "namespace": namespace, "labels": labels()},
        "spec": {
            // More than one: one replica leads on the Lease, the others stand by, Ready.
            "replicas": replicas,
            "selector": {"matchLabels": {"app.kubernetes.io/name": NAME}},
            "template": {
                "metadata": {"labels": {OWNER_LABEL.0: OWNER_LABEL.1}},
                "spec": {
                    "serviceAccountName": NAME,
                    "automountServiceAccountToken": true,
                    "securityContext": {"runAsNonRoot": true, "runAsUser": 65532, "runAsGroup": 65532, "seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [{
                        "name": "reconciler",
                        "image": image,
                        // The Lease's namespace comes from the downward API, not from an
                        // argument: clusterctl init --target-namespace moves the Deployment
                        // but does not rewrite arguments.
                        "args": ["--leader-elect", "--metrics-bind-address=:8080"],
                        "env": [
                            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                            {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}
                        ],
                        "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
                        "livenessProbe": {"httpGet": {"path": "/healthz", "port": "http"}, "initialDelaySeconds": 5, "periodSeconds": 20},
                        "readinessProbe": {"httpGet": {"path": "/readyz", "port": "http"}, "periodSeconds": 10},
                        "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"cpu": "500m", "memory": "128Mi"}},
                        "securityContext": {
                            "allowPrivilegeEscalation": false,
                            "readOnlyRootFilesystem": true,
                            "runAsNonRoot": true,
                            "capabilities": {"drop": ["ALL"]}
                        }
                    }]
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::labels::{CLUSTERCTL_LABEL, PROVIDER, PROVIDER_LABEL};

    #[test]
    fn manifests_are_hardened_and_least_privilege() {
        let m = install_manifests("img:1", "ns1", 1);
        let kinds: Vec<&str> = m.iter().filter_map(|o| o["kind"].as_str()).collect();
        assert_eq!(
            kinds
                .iter()
                .filter(|k| **k == "CustomResourceDefinition")
                .count(),
            4
        );
        let dep = m.iter().find(|o| o["kind"] == "Deployment").unwrap();
        let c = &dep["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(c["image"], "img:1");
        assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
        assert_eq!(
            dep["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"],
            true
        );
        assert!(c["resources"]["limits"]["memory"].is_string());
        let role = cluster_role();
        for r in role["rules"].as_array().unwrap() {
            for v in r["verbs"].as_array().unwrap() {
                assert_ne!(v, "*");
            }
            assert!(!r["resources"].as_array().unwrap().iter().any(|x| x == "*"));
        }
        let reader = m
            .iter()
            .find(|o| {
                o["metadata"]["name"] == "kamaji-reconciler-kubeadm-bootstrap-reader"
                    && o["kind"] == "ClusterRoleBinding"
            })
            .unwrap();
        assert_eq!(
            reader["subjects"][0]["name"],
            "system:serviceaccount:capi-kubeadm-bootstrap-system:capi-kubeadm-bootstrap-manager"
        );
        assert!(reader["subjects"][0].get("namespace").is_none());
    }

    #[test]
    fn every_object_carries_the_clusterctl_and_provider_labels() {
        for o in install_manifests(DEFAULT_IMAGE, DEFAULT_NAMESPACE, 1) {
            let l = &o["metadata"]["labels"];
            assert_eq!(l[CLUSTERCTL_LABEL], "", "{}", o["metadata"]["name"]);
            assert_eq!(l[PROVIDER_LABEL], PROVIDER, "{}", o["metadata"]["name"]);
            assert_eq!(l[OWNER_LABEL.0], OWNER_LABEL.1, "{}", o["metadata"]["name"]);
        }
    }

    #[test]
    fn the_default_image_is_this_version_and_the_namespace_is_not_cacppks() {
        assert!(!DEFAULT_IMAGE.ends_with(":latest"));
        assert_eq!(
            DEFAULT_IMAGE.rsplit_once(':').map(|(_, t)| t.to_string()),
            Some(format!("v{}", env!("CARGO_PKG_VERSION")))
        );
        assert_ne!(DEFAULT_NAMESPACE, "kamaji-system");
        let dep = deployment("i", "ns1", 3);
        assert_eq!(dep["spec"]["replicas"], 3);
        let c = &dep["spec"]["template"]["spec"]["containers"][0];
        assert!(
            !c["args"].to_string().contains("ns1"),
            "the namespace must come from the downward API: {}",
            c["args"]
        );
        assert!(
            c["env"]
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e["name"] == "POD_NAMESPACE"
                    && e["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace")
        );
    }
}
