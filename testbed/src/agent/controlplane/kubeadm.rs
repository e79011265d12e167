//! What a SIMULATED `kubeadm init` and `kubeadm join --control-plane` write through the API,
//! as kubeadm v1.36's phases do (`cmd/kubeadm/app/phases/…`), server-side applied with field
//! manager `kubeadm` so a second run changes nothing:
//! - `upload-config` (`uploadconfig/uploadconfig.go`): `kube-system/kubeadm-config` with the
//!   ClusterConfiguration (KCP reads and rewrites it), and the Role and RoleBinding
//!   `kubeadm:nodes-kubeadm-config` letting nodes and bootstrap tokens read it; the kubelet's
//!   part (`kubelet/config.go`): `kube-system/kubelet-config` and `kubeadm:kubelet-config`;
//! - `mark-control-plane` (`markcontrolplane/markcontrolplane.go`): the Node's labels
//!   `node-role.kubernetes.io/control-plane` and
//!   `node.kubernetes.io/exclude-from-external-load-balancers`, and its taints (the
//!   InitConfiguration's, else `node-role.kubernetes.io/control-plane:NoSchedule`), added to
//!   what it has;
//! - `bootstrap-token` (`bootstraptoken/node/*.go`, `bootstraptoken/clusterinfo/`): the
//!   InitConfiguration's tokens as `bootstrap.kubernetes.io/token` Secrets, the bindings that
//!   let bootstrap tokens post node CSRs (`kubeadm:kubelet-bootstrap`) and have them approved
//!   (`kubeadm:node-autoapprove-bootstrap`, `kubeadm:node-autoapprove-certificate-rotation`),
//!   `kubeadm:get-nodes`, and `kube-public/cluster-info` (a kubeconfig of the endpoint and the
//!   CA) readable by `system:anonymous`;
//! - the `kubeadm:cluster-admins` binding to `cluster-admin` (`EnsureAdminClusterRoleBinding`).
//!
//! What differs: without `bootstrapTokens` in the InitConfiguration no random token is made
//! (CAPI's bootstrap provider creates the tokens its joins use); `upload-certs` and the
//! `addon` phases (CoreDNS, kube-proxy) are not run: their pods could not run on a SIMULATED
//! kubelet, and KCP leaves both alone when they are absent.

use base64::Engine;
use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

use super::config::{self, Cluster, Local};

const MANAGER: &str = "kubeadm";
const BOOTSTRAP_GROUP: &str = "system:bootstrappers:kubeadm:default-node-token";
const NODES_GROUP: &str = "system:nodes";
const CONTROL_PLANE_ROLE: &str = "node-role.kubernetes.io/control-plane";
const EXCLUDE_LB: &str = "node.kubernetes.io/exclude-from-external-load-balancers";

async fn apply(admin: &Client, obj: Value) -> Result<(), String> {
    let what = format!(
        "{} {}",
        obj["kind"].as_str().unwrap_or_default(),
        obj["metadata"]["name"].as_str().unwrap_or_default()
    );
    crate::meta::apply_value(admin, &obj, MANAGER)
        .await
        .map_err(|e| format!("[kubeadm] {what}: {e}"))
}

fn group(name: &str) -> Value {
    json!({"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": name})
}

/// A Role letting `subjects` get one ConfigMap, and its RoleBinding, both named `name`.
async fn configmap_reader(
    admin: &Client,
    ns: &str,
    name: &str,
    configmap: &str,
    subjects: Vec<Value>,
) -> Result<(), String> {
    apply(
        admin,
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": name, "namespace": ns},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"],
                   "resourceNames": [configmap]}]}),
    )
    .await?;
    apply(
        admin,
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": name, "namespace": ns},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": subjects}),
    )
    .await
}

fn cluster_role_binding(name: &str, role: &str, subject: Value) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [subject]})
}

