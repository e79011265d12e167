//! Bad input, table-driven: every case exits with its exact code, says what is wrong
//! in one line (`error: …`) and what to do in a second (`hint: …`), prints nothing on stdout,
//! never panics, and leaves the namespace as it was (nothing half-applied).

use std::process::Command;

use testbed::fixtures::input::{self, InputCase};

const BIN: &str = env!("CARGO_BIN_EXE_kubectl-capi");

/// One bad input: the arguments (after the verb's `-n <ns>` is added), the exit code, and a
/// piece of the error line.
struct Case {
    args: &'static [&'static str],
    code: i32,
    says: &'static str,
}

const fn case(args: &'static [&'static str], code: i32, says: &'static str) -> Case {
    Case { args, code, says }
}

/// Local refusals: no server is needed to find these wrong, and none is asked.
const LOCAL: &[Case] = &[
    case(&["nope"], 2, "unrecognized subcommand 'nope'"),
    case(&["list", "--bogus"], 2, "unexpected argument '--bogus'"),
    case(&["list", "-o", "tabel"], 2, "invalid value 'tabel'"),
    case(&["list", "-o", "jsonpath"], 2, "invalid value 'jsonpath'"),
    case(
        &["list", "--color", "sometimes"],
        2,
        "invalid value 'sometimes'",
    ),
    case(&["list", "-l", "a in (b"], 2, "invalid value 'a in (b'"),
    case(&["list", "-l", "=x"], 2, "invalid value '=x'"),
    case(&["machines", "-l", "!!"], 2, "invalid value '!!'"),
    case(&["hosts", "-l", "a==="], 2, "invalid value 'a==='"),
    case(
        &["list", "--request-timeout", "99999999999999999999s"],
        2,
        "too long",
    ),
    case(&["list", "--request-timeout", "10x"], 2, "unknown unit"),
    case(
        &["list", "--request-timeout", "-5s"],
        2,
        "unexpected argument '-5'",
    ),
    case(&["list", "--server", "not a url"], 2, "not a valid URL"),
    case(
        &["describe"],
        2,
        "required arguments were not provided: <CLUSTER>",
    ),
    case(
        &["describe", "c1", "--show-conditions", "Bogus/"],
        2,
        "invalid --show-conditions",
    ),
    case(
        &["describe", "c1", "--show-conditions", "/x"],
        2,
        "invalid --show-conditions",
    ),
    case(
        &["describe", "c1", "--show-conditions", "Machine, Cluster"],
        2,
        "invalid --show-conditions",
    ),
    case(
        &["describe", "c1", "--show-conditions", "a/b/c"],
        2,
        "invalid --show-conditions",
    ),
    case(
        &["kubeconfig", "c1-kubeconfig?"],
        2,
        "\"c1-kubeconfig?\" is not a valid cluster name",
    ),
    case(&["kubeconfig", "a/b"], 2, "not a valid cluster name"),
    case(&["kubeconfig", "c1", "--merge-into", "x"], 2, "--merge"),
    case(
        &["kubeconfig", "c1", "--output", "x.kubeconfig", "--merge"],
        2,
        "cannot be used with",
    ),
    case(&["scale", "c1"], 2, "required arguments were not provided"),
    case(
        &["scale", "c1", "--workers", "-1"],
        2,
        "-1 is not in 0..=5000",
    ),
    case(
        &["scale", "c1", "--workers", "99999999999"],
        2,
        "99999999999 is not in 0..=5000",
    ),
    case(&["scale", "c1", "--workers", "5001"], 2, "not in 0..=5000"),
    case(
        &["scale", "c1", "--control-plane", "17"],
        2,
        "17 is not in 0..=16",
    ),
    case(
        &["scale", "c1", "--control-plane", "-3"],
        2,
        "-3 is not in 0..=16",
    ),
    case(
        &["scale", "c1", "--workers", "abc"],
        2,
        "invalid value 'abc'",
    ),
    case(
        &["scale", "c1", "--workers", "1", "--timeout", "1000h"],
        2,
        "too long",
    ),
    case(
        &["scale", "c1", "--workers", "1", "--dry-run=sometimes"],
        2,
        "invalid value 'sometimes'",
    ),
    case(&["upgrade", "c1"], 2, "--to <VERSION>"),
    // Fleet flags and the verbs on an upgrade under way.
    case(
        &["upgrade", "c1", "--canary", "1"],
        2,
        "--selector <SELECTOR>",
    ),
    case(
        &["upgrade", "-l", "a in (", "--to", "v1.35.0"],
        2,
        "unbalanced",
    ),
    case(&["upgrade", "--to", "v1.35.0"], 2, "needs a cluster"),
    // An empty selector is every cluster; it was sent and refused by the server.
    case(
        &["upgrade", "-l", "", "--to", "v1.35.0", "--yes"],
        2,
        "an empty selector (-l '') would select every cluster of the namespace",
    ),
    case(
        &[
            "upgrade",
            "-l",
            "env=x",
            "--to",
            "v1.35.0",
            "--max-parallel",
            "0",
        ],
        2,
        "0 is not in 1..=1000",
    ),
    case(
        &["upgrade", "pause"],
        2,
        "required arguments were not provided",
    ),
    case(&["upgrade", "cancel", "c1?"], 2, "not a valid cluster name"),
    case(
        &["upgrade", "c1", "--to", "v2.0.0"],
        2,
        "only Kubernetes 1.x",
    ),
    case(
        &["upgrade", "c1", "--to", "v1.99999999999.0", "--plan"],
        2,
        "more than 6 digits",
    ),
    case(&["upgrade", "c1", "--to", "latest"], 2, "not semver"),
    case(&["upgrade", "c1", "--to", "v1.35"], 2, "not semver"),
    case(
        &["upgrade", "c1", "--to", "v1.35.0", "--timeout", "0.5.5s"],
        2,
        "invalid duration",
    ),
    case(&["pause"], 2, "required arguments were not provided"),
    case(
        &["resume", "--bogus", "c1"],
        2,
        "unexpected argument '--bogus'",
    ),
    case(&["restart"], 2, "required arguments were not provided"),
    case(&["delete"], 2, "required arguments were not provided"),
    case(&["hosts", "--state", "Bogus"], 2, "Bogus"),
    case(
        &["hosts", "retire"],
        2,
        "required arguments were not provided",
    ),
    case(
        &["hosts", "retire", "H_1", "--yes"],
        2,
        "\"H_1\" is not a valid host name",
    ),
    case(
        &["hosts", "retire", "h1", "--timeout", "soon"],
        2,
        "invalid value 'soon'",
    ),
    case(
        &[
            "hosts",
            "retire",
            "h1",
            "--timeout",
            "99999999999999999999s",
        ],
        2,
        "too long",
    ),
    case(
        &["hosts", "describe"],
        2,
        "required arguments were not provided",
    ),
    case(
        &["generate", "cluster"],
        2,
        "required arguments were not provided",
    ),
    case(
        &["generate", "cluster", "c1", "--worker-machine-count", "-1"],
        2,
        "-1 is not in 0..=5000",
    ),
    case(
        &[
            "generate",
            "cluster",
            "c1",
            "--worker-machine-count",
            "99999999",
        ],
        2,
        "not in 0..=5000",
    ),
    case(
        &[
            "generate",
            "cluster",
            "c1",
            "--control-plane-machine-count",
            "17",
        ],
        2,
        "not in 0..=16",
    ),
    // -o table printed YAML with exit 0; generate prints objects (yaml, json, name).
    case(
        &[
            "generate",
            "cluster",
            "c1",
            "--from",
            "tests/data/kamaji-cluster-template.yaml",
            "-o",
            "table",
        ],
        2,
        "-o table does not apply to generate cluster",
    ),
    case(&["completion", "tcsh"], 2, "invalid value 'tcsh'"),
    case(&["version", "--bogus"], 2, "unexpected argument '--bogus'"),
    case(
        &["init", "--infrastructure", "aws"],
        2,
        "--infrastructure \"aws\": this kubectl-capi installs no such provider",
    ),
    case(
        &["init", "--core", "cluster-api:v1.13.0"],
        2,
        "installs cluster-api v1.14.2 only",
    ),
    case(
        &["init", "--registry", "https://mirror"],
        2,
        "must not have a scheme",
    ),
    case(
        &["init", "--from", "/nonexistent-bundle"],
        2,
        "bundle.yaml is missing",
    ),
    case(
        &["init", "--datastore", "/nonexistent.yaml"],
        2,
        "--datastore",
    ),
    case(&["init", "-o", "yaml"], 2, "with --dry-run=client only"),
];

