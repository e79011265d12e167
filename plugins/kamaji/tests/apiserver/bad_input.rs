//! Bad input, table-driven, for `kubectl kamaji` and the reconciler's flags: every
//! case exits with its exact code, says what is wrong in one line (`error: …`) and what to do in
//! a second (`hint: …`), prints nothing on stdout, never panics, and leaves the namespace as it
//! was.

use std::process::Command;

use crate::common::create_args;
use testbed::fixtures::input::{self, InputCase};

const BIN: &str = env!("CARGO_BIN_EXE_kubectl-kamaji");

struct Case {
    /// `Some((name, infra, version))`: the arguments follow
    /// `create NAME --infrastructure INFRA --kubernetes-version VERSION`.
    create: Option<(&'static str, &'static str, &'static str)>,
    args: &'static [&'static str],
    code: i32,
    says: &'static str,
}

impl Case {
    /// The whole command line.
    fn args(&self) -> Vec<&'static str> {
        let mut all = self.create.map_or_else(Vec::new, |(name, infra, version)| {
            create_args(name, infra, version, &[])
        });
        all.extend(self.args);
        all
    }
}

const fn case(args: &'static [&'static str], code: i32, says: &'static str) -> Case {
    Case {
        create: None,
        args,
        code,
        says,
    }
}

/// A case of `create NAME --infrastructure INFRA --kubernetes-version VERSION`.
const fn create(
    (name, infra, version): (&'static str, &'static str, &'static str),
    code: i32,
    says: &'static str,
) -> Case {
    Case {
        create: Some((name, infra, version)),
        ..case(&[], code, says)
    }
}

/// A case of `create x --infrastructure none --kubernetes-version V ARGS`.
const fn create_none(args: &'static [&'static str], code: i32, says: &'static str) -> Case {
    Case {
        args,
        ..create(("x", "none", V), code, says)
    }
}

/// A case of `create x --infrastructure byoh --kubernetes-version V ARGS`.
const fn create_byoh(args: &'static [&'static str], code: i32, says: &'static str) -> Case {
    Case {
        args,
        ..create(("x", "byoh", V), code, says)
    }
}

