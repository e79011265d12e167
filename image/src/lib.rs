//! The reconciler's container image, written as an OCI image layout without a container daemon.
//!
//! One layer per platform holds the static binary and the few files a distroless `nonroot`
//! base gives (`/etc/passwd` and `/etc/group` naming uid/gid 65532, a home, a sticky `/tmp`);
//! the config runs the binary as 65532:65532. Every byte is a function of the inputs: entries
//! are written in a fixed order with one timestamp (`created`, from `SOURCE_DATE_EPOCH` in
//! `make image`), uid/gid numbers without names, gzip without a file name or time, and JSON
//! with sorted keys. So two builds of the same binary give the same digest, and the release
//! workflow publishes the bytes `make image` writes (OCI image-spec v1.1: image-layout.md,
//! manifest.md, config.md).

use std::io::Write;
use std::path::{Path, PathBuf};

use flate2::Compression;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

pub const MEDIA_INDEX: &str = "application/vnd.oci.image.index.v1+json";
pub const MEDIA_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
pub const MEDIA_CONFIG: &str = "application/vnd.oci.image.config.v1+json";
pub const MEDIA_LAYER: &str = "application/vnd.oci.image.layer.v1.tar+gzip";

/// The user and group the image runs as (distroless's `nonroot`).
pub const NONROOT: u32 = 65532;

/// A binary bigger than this is refused (the reconciler is about 15 MB).
pub const MAX_BINARY: u64 = 512 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0}")]
    Input(String),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// An OS and architecture, as OCI names them (`linux/amd64`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Platform {
    pub os: String,
    pub arch: String,
}

impl Platform {
    pub fn parse(s: &str) -> Result<Platform, Error> {
        match s.split_once('/') {
            Some(("linux", arch @ ("amd64" | "arm64"))) => Ok(Platform {
                os: "linux".into(),
                arch: arch.into(),
            }),
            _ => Err(Error::Input(format!(
                "platform {s:?} is not one this image is built for; use linux/amd64 or linux/arm64"
            ))),
        }
    }

    /// ELF `e_machine` of a binary for this platform.
    fn elf_machine(&self) -> u16 {
        if self.arch == "arm64" { 183 } else { 62 }
    }
}

/// What goes into the image, besides the binaries.
#[derive(Clone, Debug)]
pub struct Spec {
    /// The image's name (`kamaji-reconciler`): the layout's folder and the tarball's name.
    pub name: String,
    /// Where the binary lives in the image, and the entrypoint.
    pub entrypoint: String,
    /// `org.opencontainers.image.ref.name` in the layout's index (the tag).
    pub tag: String,
    pub version: String,
    pub revision: Option<String>,
    pub description: String,
    pub source: String,
    pub licenses: String,
    /// Seconds since the epoch: every timestamp in the image.
    pub created: i64,
    /// Ports the config declares (`8080/tcp`).
    pub ports: Vec<String>,
}

/// What [`write`] wrote.
#[derive(Clone, Debug)]
pub struct Written {
    /// The digest a registry gives the pushed image: the manifest's for one platform, the
    /// index's for several.
    pub digest: String,
    /// The OCI image layout folder (`crane push <layout> REF`, with `--index` for several).
    pub layout: PathBuf,
    /// The layout as one tarball.
    pub tarball: PathBuf,
    /// Bytes of the compressed layers, per platform.
    pub layer_sizes: Vec<u64>,
}

/// A content-addressed blob.
struct Blob {
    digest: String,
    bytes: Vec<u8>,
}

impl Blob {
    fn of(bytes: Vec<u8>) -> Blob {
        Blob {
            digest: sha256(&bytes),
            bytes,
        }
    }
    fn descriptor(&self, media: &str) -> Value {
        json!({"mediaType": media, "digest": self.digest, "size": self.bytes.len()})
    }
}

