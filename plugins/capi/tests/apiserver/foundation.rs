//! Acceptance for `kubectl-capi`, on the real testbed: version discovery on both CAPI
//! API versions, every error class produced for real, the completion shim with live names,
//! and the binary run through the real `kubectl` and as a clusterctl plugin.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::discovery::ApiResource;
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_kubectl-capi");

use crate::objects::{self, CAPI, ar, assert_fails, create};
use testbed::fixtures::poll;

use testbed::fixtures::run::{assert_contains, assert_lacks, assert_ok};
use testbed::fixtures::run::{kubectl_bin, kubectl_dir, stderr, stdout, system_path};

fn run(args: &[&str], env: &[(&str, &str)]) -> Output {
    testbed::fixtures::run::plugin_env(BIN, args, env)
}

fn kc(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// `version <args> -o json|yaml` with `env`, insisting on success; its output as data.
#[track_caller]
fn version(args: &[&str], format: &str, env: &[(&str, &str)]) -> Value {
    let o = run(&[&["version"], args, &["-o", format]].concat(), env);
    let text = assert_ok(&o, "version");
    let v = match format {
        "json" => serde_json::from_str(&text).map_err(|e| e.to_string()),
        _ => serde_saphyr::from_str(&text).map_err(|e| e.to_string()),
    };
    v.unwrap_or_else(|e| panic!("-o {format}: {e}\n{text}"))
}

fn cluster_ar(version: &str) -> ApiResource {
    ar(CAPI, version, "Cluster", "clusters")
}

async fn create_cluster(client: &kube::Client, ns: &str, version: &str, name: &str) {
    let cluster = json!({
        "apiVersion": format!("{CAPI}/{version}"), "kind": "Cluster",
        "metadata": {"name": name},
        "spec": {"clusterNetwork": {"services": {"cidrBlocks": ["10.96.0.0/12"]}}}
    });
    create(&objects::api(client, ns, &cluster_ar(version)), cluster).await;
}

async fn conn_for(kubeconfig: &Path, ns: &str) -> cli::Conn {
    cli::KubeFlags {
        kubeconfig: Some(kubeconfig.to_path_buf()),
        namespace: Some(ns.to_string()),
        ..Default::default()
    }
    .connect()
    .await
    .expect("connect")
}

/// `e`, the answer to `verb` on the v1beta2 Cluster `name` in `ns`, as the plugins report it.
fn reported(
    conn: &cli::Conn,
    e: kube::Error,
    verb: &str,
    ns: &str,
    name: &str,
) -> kclient::error::Error {
    let op = kclient::error::Op::on(verb, &cluster_ar("v1beta2"))
        .in_namespace(Some(ns))
        .named(name);
    conn.error(e, &op)
}

// ------------------------------------------------------------------ version and discovery

#[tokio::test]
async fn version_reports_v1beta2_on_the_full_profile() {
    let tb = testbed::shared();
    let v = version(&["--kubeconfig", kc(&tb.kubeconfig)], "json", &[]);
    assert_eq!(v["clientVersion"]["name"], "kubectl-capi");
    // The set init installs, as init --list shows it.
    let set = v["clientVersion"]["initSet"].as_array().unwrap();
    assert_eq!(set.len(), kcore::init::set::COMPONENTS.len());
    assert_eq!(
        set[1],
        json!({"component": "cluster-api", "version": "v1.14.2"})
    );
    let capi = &v["server"]["clusterAPI"];
    assert_eq!(capi["version"], "v1beta2");
    assert_eq!(capi["served"], json!(["v1beta2", "v1beta1"]));
    assert_eq!(capi["contract"], "v1beta2");
    assert_eq!(v["server"]["byoh"]["version"], "v1beta1");
    assert_eq!(v["server"]["byoh"]["contract"], "v1beta1");
    assert_eq!(v["server"]["kamaji"]["version"], "v1alpha1");
    assert_eq!(v["server"]["url"], tb.server.as_str());
    assert_eq!(v["server"]["context"], "testbed");

    // The table form, and YAML through KUBECONFIG.
    let o = run(&["version", "--kubeconfig", kc(&tb.kubeconfig)], &[]);
    let text = stdout(&o);
    assert!(
        text.lines().any(|l| l.starts_with("Cluster API:")
            && l.contains("cluster.x-k8s.io/v1beta2 (served: v1beta2, v1beta1; contract v1beta2)")),
        "{text}"
    );
    let y = version(&[], "yaml", &[("KUBECONFIG", kc(&tb.kubeconfig))]);
    assert_eq!(y["server"]["clusterAPI"]["version"], "v1beta2");
}

#[tokio::test]
async fn version_reports_v1beta1_on_the_capi_1_10_profile() {
    let tb = testbed::shared_v1beta1();
    let v = version(&["--kubeconfig", kc(&tb.kubeconfig)], "json", &[]);
    assert_eq!(v["server"]["clusterAPI"]["version"], "v1beta1");
    assert_eq!(v["server"]["clusterAPI"]["served"], json!(["v1beta1"]));
    assert_eq!(v["server"]["clusterAPI"]["contract"], "v1beta1");
}

#[tokio::test]
async fn kubeconfig_env_with_several_files_is_merged() {
    let tb = testbed::shared();
    let dir = tempfile::tempdir().unwrap();
    // The first file sets current-context to a context defined only in the second.
    let first = dir.path().join("first");
    std::fs::write(
        &first,
        "apiVersion: v1\nkind: Config\ncurrent-context: testbed\nclusters: []\nusers: []\ncontexts: []\n",
    )
    .unwrap();
    let joined = format!("{}:{}", first.display(), tb.kubeconfig.display());
    let v = version(&[], "json", &[("KUBECONFIG", &joined)]);
    assert_eq!(v["server"]["clusterAPI"]["version"], "v1beta2");
}

// ------------------------------------------------------------------ errors, for real

fn assert_error(o: &Output, line: &str, hint_contains: &str) {
    let err = stderr(o);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(o.status.code(), Some(1), "stderr: {err}");
    assert!(lines.contains(&line), "expected line {line:?} in:\n{err}");
    let hint = lines
        .iter()
        .find(|l| l.starts_with("hint: "))
        .unwrap_or_else(|| panic!("no hint line in:\n{err}"));
    assert!(
        hint.contains(hint_contains),
        "hint {hint:?} lacks {hint_contains:?}"
    );
}

#[tokio::test]
async fn stopped_server_is_unreachable_naming_context_and_server() {
    let tb = testbed::Testbed::start(testbed::Options {
        profile: testbed::Profile::Bare,
        controller_manager: false,
        ..Default::default()
    })
    .await
    .expect("start a testbed");
    tb.stop();
    let o = run(&["version", "--kubeconfig", kc(&tb.kubeconfig)], &[]);
    assert_error(
        &o,
        &format!(
            "error: cannot reach the API server {} of context \"testbed\": connection refused",
            tb.server
        ),
        "context \"testbed\"",
    );
    // The client version is still printed, like kubectl version.
    assert!(stdout(&o).starts_with("Client Version:"));
}

#[tokio::test]
async fn bad_token_is_rejected_credentials() {
    let tb = testbed::shared();
    let bad = tb.kubeconfig_with_token("bad", "nope").unwrap();
    let o = run(&["version", "--kubeconfig", kc(&bad)], &[]);
    assert_error(
        &o,
        &format!(
            "error: the API server {} rejected the credentials of context \"bad\" (401 Unauthorized)",
            tb.server
        ),
        "wrong or expired",
    );
}

#[tokio::test]
async fn rbac_limited_user_is_forbidden_with_can_i_hint() {
    let tb = testbed::shared();
    let limited = tb
        .kubeconfig_with_token("limited", testbed::LIMITED_TOKEN)
        .unwrap();
    let o = run(&["version", "--kubeconfig", kc(&limited)], &[]);
    assert_error(
        &o,
        "error: user \"limited\" cannot list customresourcedefinitions.apiextensions.k8s.io",
        "kubectl auth can-i list customresourcedefinitions.apiextensions.k8s.io",
    );
    // What discovery could see is still reported.
    assert_contains(&stdout(&o), "cluster.x-k8s.io/v1beta2");

    // --as impersonates: the admin acting as "limited" gets the same answer.
    let o = run(
        &[
            "version",
            "--kubeconfig",
            kc(&tb.kubeconfig),
            "--as",
            "limited",
            "--as-group",
            "testbed:limited",
        ],
        &[],
    );
    assert_error(
        &o,
        "error: user \"limited\" cannot list customresourcedefinitions.apiextensions.k8s.io",
        "kubectl auth can-i",
    );

    // A namespaced list names the namespace in the line and in the can-i hint.
    let conn = conn_for(&limited, "team-a").await;
    let err = kclient::api::list_names(&conn, &cluster_ar("v1beta2"), Some("team-a"))
        .await
        .unwrap_err();
    assert_eq!(
        kclient::render::error_text(&err, false),
        "error: user \"limited\" cannot list clusters.cluster.x-k8s.io in namespace \"team-a\"\nhint: check with `kubectl auth can-i list clusters.cluster.x-k8s.io -n team-a` and ask a cluster admin for that permission\n"
    );
    assert_eq!(err.exit_code(), 1);
}

#[tokio::test]
async fn cluster_without_capi_says_install_it() {
    let tb = testbed::shared_bare();
    let o = run(&["version", "--kubeconfig", kc(&tb.kubeconfig)], &[]);
    assert_error(
        &o,
        "error: Cluster API is not installed on this cluster (no cluster.x-k8s.io API); install it with clusterctl init",
        "pick another with --context",
    );
}

#[tokio::test]
async fn unanswered_request_times_out() {
    let tb = testbed::shared();
    // A server that accepts connections and never answers.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let text = std::fs::read_to_string(&tb.kubeconfig)
        .unwrap()
        .replace(&tb.server, &format!("https://127.0.0.1:{port}"));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kubeconfig");
    std::fs::write(&path, text).unwrap();
    let started = std::time::Instant::now();
    let o = run(
        &[
            "version",
            "--kubeconfig",
            kc(&path),
            "--request-timeout",
            "1s",
        ],
        &[],
    );
    assert!(started.elapsed() < Duration::from_secs(20));
    let err = assert_fails(&o, 1, "");
    assert!(
        err.lines().any(|l| l.starts_with(&format!(
            "error: timed out after 1s waiting for the API server https://127.0.0.1:{port}"
        ))),
        "{err}"
    );
    drop(listener);
}

#[tokio::test]
async fn usage_errors_exit_2() {
    assert_fails(&run(&["nope"], &[]), 2, "unrecognized subcommand 'nope'");
    assert_fails(&run(&["version", "--request-timeout", "soon"], &[]), 2, "");
    let kubeconfig = [("KUBECONFIG", kc(&testbed::shared().kubeconfig))];
    for (args, env, first) in [
        (
            ["version", "--kubeconfig", "/nonexistent/kc"],
            &[][..],
            "error: cannot read the kubeconfig: /nonexistent/kc",
        ),
        (
            ["version", "--context", "nope"],
            &kubeconfig,
            "error: context \"nope\" not found in the kubeconfig",
        ),
    ] {
        let err = assert_fails(&run(&args, env), 1, "");
        assert!(err.starts_with(first), "want {first:?} first in:\n{err}");
    }
}

#[tokio::test]
async fn not_found_offers_the_closest_names() {
    let tb = testbed::shared();
    let (client, ns) = tb.namespace("notfound").await;
    for name in ["prod-east", "prod-west", "staging"] {
        create_cluster(&client, &ns, "v1beta2", name).await;
    }
    let conn = conn_for(&tb.kubeconfig, &ns).await;
    let apis = kclient::discovery::ServerApis::discover(&conn)
        .await
        .unwrap();
    let ar = apis.cluster().unwrap();
    assert_eq!(ar.version, "v1beta2");
    let found = kclient::api::get_or_suggest(&conn, &ar, &ns, "prod-east")
        .await
        .unwrap();
    assert_eq!(found.metadata.name.as_deref(), Some("prod-east"));
    let err = kclient::api::get_or_suggest(&conn, &ar, &ns, "prod-eats")
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "Cluster \"prod-eats\" not found in namespace \"{ns}\"; did you mean one of \"prod-east\", \"prod-west\"?"
        )
    );
    let err = kclient::api::get_or_suggest(&conn, &ar, &ns, "nothing-like-it")
        .await
        .unwrap_err();
    assert_eq!(
        kclient::render::error_text(&err, false),
        format!(
            "error: Cluster \"nothing-like-it\" not found in namespace \"{ns}\"\nhint: check the name and the namespace (looked in \"{ns}\"; use -n or -A)\n"
        )
    );
}

