//! Where a TenantBackup's files go: an S3-compatible bucket ([`super::s3`]) or a directory on a
//! PersistentVolumeClaim mounted into the reconciler's pod (`--backup-volume CLAIM=DIR`). A file
//! appears whole or not at all: S3 completes an upload only at its end; on a claim, a temporary
//! file of mode 0600 (it holds the tenant's keys and CA) is renamed into place once synced.

use std::path::PathBuf;

use k8s_openapi::api::core::v1::Secret;
use kcore::ops::backup::BackupTarget;
use kube::Client;
use kube::api::Api;
use tokio::io::AsyncWriteExt;

use super::Volumes;
use super::s3::{Bucket, Upload};
use crate::Error;

/// The keys of an S3 target's credentials Secret.
pub const ACCESS_KEY: &str = "accessKeyID";
pub const SECRET_KEY: &str = "secretAccessKey";

/// The most files listed in a folder on a claim.
const MAX_LISTED: usize = 10_000;

pub enum Destination {
    S3(Bucket),
    Dir { claim: String, root: PathBuf },
}

impl Destination {
    /// The target of a TenantBackup in `ns`: for S3, with the credentials read from its Secret.
    pub async fn open(
        client: &Client,
        ns: &str,
        t: &BackupTarget,
        volumes: &Volumes,
    ) -> Result<Destination, Error> {
        if let Some(s) = &t.s3 {
            let api: Api<Secret> = Api::namespaced(client.clone(), ns);
            let name = &s.credentials_secret;
            let secret = api.get_opt(name).await?.ok_or_else(|| {
                Error::Other(format!(
                    "the S3 credentials Secret {ns}/{name} does not exist: create it with keys {ACCESS_KEY} and {SECRET_KEY}"
                ))
            })?;
            let data = secret.data.unwrap_or_default();
            let key = |k: &str| {
                data.get(k)
                    .and_then(|b| String::from_utf8(b.0.clone()).ok())
                    .map(|v| v.trim().to_string())
                    .filter(|v| !v.is_empty())
                    .ok_or_else(|| {
                        Error::Other(format!(
                            "the S3 credentials Secret {ns}/{name} has no key {k}"
                        ))
                    })
            };
            return Ok(Destination::S3(Bucket::new(
                s,
                &key(ACCESS_KEY)?,
                &key(SECRET_KEY)?,
            )?));
        }
        if let Some(c) = &t.persistent_volume_claim {
            let claim = &c.claim_name;
            let root = volumes.0.get(claim).ok_or_else(|| {
                Error::Other(format!(
                    "PersistentVolumeClaim {claim} is not mounted into the reconciler: kubectl kamaji install --backup-claim {claim} mounts it (the claim must be in the reconciler's namespace)"
                ))
            })?;
            return Ok(Destination::Dir {
                claim: claim.clone(),
                root: root.clone(),
            });
        }
        Err(Error::Other(
            "spec.target sets neither s3 nor persistentVolumeClaim".into(),
        ))
    }

    /// Where `key` is, for status and Events.
    pub fn location(&self, key: &str) -> String {
        match self {
            Destination::S3(b) => b.location(key),
            Destination::Dir { claim, .. } => format!("pvc://{claim}/{key}"),
        }
    }

    pub async fn upload(&self, key: &str) -> Result<Sink<'_>, Error> {
        match self {
            Destination::S3(b) => Ok(Sink::S3(b.upload(key))),
            Destination::Dir { root, .. } => {
                let path = root.join(key);
                let io = |e: std::io::Error| Error::Other(format!("{}: {e}", path.display()));
                let dir = path
                    .parent()
                    .ok_or_else(|| Error::Other(format!("{} has no folder", path.display())))?;
                tokio::fs::create_dir_all(dir).await.map_err(io)?;
                let file_name = path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let tmp = dir.join(format!(".{file_name}.partial"));
                let file = tokio::fs::OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .mode(0o600)
                    .open(&tmp)
                    .await
                    .map_err(io)?;
                Ok(Sink::File {
                    tmp,
                    path,
                    file,
                    bytes: 0,
                })
            }
        }
    }

    /// The file names directly in `folder` (a `/`-ended path under the target).
    pub async fn list(&self, folder: &str) -> Result<Vec<String>, Error> {
        match self {
            Destination::S3(b) => b.list(folder).await,
            Destination::Dir { root, .. } => {
                let dir = root.join(folder);
                let io = |e: std::io::Error| Error::Other(format!("{}: {e}", dir.display()));
                let mut out = Vec::new();
                let mut entries = tokio::fs::read_dir(&dir).await.map_err(io)?;
                while let Some(e) = entries.next_entry().await.map_err(io)? {
                    if out.len() == MAX_LISTED {
                        return Err(Error::Other(format!(
                            "{} holds more than {MAX_LISTED} files: remove some by hand",
                            dir.display()
                        )));
                    }
                    out.push(e.file_name().to_string_lossy().into_owned());
                }
                Ok(out)
            }
        }
    }

    pub async fn delete(&self, key: &str) -> Result<(), Error> {
        match self {
            Destination::S3(b) => b.delete(key).await,
            Destination::Dir { root, .. } => {
                let path = root.join(key);
                tokio::fs::remove_file(&path)
                    .await
                    .map_err(|e| Error::Other(format!("removing {}: {e}", path.display())))
            }
        }
    }
}

/// A file being written.
pub enum Sink<'a> {
    S3(Upload<'a>),
    File {
        tmp: PathBuf,
        path: PathBuf,
        file: tokio::fs::File,
        bytes: u64,
    },
}

impl Sink<'_> {
    pub async fn write(&mut self, b: &[u8]) -> Result<(), Error> {
        match self {
            Sink::S3(u) => u.write(b).await,
            Sink::File {
                tmp, file, bytes, ..
            } => {
                file.write_all(b)
                    .await
                    .map_err(|e| Error::Other(format!("{}: {e}", tmp.display())))?;
                *bytes = bytes.saturating_add(u64::try_from(b.len()).unwrap_or(u64::MAX));
                Ok(())
            }
        }
    }

    /// Puts the file in place; returns its size.
    pub async fn finish(self) -> Result<u64, Error> {
        match self {
            Sink::S3(u) => u.finish().await,
            Sink::File {
                tmp,
                path,
                mut file,
                bytes,
            } => {
                let io = |e: std::io::Error| Error::Other(format!("{}: {e}", path.display()));
                file.flush().await.map_err(io)?;
                file.sync_all().await.map_err(io)?;
                drop(file);
                tokio::fs::rename(&tmp, &path).await.map_err(io)?;
                Ok(bytes)
            }
        }
    }

    /// Leaves nothing behind.
    pub async fn abort(self) {
        match self {
            Sink::S3(u) => u.abort().await,
            Sink::File { tmp, file, .. } => {
                drop(file);
                let _ = tokio::fs::remove_file(&tmp).await;
            }
        }
    }
}