pub fn sha256(bytes: &[u8]) -> String {
    let d = Sha256::digest(bytes);
    let mut s = String::with_capacity(71);
    s.push_str("sha256:");
    for b in d {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// Refuses anything but a statically linked ELF executable for `platform`: the image has no
/// libc or loader, so a dynamic binary would fail only when the pod starts.
pub fn check_static(bytes: &[u8], platform: &Platform, path: &Path) -> Result<(), Error> {
    let bad = |why: &str| {
        Error::Input(format!(
            "{}: {why}; build it with `make image` (a static musl build)",
            path.display()
        ))
    };
    if bytes.len() < 64 || &bytes[..4] != b"\x7fELF" || bytes[4] != 2 || bytes[5] != 1 {
        return Err(bad("not a 64-bit little-endian ELF executable"));
    }
    let u16_at = |o: usize| u16::from_le_bytes([bytes[o], bytes[o + 1]]);
    if u16_at(0x12) != platform.elf_machine() {
        return Err(bad(&format!(
            "built for another architecture than {}",
            platform.arch
        )));
    }
    let mut off = [0u8; 8];
    off.copy_from_slice(&bytes[0x20..0x28]);
    let phoff = usize::try_from(u64::from_le_bytes(off)).map_err(|_| bad("corrupt ELF header"))?;
    let phentsize = usize::from(u16_at(0x36));
    let phnum = usize::from(u16_at(0x38));
    for i in 0..phnum {
        let start = i
            .checked_mul(phentsize)
            .and_then(|x| x.checked_add(phoff))
            .filter(|s| s.checked_add(4).is_some_and(|e| e <= bytes.len()))
            .ok_or_else(|| bad("corrupt ELF program headers"))?;
        let p_type = u32::from_le_bytes([
            bytes[start],
            bytes[start + 1],
            bytes[start + 2],
            bytes[start + 3],
        ]);
        // PT_INTERP: the binary names a dynamic loader.
        if p_type == 3 {
            return Err(bad("dynamically linked (it names a program interpreter)"));
        }
    }
    Ok(())
}

/// One entry of the layer.
enum Entry<'a> {
    Dir(String, u32, u32),
    File(String, u32, &'a [u8]),
}

/// The layer: a tar of the base files and the binary, gzip-compressed. Returns (compressed,
/// digest of the uncompressed tar).
fn layer(spec: &Spec, binary: &[u8]) -> Result<(Vec<u8>, String), Error> {
    let passwd = format!(
        "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:{NONROOT}:{NONROOT}:nonroot:/home/nonroot:/sbin/nologin\n"
    );
    let group = format!("root:x:0:\nnonroot:x:{NONROOT}:\n");
    let entry = spec.entrypoint.trim_start_matches('/').to_string();
    let mut entries = vec![
        Entry::Dir("etc/".into(), 0o755, 0),
        Entry::File("etc/group".into(), 0o644, group.as_bytes()),
        Entry::File("etc/passwd".into(), 0o644, passwd.as_bytes()),
        Entry::Dir("home/".into(), 0o755, 0),
        Entry::Dir("home/nonroot/".into(), 0o700, NONROOT),
        Entry::Dir("tmp/".into(), 0o1777, 0),
    ];
    // The binary's parent folders (those the base has not made), then the binary.
    let mut acc = String::new();
    let parts: Vec<&str> = entry.split('/').collect();
    for part in &parts[..parts.len().saturating_sub(1)] {
        acc.push_str(part);
        acc.push('/');
        if !["etc/", "home/", "tmp/"].contains(&acc.as_str()) {
            entries.push(Entry::Dir(acc.clone(), 0o755, 0));
        }
    }
    entries.push(Entry::File(entry, 0o755, binary));

    let mut tar = tar::Builder::new(Vec::new());
    for e in &entries {
        let mut h = tar::Header::new_ustar();
        h.set_mtime(u64::try_from(spec.created).unwrap_or(0));
        let (path, data): (&str, &[u8]) = match e {
            Entry::Dir(p, mode, owner) => {
                h.set_entry_type(tar::EntryType::Directory);
                h.set_mode(*mode);
                h.set_uid(u64::from(*owner));
                h.set_gid(u64::from(*owner));
                h.set_size(0);
                (p.as_str(), &[])
            }
            Entry::File(p, mode, data) => {
                h.set_entry_type(tar::EntryType::Regular);
                h.set_mode(*mode);
                h.set_uid(0);
                h.set_gid(0);
                h.set_size(data.len() as u64);
                (p.as_str(), data)
            }
        };
        tar.append_data(&mut h, path, data)
            .map_err(io(Path::new(path)))?;
    }
    let raw = tar.into_inner().map_err(io(Path::new("layer")))?;
    let diff_id = sha256(&raw);
    // No file name and a zero time: the gzip header is the same on every build.
    let mut gz = flate2::GzBuilder::new()
        .mtime(0)
        .write(Vec::new(), Compression::best());
    gz.write_all(&raw).map_err(io(Path::new("layer")))?;
    let compressed = gz.finish().map_err(io(Path::new("layer")))?;
    Ok((compressed, diff_id))
}

fn rfc3339(secs: i64) -> Result<String, Error> {
    jiff::Timestamp::from_second(secs)
        .map(|t| t.to_string())
        .map_err(|e| Error::Input(format!("created time {secs}: {e}")))
}

fn json_bytes(v: &Value) -> Vec<u8> {
    // serde_json's map keeps keys sorted (no preserve_order feature): stable bytes.
    serde_json::to_vec(v).unwrap_or_default()
}

/// The image config, the layer and the manifest of one platform.
fn image(spec: &Spec, platform: &Platform, binary: &[u8]) -> Result<(Blob, Blob, Blob), Error> {
    let created = rfc3339(spec.created)?;
    let (layer_bytes, diff_id) = layer(spec, binary)?;
    let layer = Blob::of(layer_bytes);
    let mut labels = json!({
        "org.opencontainers.image.title": spec.name,
        "org.opencontainers.image.description": spec.description,
        "org.opencontainers.image.version": spec.version,
        "org.opencontainers.image.source": spec.source,
        "org.opencontainers.image.licenses": spec.licenses,
        "org.opencontainers.image.created": created,
    });
    if let Some(r) = &spec.revision {
        labels["org.opencontainers.image.revision"] = json!(r);
    }
    let ports: serde_json::Map<String, Value> =
        spec.ports.iter().map(|p| (p.clone(), json!({}))).collect();
    let config = Blob::of(json_bytes(&json!({
        "created": created,
        "architecture": platform.arch,
        "os": platform.os,
        "config": {
            "User": format!("{NONROOT}:{NONROOT}"),
            "Entrypoint": [spec.entrypoint],
            "Env": ["PATH=/usr/local/bin:/usr/bin:/bin"],
            "WorkingDir": "/",
            "ExposedPorts": ports,
            "Labels": labels,
        },
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created": created, "created_by": "oci-image (make image): static binary on a nonroot base"}],
    })));
    let manifest = Blob::of(json_bytes(&json!({
        "schemaVersion": 2,
        "mediaType": MEDIA_MANIFEST,
        "config": config.descriptor(MEDIA_CONFIG),
        "layers": [layer.descriptor(MEDIA_LAYER)],
    })));
    Ok((config, layer, manifest))
}

/// Writes `<out>/<name>/` (an OCI image layout), `<out>/<name>.oci.tar` and
/// `<out>/<name>.digest`, replacing what an earlier run left there only once everything is
/// written. One binary per platform.
pub fn write(spec: &Spec, binaries: &[(Platform, PathBuf)], out: &Path) -> Result<Written, Error> {
    if binaries.is_empty() {
        return Err(Error::Input(
            "no binary given; pass --binary linux/amd64=PATH".into(),
        ));
    }
    if spec.name.is_empty()
        || !spec
            .name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    {
        return Err(Error::Input(format!(
            "image name {:?} must be lower-case letters, digits and '-'",
            spec.name
        )));
    }
    let mut blobs: Vec<Blob> = Vec::new();
    let mut manifests = Vec::new();
    let mut layer_sizes = Vec::new();
    for (i, (platform, path)) in binaries.iter().enumerate() {
        if binaries[..i].iter().any(|(p, _)| p == platform) {
            return Err(Error::Input(format!(
                "{}/{} is given twice",
                platform.os, platform.arch
            )));
        }
        let len = std::fs::metadata(path).map_err(io(path))?.len();
        if len > MAX_BINARY {
            return Err(Error::Input(format!(
                "{}: {len} bytes is over the {MAX_BINARY}-byte bound",
                path.display()
            )));
        }
        let bytes = std::fs::read(path).map_err(io(path))?;
        check_static(&bytes, platform, path)?;
        let (config, layer, manifest) = image(spec, platform, &bytes)?;
        layer_sizes.push(layer.bytes.len() as u64);
        let mut d = manifest.descriptor(MEDIA_MANIFEST);
        d["platform"] = json!({"os": platform.os, "architecture": platform.arch});
        manifests.push((d, manifest.digest.clone()));
        blobs.extend([config, layer, manifest]);
    }
    let ref_name = json!({"org.opencontainers.image.ref.name": spec.tag});
    // One platform: the layout's index names the image's manifest, which crane pushes as the
    // image. Several: it names an image index blob (pushed with `crane push --index`, whose
    // digest is that of the layout's index.json).
    let (index, digest) = if manifests.len() == 1 {
        let (mut d, digest) = manifests.remove(0);
        d["annotations"] = ref_name;
        let index = json!({"schemaVersion": 2, "mediaType": MEDIA_INDEX, "manifests": [d]});
        (json_bytes(&index), digest)
    } else {
        let list: Vec<Value> = manifests.into_iter().map(|(d, _)| d).collect();
        let mut index = json!({"schemaVersion": 2, "mediaType": MEDIA_INDEX, "manifests": list});
        index["annotations"] = ref_name;
        let bytes = json_bytes(&index);
        let digest = sha256(&bytes);
        (bytes, digest)
    };

    std::fs::create_dir_all(out).map_err(io(out))?;
    let tmp = out.join(format!(".{}.tmp-{}", spec.name, std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let layout_tmp = tmp.join("layout");
    let blob_dir = layout_tmp.join("blobs").join("sha256");
    std::fs::create_dir_all(&blob_dir).map_err(io(&blob_dir))?;
    let oci_layout = json_bytes(&json!({"imageLayoutVersion": "1.0.0"}));
    // The layout's files, in the order the tarball lists them.
    let mut files: Vec<(String, Vec<u8>)> = vec![
        ("oci-layout".into(), oci_layout),
        ("index.json".into(), index),
    ];
    blobs.sort_by(|a, b| a.digest.cmp(&b.digest));
    blobs.dedup_by(|a, b| a.digest == b.digest);
    for b in blobs {
        let hex = b.digest.trim_start_matches("sha256:").to_string();
        files.push((format!("blobs/sha256/{hex}"), b.bytes));
    }
    let mut tar = tar::Builder::new(Vec::new());
    for (rel, bytes) in &files {
        let p = layout_tmp.join(rel);
        std::fs::write(&p, bytes).map_err(io(&p))?;
        let mut h = tar::Header::new_ustar();
        h.set_entry_type(tar::EntryType::Regular);
        h.set_mode(0o644);
        h.set_uid(0);
        h.set_gid(0);
        h.set_mtime(u64::try_from(spec.created).unwrap_or(0));
        h.set_size(bytes.len() as u64);
        tar.append_data(&mut h, rel, bytes.as_slice())
            .map_err(io(&p))?;
    }
    let tar_bytes = tar.into_inner().map_err(io(&tmp))?;
    let tar_tmp = tmp.join("image.oci.tar");
    std::fs::write(&tar_tmp, &tar_bytes).map_err(io(&tar_tmp))?;
    let digest_tmp = tmp.join("digest");
    std::fs::write(&digest_tmp, format!("{digest}\n")).map_err(io(&digest_tmp))?;

    // Everything is written: move it into place.
    let layout = out.join(&spec.name);
    let tarball = out.join(format!("{}.oci.tar", spec.name));
    let digest_file = out.join(format!("{}.digest", spec.name));
    if layout.exists() {
        std::fs::remove_dir_all(&layout).map_err(io(&layout))?;
    }
    std::fs::rename(&layout_tmp, &layout).map_err(io(&layout))?;
    std::fs::rename(&tar_tmp, &tarball).map_err(io(&tarball))?;
    std::fs::rename(&digest_tmp, &digest_file).map_err(io(&digest_file))?;
    let _ = std::fs::remove_dir_all(&tmp);
    Ok(Written {
        digest,
        layout,
        tarball,
        layer_sizes,
    })
}

#[cfg(test)]
mod tests;
