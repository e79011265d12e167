//! Every provider of the registry is complete: a provider that leaves something out fails here.

use std::collections::BTreeSet;

use super::super::{
    CreateSpec, FlagValue, ProviderFlags, Versions, all_flags, build, build_class, refusals,
};
use super::*;
use crate::kamaji::infra::action_for;

/// A spec with every flag a provider takes that has an example set to it, each checked as the
/// command line's would be.
fn sample(p: Infrastructure) -> CreateSpec {
    let mut provider_flags = ProviderFlags::default();
    for f in p.flags() {
        if let Some(e) = f.example {
            provider_flags
                .insert(f, vec![e.to_string()])
                .unwrap_or_else(|e| panic!("{}: {}: {e}", p.name(), f.name()));
        }
    }
    CreateSpec {
        name: "c1".into(),
        namespace: "team".into(),
        infrastructure: Some(p),
        kubernetes_version: Some("v1.35.0".into()),
        service_address: Some("10.0.0.5".into()),
        provider_flags,
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
        // Flags: well-formed, with help and a value name; an own flag is one provider's, a
        // flag is declared once; a flag refused with another is placed after it.
        for f in p.flags() {
            let flag = f.flag;
            assert!(
                flag.starts_with("--")
                    && f.long()
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
                "{name}: {flag}"
            );
            assert!(!f.help.is_empty(), "{name}: {flag} help");
            assert!(
                f.class_help.is_none_or(|h| !h.is_empty()),
                "{name}: {flag} class help"
            );
            match f.value {
                FlagValue::One(v) | FlagValue::List(v) => {
                    assert!(!v.is_empty(), "{name}: {flag} value name")
                }
                FlagValue::Switch => assert!(f.example.is_none(), "{name}: {flag} switch"),
            }
            let takers: Vec<&str> = all()
                .iter()
                .filter(|o| o.takes(flag))
                .map(|o| o.name())
                .collect();
            assert!(
                f.shared || takers == [name],
                "{name}: {flag} is its own, but {takers:?} take it: declare it once in providers/mod.rs"
            );
            assert!(
                f.help(false)
                    .starts_with(if f.shared { "" } else { p.title() })
            );
            for o in all() {
                for g in o.flags().iter().filter(|g| g.flag == flag) {
                    assert!(
                        std::ptr::eq(g, f) || format!("{g:?}") == format!("{f:?}"),
                        "{name}: {flag} is declared again by {}",
                        o.name()
                    );
                }
            }
            if let Some(other) = f.refused_with {
                let before = all_flags(false)
                    .iter()
                    .take_while(|g| g.flag != flag)
                    .any(|g| g.flag == other);
                assert!(
                    before,
                    "{name}: {flag} refused with {other}, placed after it"
                );
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

#[test]
fn the_flags_keep_their_order_and_refusals() {
    // The order of help, completion and the checks (a new provider's flags may come anywhere).
    let names = |class| -> Vec<&str> { all_flags(class).iter().map(|f| f.name()).collect() };
    let in_order = |all: &[&str], expected: &[&str]| {
        let mut rest = all.iter();
        expected.iter().all(|e| rest.any(|n| n == e))
    };
    let create = [
        "--flavor",
        "--image",
        "--image-checksum",
        "--network",
        "--ssh-key",
        "--region",
        "--cloud-name",
        "--identity-secret",
        "--cloud-conf-secret",
        "--cloud-ca-key",
        "--host-selector",
        "--bundle-repo",
        "--bundle-type",
        "--preinstalled-hosts",
    ];
    assert!(in_order(&names(false), &create), "{:?}", names(false));
    // No Metal3 in a class.
    assert!(
        !names(true).contains(&"--image-checksum"),
        "{:?}",
        names(true)
    );
    let refused = refusals();
    let expected = [
        "--image-checksum",
        "--network",
        "--ssh-key",
        "--region",
        "--cloud-name/--identity-secret",
        "--cloud-conf-secret/--cloud-ca-key",
        "--host-selector",
        "--bundle-repo/--bundle-type",
        "--preinstalled-hosts",
    ];
    let refused: Vec<&str> = refused.iter().map(String::as_str).collect();
    assert!(in_order(&refused, &expected), "{refused:?}");
    // Help: an own flag after its provider's title, a shared one as written, a class wording.
    let flag = |name: &str| *all_flags(false).iter().find(|f| f.name() == name).unwrap();
    assert_eq!(flag("--region").help(false), "AWS: region");
    assert_eq!(
        flag("--ssh-key").help(true),
        "OpenStack, AWS: SSH key name for the workers"
    );
    assert_eq!(
        flag("--preinstalled-hosts").help(true),
        "BYOH: the hosts have Kubernetes pre-installed: no installer template"
    );
}

#[test]
fn provider_flags_are_read_and_checked() {
    let selector = *all_flags(false)
        .iter()
        .find(|f| f.name() == "--host-selector")
        .unwrap();
    let mut flags = ProviderFlags::default();
    let e = flags
        .insert(selector, vec!["site=ams".into(), "rack".into()])
        .unwrap_err();
    assert_eq!(e.to_string(), "invalid --host-selector \"rack\"");
    assert!(!flags.is_given("--host-selector"));
    flags
        .insert(selector, vec!["site=ams".into(), "rack=r1".into()])
        .unwrap();
    assert_eq!(flags.values("--host-selector"), ["site=ams", "rack=r1"]);
    assert_eq!(flags.value("--network"), None);
    flags.switch_on("--preinstalled-hosts");
    assert!(flags.is_given("--preinstalled-hosts"));
    assert_eq!(flags.value("--preinstalled-hosts"), None);
}
