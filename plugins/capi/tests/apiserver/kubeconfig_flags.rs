//! The kubeconfig surface `kubectl capi kubeconfig` shares with `kubectl kamaji kubeconfig get`
//!: `-o yaml|json` as kubectl, `--write-to FILE` (clusterctl's name), `--merge[=FILE]`
//! with `--context-name`, `--set-current` and `--force`; the old spellings (`--output FILE`,
//! `--output-file`, `--merge-into`, `--switch`) still work; clusterctl's `get kubeconfig NAME
//! -n NS [--kubeconfig-context CTX]` word order works. The Secret is written here as Cluster API
//! writes it (`<cluster>-kubeconfig`, key `value`).

use std::process::{Command, Output};

use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use serde_json::{Value, json};
use testbed::fixtures::run::{assert_contains, words};
use testbed::fixtures::run::{stderr as err, stdout as out};

use crate::fleet_common::{mode, names};
use crate::objects::{b64, create};

const BIN: &str = env!("CARGO_BIN_EXE_kubectl-capi");

fn run(tb: &testbed::Testbed, args: &[&str]) -> Output {
    testbed::fixtures::run::plugin(BIN, &tb.kubeconfig, args)
}

#[track_caller]
fn ok(tb: &testbed::Testbed, args: &[&str]) -> Output {
    let o = run(tb, args);
    assert!(o.status.success(), "{args:?}: {}\n{}", err(&o), out(&o));
    o
}

