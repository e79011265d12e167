use std::collections::BTreeMap;

use super::*;

fn vars(env: &[(&str, &str)], config: &[(&str, &str)]) -> Variables {
    Variables {
        overrides: BTreeMap::new(),
        env: env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        config: config
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    }
}

fn sub(t: &str, env: &[(&str, &str)]) -> String {
    substitute(t, &vars(env, &[])).unwrap()
}

#[test]
fn plain_variable() {
    assert_eq!(
        sub("name: ${CLUSTER_NAME}\n", &[("CLUSTER_NAME", "c1")]),
        "name: c1\n"
    );
    assert_eq!(sub("a${X}b${X}c", &[("X", "-")]), "a-b-c");
}

#[test]
fn every_default_form() {
    for t in ["${V:=d}", "${V=d}", "${V:-d}", "${V:?d}", "${V:+d}"] {
        assert_eq!(sub(t, &[]), "d", "{t} unset");
        assert_eq!(sub(t, &[("V", "x")]), "x", "{t} set");
        // drone/envsubst applies the default to an empty value too, for every form.
        assert_eq!(sub(t, &[("V", "")]), "d", "{t} empty");
    }
}

#[test]
fn defaults_with_spaces_colons_and_nesting() {
    assert_eq!(sub("${V:=a b:c=d}", &[]), "a b:c=d");
    assert_eq!(sub("${V:=}", &[("V", "x")]), "x");
    assert_eq!(sub("${A:=${B}}", &[("B", "bee")]), "bee");
    assert_eq!(sub("${A:=pre-${B:=b}-post}", &[]), "pre-b-post");
    assert_eq!(sub("${V:=v1.30.0}", &[]), "v1.30.0");
    assert_eq!(sub("${V==x}", &[]), "=x");
}

#[test]
fn spaces_inside_braces() {
    let e = &[("CLUSTER_NAME", "c1")];
    assert_eq!(sub("${ CLUSTER_NAME }", e), "c1");
    assert_eq!(sub("${ CLUSTER_NAME}", e), "c1");
    assert_eq!(sub("${CLUSTER_NAME }", e), "c1");
    assert_eq!(sub("${\tCLUSTER_NAME\n}", e), "c1");
    assert_eq!(list_variables("${ A }").unwrap()[0].name, "A");
}

#[test]
fn escaped_dollar() {
    assert_eq!(sub("cost: $$5", &[]), "cost: $5");
    assert_eq!(sub("literal: $${NOT_A_VAR}", &[]), "literal: ${NOT_A_VAR}");
    assert_eq!(sub("$$$", &[]), "$$");
    assert_eq!(sub("$HOME and $ alone", &[]), "$HOME and $ alone");
    assert_eq!(sub("$${ X }", &[]), "${X}");
    assert!(list_variables("$${NOT_A_VAR}").unwrap().is_empty());
    // inside a default `$$` is kept as written, as drone/envsubst does
    assert_eq!(sub("${V:=a$$b}", &[]), "a$$b");
}

#[test]
fn env_then_config_then_case_insensitive_config() {
    let v = vars(
        &[("A", "env")],
        &[
            ("A", "cfg"),
            ("B", "cfg"),
            ("kubernetes_version", "v1.31.0"),
        ],
    );
    assert_eq!(
        substitute("${A} ${B} ${KUBERNETES_VERSION}", &v).unwrap(),
        "env cfg v1.31.0"
    );
    let mut v2 = v.clone();
    v2.overrides.insert("A".into(), "flag".into());
    assert_eq!(substitute("${A}", &v2).unwrap(), "flag");
    assert_eq!(v2.lookup_with_source("A"), Some(("flag", Source::Flag)));
    assert_eq!(v2.lookup_with_source("B"), Some(("cfg", Source::Config)));
    // the environment is searched upper-cased with - as _, like viper's AutomaticEnv
    let v3 = vars(&[("MY_VAR", "e")], &[]);
    assert_eq!(v3.lookup("my-var"), Some("e"));
    // an empty environment value counts as set
    let v4 = vars(&[("E", "")], &[]);
    assert_eq!(substitute("[${E}]", &v4).unwrap(), "[]");
}

#[test]
fn names_every_missing_variable() {
    let t = "${CLUSTER_NAME}\n${NAMESPACE}\n${KUBERNETES_VERSION:=v1.31.0}\n${CONTROL_PLANE_ENDPOINT_IP}\n${X:=}";
    let err = substitute(t, &vars(&[("NAMESPACE", "ns")], &[])).unwrap_err();
    assert_eq!(
        err,
        TemplateError::MissingVariables(vec![
            "CLUSTER_NAME".into(),
            "CONTROL_PLANE_ENDPOINT_IP".into(),
            "X".into()
        ])
    );
    let msg = err.to_string();
    assert!(
        msg.contains("[CLUSTER_NAME, CONTROL_PLANE_ENDPOINT_IP, X]"),
        "{msg}"
    );
    assert_eq!(
        variable_status(t, &vars(&[], &[("CLUSTER_NAME", "c")]))
            .unwrap()
            .into_iter()
            .filter(|v| v.missing)
            .map(|v| v.name)
            .collect::<Vec<_>>(),
        vec!["CONTROL_PLANE_ENDPOINT_IP", "NAMESPACE", "X"]
    );
}

