//! Bad input, table-driven (issue 13), for `kubectl kamaji` and the reconciler's flags: every
//! case exits with its exact code, says what is wrong in one line (`error: …`) and what to do in
//! a second (`hint: …`), prints nothing on stdout, never panics, and leaves the namespace as it
//! was.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_kubectl-kamaji");

struct Case {
    args: &'static [&'static str],
    code: i32,
    says: &'static str,
}

const fn case(args: &'static [&'static str], code: i32, says: &'static str) -> Case {
    Case { args, code, says }
}

const V: &str = "v1.35.0";

/// Refused before any server is asked (the kubeconfig does not even exist).
const LOCAL: &[Case] = &[
    case(&["nope"], 2, "unrecognized subcommand 'nope'"),
    case(&["list", "-o", "tabel"], 2, "invalid value 'tabel'"),
    case(&["list", "--request-timeout", "1000h"], 2, "too long"),
    case(&["create"], 2, "required arguments were not provided"),
    case(
        &["create", "x", "--infrastructure", "none"],
        2,
        "--kubernetes-version is required",
    ),
    case(
        &[
            "create",
            "X_bad",
            "--infrastructure",
            "none",
            "--kubernetes-version",
            V,
        ],
        2,
        "DNS-1035",
    ),
    case(
        &[
            "create",
            "x",
            "--infrastructure",
            "nope",
            "--kubernetes-version",
            V,
        ],
        2,
        "unknown infrastructure",
    ),
    case(
        &[
            "create",
            "x",
            "--infrastructure",
            "none",
            "--kubernetes-version",
            "v2.0.0",
        ],
        2,
        "Kubernetes 1.x",
    ),
    case(
        &[
            "create",
            "x",
            "--infrastructure",
            "none",
            "--kubernetes-version",
            "v1.999999.0",
        ],
        2,
        "invalid Kubernetes version",
    ),
    case(
        &[
            "create",
            "x",
            "--infrastructure",
            "none",
            "--kubernetes-version",
            "latest",
        ],
        2,
        "invalid Kubernetes version",
    ),
    case(
        &[
            "create",
            "x",
            "--infrastructure",
            "byoh",
            "--kubernetes-version",
            V,
            "--workers",
            "99999999999",
        ],
        2,
        "not in 0..=5000",
    ),
    case(
        &[
            "create",
            "x",
            "--infrastructure",
            "byoh",
            "--kubernetes-version",
            V,
            "--workers",
            "-1",
        ],
        2,
        "-1 is not in 0..=5000",
    ),
    case(
        &[
            "create",
            "x",
            "--infrastructure",
            "none",
            "--kubernetes-version",
            V,
            "--workers",
            "2",
        ],
        2,
        "--workers does not apply",
    ),
    case(
        &[
            "create",
            "x",
            "--infrastructure",
            "none",
            "--kubernetes-version",
            V,
            "--replicas",
            "17",
        ],
        2,
        "17 is not in 0..=16",
    ),
    case(
        &[
            "create",
            "x",
            "--infrastructure",
            "none",
            "--kubernetes-version",
            V,
            "--pod-cidr",
            "10.0.0.0/99",
        ],
        2,
        "not a CIDR",
    ),
    case(
        &[
            "create",
            "x",
            "--infrastructure",
            "none",
            "--kubernetes-version",
            V,
            "--service-cidr",
            "nope",
        ],
        2,
        "not a CIDR",
    ),
    case(
        &[
            "create",
            "x",
            "--infrastructure",
            "none",
            "--kubernetes-version",
            V,
            "--addons",
            "dns",
        ],
        2,
        "unknown addon",
    ),
    case(
        &[
            "create",
            "x",
            "--infrastructure",
            "none",
            "--kubernetes-version",
            V,
            "--cni",
            "flannel",
        ],
        2,
        "flannel",
    ),
    case(
        &[
            "create",
            "x",
            "--infrastructure",
            "none",
            "--kubernetes-version",
            V,
            "--kube-proxy-mode",
            "userspace",
        ],
        2,
        "unknown --kube-proxy-mode \"userspace\"",
    ),
    case(
        &[
            "create",
            "x",
            "--infrastructure",
            "none",
            "--kubernetes-version",
            V,
            "--kube-proxy-mode",
            "ipvs",
        ],
        2,
        "--kube-proxy-mode ipvs needs --service-address",
    ),
    case(
        &[
            "create",
            "x",
            "--infrastructure",
            "none",
            "--kubernetes-version",
            V,
            "--wait",
            "--dry-run=client",
        ],
        2,
        "cannot be used together",
    ),
    case(
        &[
            "create",
            "x",
            "--infrastructure",
            "none",
            "--kubernetes-version",
            V,
            "--timeout",
            "99999999999999999999s",
        ],
        2,
        "too long",
    ),
    case(
        &[
            "create",
            "x",
            "--infrastructure",
            "none",
            "--kubernetes-version",
            V,
            "--dry-run=maybe",
        ],
        2,
        "invalid value 'maybe'",
    ),
    case(
        &[
            "create",
            "x",
            "--infrastructure",
            "none",
            "--kubernetes-version",
            V,
            "--admission-controllers",
            "Bogus",
        ],
        2,
        "Bogus",
    ),
    case(&["scale", "x"], 2, "nothing to scale"),
    case(
        &["scale", "x", "--replicas", "17"],
        2,
        "17 is not in 0..=16",
    ),
    case(
        &["scale", "x", "--replicas", "-1"],
        2,
        "-1 is not in 0..=16",
    ),
    case(&["scale", "x", "--workers", "5001"], 2, "not in 0..=5000"),
    case(&["upgrade", "x"], 2, "--to <VERSION>"),
    case(
        &["upgrade", "x", "--to", "bogus"],
        2,
        "invalid Kubernetes version",
    ),
    case(
        &["upgrade", "x", "--to", "v1.35.0", "--timeout", "5q"],
        2,
        "unknown unit",
    ),
    case(
        &["token", "join", "x", "--ttl", "0"],
        2,
        "expires before a host can join",
    ),
    case(
        &["token", "join", "x", "--ttl", "30s"],
        2,
        "expires before a host can join",
    ),
    case(
        &["token", "join", "x", "--flavour", "chef"],
        2,
        "invalid value 'chef'",
    ),
    case(&["delete", "x"], 2, "stdin is not a terminal"),
    case(&["delete"], 2, "required arguments were not provided"),
    case(
        &["kubeconfig", "get"],
        2,
        "required arguments were not provided",
    ),
    case(&["certificates", "rotate", "x"], 2, "--certificates"),
    case(
        &["certificates", "rotate", "x", "--certificates", "bogus"],
        2,
        "invalid value 'bogus'",
    ),
    case(&["install", "--image", ""], 2, "--image is empty"),
    case(&["uninstall"], 2, "stdin is not a terminal"),
    case(&["completion", "tcsh"], 2, "invalid value 'tcsh'"),
];

