use kcore::init::images::{OCI_MANIFEST, REF_NAME};

use super::archive::{TarOut, file_range};
use super::*;

#[test]
fn loopback_registries_are_plain_http_and_others_https() {
    for host in [
        "localhost",
        "localhost:5000",
        "127.0.0.1:5000",
        "127.1.2.3",
        "[::1]:5000",
        "::1",
    ] {
        assert!(is_loopback(host), "{host}");
    }
    for host in [
        "registry.k8s.io",
        "10.0.0.1:5000",
        "mirror.local:5000",
        "[::2]:5000",
        "localhost.example.com",
    ] {
        assert!(!is_loopback(host), "{host}");
    }
}

#[test]
fn docker_config_credentials_go_to_their_host_only() {
    use base64::Engine;
    let auth = base64::engine::general_purpose::STANDARD.encode("alice:s3cr:et");
    let text = format!(
        r#"{{"auths": {{
                "mirror.local:5000": {{"auth": "{auth}"}},
                "https://index.docker.io/v1/": {{"auth": "{auth}"}},
                "https://quay.io": {{"username": "bob", "password": "pw"}},
                "ghcr.io": {{}}
            }}, "credsStore": "desktop"}}"#
    );
    let c = Credentials::parse(&text).unwrap();
    let basic = |u: &str, p: &str| RegistryAuth::Basic(u.into(), p.into());
    assert_eq!(c.auth_for("mirror.local:5000"), basic("alice", "s3cr:et"));
    assert_eq!(c.auth_for("index.docker.io"), basic("alice", "s3cr:et"));
    assert_eq!(c.auth_for("quay.io"), basic("bob", "pw"));
    assert_eq!(c.auth_for("ghcr.io"), RegistryAuth::Anonymous);
    assert_eq!(c.auth_for("mirror.local"), RegistryAuth::Anonymous);
    assert!(Credentials::parse("{").is_err());
    let e = Credentials::parse(r#"{"auths": {"x": {"auth": "%%%"}}}"#).unwrap_err();
    assert!(e.contains("auths.x.auth is not base64"), "{e}");
    assert!(Credentials::parse("{}").unwrap().by_host.is_empty());
}

#[test]
fn a_client_is_built_for_https_and_http_registries() {
    // Building reqwest's client needs a rustls provider (ring here) or it panics.
    let mut r = Registries::new(Credentials::default());
    r.client("registry.k8s.io").unwrap();
    r.client("127.0.0.1:5000").unwrap();
    assert_eq!(r.clients.len(), 2);
    assert_eq!(
        rustls::crypto::CryptoProvider::get_default().map(|p| p.cipher_suites.len()),
        Some(rustls::crypto::ring::default_provider().cipher_suites.len())
    );
}

#[test]
fn registry_answers_become_one_line() {
    let long = format!("<html>\n<body>\n{}</body></html>", "x".repeat(400));
    let line = one_line(&long);
    assert!(
        !line.contains('\n') && line.chars().count() <= 301,
        "{line}"
    );
    let e = oci(OciDistributionError::ServerError {
        code: 403,
        url: "https://r/v2/".into(),
        message: "no\nway".into(),
    });
    assert!(e.is_denied());
    assert_eq!(
        e.to_string(),
        "the registry refused the credentials or the access: HTTP 403 at https://r/v2/: no way"
    );
    let e = oci(OciDistributionError::ServerError {
        code: 500,
        url: "u".into(),
        message: "boom".into(),
    });
    assert!(!e.is_denied());
}

/// Writes an archive of one image (a config and a layer) as `pull` lays it out.
async fn write(path: &Path, layer: &[u8]) -> (ContentDescriptor, ContentDescriptor) {
    let config = br#"{"architecture":"amd64","os":"linux"}"#;
    let blob = |media: &str, bytes: &[u8]| ContentDescriptor {
        media_type: media.into(),
        digest: sha256_digest(bytes),
        size: bytes.len() as u64,
        platform: None,
    };
    let (c, l) = (
        blob("application/vnd.oci.image.config.v1+json", config),
        blob("application/vnd.oci.image.layer.v1.tar+gzip", layer),
    );
    let manifest = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2, "mediaType": OCI_MANIFEST,
        "config": {"mediaType": c.media_type, "digest": c.digest, "size": c.size},
        "layers": [{"mediaType": l.media_type, "digest": l.digest, "size": l.size}],
    }))
    .unwrap();
    let top = ContentDescriptor {
        platform: Some(Platform::parse("linux/amd64").unwrap()),
        ..blob(OCI_MANIFEST, &manifest)
    };
    let mut tar = TarOut::create(path).await.unwrap();
    tar.file(OCI_LAYOUT, OCI_LAYOUT_JSON.as_bytes())
        .await
        .unwrap();
    tar.file(INDEX_JSON, &index_json(&top, "quay.io/x/y:v1"))
        .await
        .unwrap();
    tar.dir("blobs/").await.unwrap();
    tar.dir("blobs/sha256/").await.unwrap();
    tar.file(&top.path(), &manifest).await.unwrap();
    tar.file(&c.path(), config).await.unwrap();
    tar.file(&l.path(), layer).await.unwrap();
    let (size, sum) = tar.finish().await.unwrap();
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(size, bytes.len() as u64);
    assert_eq!(sum, kcore::init::bundle::sha256_hex(&bytes));
    assert_eq!(size % 512, 0);
    (top, l)
}