#[tokio::test]
async fn admission_denial_is_quoted() {
    let tb = testbed::shared();
    let (client, ns) = tb.namespace("denial").await;
    // A ValidatingAdmissionPolicy is a real admission denial produced by the API server.
    let policy_name = format!("deny-forbidden-names-{ns}");
    let group = "admissionregistration.k8s.io";
    let policy: Vec<(ApiResource, Value)> = [
        (
            "ValidatingAdmissionPolicy",
            "validatingadmissionpolicies",
            json!({
                "failurePolicy": "Fail",
                "matchConstraints": {"resourceRules": [{
                    "apiGroups": ["cluster.x-k8s.io"], "apiVersions": ["*"],
                    "operations": ["CREATE"], "resources": ["clusters"]}]},
                "validations": [{"expression": "!object.metadata.name.startsWith('forbidden-')",
                                 "message": "cluster names must not start with forbidden-"}]
            }),
        ),
        (
            "ValidatingAdmissionPolicyBinding",
            "validatingadmissionpolicybindings",
            json!({
                "policyName": policy_name,
                "validationActions": ["Deny"],
                "matchResources": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}}}
            }),
        ),
    ]
    .into_iter()
    .map(|(kind, plural, spec)| {
        let obj = json!({"apiVersion": format!("{group}/v1"), "kind": kind,
                         "metadata": {"name": policy_name}, "spec": spec});
        (ar(group, "v1", kind, plural), obj)
    })
    .collect();
    let pp = PatchParams::apply("foundation-test").force();
    for (r, obj) in &policy {
        Api::<DynamicObject>::all_with(client.clone(), r)
            .patch(&policy_name, &pp, &Patch::Apply(obj))
            .await
            .unwrap_or_else(|e| panic!("applying the {}: {e}", r.kind));
    }

    let conn = conn_for(&tb.kubeconfig, &ns).await;
    let ar = cluster_ar("v1beta2");
    let api = kclient::api::dynamic(&conn, &ar, Some(&ns));
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
        "metadata": {"name": "forbidden-one"},
        "spec": {"clusterNetwork": {"apiServerPort": 6443}}
    }))
    .unwrap();
    // The policy takes effect within a few seconds of its creation.
    let err = poll::wait_for(
        "the policy to deny",
        Duration::from_secs(30),
        String::new,
        || async {
            match api.create(&PostParams::default(), &obj).await {
                Err(e) => Some(e),
                Ok(_) => {
                    api.delete("forbidden-one", &Default::default()).await.ok();
                    None
                }
            }
        },
    )
    .await;
    let err = reported(&conn, err, "create", &ns, "forbidden-one");
    assert_eq!(
        err.to_string(),
        format!(
            "ValidatingAdmissionPolicy '{policy_name}' with binding '{policy_name}' denied the request: \"cluster names must not start with forbidden-\""
        )
    );
    assert_eq!(err.exit_code(), 1);
    for (r, _) in policy.iter().rev() {
        Api::<DynamicObject>::all_with(client.clone(), r)
            .delete(&policy_name, &Default::default())
            .await
            .ok();
    }
}