/// `upload-config`: kubeadm-config and kubelet-config, and who may read them.
pub(super) async fn upload_config(
    admin: &Client,
    c: &Cluster,
    local: &Local,
    version: &str,
) -> Result<(), String> {
    apply(
        admin,
        json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "kubeadm-config", "namespace": "kube-system"},
        "data": {"ClusterConfiguration": config::upload_text(c, version)?}}),
    )
    .await?;
    configmap_reader(
        admin,
        "kube-system",
        "kubeadm:nodes-kubeadm-config",
        "kubeadm-config",
        vec![group(BOOTSTRAP_GROUP), group(NODES_GROUP)],
    )
    .await?;
    apply(
        admin,
        json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "kubelet-config", "namespace": "kube-system"},
        "data": {"kubelet": config::kubelet_configuration(c, local.kubelet.as_ref())?}}),
    )
    .await?;
    configmap_reader(
        admin,
        "kube-system",
        "kubeadm:kubelet-config",
        "kubelet-config",
        vec![group(NODES_GROUP), group(BOOTSTRAP_GROUP)],
    )
    .await?;
    apply(
        admin,
        cluster_role_binding(
            "kubeadm:cluster-admins",
            "cluster-admin",
            group("kubeadm:cluster-admins"),
        ),
    )
    .await
}

/// `mark-control-plane` on Node `host` (which must exist).
pub(super) async fn mark_control_plane(
    admin: &Client,
    host: &str,
    taints: Option<&Value>,
) -> Result<(), String> {
    let want: Vec<Value> = match taints {
        Some(Value::Array(t)) => t.clone(),
        _ => vec![json!({"key": CONTROL_PLANE_ROLE, "effect": "NoSchedule"})],
    };
    let nodes: Api<Node> = Api::all(admin.clone());
    let mut last = String::new();
    for _ in 0..10 {
        let node = nodes
            .get(host)
            .await
            .map_err(|e| format!("[mark-control-plane] Node {host}: {e}"))?;
        let mut all: Vec<Value> = node
            .spec
            .as_ref()
            .and_then(|s| s.taints.as_ref())
            .map(|t| {
                t.iter()
                    .filter_map(|x| serde_json::to_value(x).ok())
                    .collect()
            })
            .unwrap_or_default();
        for t in &want {
            let same = |x: &Value| x["key"] == t["key"] && x["effect"] == t["effect"];
            if !all.iter().any(same) {
                all.push(t.clone());
            }
        }
        let patch = json!({
            "metadata": {"resourceVersion": node.metadata.resource_version,
                         "labels": {CONTROL_PLANE_ROLE: "", EXCLUDE_LB: ""}},
            "spec": {"taints": all},
        });
        match nodes
            .patch(host, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(s)) if s.code == 409 => last = s.message,
            Err(e) => return Err(format!("[mark-control-plane] Node {host}: {e}")),
        }
    }
    Err(format!("[mark-control-plane] Node {host}: {last}"))
}

