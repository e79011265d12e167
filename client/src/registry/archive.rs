//! The image archive file: written as a tar stream while blobs arrive, read back by where each
//! entry's bytes lie, and sent in pieces.

use std::collections::{BTreeSet, HashMap};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use futures::StreamExt;
use kcore::init::bundle::StreamHash;
use kcore::init::images::{
    ContentDescriptor, INDEX_JSON, ImageError, Listing, MAX_BLOBS_PER_IMAGE, MAX_INDEX_ENTRIES,
    MAX_MANIFEST_BYTES, Manifest, parse_manifest, read_index_json,
};
use oci_client::errors::OciDistributionError;
use oci_client::{Client, Reference};
use tokio::io::AsyncWriteExt;

use super::{RegistryError, io, oci, too_long, verify};

/// Bytes read from an archive per piece of a blob sent.
const PUSH_PIECE: usize = 1 << 20;
/// The most entries an archive's tar may have: its blobs, manifests, `index.json`, `oci-layout`
/// and two folders.
const MAX_ENTRIES: usize = MAX_BLOBS_PER_IMAGE + MAX_INDEX_ENTRIES + 4;

/// An image archive, read: the image it is and what pushing it sends.
#[derive(Clone, Debug)]
pub struct Archive {
    pub path: PathBuf,
    /// The upstream reference it was made from (`org.opencontainers.image.ref.name`).
    pub reference: String,
    pub top: ContentDescriptor,
    /// Manifests, each after the manifests it lists (the top last), with their bytes.
    pub manifests: Vec<(ContentDescriptor, Vec<u8>)>,
    /// Configs and layers, once each, with where their bytes start in the file.
    pub blobs: Vec<(ContentDescriptor, u64)>,
}

impl Archive {
    /// The bytes of its configs and layers.
    pub fn blob_bytes(&self) -> u64 {
        self.blobs
            .iter()
            .fold(0u64, |n, (d, _)| n.saturating_add(d.size))
    }
}

/// An archive being written: tar entries (headers from the `tar` crate, mtime 0, so the same
/// image gives the same bytes) through a hash of the whole file.
pub(super) struct TarOut {
    file: tokio::io::BufWriter<tokio::fs::File>,
    hash: StreamHash,
    shown: String,
}

impl TarOut {
    pub(super) async fn create(path: &Path) -> Result<TarOut, RegistryError> {
        let shown = path.display().to_string();
        let file = tokio::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
            .await
            .map_err(|e| io(&shown, e))?;
        Ok(TarOut {
            file: tokio::io::BufWriter::with_capacity(1 << 20, file),
            hash: StreamHash::new(),
            shown,
        })
    }

    async fn put(&mut self, bytes: &[u8]) -> Result<(), RegistryError> {
        self.hash.update(bytes);
        self.file
            .write_all(bytes)
            .await
            .map_err(|e| io(&self.shown, e))
    }

    async fn header(
        &mut self,
        name: &str,
        size: u64,
        kind: tar::EntryType,
    ) -> Result<(), RegistryError> {
        let mut h = tar::Header::new_ustar();
        h.set_path(name).map_err(|e| io(name, e))?;
        h.set_size(size);
        h.set_mode(if kind == tar::EntryType::Directory {
            0o755
        } else {
            0o644
        });
        h.set_mtime(0);
        h.set_uid(0);
        h.set_gid(0);
        h.set_entry_type(kind);
        h.set_cksum();
        self.put(h.as_bytes()).await
    }

    /// The zeros after `size` bytes of data, to the next 512-byte block.
    async fn pad(&mut self, size: u64) -> Result<(), RegistryError> {
        let rem = (size % 512) as usize;
        if rem != 0 {
            self.put(&[0u8; 512][..512 - rem]).await?;
        }
        Ok(())
    }

    pub(super) async fn dir(&mut self, name: &str) -> Result<(), RegistryError> {
        self.header(name, 0, tar::EntryType::Directory).await
    }

    pub(super) async fn file(&mut self, name: &str, bytes: &[u8]) -> Result<(), RegistryError> {
        self.header(name, bytes.len() as u64, tar::EntryType::Regular)
            .await?;
        self.put(bytes).await?;
        self.pad(bytes.len() as u64).await
    }

    /// Streams blob `d` from the registry into the archive, checking its size and digest as
    /// the bytes come (a blob longer than its descriptor says stops at the first byte too many).
    pub(super) async fn blob(
        &mut self,
        client: &Client,
        src: &Reference,
        d: &ContentDescriptor,
    ) -> Result<(), RegistryError> {
        let what = format!("blob {}", d.digest);
        let mut stream = client
            .pull_blob_stream(src, d.digest.as_str())
            .await
            .map_err(oci)?;
        self.header(&d.path(), d.size, tar::EntryType::Regular)
            .await?;
        let mut hash = StreamHash::new();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| io(&what, e))?;
            let total = hash.size().checked_add(chunk.len() as u64);
            if total.is_none_or(|t| t > d.size) {
                return Err(too_long(d));
            }
            hash.update(&chunk);
            self.put(&chunk).await?;
        }
        let (size, hex) = hash.finish();
        let actual = format!("sha256:{hex}");
        if size != d.size || actual != d.digest {
            return Err(ImageError::Mismatch {
                what: format!("{what} ({size} bytes received)"),
                expected: d.digest.clone(),
                actual,
            }
            .into());
        }
        self.pad(d.size).await
    }

    /// Ends the archive (two zero blocks) and gives its size and hex SHA-256.
    pub(super) async fn finish(mut self) -> Result<(u64, String), RegistryError> {
        self.put(&[0u8; 1024]).await?;
        self.file.flush().await.map_err(|e| io(&self.shown, e))?;
        Ok(self.hash.finish())
    }
}