#[tokio::test]
async fn conflicts_are_typed_and_retried_where_safe() {
    let tb = testbed::shared();
    let (client, ns) = tb.namespace("conflict").await;
    create_cluster(&client, &ns, "v1beta2", "c1").await;
    let conn = conn_for(&tb.kubeconfig, &ns).await;
    let ar = cluster_ar("v1beta2");
    let api = kclient::api::dynamic(&conn, &ar, Some(&ns));
    let stale = api.get("c1").await.unwrap();
    // Someone else changes the object.
    let mut fresh = api.get("c1").await.unwrap();
    fresh.metadata.labels = Some([("by".to_string(), "someone".to_string())].into());
    api.replace("c1", &PostParams::default(), &fresh)
        .await
        .unwrap();

    let e = api
        .replace("c1", &PostParams::default(), &stale)
        .await
        .unwrap_err();
    let err = reported(&conn, e, "update", &ns, "c1");
    assert_eq!(
        err.to_string(),
        "Cluster \"c1\" was changed by someone else while we updated it"
    );

    // The retry helper re-reads on every attempt: the first uses the stale copy and conflicts.
    let mut attempts = Vec::new();
    let updated = kclient::error::retry_on_conflict(5, |attempt| {
        attempts.push(attempt);
        let api = api.clone();
        let stale = stale.clone();
        async move {
            let mut obj = if attempt == 0 {
                stale
            } else {
                api.get("c1").await?
            };
            let mut labels = obj.metadata.labels.clone().unwrap_or_default();
            labels.insert("by".into(), "us".into());
            obj.metadata.labels = Some(labels);
            api.replace("c1", &PostParams::default(), &obj).await
        }
    })
    .await
    .expect("retried update");
    assert_eq!(attempts, vec![0, 1]);
    assert_eq!(updated.metadata.labels.unwrap()["by"], "us");
}

