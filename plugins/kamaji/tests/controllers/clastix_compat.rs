//! `kubectl kamaji` as a drop-in for clastix's `kamaji` kubectl plugin
//! (github.com/clastix/kamaji-kubectl-plugin, v1.0.0, the version krew-index installs): every
//! command line that plugin documents runs through the real kubectl, with our binary on PATH as
//! `kubectl-kamaji`, against a standalone TenantControlPlane (no Cluster API: what that plugin
//! works on) run by the real Kamaji v1.0.0 operator, and does what that plugin does.
//!
//! The repository has no README at v1.0.0 (its tree holds `cmd/`, `pkg/`, `LICENSE` and build
//! files), so the documented command lines are the `Example:` texts of its cobra commands, kept
//! verbatim below with the file each comes from; a few more lines are composed from the flags
//! those files define. What each line must do is read from the same files: `kubeconfig get`
//! prints the Secret's key as it is (`pkg/commands/get_kubeconfig.go`); the rotations delete the
//! `<tcp>-<suffix>` Secrets of `RotateKubeconfigMap` and `RotateCertificatesMap`
//! (`pkg/commands/rotate_{kubeconfig,cert}.go`) and Kamaji re-issues them; `token join` prints
//! `joinTokenKubeadmFlavour`'s or `joinTokenYakiFlavour`'s line (`pkg/commands/join_token.go`).
//!
//! Where we differ on purpose (documented in `--help` and checked here): `token join` without
//! `--flavour` prints the kubeadm line (theirs: yaki); a token is created when the tenant has no
//! usable one, and kubeadm's well-known placeholder token is never handed out.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use crate::common::*;
use base64::Engine;
use kube::Client;
use serde_json::Value;
use testbed::fixtures::run::assert_contains;
use testbed::fixtures::run::words;

/// The `Example:` of each command of clastix's plugin, verbatim (v1.0.0).
const EXAMPLES: &[(&str, &str)] = &[
    (
        "cmd/kubeconfig/get.go",
        "kubectl [--namespace=$NAMESPACE] kamaji kubeconfig get $TCP_NAME [--secret-type=$KEY]",
    ),
    (
        "cmd/token/join.go",
        "kubectl [--namespace=$NAMESPACE] kamaji token join $TCP_NAME [--flavour=$FLAVOUR]",
    ),
    (
        "cmd/kubeconfig/rotate.go",
        "kubectl [--namespace=$NAMESPACE] kamaji kubeconfig rotate $TCP_NAME --all=true",
    ),
    (
        "cmd/kubeconfig/rotate.go",
        "kubectl [--namespace=$NAMESPACE] kamaji kubeconfig rotate $TCP_NAME --components=Admin",
    ),
    (
        // clastix's own binary refuses this one (`kubeconfig rotate` has no --certificates);
        // since its help shows it, ours takes it as --components.
        "cmd/kubeconfig/rotate.go",
        "kubectl [--namespace=$NAMESPACE] kamaji kubeconfig rotate $TCP_NAME --certificates=Admin,ControllerManager",
    ),
    (
        "cmd/certificates/rotate.go",
        "kubectl [--namespace=$NAMESPACE] kamaji certificates rotate $TCP_NAME --all=true",
    ),
    (
        "cmd/certificates/rotate.go",
        "kubectl [--namespace=$NAMESPACE] kamaji certificates rotate $TCP_NAME --certificates=APIServer",
    ),
    (
        "cmd/certificates/rotate.go",
        "kubectl [--namespace=$NAMESPACE] kamaji certificates rotate $TCP_NAME --certificates=FrontProxyCA,FrontProxyClient",
    ),
];

