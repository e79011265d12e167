//! The init bundle's images (`kubectl capi init bundle DIR --images`): one OCI image-layout tar
//! per image of `images.txt`, `image-<name>-<tag>.oci.tar`, holding `oci-layout`, `index.json`
//! (one entry: the manifest kept, annotated with the upstream reference as
//! `org.opencontainers.image.ref.name`, and with its platform when one was chosen) and
//! `blobs/sha256/<hex>`. A reference by tag that names a multi-platform index keeps the one
//! platform asked, as `crane pull --platform` does; a reference pinned by digest keeps exactly
//! what the digest names (an index and every manifest it lists). The pure parts: names, the
//! platform, what a manifest or an index says, the layout's JSON and the bounds. Pulling,
//! writing and pushing are `kclient::registry`'s.

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;
use serde_json::{Value, json};

use super::manifests::mirrored;

/// The most images a bundle carries: the set names 10; a list far longer is not this set's.
pub const MAX_IMAGES: usize = 64;
/// The most bytes of one blob (a layer, mostly): the set's layers are 10-110 MB; a blob of
/// gigabytes is a wrong image or a registry answering something else, and would fill the disk
/// before anything said so.
pub const MAX_BLOB_BYTES: u64 = 4 << 30;
/// The most bytes of image archives in one bundle, 16 GiB: the set's images are about 200 MB for
/// one platform; this leaves room for every platform of every image and still stops a runaway
/// pull before it fills a disk. `bundle.yaml` lists no larger file.
pub const MAX_BUNDLE_IMAGE_BYTES: u64 = super::bundle::MAX_LISTED_BYTES;
/// The most bytes of a manifest, an index, an image config or a layout's `index.json` held in
/// memory: the 4 MiB the OCI distribution spec says registries should accept for a manifest.
pub const MAX_MANIFEST_BYTES: usize = 4 << 20;
/// The most manifests one index may list (a multi-platform image has a dozen at most, with its
/// attestations).
pub const MAX_INDEX_ENTRIES: usize = 256;
/// The most blobs (configs and layers) one archive may hold.
pub const MAX_BLOBS_PER_IMAGE: usize = 2_048;

/// The layout's marker file and its only content.
pub const OCI_LAYOUT: &str = "oci-layout";
pub const OCI_LAYOUT_JSON: &str = r#"{"imageLayoutVersion":"1.0.0"}"#;
/// The layout's index.
pub const INDEX_JSON: &str = "index.json";
/// The annotation of `index.json`'s entry that names the image (the upstream reference).
pub const REF_NAME: &str = "org.opencontainers.image.ref.name";

pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
pub const DOCKER_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";
pub const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
/// Every manifest media type an archive may hold, for a registry's `Accept`.
pub const MANIFEST_TYPES: [&str; 4] = [OCI_INDEX, OCI_MANIFEST, DOCKER_LIST, DOCKER_MANIFEST];

/// What is wrong with an image, a manifest or an archive; one line each.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImageError {
    #[error("platform {0:?} is not OS/ARCH[/VARIANT] (e.g. linux/amd64)")]
    Platform(String),
    #[error("{what} is not valid JSON of its kind: {why}")]
    Json { what: String, why: String },
    #[error("{what} has schemaVersion {version}, not 2")]
    SchemaVersion { what: String, version: i64 },
    #[error("{what} is a {media_type}, which an archive does not hold")]
    MediaType { what: String, media_type: String },
    #[error("{what} says it is a {inside}, its descriptor a {outside}")]
    MediaTypeMismatch {
        what: String,
        inside: String,
        outside: String,
    },
    #[error("digest {0:?} is not sha256:<64 lower-case hex>")]
    Digest(String),
    #[error("{what} is {size} bytes, more than the {max} allowed")]
    TooLarge { what: String, size: u64, max: u64 },
    #[error("{what}: {count} is more than the {max} allowed")]
    TooMany {
        what: String,
        count: usize,
        max: usize,
    },
    #[error("its index has no {want} image (it has {})", list_or_none(have))]
    NoPlatform { want: String, have: Vec<String> },
    #[error("{what} lists an index inside an index, which an archive does not hold")]
    NestedIndex { what: String },
    #[error("{what} does not match its digest {expected} (got {actual})")]
    Mismatch {
        what: String,
        expected: String,
        actual: String,
    },
    #[error("images {0} and {1} would both be {2} in a mirror")]
    Collision(String, String, String),
    #[error("{0}")]
    Layout(String),
}