/// Refusals that need the API server only to resolve the connection: the name or input is
/// still refused before any object is read or written.
const WITH_SERVER: &[Case] = &[
    case(
        &["describe", "c1?"],
        2,
        "\"c1?\" is not a valid Cluster name",
    ),
    case(&["describe", "UPPER"], 2, "not a valid Cluster name"),
    case(&["machines", "c1?"], 2, "not a valid Cluster name"),
    case(
        &["scale", "c1?", "--workers", "1"],
        2,
        "\"c1?\" is not a valid cluster name",
    ),
    case(
        &["upgrade", "c1?", "--to", "v1.35.0"],
        2,
        "not a valid cluster name",
    ),
    case(&["pause", "c1?"], 2, "not a valid cluster name"),
    case(&["resume", "Bad"], 2, "not a valid cluster name"),
    case(&["restart", "c1%2F"], 2, "not a valid cluster name"),
    case(&["delete", "c1?", "--yes"], 2, "not a valid cluster name"),
    case(
        &["hosts", "--cluster-name", "typo"],
        1,
        "Cluster \"typo\" not found",
    ),
    case(&["describe", "absent"], 1, "Cluster \"absent\" not found"),
    case(
        &["scale", "absent", "--workers", "1"],
        1,
        "Cluster \"absent\" not found",
    ),
    case(
        &["list", "--context", "nope"],
        1,
        "context \"nope\" not found",
    ),
    case(
        &["list", "--kubeconfig", "/nonexistent/kubeconfig"],
        1,
        "cannot read the kubeconfig",
    ),
];

