//! `kubectl capi generate cluster` on the testbed: BYOH-style and Kamaji-style templates render
//! and their output passes `kubectl apply --dry-run=server`; bad input gets one clear line.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use testbed::fixtures::run::assert_contains;

const BIN: &str = env!("CARGO_BIN_EXE_kubectl-capi");

fn data(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
        .display()
        .to_string()
}

/// Runs the binary with a clean environment (HOME in a temp dir, so no user config leaks in).
fn generate(args: &[&str], env: &[(&str, &str)], home: &Path) -> Output {
    let mut c = Command::new(BIN);
    c.arg("generate")
        .arg("cluster")
        .args(args)
        .env_clear()
        .env("HOME", home)
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("NO_COLOR", "1");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("run kubectl-capi")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).to_string()
}

fn kubectl_apply_server_dry_run(kubeconfig: &Path, yaml: &[u8]) -> Output {
    let mut child = Command::new(testbed::fixtures::run::kubectl_bin())
        .args(["apply", "--dry-run=server", "-f", "-"])
        .env("KUBECONFIG", kubeconfig)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run kubectl");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(yaml)
        .expect("write to kubectl");
    child.wait_with_output().expect("kubectl output")
}

#[tokio::test]
async fn byoh_template_renders_and_the_server_accepts_it() {
    let tb = testbed::shared();
    let (_client, ns) = tb.namespace("gen-byoh").await;
    let home = tempfile::tempdir().unwrap();
    // SERVICE_DOMAIN comes from the clusterctl config file (XDG location).
    let cfg = home.path().join(".config/cluster-api");
    std::fs::create_dir_all(&cfg).unwrap();
    std::fs::write(
        cfg.join("clusterctl.yaml"),
        "SERVICE_DOMAIN: cluster.local\nWORKER_HOST_ROLE: from-config\nproviders:\n- name: byoh\n  url: https://example.com\n  type: InfrastructureProvider\n",
    )
    .unwrap();
    let o = generate(
        &[
            "byoh-cluster",
            "--from",
            &data("byoh-cluster-template.yaml"),
            "--kubernetes-version",
            "v1.34.2",
            "--control-plane-machine-count",
            "3",
            "--worker-machine-count",
            "2",
            "--target-namespace",
            &ns,
        ],
        // The environment wins over the config file.
        &[
            ("CONTROL_PLANE_ENDPOINT_IP", "10.141.168.1"),
            ("WORKER_HOST_ROLE", "worker"),
        ],
        home.path(),
    );
    assert!(o.status.success(), "stderr: {}", text(&o.stderr));
    let out = text(&o.stdout);
    let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&out).unwrap();
    let docs: Vec<_> = docs.into_iter().filter(|d| !d.is_null()).collect();
    assert_eq!(docs.len(), 9, "{out}");
    for d in &docs {
        assert_eq!(d["metadata"]["namespace"], ns.as_str(), "{d}");
    }
    let kcp = docs
        .iter()
        .find(|d| d["kind"] == "KubeadmControlPlane")
        .unwrap();
    assert_eq!(kcp["spec"]["replicas"], 3);
    assert_eq!(kcp["spec"]["version"], "v1.34.2");
    // `$$` is an escaped dollar; the variable next to it is substituted.
    let file = kcp["spec"]["kubeadmConfigSpec"]["files"][0]["content"]
        .as_str()
        .unwrap();
    assert_contains(file, "the price is $5, the VIP 10.141.168.1");
    let cluster = docs.iter().find(|d| d["kind"] == "Cluster").unwrap();
    assert_eq!(
        cluster["spec"]["clusterNetwork"]["serviceDomain"],
        "cluster.local"
    );
    assert_eq!(
        cluster["spec"]["clusterNetwork"]["pods"]["cidrBlocks"][0], "192.168.0.0/16",
        "the := default applies"
    );
    let md_tmpl = docs
        .iter()
        .find(|d| d["kind"] == "ByoMachineTemplate" && d["metadata"]["name"] == "byoh-cluster-md-0")
        .unwrap();
    assert_eq!(
        md_tmpl["spec"]["template"]["spec"]["selector"]["matchLabels"]["role"],
        "worker"
    );
    let md = docs
        .iter()
        .find(|d| d["kind"] == "MachineDeployment")
        .unwrap();
    assert_eq!(md["spec"]["replicas"], 2);

    let k = kubectl_apply_server_dry_run(&tb.kubeconfig, &o.stdout);
    assert!(
        k.status.success(),
        "kubectl apply --dry-run=server failed: {}\n{}",
        text(&k.stderr),
        text(&k.stdout)
    );
    let applied = text(&k.stdout);
    assert_contains(
        &applied,
        "cluster.cluster.x-k8s.io/byoh-cluster created (server dry run)",
    );
    assert!(
        applied.contains(
            "kubeadmcontrolplane.controlplane.cluster.x-k8s.io/byoh-cluster-control-plane created (server dry run)"
        ),
        "{applied}"
    );
}