fn list_or_none(have: &[String]) -> String {
    if have.is_empty() {
        "none".into()
    } else {
        have.join(", ")
    }
}

/// An image platform, `os/architecture[/variant]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Platform {
    pub os: String,
    pub architecture: String,
    pub variant: Option<String>,
}

impl Platform {
    /// Parses `OS/ARCH[/VARIANT]` (`linux/amd64`, `linux/arm/v7`).
    pub fn parse(s: &str) -> Result<Platform, ImageError> {
        let bad = || ImageError::Platform(s.to_string());
        let parts: Vec<&str> = s.split('/').collect();
        let ok = |p: &str| {
            !p.is_empty()
                && p.len() <= 32
                && p.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-".contains(c))
        };
        if !(2..=3).contains(&parts.len()) || !parts.iter().all(|p| ok(p)) {
            return Err(bad());
        }
        Ok(Platform {
            os: parts[0].to_string(),
            architecture: parts[1].to_string(),
            variant: parts.get(2).map(|v| v.to_string()),
        })
    }

    /// `linux/<this machine's architecture>` in Go's names (`GOARCH`), as registries list them.
    pub fn host() -> Platform {
        let arch = match std::env::consts::ARCH {
            "x86_64" => "amd64",
            "aarch64" => "arm64",
            "x86" => "386",
            "powerpc64" if cfg!(target_endian = "little") => "ppc64le",
            "powerpc64" => "ppc64",
            "loongarch64" => "loong64",
            other => other,
        };
        Platform {
            os: "linux".into(),
            architecture: arch.into(),
            variant: None,
        }
    }

    /// The variant, or the one an architecture means without one (arm64 is v8, arm v7), as
    /// containerd's platform matcher reads them.
    fn effective_variant(&self) -> Option<&str> {
        self.variant
            .as_deref()
            .or(match self.architecture.as_str() {
                "arm64" => Some("v8"),
                "arm" => Some("v7"),
                _ => None,
            })
    }

    /// Whether an image of platform `have` runs where `self` is asked: same OS and architecture,
    /// and the variant asked, if one was.
    pub fn accepts(&self, have: &Platform) -> bool {
        self.os == have.os
            && self.architecture == have.architecture
            && (self.variant.is_none() || self.effective_variant() == have.effective_variant())
    }

    fn to_json(&self) -> Value {
        let mut v = json!({"os": self.os, "architecture": self.architecture});
        if let Some(variant) = &self.variant {
            v["variant"] = json!(variant);
        }
        v
    }
}

impl fmt::Display for Platform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.os, self.architecture)?;
        if let Some(v) = &self.variant {
            write!(f, "/{v}")?;
        }
        Ok(())
    }
}

/// A content descriptor: what a manifest, an index or `index.json` says of a blob.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContentDescriptor {
    pub media_type: String,
    /// `sha256:<hex>`, checked.
    pub digest: String,
    pub size: u64,
    pub platform: Option<Platform>,
}

impl ContentDescriptor {
    /// The blob's path in a layout: `blobs/sha256/<hex>`.
    pub fn path(&self) -> String {
        blob_path(&self.digest)
    }

    /// Whether it names an index (else an image manifest, or a blob).
    pub fn is_index(&self) -> bool {
        is_index_type(&self.media_type)
    }

    /// Whether it names a manifest or an index.
    pub fn is_manifest(&self) -> bool {
        MANIFEST_TYPES.contains(&self.media_type.as_str())
    }
}

fn is_index_type(t: &str) -> bool {
    t == OCI_INDEX || t == DOCKER_LIST
}

/// `blobs/sha256/<hex>` of a checked digest.
pub fn blob_path(digest: &str) -> String {
    format!("blobs/{}", digest.replacen(':', "/", 1))
}

/// `sha256:<hex>` of `bytes`.
pub fn sha256_digest(bytes: &[u8]) -> String {
    format!("sha256:{}", super::bundle::sha256_hex(bytes))
}

/// Checks `digest` is `sha256:` and 64 lower-case hex digits (the only algorithm kept).
pub fn check_digest(digest: &str) -> Result<(), ImageError> {
    let ok = digest.strip_prefix("sha256:").is_some_and(|hex| {
        hex.len() == 64
            && hex
                .chars()
                .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
    });
    if ok {
        Ok(())
    } else {
        Err(ImageError::Digest(digest.to_string()))
    }
}