// ------------------------------------------------------------------ completion

/// A directory holding only links to our binaries and the completion shims.
fn plugin_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let bin_dir = Path::new(BIN).parent().unwrap();
    for b in ["kubectl-capi", "kubectl-kamaji"] {
        let target = bin_dir.join(b);
        if target.exists() {
            std::os::unix::fs::symlink(&target, dir.path().join(b)).unwrap();
        }
    }
    let completions = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../completions");
    for shim in ["kubectl_complete-capi", "kubectl_complete-kamaji"] {
        std::fs::copy(completions.join(shim), dir.path().join(shim)).unwrap();
    }
    dir
}

/// The completion of `describe <words>` for a `describe` verb whose positional is a CLUSTER:
/// the candidates and the directive.
async fn complete_describe(words: &[&str]) -> (Vec<String>, u32) {
    let root = clap::Command::new("kubectl-capi").subcommand(
        <cli::KubeFlags as clap::Args>::augment_args(
            clap::Command::new("describe").arg(clap::Arg::new("name").value_name("CLUSTER")),
        ),
    );
    let words: Vec<String> = std::iter::once("describe")
        .chain(words.iter().copied())
        .map(str::to_string)
        .collect();
    cli::complete::answer(&root, &words).await
}

fn path_with(dir: &Path) -> String {
    // Only our directory and the system directories (for sh, env and kubectl).
    format!("{}:{}", dir.display(), system_path())
}

