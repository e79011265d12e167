//! SIMULATED mirror Pods of a control-plane host's static pods: what the kubelet creates in the
//! API for each manifest in `/etc/kubernetes/manifests` (`pkg/kubelet/pod/mirror_client.go`,
//! v1.36) and keeps the status of. KCP reads them for its control-plane health conditions
//! (`controlplane/kubeadm/pkg/workload_cluster_conditions.go`, CAPI v1.14:
//! `kube-system/<component>-<node>`, its phase, conditions and container states) and kubeadm
//! finds the etcd members from them.
//!
//! Each pod is named and labelled as kubeadm's manifests are (`component`, `tier:
//! control-plane`), carries the kubelet's mirror annotations (`kubernetes.io/config.mirror` and
//! `config.hash`: a hash of the command; `config.source: file`) and kubeadm's endpoint
//! annotations, is owned by its Node (as the kubelet's are since v1.23), and shows the real
//! command line the process runs. Its status is the process's: Running and Ready while it
//! lives; its container terminated (and the pod not Ready) once it died.
//!
//! What differs from the kubelet: they are written with the cluster's admin credentials (the
//! kubelet writes them as `system:node:<host>`, which NodeRestriction allows for mirror pods of
//! its own node), on request ([`super::ControlPlane::refresh_mirror_pods`]) rather than on each
//! pod sync, and a process that died is not restarted.

use std::hash::{Hash, Hasher};

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

/// The static pods of a control-plane host, in kubeadm's manifest names.
pub(super) const COMPONENTS: [&str; 4] = [
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
];

/// What one mirror pod shows.
pub(super) struct Mirror<'a> {
    pub component: &'a str,
    pub host: &'a str,
    pub image: &'a str,
    pub command: &'a [String],
    pub annotations: &'a [(String, String)],
    pub started_at: &'a str,
    /// `None` while the process runs; its exit code and when it ended once it died.
    pub exited: Option<(i32, &'a str)>,
}

pub(super) fn name(component: &str, host: &str) -> String {
    format!("{component}-{host}")
}

fn config_hash(m: &Mirror<'_>) -> String {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    m.command.hash(&mut h);
    m.image.hash(&mut h);
    format!("{:016x}", h.finish())
}

/// The requests of kubeadm's static pods (`phases/controlplane/manifests.go`,
/// `phases/etcd/local.go`).
fn requests(component: &str) -> Value {
    match component {
        "etcd" => json!({"cpu": "100m", "memory": "100Mi"}),
        "kube-apiserver" => json!({"cpu": "250m"}),
        "kube-controller-manager" => json!({"cpu": "200m"}),
        _ => json!({"cpu": "100m"}),
    }
}

/// The pod as the kubelet creates it.
fn manifest(m: &Mirror<'_>, node_uid: Option<&str>) -> Value {
    let hash = config_hash(m);
    let mut annotations = serde_json::Map::new();
    for (k, v) in [
        ("kubernetes.io/config.hash", hash.as_str()),
        ("kubernetes.io/config.mirror", hash.as_str()),
        ("kubernetes.io/config.seen", m.started_at),
        ("kubernetes.io/config.source", "file"),
    ] {
        annotations.insert(k.into(), json!(v));
    }
    for (k, v) in m.annotations {
        annotations.insert(k.clone(), json!(v));
    }
    let mut pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name(m.component, m.host), "namespace": "kube-system",
                     "labels": {"component": m.component, "tier": "control-plane"},
                     "annotations": annotations},
        "spec": {"nodeName": m.host, "hostNetwork": true, "priorityClassName": "system-node-critical",
                 "restartPolicy": "Always",
                 "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
                 "tolerations": [{"effect": "NoExecute", "operator": "Exists"}],
                 "containers": [{"name": m.component, "image": m.image, "imagePullPolicy": "IfNotPresent",
                                 "command": m.command, "resources": {"requests": requests(m.component)}}]},
    });
    if let Some(uid) = node_uid {
        pod["metadata"]["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "Node",
            "name": m.host, "uid": uid, "controller": true}]);
    }
    pod
}

