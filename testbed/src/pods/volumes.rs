//! The pod's volumes, written once into its private directory when the pod starts: Secret,
//! ConfigMap, projected (of those two) and emptyDir volumes, with `items` projected as a kubelet
//! projects them; and PersistentVolumeClaim volumes, whose folder is a link to the bound
//! PersistentVolume's directory ([`super::claims`]), so the data outlives the pod.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{ConfigMap, Secret, Volume};
use kube::Client;
use kube::api::Api;

/// Writes every volume of a pod in namespace `ns` into `<vol_root>/<volume name>`.
pub(super) async fn write_all(
    client: &Client,
    ns: &str,
    vol_root: &Path,
    volumes: Vec<Volume>,
) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    for v in volumes {
        let vdir = vol_root.join(&v.name);
        if let Some(c) = &v.persistent_volume_claim {
            // A link, not a copy: a bind mount of the folder follows it to the volume, and the
            // pod's folder goes (the link with it, never what it points to) when the pod does.
            let target = super::claims::claim_dir(client, ns, &c.claim_name).await?;
            std::os::unix::fs::symlink(&target, &vdir)
                .map_err(|e| format!("{}: {e}", vdir.display()))?;
            continue;
        }
        std::fs::create_dir_all(&vdir).map_err(|e| format!("{}: {e}", vdir.display()))?;
        for (path, bytes, mode) in files(client, ns, &v).await? {
            let target = safe_join(&vdir, &path)?;
            if let Some(parent) = target.parent() {
                std::fs::create_dir_all(parent)
                    .map_err(|e| format!("{}: {e}", parent.display()))?;
            }
            crate::write_private_bytes(&target, &bytes).map_err(|e| e.to_string())?;
            // The mode a kubelet gives the file: the item's, else the volume's `defaultMode`,
            // else 0644, so that a container running as a non-root user reads its certificates.
            std::fs::set_permissions(&target, std::fs::Permissions::from_mode(mode))
                .map_err(|e| format!("{}: {e}", target.display()))?;
        }
    }
    Ok(())
}

/// The mode of a projected file when neither the item nor the volume sets one (a kubelet's
/// `SecretVolumeSourceDefaultMode`, 0644).
const DEFAULT_MODE: u32 = 0o644;

/// A file mode from the API (`int32`), its permission bits only.
fn mode_of(m: Option<i32>, default: u32) -> u32 {
    m.and_then(|m| u32::try_from(m).ok())
        .map_or(default, |m| m & 0o777)
}

/// The files of one volume: relative path, content and mode (none for an emptyDir). A source
/// marked `optional` that does not exist gives no files, as a kubelet mounts it empty.
async fn files(
    client: &Client,
    ns: &str,
    v: &Volume,
) -> Result<Vec<(String, Vec<u8>, u32)>, String> {
    let mut files = Vec::new();
    let optional = |r: Result<BTreeMap<String, Vec<u8>>, String>, opt: Option<bool>| match r {
        Err(_) if opt == Some(true) => Ok(BTreeMap::new()),
        r => r,
    };
    if let Some(s) = &v.secret {
        let mode = mode_of(s.default_mode, DEFAULT_MODE);
        let data = secret_data(client, ns, s.secret_name.as_deref().unwrap_or_default()).await;
        files.extend(project(
            &optional(data, s.optional)?,
            s.items.as_deref(),
            mode,
        ));
    } else if let Some(c) = &v.config_map {
        let mode = mode_of(c.default_mode, DEFAULT_MODE);
        let data = config_map_data(client, ns, &c.name).await;
        files.extend(project(
            &optional(data, c.optional)?,
            c.items.as_deref(),
            mode,
        ));
    } else if let Some(pr) = &v.projected {
        let mode = mode_of(pr.default_mode, DEFAULT_MODE);
        for src in pr.sources.clone().unwrap_or_default() {
            if let Some(s) = &src.secret {
                let data = optional(secret_data(client, ns, &s.name).await, s.optional)?;
                files.extend(project(&data, s.items.as_deref(), mode));
            }
            if let Some(c) = &src.config_map {
                let data = optional(config_map_data(client, ns, &c.name).await, c.optional)?;
                files.extend(project(&data, c.items.as_deref(), mode));
            }
        }
    }
    Ok(files)
}

/// Joins a relative volume path, refusing `..` and absolute paths (a kubelet refuses them too).
fn safe_join(base: &Path, rel: &str) -> Result<PathBuf, String> {
    let p = Path::new(rel);
    if p.is_absolute()
        || p.components()
            .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        return Err(format!("volume path {rel:?} leaves the volume"));
    }
    Ok(base.join(p))
}

fn project(
    data: &BTreeMap<String, Vec<u8>>,
    items: Option<&[k8s_openapi::api::core::v1::KeyToPath]>,
    mode: u32,
) -> Vec<(String, Vec<u8>, u32)> {
    match items {
        Some(items) => items
            .iter()
            .filter_map(|i| {
                data.get(&i.key)
                    .map(|b| (i.path.clone(), b.clone(), mode_of(i.mode, mode)))
            })
            .collect(),
        None => data
            .iter()
            .map(|(k, v)| (k.clone(), v.clone(), mode))
            .collect(),
    }
}

/// The object `ns/name`; an error names it by its kind, in lower case (`secret ns/name: ...`).
async fn get<K>(client: &Client, ns: &str, name: &str) -> Result<K, String>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned,
{
    Api::<K>::namespaced(client.clone(), ns)
        .get(name)
        .await
        .map_err(|e| format!("{} {ns}/{name}: {e}", K::kind(&()).to_lowercase()))
}

async fn secret_data(
    client: &Client,
    ns: &str,
    name: &str,
) -> Result<BTreeMap<String, Vec<u8>>, String> {
    let s: Secret = get(client, ns, name).await?;
    Ok(s.data
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, v.0))
        .collect())
}

async fn config_map_data(
    client: &Client,
    ns: &str,
    name: &str,
) -> Result<BTreeMap<String, Vec<u8>>, String> {
    let c: ConfigMap = get(client, ns, name).await?;
    let mut out: BTreeMap<String, Vec<u8>> = c
        .data
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, v.into_bytes()))
        .collect();
    for (k, v) in c.binary_data.unwrap_or_default() {
        out.insert(k, v.0);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn volume_paths_stay_inside() {
        assert!(safe_join(Path::new("/v"), "etcd/ca.crt").is_ok());
        assert!(safe_join(Path::new("/v"), "../x").is_err());
        assert!(safe_join(Path::new("/v"), "/etc/passwd").is_err());
    }

    #[test]
    fn modes_are_the_items_then_the_volumes_then_0644() {
        assert_eq!(mode_of(None, DEFAULT_MODE), 0o644);
        assert_eq!(mode_of(Some(0o400), DEFAULT_MODE), 0o400);
        assert_eq!(mode_of(Some(-1), 0o640), 0o640);
        assert_eq!(mode_of(Some(0o100755), DEFAULT_MODE), 0o755);
    }
}