#[tokio::test]
async fn completion_shim_returns_live_names() {
    let tb = testbed::shared();
    let (client, ns) = tb.namespace("complete-shim").await;
    create_cluster(&client, &ns, "v1beta2", "alpha").await;
    let dir = plugin_dir();
    let shim = dir.path().join("kubectl_complete-capi");
    let complete = |args: &[&str]| {
        let o = Command::new(&shim)
            .args(args)
            .env("PATH", path_with(dir.path()))
            .env("KUBECONFIG", &tb.kubeconfig)
            .output()
            .expect("run the shim");
        assert!(o.status.success(), "{}", stderr(&o));
        stdout(&o)
    };
    // Verbs, then flags, then live namespaces from the current context.
    let verbs = complete(&[""]);
    let verb_lines: Vec<&str> = verbs.lines().collect();
    assert!(
        verb_lines.contains(&"completion") && verb_lines.contains(&"version"),
        "{verbs}"
    );
    assert_lacks(&verbs, "__complete");
    assert_eq!(verb_lines.last(), Some(&":4"));
    let mut sorted = verb_lines[..verb_lines.len() - 1].to_vec();
    sorted.sort();
    assert_eq!(sorted, verb_lines[..verb_lines.len() - 1].to_vec());
    assert_eq!(complete(&["vers"]), "version\n:4\n");
    assert_eq!(complete(&["version", "--out"]), "--output\n:4\n");
    let prefix = &ns[..ns.len() - 2];
    let out = complete(&["version", "-n", prefix]);
    assert!(out.lines().any(|l| l == ns), "{out}");
    assert!(out.ends_with("\n:4\n"), "{out}");
    assert!(!out.contains("kube-system"));

    // Through the real kubectl, which finds the shim by name.
    let o = Command::new(kubectl_bin())
        .args(["__complete", "capi", "version", "--namespace", prefix])
        .env("PATH", path_with(dir.path()))
        .env("KUBECONFIG", &tb.kubeconfig)
        .output()
        .expect("kubectl");
    assert!(
        stdout(&o).lines().any(|l| l == ns),
        "{}\n{}",
        stdout(&o),
        stderr(&o)
    );

    // Through the shim, verbs whose positional is a CLUSTER offer live Cluster names.
    let mut checked = 0;
    for verb in ["describe", "pause", "resume", "restart", "scale", "delete"] {
        if verb_lines.contains(&verb) {
            assert_eq!(
                complete(&[verb, "-n", &ns, ""]),
                "alpha\n:4\n",
                "kubectl capi {verb} <TAB>"
            );
            checked += 1;
        }
    }
    eprintln!("live Cluster names checked through {checked} verbs");

    // Live Cluster names for any positional named CLUSTER, at the served version.
    let kubeconfig = kc(&tb.kubeconfig);
    assert_eq!(
        complete_describe(&["--kubeconfig", kubeconfig, "-n", &ns, "al"]).await,
        (vec!["alpha".to_string()], 4)
    );
}