/// Refused after the connection is resolved, before any object is read or written.
const WITH_SERVER: &[Case] = &[
    case(
        &["status", "c2?"],
        2,
        "\"c2?\" is not a valid KamajiControlPlane name",
    ),
    case(
        &["status", "UPPER"],
        2,
        "not a valid KamajiControlPlane name",
    ),
    case(
        &["scale", "a/b", "--replicas", "1"],
        2,
        "not a valid KamajiControlPlane name",
    ),
    case(
        &["upgrade", "x?", "--to", "v1.35.0"],
        2,
        "not a valid KamajiControlPlane name",
    ),
    case(
        &["kubeconfig", "get", "x%2F"],
        2,
        "not a valid KamajiControlPlane name",
    ),
    case(
        &["token", "join", "x?"],
        2,
        "not a valid KamajiControlPlane name",
    ),
    case(
        &["delete", "x?", "--yes"],
        2,
        "not a valid KamajiControlPlane name",
    ),
    case(&["status", "absent"], 1, "\"absent\" not found"),
    case(
        &["list", "--context", "nope"],
        1,
        "context \"nope\" not found",
    ),
];

/// The reconciler's own flags.
const RECONCILER: &[Case] = &[
    case(&["--bogus"], 2, "unexpected argument '--bogus'"),
    case(
        &["--metrics-bind-address", "nope"],
        2,
        "invalid bind address",
    ),
    case(
        &["--health-probe-bind-address", "1.2.3.4:99999"],
        2,
        "invalid bind address",
    ),
    case(
        &["--max-concurrent-reconciles", "0"],
        2,
        "0 is not in 1..=64",
    ),
    case(
        &["--max-concurrent-reconciles", "99999"],
        2,
        "--max-concurrent-reconciles",
    ),
    case(&["--exit-after", "soon"], 2, "invalid value 'soon'"),
];

