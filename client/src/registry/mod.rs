//! Container registries, for the init bundle's images: pull an image into an OCI image-layout
//! tar (`kubectl capi init bundle DIR --images`) and push such a tar to a site's mirror
//! (`kubectl capi init --from DIR --registry R`), over the OCI distribution API with
//! `oci-client` (anonymous, with the bearer-token dance registries ask for, or with basic
//! credentials from Docker's `config.json`).
//!
//! Blobs stream: from the registry into the archive file, each checked against its size and
//! digest as it is written; from the archive file to the registry, each sent only when a `HEAD`
//! says the registry lacks it. Only manifests, indexes and `index.json` (at most
//! [`MAX_MANIFEST_BYTES`] each) are held in memory. What an archive holds and which platform an
//! index gives are `kcore::init::images`' decisions.
//!
//! A loopback registry (`localhost`, `127.0.0.0/8`, `::1`) is spoken to over plain HTTP, as
//! Docker does without configuration; every other one over HTTPS (rustls with the ring
//! provider, the platform's trust store).

mod archive;
mod credentials;

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::time::Duration;

use futures::StreamExt;
use kcore::init::images::{
    Budget, ContentDescriptor, INDEX_JSON, ImageError, Listing, MANIFEST_TYPES,
    MAX_BLOBS_PER_IMAGE, MAX_MANIFEST_BYTES, Manifest, OCI_LAYOUT, OCI_LAYOUT_JSON, Platform,
    check_digest, config_platform, index_json, parse_manifest, select_platform, sha256_digest,
};
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::errors::OciDistributionError;
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference, RegistryOperation};

pub use archive::{Archive, open_archive};
use archive::{TarOut, file_range};
pub use credentials::Credentials;

/// How long connecting to a registry may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a registry may stay silent in the middle of an answer.
const READ_TIMEOUT: Duration = Duration::from_secs(120);
const USER_AGENT: &str = concat!("kubectl-capi/", env!("CARGO_PKG_VERSION"));

/// Why a pull, a push or reading an archive failed; one line each.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("{0:?} is not an image reference: {1}")]
    Reference(String, String),
    #[error("{0}")]
    Image(#[from] ImageError),
    #[error("the registry refused the credentials or the access: {0}")]
    Denied(String),
    #[error("{0}")]
    Registry(String),
    #[error("{what}: {why}")]
    Io { what: String, why: String },
    #[error("Docker's config {path} cannot be read: {why}")]
    DockerConfig { path: String, why: String },
}

impl RegistryError {
    /// Whether the registry said no to who we are (a `docker login` may help).
    pub fn is_denied(&self) -> bool {
        matches!(self, RegistryError::Denied(_))
    }
}

fn io(what: impl std::fmt::Display, e: impl std::fmt::Display) -> RegistryError {
    RegistryError::Io {
        what: what.to_string(),
        why: one_line(&e.to_string()),
    }
}

/// One line of at most 300 characters: registries answer with HTML pages and multi-line
/// envelopes.
fn one_line(text: &str) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match flat.char_indices().nth(300) {
        Some((at, _)) => format!("{}…", &flat[..at]),
        None => flat,
    }
}

/// An error and its causes, in one line.
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut src = e.source();
    while let Some(s) = src {
        let t = s.to_string();
        if !text.contains(&t) {
            text = format!("{text}: {t}");
        }
        src = s.source();
    }
    one_line(&text)
}

fn oci(e: OciDistributionError) -> RegistryError {
    use OciDistributionError as E;
    match &e {
        E::UnauthorizedError { url } => RegistryError::Denied(format!("401 Unauthorized at {url}")),
        E::AuthenticationFailure(why) => RegistryError::Denied(one_line(why)),
        E::RequestError(r) if matches!(r.status().map(|s| s.as_u16()), Some(401 | 403)) => {
            RegistryError::Denied(chain(&e))
        }
        E::ServerError { code, url, message } if *code == 401 || *code == 403 => {
            RegistryError::Denied(one_line(&format!("HTTP {code} at {url}: {message}")))
        }
        E::RegistryError { envelope, url }
            if envelope.errors.iter().any(|x| {
                use oci_client::errors::OciErrorCode as C;
                matches!(x.code, C::Unauthorized | C::Denied)
            }) =>
        {
            RegistryError::Denied(one_line(&format!("{url}: {envelope}")))
        }
        _ => RegistryError::Registry(chain(&e)),
    }
}

fn parse_reference(image: &str) -> Result<Reference, RegistryError> {
    image
        .parse::<Reference>()
        .map_err(|e| RegistryError::Reference(image.to_string(), e.to_string()))
}

