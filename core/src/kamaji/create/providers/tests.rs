//! Every provider of the registry is complete: a provider that leaves something out fails here.

use std::collections::BTreeSet;

use super::super::{CreateSpec, Versions, build, build_class};
use super::*;
use crate::kamaji::infra::action_for;

/// A spec with every flag a provider takes set to a plausible value.
fn sample(p: Infrastructure) -> CreateSpec {
    let takes = |flag: &str| p.flags().iter().any(|f| f.flag == flag);
    let some = |flag: &str, v: &str| takes(flag).then(|| v.to_string());
    CreateSpec {
        name: "c1".into(),
        namespace: "team".into(),
        infrastructure: Some(p),
        kubernetes_version: Some("v1.35.0".into()),
        service_address: Some("10.0.0.5".into()),
        flavor: some("--flavor", "2x4Gi"),
        image: some("--image", "img"),
        image_checksum: some("--image-checksum", "abc"),
        region: some("--region", "eu-west-1"),
        ..Default::default()
    }
}

fn is_kind(k: &str) -> bool {
    k.starts_with(|c: char| c.is_ascii_uppercase()) && k.chars().all(|c| c.is_ascii_alphanumeric())
}

#[test]
fn every_provider_is_complete() {
    let mut names = BTreeSet::new();
    for p in all() {
        let name = p.name();
        let infra = Infrastructure(*p);
        assert!(
            !name.is_empty() && names.insert(name),
            "name {name:?} unique"
        );
        for a in p.aliases() {
            assert!(names.insert(a), "{name}: alias {a:?} unique");
        }
        assert_eq!(
            Infrastructure::parse(name).ok(),
            Some(infra),
            "{name} parses"
        );
        assert!(
            !p.title().is_empty() && !p.help().is_empty(),
            "{name}: help"
        );
        // Kinds and versions: both or neither; well-formed; the version parses.
        let kinds = (p.cluster_kind(), p.template_kind());
        assert_eq!(kinds.0.is_some(), kinds.1.is_some(), "{name}: kinds");
        if let (Some(c), Some(t)) = kinds {
            assert!(is_kind(c) && is_kind(t), "{name}: kinds {c} {t}");
            let v = p.default_version();
            assert!(
                v.strip_prefix('v')
                    .and_then(|r| r.split(['a', 'b']).next())
                    .is_some_and(|m| m.parse::<u32>().is_ok()),
                "{name}: version {v:?}"
            );
            assert!(!p.clusterctl_name().is_empty(), "{name}: clusterctl name");
            // The reconciler serves its kind, as the provider says.
            let patch = p.endpoint_patch();
            assert!(patch.is_some(), "{name}: endpoint patch");
            assert_eq!(action_for(c, &[]), patch, "{name}: reconciler table");
        } else {
            assert_eq!(p.endpoint_patch(), None, "{name}: no cluster, no patch");
        }
        // Own flags have help; shared ones are taken by another provider too.
        for f in p.flags() {
            assert!(f.flag.starts_with("--"), "{name}: {}", f.flag);
            match f.help {
                Some(h) => assert!(!h.is_empty(), "{name}: {} help", f.flag),
                None => assert!(
                    all()
                        .iter()
                        .filter(|o| o.flags().iter().any(|g| g.flag == f.flag))
                        .count()
                        > 1,
                    "{name}: {} is its own and needs help",
                    f.flag
                ),
            }
        }
        // It builds valid objects for a sample spec, with its kinds.
        let b = build(&sample(infra), &Versions::latest(infra))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let objects = b.all();
        let kinds_built: Vec<&str> = objects.iter().filter_map(|o| o["kind"].as_str()).collect();
        for o in &objects {
            assert!(
                o["apiVersion"].as_str().is_some_and(|v| v.contains('/')),
                "{name}: {o}"
            );
            assert!(o["metadata"]["name"].as_str().is_some(), "{name}: {o}");
        }
        for k in [kinds.0, kinds.1].into_iter().flatten() {
            assert!(kinds_built.contains(&k), "{name}: {k} in {kinds_built:?}");
        }
        // ClusterClass parts: present where the provider supports a class, else a usage error.
        let mut class = sample(infra);
        class.service_address = None;
        class.kubernetes_version = None;
        class.image_checksum = None;
        match p.class_support() {
            Ok(()) => {
                let b = build_class(&class, &Versions::latest(infra))
                    .unwrap_or_else(|e| panic!("{name}: {e}"));
                let k: Vec<&str> = b
                    .objects
                    .iter()
                    .filter_map(|o| o["kind"].as_str())
                    .collect();
                let cluster_template = format!("{}Template", kinds.0.unwrap_or_default());
                assert!(k.contains(&cluster_template.as_str()), "{name}: {k:?}");
                assert!(k.contains(&"ClusterClass"), "{name}: {k:?}");
            }
            Err(e) => assert_eq!(e.exit_code(), 2, "{name}: {e}"),
        }
    }
    assert!(names.contains("none"), "sanity: {names:?}");
}

#[test]
fn unknown_providers_name_the_registry() {
    let e = Infrastructure::parse("Docker").unwrap_err();
    assert_eq!(e.to_string(), "unknown infrastructure \"Docker\"", "{e:?}");
    assert_eq!(
        Infrastructure::parse("BYOH").ok(),
        Some(Infrastructure::named("byoh"))
    );
    assert_eq!(Infrastructure::default().name(), "none");
}
