use super::*;
use crate::init::manifests::{for_each_image, images, mirrored};
use crate::init::set::by_id;

fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

fn sts(objects: &[Value]) -> &Value {
    find(objects, "StatefulSet", NAME)
}

fn args(objects: &[Value]) -> Vec<String> {
    sts(objects)["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect()
}

/// The value of `--flag=` among `args`, as member `pod` sees it (the kubelet's `$(POD_NAME)`).
fn flag(args: &[String], name: &str, pod: &str) -> String {
    let prefix = format!("--{name}=");
    let found: Vec<&String> = args.iter().filter(|a| a.starts_with(&prefix)).collect();
    assert_eq!(found.len(), 1, "--{name} once: {args:?}");
    found[0][prefix.len()..].replace("$(POD_NAME)", pod)
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

fn host_of(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    rest.rsplit_once(':').map_or(rest, |(h, _)| h)
}

#[test]
fn every_members_urls_are_in_the_initial_cluster_under_its_name() {
    let objects = objects(&EtcdOptions::default());
    let args = args(&objects);
    let cluster: Vec<(String, String)> = flag(&args, "initial-cluster", "x")
        .split(',')
        .map(|m| {
            let (n, u) = m.split_once('=').unwrap();
            (n.to_string(), u.to_string())
        })
        .collect();
    assert_eq!(cluster.len(), REPLICAS, "{cluster:?}");
    for i in 0..REPLICAS {
        // The StatefulSet names its pods NAME-0, NAME-1, ...
        let pod = format!("{NAME}-{i}");
        assert_eq!(flag(&args, "name", &pod), pod);
        let peer = flag(&args, "initial-advertise-peer-urls", &pod);
        assert!(
            cluster.contains(&(pod.clone(), peer.clone())),
            "{pod}={peer} not in {cluster:?}"
        );
        let client = flag(&args, "advertise-client-urls", &pod);
        assert_eq!(host_of(&client), host_of(&peer));
        assert!(
            client.starts_with("https://") && client.ends_with(":2379"),
            "{client}"
        );
        assert!(
            peer.starts_with("https://") && peer.ends_with(":2380"),
            "{peer}"
        );
        // The Service the StatefulSet names gives each pod that name.
        assert_eq!(
            host_of(&peer),
            format!(
                "{pod}.{}.{NAMESPACE}.svc.cluster.local",
                sts(&objects)["spec"]["serviceName"].as_str().unwrap()
            )
        );
    }
    assert_eq!(flag(&args, "initial-cluster-state", ""), "new");
    assert_eq!(flag(&args, "quota-backend-bytes", ""), "8589934592");
}

#[test]
fn the_server_certificate_names_every_member_and_the_service() {
    let objects = objects(&EtcdOptions::default());
    let args = args(&objects);
    let cert = find(&objects, "Certificate", SERVER_SECRET);
    let names = strings(&cert["spec"]["dnsNames"]);
    for i in 0..REPLICAS {
        let pod = format!("{NAME}-{i}");
        for url in [
            flag(&args, "advertise-client-urls", &pod),
            flag(&args, "initial-advertise-peer-urls", &pod),
        ] {
            assert!(
                names.contains(&host_of(&url).to_string()),
                "{url}: {names:?}"
            );
        }
        let short = format!("{pod}.{NAME}.{NAMESPACE}.svc");
        assert!(names.contains(&short), "{short}: {names:?}");
    }
    for n in [
        NAME.to_string(),
        format!("{NAME}.{NAMESPACE}.svc"),
        format!("{NAME}.{NAMESPACE}.svc.cluster.local"),
        "localhost".to_string(),
    ] {
        assert!(names.contains(&n), "{n}: {names:?}");
    }
    assert_eq!(strings(&cert["spec"]["ipAddresses"]), ["127.0.0.1"]);
    // Peers present it as their client certificate.
    let usages = strings(&cert["spec"]["usages"]);
    assert!(usages.contains(&"server auth".to_string()), "{usages:?}");
    assert!(usages.contains(&"client auth".to_string()), "{usages:?}");
}

#[test]
fn the_datastore_dials_the_advertised_client_urls() {
    let objects = objects(&EtcdOptions::default());
    let args = args(&objects);
    let ds = find(&objects, "DataStore", DEFAULT_DATASTORE);
    assert_eq!(ds["apiVersion"], "kamaji.clastix.io/v1alpha1");
    assert_eq!(ds["spec"]["driver"], "etcd");
    assert!(ds["metadata"].get("namespace").is_none(), "cluster-scoped");
    let advertised: Vec<String> = (0..REPLICAS)
        .map(|i| {
            let url = flag(&args, "advertise-client-urls", &format!("{NAME}-{i}"));
            url.trim_start_matches("https://").to_string()
        })
        .collect();
    assert_eq!(strings(&ds["spec"]["endpoints"]), advertised);
}

#[test]
fn the_datastore_reads_the_secrets_the_certificates_write() {
    let objects = objects(&EtcdOptions::default());
    let written: Vec<(String, String)> = objects
        .iter()
        .filter(|o| o["kind"] == "Certificate")
        .map(|c| {
            (
                c["metadata"]["namespace"].as_str().unwrap().to_string(),
                c["spec"]["secretName"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let tls = &find(&objects, "DataStore", DEFAULT_DATASTORE)["spec"]["tlsConfig"];
    for (pair, secret) in [
        ("certificateAuthority", CA),
        ("clientCertificate", ROOT_CLIENT_SECRET),
    ] {
        for (part, key) in [("certificate", "tls.crt"), ("privateKey", "tls.key")] {
            let r = &tls[pair][part]["secretReference"];
            assert_eq!(r["name"], secret, "{pair}.{part}");
            assert_eq!(r["keyPath"], key, "{pair}.{part}");
            assert_eq!(r["namespace"], NAMESPACE, "{pair}.{part}");
            assert!(
                written.contains(&(NAMESPACE.to_string(), secret.to_string())),
                "{secret} is not a Certificate's Secret: {written:?}"
            );
        }
    }
    // The root client certificate is etcd's user `root`.
    assert_eq!(
        find(&objects, "Certificate", ROOT_CLIENT_SECRET)["spec"]["commonName"],
        "root"
    );
    // The members mount the Secret of their own certificate.
    let volumes = &sts(&objects)["spec"]["template"]["spec"]["volumes"];
    assert_eq!(volumes[0]["secret"]["secretName"], SERVER_SECRET);
    // Applied after them, the DataStore waits for both Secrets; before them, for none.
    let at = objects
        .iter()
        .position(|o| o["kind"] == "DataStore")
        .unwrap();
    let ds = &objects[at];
    assert_eq!(
        awaited_secrets(ds, &objects[..at]),
        [
            (NAMESPACE.to_string(), CA.to_string()),
            (NAMESPACE.to_string(), ROOT_CLIENT_SECRET.to_string())
        ]
    );
    assert!(awaited_secrets(ds, &[]).is_empty());
}

#[test]
fn what_signs_comes_before_what_it_signs_and_the_ca_key_is_one_kamaji_parses() {
    let objects = objects(&EtcdOptions::default());
    let at = |kind: &str, name: &str| {
        objects
            .iter()
            .position(|o| o["kind"] == kind && o["metadata"]["name"] == name)
            .unwrap()
    };
    for c in objects.iter().filter(|o| o["kind"] == "Certificate") {
        let issuer = c["spec"]["issuerRef"]["name"].as_str().unwrap();
        let name = c["metadata"]["name"].as_str().unwrap();
        assert!(at("Issuer", issuer) < at("Certificate", name), "{name}");
        let key = &c["spec"]["privateKey"];
        assert_eq!(key["algorithm"], "RSA", "{name}");
        assert_eq!(key["encoding"], "PKCS1", "{name}");
    }
    assert!(at("Certificate", CA) < at("Issuer", CA));
    let ca = find(&objects, "Certificate", CA);
    assert_eq!(ca["spec"]["isCA"], true);
    assert_eq!(ca["spec"]["privateKey"]["rotationPolicy"], "Never");
    assert_eq!(find(&objects, "Issuer", CA)["spec"]["ca"]["secretName"], CA);
    let kinds: Vec<&str> = objects
        .iter()
        .map(|o| o["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds[kinds.len() - 3..],
        ["Service", "StatefulSet", "DataStore"]
    );
}

#[test]
fn the_members_run_the_pinned_image_which_a_mirror_moves() {
    let mut objects = objects(&EtcdOptions::default());
    assert_eq!(images(&objects), [IMAGE]);
    for o in &mut objects {
        for_each_image(o, |i| *i = mirrored(i, "mirror.local:5000/capi"));
    }
    assert_eq!(images(&objects), ["mirror.local:5000/capi/etcd:3.6.8-0"]);
    let s = sts(&objects);
    assert_eq!(s["spec"]["replicas"], 3);
    assert_eq!(s["spec"]["podManagementPolicy"], "Parallel");
    let svc = find(&objects, "Service", NAME);
    assert_eq!(svc["spec"]["clusterIP"], "None");
    assert_eq!(svc["spec"]["publishNotReadyAddresses"], true);
    assert_eq!(
        svc["spec"]["selector"],
        s["spec"]["selector"]["matchLabels"]
    );
    assert_eq!(
        s["spec"]["template"]["metadata"]["labels"],
        s["spec"]["selector"]["matchLabels"]
    );
    let c = &s["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/livez");
    assert_eq!(c["livenessProbe"]["httpGet"]["port"], 2381);
}

#[test]
fn every_object_carries_kamajis_init_labels() {
    let kamaji = by_id("kamaji").unwrap();
    assert_eq!(kamaji.namespace, NAMESPACE);
    for o in objects(&EtcdOptions::default()) {
        let l = &o["metadata"]["labels"];
        assert_eq!(l[COMPONENT_LABEL], kamaji.id, "{}", o["kind"]);
        assert_eq!(l[VERSION_LABEL], kamaji.version, "{}", o["kind"]);
        assert_eq!(l["app.kubernetes.io/name"], NAME);
        if o["kind"] != "DataStore" {
            assert_eq!(o["metadata"]["namespace"], NAMESPACE, "{}", o["kind"]);
        }
    }
}

#[test]
fn the_size_and_class_land_in_the_claim_template() {
    let claim = |opts: &EtcdOptions| sts(&objects(opts))["spec"]["volumeClaimTemplates"][0].clone();
    let d = claim(&EtcdOptions::default());
    assert_eq!(d["metadata"]["name"], "data");
    assert_eq!(d["spec"]["resources"]["requests"]["storage"], "10Gi");
    assert_eq!(d["spec"]["accessModes"][0], "ReadWriteOnce");
    assert!(d["spec"].get("storageClassName").is_none(), "{d}");
    let opts = EtcdOptions::new(Some("fast-ssd"), Some("20Gi")).unwrap();
    let c = claim(&opts);
    assert_eq!(c["spec"]["resources"]["requests"]["storage"], "20Gi");
    assert_eq!(c["spec"]["storageClassName"], "fast-ssd");
    // A small volume keeps room beyond the database.
    let small = objects(&EtcdOptions::new(None, Some("4Gi")).unwrap());
    assert_eq!(
        flag(&args(&small), "quota-backend-bytes", ""),
        (2u64 << 30).to_string()
    );
    let named = EtcdOptions::default().named("site-etcd").unwrap();
    assert_eq!(
        find(&objects(&named), "DataStore", "site-etcd")["spec"]["driver"],
        "etcd"
    );
    assert!(EtcdOptions::default().named("Site").is_err());
}

#[test]
fn bad_sizes_and_classes_are_refused_in_one_line() {
    for size in [
        "", "10", "ten", "10GB", "-10Gi", "1e10", "10Gi ", "3Gi", "2Ti", "4000m", "1..5Gi", ".5Gi",
    ] {
        let e = EtcdOptions::new(None, Some(size)).unwrap_err();
        assert_eq!(e.exit_code(), 2, "{size:?}");
        assert!(e.to_string().contains("--datastore-size"), "{size:?}: {e}");
        assert!(!e.to_string().contains('\n'), "{e}");
        assert!(e.hint().is_some());
    }
    for class in [
        "",
        "Fast",
        "fast_ssd",
        "-fast",
        "fast-",
        "a..b",
        &"a".repeat(64),
    ] {
        let e = EtcdOptions::new(Some(class), None).unwrap_err();
        assert_eq!(e.exit_code(), 2, "{class:?}");
        assert!(e.to_string().contains("--datastore-storage-class"), "{e}");
    }
    for (size, class) in [
        ("4Gi", "standard"),
        ("1Ti", "ebs.csi.aws.com"),
        ("1.5Ti", "a"),
    ] {
        let r = EtcdOptions::new(Some(class), Some(size));
        assert_eq!(r.is_ok(), size != "1.5Ti", "{size} {class}: {r:?}");
    }
}

#[test]
fn quantities_read_as_bytes() {
    for (q, bytes) in [
        ("10Gi", 10u128 << 30),
        ("1.5Gi", 3 << 29),
        ("500M", 500_000_000),
        ("4294967296", 1 << 32),
        ("1Ti", 1 << 40),
        ("2k", 2000),
    ] {
        assert_eq!(quantity_bytes(q), Some(bytes), "{q}");
    }
    for q in [
        "",
        "Gi",
        "1.Gi",
        "1.2.3Gi",
        "99999999999999999999999999999Ei",
        "10gi",
    ] {
        assert_eq!(quantity_bytes(q), None, "{q}");
    }
}

fn existing(size: &str, class: Option<&str>) -> Value {
    let mut spec = json!({"resources": {"requests": {"storage": size}}});
    if let Some(c) = class {
        spec["storageClassName"] = c.into();
    }
    json!({"spec": {"volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": spec}]}})
}

#[test]
fn a_rerun_keeps_the_volumes_it_made_and_refuses_others() {
    let had = existing("20Gi", Some("fast"));
    let kept = EtcdOptions::default().fit_to(&had).unwrap();
    assert_eq!((kept.size(), kept.storage_class()), ("20Gi", Some("fast")));
    // The same size written another way is the same size.
    let same = EtcdOptions::new(Some("fast"), Some("20480Mi")).unwrap();
    assert!(same.fit_to(&had).is_ok());
    for (size, class) in [(Some("30Gi"), None), (None, Some("slow"))] {
        let e = EtcdOptions::new(class, size)
            .unwrap()
            .fit_to(&had)
            .unwrap_err();
        assert_eq!(e.exit_code(), 1);
        assert!(e.to_string().contains("volumes cannot change"), "{e}");
        assert!(e.to_string().contains("nothing was applied"), "{e}");
    }
    // Made with the default class: naming one now is a change.
    let defaulted = existing("10Gi", None);
    let e = EtcdOptions::new(Some("fast"), None)
        .unwrap()
        .fit_to(&defaulted)
        .unwrap_err();
    assert!(e.to_string().contains("the default StorageClass"), "{e}");
    assert_eq!(
        EtcdOptions::default().fit_to(&defaulted).unwrap(),
        EtcdOptions::new(None, Some("10Gi")).unwrap()
    );
}

#[test]
fn the_members_are_ready_when_each_runs_the_current_spec_ready() {
    let s = |generation: i64, observed: i64, ready: i64, updated: i64| {
        json!({"metadata": {"generation": generation}, "spec": {"replicas": 3},
               "status": {"observedGeneration": observed, "readyReplicas": ready, "updatedReplicas": updated}})
    };
    assert_eq!(members_waiting(&s(2, 2, 3, 3)), None);
    assert!(
        members_waiting(&s(2, 1, 3, 3))
            .unwrap()
            .contains("not seen")
    );
    assert_eq!(
        members_waiting(&s(1, 1, 2, 3)).unwrap(),
        "2 of 3 members ready"
    );
    assert!(members_waiting(&s(1, 1, 3, 1)).unwrap().contains("1 of 3"));
    assert!(members_waiting(&json!({"metadata": {"generation": 1}})).is_some());
}

#[test]
fn a_default_class_is_told_by_its_annotation() {
    let sc = |k: &str, v: &str| json!({"metadata": {"annotations": {k: v}}});
    assert!(is_default_class(&sc(
        "storageclass.kubernetes.io/is-default-class",
        "true"
    )));
    assert!(is_default_class(&sc(
        "storageclass.beta.kubernetes.io/is-default-class",
        "true"
    )));
    assert!(!is_default_class(&sc(
        "storageclass.kubernetes.io/is-default-class",
        "false"
    )));
    assert!(!is_default_class(&json!({"metadata": {}})));
}