fn check(bin: &str, c: &Case, kubeconfig: &str, ns: Option<&str>) -> Result<(), String> {
    let mut cmd = Command::new(bin);
    cmd.args(c.args)
        .env("KUBECONFIG", kubeconfig)
        .env("NO_COLOR", "1");
    if let Some(ns) = ns {
        cmd.args(["-n", ns]);
    }
    let o = cmd.output().expect("run the binary");
    testbed::expect::one_line_refusal(&o, c.code, c.says, &format!("{bin} {}", c.args.join(" ")))
}

fn reconciler_bin() -> String {
    std::path::Path::new(BIN)
        .with_file_name("kamaji-reconciler")
        .display()
        .to_string()
}

#[tokio::test]
async fn bad_input_is_one_line_the_right_code_and_changes_nothing() {
    let tb = testbed::shared();
    let (client, ns) = tb.namespace("kamaji-bad-input").await;
    let kubeconfig = tb.kubeconfig.display().to_string();
    let none = "/nonexistent/kubeconfig";
    let scoped = |c: &Case| !matches!(c.args.first(), Some(&"nope") | Some(&"completion"));
    // The reconciler binary sits next to ours (cargo builds every binary of the workspace).
    let reconciler = reconciler_bin();
    let has_reconciler = std::path::Path::new(&reconciler).exists();
    let failures: Vec<String> = LOCAL
        .iter()
        .map(|c| check(BIN, c, none, scoped(c).then_some(ns.as_str())))
        .chain(
            WITH_SERVER
                .iter()
                .map(|c| check(BIN, c, &kubeconfig, Some(&ns))),
        )
        .chain(
            RECONCILER
                .iter()
                .filter(|_| has_reconciler)
                .map(|c| check(&reconciler, c, none, None)),
        )
        .filter_map(Result::err)
        .collect();
    let total = LOCAL.len() + WITH_SERVER.len() + RECONCILER.len();
    assert!(
        failures.is_empty(),
        "{} of {total} cases:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(
        has_reconciler,
        "{reconciler} is missing: build it (cargo build -p kamaji-reconciler)"
    );
    assert!(total >= 50);
    // Nothing was created in the namespace: no KamajiControlPlane, Cluster or Secret of ours.
    let secrets: kube::Api<k8s_openapi::api::core::v1::Secret> =
        kube::Api::namespaced(client.clone(), &ns);
    let list = secrets
        .list(&Default::default())
        .await
        .expect("list secrets");
    assert!(
        list.items.iter().all(|s| s
            .metadata
            .name
            .as_deref()
            .is_some_and(|n| n.starts_with("default-token"))),
        "objects were created: {:?}",
        list.items
            .iter()
            .map(|s| s.metadata.name.clone())
            .collect::<Vec<_>>()
    );
    tb.delete_namespace(&client, &ns).await;
}
