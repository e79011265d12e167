//! The reconciler's image as `make image` writes it (`make test` runs it first): reproducible
//! from its binary, and the very bytes the release workflow publishes. `image.rs` (a binary of
//! its own) runs it in the testbed's cluster.

use std::path::{Path, PathBuf};

use serde_json::Value;
use testbed::fixtures::run::assert_contains;

fn repo() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

fn image_dir() -> PathBuf {
    repo().join("target/image")
}

fn blob(layout: &Path, digest: &str) -> Vec<u8> {
    std::fs::read(
        layout
            .join("blobs/sha256")
            .join(digest.trim_start_matches("sha256:")),
    )
    .unwrap()
}

#[test]
fn make_image_is_reproducible_from_its_static_binary() {
    let digest_file = image_dir().join("kamaji-reconciler.digest");
    let digest = std::fs::read_to_string(&digest_file)
        .unwrap_or_else(|e| panic!("{}: {e}; run make image", digest_file.display()));
    let layout = image_dir().join("kamaji-reconciler");
    let manifest: Value = serde_json::from_slice(&blob(&layout, digest.trim())).unwrap();
    let config: Value = serde_json::from_slice(&blob(
        &layout,
        manifest["config"]["digest"].as_str().unwrap(),
    ))
    .unwrap();
    let labels = &config["config"]["Labels"];
    let label = |k: &str| {
        labels[format!("org.opencontainers.image.{k}")]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(config["config"]["User"], "65532:65532");
    assert_eq!(
        label("version"),
        format!("v{}", env!("CARGO_PKG_VERSION")),
        "the version label is the workspace's"
    );
    // The binary make image built, written again elsewhere with the same labels and time: the
    // same digest, byte for byte.
    let binary =
        repo().join("target/image-build/x86_64-unknown-linux-musl/release/kamaji-reconciler");
    let amd64 = oci_image::Platform::parse("linux/amd64").unwrap();
    oci_image::check_static(&std::fs::read(&binary).unwrap(), &amd64, &binary)
        .expect("a static binary");
    let created = jiff_seconds(&config["created"]);
    let spec = oci_image::Spec {
        name: "kamaji-reconciler".into(),
        entrypoint: "/usr/local/bin/kamaji-reconciler".into(),
        tag: label("version"),
        version: label("version"),
        revision: Some(label("revision")),
        description: label("description"),
        source: label("source"),
        licenses: label("licenses"),
        created,
        ports: vec!["8080/tcp".into()],
    };
    let out = tempfile::tempdir().unwrap();
    let again = oci_image::write(&spec, &[(amd64, binary)], out.path()).unwrap();
    assert_eq!(again.digest, digest.trim());
    assert_eq!(
        std::fs::read(&again.tarball).unwrap(),
        std::fs::read(image_dir().join("kamaji-reconciler.oci.tar")).unwrap()
    );
}

/// Seconds since the epoch of the config's RFC 3339 time.
fn jiff_seconds(v: &Value) -> i64 {
    v.as_str()
        .unwrap()
        .parse::<k8s_openapi::jiff::Timestamp>()
        .unwrap()
        .as_second()
}

#[test]
fn the_release_workflow_publishes_what_make_image_writes() {
    let workflow = std::fs::read_to_string(repo().join(".github/workflows/release.yml")).unwrap();
    let makefile = std::fs::read_to_string(repo().join("Makefile")).unwrap();
    // The binaries: built by the script make image runs, for both architectures.
    assert_contains(&workflow, "bash scripts/image.sh binary");
    for target in ["x86_64-unknown-linux-musl", "aarch64-unknown-linux-musl"] {
        assert!(workflow.contains(target), "workflow builds {target}");
    }
    // The image: oci-image, one index of both, pushed by crane, its digest checked.
    assert_contains(&workflow, "-p oci-image");
    assert_contains(
        &workflow,
        "linux/amd64=bins/bin-linux-amd64/kamaji-reconciler",
    );
    assert_contains(
        &workflow,
        "linux/arm64=bins/bin-linux-arm64/kamaji-reconciler",
    );
    assert_contains(
        &workflow,
        "crane\" push --index dist/image/kamaji-reconciler",
    );
    assert_contains(&workflow, "kamaji-reconciler.digest");
    for docker in ["docker/", "docker build", "buildx", "Dockerfile"] {
        assert!(
            !workflow.contains(docker),
            "no Docker in the release: {docker}"
        );
    }
    assert_contains(&makefile, "test: testbed image");
    assert_contains(&makefile, "bash scripts/image.sh");
}