/// The registry host an image reference names (`index.docker.io` for Docker Hub's short names),
/// for messages; the reference as it is when it does not parse.
pub fn host_of_image(image: &str) -> String {
    image
        .parse::<Reference>()
        .map_or_else(|_| image.to_string(), |r| r.resolve_registry().to_string())
}

/// Whether `host` (`HOST[:PORT]`) is this machine: `localhost`, `127.0.0.0/8`, `::1`.
pub fn is_loopback(host: &str) -> bool {
    let name = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']').next().unwrap_or(rest)
    } else if host.matches(':').count() > 1 {
        // A bare IPv6 address has colons of its own and no port.
        host
    } else {
        host.split(':').next().unwrap_or(host)
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Installs ring as the process's rustls provider: oci-client's reqwest is built without one
/// (no aws-lc) and takes the process's. Another provider installed first is kept.
fn tls_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// What an archive holds of its image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Archived {
    /// The manifest of this platform, picked from the image's index.
    Platform(Platform),
    /// The image's only manifest, of the platform its config states (if it states one).
    Single(Option<Platform>),
    /// The whole index a digest names, and its manifests.
    Index { manifests: usize },
}

/// An image pulled into an archive.
#[derive(Clone, Debug)]
pub struct Pulled {
    /// What `index.json` names.
    pub top: ContentDescriptor,
    pub archived: Archived,
    /// Configs and layers written.
    pub blobs: usize,
    /// The archive file's size and hex SHA-256.
    pub size: u64,
    pub sha256: String,
}

/// An archive pushed to a registry.
#[derive(Clone, Debug, Default)]
pub struct Pushed {
    /// Blobs sent, and their bytes.
    pub sent: usize,
    pub bytes_sent: u64,
    /// Blobs the registry had already.
    pub present: usize,
    pub manifests: usize,
}

/// The registries one command talks to: a client per host (plain HTTP for loopback ones) and
/// the credentials to give each.
pub struct Registries {
    clients: HashMap<String, Client>,
    credentials: Credentials,
}

impl Registries {
    pub fn new(credentials: Credentials) -> Registries {
        Registries {
            clients: HashMap::new(),
            credentials,
        }
    }

    fn client(&mut self, host: &str) -> Result<(Client, RegistryAuth), RegistryError> {
        let auth = self.credentials.auth_for(host);
        if let Some(c) = self.clients.get(host) {
            return Ok((c.clone(), auth));
        }
        tls_provider();
        let config = ClientConfig {
            protocol: if is_loopback(host) {
                ClientProtocol::Http
            } else {
                ClientProtocol::Https
            },
            // Indexes are read here (kcore::init::images::select_platform), never resolved by
            // the client.
            platform_resolver: None,
            // One PUT per blob, its length known: the archive says it.
            use_monolithic_push: true,
            connect_timeout: Some(CONNECT_TIMEOUT),
            read_timeout: Some(READ_TIMEOUT),
            user_agent: USER_AGENT,
            ..Default::default()
        };
        let client = Client::try_from(config).map_err(|e| {
            RegistryError::Registry(format!("cannot set up a client: {}", chain(&e)))
        })?;
        self.clients.insert(host.to_string(), client.clone());
        Ok((client, auth))
    }