/// The pod's status from its process.
fn status(m: &Mirror<'_>) -> Value {
    let ready = m.exited.is_none();
    let state = match m.exited {
        None => json!({"running": {"startedAt": m.started_at}}),
        Some((code, finished)) => json!({"terminated": {"exitCode": code,
            "reason": if code == 0 {"Completed"} else {"Error"},
            "startedAt": m.started_at, "finishedAt": finished}}),
    };
    let cond = |t: &str, ok: bool| {
        json!({"type": t, "status": if ok {"True"} else {"False"},
               "lastTransitionTime": m.started_at})
    };
    json!({"status": {
        "phase": "Running",
        "hostIP": "127.0.0.1", "hostIPs": [{"ip": "127.0.0.1"}],
        "podIP": "127.0.0.1", "podIPs": [{"ip": "127.0.0.1"}],
        "startTime": m.started_at,
        "conditions": [cond("PodReadyToStartContainers", true), cond("Initialized", true),
                       cond("Ready", ready), cond("ContainersReady", ready),
                       cond("PodScheduled", true)],
        "containerStatuses": [{"name": m.component, "image": m.image, "imageID": "",
            "containerID": format!("containerd://simulated-{}", config_hash(m)),
            "ready": ready, "started": ready, "restartCount": 0, "state": state}],
    }})
}

/// Creates the missing mirror pods and writes every one's status.
pub(super) async fn refresh(admin: &Client, mirrors: &[Mirror<'_>]) -> Result<(), String> {
    let pods: Api<Pod> = Api::namespaced(admin.clone(), "kube-system");
    let Some(host) = mirrors.first().map(|m| m.host) else {
        return Ok(());
    };
    let node_uid = Api::<Node>::all(admin.clone())
        .get_opt(host)
        .await
        .ok()
        .flatten()
        .and_then(|n| n.metadata.uid);
    for m in mirrors {
        let n = name(m.component, m.host);
        let exists = pods
            .get_opt(&n)
            .await
            .map_err(|e| format!("mirror pod {n}: {e}"))?
            .is_some();
        if !exists {
            let pod: Pod = serde_json::from_value(manifest(m, node_uid.as_deref()))
                .map_err(|e| e.to_string())?;
            match pods.create(&PostParams::default(), &pod).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(e) => return Err(format!("creating mirror pod {n}: {e}")),
            }
        }
        pods.patch_status(&n, &PatchParams::default(), &Patch::Merge(&status(m)))
            .await
            .map_err(|e| format!("mirror pod {n} status: {e}"))?;
    }
    Ok(())
}

/// Deletes the host's mirror pods at once (grace period 0, as the kubelet deletes a mirror
/// pod: no kubelet would confirm a graceful deletion), retrying for a few seconds while the API
/// does not answer; those already gone are fine.
pub(super) async fn delete(admin: &Client, host: &str) {
    let pods: Api<Pod> = Api::namespaced(admin.clone(), "kube-system");
    let now = DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::default()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    for c in COMPONENTS {
        let n = name(c, host);
        loop {
            match pods.delete(&n, &now).await {
                Ok(_) => break,
                Err(kube::Error::Api(s)) if s.code == 404 => break,
                Err(e) if std::time::Instant::now() > deadline => {
                    tracing::warn!("SIMULATED kubeadm reset: mirror pod {n}: {e}");
                    return;
                }
                Err(_) => tokio::time::sleep(std::time::Duration::from_millis(300)).await,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dead_process_shows_a_terminated_container_and_a_pod_not_ready() {
        let cmd = vec!["etcd".to_string(), "--name=a".into()];
        let ann = vec![(
            "kubeadm.kubernetes.io/etcd.advertise-client-urls".to_string(),
            "https://127.0.0.1:1".to_string(),
        )];
        let mut m = Mirror {
            component: "etcd",
            host: "a",
            image: "registry.k8s.io/etcd:3.6.8-0",
            command: &cmd,
            annotations: &ann,
            started_at: "2026-01-01T00:00:00Z",
            exited: None,
        };
        let pod = manifest(&m, Some("u"));
        assert_eq!(pod["metadata"]["name"], "etcd-a");
        assert_eq!(pod["metadata"]["labels"]["tier"], "control-plane");
        assert_eq!(
            pod["metadata"]["annotations"]["kubeadm.kubernetes.io/etcd.advertise-client-urls"],
            "https://127.0.0.1:1"
        );
        assert_eq!(pod["metadata"]["ownerReferences"][0]["kind"], "Node");
        let s = status(&m);
        assert_eq!(s["status"]["conditions"][2]["status"], "True");
        m.exited = Some((2, "2026-01-01T00:01:00Z"));
        let s = status(&m);
        assert_eq!(s["status"]["conditions"][2]["status"], "False");
        assert_eq!(
            s["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"],
            2
        );
    }
}
