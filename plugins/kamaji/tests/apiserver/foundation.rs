//! Acceptance for `kubectl-kamaji`, on the real testbed: version discovery, errors,
//! the completion shim with live names, and the binary run through the real `kubectl` and as
//! a clusterctl plugin.

use std::path::Path;
use std::process::{Command, Output};

use kube::api::{Api, DynamicObject, PostParams};
use kube::discovery::ApiResource;
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_kubectl-kamaji");

use testbed::fixtures::run::assert_contains;
use testbed::fixtures::run::{kubectl_bin, kubectl_dir, stderr, stdout, system_path};

fn run(args: &[&str], env: &[(&str, &str)]) -> Output {
    testbed::fixtures::run::plugin_env(BIN, args, env)
}

fn kc(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

#[tokio::test]
async fn version_reports_what_the_cluster_serves() {
    let tb = testbed::shared();
    let o = run(
        &["version", "-o", "json", "--kubeconfig", kc(&tb.kubeconfig)],
        &[],
    );
    assert!(o.status.success(), "stderr: {}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["clientVersion"]["name"], "kubectl-kamaji");
    assert_eq!(v["server"]["clusterAPI"]["version"], "v1beta2");
    assert_eq!(v["server"]["kamaji"]["group"], "kamaji.clastix.io");
    assert_eq!(v["server"]["kamaji"]["version"], "v1alpha1");

    let tb1 = testbed::shared_v1beta1();
    let o = run(
        &["version", "-o", "yaml", "--kubeconfig", kc(&tb1.kubeconfig)],
        &[],
    );
    assert!(o.status.success(), "stderr: {}", stderr(&o));
    let y: Value = serde_saphyr::from_str(&stdout(&o)).unwrap();
    assert_eq!(y["server"]["clusterAPI"]["version"], "v1beta1");
}

#[tokio::test]
async fn errors_are_one_line_and_a_hint() {
    let tb = testbed::shared();
    let bad = tb.kubeconfig_with_token("bad-kamaji", "nope").unwrap();
    let o = run(&["version", "--kubeconfig", kc(&bad)], &[]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert_eq!(
        err.lines().next(),
        Some(
            format!(
                "error: the API server {} rejected the credentials of context \"bad-kamaji\" (401 Unauthorized)",
                tb.server
            )
            .as_str()
        ),
        "{err}"
    );
    assert!(err.lines().nth(1).unwrap_or("").starts_with("hint: "));
    assert_eq!(err.lines().count(), 2, "{err}");

    let bare = testbed::shared_bare();
    let o = run(&["version", "--kubeconfig", kc(&bare.kubeconfig)], &[]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).starts_with(
        "error: Cluster API is not installed on this cluster (no cluster.x-k8s.io API); install it with clusterctl init\n"
    ));
    let o = run(
        &["version", "-o", "name", "--kubeconfig", kc(&tb.kubeconfig)],
        &[],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).starts_with("error: -o name is not supported here"));
}

fn plugin_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(BIN, dir.path().join("kubectl-kamaji")).unwrap();
    let shim =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../completions/kubectl_complete-kamaji");
    std::fs::copy(shim, dir.path().join("kubectl_complete-kamaji")).unwrap();
    dir
}

#[tokio::test]
async fn completion_shim_returns_live_names() {
    let tb = testbed::shared();
    let (client, ns) = tb.namespace("kamaji-complete").await;
    let tcp = ApiResource {
        group: "kamaji.clastix.io".into(),
        version: "v1alpha1".into(),
        api_version: "kamaji.clastix.io/v1alpha1".into(),
        kind: "TenantControlPlane".into(),
        plural: "tenantcontrolplanes".into(),
    };
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "kamaji.clastix.io/v1alpha1", "kind": "TenantControlPlane",
        "metadata": {"name": "tenant-a"},
        "spec": {"controlPlane": {"deployment": {"replicas": 1}, "service": {"serviceType": "ClusterIP"}},
                 "kubernetes": {"version": "v1.33.0", "kubelet": {"cgroupfs": "systemd"}}}
    }))
    .unwrap();
    Api::<DynamicObject>::namespaced_with(client, &ns, &tcp)
        .create(&PostParams::default(), &obj)
        .await
        .expect("create a TenantControlPlane");

    let dir = plugin_dir();
    let o = Command::new(dir.path().join("kubectl_complete-kamaji"))
        .args(["version", "--namespace", &ns[..ns.len() - 1]])
        .env(
            "PATH",
            format!("{}:{}", dir.path().display(), system_path()),
        )
        .env("KUBECONFIG", &tb.kubeconfig)
        .output()
        .unwrap();
    let out = stdout(&o);
    assert!(out.lines().any(|l| l == ns), "{out}{}", stderr(&o));
    assert_eq!(out.lines().last(), Some(":4"));

    let root = clap::Command::new("kubectl-kamaji").subcommand(
        <cli::KubeFlags as clap::Args>::augment_args(
            clap::Command::new("kubeconfig")
                .arg(clap::Arg::new("name").value_name("TENANT_CONTROL_PLANE")),
        ),
    );
    let kubeconfig = kc(&tb.kubeconfig);
    let words = ["kubeconfig", "--kubeconfig", kubeconfig, "-n", &ns, "ten"].map(String::from);
    assert_eq!(
        cli::complete::answer(&root, &words).await,
        (vec!["tenant-a".to_string()], 4)
    );
}

#[test]
fn usage_follows_the_name_it_was_run_by() {
    let dir = plugin_dir();
    // The real kubectl, finding our plugin and no one else's.
    let kubectl = |args: &[&str]| {
        let path = format!("{}:{}", dir.path().display(), kubectl_dir());
        Command::new(kubectl_bin())
            .args(args)
            .env("PATH", path)
            .output()
            .unwrap()
    };
    let o = kubectl(&["kamaji", "--help"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_contains(&stdout(&o), "Usage: kubectl kamaji [OPTIONS] <COMMAND>");
    let o = kubectl(&["plugin", "list"]);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    assert!(
        !stderr(&o).to_lowercase().contains("warning"),
        "{}",
        stderr(&o)
    );

    let link = dir.path().join("clusterctl-kamaji");
    std::os::unix::fs::symlink(BIN, &link).unwrap();
    let o = Command::new(&link).arg("--help").output().unwrap();
    assert_contains(&stdout(&o), "Usage: clusterctl kamaji [OPTIONS] <COMMAND>");
}
