//! `kubectl capi uninstall`: what `init` applied, found by its labels, removed in the reverse of
//! install order. Namespaced objects go with their namespace, so only the cluster-scoped kinds,
//! the namespaces, and the Roles and RoleBindings a component keeps in a namespace of another's
//! (cert-manager's leader election in `kube-system`) are listed and deleted.

use serde_json::Value;

use super::manifests::COMPONENT_LABEL;
use super::set::COMPONENTS;

/// The kinds `uninstall` lists by [`COMPONENT_LABEL`] (group, version, kind, plural,
/// namespaced), in delete order: webhooks first (nothing then calls a controller that is
/// going), the grants, the CRDs (their objects go with them), the namespaces last.
pub const KINDS: &[(&str, &str, &str, &str, bool)] = &[
    (
        "admissionregistration.k8s.io",
        "v1",
        "MutatingWebhookConfiguration",
        "mutatingwebhookconfigurations",
        false,
    ),
    (
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingWebhookConfiguration",
        "validatingwebhookconfigurations",
        false,
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "RoleBinding",
        "rolebindings",
        true,
    ),
    ("rbac.authorization.k8s.io", "v1", "Role", "roles", true),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRoleBinding",
        "clusterrolebindings",
        false,
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRole",
        "clusterroles",
        false,
    ),
    (
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        false,
    ),
    ("", "v1", "Namespace", "namespaces", false),
];

/// One object to delete: its kind (an index into [`KINDS`]), namespace and name, and its
/// component.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UninstallStep {
    pub kind: usize,
    pub namespace: Option<String>,
    pub name: String,
    pub component: String,
}

/// The label selector that finds what `init` applied.
pub fn selector() -> String {
    COMPONENT_LABEL.to_string()
}

/// The removals of `found` (per [`KINDS`] index, the objects listed), in order: components in
/// reverse install order, then kinds in [`KINDS`] order. Roles and RoleBindings inside a
/// namespace that is itself removed, or already `terminating`, are left to go with it.
pub fn removals(found: &[(usize, Vec<Value>)], terminating: &[String]) -> Vec<UninstallStep> {
    let ns_kind = KINDS.len() - 1;
    let removed_namespaces: Vec<&str> = found
        .iter()
        .filter(|(k, _)| *k == ns_kind)
        .flat_map(|(_, objs)| objs.iter().filter_map(|o| o["metadata"]["name"].as_str()))
        .chain(terminating.iter().map(String::as_str))
        .collect();
    let mut out: Vec<UninstallStep> = Vec::new();
    for (kind, objs) in found {
        for o in objs {
            let namespace = o["metadata"]["namespace"].as_str().map(str::to_string);
            if KINDS[*kind].4
                && namespace
                    .as_deref()
                    .is_some_and(|n| removed_namespaces.contains(&n))
            {
                continue;
            }
            out.push(UninstallStep {
                kind: *kind,
                namespace,
                name: o["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                component: o["metadata"]["labels"][COMPONENT_LABEL]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            });
        }
    }
    let order = |id: &str| {
        COMPONENTS
            .iter()
            .position(|c| c.id == id)
            .unwrap_or(usize::MAX)
    };
    out.sort_by(|a, b| {
        order(&b.component)
            .cmp(&order(&a.component))
            .then(a.kind.cmp(&b.kind))
            .then(a.name.cmp(&b.name))
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn o(ns: Option<&str>, name: &str, component: &str) -> Value {
        json!({"metadata": {"name": name, "namespace": ns, "labels": {COMPONENT_LABEL: component}}})
    }

    #[test]
    fn removals_go_in_reverse_install_order_webhooks_first_namespaces_last() {
        let found = vec![
            (
                7,
                vec![
                    o(None, "capi-system", "cluster-api"),
                    o(None, "byoh-system", "infrastructure-byoh"),
                ],
            ),
            (6, vec![o(None, "clusters.cluster.x-k8s.io", "cluster-api")]),
            (1, vec![o(None, "capi-validating", "cluster-api")]),
            (
                3,
                vec![
                    o(Some("capi-system"), "capi-leader", "cluster-api"),
                    o(
                        Some("kube-system"),
                        "cert-manager:leaderelection",
                        "cert-manager",
                    ),
                ],
            ),
        ];
        let got: Vec<(String, String)> = removals(&found, &[])
            .into_iter()
            .map(|r| (KINDS[r.kind].2.to_string(), r.name))
            .collect();
        let want = [
            ("Namespace", "byoh-system"),
            ("ValidatingWebhookConfiguration", "capi-validating"),
            ("CustomResourceDefinition", "clusters.cluster.x-k8s.io"),
            ("Namespace", "capi-system"),
            ("Role", "cert-manager:leaderelection"),
        ];
        // In a namespace already terminating, a Role goes with it.
        let going = removals(&found[3..], &["kube-system".to_string()]);
        assert_eq!(going.len(), 1, "{going:?}");
        let want: Vec<(String, String)> = want
            .iter()
            .map(|(k, n)| (k.to_string(), n.to_string()))
            .collect();
        assert_eq!(got, want);
    }
}