#[tokio::test]
async fn kamaji_template_from_a_directory_with_a_flavor_and_from_stdin() {
    let tb = testbed::shared();
    let (client, ns) = tb.namespace("gen-kamaji").await;
    // The full profile serves Kamaji's TenantControlPlane; the CAPI provider's CRD comes from
    // the fixtures.
    testbed::fixtures::ensure_kamaji_control_plane_crd(&client)
        .await
        .unwrap();
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        data("kamaji-cluster-template.yaml"),
        dir.path().join("cluster-template-kamaji.yaml"),
    )
    .unwrap();
    // The namespace comes from -n when --target-namespace is not given.
    let o = generate(
        &[
            "tenant-1",
            "--from",
            dir.path().to_str().unwrap(),
            "--flavor",
            "kamaji",
            "-n",
            &ns,
        ],
        &[
            ("CONTROL_PLANE_ENDPOINT_IP", "192.0.2.10"),
            ("KUBERNETES_VERSION", "v1.33.1"),
            ("KAMAJI_SERVICE_TYPE", ""),
        ],
        home.path(),
    );
    assert!(o.status.success(), "stderr: {}", text(&o.stderr));
    let out = text(&o.stdout);
    let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&out).unwrap();
    let kcp = docs
        .iter()
        .find(|d| d["kind"] == "KamajiControlPlane")
        .unwrap();
    assert_eq!(kcp["metadata"]["namespace"], ns.as_str());
    assert_eq!(
        kcp["spec"]["replicas"], 1,
        "CONTROL_PLANE_MACHINE_COUNT defaults to 1"
    );
    assert_eq!(kcp["spec"]["version"], "v1.33.1");
    assert_eq!(
        kcp["spec"]["network"]["serviceType"], "LoadBalancer",
        ":- applies to an empty value"
    );
    let md = docs
        .iter()
        .find(|d| d["kind"] == "MachineDeployment")
        .unwrap();
    assert_eq!(
        md["spec"]["replicas"], 0,
        "WORKER_MACHINE_COUNT defaults to 0"
    );
    let k = kubectl_apply_server_dry_run(&tb.kubeconfig, &o.stdout);
    assert!(
        k.status.success(),
        "kubectl apply --dry-run=server failed: {}\n{}",
        text(&k.stderr),
        text(&k.stdout)
    );
    assert!(
        text(&k.stdout).contains(
            "kamajicontrolplane.controlplane.cluster.x-k8s.io/tenant-1 created (server dry run)"
        ),
        "{}",
        text(&k.stdout)
    );

    // The same template on stdin.
    let mut child = Command::new(BIN)
        .args([
            "generate",
            "cluster",
            "tenant-2",
            "--from",
            "-",
            "--kubernetes-version",
            "v1.33.1",
            "--target-namespace",
            &ns,
        ])
        .env_clear()
        .env("HOME", home.path())
        .env("CONTROL_PLANE_ENDPOINT_IP", "192.0.2.11")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(&std::fs::read(data("kamaji-cluster-template.yaml")).unwrap())
        .unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "stderr: {}", text(&o.stderr));
    assert!(text(&o.stdout).contains("name: tenant-2"));
}

