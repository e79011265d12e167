//! Storage for the image pods' claims, as a cluster's admin provides it by static provisioning:
//! a default StorageClass without a provisioner and a few PersistentVolumes made beforehand.
//!
//! A cluster without a dynamic provisioner (a CSI driver, or the kubelet-side `hostPath`
//! provisioner of a test cluster) binds claims to PersistentVolumes an admin created: the
//! StorageClass names `kubernetes.io/no-provisioner`, and the PersistentVolume controller of
//! kube-controller-manager binds each claim of that class to an Available volume that fits it
//! (`pkg/controller/volume/persistentvolume`). `Immediate` binding, so a claim is bound when it
//! is made, not when its pod is scheduled (there is no scheduler here; the image kubelet places
//! pods itself, [`crate::pods::image`]). The class is the default one
//! (`storageclass.kubernetes.io/is-default-class`), so a claim without a class gets it from
//! the API server's `DefaultStorageClass` admission, as a StatefulSet's volume claim templates
//! usually rely on.
//!
//! The volumes are `hostPath` ones: directories under the testbed's folder, each world-writable
//! as a host-path provisioner makes them (rancher's local-path-provisioner creates them `0777`),
//! so a container running as a non-root user writes into its volume. The SIMULATED kubelet
//! mounts the directory of the volume a claim is bound to ([`crate::pods`]'s `claims`). With
//! `Retain` reclaim, a volume whose claim goes keeps its data and is not bound again, as on a
//! cluster.

use std::path::{Path, PathBuf};

use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::json;

use crate::{Error, Testbed};

/// The default StorageClass.
pub const STORAGE_CLASS: &str = "testbed-local";
/// How many PersistentVolumes are made: three three-member etcds (`kubectl capi init
/// --datastore etcd` again after an uninstall that deleted the claims: a Released volume keeps
/// its data and is not bound again).
pub const VOLUMES: usize = 9;
/// Each volume's capacity (what an etcd member of `kubectl capi init --datastore etcd` asks).
pub const CAPACITY: &str = "10Gi";
/// The folder of the volumes' directories in the testbed's folder.
pub(crate) const DIR: &str = "persistent-volumes";
const MANAGER: &str = "capi-testbed";

/// The StorageClass and the PersistentVolumes, as objects to apply.
fn objects(dir: &Path) -> Vec<serde_json::Value> {
    let mut out = vec![json!({
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": STORAGE_CLASS,
                     "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
        "provisioner": "kubernetes.io/no-provisioner",
        "volumeBindingMode": "Immediate",
        "reclaimPolicy": "Retain",
    })];
    for i in 0..VOLUMES {
        out.push(json!({
            "apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": format!("{STORAGE_CLASS}-{i}"),
                         "labels": {"capi-testbed.io/volume": "static"}},
            "spec": {
                "capacity": {"storage": CAPACITY},
                "accessModes": ["ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": "Retain",
                "storageClassName": STORAGE_CLASS,
                "volumeMode": "Filesystem",
                "hostPath": {"path": volume_dir(dir, i).display().to_string(),
                             "type": "DirectoryOrCreate"},
            },
        }));
    }
    out
}

fn volume_dir(dir: &Path, i: usize) -> PathBuf {
    dir.join(DIR).join(format!("pv-{i}"))
}

/// Makes the volumes' directories and applies the StorageClass and the PersistentVolumes.
pub(crate) async fn provision(tb: &Testbed, client: &Client) -> Result<(), Error> {
    use std::os::unix::fs::PermissionsExt;
    for i in 0..VOLUMES {
        let d = volume_dir(&tb.dir, i);
        std::fs::create_dir_all(&d).map_err(|e| Error::io(&d, e))?;
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777))
            .map_err(|e| Error::io(&d, e))?;
    }
    for obj in objects(&tb.dir) {
        let (ar, name) = match obj["kind"].as_str() {
            Some("StorageClass") => (
                crate::meta::ar("storage.k8s.io", "v1", "StorageClass", "storageclasses"),
                STORAGE_CLASS.to_string(),
            ),
            _ => (
                crate::meta::ar("", "v1", "PersistentVolume", "persistentvolumes"),
                obj["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            ),
        };
        Api::<DynamicObject>::all_with(client.clone(), &ar)
            .patch(
                &name,
                &PatchParams::apply(MANAGER).force(),
                &Patch::Apply(&obj),
            )
            .await?;
    }
    tracing::info!(
        "storage: default StorageClass {STORAGE_CLASS} with {VOLUMES} hostPath PersistentVolumes of {CAPACITY}"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_class_is_the_default_and_each_volume_a_directory_of_the_testbed() {
        let objs = objects(Path::new("/tb"));
        assert_eq!(objs.len(), VOLUMES + 1);
        assert_eq!(
            objs[0]["metadata"]["annotations"]["storageclass.kubernetes.io/is-default-class"],
            "true"
        );
        assert_eq!(objs[0]["provisioner"], "kubernetes.io/no-provisioner");
        assert_eq!(objs[2]["metadata"]["name"], "testbed-local-1");
        assert_eq!(
            objs[2]["spec"]["hostPath"]["path"],
            "/tb/persistent-volumes/pv-1"
        );
        assert_eq!(objs[2]["spec"]["storageClassName"], STORAGE_CLASS);
    }
}
