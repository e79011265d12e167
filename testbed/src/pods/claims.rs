//! PersistentVolumeClaim volumes, as the scheduler and the kubelet handle them for the pods of
//! the SIMULATED kubelets.
//!
//! The scheduler does not place a pod whose claim is not Bound (its `VolumeBinding` plugin: a
//! claim of an `Immediate` StorageClass is bound by the PersistentVolume controller first), and
//! says why on the pod (`PodScheduled` false, reason `Unschedulable`, "pod has unbound immediate
//! PersistentVolumeClaims"); the image kubelet, which binds its own pods here, does the same
//! ([`unschedulable`]). The kubelet then mounts the bound PersistentVolume: for a `hostPath` (or
//! `local`) volume, that directory of the node, made if missing as `DirectoryOrCreate` makes it
//! ([`claim_dir`]). Only those two kinds are mounted: the testbed's PersistentVolumes are
//! `hostPath` ones ([`crate::storage`]), and nothing here attaches a disk.
//!
//! What differs from a kubelet: a claim's `readOnly` is not enforced (a mount's own `readOnly`
//! is), and the PersistentVolume's `nodeAffinity` is not checked (there is one node).

use std::path::PathBuf;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

/// Why `pod` cannot be scheduled for its claims (one missing or not Bound), if so.
async fn unbound_claim(client: &Client, pod: &Pod) -> Option<String> {
    let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), ns);
    let volumes = pod.spec.as_ref()?.volumes.as_deref().unwrap_or_default();
    for v in volumes {
        let Some(src) = &v.persistent_volume_claim else {
            continue;
        };
        let name = &src.claim_name;
        match claims.get_opt(name).await {
            Ok(Some(c)) if phase(&c) == "Bound" => {}
            Ok(Some(c)) => {
                return Some(format!(
                    "0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims \
                     (persistentvolumeclaim {name:?} is {})",
                    phase(&c)
                ));
            }
            Ok(None) => {
                return Some(format!(
                    "0/1 nodes are available: persistentvolumeclaim {name:?} not found"
                ));
            }
            Err(e) => return Some(format!("persistentvolumeclaim {name:?}: {e}")),
        }
    }
    None
}

fn phase(c: &PersistentVolumeClaim) -> &str {
    c.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Pending")
}

/// Whether `pod` must wait for its claims; if so, says why on it (once per reason), as the
/// scheduler does.
pub(super) async fn unschedulable(client: &Client, pod: &Pod) -> bool {
    let Some(message) = unbound_claim(client, pod).await else {
        return false;
    };
    let said = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.type_ == "PodScheduled" && c.message.as_deref() == Some(message.as_str())
            })
        });
    if !said {
        let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        let status = json!({"status": {"conditions": [{
            "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
            "message": message, "lastTransitionTime": crate::meta::now(),
        }]}});
        if let Err(e) = Api::<Pod>::namespaced(client.clone(), ns)
            .patch_status(name, &PatchParams::default(), &Patch::Strategic(status))
            .await
        {
            tracing::warn!("SIMULATED scheduler: pod {ns}/{name}: {e}");
        }
    }
    true
}

/// The directory of the PersistentVolume claim `ns/claim` is bound to, made if missing.
pub(super) async fn claim_dir(client: &Client, ns: &str, claim: &str) -> Result<PathBuf, String> {
    let c = Api::<PersistentVolumeClaim>::namespaced(client.clone(), ns)
        .get(claim)
        .await
        .map_err(|e| format!("persistentvolumeclaim {ns}/{claim}: {e}"))?;
    let volume = c
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.clone())
        .filter(|_| phase(&c) == "Bound")
        .ok_or_else(|| format!("persistentvolumeclaim {ns}/{claim} is not bound"))?;
    let pv = Api::<PersistentVolume>::all(client.clone())
        .get(&volume)
        .await
        .map_err(|e| format!("persistentvolume {volume}: {e}"))?;
    let spec = pv.spec.unwrap_or_default();
    let path = spec
        .host_path
        .map(|h| h.path)
        .or(spec.local.map(|l| l.path))
        .ok_or_else(|| {
            format!(
                "persistentvolume {volume}: the SIMULATED kubelet mounts hostPath and local volumes only"
            )
        })?;
    let dir = PathBuf::from(path);
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    Ok(dir)
}
