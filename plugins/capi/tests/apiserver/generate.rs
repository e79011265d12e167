//! `kubectl capi generate cluster` on the testbed: BYOH-style and Kamaji-style templates render
//! and their output passes `kubectl apply --dry-run=server`; bad input gets one clear line.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use testbed::fixtures::run::{assert_contains, assert_ok, kubectl_bin, stderr, stdout};

use crate::objects::assert_fails;

const BIN: &str = env!("CARGO_BIN_EXE_kubectl-capi");

fn data(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
        .display()
        .to_string()
}

/// `generate cluster <args>` with a clean environment (HOME in a temp dir, so no user config
/// leaks in) and `env`.
fn generate_cmd(args: &[&str], env: &[(&str, &str)], home: &Path) -> Command {
    let mut c = Command::new(BIN);
    c.arg("generate")
        .arg("cluster")
        .args(args)
        .env_clear()
        .env("HOME", home)
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("NO_COLOR", "1")
        .envs(env.iter().copied());
    c
}

fn generate(args: &[&str], env: &[(&str, &str)], home: &Path) -> Output {
    generate_cmd(args, env, home)
        .output()
        .expect("run kubectl-capi")
}

/// [`generate`], insisting on success; returns stdout.
#[track_caller]
fn generated(args: &[&str], env: &[(&str, &str)], home: &Path) -> String {
    assert_ok(&generate(args, env, home), "generate cluster")
}

/// Runs `cmd` with `input` on its stdin.
fn with_stdin(mut cmd: Command, input: &[u8]) -> Output {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("running {cmd:?}: {e}"));
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input)
        .expect("writing stdin");
    child.wait_with_output().expect("output")
}