/// What a manifest or an index lists.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Listing {
    /// An index: its manifests.
    Index(Vec<ContentDescriptor>),
    /// An image manifest: its config and layers.
    Image {
        config: ContentDescriptor,
        layers: Vec<ContentDescriptor>,
    },
}

/// A manifest or an index as read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Manifest {
    /// Its own media type (what a registry is told on a push).
    pub media_type: String,
    pub listing: Listing,
}

impl Manifest {
    /// The blobs an image manifest needs (config, then layers); none for an index.
    pub fn blobs(&self) -> Vec<&ContentDescriptor> {
        match &self.listing {
            Listing::Index(_) => Vec::new(),
            Listing::Image { config, layers } => std::iter::once(config).chain(layers).collect(),
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawManifest {
    schema_version: Option<i64>,
    media_type: Option<String>,
    manifests: Option<Vec<RawDescriptor>>,
    config: Option<RawDescriptor>,
    layers: Option<Vec<RawDescriptor>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawDescriptor {
    media_type: Option<String>,
    digest: String,
    size: u64,
    platform: Option<RawPlatform>,
    #[serde(default)]
    annotations: BTreeMap<String, String>,
}

#[derive(Deserialize)]
struct RawPlatform {
    os: String,
    architecture: String,
    variant: Option<String>,
}

impl RawDescriptor {
    fn checked(self, what: &str) -> Result<ContentDescriptor, ImageError> {
        check_digest(&self.digest)?;
        let Some(media_type) = self.media_type.filter(|t| !t.is_empty()) else {
            return Err(ImageError::Json {
                what: what.to_string(),
                why: format!("the descriptor of {} has no mediaType", self.digest),
            });
        };
        Ok(ContentDescriptor {
            media_type,
            digest: self.digest,
            size: self.size,
            platform: self.platform.map(|p| Platform {
                os: p.os,
                architecture: p.architecture,
                variant: p.variant.filter(|v| !v.is_empty()),
            }),
        })
    }
}

fn json_error(what: &str, e: serde_json::Error) -> ImageError {
    ImageError::Json {
        what: what.to_string(),
        why: e.to_string(),
    }
}

/// Reads `bytes`, the manifest or index `what` names. `expected` is the media type its
/// descriptor gave, if any (a registry's answer to a tag has none): the manifest's own
/// `mediaType` must agree with it; without either, its fields tell (`manifests` an index,
/// `config` an image manifest). Docker's schema 1 and other kinds are refused.
pub fn parse_manifest(
    what: &str,
    bytes: &[u8],
    expected: Option<&str>,
) -> Result<Manifest, ImageError> {
    if bytes.len() > MAX_MANIFEST_BYTES {
        return Err(ImageError::TooLarge {
            what: what.to_string(),
            size: bytes.len() as u64,
            max: MAX_MANIFEST_BYTES as u64,
        });
    }
    let raw: RawManifest = serde_json::from_slice(bytes).map_err(|e| json_error(what, e))?;
    let version = raw.schema_version.unwrap_or(0);
    if version != 2 {
        return Err(ImageError::SchemaVersion {
            what: what.to_string(),
            version,
        });
    }
    let media_type = match (raw.media_type.as_deref(), expected) {
        (Some(inside), Some(outside)) if inside != outside => {
            return Err(ImageError::MediaTypeMismatch {
                what: what.to_string(),
                inside: inside.to_string(),
                outside: outside.to_string(),
            });
        }
        (Some(t), _) | (None, Some(t)) => t.to_string(),
        (None, None) if raw.manifests.is_some() && raw.config.is_none() => OCI_INDEX.into(),
        (None, None) if raw.config.is_some() && raw.manifests.is_none() => OCI_MANIFEST.into(),
        (None, None) => {
            return Err(ImageError::Json {
                what: what.to_string(),
                why: "it has no mediaType and is neither an index nor an image manifest".into(),
            });
        }
    };
    if !MANIFEST_TYPES.contains(&media_type.as_str()) {
        return Err(ImageError::MediaType {
            what: what.to_string(),
            media_type,
        });
    }
    let listing = if is_index_type(&media_type) {
        let entries = raw.manifests.ok_or_else(|| ImageError::Json {
            what: what.to_string(),
            why: "an index without manifests".into(),
        })?;
        if entries.len() > MAX_INDEX_ENTRIES {
            return Err(ImageError::TooMany {
                what: format!("the manifests {what} lists"),
                count: entries.len(),
                max: MAX_INDEX_ENTRIES,
            });
        }
        let children = entries
            .into_iter()
            .map(|d| d.checked(what))
            .collect::<Result<Vec<_>, _>>()?;
        if let Some(d) = children.iter().find(|d| !d.is_manifest()) {
            return Err(ImageError::MediaType {
                what: format!("{} in {what}", d.digest),
                media_type: d.media_type.clone(),
            });
        }
        Listing::Index(children)
    } else {
        let no = |field: &str| ImageError::Json {
            what: what.to_string(),
            why: format!("an image manifest without {field}"),
        };
        let config = raw.config.ok_or_else(|| no("config"))?.checked(what)?;
        let layers = raw
            .layers
            .ok_or_else(|| no("layers"))?
            .into_iter()
            .map(|d| d.checked(what))
            .collect::<Result<Vec<_>, _>>()?;
        if layers.len() >= MAX_BLOBS_PER_IMAGE {
            return Err(ImageError::TooMany {
                what: format!("the layers of {what}"),
                count: layers.len(),
                max: MAX_BLOBS_PER_IMAGE,
            });
        }
        Listing::Image { config, layers }
    };
    Ok(Manifest {
        media_type,
        listing,
    })
}

/// The manifest of an index's `children` that runs on `want` (the first, in the index's order),
/// as `crane pull --platform` picks it; entries without a platform (attestations list
/// `unknown/unknown`) never match.
pub fn select_platform<'a>(
    children: &'a [ContentDescriptor],
    want: &Platform,
) -> Result<&'a ContentDescriptor, ImageError> {
    children
        .iter()
        .find(|d| d.platform.as_ref().is_some_and(|p| want.accepts(p)))
        .ok_or_else(|| ImageError::NoPlatform {
            want: want.to_string(),
            have: children
                .iter()
                .filter_map(|d| d.platform.as_ref())
                .filter(|p| p.os != "unknown")
                .map(Platform::to_string)
                .collect(),
        })
}

/// The platform an image config states (`os`, `architecture`, `variant`), if it states one.
pub fn config_platform(bytes: &[u8]) -> Option<Platform> {
    let v: Value = serde_json::from_slice(bytes).ok()?;
    let os = v["os"].as_str().filter(|s| !s.is_empty())?;
    let architecture = v["architecture"].as_str().filter(|s| !s.is_empty())?;
    Some(Platform {
        os: os.to_string(),
        architecture: architecture.to_string(),
        variant: v["variant"]
            .as_str()
            .filter(|s| !s.is_empty())
            .map(str::to_string),
    })
}

/// The layout's `index.json`: one entry, `top`, named `reference` (the upstream image).
pub fn index_json(top: &ContentDescriptor, reference: &str) -> Vec<u8> {
    let mut entry = json!({
        "mediaType": top.media_type,
        "digest": top.digest,
        "size": top.size,
        "annotations": {REF_NAME: reference},
    });
    if let Some(p) = &top.platform {
        entry["platform"] = p.to_json();
    }
    let index = json!({
        "schemaVersion": 2,
        "mediaType": OCI_INDEX,
        "manifests": [entry],
    });
    // A Value of strings and numbers always serialises.
    serde_json::to_vec(&index).unwrap_or_default()
}

/// What an archive's `index.json` names: its one entry and the image it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LayoutEntry {
    pub top: ContentDescriptor,
    /// The upstream reference (`org.opencontainers.image.ref.name`).
    pub reference: String,
}

/// Reads an archive's `index.json`: exactly one manifest or index, named by `REF_NAME`.
pub fn read_index_json(bytes: &[u8]) -> Result<LayoutEntry, ImageError> {
    let what = INDEX_JSON;
    if bytes.len() > MAX_MANIFEST_BYTES {
        return Err(ImageError::TooLarge {
            what: what.into(),
            size: bytes.len() as u64,
            max: MAX_MANIFEST_BYTES as u64,
        });
    }
    let raw: RawManifest = serde_json::from_slice(bytes).map_err(|e| json_error(what, e))?;
    if raw.schema_version != Some(2) {
        return Err(ImageError::SchemaVersion {
            what: what.into(),
            version: raw.schema_version.unwrap_or(0),
        });
    }
    let mut entries = raw.manifests.unwrap_or_default();
    if entries.len() != 1 {
        return Err(ImageError::Layout(format!(
            "{what} lists {} manifests; an image archive lists one",
            entries.len()
        )));
    }
    let entry = entries.remove(0);
    let reference = entry
        .annotations
        .get(REF_NAME)
        .filter(|r| !r.is_empty())
        .cloned()
        .ok_or_else(|| ImageError::Layout(format!("{what} names no image ({REF_NAME})")))?;
    let top = entry.checked(what)?;
    if !top.is_manifest() {
        return Err(ImageError::MediaType {
            what: what.into(),
            media_type: top.media_type,
        });
    }
    Ok(LayoutEntry { top, reference })
}

/// The archive file of `image`: `image-<name>-<tag>.oci.tar` (the last path component, as the
/// mirror names it; a digest as `sha256-<hex>`), a plain file name of the bundle.
pub fn archive_name(image: &str) -> String {
    let last = image.rsplit('/').next().unwrap_or(image);
    let (name_tag, digest) = match last.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (last, None),
    };
    let (name, tag) = match name_tag.split_once(':') {
        Some((n, t)) => (n, Some(t)),
        None => (name_tag, None),
    };
    let mut parts = vec![name];
    parts.extend(tag);
    parts.extend(digest);
    if tag.is_none() && digest.is_none() {
        parts.push("latest");
    }
    let clean: String = parts
        .join("-")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '-'
            }
        })
        .collect();
    // A name of the bundle is at most 255 bytes; a longer one keeps its start and a hash of
    // the whole reference, so it stays one name per image.
    let body = if clean.len() > 200 {
        let hex = super::bundle::sha256_hex(image.as_bytes());
        format!("{}-{}", &clean[..180], &hex[..16])
    } else {
        clean
    };
    format!("image-{body}{ARCHIVE_SUFFIX}")
}