#[test]
fn list_variables_and_bad_input_get_one_clear_line() {
    let home = tempfile::tempdir().unwrap();
    let kamaji = data("kamaji-cluster-template.yaml");

    let o = generate(
        &["c1", "--from", &kamaji, "--list-variables"],
        &[("KUBERNETES_VERSION", "v1.34.2")],
        home.path(),
    );
    assert!(o.status.success(), "stderr: {}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(out.starts_with("Required Variables:\n"), "{out}");
    assert_contains(&out, "CONTROL_PLANE_ENDPOINT_IP");
    assert_contains(&out, "(NOT SET)");
    assert_contains(&out, "(set in the environment)");
    assert_contains(&out, "KAMAJI_DATASTORE");
    assert_contains(&out, "(defaults to \"default\")");
    let o = generate(
        &["c1", "--from", &kamaji, "--list-variables", "-o", "json"],
        &[],
        home.path(),
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["variables"].as_array().unwrap().len() >= 8);

    // Every missing variable, named in one line; exit 1.
    let o = generate(&["c1", "--from", &kamaji], &[], home.path());
    assert_eq!(o.status.code(), Some(1));
    let err = text(&o.stderr);
    let first = err.lines().next().unwrap();
    assert_eq!(
        first,
        format!(
            "error: the template {kamaji} needs variables that are not set: CONTROL_PLANE_ENDPOINT_IP, KUBERNETES_VERSION"
        )
    );
    assert!(o.stdout.is_empty(), "nothing is written on failure");

    // A malformed version: usage, exit 2.
    let o = generate(
        &["c1", "--from", &kamaji, "--kubernetes-version", "1.34"],
        &[],
        home.path(),
    );
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        text(&o.stderr).lines().next().unwrap(),
        "error: invalid Kubernetes version \"1.34\": use a semantic version such as v1.33.1"
    );

    // URLs are fetched (the compat test serves one); an unreachable one fails in one line with
    // a way out.
    let o = generate(
        &["c1", "--from", "http://127.0.0.1:1/cluster-template.yaml"],
        &[],
        home.path(),
    );
    assert_eq!(o.status.code(), Some(1));
    let err = text(&o.stderr);
    assert_contains(&err, "cannot download the template");
    assert_contains(&err, "curl -fsSLo");

    // A missing file, a bad name, a flavor without a directory.
    let o = generate(&["c1", "--from", "/nonexistent/t.yaml"], &[], home.path());
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stderr).starts_with("error: cannot read the template /nonexistent/t.yaml:"));
    let o = generate(&["Bad_Name", "--from", &kamaji], &[], home.path());
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("is not a valid cluster name"));
    // A malformed count from the environment.
    let o = generate(
        &["c1", "--from", &kamaji],
        &[("WORKER_MACHINE_COUNT", "two")],
        home.path(),
    );
    assert_eq!(o.status.code(), Some(2));
    assert_contains(
        &text(&o.stderr),
        "invalid value \"two\" for WORKER_MACHINE_COUNT",
    );
    let o = generate(
        &["c1", "--from", &kamaji, "--flavor", "x"],
        &[],
        home.path(),
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("pass the directory to --from"));

    // A parse error names the line.
    let bad = home.path().join("bad.yaml");
    std::fs::write(&bad, "kind: Cluster\nmetadata:\n  name: ${CLUSTER_NAME\n").unwrap();
    let o = generate(&["c1", "--from", bad.to_str().unwrap()], &[], home.path());
    assert_eq!(o.status.code(), Some(1));
    assert_contains(&text(&o.stderr), "line 3");
}

/// Issue 24: `-o json` and `-o name` printed YAML with exit 0. The rendered objects now print
/// as kubectl prints several objects: `-o json` a `v1 List`, `-o name` one `kind.group/name`
/// a line; YAML stays the default (clusterctl's output); the table formats, which have no
/// meaning for objects not yet created, are refused in one line.
#[test]
fn output_formats_are_honoured_or_refused() {
    let home = tempfile::tempdir().unwrap();
    let kamaji = data("kamaji-cluster-template.yaml");
    let env = [
        ("KUBERNETES_VERSION", "v1.34.2"),
        ("CONTROL_PLANE_ENDPOINT_IP", "10.0.0.1"),
    ];
    let run = |extra: &[&str]| {
        let mut args = vec!["c1", "--from", kamaji.as_str(), "-n", "team-a"];
        args.extend_from_slice(extra);
        generate(&args, &env, home.path())
    };
    let yaml = run(&[]);
    assert!(yaml.status.success(), "{}", text(&yaml.stderr));
    let yaml = text(&yaml.stdout);
    assert!(yaml.starts_with("---\n"), "{yaml}");
    let docs = yaml.matches("---\n").count();
    assert!(docs >= 3, "{yaml}");
    assert_eq!(text(&run(&["-o", "yaml"]).stdout), yaml);

    let o = run(&["-o", "json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("-o json is not JSON ({e}):\n{}", text(&o.stdout)));
    assert_eq!(v["apiVersion"], "v1");
    assert_eq!(v["kind"], "List");
    let items = v["items"].as_array().unwrap();
    assert_eq!(items.len(), docs);
    assert!(
        items
            .iter()
            .any(|i| i["kind"] == "Cluster" && i["metadata"]["namespace"] == "team-a"),
        "{v}"
    );

    let o = run(&["-o", "name"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let names = text(&o.stdout);
    assert_eq!(names.lines().count(), docs, "{names}");
    assert!(
        names.lines().any(|l| l == "cluster.cluster.x-k8s.io/c1"),
        "{names}"
    );

    let o = run(&["-o", "jsonpath={.items[*].kind}"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_contains(&text(&o.stdout), "Cluster");

    // --write-to writes what -o says.
    let file = home.path().join("c1.json");
    let o = run(&["-o", "json", "--write-to", file.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let written: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(written["kind"], "List");

    for format in ["table", "wide"] {
        let o = run(&["-o", format]);
        assert_eq!(o.status.code(), Some(2), "-o {format}: {}", text(&o.stderr));
        assert!(
            o.stdout.is_empty(),
            "-o {format} printed {}",
            text(&o.stdout)
        );
        let err = text(&o.stderr);
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(lines.len(), 2, "{err}");
        assert_eq!(
            lines[0],
            format!(
                "error: -o {format} does not apply to generate cluster: it prints objects, not a table"
            )
        );
        assert!(
            lines[1].starts_with("hint: use -o yaml (the default), json, name,"),
            "{err}"
        );
    }
    // --list-variables keeps its human form (the default) and -o json.
    let o = run(&["--list-variables", "-o", "table"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).starts_with("Required Variables:\n"));
}
