use super::*;

/// A minimal static ELF64 header for x86-64 (no program headers, so no interpreter).
fn fake_static(machine: u16, interp: bool) -> Vec<u8> {
    let mut b = vec![0u8; 64 + 56];
    b[..4].copy_from_slice(b"\x7fELF");
    b[4] = 2;
    b[5] = 1;
    b[0x12..0x14].copy_from_slice(&machine.to_le_bytes());
    b[0x20..0x28].copy_from_slice(&64u64.to_le_bytes());
    b[0x36..0x38].copy_from_slice(&56u16.to_le_bytes());
    b[0x38..0x3a].copy_from_slice(&1u16.to_le_bytes());
    // One program header: PT_LOAD (1) or PT_INTERP (3).
    b[64..68].copy_from_slice(&(if interp { 3u32 } else { 1 }).to_le_bytes());
    b
}

fn spec() -> Spec {
    Spec {
        name: "kamaji-reconciler".into(),
        entrypoint: "/usr/local/bin/kamaji-reconciler".into(),
        tag: "v0.1.0".into(),
        version: "v0.1.0".into(),
        revision: Some("abc".into()),
        description: "d".into(),
        source: "s".into(),
        licenses: "Apache-2.0".into(),
        created: 1_700_000_000,
        ports: vec!["8080/tcp".into()],
    }
}

fn amd64() -> Platform {
    Platform::parse("linux/amd64").unwrap()
}

#[test]
fn two_builds_of_one_binary_are_byte_identical() {
    let d = tempfile::tempdir().unwrap();
    let bin = d.path().join("bin");
    std::fs::write(&bin, fake_static(62, false)).unwrap();
    let a = write(&spec(), &[(amd64(), bin.clone())], &d.path().join("a")).unwrap();
    // Later, elsewhere: nothing of the time or place gets in.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let b = write(&spec(), &[(amd64(), bin)], &d.path().join("b")).unwrap();
    assert_eq!(a.digest, b.digest);
    assert_eq!(
        std::fs::read(&a.tarball).unwrap(),
        std::fs::read(&b.tarball).unwrap()
    );
    let mut other = spec();
    other.revision = Some("def".into());
    let c = write(
        &other,
        &[(amd64(), d.path().join("bin"))],
        &d.path().join("c"),
    )
    .unwrap();
    assert_ne!(a.digest, c.digest, "the revision label is in the config");
}

#[test]
fn the_layout_is_consistent_and_runs_as_nonroot() {
    let d = tempfile::tempdir().unwrap();
    let bin = d.path().join("bin");
    std::fs::write(&bin, fake_static(62, false)).unwrap();
    let w = write(&spec(), &[(amd64(), bin)], d.path()).unwrap();
    let read_blob = |digest: &str| {
        let p = w
            .layout
            .join("blobs/sha256")
            .join(digest.trim_start_matches("sha256:"));
        let b = std::fs::read(p).unwrap();
        assert_eq!(sha256(&b), digest, "a blob's name is its digest");
        b
    };
    let index: Value =
        serde_json::from_slice(&std::fs::read(w.layout.join("index.json")).unwrap()).unwrap();
    assert_eq!(index["manifests"][0]["digest"], json!(w.digest));
    assert_eq!(
        index["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"],
        "v0.1.0"
    );
    let manifest: Value = serde_json::from_slice(&read_blob(&w.digest)).unwrap();
    let config: Value =
        serde_json::from_slice(&read_blob(manifest["config"]["digest"].as_str().unwrap())).unwrap();
    assert_eq!(config["config"]["User"], "65532:65532");
    assert_eq!(
        config["config"]["Entrypoint"],
        json!(["/usr/local/bin/kamaji-reconciler"])
    );
    assert_eq!(
        config["config"]["Labels"]["org.opencontainers.image.revision"],
        "abc"
    );
    assert_eq!(config["created"], "2023-11-14T22:13:20Z");
    let layer = read_blob(manifest["layers"][0]["digest"].as_str().unwrap());
    let mut raw = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&layer[..]), &mut raw).unwrap();
    assert_eq!(config["rootfs"]["diff_ids"][0], json!(sha256(&raw)));
    let mut ar = tar::Archive::new(&raw[..]);
    let entries: Vec<(String, u32, u64)> = ar
        .entries()
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let h = e.header();
            (
                e.path().unwrap().display().to_string(),
                h.mode().unwrap(),
                h.uid().unwrap(),
            )
        })
        .collect();
    let names: Vec<&str> = entries.iter().map(|e| e.0.as_str()).collect();
    assert_eq!(
        names,
        [
            "etc/",
            "etc/group",
            "etc/passwd",
            "home/",
            "home/nonroot/",
            "tmp/",
            "usr/",
            "usr/local/",
            "usr/local/bin/",
            "usr/local/bin/kamaji-reconciler"
        ]
    );
    assert!(entries.contains(&("home/nonroot/".into(), 0o700, 65532)));
    assert!(entries.contains(&("tmp/".into(), 0o1777, 0)));
    assert!(entries.contains(&("usr/local/bin/kamaji-reconciler".into(), 0o755, 0)));
    assert_eq!(
        std::fs::read_to_string(d.path().join("kamaji-reconciler.digest")).unwrap(),
        format!("{}\n", w.digest)
    );
}

#[test]
fn two_platforms_make_an_index() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("a"), fake_static(62, false)).unwrap();
    std::fs::write(d.path().join("b"), fake_static(183, false)).unwrap();
    let w = write(
        &spec(),
        &[
            (amd64(), d.path().join("a")),
            (Platform::parse("linux/arm64").unwrap(), d.path().join("b")),
        ],
        &d.path().join("out"),
    )
    .unwrap();
    let index = std::fs::read(w.layout.join("index.json")).unwrap();
    assert_eq!(w.digest, sha256(&index));
    let index: Value = serde_json::from_slice(&index).unwrap();
    let archs: Vec<&str> = index["manifests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["platform"]["architecture"].as_str().unwrap())
        .collect();
    assert_eq!(archs, ["amd64", "arm64"]);
}

#[test]
fn refusals_write_nothing() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("out");
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (fake_static(62, true), "dynamically linked"),
        (fake_static(183, false), "another architecture than amd64"),
        (b"#!/bin/sh\n".to_vec(), "not a 64-bit little-endian ELF"),
    ];
    for (bytes, want) in cases {
        let bin = d.path().join("bin");
        std::fs::write(&bin, bytes).unwrap();
        let e = write(&spec(), &[(amd64(), bin)], &out)
            .unwrap_err()
            .to_string();
        assert!(e.contains(want), "{e}");
        assert!(e.contains("make image"), "{e}");
    }
    let e = Platform::parse("windows/amd64").unwrap_err().to_string();
    assert!(e.contains("linux/amd64"), "{e}");
    let mut bad = spec();
    bad.name = "Kamaji".into();
    let bin = d.path().join("ok");
    std::fs::write(&bin, fake_static(62, false)).unwrap();
    assert!(write(&bad, &[(amd64(), bin)], &out).is_err());
    assert!(!out.join("kamaji-reconciler").exists());
}