const ARCHIVE_SUFFIX: &str = ".oci.tar";

/// Whether a bundle file is an image archive.
pub fn is_archive_name(name: &str) -> bool {
    name.starts_with("image-") && name.ends_with(ARCHIVE_SUFFIX)
}

/// Each image of `images` with its archive name, checked: at most [`MAX_IMAGES`], and no two
/// that one mirror would hold under the same name (nor one archive).
pub fn archives(images: &[String]) -> Result<Vec<(String, String)>, ImageError> {
    if images.len() > MAX_IMAGES {
        return Err(ImageError::TooMany {
            what: "images".into(),
            count: images.len(),
            max: MAX_IMAGES,
        });
    }
    let mut seen: BTreeMap<String, &String> = BTreeMap::new();
    let mut out = Vec::new();
    for image in images {
        let name = archive_name(image);
        let in_mirror = mirrored(image, "");
        for key in [name.clone(), in_mirror.clone()] {
            if let Some(other) = seen.insert(key, image) {
                return Err(ImageError::Collision(
                    other.clone(),
                    image.clone(),
                    in_mirror.trim_start_matches('/').to_string(),
                ));
            }
        }
        out.push((image.clone(), name));
    }
    Ok(out)
}

/// Bytes of blobs counted against a bound: each blob at most [`MAX_BLOB_BYTES`], all of them
/// at most the budget's total.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Budget {
    used: u64,
    max: u64,
}

impl Budget {
    /// A budget of `max` bytes ([`MAX_BUNDLE_IMAGE_BYTES`] for a bundle).
    pub fn new(max: u64) -> Budget {
        Budget { used: 0, max }
    }

    /// Takes `size` bytes for blob `what`, or says which bound it passes.
    pub fn take(&mut self, what: &str, size: u64) -> Result<(), ImageError> {
        if size > MAX_BLOB_BYTES {
            return Err(ImageError::TooLarge {
                what: what.to_string(),
                size,
                max: MAX_BLOB_BYTES,
            });
        }
        match self.used.checked_add(size) {
            Some(total) if total <= self.max => {
                self.used = total;
                Ok(())
            }
            _ => Err(ImageError::TooLarge {
                what: format!("the bundle's images with {what}"),
                size: self.used.saturating_add(size),
                max: self.max,
            }),
        }
    }

    pub fn used(&self) -> u64 {
        self.used
    }
}

/// `n` bytes for people: `512 B`, `23.1 MiB`.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut value = n as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

#[cfg(test)]
mod tests;