/// `size` bytes of `path` from `offset`, in pieces, for a push's body.
pub(super) fn file_range(
    path: PathBuf,
    offset: u64,
    size: u64,
) -> impl futures::Stream<Item = oci_client::errors::Result<bytes::Bytes>> + Send + 'static {
    use tokio::io::{AsyncReadExt, AsyncSeekExt};
    struct State {
        path: PathBuf,
        file: Option<tokio::fs::File>,
        offset: u64,
        left: u64,
    }
    let start = State {
        path,
        file: None,
        offset,
        left: size,
    };
    futures::stream::try_unfold(start, |mut s| async move {
        if s.left == 0 {
            return Ok(None);
        }
        let file = match s.file.as_mut() {
            Some(f) => f,
            None => {
                let mut f = tokio::fs::File::open(&s.path).await?;
                f.seek(SeekFrom::Start(s.offset)).await?;
                s.file.insert(f)
            }
        };
        let want = usize::try_from(s.left).map_or(PUSH_PIECE, |l| l.min(PUSH_PIECE));
        let mut buf = vec![0u8; want];
        let n = file.read(&mut buf).await?;
        if n == 0 {
            return Err(OciDistributionError::IoError(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!("{} ends inside a blob", s.path.display()),
            )));
        }
        buf.truncate(n);
        s.left -= n as u64;
        Ok(Some((bytes::Bytes::from(buf), s)))
    })
}

/// Reads the archive at `path`: its `index.json`, its manifests (checked against their
/// digests) and where each blob they need lies in the file. Blocking file reads, on a thread of
/// their own.
pub async fn open_archive(path: &Path) -> Result<Archive, RegistryError> {
    let path = path.to_path_buf();
    tokio::task::spawn_blocking(move || read_archive(&path))
        .await
        .map_err(|e| RegistryError::Io {
            what: "reading an archive".into(),
            why: e.to_string(),
        })?
}

fn read_archive(path: &Path) -> Result<Archive, RegistryError> {
    let shown = path.display().to_string();
    let file = std::fs::File::open(path).map_err(|e| io(&shown, e))?;
    let mut tar = tar::Archive::new(file);
    let mut entries: HashMap<String, (u64, u64)> = HashMap::new();
    for e in tar.entries_with_seek().map_err(|e| io(&shown, e))? {
        let e = e.map_err(|e| io(&shown, e))?;
        if e.header().entry_type() != tar::EntryType::Regular {
            continue;
        }
        let name = e.path().map_err(|e| io(&shown, e))?;
        let name = name.to_string_lossy();
        let name = name.trim_start_matches("./").to_string();
        entries.insert(name, (e.raw_file_position(), e.size()));
        if entries.len() > MAX_ENTRIES {
            return Err(ImageError::TooMany {
                what: "its tar entries".into(),
                count: entries.len(),
                max: MAX_ENTRIES,
            }
            .into());
        }
    }
    let mut file = tar.into_inner();
    let mut read_small = |name: &str| -> Result<Vec<u8>, RegistryError> {
        let &(offset, size) = entries
            .get(name)
            .ok_or_else(|| ImageError::Layout(format!("it has no {name}")))?;
        if size > MAX_MANIFEST_BYTES as u64 {
            return Err(ImageError::TooLarge {
                what: name.to_string(),
                size,
                max: MAX_MANIFEST_BYTES as u64,
            }
            .into());
        }
        let mut buf = vec![0u8; size as usize];
        file.seek(SeekFrom::Start(offset))
            .and_then(|_| file.read_exact(&mut buf))
            .map_err(|e| io(name, e))?;
        Ok(buf)
    };
    let entry = read_index_json(&read_small(INDEX_JSON)?)?;
    let mut manifest_of = |d: &ContentDescriptor| -> Result<(Manifest, Vec<u8>), RegistryError> {
        let bytes = read_small(&d.path())?;
        verify(d, &bytes)?;
        let m = parse_manifest(
            &format!("manifest {}", d.digest),
            &bytes,
            Some(&d.media_type),
        )?;
        Ok((m, bytes))
    };
    let (top, top_bytes) = manifest_of(&entry.top)?;
    let mut manifests = Vec::new();
    let mut images = Vec::new();
    match &top.listing {
        Listing::Index(children) => {
            for child in children {
                let (m, bytes) = manifest_of(child)?;
                if let Listing::Index(_) = m.listing {
                    return Err(ImageError::NestedIndex {
                        what: format!("manifest {}", entry.top.digest),
                    }
                    .into());
                }
                manifests.push((child.clone(), bytes));
                images.push(m);
            }
        }
        Listing::Image { .. } => images.push(top.clone()),
    }
    manifests.push((entry.top.clone(), top_bytes));
    let mut seen = BTreeSet::new();
    let mut blobs = Vec::new();
    for d in images.iter().flat_map(Manifest::blobs) {
        if !seen.insert(d.digest.clone()) {
            continue;
        }
        let &(offset, size) = entries
            .get(&d.path())
            .ok_or_else(|| ImageError::Layout(format!("it has no {}", d.path())))?;
        if size != d.size {
            return Err(ImageError::Layout(format!(
                "{} is {size} bytes, its descriptor says {}",
                d.path(),
                d.size
            ))
            .into());
        }
        blobs.push((d.clone(), offset));
    }
    Ok(Archive {
        path: path.to_path_buf(),
        reference: entry.reference,
        top: entry.top,
        manifests,
        blobs,
    })
}