/// Lines composed from the flags the same files define (name, default), in the forms cobra
/// takes them.
const FLAG_LINES: &[(&str, &str)] = &[
    (
        "cmd/kubeconfig/get.go: --secret-key, default admin.conf",
        "kubectl kamaji kubeconfig get $TCP_NAME --secret-key admin.conf",
    ),
    (
        "cmd/kubeconfig/get.go: --secret-key",
        "kubectl kamaji kubeconfig get $TCP_NAME --secret-key=admin.svc",
    ),
    (
        "cmd/token/join.go: --flavour yaki|kubeadm, --skip-expired (bool, default true)",
        "kubectl kamaji token join $TCP_NAME --flavour yaki --skip-expired=false",
    ),
    (
        "cmd/token/join.go: --flavour yaki|kubeadm, --skip-expired (bool, default true)",
        "kubectl kamaji token join $TCP_NAME --flavour=kubeadm --skip-expired",
    ),
    (
        "cmd/kubeconfig/rotate.go: --components (string slice), --all (bool)",
        "kubectl kamaji kubeconfig rotate $TCP_NAME --all=false --components Scheduler --components ControllerManager",
    ),
];

/// `RotateKubeconfigMap` (`pkg/commands/rotate_kubeconfig.go`, v1.0.0).
const KUBECONFIG_SECRETS: &[(&str, &str)] = &[
    ("Admin", "admin-kubeconfig"),
    ("ControllerManager", "controller-manager-kubeconfig"),
    ("Konnectivity", "konnectivity-kubeconfig"),
    ("Scheduler", "scheduler-kubeconfig"),
];

/// `RotateCertificatesMap` (`pkg/commands/rotate_cert.go`, v1.0.0).
const CERT_SECRETS: &[(&str, &str)] = &[
    ("APIServer", "api-server-certificate"),
    (
        "APIServerKubeletClient",
        "api-server-kubelet-client-certificate",
    ),
    ("FrontProxyCA", "front-proxy-ca-certificate"),
    ("FrontProxyClient", "front-proxy-client-certificate"),
    ("Konnectivity", "konnectivity-certificate"),
];

/// An example's optional `[...]` parts all left out (`false`) or all given (`true`). kubectl
/// refuses flags before a plugin's name ("flags cannot be placed before plugin name"), for
/// clastix's plugin as for ours, so a given `[--namespace=...]` goes after the command's words,
/// where kubectl hands it to the plugin.
fn variant(example: &str, given: bool) -> Vec<String> {
    let mut leading = Vec::new();
    let mut words = Vec::new();
    for w in example.split_whitespace() {
        match w.strip_prefix('[').and_then(|w| w.strip_suffix(']')) {
            Some(opt) if given && words.len() < 2 => leading.push(opt.to_string()),
            Some(opt) if given => words.push(opt.to_string()),
            Some(_) => {}
            None => words.push(w.to_string()),
        }
    }
    words.extend(leading);
    words
}

fn substitute(words: &[String], vars: &[(&str, &str)]) -> Vec<String> {
    words
        .iter()
        .map(|w| {
            vars.iter()
                .fold(w.clone(), |w, (k, v)| w.replace(&format!("${k}"), v))
        })
        .collect()
}

/// The value of `--flag=V` or `--flag V` in a line, each occurrence's values (comma-split).
fn flag_values(words: &[String], flag: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, w) in words.iter().enumerate() {
        let v = if let Some(v) = w.strip_prefix(&format!("{flag}=")) {
            v.to_string()
        } else if w == flag {
            match words.get(i + 1) {
                Some(v) if !v.starts_with('-') => v.clone(),
                _ => continue,
            }
        } else {
            continue;
        };
        out.extend(v.split(',').map(str::to_string));
    }
    out
}

/// name -> uid of the Secrets in `ns`.
async fn secret_uids(client: &Client, ns: &str) -> BTreeMap<String, String> {
    api(client, ns, &secret_ar())
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|s| Some((s.metadata.name?, s.metadata.uid?)))
        .collect()
}

fn secret_key(secret: &Value, key: &str) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(secret["data"][key].as_str().unwrap_or_default())
        .unwrap()
}

/// Runs `kubectl <words[1..]>` as a user of clastix's plugin would: the real kubectl, our
/// binary on PATH as `kubectl-kamaji`, the kubeconfig (whose context names the namespace)
/// from KUBECONFIG.
fn kubectl_line(plugins: &Path, kubeconfig: &Path, words: &[String]) -> Output {
    assert_eq!(words[0], "kubectl");
    let path = format!(
        "{}:{}",
        plugins.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    Command::new(KUBECTL)
        .args(&words[1..])
        .env("PATH", path)
        .env("KUBECONFIG", kubeconfig)
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
}

/// What one line must have done, checked against the cluster and the tenant.
struct World<'a> {
    client: &'a Client,
    ns: &'a str,
    tcp: &'a str,
    admin_secret: String,
    tenant_kc: PathBuf,
}

