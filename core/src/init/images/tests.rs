use super::*;

const D1: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
const D2: &str = "sha256:2222222222222222222222222222222222222222222222222222222222222222";
const D3: &str = "sha256:3333333333333333333333333333333333333333333333333333333333333333";

fn index(entries: &[(&str, &str)]) -> Vec<u8> {
    let manifests: Vec<Value> = entries
        .iter()
        .map(|(digest, platform)| {
            let p = Platform::parse(platform).unwrap();
            json!({"mediaType": OCI_MANIFEST, "digest": digest, "size": 500,
                       "platform": p.to_json()})
        })
        .collect();
    serde_json::to_vec(&json!({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": manifests}))
        .unwrap()
}

#[test]
fn platforms_parse_and_match_as_crane_picks_them() {
    let p = Platform::parse("linux/arm/v7").unwrap();
    assert_eq!(p.to_string(), "linux/arm/v7");
    for bad in [
        "linux",
        "linux/",
        "/amd64",
        "Linux/amd64",
        "a/b/c/d",
        "linux/am d64",
    ] {
        assert_eq!(
            Platform::parse(bad),
            Err(ImageError::Platform(bad.into())),
            "{bad}"
        );
    }
    let host = Platform::host();
    assert_eq!(host.os, "linux");
    assert_ne!(host.architecture, "x86_64", "GOARCH names");

    let idx = index(&[
        (D1, "linux/amd64"),
        (D2, "linux/arm64/v8"),
        (D3, "linux/arm/v6"),
    ]);
    let m = parse_manifest("x", &idx, None).unwrap();
    assert_eq!(m.media_type, OCI_INDEX);
    let Listing::Index(children) = &m.listing else {
        panic!("an index")
    };
    let pick = |want: &str| {
        select_platform(children, &Platform::parse(want).unwrap()).map(|d| d.digest.clone())
    };
    assert_eq!(pick("linux/amd64").unwrap(), D1);
    assert_eq!(pick("linux/arm64").unwrap(), D2);
    // arm64 without a variant is v8.
    assert_eq!(pick("linux/arm64/v8").unwrap(), D2);
    assert_eq!(pick("linux/arm/v6").unwrap(), D3);
    // arm without a variant is v7, which this index lacks.
    assert!(pick("linux/arm/v7").is_err());
    let e = pick("linux/s390x").unwrap_err().to_string();
    assert_eq!(
        e,
        "its index has no linux/s390x image (it has linux/amd64, linux/arm64/v8, linux/arm/v6)"
    );
}

#[test]
fn attestations_are_never_picked() {
    let idx = index(&[(D1, "unknown/unknown"), (D2, "linux/amd64")]);
    let m = parse_manifest("x", &idx, Some(OCI_INDEX)).unwrap();
    let Listing::Index(children) = &m.listing else {
        panic!("an index")
    };
    let want = Platform::parse("linux/amd64").unwrap();
    assert_eq!(select_platform(children, &want).unwrap().digest, D2);
    let want = Platform::parse("linux/arm64").unwrap();
    let e = select_platform(children, &want).unwrap_err().to_string();
    assert!(e.ends_with("(it has linux/amd64)"), "{e}");
}

#[test]
fn image_manifests_list_their_config_and_layers() {
    let m = json!({"schemaVersion": 2, "mediaType": DOCKER_MANIFEST,
            "config": {"mediaType": "application/vnd.docker.container.image.v1+json", "digest": D1, "size": 10},
            "layers": [{"mediaType": "application/vnd.docker.image.rootfs.diff.tar.gzip", "digest": D2, "size": 20}]});
    let m = parse_manifest("x", &serde_json::to_vec(&m).unwrap(), None).unwrap();
    assert_eq!(m.media_type, DOCKER_MANIFEST);
    let blobs: Vec<&str> = m.blobs().iter().map(|d| d.digest.as_str()).collect();
    assert_eq!(blobs, [D1, D2]);
    // Without a mediaType, its fields tell.
    let bare = json!({"schemaVersion": 2,
            "config": {"mediaType": "c", "digest": D1, "size": 1}, "layers": []});
    let m = parse_manifest("x", &serde_json::to_vec(&bare).unwrap(), None).unwrap();
    assert_eq!(m.media_type, OCI_MANIFEST);
    assert_eq!(m.blobs().len(), 1);
}

#[test]
fn bad_manifests_and_indexes_are_refused_in_one_line() {
    let cases: Vec<(Vec<u8>, Option<&str>, &str)> = vec![
            (b"{not json".to_vec(), None, "is not valid JSON"),
            (br#"{"schemaVersion": 1, "name": "x"}"#.to_vec(), None, "schemaVersion 1, not 2"),
            (
                br#"{"schemaVersion": 2, "mediaType": "application/vnd.docker.distribution.manifest.v1+prettyjws"}"#.to_vec(),
                None,
                "which an archive does not hold",
            ),
            (index(&[(D1, "linux/amd64")]), Some(OCI_MANIFEST), "says it is a"),
            (
                br#"{"schemaVersion": 2, "manifests": [{"mediaType": "a", "digest": "sha256:abc", "size": 1}]}"#.to_vec(),
                None,
                "is not sha256:<64 lower-case hex>",
            ),
            (
                format!(r#"{{"schemaVersion": 2, "manifests": [{{"digest": "{D1}", "size": 1}}]}}"#).into_bytes(),
                None,
                "has no mediaType",
            ),
            (
                format!(r#"{{"schemaVersion": 2, "manifests": [{{"mediaType": "{OCI_MANIFEST}", "digest": "{D1}", "size": -1}}]}}"#).into_bytes(),
                None,
                "is not valid JSON",
            ),
            (
                format!(r#"{{"schemaVersion": 2, "manifests": [{{"mediaType": "text/plain", "digest": "{D1}", "size": 1}}]}}"#).into_bytes(),
                None,
                "text/plain, which an archive does not hold",
            ),
            (br#"{"schemaVersion": 2}"#.to_vec(), None, "neither an index nor an image manifest"),
            (
                br#"{"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json"}"#.to_vec(),
                None,
                "without config",
            ),
            (vec![b' '; MAX_MANIFEST_BYTES + 1], None, "more than the 4194304 allowed"),
        ];
    for (bytes, expected, says) in cases {
        let e = parse_manifest("m", &bytes, expected)
            .unwrap_err()
            .to_string();
        assert!(e.contains(says), "{says}: {e}");
        assert!(!e.contains('\n'), "{e}");
    }
    let many: Vec<(&str, &str)> = vec![(D1, "linux/amd64"); MAX_INDEX_ENTRIES + 1];
    let e = parse_manifest("m", &index(&many), None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("257 is more than the 256 allowed"), "{e}");
}

#[test]
fn the_layout_index_names_the_image_and_its_platform_and_reads_back() {
    let top = ContentDescriptor {
        media_type: OCI_MANIFEST.into(),
        digest: D1.into(),
        size: 405,
        platform: Some(Platform::parse("linux/arm64").unwrap()),
    };
    let bytes = index_json(
        &top,
        "registry.k8s.io/cluster-api/cluster-api-controller:v1.14.2",
    );
    let v: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(v["manifests"][0]["platform"]["architecture"], "arm64");
    assert_eq!(
        v["manifests"][0]["annotations"][REF_NAME],
        "registry.k8s.io/cluster-api/cluster-api-controller:v1.14.2"
    );
    let back = read_index_json(&bytes).unwrap();
    assert_eq!(back.top, top);
    assert_eq!(
        back.reference,
        "registry.k8s.io/cluster-api/cluster-api-controller:v1.14.2"
    );
    assert_eq!(top.path(), format!("blobs/sha256/{}", &D1[7..]));

    let unnamed = br#"{"schemaVersion": 2, "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": "sha256:1111111111111111111111111111111111111111111111111111111111111111", "size": 1}]}"#;
    let e = read_index_json(unnamed).unwrap_err().to_string();
    assert!(e.contains("names no image"), "{e}");
    let two = index(&[(D1, "linux/amd64"), (D2, "linux/arm64")]);
    let e = read_index_json(&two).unwrap_err().to_string();
    assert!(e.contains("lists 2 manifests"), "{e}");
}

#[test]
fn archives_are_named_after_the_mirrored_name_and_never_collide() {
    for (image, want) in [
        (
            "registry.k8s.io/cluster-api/cluster-api-controller:v1.14.2",
            "image-cluster-api-controller-v1.14.2.oci.tar",
        ),
        ("clastix/kamaji:v1.0.0", "image-kamaji-v1.0.0.oci.tar"),
        ("busybox", "image-busybox-latest.oci.tar"),
        (
            &format!("r:5000/a/b:v1@{D1}"),
            &format!("image-b-v1-sha256-{}.oci.tar", &D1[7..]),
        ),
    ] {
        let name = archive_name(image);
        assert_eq!(name, want);
        assert!(is_archive_name(&name));
    }
    let long = format!("r/{}:v1", "a".repeat(300));
    let name = archive_name(&long);
    assert!(name.len() <= 255 && is_archive_name(&name), "{name}");
    assert_ne!(name, archive_name(&format!("r/{}:v2", "a".repeat(300))));
    assert!(!is_archive_name("cluster-api.yaml"));

    let images = vec!["a/x:v1".to_string(), "b/x:v1".to_string()];
    let e = archives(&images).unwrap_err().to_string();
    assert_eq!(e, "images a/x:v1 and b/x:v1 would both be x:v1 in a mirror");
    let many: Vec<String> = (0..=MAX_IMAGES).map(|i| format!("r/i{i}:v1")).collect();
    assert!(archives(&many).is_err());
    assert_eq!(archives(&many[..3]).unwrap().len(), 3);
}

#[test]
fn budgets_bound_each_blob_and_the_bundle_without_overflow() {
    let mut b = Budget::new(100);
    b.take("a", 60).unwrap();
    let e = b.take("b", 41).unwrap_err().to_string();
    assert_eq!(
        e,
        "the bundle's images with b is 101 bytes, more than the 100 allowed"
    );
    b.take("c", 40).unwrap();
    assert_eq!(b.used(), 100);
    let mut big = Budget::new(u64::MAX);
    big.take("a", MAX_BLOB_BYTES).unwrap();
    assert!(big.take("huge", MAX_BLOB_BYTES + 1).is_err());
    let mut full = Budget::new(u64::MAX);
    full.used = u64::MAX - 1;
    assert!(full.take("x", 2).is_err(), "no overflow");
    assert_eq!(human_bytes(512), "512 B");
    assert_eq!(human_bytes(23 << 20), "23.0 MiB");
}

#[test]
fn configs_state_their_platform() {
    let c = br#"{"architecture": "arm", "os": "linux", "variant": "v7", "config": {}}"#;
    assert_eq!(
        config_platform(c).map(|p| p.to_string()).as_deref(),
        Some("linux/arm/v7")
    );
    assert_eq!(config_platform(b"{}"), None);
    assert_eq!(config_platform(b"nonsense"), None);
    assert!(check_digest(D1).is_ok());
    assert!(check_digest(&D1.to_uppercase()).is_err());
    assert!(check_digest("sha512:00").is_err());
}
