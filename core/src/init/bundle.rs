//! An `init` bundle: a directory a connected machine writes (`kubectl capi init bundle DIR`)
//! and an air-gapped site installs from (`kubectl capi init --from DIR`). It holds each
//! component's release asset as fetched, the images they name, and `bundle.yaml`: the set it
//! was made for and each file's size and SHA-256. A file that is missing, changed or not listed
//! is refused by name before anything is applied.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::set::{self, Component};
use crate::error::{Error, usage};

/// The bundle's manifest file.
pub const MANIFEST: &str = "bundle.yaml";
/// The images every component names, one per line (for `crane copy`, `skopeo sync`, …), and
/// the [`EXTRA_IMAGES`].
pub const IMAGES: &str = "images.txt";
/// Images a bundle carries beyond those its components' manifests name: what init's options
/// may install besides the set, the etcd of `--datastore etcd` ([`super::etcd::IMAGE`]).
pub const EXTRA_IMAGES: &[&str] = &[super::etcd::IMAGE];
/// The largest file `bundle.yaml` may list, so a listed size never asks to read more: 16 GiB, the
/// most bytes of image archives a bundle holds (`images::MAX_BUNDLE_IMAGE_BYTES` says why).
pub const MAX_LISTED_BYTES: u64 = 16 << 30;
/// `bundle.yaml`'s kind.
pub const KIND: &str = "InitBundle";
pub const API_VERSION: &str = "capi-kamaji.io/v1alpha1";

/// `bundle.yaml`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BundleManifest {
    pub api_version: String,
    pub kind: String,
    /// [`set::set_id`] of the binary that wrote it.
    pub set: String,
    pub files: Vec<BundleFile>,
}

/// One file of the bundle.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BundleFile {
    /// A plain file name in the bundle's directory.
    pub name: String,
    pub size: u64,
    /// Lower-case hex.
    pub sha256: String,
}

/// Lower-case hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The size and SHA-256 of bytes that arrive in pieces (a file read or written as a stream), so
/// that no file of a bundle is ever held whole to be checked.
#[derive(Clone, Debug, Default)]
pub struct StreamHash {
    hasher: Sha256,
    size: u64,
}

impl StreamHash {
    pub fn new() -> StreamHash {
        StreamHash::default()
    }

    pub fn update(&mut self, bytes: &[u8]) {
        self.hasher.update(bytes);
        // A u64 of bytes is more than any disk holds; saturating keeps the count monotone.
        self.size = self.size.saturating_add(bytes.len() as u64);
    }

    /// Bytes seen so far.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The size and lower-case hex SHA-256 of everything seen.
    pub fn finish(self) -> (u64, String) {
        (self.size, hex(&self.hasher.finalize()))
    }
}

impl BundleManifest {
    /// The manifest of files `(name, bytes)`, for this binary's set.
    pub fn of(files: &[(String, Vec<u8>)]) -> BundleManifest {
        BundleManifest::listing(
            files
                .iter()
                .map(|(name, bytes)| BundleFile::of(name, bytes))
                .collect(),
        )
    }

    /// The manifest of `files` as listed (for files written as streams), for this binary's set.
    pub fn listing(files: Vec<BundleFile>) -> BundleManifest {
        BundleManifest {
            api_version: API_VERSION.into(),
            kind: KIND.into(),
            set: set::set_id(),
            files,
        }
    }

    /// Parses `bundle.yaml` and checks that it was written for this binary's set and lists
    /// every file `components` need. `dir` names the bundle in messages.
    pub fn parse(
        dir: &str,
        text: &str,
        components: &[&Component],
    ) -> Result<BundleManifest, Error> {
        let m: BundleManifest = serde_saphyr::from_str(text).map_err(|e| {
            refused(
                dir,
                format!(
                    "{MANIFEST} is not a bundle manifest: {}",
                    crate::yaml::error_line(&e)
                ),
            )
        })?;
        if m.api_version != API_VERSION || m.kind != KIND {
            return Err(refused(
                dir,
                format!(
                    "{MANIFEST} is a {} {}, not a {API_VERSION} {KIND}",
                    m.api_version, m.kind
                ),
            ));
        }
        if m.set != set::set_id() {
            return Err(Error::Other {
                message: format!(
                    "bundle {dir} was made for another set of versions ({}); this kubectl-capi installs {}",
                    m.set,
                    set::set_id()
                ),
                hint: Some(format!(
                    "make the bundle with this kubectl-capi (kubectl capi init bundle {dir}), or install with the kubectl-capi that made it"
                )),
            });
        }
        if let Some(f) = m.files.iter().find(|f| !plain_name(&f.name)) {
            return Err(refused(
                dir,
                format!(
                    "{MANIFEST} names {:?}, which is not a file name of the bundle",
                    f.name
                ),
            ));
        }
        if let Some(f) = m.files.iter().find(|f| f.size > MAX_LISTED_BYTES) {
            return Err(refused(
                dir,
                format!(
                    "{MANIFEST} gives {} a size of {} bytes, more than a bundle holds",
                    f.name, f.size
                ),
            ));
        }
        for c in components {
            let want = c.file();
            if !m.files.iter().any(|f| f.name == want) {
                return Err(refused(
                    dir,
                    format!("{MANIFEST} lists no {want} ({} {})", c.id, c.version),
                ));
            }
        }
        Ok(m)
    }