fn check(c: &Case, kubeconfig: &str, ns: &str) -> Result<(), String> {
    let mut cmd = Command::new(BIN);
    cmd.args(c.args)
        .env("KUBECONFIG", kubeconfig)
        .env("NO_COLOR", "1")
        .env("POD_NAMESPACE", ns);
    // Verbs take -n; `nope` and `completion` have no namespace to take.
    if !matches!(
        c.args.first(),
        Some(&"nope") | Some(&"completion") | Some(&"version")
    ) {
        cmd.args(["-n", ns]);
    }
    let o = cmd.output().expect("run kubectl-capi");
    testbed::expect::one_line_refusal(
        &o,
        c.code,
        c.says,
        &format!("kubectl capi {}", c.args.join(" ")),
    )
}

#[tokio::test]
async fn bad_input_is_one_line_the_right_code_and_changes_nothing() {
    let tb = testbed::shared();
    let (client, ns) = tb.namespace("capi-bad-input").await;
    let kubeconfig = tb.kubeconfig.display().to_string();
    // Local refusals happen even without a reachable kubeconfig.
    let failures: Vec<String> = LOCAL
        .iter()
        .map(|c| check(c, "/nonexistent/kubeconfig", &ns))
        .chain(WITH_SERVER.iter().map(|c| check(c, &kubeconfig, &ns)))
        .filter_map(Result::err)
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} cases:\n{}",
        failures.len(),
        LOCAL.len() + WITH_SERVER.len(),
        failures.join("\n")
    );
    assert!(LOCAL.len() + WITH_SERVER.len() >= 60);
    // Nothing was created in the namespace.
    let clusters: kube::Api<kube::api::DynamicObject> = kube::Api::namespaced_with(
        client.clone(),
        &ns,
        &kube::discovery::ApiResource {
            group: "cluster.x-k8s.io".into(),
            version: "v1beta2".into(),
            api_version: "cluster.x-k8s.io/v1beta2".into(),
            kind: "Cluster".into(),
            plural: "clusters".into(),
        },
    );
    let list = clusters
        .list(&Default::default())
        .await
        .expect("list clusters");
    assert!(
        list.items.is_empty(),
        "objects were created: {:?}",
        list.items
    );
    tb.delete_namespace(&client, &ns).await;
}