/// A `bootstrap.kubernetes.io/token` Secret for one of the InitConfiguration's
/// `bootstrapTokens`, as kubeadm's `bootstraptoken/node/token.go` writes it.
fn token_secret(t: &Value) -> Option<Value> {
    let (id, secret) = t["token"].as_str()?.split_once('.')?;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s.as_bytes());
    let mut data = serde_json::Map::new();
    data.insert("token-id".into(), json!(b64(id)));
    data.insert("token-secret".into(), json!(b64(secret)));
    let usages: Vec<String> = t["usages"]
        .as_array()
        .map(|u| {
            u.iter()
                .filter_map(|x| x.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_else(|| vec!["signing".into(), "authentication".into()]);
    for u in usages {
        data.insert(format!("usage-bootstrap-{u}"), json!(b64("true")));
    }
    let groups: Vec<&str> = t["groups"]
        .as_array()
        .map(|g| g.iter().filter_map(Value::as_str).collect())
        .unwrap_or_else(|| vec![BOOTSTRAP_GROUP]);
    data.insert("auth-extra-groups".into(), json!(b64(&groups.join(","))));
    if let Some(d) = t["description"].as_str() {
        data.insert("description".into(), json!(b64(d)));
    }
    let expires = t["expires"].as_str().map(String::from).or_else(|| {
        let ttl = t["ttl"].as_str().unwrap_or("24h0m0s");
        let d: jiff::SignedDuration = ttl.parse().ok()?;
        if d.is_zero() {
            return None;
        }
        let at = jiff::Timestamp::now().checked_add(d).ok()?;
        Some(at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
    });
    if let Some(e) = expires {
        data.insert("expiration".into(), json!(b64(&e)));
    }
    Some(
        json!({"apiVersion": "v1", "kind": "Secret", "type": "bootstrap.kubernetes.io/token",
        "metadata": {"name": format!("bootstrap-token-{id}"), "namespace": "kube-system"},
        "data": data}),
    )
}

/// The `cluster-info` kubeconfig: the endpoint and the CA, no user (clientcmd's form).
pub(super) fn cluster_info(endpoint: &str, ca_pem: &str) -> String {
    format!(
        "apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: {}\n    server: https://{endpoint}\n  name: \"\"\ncontexts: null\ncurrent-context: \"\"\nkind: Config\npreferences: {{}}\nusers: null\n",
        base64::engine::general_purpose::STANDARD.encode(ca_pem.as_bytes())
    )
}

/// `bootstrap-token`: the tokens, their RBAC and cluster-info.
pub(super) async fn bootstrap_token(
    admin: &Client,
    endpoint: &str,
    ca_pem: &str,
    tokens: &[Value],
) -> Result<(), String> {
    for t in tokens {
        let secret = token_secret(t).ok_or_else(|| {
            format!("[bootstrap-token] not a token of the form [a-z0-9]{{6}}.[a-z0-9]{{16}}: {t}")
        })?;
        apply(admin, secret).await?;
    }
    let bootstrap = group(BOOTSTRAP_GROUP);
    for crb in [
        cluster_role_binding(
            "kubeadm:kubelet-bootstrap",
            "system:node-bootstrapper",
            bootstrap.clone(),
        ),
        cluster_role_binding(
            "kubeadm:node-autoapprove-bootstrap",
            "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
            bootstrap.clone(),
        ),
        cluster_role_binding(
            "kubeadm:node-autoapprove-certificate-rotation",
            "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
            group(NODES_GROUP),
        ),
    ] {
        apply(admin, crb).await?;
    }
    apply(
        admin,
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "kubeadm:get-nodes"},
        "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]}),
    )
    .await?;
    apply(
        admin,
        cluster_role_binding("kubeadm:get-nodes", "kubeadm:get-nodes", bootstrap),
    )
    .await?;
    apply(
        admin,
        json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "cluster-info", "namespace": "kube-public"},
        "data": {"kubeconfig": cluster_info(endpoint, ca_pem)}}),
    )
    .await?;
    configmap_reader(
        admin,
        "kube-public",
        "kubeadm:bootstrap-signer-clusterinfo",
        "cluster-info",
        vec![
            json!({"kind": "User", "apiGroup": "rbac.authorization.k8s.io",
                    "name": "system:anonymous"}),
        ],
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_init_token_becomes_a_bootstrap_token_secret() {
        let s =
            token_secret(&json!({"token": "abcdef.0123456789abcdef", "ttl": "1h0m0s"})).unwrap();
        assert_eq!(s["metadata"]["name"], "bootstrap-token-abcdef");
        assert_eq!(s["type"], "bootstrap.kubernetes.io/token");
        let d = |k: &str| {
            String::from_utf8(
                base64::engine::general_purpose::STANDARD
                    .decode(s["data"][k].as_str().unwrap())
                    .unwrap(),
            )
            .unwrap()
        };
        assert_eq!(d("token-secret"), "0123456789abcdef");
        assert_eq!(d("usage-bootstrap-authentication"), "true");
        assert_eq!(d("auth-extra-groups"), BOOTSTRAP_GROUP);
        assert!(s["data"].get("expiration").is_some());
        assert!(token_secret(&json!({"token": "nodot"})).is_none());
    }
}