    /// Pulls `source` into a new archive file `out`, named `reference` (the upstream image):
    /// by tag, the manifest of `platform` when `source` names an index; by digest, exactly what
    /// the digest names. Each blob is counted against `budget` before it is fetched.
    pub async fn pull(
        &mut self,
        source: &str,
        reference: &str,
        platform: &Platform,
        out: &Path,
        budget: &mut Budget,
    ) -> Result<Pulled, RegistryError> {
        let src = parse_reference(source)?;
        let (client, auth) = self.client(src.resolve_registry())?;
        let (top_bytes, _) = client
            .pull_manifest_raw(&src, &auth, &MANIFEST_TYPES)
            .await
            .map_err(oci)?;
        let top_digest = sha256_digest(&top_bytes);
        if let Some(pinned) = src.digest()
            && pinned != top_digest
        {
            return Err(ImageError::Mismatch {
                what: "its manifest".into(),
                expected: pinned.to_string(),
                actual: top_digest,
            }
            .into());
        }
        let top_manifest = parse_manifest("its manifest", &top_bytes, None)?;
        let own = |platform: Option<Platform>| ContentDescriptor {
            media_type: top_manifest.media_type.clone(),
            digest: top_digest.clone(),
            size: top_bytes.len() as u64,
            platform,
        };
        // The manifests to write (with their bytes), the image manifests among them, and the
        // one image's config when there is one image: it says the platform, and it is small,
        // so it is read first and written from memory.
        let mut manifests: Vec<(ContentDescriptor, Vec<u8>)> = Vec::new();
        let mut images: Vec<Manifest> = Vec::new();
        let mut config_bytes: Option<(String, Vec<u8>)> = None;
        let (top, archived) = match &top_manifest.listing {
            Listing::Index(children) if src.digest().is_some() => {
                manifests.push((own(None), top_bytes.to_vec()));
                for child in children {
                    let (m, bytes) = fetch_manifest(&client, &auth, &src, child).await?;
                    manifests.push((child.clone(), bytes));
                    images.push(m);
                }
                let archived = Archived::Index {
                    manifests: children.len(),
                };
                (own(None), archived)
            }
            Listing::Index(children) => {
                let child = select_platform(children, platform)?;
                let (m, bytes) = fetch_manifest(&client, &auth, &src, child).await?;
                manifests.push((child.clone(), bytes));
                images.push(m);
                let picked = child.platform.clone().unwrap_or_else(|| platform.clone());
                (child.clone(), Archived::Platform(picked))
            }
            Listing::Image { config, .. } => {
                let bytes = fetch_small(&client, &src, config).await?;
                let stated = config_platform(&bytes);
                config_bytes = Some((config.digest.clone(), bytes));
                let top = own(stated.clone());
                manifests.push((top.clone(), top_bytes.to_vec()));
                images.push(top_manifest.clone());
                (top, Archived::Single(stated))
            }
        };
        let mut seen = BTreeSet::new();
        let blobs: Vec<ContentDescriptor> = images
            .iter()
            .flat_map(Manifest::blobs)
            .filter(|d| seen.insert(d.digest.clone()))
            .cloned()
            .collect();
        if blobs.len() > MAX_BLOBS_PER_IMAGE {
            return Err(ImageError::TooMany {
                what: "its blobs".into(),
                count: blobs.len(),
                max: MAX_BLOBS_PER_IMAGE,
            }
            .into());
        }
        for (d, _) in &manifests {
            budget.take(&d.digest, d.size)?;
        }
        for d in &blobs {
            budget.take(&d.digest, d.size)?;
        }

        let mut tar = TarOut::create(out).await?;
        tar.file(OCI_LAYOUT, OCI_LAYOUT_JSON.as_bytes()).await?;
        tar.file(INDEX_JSON, &index_json(&top, reference)).await?;
        tar.dir("blobs/").await?;
        tar.dir("blobs/sha256/").await?;
        let mut written = BTreeSet::new();
        for (d, bytes) in &manifests {
            if written.insert(d.digest.clone()) {
                tar.file(&d.path(), bytes).await?;
            }
        }
        for d in &blobs {
            if !written.insert(d.digest.clone()) {
                continue;
            }
            match &config_bytes {
                Some((digest, bytes)) if *digest == d.digest => tar.file(&d.path(), bytes).await?,
                _ => tar.blob(&client, &src, d).await?,
            }
        }
        let (size, sha256) = tar.finish().await?;
        Ok(Pulled {
            top,
            archived,
            blobs: blobs.len(),
            size,
            sha256,
        })
    }