#[tokio::test]
async fn an_archive_reads_back_with_its_blobs_where_the_tar_puts_them() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("image-y-v1.oci.tar");
    let layer: Vec<u8> = (0..3000u32).map(|i| (i % 251) as u8).collect();
    let (top, l) = write(&path, &layer).await;
    let a = open_archive(&path).await.unwrap();
    assert_eq!(a.reference, "quay.io/x/y:v1");
    assert_eq!(a.top, top);
    assert_eq!(a.manifests.len(), 1);
    assert_eq!(a.blobs.len(), 2);
    let (d, offset) = a.blobs.iter().find(|(d, _)| d.digest == l.digest).unwrap();
    assert_eq!(a.blob_bytes(), d.size + a.blobs[0].0.size);
    let mut sent = Vec::new();
    let mut s = Box::pin(file_range(path.clone(), *offset, d.size));
    while let Some(piece) = s.next().await {
        sent.extend_from_slice(&piece.unwrap());
    }
    assert_eq!(sent, layer);

    // Any tar reader sees the layout.
    let mut names = Vec::new();
    let mut t = tar::Archive::new(std::fs::File::open(&path).unwrap());
    for e in t.entries().unwrap() {
        names.push(e.unwrap().path().unwrap().display().to_string());
    }
    assert_eq!(
        names[..4],
        ["oci-layout", "index.json", "blobs/", "blobs/sha256/"]
    );
    let index: serde_json::Value = serde_json::from_slice(&index_json(&top, "r")).unwrap();
    assert_eq!(index["manifests"][0]["annotations"][REF_NAME], "r");
}

#[tokio::test]
async fn an_archive_missing_a_blob_or_with_a_changed_manifest_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.oci.tar");
    let (top, _) = write(&path, b"layer").await;
    // The manifest's bytes changed in place: its digest no longer matches.
    let mut bytes = std::fs::read(&path).unwrap();
    let at = bytes.windows(8).position(|w| w == b"\"layers\"").unwrap();
    bytes[at + 1] = b'L';
    let changed = dir.path().join("changed.oci.tar");
    std::fs::write(&changed, &bytes).unwrap();
    let e = open_archive(&changed).await.unwrap_err().to_string();
    assert!(
        e.contains(&format!("does not match its digest {}", top.digest)),
        "{e}"
    );
    // A layout without the layer.
    let short = dir.path().join("short.oci.tar");
    let mut tar = TarOut::create(&short).await.unwrap();
    let a = open_archive(&path).await.unwrap();
    tar.file(INDEX_JSON, &index_json(&a.top, "r"))
        .await
        .unwrap();
    tar.file(&a.top.path(), &a.manifests[0].1).await.unwrap();
    tar.finish().await.unwrap();
    let e = open_archive(&short).await.unwrap_err().to_string();
    assert!(e.starts_with("it has no blobs/sha256/"), "{e}");
    // And an archive that is not a tar of a layout at all.
    let junk = dir.path().join("junk.oci.tar");
    std::fs::write(&junk, vec![7u8; 2048]).unwrap();
    assert!(open_archive(&junk).await.is_err());
}

#[test]
fn messages_name_the_registry_host_of_an_image() {
    assert_eq!(host_of_image("clastix/kamaji:v1.0.0"), "index.docker.io");
    assert_eq!(
        host_of_image("127.0.0.1:5000/site/kamaji:v1.0.0"),
        "127.0.0.1:5000"
    );
    assert_eq!(host_of_image("Not A Ref"), "Not A Ref");
}