/// `kubectl apply --dry-run=server` of `yaml` succeeds and says each of `created`.
#[track_caller]
fn assert_server_accepts(kubeconfig: &Path, yaml: &str, created: &[&str]) {
    let mut kubectl = Command::new(kubectl_bin());
    kubectl
        .args(["apply", "--dry-run=server", "-f", "-"])
        .env("KUBECONFIG", kubeconfig);
    let k = with_stdin(kubectl, yaml.as_bytes());
    let applied = assert_ok(&k, "kubectl apply --dry-run=server");
    for c in created {
        assert_contains(&applied, &format!("{c} created (server dry run)"));
    }
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
    let out = generated(
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

    assert_server_accepts(
        &tb.kubeconfig,
        &out,
        &[
            "cluster.cluster.x-k8s.io/byoh-cluster",
            "kubeadmcontrolplane.controlplane.cluster.x-k8s.io/byoh-cluster-control-plane",
        ],
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
    let out = generated(
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
    assert_server_accepts(
        &tb.kubeconfig,
        &out,
        &["kamajicontrolplane.controlplane.cluster.x-k8s.io/tenant-1"],
    );

    // The same template on stdin.
    let args = ["tenant-2", "--from", "-", "--kubernetes-version", "v1.33.1"];
    let cmd = generate_cmd(
        &[&args[..], &["--target-namespace", &ns]].concat(),
        &[("CONTROL_PLANE_ENDPOINT_IP", "192.0.2.11")],
        home.path(),
    );
    let template = std::fs::read(data("kamaji-cluster-template.yaml")).unwrap();
    let out = assert_ok(&with_stdin(cmd, &template), "generate --from -");
    assert_contains(&out, "name: tenant-2");
}

/// BCM: the control-plane address must be "within the internal network of the nodes". A BYOH
/// template whose CONTROL_PLANE_ENDPOINT_IP is in no network the hosts its ByoMachineTemplates
/// select report is refused with nothing written; `--allow-foreign-address` and an address
/// inside are rendered, and so is any address without a cluster to read (generate needs none).
/// The hosts are planted with `status.network` because the test is about how `generate` reads
/// that field, which the real agent writes (kubectl-capi's controllers/hosts.rs checks the real
/// agent's).
#[tokio::test]
async fn a_byoh_endpoint_outside_the_hosts_networks_is_refused() {
    use kube::api::{Api, DynamicObject, Patch};
    let tb = testbed::shared();
    let (client, ns) = tb.namespace("gen-net").await;
    let ar = kube::api::ApiResource {
        group: "infrastructure.cluster.x-k8s.io".into(),
        version: "v1beta1".into(),
        api_version: "infrastructure.cluster.x-k8s.io/v1beta1".into(),
        kind: "ByoHost".into(),
        plural: "byohosts".into(),
    };
    let hosts: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &ar);
    let (cp_role, worker_role) = (format!("cp-{ns}"), format!("w-{ns}"));
    for (name, role, addrs) in [
        ("cp", cp_role.as_str(), serde_json::json!(["10.81.0.5/24"])),
        (
            "w",
            worker_role.as_str(),
            serde_json::json!(["10.82.0.5/24", "fd00:82::5/64", "not-a-cidr"]),
        ),
        // Selected by no template of it: its network does not count.
        ("x", "elsewhere", serde_json::json!(["198.51.100.5/24"])),
    ] {
        let name = format!("{ns}-{name}");
        let h: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": ar.api_version, "kind": "ByoHost",
            "metadata": {"name": name, "labels": {"role": role}}, "spec": {}}))
        .unwrap();
        hosts.create(&Default::default(), &h).await.unwrap();
        let status = serde_json::json!({"status": {"network": [{"networkInterfaceName": "eth0",
            "macAddr": "52:54:00:12:34:56", "isDefault": true, "connected": true, "ipAddrs": addrs}]}});
        hosts
            .patch_status(&name, &Default::default(), &Patch::Merge(&status))
            .await
            .unwrap();
    }
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("c1.yaml");
    let template = data("byoh-cluster-template.yaml");
    let kubeconfig = tb.kubeconfig.display().to_string();
    let run = |address: &str, extra: &[&str]| {
        let args = [
            &[
                "c1",
                "--from",
                template.as_str(),
                "--kubernetes-version",
                "v1.34.2",
                "--target-namespace",
                &ns,
                "--write-to",
                file.to_str().unwrap(),
            ][..],
            extra,
        ]
        .concat();
        let env = [
            ("CONTROL_PLANE_ENDPOINT_IP", address),
            ("SERVICE_DOMAIN", "cluster.local"),
            ("CONTROL_PLANE_HOST_ROLE", cp_role.as_str()),
            ("WORKER_HOST_ROLE", worker_role.as_str()),
        ];
        generate(&args, &env, home.path())
    };
    let with_cluster = ["--kubeconfig", kubeconfig.as_str()];

    let o = run("198.51.100.7", &with_cluster);
    let err = assert_fails(&o, 1, "");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(
        lines[0],
        "error: CONTROL_PLANE_ENDPOINT_IP 198.51.100.7 is in no network of the 2 BYOH host(s) the template's machines would use (10.81.0.0/24, 10.82.0.0/24, fd00:82::/64); nothing was written",
        "{err}"
    );
    assert_eq!(lines.len(), 2, "{err}");
    assert_contains(lines[1], "--allow-foreign-address");
    assert!(o.stdout.is_empty() && !file.exists(), "nothing is written");

    // On purpose (a load balancer elsewhere), or an address inside: rendered.
    let o = run(
        "198.51.100.7",
        &[&with_cluster[..], &["--allow-foreign-address"]].concat(),
    );
    assert_ok(&o, "generate --allow-foreign-address");
    assert_contains(&std::fs::read_to_string(&file).unwrap(), "198.51.100.7");
    std::fs::remove_file(&file).unwrap();
    assert_ok(&run("10.82.0.99", &with_cluster), "an address inside");
    assert_contains(&std::fs::read_to_string(&file).unwrap(), "10.82.0.99");
    std::fs::remove_file(&file).unwrap();
    // No cluster to read (no kubeconfig in the clean HOME): rendered unchecked, silently.
    let o = run("198.51.100.7", &[]);
    assert_ok(&o, "generate without a cluster");
    assert_eq!(stderr(&o), "");
    tb.delete_namespace(&client, &ns).await;
}