#[test]
fn first_occurrence_decides_required() {
    // clusterctl keys each variable to its first occurrence
    let l = list_variables("${A}\n${A:=x}\n${B:=y}\n${B}").unwrap();
    assert_eq!(
        l[0],
        VariableInfo {
            name: "A".into(),
            required: true,
            default: None
        }
    );
    assert_eq!(
        l[1],
        VariableInfo {
            name: "B".into(),
            required: false,
            default: Some("y".into())
        }
    );
    assert!(substitute("${A}\n${A:=x}", &Variables::default()).is_err());
}

#[test]
fn list_variables_sorted_with_defaults() {
    let t = "${WORKER_MACHINE_COUNT:=1}\n${CLUSTER_NAME}\n${A:=${B}-x}\n$${ESCAPED}";
    let l = list_variables(t).unwrap();
    let names: Vec<_> = l.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(names, ["A", "CLUSTER_NAME", "WORKER_MACHINE_COUNT"]);
    assert_eq!(l[0].default.as_deref(), Some("${B}-x"));
    assert!(l[1].required);
    assert_eq!(l[2].default.as_deref(), Some("1"));
    let st = variable_status(t, &vars(&[("CLUSTER_NAME", "c")], &[])).unwrap();
    assert_eq!(st[1].source, Some(Source::Env));
    assert!(!st[1].missing);
    assert!(st.iter().all(|s| !s.missing));
}

#[test]
fn string_functions() {
    let e = &[("V", "Hello/World"), ("N", "abcdef")];
    assert_eq!(sub("${#N}", e), "6");
    assert_eq!(sub("${V,}", e), "hello/World");
    assert_eq!(sub("${V,,}", e), "hello/world");
    assert_eq!(sub("${N^}", e), "Abcdef");
    assert_eq!(sub("${N^^}", e), "ABCDEF");
    assert_eq!(sub("${N:2}", e), "cdef");
    assert_eq!(sub("${N:1:3}", e), "bcd");
    assert_eq!(sub("${N:10}", e), "");
    assert_eq!(sub("${V/o/0}", e), "Hell0/World");
    assert_eq!(sub("${V//o/0}", e), "Hell0/W0rld");
    assert_eq!(sub("${V/\\//-}", e), "Hello-World");
    assert_eq!(sub("${N/#ab/X}", e), "Xcdef");
    assert_eq!(sub("${N/%ef/X}", e), "abcdX");
    assert_eq!(sub("${N#a*c}", e), "def");
    assert_eq!(sub("${N##*[}", &[("N", "a[b[c")]), "c");
    assert_eq!(sub("${N%d*}", e), "abc");
    assert_eq!(sub("${N%%?e*}", &[("N", "xde1de2")]), "x");
    assert_eq!(sub("${N%de*}", &[("N", "xde1de2")]), "xde1");
}

#[test]
fn malformed_templates_report_position() {
    for (t, line) in [
        ("a: ${}", 1),
        ("x\ny: ${NAME", 2),
        ("${A B}", 1),
        ("${A:=x", 1),
        ("${#}", 1),
        ("${A-x}", 1),
    ] {
        match substitute(t, &Variables::default()) {
            Err(TemplateError::Parse { line: l, .. }) => assert_eq!(l, line, "{t}"),
            other => panic!("{t}: {other:?}"),
        }
    }
    let msg = substitute("ok\n  v: ${A B}", &Variables::default())
        .unwrap_err()
        .to_string();
    assert!(msg.starts_with("template line 2, column "), "{msg}");
}

#[test]
fn byoh_style_template_renders() {
    let t = r#"apiVersion: cluster.x-k8s.io/v1beta2
kind: Cluster
metadata:
  name: ${CLUSTER_NAME}
  namespace: ${NAMESPACE}
spec:
  topology:
    version: ${KUBERNETES_VERSION}
---
kind: KubeadmControlPlane
spec:
  replicas: ${CONTROL_PLANE_MACHINE_COUNT:=1}
  kubeadmConfigSpec:
    files:
    - content: |
        vip_address=${CONTROL_PLANE_ENDPOINT_IP}
        echo $$HOME
"#;
    let mut v = vars(
        &[("CONTROL_PLANE_ENDPOINT_IP", "10.0.0.10")],
        &[("NAMESPACE", "default")],
    );
    v.overrides.insert("CLUSTER_NAME".into(), "byoh-1".into());
    v.overrides
        .insert("KUBERNETES_VERSION".into(), "v1.33.1".into());
    let out = substitute(t, &v).unwrap();
    assert!(out.contains("name: byoh-1\n  namespace: default\n"));
    assert!(out.contains("version: v1.33.1"));
    assert!(out.contains("replicas: 1\n"));
    assert!(out.contains("vip_address=10.0.0.10\n        echo $HOME\n"));
    assert!(!out.contains("${"));
}