fn yaml(text: &str) -> Value {
    serde_saphyr::from_str(text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// Writes `text` as `<cluster>-kubeconfig`.
async fn put_secret(client: &kube::Client, ns: &str, cluster: &str, text: &str) {
    let secret = json!({
        "metadata": {"name": format!("{cluster}-kubeconfig"),
                     "labels": {"cluster.x-k8s.io/cluster-name": cluster}},
        "type": "cluster.x-k8s.io/secret",
        "data": {"value": b64(text)}
    });
    create(&Api::<Secret>::namespaced(client.clone(), ns), secret).await;
}

/// Seeds `<cluster>-kubeconfig` and returns its text.
async fn seed(client: &kube::Client, ns: &str, cluster: &str, server: &str) -> String {
    let text = testbed::fixtures::workload_kubeconfig(cluster, server);
    put_secret(client, ns, cluster, &text).await;
    text
}

#[tokio::test]
async fn print_formats_files_and_clusterctl_word_order() {
    let tb = testbed::shared();
    let (client, ns) = tb.namespace("kc-flags-print").await;
    let text = seed(&client, &ns, "c1", "https://10.1.2.3:6443").await;

    // The kubeconfig as stored, however it is asked for.
    let current_context =
        yaml(&std::fs::read_to_string(&tb.kubeconfig).unwrap())["current-context"]
            .as_str()
            .unwrap()
            .to_string();
    for args in [
        vec!["kubeconfig", "c1", "-n", &ns],
        vec!["kubeconfig", "c1", "-n", &ns, "-o", "yaml"],
        vec!["kubeconfig", "get", "c1", "-n", &ns],
        vec!["kubeconfig", "get", "c1", "--namespace", &ns],
        vec![
            "kubeconfig",
            "get",
            "c1",
            "--namespace",
            &ns,
            "--kubeconfig-context",
            &current_context,
        ],
    ] {
        let o = ok(tb, &args);
        assert_eq!(out(&o), text, "{args:?}");
        assert!(err(&o).is_empty(), "{args:?}: {}", err(&o));
    }
    // clusterctl's --kubeconfig-context is kubectl's --context: a context that does not exist
    // is refused as --context refuses it.
    let o = run(
        tb,
        &[
            "kubeconfig",
            "get",
            "c1",
            "-n",
            &ns,
            "--kubeconfig-context",
            "nope",
        ],
    );
    crate::objects::assert_fails(&o, 1, "nope");

    // -o json: the same kubeconfig as JSON.
    let o = ok(tb, &["kubeconfig", "c1", "-n", &ns, "-o", "json"]);
    let j: Value = serde_json::from_str(&out(&o)).unwrap();
    assert_eq!(j, yaml(&text));

    // --write-to, --output-file, and the old --output FILE (with a warning): the same bytes,
    // mode 0600, nothing on stdout.
    let dir = tempfile::tempdir().unwrap();
    for (flag, file, warns) in [
        ("--write-to", "a.kubeconfig", false),
        ("--output-file", "b.kubeconfig", false),
        ("--output", "c.kubeconfig", true),
    ] {
        let f = dir.path().join(file);
        let fs = f.to_str().unwrap();
        let o = ok(tb, &["kubeconfig", "c1", "-n", &ns, flag, fs]);
        assert!(out(&o).is_empty(), "{flag}: {}", out(&o));
        assert_eq!(std::fs::read_to_string(&f).unwrap(), text, "{flag}");
        assert_eq!(mode(&f), 0o600, "{flag}");
        assert_eq!(
            err(&o).contains("Warning: --output FILE is the old spelling of --write-to"),
            warns,
            "{flag}: {}",
            err(&o)
        );
    }
    let f = dir.path().join("d.json");
    let json_to = ["-o", "json", "--write-to", f.to_str().unwrap()];
    ok(
        tb,
        &[&["kubeconfig", "c1", "-n", &ns], &json_to[..]].concat(),
    );
    let j: Value = serde_json::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap();
    assert_eq!(j, yaml(&text));

    // Usage errors: one line, exit 2, nothing printed, no request needed.
    for (line, says) in [
        ("kubeconfig c1 -o wide", "yaml or json"),
        ("kubeconfig c1 -o jsn", "use -o yaml or -o json"),
        ("kubeconfig c1 -o json --merge", "cannot be used with"),
        ("kubeconfig c1 --write-to x --merge", "cannot be used with"),
        ("kubeconfig c1 --set-current", "--merge"),
        ("kubeconfig get", "required"),
        (
            "kubeconfig c1 --context a --kubeconfig-context b",
            "two contexts",
        ),
    ] {
        let o = run(tb, &words(line));
        testbed::expect::one_line_refusal(&o, 2, says, line).unwrap();
    }
    tb.delete_namespace(&client, &ns).await;
}

#[tokio::test]
async fn merge_flags_new_and_old_spellings() {
    let tb = testbed::shared();
    let (client, ns) = tb.namespace("kc-flags-merge").await;
    seed(&client, &ns, "m1", "https://10.1.2.4:6443").await;
    seed(&client, &ns, "m2", "https://10.1.2.5:6443").await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config");
    let f = file.to_str().unwrap();
    let merge_to = format!("--merge={f}");

    // --merge=FILE --set-current: the context CLUSTER-admin@CLUSTER, now current.
    let o = ok(
        tb,
        &["kubeconfig", "m1", "-n", &ns, &merge_to, "--set-current"],
    );
    assert!(out(&o).is_empty(), "a merge prints nothing on stdout");
    assert_contains(
        &err(&o),
        &format!("merged context \"m1-admin@m1\" into {f}: added"),
    );
    let v = yaml(&std::fs::read_to_string(&file).unwrap());
    assert_eq!(v["current-context"], "m1-admin@m1");
    assert_eq!(mode(&file), 0o600);

    // The old spellings: --merge --merge-into FILE --switch; again: already up to date.
    let old = ["--merge", "--merge-into", f, "--switch"];
    let o = ok(tb, &[&["kubeconfig", "m1", "-n", &ns], &old[..]].concat());
    assert_contains(&err(&o), "already up to date");

    // --context-name: another name for the context; --set-current not given, so the current
    // context stays.
    let named = [&merge_to, "--context-name", "second"];
    ok(
        tb,
        &[&["kubeconfig", "get", "m2", "-n", &ns], &named[..]].concat(),
    );
    let v = yaml(&std::fs::read_to_string(&file).unwrap());
    assert_eq!(names(&v["contexts"]), ["m1-admin@m1", "second"]);
    assert_eq!(v["current-context"], "m1-admin@m1");

    // A conflict: one line, the hint both plugins give, nothing changed; --force replaces.
    let before = std::fs::read_to_string(&file).unwrap();
    let changed = before.replace("https://10.1.2.4:6443", "https://10.9.9.9:6443");
    std::fs::write(&file, &changed).unwrap();
    let o = run(tb, &["kubeconfig", "m1", "-n", &ns, &merge_to]);
    let line = testbed::expect::one_line_refusal(&o, 1, "already has cluster \"m1\"", "conflict");
    line.unwrap();
    assert_contains(
        &err(&o),
        &format!("hint: {}", kclient::kubeconfig::CONFLICT_HINT),
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), changed);
    let o = ok(tb, &["kubeconfig", "m1", "-n", &ns, &merge_to, "--force"]);
    assert_contains(&err(&o), "replaced cluster \"m1\"");
    assert!(
        std::fs::read_to_string(&file)
            .unwrap()
            .contains("https://10.1.2.4:6443")
    );
    tb.delete_namespace(&client, &ns).await;
}

/// A Secret whose kubeconfig kubectl cannot load is refused before a merge, in one
/// line naming the Secret, and the user's file is left as it was (no `.bak` either). The shapes
/// are checked against the real kubectl first: it must refuse each of them.
#[tokio::test]
async fn merge_refuses_a_secret_kubectl_cannot_load() {
    let tb = testbed::shared();
    let (client, ns) = tb.namespace("kc-flags-bad-secret").await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config");
    let mine = testbed::fixtures::workload_kubeconfig("mine", "https://10.1.2.9:6443");
    std::fs::write(&file, &mine).unwrap();
    let good = testbed::fixtures::workload_kubeconfig("b", "https://10.1.2.6:6443");
    let shapes = [
        // A plain N is a boolean to kubectl (YAML 1.1), not a namespace.
        (
            "b1",
            good.replace(
                "    user: b-admin\n",
                "    user: b-admin\n    namespace: N\n",
            ),
        ),
        // An entry whose `user:` is a string.
        (
            "b2",
            good.replace(
                "  user:\n    token: fixture-token-b\n",
                "  user: \"name: N\"\n",
            ),
        ),
        // certificate-authority-data that is not base64.
        (
            "b3",
            good.replace(
                "    insecure-skip-tls-verify: true\n",
                "    certificate-authority-data: not-base64!\n",
            ),
        ),
    ];
    for (cluster, text) in &shapes {
        assert_ne!(text, &good, "{cluster}: the shape was not planted");
        let probe = dir.path().join(format!("{cluster}.probe"));
        std::fs::write(&probe, text).unwrap();
        let kubectl = Command::new("kubectl")
            .args(["config", "view", "--kubeconfig"])
            .arg(&probe)
            .output()
            .expect("kubectl on PATH");
        assert!(
            !kubectl.status.success(),
            "{cluster}: kubectl loads it:\n{text}"
        );
        put_secret(&client, &ns, cluster, text).await;
        let merge_to = format!("--merge={}", file.display());
        let o = run(
            tb,
            &["kubeconfig", cluster, "-n", &ns, &merge_to, "--set-current"],
        );
        let says =
            format!("Secret {ns}/{cluster}-kubeconfig holds a kubeconfig kubectl cannot load");
        testbed::expect::one_line_refusal(&o, 1, &says, cluster).unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), mine, "{cluster}");
        assert!(!dir.path().join("config.bak").exists(), "{cluster}");
    }
    tb.delete_namespace(&client, &ns).await;
}