    /// Pushes `archive` to `target` (`HOST[:PORT]/REPOSITORY[:TAG][@DIGEST]`): each blob the
    /// registry lacks (a `HEAD` first), then the manifests, the top one under the target's tag
    /// (and digest).
    pub async fn push(&mut self, archive: &Archive, target: &str) -> Result<Pushed, RegistryError> {
        let dst = parse_reference(target)?;
        // A pinned reference runs only the content its digest names.
        if let Some(pinned) = dst.digest()
            && pinned != archive.top.digest
        {
            return Err(ImageError::Mismatch {
                what: "the archive's image".into(),
                expected: pinned.to_string(),
                actual: archive.top.digest.clone(),
            }
            .into());
        }
        let (client, auth) = self.client(dst.resolve_registry())?;
        client
            .auth(&dst, &auth, RegistryOperation::Push)
            .await
            .map_err(oci)?;
        let mut pushed = Pushed::default();
        for (d, offset) in &archive.blobs {
            if client.blob_exists(&dst, &d.digest).await.map_err(oci)? {
                pushed.present += 1;
                continue;
            }
            let body = file_range(archive.path.clone(), *offset, d.size);
            match client
                .push_blob_stream(&dst, body, &d.digest, Some(d.size))
                .await
            {
                Ok(_) => {}
                // The registry answered 201 without the Location the distribution spec asks
                // for (go-containerregistry's `crane registry serve` does): a HEAD says
                // whether it stored the blob.
                Err(OciDistributionError::RegistryNoLocationError) => {
                    if !client.blob_exists(&dst, &d.digest).await.map_err(oci)? {
                        return Err(RegistryError::Registry(format!(
                            "blob {} was sent but the registry does not have it",
                            d.digest
                        )));
                    }
                }
                Err(e) => return Err(oci(e)),
            }
            pushed.sent += 1;
            pushed.bytes_sent = pushed.bytes_sent.saturating_add(d.size);
        }
        let (registry, repository) = (dst.registry().to_string(), dst.repository().to_string());
        // By digest, as a reference whose tag is its digest too: oci-client 0.18's
        // push_manifest_raw, when a registry answers without a Location, cuts the tag (or
        // "latest") off the end of the manifest URL, which ends with the digest here.
        let by_digest = |digest: &str| {
            Reference::with_tag_and_digest(
                registry.clone(),
                repository.clone(),
                digest.into(),
                digest.into(),
            )
        };
        for (i, (d, bytes)) in archive.manifests.iter().enumerate() {
            let content_type = http::HeaderValue::from_str(&d.media_type)
                .map_err(|_| ImageError::Layout(format!("media type {:?}", d.media_type)))?;
            let last = i + 1 == archive.manifests.len();
            let mut refs = Vec::new();
            if !last || dst.digest().is_some() {
                refs.push(by_digest(&d.digest));
            }
            if last && let Some(tag) = dst.tag() {
                refs.push(Reference::with_tag(
                    registry.clone(),
                    repository.clone(),
                    tag.to_string(),
                ));
            }
            for r in refs {
                client
                    .push_manifest_raw(&r, bytes.clone(), content_type.clone())
                    .await
                    .map_err(oci)?;
            }
            pushed.manifests += 1;
        }
        Ok(pushed)
    }
}

/// A manifest an index lists, by digest: its bytes checked against the descriptor.
async fn fetch_manifest(
    client: &Client,
    auth: &RegistryAuth,
    src: &Reference,
    d: &ContentDescriptor,
) -> Result<(Manifest, Vec<u8>), RegistryError> {
    check_size(d)?;
    let r = Reference::with_digest(
        src.registry().to_string(),
        src.repository().to_string(),
        d.digest.clone(),
    );
    let (bytes, _) = client
        .pull_manifest_raw(&r, auth, &MANIFEST_TYPES)
        .await
        .map_err(oci)?;
    verify(d, &bytes)?;
    let what = format!("manifest {}", d.digest);
    let m = parse_manifest(&what, &bytes, Some(&d.media_type))?;
    if let Listing::Index(_) = m.listing {
        return Err(ImageError::NestedIndex { what }.into());
    }
    Ok((m, bytes.to_vec()))
}

/// A small blob (an image config) in memory, checked.
async fn fetch_small(
    client: &Client,
    src: &Reference,
    d: &ContentDescriptor,
) -> Result<Vec<u8>, RegistryError> {
    check_size(d)?;
    let mut stream = client
        .pull_blob_stream(src, d.digest.as_str())
        .await
        .map_err(oci)?;
    let mut out = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| io(format!("blob {}", d.digest), e))?;
        if out.len().saturating_add(chunk.len()) > MAX_MANIFEST_BYTES {
            return Err(too_long(d));
        }
        out.extend_from_slice(&chunk);
    }
    verify(d, &out)?;
    Ok(out)
}

fn check_size(d: &ContentDescriptor) -> Result<(), RegistryError> {
    check_digest(&d.digest)?;
    if d.size > MAX_MANIFEST_BYTES as u64 {
        return Err(ImageError::TooLarge {
            what: d.digest.clone(),
            size: d.size,
            max: MAX_MANIFEST_BYTES as u64,
        }
        .into());
    }
    Ok(())
}

fn too_long(d: &ContentDescriptor) -> RegistryError {
    ImageError::Layout(format!(
        "blob {} is longer than the {} bytes its descriptor gives",
        d.digest, d.size
    ))
    .into()
}

/// Checks `bytes` are what `d` names.
fn verify(d: &ContentDescriptor, bytes: &[u8]) -> Result<(), RegistryError> {
    let actual = sha256_digest(bytes);
    if bytes.len() as u64 != d.size || actual != d.digest {
        return Err(ImageError::Mismatch {
            what: format!("{} bytes", bytes.len()),
            expected: format!("{} ({} bytes)", d.digest, d.size),
            actual,
        }
        .into());
    }
    Ok(())
}

#[cfg(test)]
mod tests;
