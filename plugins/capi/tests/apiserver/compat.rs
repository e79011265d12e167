//! Command lines copied from clusterctl's documentation work on `kubectl capi`, and
//! kubectl's habits (`-v=6`, `-o jsonpath`, `-o custom-columns`, `--show-labels`) work on the
//! list verbs. Runs against the testbed (real API server, real CAPI v1.14 CRDs).
//!
//! The command lines are kept as data, each with its source: the Cluster API v1.14.2 book,
//! `docs/book/src/clusterctl/commands/<file>.md`. A line runs as written with `clusterctl`
//! replaced by `kubectl-capi` (and `--kubeconfig`/`-n` of the testbed added); the only
//! rewrites are URLs that cannot be reached here (served from a local HTTP server instead) and
//! `~` (a temporary HOME).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use kube::Client;
use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_kubectl-capi");

const TEMPLATE: &str = "apiVersion: cluster.x-k8s.io/v1beta2
kind: Cluster
metadata:
  name: ${CLUSTER_NAME}
  labels:
    cp: \"${CONTROL_PLANE_MACHINE_COUNT}\"
    workers: \"${WORKER_MACHINE_COUNT}\"
    version: ${KUBERNETES_VERSION}
    flavor: ${FLAVOR_NAME:=default}
";

/// clusterctl's documented command lines: (source file, line, what the output must show).
const CLUSTERCTL_DOCS: &[(&str, &str, &str)] = &[
    (
        "describe-cluster.md",
        "clusterctl describe cluster capi-quickstart",
        "Cluster",
    ),
    (
        "describe-cluster.md",
        "clusterctl describe cluster capi-quickstart --grouping=false",
        "capi-quickstart-control-plane",
    ),
    (
        "describe-cluster.md",
        "clusterctl describe cluster capi-quickstart --echo",
        "MachineDeployment",
    ),
    (
        "describe-cluster.md",
        "clusterctl describe cluster capi-quickstart --show-conditions KubeadmControlPlane",
        "KubeadmControlPlane",
    ),
    // The maintainers' "show everything" set (kubernetes-sigs/cluster-api#11954).
    (
        "describe-cluster.md",
        "clusterctl describe cluster capi-quickstart --show-conditions=all --grouping=false --echo=true --show-machinesets=true",
        "Cluster",
    ),
    (
        "describe-cluster.md",
        "clusterctl describe cluster capi-quickstart --show-templates",
        "ByoMachineTemplate",
    ),
    (
        "describe-cluster.md",
        "clusterctl describe cluster capi-quickstart --show-resourcesets",
        "ClusterResourceSet",
    ),
    (
        "describe-cluster.md",
        "clusterctl describe cluster capi-quickstart --v1beta2=false -c=false",
        "Cluster",
    ),
    (
        "get-kubeconfig.md",
        "clusterctl get kubeconfig foo",
        "server:",
    ),
    (
        "get-kubeconfig.md",
        "clusterctl get kubeconfig foo --namespace NS",
        "server:",
    ),
    (
        "generate-cluster.md",
        "clusterctl generate cluster my-cluster --kubernetes-version v1.28.0 --control-plane-machine-count=3 --worker-machine-count=3",
        "cp: \"3\"",
    ),
    (
        "generate-cluster.md",
        "clusterctl generate cluster my-cluster --kubernetes-version v1.28.0 --infrastructure aws",
        "name: my-cluster",
    ),
    (
        "generate-cluster.md",
        "clusterctl generate cluster my-cluster --kubernetes-version v1.28.0 --infrastructure aws:v0.4.1",
        "flavor: v041",
    ),
    (
        "generate-cluster.md",
        "clusterctl generate cluster my-cluster --kubernetes-version v1.28.0 --flavor high-availability",
        "flavor: ha",
    ),
    (
        "generate-cluster.md",
        "clusterctl generate cluster my-cluster --kubernetes-version v1.28.0 --from-config-map my-templates",
        "version: v1.28.0",
    ),
    (
        "generate-cluster.md",
        "clusterctl generate cluster my-cluster --kubernetes-version v1.28.0 --from https://foo.bar/my-template.yaml",
        "name: my-cluster",
    ),
    (
        "generate-cluster.md",
        "clusterctl generate cluster my-cluster --kubernetes-version v1.28.0 --from ~/my-template.yaml",
        "name: my-cluster",
    ),
    (
        "alpha-rollout.md",
        "clusterctl alpha rollout pause machinedeployment/my-md-0",
        "paused",
    ),
    (
        "alpha-rollout.md",
        "clusterctl alpha rollout resume machinedeployment/my-md-0",
        "resumed",
    ),
    (
        "alpha-rollout.md",
        "clusterctl alpha rollout restart machinedeployment/my-md-0",
        "restarted",
    ),
];