#[tokio::test]
async fn completion_lists_v1beta1_clusters_too() {
    let tb = testbed::shared_v1beta1();
    let (client, ns) = tb.namespace("complete-v1beta1").await;
    create_cluster(&client, &ns, "v1beta1", "old-one").await;
    let kubeconfig = kc(&tb.kubeconfig);
    assert_eq!(
        complete_describe(&["--kubeconfig", kubeconfig, "-n", &ns, ""]).await,
        (vec!["old-one".to_string()], 4)
    );
    // An unreachable server answers nothing, with the error directive.
    let unreachable = [
        "--server",
        "https://127.0.0.1:1",
        "--kubeconfig",
        kubeconfig,
        "",
    ];
    assert_eq!(complete_describe(&unreachable).await, (vec![], 1));
}

#[test]
fn completion_scripts_are_generated_for_each_shell() {
    // bash, zsh and fish ask the binary for candidates (live names); the compat test drives
    // the bash one against the testbed.
    for shell in ["bash", "zsh", "fish"] {
        let o = run(&["completion", shell], &[]);
        assert!(o.status.success());
        let s = stdout(&o);
        assert!(s.contains("kubectl-capi __complete"), "{shell}: {s}");
    }
    let bash = stdout(&run(&["completion", "bash"], &[]));
    let check = Command::new("bash")
        .args(["-n", "-c", &bash])
        .output()
        .unwrap();
    assert!(check.status.success(), "{}", stderr(&check));
    // Other shells get clap's static script, without the hidden verbs.
    for shell in ["powershell", "elvish"] {
        let o = run(&["completion", shell], &[]);
        assert!(o.status.success());
        let s = stdout(&o);
        assert!(s.contains("version"), "{shell}");
        assert!(
            !s.contains("__complete"),
            "{shell} script must not offer the hidden verb"
        );
    }
}

// ------------------------------------------------------------------ kubectl and clusterctl

fn kubectl(dir: &Path, args: &[&str]) -> Output {
    Command::new(kubectl_bin())
        .args(args)
        .env("PATH", path_with(dir))
        .env("NO_COLOR", "1")
        .output()
        .expect("kubectl")
}