/// A case of a verb refusing its KamajiControlPlane name.
const fn bad_name(args: &'static [&'static str]) -> Case {
    case(args, 2, "not a valid KamajiControlPlane name")
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
    create(("X_bad", "none", V), 2, "DNS-1035"),
    create(("x", "nope", V), 2, "unknown infrastructure"),
    create(("x", "none", "v2.0.0"), 2, "Kubernetes 1.x"),
    create(
        ("x", "none", "v1.999999.0"),
        2,
        "invalid Kubernetes version",
    ),
    create(("x", "none", "latest"), 2, "invalid Kubernetes version"),
    create_byoh(&["--workers", "99999999999"], 2, "not in 0..=5000"),
    create_byoh(&["--workers", "-1"], 2, "-1 is not in 0..=5000"),
    create_none(&["--workers", "2"], 2, "--workers does not apply"),
    create_none(&["--replicas", "17"], 2, "17 is not in 0..=16"),
    create_none(&["--pod-cidr", "10.0.0.0/99"], 2, "not a CIDR"),
    create_none(&["--service-cidr", "nope"], 2, "not a CIDR"),
    create_none(&["--addons", "dns"], 2, "unknown addon"),
    create_none(&["--cni", "flannel"], 2, "flannel"),
    create_none(
        &["--kube-proxy-mode", "userspace"],
        2,
        "unknown --kube-proxy-mode \"userspace\"",
    ),
    create_none(
        &["--kube-proxy-mode", "ipvs"],
        2,
        "--kube-proxy-mode ipvs needs --service-address",
    ),
    create_none(
        &["--wait", "--dry-run=client"],
        2,
        "cannot be used together",
    ),
    create_none(
        &["--merge-kubeconfig", "--dry-run=client"],
        2,
        "--merge-kubeconfig and --dry-run cannot be used together",
    ),
    create_none(
        &["--merge-kubeconfig=merged.kubeconfig", "--dry-run=server"],
        2,
        "--merge-kubeconfig and --dry-run cannot be used together",
    ),
    create_byoh(
        &["--failure-domain", ""],
        2,
        "invalid --failure-domain \"\": it is empty",
    ),
    create_none(
        &["--failure-domain", "fd-a"],
        2,
        "--failure-domain does not apply to --infrastructure none",
    ),
    create_byoh(
        &["--cluster-dns", "169.254.20.10/32"],
        2,
        "invalid --cluster-dns \"169.254.20.10/32\": not an IP address",
    ),
    create_byoh(
        &["--cluster-dns", "0.0.0.0"],
        2,
        "invalid --cluster-dns \"0.0.0.0\": no DNS server listens there",
    ),
    create_none(
        &["--cluster-dns", "169.254.20.10"],
        2,
        "--cluster-dns does not apply to --infrastructure none",
    ),
    case(
        &[
            "create",
            "x",
            "--class",
            "kamaji-byoh",
            "--kubernetes-version",
            V,
            "--cluster-dns",
            "169.254.20.10",
        ],
        2,
        "--cluster-dns cannot be used with --class: the ClusterClass decides it",
    ),
    case(
        &[
            "generate",
            "clusterclass",
            "x",
            "--infrastructure",
            "byoh",
            "--cluster-dns",
            "kube-dns",
        ],
        2,
        "invalid --cluster-dns \"kube-dns\": not an IP address",
    ),
    create_none(&["--timeout", "99999999999999999999s"], 2, "too long"),
    create_none(&["--dry-run=maybe"], 2, "invalid value 'maybe'"),
    create_none(&["--admission-controllers", "Bogus"], 2, "Bogus"),
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
    case(&["migrate", "x"], 2, "--to <DATASTORE>"),
    case(
        &["migrate", "x", "--to", "d", "--timeout", "5q"],
        2,
        "unknown unit",
    ),
    case(
        &["migrate", "x", "--to", "d", "--dry-run=maybe"],
        2,
        "invalid value 'maybe'",
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
    case(
        &["install", "--replicas", "0", "--dry-run=client"],
        2,
        "invalid value '0' for '--replicas <N>'",
    ),
    case(
        &["install", "--replicas", "6", "--dry-run=client"],
        2,
        "invalid value '6' for '--replicas <N>'",
    ),
    // A namespace or an image the API server or the kubelet would refuse later,
    // refused before rendering (these cases carry their own -n).
    case(
        &["install", "-n", "Bad_NS", "--dry-run=client"],
        2,
        "invalid namespace \"Bad_NS\": it must be a DNS-1123 label",
    ),
    case(
        &["install", "--image", "not an image ref", "--dry-run=client"],
        2,
        "--image \"not an image ref\" is not an image reference",
    ),
    case(
        &[
            "install",
            "--image",
            "Example.com/Team/r:v1",
            "--dry-run=client",
        ],
        2,
        "is not an image reference",
    ),
    case(
        &["install", "--image", "r:v1@sha256:xyz", "--dry-run=client"],
        2,
        "is not an image reference",
    ),
    // Kubectl's JSONPath errors on an index outside the array (exit 1, as kubectl)
    // and on a step of 0 (a template that can never work: a usage error).
    case(
        &[
            "install",
            "--dry-run=client",
            "-o",
            "jsonpath={.items[-99999999]}",
        ],
        1,
        "-o jsonpath: array index out of bounds: index -",
    ),
    case(
        &[
            "install",
            "--dry-run=client",
            "-o",
            "jsonpath={.items[0:2:0]}",
        ],
        2,
        "step must be > 0",
    ),
    // A value of the wrong type in --from-file is named locally, not answered by the
    // API server's 500 `failed to create typed patch object`.
    create_none(
        &[
            "--dry-run=client",
            "--from-file",
            "tests/data/values-replicas-two.yaml",
        ],
        2,
        "--from-file: spec.replicas is \"two\" (a string); it must be an integer",
    ),
    create_none(
        &[
            "--dry-run=client",
            "--from-file",
            "tests/data/values-wrong-types.yaml",
        ],
        2,
        "--from-file: spec.network.certSANs is \"a.example.com\" (a string); it must be a list",
    ),
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
    bad_name(&["status", "UPPER"]),
    bad_name(&["scale", "a/b", "--replicas", "1"]),
    bad_name(&["upgrade", "x?", "--to", "v1.35.0"]),
    bad_name(&["kubeconfig", "get", "x%2F"]),
    bad_name(&["token", "join", "x?"]),
    bad_name(&["delete", "x?", "--yes"]),
    bad_name(&["migrate", "x?", "--to", "dedicated"]),
    case(
        &["migrate", "x", "--to", "Bad_Store"],
        2,
        "\"Bad_Store\" is not a valid DataStore name",
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
    let args = c.args();
    let mut cmd = Command::new(bin);
    cmd.args(&args)
        .env("KUBECONFIG", kubeconfig)
        .env("NO_COLOR", "1");
    if let Some(ns) = ns {
        cmd.args(["-n", ns]);
    }
    let o = cmd.output().expect("run the binary");
    testbed::expect::one_line_refusal(&o, c.code, c.says, &format!("{bin} {}", args.join(" ")))
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
    // Verbs take the test's -n, unless the case names its own.
    let scoped = |c: &Case| {
        let args = c.args();
        !matches!(args.first(), Some(&"nope") | Some(&"completion")) && !args.contains(&"-n")
    };
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

const CNI_MANIFEST: &str = "apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: stdin-cni-marker\n  namespace: kube-system\n";

const BILLION_LAUGHS: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: lol\ndata:\n  a0: &a0 [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n  a1: &a1 [*a0,*a0,*a0,*a0,*a0,*a0,*a0,*a0,*a0]\n  a2: &a2 [*a1,*a1,*a1,*a1,*a1,*a1,*a1,*a1,*a1]\n  a3: &a3 [*a2,*a2,*a2,*a2,*a2,*a2,*a2,*a2,*a2]\n  a4: &a4 [*a3,*a3,*a3,*a3,*a3,*a3,*a3,*a3,*a3]\n  a5: &a5 [*a4,*a4,*a4,*a4,*a4,*a4,*a4,*a4,*a4]\n  a6: &a6 [*a5,*a5,*a5,*a5,*a5,*a5,*a5,*a5,*a5]\n  a7: &a7 [*a6,*a6,*a6,*a6,*a6,*a6,*a6,*a6,*a6]\n  a8: &a8 [*a7,*a7,*a7,*a7,*a7,*a7,*a7,*a7,*a7]\n";

/// Files the user names that never end (`/dev/zero`, an endless stdin), never come (a
/// FIFO nobody writes, a stdin nobody closes) or expand (a billion laughs) are refused in one
/// line and in bounded time; `-` reads stdin. `{fifo}`, `{bl}` are made per case.
const INPUT: &[InputCase] = {
    use testbed::expect::Stdin::{Endless, Null, Silent, Text};
    use testbed::fixtures::input::case as c;
    &[
        c(
            &["--cni-manifest", "/dev/zero"],
            Null,
            2,
            "--cni-manifest /dev/zero is larger than the 8.0 MiB limit",
        ),
        c(
            &["--cni-manifest", "{fifo}"],
            Null,
            2,
            ": nothing arrived for 10s",
        ),
        c(
            &["--cni-manifest", "-"],
            Endless,
            2,
            "--cni-manifest - is larger than the 8.0 MiB limit",
        ),
        c(
            &["--cni-manifest", "-"],
            Silent,
            2,
            "--cni-manifest -: nothing arrived for 10s",
        ),
        c(
            &["--cni-manifest", "{bl}"],
            Null,
            2,
            "aliases (*name) expand beyond the YAML parser's limit",
        ),
        c(
            &["--from-file", "/dev/zero"],
            Null,
            2,
            "--from-file /dev/zero is larger than the 8.0 MiB limit",
        ),
        c(
            &["--from-file", "-"],
            Endless,
            2,
            "--from-file - is larger than the 8.0 MiB limit",
        ),
        c(
            &["--from-file", "{fifo}"],
            Null,
            2,
            ": nothing arrived for 10s",
        ),
        c(
            &["--from-file", "{bl}"],
            Null,
            2,
            "aliases (*name) expand beyond",
        ),
        c(
            &["--from-file", "-", "--cni-manifest", "-"],
            Text("replicas: 1\n"),
            2,
            "- already reads it",
        ),
        // `-` on stdin works (with the testbed's kubeconfig; nothing is written: client dry run).
        c(
            &["--cni-manifest", "-", "--dry-run=client", "-o", "yaml"],
            Text(CNI_MANIFEST),
            0,
            "stdin-cni-marker",
        ),
        c(
            &["--from-file", "-", "--dry-run=client", "-o", "yaml"],
            Text("deployment:\n  nodeSelector:\n    stdin-values-marker: \"yes\"\n"),
            0,
            "stdin-values-marker",
        ),
    ]
};

fn check_input(
    c: &InputCase,
    dir: &std::path::Path,
    i: usize,
    kubeconfig: &str,
) -> Result<(), String> {
    let fifo = input::fifo(dir, i);
    let bl = dir.join("billion-laughs.yaml");
    let args: Vec<String> = c
        .args
        .iter()
        .map(|a| {
            a.replace("{fifo}", &fifo.display().to_string())
                .replace("{bl}", &bl.display().to_string())
        })
        .collect();
    let mut cmd = Command::new(BIN);
    cmd.args(create_args("x", "none", V, &[]))
        .args(&args)
        .env("KUBECONFIG", kubeconfig)
        .env("NO_COLOR", "1");
    input::judge(
        &mut cmd,
        c,
        &format!("kubectl kamaji create ... {}", args.join(" ")),
    )
}

#[tokio::test]
async fn unbounded_or_endless_input_is_refused_in_time_and_stdin_works() {
    let tb = testbed::shared();
    let kubeconfig = tb.kubeconfig.display().to_string();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("billion-laughs.yaml"), BILLION_LAUGHS).unwrap();
    input::check_all(INPUT, |c, i| {
        // Refusals happen before any connection: they run without a kubeconfig.
        let kc = if c.code == 0 {
            kubeconfig.as_str()
        } else {
            "/nonexistent/kubeconfig"
        };
        check_input(c, dir.path(), i, kc)
    });
}

/// Logs carry no colour codes when stderr is not a terminal (`make demo > file`
/// showed them), nor on a terminal with NO_COLOR set: `kubectl kamaji -v=6`, and the
/// reconciler started against an API server that refuses connections (it logs and exits).
/// `--dry-run` takes its mode as kubectl's does (`none`, `client` or `server`): a bare one is a
/// usage error, refused before any kubeconfig is read, by every verb that takes it.
#[test]
fn a_bare_dry_run_is_refused_as_kubectl_refuses_it() {
    testbed::expect::bare_dry_run_refused(
        BIN,
        &[
            &["install"][..],
            &["migrate", "x", "--to", "d"],
            &[
                "create",
                "x",
                "--infrastructure",
                "none",
                "--kubernetes-version",
                "v1.35.0",
            ],
        ],
    );
}

#[test]
fn logs_have_no_colour_codes_off_a_terminal_or_with_no_color() {
    let dir = tempfile::tempdir().unwrap();
    let kc = input::list_logs_without_colour(BIN, dir.path());
    let args = ["--kubeconfig", &kc, "--metrics-bind-address", "0"];
    let reconciler = reconciler_bin();
    testbed::expect::logs_without_colour(
        std::path::Path::new(&reconciler),
        &args,
        &[],
        "failed with error",
    )
    .unwrap();
}