impl World<'_> {
    async fn admin(&self) -> Value {
        get(self.client, self.ns, &secret_ar(), &self.admin_secret)
            .await
            .unwrap()
    }

    /// `kubeconfig get`: the Secret's key, as it is.
    async fn check_get(&self, line: &[String], o: &Output) {
        let key = flag_values(line, "--secret-type")
            .into_iter()
            .chain(flag_values(line, "--secret-key"))
            .next()
            .unwrap_or_else(|| "admin.conf".into());
        let want = secret_key(&self.admin().await, &key);
        assert!(!want.is_empty(), "the admin Secret has no {key}");
        let mut want = String::from_utf8(want).unwrap();
        if !want.ends_with('\n') {
            want.push('\n');
        }
        assert_eq!(stdout(o), want, "{line:?}");
    }

    /// `token join`: clastix's line for the flavour, with a usable token of the tenant, its
    /// endpoint and CA hash, and (yaki) the tenant's version.
    async fn check_join(&self, line: &[String], o: &Output, tcp: &Value) {
        let out = stdout(o);
        let flavour = flag_values(line, "--flavour")
            .pop()
            // Our documented default; clastix's is yaki.
            .unwrap_or_else(|| "kubeadm".into());
        let admin = self.admin().await;
        let conf: Value =
            serde_saphyr::from_str(&String::from_utf8(secret_key(&admin, "admin.conf")).unwrap())
                .unwrap();
        let cluster = &conf["clusters"][0]["cluster"];
        let server = cluster["server"].as_str().unwrap();
        let endpoint = server.trim_start_matches("https://").trim_end_matches('/');
        let ca = base64::engine::general_purpose::STANDARD
            .decode(cluster["certificate-authority-data"].as_str().unwrap())
            .unwrap();
        let hash = kcore::build::pki::ca_cert_hash(&ca).unwrap();
        let token = out
            .split_whitespace()
            .find_map(|w| w.strip_prefix("JOIN_TOKEN="))
            .or_else(|| {
                out.split_whitespace()
                    .skip_while(|w| *w != "--token")
                    .nth(1)
            })
            .unwrap_or_else(|| panic!("{line:?}: no token in {out}"))
            .to_string();
        let want = match flavour.as_str() {
            "kubeadm" => format!(
                "kubeadm join {endpoint} --token {token} --discovery-token-ca-cert-hash {hash}\n"
            ),
            "yaki" => format!(
                "wget -O- https://goyaki.clastix.io | sudo KUBERNETES_VERSION={} JOIN_URL={endpoint} JOIN_TOKEN={token} JOIN_TOKEN_CACERT_HASH={hash} bash -s join\n",
                tcp["status"]["kubernetesResources"]["version"]["version"]
                    .as_str()
                    .unwrap()
            ),
            other => panic!("flavour {other}"),
        };
        assert_eq!(out, want, "{line:?}");
        assert!(hash.starts_with("sha256:") && hash.len() == 71, "{hash}");
        // The token is a bootstrap token of the tenant, valid, and not kubeadm's placeholder.
        assert_ne!(token, "abcdef.0123456789abcdef");
        let (id, secret) = token.split_once('.').unwrap();
        let o = bootstrap_token_secret(&self.tenant_kc, id, "json");
        assert!(o.status.success(), "{}", stderr(&o));
        let s: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(s["type"], "bootstrap.kubernetes.io/token");
        assert_eq!(secret_key(&s, "token-secret"), secret.as_bytes());
        let exp: jiff::Timestamp = String::from_utf8(secret_key(&s, "expiration"))
            .unwrap()
            .parse()
            .unwrap();
        assert!(exp > jiff::Timestamp::now(), "{s}");
    }

    /// A rotation: the named Secrets that existed are deleted and Kamaji re-issues them (new
    /// uid); those that did not exist stay absent; the others of the same table are untouched.
    async fn check_rotation(
        &self,
        line: &[String],
        before: &BTreeMap<String, String>,
        table: &[(&str, &str)],
        names: &[String],
    ) {
        let all = flag_values(line, "--all").first().map(String::as_str) == Some("true");
        let secret = |suffix: &str| format!("{}-{suffix}", self.tcp);
        let (rotated, kept): (Vec<_>, Vec<_>) = table
            .iter()
            .partition(|(k, _)| all || names.iter().any(|n| n == k));
        assert!(!rotated.is_empty(), "{line:?} names nothing");
        let deadline = Instant::now() + Duration::from_secs(180);
        loop {
            let now = secret_uids(self.client, self.ns).await;
            let pending: Vec<String> = rotated
                .iter()
                .map(|(_, s)| secret(s))
                .filter(|s| match before.get(s) {
                    // Re-issued: present under a new uid.
                    Some(uid) => now.get(s).is_none_or(|u| u == uid),
                    None => now.contains_key(s),
                })
                .collect();
            if pending.is_empty() {
                for (_, s) in &kept {
                    assert_eq!(
                        now.get(&secret(s)),
                        before.get(&secret(s)),
                        "{line:?} touched {}",
                        secret(s)
                    );
                }
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{line:?}: not re-issued: {pending:?}"
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

/// Every documented command line of clastix's plugin, on a standalone TenantControlPlane of the
/// real Kamaji.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clastix_plugin_command_lines() {
    let tb = testbed_real().await;
    let (client, ns) = tb.namespace("clastix").await;
    let tcp_name = "tcp1";
    let port = free_port();
    create_standalone_tcp(&client, &ns, tcp_name, port).await;
    let tcp = ready_tcp(&client, &ns, tcp_name).await;
    let admin_secret = tcp["status"]["kubeconfig"]["admin"]["secretName"]
        .as_str()
        .unwrap()
        .to_string();

    // kubectl, with our binary as the `kamaji` plugin, and a kubeconfig whose context names
    // the namespace (clastix's plugin takes it from there, as kubectl does, when no -n is given).
    let plugins = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(
        env!("CARGO_BIN_EXE_kubectl-kamaji"),
        plugins.path().join("kubectl-kamaji"),
    )
    .unwrap();
    let kc = plugins.path().join("config");
    std::fs::copy(&tb.kubeconfig, &kc).unwrap();
    let o = kubectl(
        &kc,
        &[
            "config",
            "set-context",
            "--current",
            &format!("--namespace={ns}"),
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let tenant_kc = tenant_kubeconfig(tb, &ns, tcp_name);
    let world = World {
        client: &client,
        ns: &ns,
        tcp: tcp_name,
        admin_secret,
        tenant_kc: tenant_kc.clone(),
    };
    let vars = [
        ("NAMESPACE", ns.as_str()),
        ("TCP_NAME", tcp_name),
        ("KEY", "admin.svc"),
        ("FLAVOUR", "yaki"),
    ];

    // Every line: the examples with their optional parts left out and given (the rotations,
    // which restart the tenant, alternate between the two), then the flag lines.
    let mut lines: Vec<(String, Vec<String>)> = Vec::new();
    let mut rotation = 0;
    for (file, example) in EXAMPLES {
        let source = format!("{file}: {example}");
        if example.contains(" rotate ") {
            lines.push((
                source,
                substitute(&variant(example, rotation % 2 == 1), &vars),
            ));
            rotation += 1;
        } else {
            for given in [false, true] {
                lines.push((source.clone(), substitute(&variant(example, given), &vars)));
            }
        }
    }
    // The non-rotating flag lines run before the rotations (a rotation restarts the tenant).
    let (quiet, rotating): (Vec<_>, Vec<_>) = FLAG_LINES
        .iter()
        .map(|(file, l)| (format!("{file}: {l}"), substitute(&variant(l, true), &vars)))
        .partition(|(_, w)| !w.contains(&"rotate".to_string()));
    let first_rotation = lines
        .iter()
        .position(|(_, w)| w.contains(&"rotate".to_string()))
        .unwrap();
    lines.splice(first_rotation..first_rotation, quiet);
    lines.extend(rotating);
    assert_eq!(lines.len(), 2 * 2 + 6 + FLAG_LINES.len());

    for (source, line) in &lines {
        let before = secret_uids(&client, &ns).await;
        let o = kubectl_line(plugins.path(), &kc, line);
        assert!(
            o.status.success(),
            "{source}\n{}\nexit {:?}\nstdout:\n{}\nstderr:\n{}",
            line.join(" "),
            o.status.code(),
            stdout(&o),
            stderr(&o)
        );
        match (line[2].as_str(), line[3].as_str()) {
            ("kubeconfig", "get") => world.check_get(line, &o).await,
            ("token", "join") => world.check_join(line, &o, &tcp).await,
            ("kubeconfig", "rotate") => {
                let names: Vec<String> = flag_values(line, "--components")
                    .into_iter()
                    .chain(flag_values(line, "--certificates"))
                    .collect();
                world
                    .check_rotation(line, &before, KUBECONFIG_SECRETS, &names)
                    .await
            }
            ("certificates", "rotate") => {
                let names = flag_values(line, "--certificates");
                world
                    .check_rotation(line, &before, CERT_SECRETS, &names)
                    .await
            }
            other => panic!("{source}: no check for {other:?}"),
        }
    }

    // After every rotation Kamaji brings the tenant back: ready, and answering with the
    // re-issued admin kubeconfig.
    ready_tcp(&client, &ns, tcp_name).await;
    let tenant_kc = tenant_kubeconfig(tb, &ns, tcp_name);
    wait_until(
        "the tenant to answer after the rotations",
        Duration::from_secs(180),
        || async {
            let o = kubectl(&tenant_kc, &["get", "--raw", "/readyz"]);
            o.status.success().then_some(()).ok_or_else(|| stderr(&o))
        },
    )
    .await;

    kubeconfig_flags_on_a_tenant(tb, &ns, tcp_name, &tenant_kc).await;
    tb.delete_namespace(&client, &ns).await;
}

/// The kubeconfig flags `kubectl kamaji kubeconfig get` shares with `kubectl capi kubeconfig`
/// (plugins/capi/tests/apiserver/kubeconfig_flags.rs checks that side): `-o json`, `--write-to`,
/// `--merge=FILE --set-current` (the merged context reaches the tenant), the old spellings,
/// and the conflict hint both give.
async fn kubeconfig_flags_on_a_tenant(tb: &testbed::Testbed, ns: &str, tcp: &str, tenant: &Path) {
    let get = |flags: &[&str]| kamaji(tb, ns, &[&["kubeconfig", "get", tcp], flags].concat());
    let text = std::fs::read_to_string(tenant).unwrap();
    let parsed: Value = serde_saphyr::from_str(&text).unwrap();
    let json_out = ok(&get(&["-o", "json"]));
    assert_eq!(serde_json::from_str::<Value>(&json_out).unwrap(), parsed);
    assert_eq!(ok(&get(&["-o", "yaml"])), text);

    let dir = tempfile::tempdir().unwrap();
    for flag in ["--write-to", "--output-file"] {
        let f = dir.path().join(flag.trim_start_matches('-'));
        let o = get(&[flag, f.to_str().unwrap()]);
        assert!(ok(&o).is_empty(), "{flag}");
        assert_eq!(std::fs::read_to_string(&f).unwrap(), text, "{flag}");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&f).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{flag}");
    }

    let file = dir.path().join("config");
    let f = file.to_str().unwrap();
    let merge = format!("--merge={f}");
    let ctx = format!("{tcp}-admin@{tcp}");
    let o = get(&[&merge, "--set-current"]);
    assert!(ok(&o).is_empty(), "a merge prints nothing on stdout");
    assert_contains(
        &stderr(&o),
        &format!("merged context \"{ctx}\" into {f}: added"),
    );
    let o = kubectl(&file, &["get", "namespace", "kube-system", "-o", "name"]);
    assert_eq!(stdout(&o).trim(), "namespace/kube-system", "{}", stderr(&o));
    // The old spellings: --merge --merge-file FILE --switch.
    let o = get(&["--merge", "--merge-file", f, "--switch"]);
    ok(&o);
    assert_contains(&stderr(&o), "already up to date");
    // --context-name: a second context for the same tenant.
    ok(&get(&[&merge, "--context-name", "mine"]));
    let o = kubectl(
        &file,
        &words("--context mine get namespace default -o name"),
    );
    assert_eq!(stdout(&o).trim(), "namespace/default", "{}", stderr(&o));
    // A conflict: refused with the hint both plugins give.
    let changed = std::fs::read_to_string(&file)
        .unwrap()
        .replace("https://127.0.0.1", "https://127.0.0.2");
    std::fs::write(&file, &changed).unwrap();
    let o = get(&[&merge]);
    let line = fails(&o, 1);
    assert_contains(&line, "already has cluster");
    assert_contains(
        &stderr(&o),
        &format!("hint: {}", kclient::kubeconfig::CONFLICT_HINT),
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), changed);
}

/// clastix's flag forms parse, and what they refuse is refused here too: exit 2, one line, no
/// request (the kubeconfig does not exist).
#[test]
fn clastix_flag_forms_parse_and_refuse() {
    let run = |line: &str| {
        Command::new(env!("CARGO_BIN_EXE_kubectl-kamaji"))
            .args(words(line))
            .env("KUBECONFIG", "/nonexistent/kubeconfig")
            .env("NO_COLOR", "1")
            .output()
            .unwrap()
    };
    // Parsed: they fail only at reading the (missing) kubeconfig, exit 1.
    for line in [
        "kubeconfig rotate t --all=true",
        "kubeconfig rotate t --all",
        "kubeconfig rotate t --all=false --components=Admin",
        "kubeconfig rotate t --components Admin --components Scheduler",
        "kubeconfig rotate t --certificates=Admin,ControllerManager",
        "kubeconfig get t --secret-type=admin.svc",
        "certificates rotate t --all=True",
        "certificates rotate t --certificates=FrontProxyCA,FrontProxyClient",
        "certificates rotate t --certificates=APIServerKubeletClient",
        "token join t --flavour=yaki --skip-expired=false",
        "token join t --flavour kubeadm --skip-expired",
    ] {
        let o = run(line);
        assert_eq!(o.status.code(), Some(1), "{line}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("/nonexistent/kubeconfig"),
            "{line}: {}",
            stderr(&o)
        );
    }
    // Refused as clastix's plugin refuses them (and --all with a list, which its help calls
    // mutually exclusive).
    for (line, says) in [
        ("certificates rotate t", "no certificate to rotate"),
        (
            "certificates rotate t --all=false",
            "no certificate to rotate",
        ),
        (
            "certificates rotate t --certificates=Bogus",
            "invalid value 'Bogus'",
        ),
        ("certificates rotate t --all=yes", "not a boolean"),
        (
            "certificates rotate t --all --certificates=APIServer",
            "both say",
        ),
        ("kubeconfig rotate t --all --components=Admin", "both say"),
        (
            "kubeconfig rotate t --components=Kubelet",
            "invalid value 'Kubelet'",
        ),
        ("token join t --flavour=chef", "invalid value 'chef'"),
        ("token join t --skip-expired=maybe", "not a boolean"),
    ] {
        testbed::expect::one_line_refusal(&run(line), 2, says, line).unwrap();
    }
    // Where the default differs on purpose, --help says why and how to get clastix's.
    // (help wraps at the terminal's width: compare with the whitespace collapsed)
    let flat = |o: &Output| stdout(o).split_whitespace().collect::<Vec<_>>().join(" ");
    let help = flat(&run("token join --help"));
    assert!(
        help.contains("clastix's kamaji plugin prints the yaki one-liner by default")
            && help.contains("--flavour=yaki prints clastix's line exactly"),
        "{help}"
    );
    let help = flat(&run("kubeconfig rotate --help"));
    assert_contains(&help, "clastix's plugin asks for one of them");
}