/// A tiny web server that is not Kubernetes: every request gets a 404 HTML page.
fn not_kubernetes() -> String {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = l.local_addr().expect("addr");
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            let mut s = s;
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            let body = "<!DOCTYPE HTML><html><body><h1>404 Not Found</h1></body></html>";
            let _ = write!(
                s,
                "HTTP/1.1 404 Not Found\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    format!("http://{addr}")
}

/// `--dry-run` takes its mode as kubectl's does (`none`, `client` or `server`): a bare one is a
/// usage error, refused before any kubeconfig is read.
#[test]
fn a_bare_dry_run_is_refused_as_kubectl_refuses_it() {
    testbed::expect::bare_dry_run_refused(
        BIN,
        &[
            &["scale", "c1", "--workers", "2"][..],
            &["pause", "c1"],
            &["upgrade", "c1", "--to", "v1.35.0"],
            &["delete", "c1"],
        ],
    );
}

/// A kubeconfig whose context names an undefined user connected as
/// `system:anonymous`; a URL that is not a Kubernetes API server printed its HTML.
#[test]
fn broken_kubeconfigs_and_wrong_servers_say_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let server = not_kubernetes();
    let kc = |users: &str| {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {server}\ncontexts:\n- name: x\n  context: {{cluster: c, user: ghost}}\ncurrent-context: x\n{users}\n"
        )
    };
    let path = dir.path().join("config");
    let cases = [
        (
            kc("users: []"),
            "context \"x\" uses user \"ghost\", which the kubeconfig does not define",
        ),
        (
            kc("users:\n- name: ghost\n  user: {token: abc}"),
            "is not a Kubernetes API server",
        ),
    ];
    for (text, says) in cases {
        std::fs::write(&path, text).unwrap();
        let c = Case {
            args: &["list"],
            code: 1,
            says,
        };
        if let Err(e) = check(&c, path.to_str().unwrap(), "default") {
            panic!("{e}");
        }
    }
}

const TEMPLATE: &str = "apiVersion: cluster.x-k8s.io/v1beta2\nkind: Cluster\nmetadata:\n  name: ${CLUSTER_NAME}\n  labels:\n    stdin-template-marker: \"yes\"\n";

const BILLION_LAUGHS: &str = "apiVersion: v1\nkind: Config\npreferences: {}\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:6443\n    a0: &a0 [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n    a1: &a1 [*a0,*a0,*a0,*a0,*a0,*a0,*a0,*a0,*a0]\n    a2: &a2 [*a1,*a1,*a1,*a1,*a1,*a1,*a1,*a1,*a1]\n    a3: &a3 [*a2,*a2,*a2,*a2,*a2,*a2,*a2,*a2,*a2]\n    a4: &a4 [*a3,*a3,*a3,*a3,*a3,*a3,*a3,*a3,*a3]\n    a5: &a5 [*a4,*a4,*a4,*a4,*a4,*a4,*a4,*a4,*a4]\n    a6: &a6 [*a5,*a5,*a5,*a5,*a5,*a5,*a5,*a5,*a5]\n    a7: &a7 [*a6,*a6,*a6,*a6,*a6,*a6,*a6,*a6,*a6]\n    a8: &a8 [*a7,*a7,*a7,*a7,*a7,*a7,*a7,*a7,*a7]\n";

const NO_CONTEXT: &str = "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:6443\nusers:\n- name: u\n  user: {}\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\ncurrent-context: \"\"\n";