    /// Checks the bytes of listed file `name` against the manifest.
    pub fn check(&self, dir: &str, name: &str, bytes: &[u8]) -> Result<(), Error> {
        self.check_sum(dir, name, bytes.len() as u64, &sha256_hex(bytes))
    }

    /// Checks the size and hex SHA-256 of listed file `name` (read as a stream, [`StreamHash`])
    /// against the manifest.
    pub fn check_sum(&self, dir: &str, name: &str, size: u64, sha256: &str) -> Result<(), Error> {
        let Some(f) = self.files.iter().find(|f| f.name == name) else {
            return Err(refused(dir, format!("{name} is not listed in {MANIFEST}")));
        };
        if f.size != size || f.sha256 != sha256 {
            return Err(refused(
                dir,
                format!(
                    "{name} does not match its checksum in {MANIFEST} (changed or truncated since the bundle was made)"
                ),
            ));
        }
        Ok(())
    }

    /// The listed file's expected size, to bound a read.
    pub fn size_of(&self, name: &str) -> Option<u64> {
        self.files.iter().find(|f| f.name == name).map(|f| f.size)
    }
}

impl BundleFile {
    /// The entry of file `name` holding `bytes`.
    pub fn of(name: &str, bytes: &[u8]) -> BundleFile {
        BundleFile {
            name: name.to_string(),
            size: bytes.len() as u64,
            sha256: sha256_hex(bytes),
        }
    }
}

/// A name with no directory part, not hidden.
fn plain_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 255
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
}

fn refused(dir: &str, why: String) -> Error {
    usage(
        format!("bundle {dir} is refused: {why}; nothing was applied"),
        format!(
            "make it again on a connected machine (kubectl capi init bundle {dir}) and copy it whole"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::init::set::by_id;

    fn bundle() -> (BundleManifest, String) {
        let files = vec![("cluster-api.yaml".to_string(), b"kind: x\n".to_vec())];
        let m = BundleManifest::of(&files);
        let text = serde_saphyr::to_string(&m).unwrap();
        (m, text)
    }

    #[test]
    fn a_bundle_reads_back_and_checks_its_files() {
        let (m, text) = bundle();
        let c = by_id("cluster-api").unwrap();
        let back = BundleManifest::parse("b", &text, &[c]).unwrap();
        assert_eq!(back, m);
        back.check("b", "cluster-api.yaml", b"kind: x\n").unwrap();
        let e = back
            .check("b", "cluster-api.yaml", b"kind: y\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("cluster-api.yaml does not match its checksum"),
            "{e}"
        );
        assert!(e.contains("nothing was applied"), "{e}");
        let e = back.check("b", "other.yaml", b"").unwrap_err().to_string();
        assert!(e.contains("other.yaml is not listed"), "{e}");
    }

    #[test]
    fn another_set_a_missing_file_and_a_path_are_refused() {
        let (_, text) = bundle();
        let byoh = by_id("infrastructure-byoh").unwrap();
        let e = BundleManifest::parse("b", &text, &[byoh])
            .unwrap_err()
            .to_string();
        assert!(e.contains("lists no infrastructure-byoh.yaml"), "{e}");
        let other = text.replace("cluster-api@v1.14.2", "cluster-api@v1.13.0");
        let e = BundleManifest::parse("b", &other, &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("made for another set of versions"), "{e}");
        let path = text.replace("name: cluster-api.yaml", "name: ../etc/passwd");
        let e = BundleManifest::parse("b", &path, &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a file name of the bundle"), "{e}");
        let huge = text.replace("size: 8", &format!("size: {}", MAX_LISTED_BYTES + 1));
        let e = BundleManifest::parse("b", &huge, &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("more than a bundle holds"), "{e}");
    }

    #[test]
    fn a_stream_hashes_as_the_whole() {
        let mut h = StreamHash::new();
        h.update(b"kind: ");
        h.update(b"x\n");
        assert_eq!(h.size(), 8);
        let (size, sum) = h.finish();
        let (m, _) = bundle();
        m.check_sum("b", "cluster-api.yaml", size, &sum).unwrap();
        assert_eq!(sum, sha256_hex(b"kind: x\n"));
    }
}