use testbed::fixtures::run::{assert_lacks, assert_ok, stderr, stdout, words};

use crate::objects::{CAPI, CP, apply, ar, assert_fails, get};

/// A cluster named as in clusterctl's docs, with a KubeadmControlPlane, a MachineDeployment
/// `my-md-0`, their templates, a ClusterResourceSet bound to it, the `foo` kubeconfig Secret
/// and the `my-templates` ConfigMap.
async fn seed(client: &Client, ns: &str, kubeconfig: &Path) {
    let infra = "infrastructure.cluster.x-k8s.io";
    let bmt = ar(
        infra,
        "v1beta1",
        "ByoMachineTemplate",
        "byomachinetemplates",
    );
    for t in ["capi-quickstart-control-plane", "capi-quickstart-md-0"] {
        apply(
            client,
            ns,
            &bmt,
            json!({"apiVersion": format!("{infra}/v1beta1"), "kind": "ByoMachineTemplate",
            "metadata": {"name": t}, "spec": {"template": {"spec": {}}}}),
        )
        .await;
    }
    apply(
        client,
        ns,
        &ar(
            "bootstrap.cluster.x-k8s.io",
            "v1beta2",
            "KubeadmConfigTemplate",
            "kubeadmconfigtemplates",
        ),
        json!({"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2", "kind": "KubeadmConfigTemplate",
            "metadata": {"name": "capi-quickstart-md-0"}, "spec": {"template": {"spec": {"format": "cloud-config"}}}}),
    )
    .await;
    apply(client, ns, &ar("controlplane.cluster.x-k8s.io", "v1beta2", "KubeadmControlPlane", "kubeadmcontrolplanes"),
        json!({"apiVersion": "controlplane.cluster.x-k8s.io/v1beta2", "kind": "KubeadmControlPlane",
            "metadata": {"name": "capi-quickstart-control-plane"},
            "spec": {"replicas": 1, "version": "v1.33.4",
              "machineTemplate": {"spec": {"infrastructureRef": {"apiGroup": infra, "kind": "ByoMachineTemplate", "name": "capi-quickstart-control-plane"}}},
              "kubeadmConfigSpec": {"format": "cloud-config"}}})).await;
    apply(client, ns, &ar("cluster.x-k8s.io", "v1beta2", "Cluster", "clusters"),
        json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
            "metadata": {"name": "capi-quickstart", "labels": {"env": "compat"}},
            "spec": {"controlPlaneRef": {"apiGroup": "controlplane.cluster.x-k8s.io", "kind": "KubeadmControlPlane", "name": "capi-quickstart-control-plane"}}})).await;
    apply(client, ns, &ar("cluster.x-k8s.io", "v1beta2", "MachineDeployment", "machinedeployments"),
        json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment",
            "metadata": {"name": "my-md-0", "labels": {"cluster.x-k8s.io/cluster-name": "capi-quickstart"}},
            "spec": {"clusterName": "capi-quickstart", "replicas": 0,
              "selector": {"matchLabels": {"cluster.x-k8s.io/deployment-name": "my-md-0"}},
              "template": {"metadata": {"labels": {"cluster.x-k8s.io/deployment-name": "my-md-0"}}, "spec": {"clusterName": "capi-quickstart", "version": "v1.33.4",
                "bootstrap": {"configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfigTemplate", "name": "capi-quickstart-md-0"}},
                "infrastructureRef": {"apiGroup": infra, "kind": "ByoMachineTemplate", "name": "capi-quickstart-md-0"}}}}})).await;
    let addons = "addons.cluster.x-k8s.io";
    apply(client, ns, &ar(addons, "v1beta2", "ClusterResourceSet", "clusterresourcesets"),
        json!({"apiVersion": format!("{addons}/v1beta2"), "kind": "ClusterResourceSet",
            "metadata": {"name": "cni"}, "spec": {"clusterSelector": {"matchLabels": {"env": "compat"}}, "resources": [{"kind": "ConfigMap", "name": "cni"}]}})).await;
    apply(client, ns, &ar(addons, "v1beta2", "ClusterResourceSetBinding", "clusterresourcesetbindings"),
        json!({"apiVersion": format!("{addons}/v1beta2"), "kind": "ClusterResourceSetBinding",
            "metadata": {"name": "capi-quickstart"},
            "spec": {"clusterName": "capi-quickstart", "bindings": [{"clusterResourceSetName": "cni"}]}})).await;
    let kc = std::fs::read_to_string(kubeconfig).unwrap();
    apply(
        client,
        ns,
        &ar("", "v1", "Secret", "secrets"),
        json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "foo-kubeconfig", "labels": {"cluster.x-k8s.io/cluster-name": "foo"}},
        "type": "cluster.x-k8s.io/secret", "stringData": {"value": kc}}),
    )
    .await;
    apply(
        client,
        ns,
        &ar("", "v1", "ConfigMap", "configmaps"),
        json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "my-templates"}, "data": {"template": TEMPLATE}}),
    )
    .await;
}