#[test]
fn through_kubectl_usage_reads_kubectl_capi_and_plugin_list_is_clean() {
    let dir = plugin_dir();
    let o = kubectl(dir.path(), &["capi", "--help"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let help = stdout(&o);
    assert_contains(&help, "Usage: kubectl capi [OPTIONS] <COMMAND>");
    assert_contains(&help, "Exit status:");
    assert_contains(&help, "  2  usage error");
    // Only real verbs are listed.
    assert!(!help.contains("__complete"));
    assert!(!help.contains("\n  help"));
    let o = kubectl(dir.path(), &["capi", "version", "--help"]);
    assert!(stdout(&o).contains("Usage: kubectl capi version [OPTIONS]"));
    let o = kubectl(dir.path(), &["capi", "nope"]);
    assert_eq!(o.status.code(), Some(2));
    // One line and a hint naming the program as kubectl runs it.
    assert_contains(&stderr(&o), "hint: see kubectl capi --help");
    assert_eq!(stderr(&o).lines().count(), 2, "{}", stderr(&o));

    // A PATH with only our binaries and kubectl's directory: no warnings, exit 0.
    let plugin_list = tempfile::tempdir().unwrap();
    for b in ["kubectl-capi", "kubectl-kamaji"] {
        let t = dir.path().join(b);
        if t.exists() {
            std::os::unix::fs::symlink(std::fs::read_link(&t).unwrap(), plugin_list.path().join(b))
                .unwrap();
        }
    }
    let o = Command::new(kubectl_bin())
        .args(["plugin", "list"])
        .env(
            "PATH",
            format!("{}:{}", plugin_list.path().display(), kubectl_dir()),
        )
        .output()
        .unwrap();
    let all = format!("{}{}", stdout(&o), stderr(&o));
    assert!(o.status.success(), "{all}");
    assert!(!all.to_lowercase().contains("warning"), "{all}");
    assert_contains(&all, "kubectl-capi");
}

#[test]
fn as_clusterctl_plugin_usage_reads_clusterctl_capi() {
    let dir = tempfile::tempdir().unwrap();
    let link: PathBuf = dir.path().join("clusterctl-capi");
    std::os::unix::fs::symlink(BIN, &link).unwrap();
    let clusterctl_capi = |args: &[&str]| Command::new(&link).args(args).output().unwrap();
    let o = clusterctl_capi(&["--help"]);
    assert!(o.status.success());
    assert_contains(&stdout(&o), "Usage: clusterctl capi [OPTIONS] <COMMAND>");
    let o = clusterctl_capi(&["version", "--help"]);
    assert_contains(&stdout(&o), "Usage: clusterctl capi version [OPTIONS]");
    let o = clusterctl_capi(&["version", "--client", "-o", "json"]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["clientVersion"]["name"], "clusterctl-capi");
}

#[test]
fn other_plugins_verbs_are_never_hidden() {
    let dir = plugin_dir();
    let ext = dir.path().join("kubectl-capi-hello_world");
    std::fs::write(&ext, "#!/bin/sh\necho \"hello from the outside: $*\"\n").unwrap();
    let mut perms = std::fs::metadata(&ext).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&ext, perms).unwrap();
    // Through kubectl (its own longest-name rule) and directly (ours).
    let o = kubectl(dir.path(), &["capi", "hello-world", "-n", "x"]);
    assert_eq!(
        stdout(&o),
        "hello from the outside: -n x\n",
        "{}",
        stderr(&o)
    );
    let capi = |args: &[&str]| {
        Command::new(BIN)
            .args(args)
            .env("PATH", path_with(dir.path()))
            .output()
            .unwrap()
    };
    let o = capi(&["hello-world", "--flag"]);
    assert_eq!(stdout(&o), "hello from the outside: --flag\n");
    // --help lists it; an unknown verb without such a binary is still a usage error.
    let help = stdout(&capi(&["--help"]));
    assert_contains(&help, "Verbs from other plugins on PATH");
    assert_contains(&help, "  hello-world ");
    assert_eq!(capi(&["goodbye"]).status.code(), Some(2));
}
