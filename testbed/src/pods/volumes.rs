//! The pod's volumes, written once into its private directory when the pod starts: Secret,
//! ConfigMap, projected (of those two) and emptyDir volumes, with `items` projected as a kubelet
//! projects them.

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
    for v in volumes {
        let vdir = vol_root.join(&v.name);
        std::fs::create_dir_all(&vdir).map_err(|e| format!("{}: {e}", vdir.display()))?;
        for (path, bytes) in files(client, ns, &v).await? {
            let target = safe_join(&vdir, &path)?;
            if let Some(parent) = target.parent() {
                std::fs::create_dir_all(parent)
                    .map_err(|e| format!("{}: {e}", parent.display()))?;
            }
            crate::write_private_bytes(&target, &bytes).map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

/// The files of one volume: relative path and content (none for an emptyDir).
async fn files(client: &Client, ns: &str, v: &Volume) -> Result<Vec<(String, Vec<u8>)>, String> {
    let mut files: Vec<(String, Vec<u8>)> = Vec::new();
    if let Some(s) = &v.secret {
        let secret = secret_data(client, ns, s.secret_name.as_deref().unwrap_or_default()).await?;
        files.extend(project(&secret, s.items.as_deref()));
    } else if let Some(c) = &v.config_map {
        let data = config_map_data(client, ns, &c.name).await?;
        files.extend(project(&data, c.items.as_deref()));
    } else if let Some(pr) = &v.projected {
        for src in pr.sources.clone().unwrap_or_default() {
            if let Some(s) = &src.secret {
                let secret = secret_data(client, ns, &s.name).await?;
                files.extend(project(&secret, s.items.as_deref()));
            }
            if let Some(c) = &src.config_map {
                let data = config_map_data(client, ns, &c.name).await?;
                files.extend(project(&data, c.items.as_deref()));
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
) -> Vec<(String, Vec<u8>)> {
    match items {
        Some(items) => items
            .iter()
            .filter_map(|i| data.get(&i.key).map(|b| (i.path.clone(), b.clone())))
            .collect(),
        None => data.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
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
}