/// Files the user names that never end (`/dev/zero`, an endless stdin), never come (a
/// FIFO nobody writes, a stdin nobody closes) or expand (a billion laughs) are refused in one
/// line and in bounded time, and so are a kubeconfig without a current context and a host
/// directory that is a symlink. Placeholders, made per case: `{fifo}`, `{bl}` (a billion
/// laughs), `{nocontext}` (a kubeconfig with `current-context: ""`), `{tpl}` (a valid
/// template), `{out}` (a directory whose `h1` is a symlink to an empty directory, which must
/// stay empty).
const INPUT: &[InputCase] = {
    use testbed::expect::Stdin::{Endless, Null, Silent, Text};
    use testbed::fixtures::input::case as c;
    &[
        c(
            &["list", "--kubeconfig", "/dev/zero"],
            Null,
            1,
            "--kubeconfig /dev/zero is larger than the 8.0 MiB limit",
        ),
        c(
            &["list", "--kubeconfig", "{fifo}"],
            Null,
            1,
            ": nothing arrived for 10s",
        ),
        c(
            &["list", "--kubeconfig", "{bl}"],
            Null,
            1,
            "aliases (*name) expand beyond the YAML parser's limit",
        ),
        c(
            &["list", "--kubeconfig", "{nocontext}"],
            Null,
            1,
            "no current context is set",
        ),
        c(
            &["generate", "cluster", "c1", "--from", "/dev/zero"],
            Null,
            1,
            "--from /dev/zero is larger than the 8.0 MiB limit",
        ),
        c(
            &["generate", "cluster", "c1", "--from", "-"],
            Endless,
            1,
            "--from - is larger than the 8.0 MiB limit",
        ),
        c(
            &["generate", "cluster", "c1", "--from", "-"],
            Silent,
            1,
            "--from -: nothing arrived for 10s",
        ),
        c(
            &["generate", "cluster", "c1", "--from", "{fifo}"],
            Null,
            1,
            ": nothing arrived for 10s",
        ),
        c(
            &["generate", "cluster", "c1", "--from", "{bl}"],
            Null,
            1,
            "aliases (*name) expand beyond",
        ),
        c(
            &[
                "generate",
                "cluster",
                "c1",
                "--from",
                "{tpl}",
                "--config",
                "/dev/zero",
            ],
            Null,
            1,
            "--config /dev/zero is larger than the 8.0 MiB limit",
        ),
        c(
            &[
                "generate", "cluster", "c1", "--from", "{tpl}", "--config", "{fifo}",
            ],
            Null,
            1,
            ": nothing arrived for 10s",
        ),
        c(
            &["hosts", "add", "h1", "--output", "{out}"],
            Null,
            2,
            "/h1 is a symlink; nothing was written",
        ),
        c(
            &["generate", "cluster", "c1", "--from", "-"],
            Text(TEMPLATE),
            0,
            "stdin-template-marker",
        ),
    ]
};

fn check_input(c: &InputCase, dir: &std::path::Path, i: usize) -> Result<(), String> {
    let fifo = input::fifo(dir, i);
    let (out, elsewhere) = (
        dir.join(format!("out-{i}")),
        dir.join(format!("elsewhere-{i}")),
    );
    std::fs::create_dir_all(&out).unwrap();
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, out.join("h1")).unwrap();
    let path = |name: &str| dir.join(name).display().to_string();
    let args: Vec<String> = c
        .args
        .iter()
        .map(|a| {
            a.replace("{fifo}", &fifo.display().to_string())
                .replace("{bl}", &path("billion-laughs.yaml"))
                .replace("{nocontext}", &path("no-context.yaml"))
                .replace("{tpl}", &path("template.yaml"))
                .replace("{out}", &out.display().to_string())
        })
        .collect();
    let mut cmd = Command::new(BIN);
    cmd.args(&args)
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .env("HOME", dir)
        .env("NO_COLOR", "1");
    let what = format!("kubectl capi {}", args.join(" "));
    let judged = input::judge(&mut cmd, c, &what);
    let written = std::fs::read_dir(&elsewhere)
        .map(|d| d.count())
        .unwrap_or(0);
    if written != 0 {
        return Err(format!("{what}: wrote into {}", elsewhere.display()));
    }
    judged
}

#[test]
fn unbounded_or_endless_input_is_refused_in_time_and_stdin_works() {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in [
        ("billion-laughs.yaml", BILLION_LAUGHS),
        ("no-context.yaml", NO_CONTEXT),
        ("template.yaml", TEMPLATE),
    ] {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    input::check_all(INPUT, |c, i| check_input(c, dir.path(), i));
}

/// `-v=6` logs carry no colour codes when stderr is not a terminal (`make demo >
/// file` showed them), nor on a terminal with NO_COLOR set.
#[test]
fn logs_have_no_colour_codes_off_a_terminal_or_with_no_color() {
    let dir = tempfile::tempdir().unwrap();
    input::list_logs_without_colour(BIN, dir.path());
}