#[test]
fn list_variables_and_bad_input_get_one_clear_line() {
    let home = tempfile::tempdir().unwrap();
    let kamaji = data("kamaji-cluster-template.yaml");

    let out = generated(
        &["c1", "--from", &kamaji, "--list-variables"],
        &[("KUBERNETES_VERSION", "v1.34.2")],
        home.path(),
    );
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
    let err = assert_fails(&o, 1, "");
    assert_eq!(
        err.lines().next().unwrap(),
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
    assert_eq!(
        assert_fails(&o, 2, "").lines().next().unwrap(),
        "error: invalid Kubernetes version \"1.34\": use a semantic version such as v1.33.1"
    );

    // A missing file.
    let o = generate(&["c1", "--from", "/nonexistent/t.yaml"], &[], home.path());
    let err = assert_fails(&o, 1, "");
    assert!(
        err.starts_with("error: cannot read the template /nonexistent/t.yaml:"),
        "{err}"
    );

    let bad = home.path().join("bad.yaml");
    std::fs::write(&bad, "kind: Cluster\nmetadata:\n  name: ${CLUSTER_NAME\n").unwrap();
    let no_env: &[(&str, &str)] = &[];
    for (args, env, code, says) in [
        // URLs are fetched (the compat test serves one); an unreachable one fails in one line
        // with a way out.
        (
            vec!["c1", "--from", "http://127.0.0.1:1/cluster-template.yaml"],
            no_env,
            1,
            &["cannot download the template", "curl -fsSLo"][..],
        ),
        // A bad name, a malformed count from the environment, a flavor without a directory.
        (
            vec!["Bad_Name", "--from", &kamaji],
            no_env,
            2,
            &["is not a valid cluster name"],
        ),
        (
            vec!["c1", "--from", &kamaji],
            &[("WORKER_MACHINE_COUNT", "two")],
            2,
            &["invalid value \"two\" for WORKER_MACHINE_COUNT"],
        ),
        (
            vec!["c1", "--from", &kamaji, "--flavor", "x"],
            no_env,
            2,
            &["pass the directory to --from"],
        ),
        // A parse error names the line.
        (
            vec!["c1", "--from", bad.to_str().unwrap()],
            no_env,
            1,
            &["line 3"],
        ),
    ] {
        let o = generate(&args, env, home.path());
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(code), "{args:?}: {err}");
        for s in says {
            assert!(err.contains(s), "{args:?}: want {s:?} in:\n{err}");
        }
    }
}

/// `-o json` and `-o name` printed YAML with exit 0. The rendered objects now print
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
        let args = [&["c1", "--from", kamaji.as_str(), "-n", "team-a"], extra].concat();
        generate(&args, &env, home.path())
    };
    let ok = |extra: &[&str]| assert_ok(&run(extra), &format!("generate cluster {extra:?}"));
    let yaml = ok(&[]);
    assert!(yaml.starts_with("---\n"), "{yaml}");
    let docs = yaml.matches("---\n").count();
    assert!(docs >= 3, "{yaml}");
    assert_eq!(stdout(&run(&["-o", "yaml"])), yaml);

    let json = ok(&["-o", "json"]);
    let v: serde_json::Value = serde_json::from_str(&json)
        .unwrap_or_else(|e| panic!("-o json is not JSON ({e}):\n{json}"));
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

    let names = ok(&["-o", "name"]);
    assert_eq!(names.lines().count(), docs, "{names}");
    assert!(
        names.lines().any(|l| l == "cluster.cluster.x-k8s.io/c1"),
        "{names}"
    );

    assert_contains(&ok(&["-o", "jsonpath={.items[*].kind}"]), "Cluster");

    // --write-to writes what -o says.
    let file = home.path().join("c1.json");
    ok(&["-o", "json", "--write-to", file.to_str().unwrap()]);
    let written: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(written["kind"], "List");

    for format in ["table", "wide"] {
        let o = run(&["-o", format]);
        let err = assert_fails(&o, 2, "");
        assert!(o.stdout.is_empty(), "-o {format} printed {}", stdout(&o));
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
    let out = ok(&["--list-variables", "-o", "table"]);
    assert!(out.starts_with("Required Variables:\n"), "{out}");
}