#[test]
fn generate_options_become_variables() {
    let mut v = vars(&[("WORKER_MACHINE_COUNT", "3")], &[]);
    let o = GenerateOptions {
        cluster_name: "byoh-1".into(),
        target_namespace: "team-a".into(),
        kubernetes_version: Some("v1.33.1".into()),
        ..Default::default()
    };
    v.apply_generate_options(&o).unwrap();
    assert_eq!(v.lookup("CLUSTER_NAME"), Some("byoh-1"));
    assert_eq!(v.lookup("NAMESPACE"), Some("team-a"));
    assert_eq!(v.lookup("KUBERNETES_VERSION"), Some("v1.33.1"));
    assert_eq!(v.lookup("CONTROL_PLANE_MACHINE_COUNT"), Some("1"));
    // not given on the command line: the environment's value is kept
    assert_eq!(v.lookup("WORKER_MACHINE_COUNT"), Some("3"));
    let mut v2 = Variables::default();
    v2.apply_generate_options(&GenerateOptions {
        worker_machine_count: Some(2),
        control_plane_machine_count: Some(3),
        ..o.clone()
    })
    .unwrap();
    assert_eq!(v2.lookup("WORKER_MACHINE_COUNT"), Some("2"));
    assert_eq!(v2.lookup("CONTROL_PLANE_MACHINE_COUNT"), Some("3"));
    assert_eq!(
        Variables::default().apply_generate_options(&GenerateOptions {
            kubernetes_version: None,
            ..o.clone()
        }),
        Ok(())
    );

    for bad in [
        GenerateOptions {
            cluster_name: "Bad_Name".into(),
            ..o.clone()
        },
        GenerateOptions {
            target_namespace: "a.b".into(),
            ..o.clone()
        },
        GenerateOptions {
            kubernetes_version: Some("latest".into()),
            ..o.clone()
        },
        GenerateOptions {
            control_plane_machine_count: Some(0),
            ..o.clone()
        },
        GenerateOptions {
            worker_machine_count: Some(-1),
            ..o.clone()
        },
    ] {
        assert!(
            matches!(
                Variables::default().apply_generate_options(&bad),
                Err(TemplateError::InvalidOption(_))
            ),
            "{bad:?}"
        );
    }
    let mut v3 = vars(&[("CONTROL_PLANE_MACHINE_COUNT", "three")], &[]);
    let e = v3.apply_generate_options(&o).unwrap_err().to_string();
    assert!(e.contains("CONTROL_PLANE_MACHINE_COUNT"), "{e}");
    assert_eq!(template_file_name(None), "cluster-template.yaml");
    assert_eq!(
        template_file_name(Some("docker")),
        "cluster-template-docker.yaml"
    );
}

// 2,000 nested `${A:=…}` overflowed the stack.
#[test]
fn deep_nesting_is_refused_not_a_crash() {
    let deep = format!("{}x{}", "${A:=".repeat(2000), "}".repeat(2000));
    let e = substitute(&deep, &vars(&[], &[])).unwrap_err();
    assert!(e.to_string().contains("nested more than 32 deep"), "{e}");
    let ok = format!("{}x{}", "${A:=".repeat(32), "}".repeat(32));
    assert_eq!(substitute(&ok, &vars(&[], &[])).unwrap(), "x");
}

// `${X##*a*a…*b}` was exponential (25 characters: 9 s; 60: more than 39 minutes).
#[test]
fn glob_trims_are_not_exponential() {
    let pattern = format!("{}b", "*a".repeat(30));
    let x = "a".repeat(60);
    let t = std::time::Instant::now();
    assert_eq!(sub(&format!("${{X##{pattern}}}"), &[("X", &x)]), x);
    assert_eq!(sub(&format!("${{X%%{pattern}}}"), &[("X", &x)]), x);
    // Generous: the automaton takes microseconds; the backtracking matcher took minutes.
    assert!(
        t.elapsed() < std::time::Duration::from_secs(2),
        "{:?}",
        t.elapsed()
    );
    // Matches still behave like the shell's, escapes included, from either end.
    assert_eq!(sub("${X#*a}", &[("X", "banana")]), "nana");
    assert_eq!(sub("${X##*a}", &[("X", "banana")]), "");
    assert_eq!(sub("${X%a*}", &[("X", "banana")]), "banan");
    assert_eq!(sub("${X%%a*}", &[("X", "banana")]), "b");
    assert_eq!(sub("${X%\\*}", &[("X", "ab*")]), "ab");
    assert_eq!(sub("${X#?}", &[("X", "ab")]), "b");
    assert_eq!(sub("${X#z}", &[("X", "ab")]), "ab");
}

// A 100 MB template grew past 1 GB.
#[test]
fn oversized_templates_are_refused() {
    let big = "a".repeat(MAX_TEMPLATE_BYTES + 1);
    let e = substitute(&big, &vars(&[], &[])).unwrap_err();
    assert!(matches!(e, TemplateError::TooLarge(_)), "{e}");
    assert!(list_variables(&big).is_err());
}