/// Serves `body` over plain HTTP on 127.0.0.1 for every request; returns the base URL.
fn serve(body: &'static str) -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            let mut s = s;
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            let _ = write!(
                s,
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    format!("http://127.0.0.1:{port}")
}

/// A temporary HOME with `~/my-template.yaml` and a clusterctl config whose `providers:` list
/// names an `aws` infrastructure provider in a local repository (two versions, the newer with a
/// `high-availability` flavor).
fn home() -> PathBuf {
    let home = std::env::temp_dir().join(format!("capi-compat-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&home);
    let repo = home.join("repo/infrastructure-aws");
    for (v, flavor) in [("v0.4.1", "v041"), ("v0.5.0", "default")] {
        let d = repo.join(v);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("components.yaml"), "").unwrap();
        std::fs::write(
            d.join("cluster-template.yaml"),
            TEMPLATE.replace("${FLAVOR_NAME:=default}", flavor),
        )
        .unwrap();
    }
    std::fs::write(
        repo.join("v0.5.0/cluster-template-high-availability.yaml"),
        TEMPLATE.replace("${FLAVOR_NAME:=default}", "ha"),
    )
    .unwrap();
    std::fs::write(home.join("my-template.yaml"), TEMPLATE).unwrap();
    let config = home.join(".config/cluster-api");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(config.join("clusterctl.yaml"), format!(
        "providers:\n- name: aws\n  type: InfrastructureProvider\n  url: file://{}/v0.5.0/components.yaml\n",
        repo.display()
    )).unwrap();
    home
}

fn run(kubeconfig: &Path, home: &Path, args: &[&str]) -> Output {
    testbed::fixtures::run::command(BIN, kubeconfig, args)
        .env_remove("XDG_CONFIG_HOME")
        .env("HOME", home)
        .output()
        .expect("run kubectl-capi")
}

#[tokio::test(flavor = "multi_thread")]
async fn clusterctl_documented_command_lines() {
    let tb = testbed::shared();
    let (client, ns) = tb.namespace("compat").await;
    seed(&client, &ns, &tb.kubeconfig).await;
    let home = home();
    let url = serve(TEMPLATE);
    let mut failures = Vec::new();
    for (source, line, expect) in CLUSTERCTL_DOCS {
        let line = line
            .replace("https://foo.bar", &url)
            .replace('~', &home.display().to_string())
            .replace(" NS", &format!(" {ns}"));
        let mut args: Vec<&str> = line.split_whitespace().skip(1).collect();
        if !args.contains(&"--namespace") {
            args.extend(["-n", &ns]);
        }
        let o = run(&tb.kubeconfig, &home, &args);
        let (out, err) = (stdout(&o), stderr(&o));
        if !o.status.success() || !(out.contains(expect) || err.contains(expect)) {
            failures.push(format!(
                "{source}: `{line}` exited {:?}; stdout:\n{out}\nstderr:\n{err}",
                o.status.code()
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} lines failed:\n{}",
        failures.len(),
        CLUSTERCTL_DOCS.len(),
        failures.join("\n")
    );

    // What the lines did, read back from the server.
    let md_ar = ar(CAPI, "v1beta2", "MachineDeployment", "machinedeployments");
    let md = get(&client, &ns, &md_ar, "my-md-0").await;
    assert_eq!(
        md["spec"]["paused"],
        json!(false),
        "pause then resume leaves it unpaused"
    );
    assert!(
        md["spec"]["rollout"]["after"].is_string(),
        "restart sets spec.rollout.after: {:?}",
        md["spec"]
    );
    // clusterctl refuses pausing twice and restarting a paused object; so do we.
    let capi = |args: &[&str]| run(&tb.kubeconfig, &home, &[args, &["-n", &ns]].concat());
    assert_ok(&capi(&words("alpha rollout pause md/my-md-0")), "pause");
    assert_fails(&capi(&words("alpha rollout pause md/my-md-0")), 1, "");
    let o = capi(&words("alpha rollout restart machinedeployment/my-md-0"));
    assert_fails(&o, 1, "is paused");
    let o = capi(&words(
        "alpha rollout pause kubeadmcontrolplane/capi-quickstart-control-plane",
    ));
    assert_ok(&o, "pause the control plane");
    let kcp_ar = ar(CP, "v1beta2", "KubeadmControlPlane", "kubeadmcontrolplanes");
    let kcp = get(&client, &ns, &kcp_ar, "capi-quickstart-control-plane").await;
    assert!(
        kcp["metadata"]["annotations"]
            .get("cluster.x-k8s.io/paused")
            .is_some(),
        "{kcp}"
    );
    // --write-to writes the file, prints nothing.
    let out_file = home.join("out/my-cluster.yaml");
    std::fs::create_dir_all(out_file.parent().unwrap()).unwrap();
    let generate = words("generate cluster my-cluster -i aws -f high-availability");
    let o = capi(
        &[
            &generate[..],
            &words("--kubernetes-version v1.28.0"),
            &["--write-to", out_file.to_str().unwrap()],
        ]
        .concat(),
    );
    assert!(assert_ok(&o, "generate --write-to").is_empty());
    assert!(
        std::fs::read_to_string(&out_file)
            .unwrap()
            .contains("flavor: ha")
    );
    tb.delete_namespace(&client, &ns).await;
    let _ = std::fs::remove_dir_all(&home);
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_habits_on_list_verbs() {
    let tb = testbed::shared();
    let (client, ns) = tb.namespace("habits").await;
    seed(&client, &ns, &tb.kubeconfig).await;
    let home = std::env::temp_dir();
    let capi = |args: &[&str]| run(&tb.kubeconfig, &home, &[args, &["-n", &ns]].concat());

    for (format, want) in [
        ("jsonpath={.items[*].metadata.name}", "capi-quickstart"),
        (
            "jsonpath={range .items[*]}{.metadata.name}={.metadata.labels.env}{\"\\n\"}{end}",
            "capi-quickstart=compat\n",
        ),
        (
            "custom-columns=NAME:.metadata.name,ENV:.metadata.labels.env",
            "NAME              ENV\ncapi-quickstart   compat\n",
        ),
    ] {
        let o = capi(&["list", "-o", format]);
        assert_eq!(stdout(&o), want, "-o {format}: {}", stderr(&o));
    }
    let out = stdout(&capi(&["list", "--show-labels"]));
    let header = out.lines().next().unwrap_or_default();
    assert!(header.trim_end().ends_with("LABELS"), "{out}");
    assert!(
        out.lines()
            .nth(1)
            .unwrap_or_default()
            .trim_end()
            .ends_with("env=compat"),
        "{out}"
    );
    // kubectl's -v=6: each request on stderr; without it, none.
    for v in ["-v=6", "--v=6", "-v6"] {
        let o = capi(&["list", v]);
        let err = stderr(&o);
        assert!(
            o.status.success() && err.contains("/apis/cluster.x-k8s.io/"),
            "{v}: {err}"
        );
    }
    assert_lacks(&stderr(&capi(&["list"])), "/apis/");
    // A bad template is a usage error before any request.
    assert_fails(&capi(&["list", "-o", "jsonpath={.items"]), 2, "");
    // The bash completion script asks the binary for live names (kubectl's __complete protocol).
    let script = Command::new(BIN)
        .args(["completion", "bash"])
        .output()
        .unwrap();
    assert!(script.status.success());
    let script_file =
        std::env::temp_dir().join(format!("capi-completion-{}.bash", std::process::id()));
    std::fs::write(&script_file, &script.stdout).unwrap();
    let bin_dir = Path::new(BIN).parent().unwrap();
    let probe = format!(
        "source {}; COMP_WORDS=(kubectl-capi describe -n {ns} capi-q); COMP_CWORD=4; _kubectl_capi; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        script_file.display()
    );
    let o = Command::new("bash")
        .args(["-c", &probe])
        .env("PATH", format!("{}:/usr/bin:/bin", bin_dir.display()))
        .env("KUBECONFIG", &tb.kubeconfig)
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "capi-quickstart\n",
        "{:?}",
        String::from_utf8_lossy(&o.stderr)
    );
    let _ = std::fs::remove_file(&script_file);
    // hosts: --cluster is the kubeconfig cluster; the CAPI filter is --cluster-name.
    let o = capi(&["hosts", "--cluster", "capi-quickstart"]);
    assert_fails(&o, 1, "--cluster-name capi-quickstart");
    tb.delete_namespace(&client, &ns).await;
}
