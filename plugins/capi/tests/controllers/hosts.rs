//! `hosts`: cordon, drain (and a drain that times out, finished by a rerun), uncordon; `hosts add`'s
//! bootstrap kubeconfig; `doctor` on a host whose bootstrap the real agent keeps retrying.

use crate::common::*;

/// `hosts describe`, then `hosts cordon|uncordon|drain`, with the real CAPI and BYOH managers and
/// host agents: describe follows the chain the controllers wrote; a cordoned
/// host stays out of a scale-up (BYOH's own selection skips it), drain refuses without a spare,
/// then moves the machine to the spare and leaves the host cordoned, and uncordon returns it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hosts_cordon_drain_uncordon() {
    let s = Story::start("maint").await;
    let ns = &s.ns;
    // 3 worker hosts, one of them spare; 1 control-plane host.
    let _players = s.cluster_on("c1", 2, 3, 1).await;
    s.until_claimed(2).await;
    let claimed = s.claimed().await;
    let spare = (1..=3)
        .map(|i| format!("{ns}-w{i:02}"))
        .find(|h| !claimed.contains(h))
        .unwrap();
    let victim = claimed[0].clone();
    let byomachine = ar(
        "infrastructure.cluster.x-k8s.io",
        "v1beta1",
        "ByoMachine",
        "byomachines",
    );

    // `hosts describe` on what the real controllers and agent wrote: the ByoMachine BYOH's
    // controller attached the host to, the Machine CAPI made that owns it, and the interfaces
    // the agent reported from its own network namespace.
    let h = s.get(&host_ar(), &victim).await;
    let attached = h.data["status"]["machineRef"]["name"]
        .as_str()
        .expect("BYOH attached the claimed host")
        .to_string();
    let bm = s.get(&byomachine, &attached).await;
    let machine = bm
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.kind == "Machine")
        .map(|o| o.name.clone())
        .expect("CAPI's Machine owns the ByoMachine");
    let d: serde_json::Value =
        serde_json::from_str(&out(&s.ok(&["hosts", "describe", &victim, "-o", "json"]))).unwrap();
    let chain = &d["chain"];
    assert!(
        chain["byoMachine"]
            .as_str()
            .is_some_and(|b| b.ends_with(&attached))
            && chain["byoMachineExists"] == true
            && chain["machine"]
                .as_str()
                .is_some_and(|m| m.ends_with(&machine)),
        "{attached} and {machine}: {d}"
    );
    assert!(
        d["interfaces"].as_array().is_some_and(|i| i
            .iter()
            .any(|i| i["name"] == "eth0" && i["isDefault"] == true)),
        "the agent's eth0, its default route's: {d}"
    );

    // A busy host cannot be removed (BYOH's webhook would refuse it too); nothing goes, not
    // even the free host named with it.
    let o = s.fails(1, &["hosts", "remove", &spare, &victim, "--yes"]);
    assert_contains(
        &err(&o),
        &format!("ByoHost {victim} serves ByoMachine {attached}"),
    );
    assert_contains(&err(&o), "nothing was removed");
    let _ = s.get(&host_ar(), &spare).await;

    // A missing host, and a host that serves a machine: one line each.
    let o = s.fails(1, &["hosts", "cordon", "nope"]);
    assert_eq!(first_line(&o), "error: ByoHost \"nope\" not found");
    let o = s.fails(1, &["hosts", "cordon", &victim]);
    assert_contains(&err(&o), "drain it instead");

    // Cordon the spare: BYOH's selection skips it, so a scale-up finds no free host.
    let o = s.ok(&["hosts", "cordon", &spare]);
    assert!(
        out(&o).ends_with(&format!("{spare} cordoned\n")),
        "{}",
        out(&o)
    );
    let o = s.run(&["hosts", "cordon", &spare]);
    assert_contains(&out(&o), "already cordoned");
    let table = out(&s.run(&["hosts", "--no-headers"]));
    assert!(
        table
            .lines()
            .any(|l| l.contains(&spare) && l.contains("Cordoned")),
        "{table}"
    );
    let o = s.fails(1, &["scale", "c1", "--workers", "3"]);
    assert_contains(&err(&o), "0 available");
    // Even past our preflight, BYOH itself keeps the new machine off the cordoned host.
    s.ok(&["scale", "c1", "--workers", "3", "--force"]);
    // BYOH says it looked and found no host (BYOH v0.5.0 byomachine_controller.go: BYOHostReady
    // False, BYOHostsUnavailable), rather than a fixed sleep that hopes it has looked.
    eventually(
        "BYOH to find no host for the third machine",
        Duration::from_secs(60),
        async || {
            s.of_cluster(&byomachine, "c1").await.iter().any(|m| {
                m.data["status"]["conditions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|c| c["type"] == "BYOHostReady" && c["reason"] == "BYOHostsUnavailable")
            })
        },
    )
    .await;
    let hosts = s.get(&host_ar(), &spare).await;
    assert!(
        hosts.data["status"]["machineRef"]["name"].is_null(),
        "the cordoned host was not picked"
    );
    s.ok(&words("scale c1 --workers 2 --wait --timeout 90s"));

    // Drain with no spare: refused, nothing deleted.
    let o = s.fails(1, &["hosts", "drain", &victim, "--yes"]);
    assert_contains(
        &err(&o),
        &format!("no free host matches {{pool={ns},role=worker}}"),
    );
    assert_eq!(s.machines("c1").await, 2);
    // Without a terminal, drain needs --yes.
    s.fails(1, &["hosts", "drain", &victim]);

    // Uncordon the spare; drain the victim: its machine moves to the spare, it ends cordoned.
    let o = s.ok(&["hosts", "uncordon", &spare]);
    assert_contains(&out(&o), &format!("{spare} uncordoned"));
    let o = s.ok(&words(&format!(
        "hosts drain {victim} --yes --timeout 150s"
    )));
    assert_contains(&out(&o), "drained and cordoned");
    let now = s.claimed().await;
    assert!(now.contains(&spare) && !now.contains(&victim), "{now:?}");
    assert_eq!(s.machines("c1").await, 2);
    let h = s.get(&host_ar(), &victim).await;
    assert_eq!(cluster_label(&h), Some(""));
    s.ok(&["hosts", "uncordon", &victim]);
    let h = s.get(&host_ar(), &victim).await;
    assert_eq!(cluster_label(&h), None);

    // The victim, free now, leaves for good: its ByoHost, the BootstrapKubeconfig `hosts add`
    // made, the bootstrap token BYOH issued with it and the real agent's CSR.
    let bootstrap = ar(
        "infrastructure.cluster.x-k8s.io",
        "v1beta1",
        "BootstrapKubeconfig",
        "bootstrapkubeconfigs",
    );
    let csrs: Api<k8s_openapi::api::certificates::v1::CertificateSigningRequest> =
        Api::all(s.client.clone());
    let csr = format!("byoh-csr-{victim}");
    assert!(
        csrs.get_opt(&csr).await.unwrap().is_some(),
        "the agent's CSR"
    );
    let issued = serde_json::to_value(s.get(&bootstrap, &victim).await).unwrap();
    let token = kcore::plan::hosts::removal::token_secret(&issued).expect("BYOH issued a token");
    let secrets: Api<k8s_openapi::api::core::v1::Secret> =
        Api::namespaced(s.client.clone(), "kube-system");
    assert!(
        secrets.get_opt(&token).await.unwrap().is_some(),
        "BYOH's token Secret {token}"
    );
    let o = s.fails(2, &["hosts", "remove", &victim]);
    assert_contains(&err(&o), "confirm with --yes");
    let o = s.ok(&["hosts", "remove", &victim, "--dry-run=client"]);
    assert_contains(
        &out(&o),
        &format!("would remove {victim} (dry run): byohost/{victim}"),
    );
    assert_contains(&out(&o), &format!("certificatesigningrequest/{csr}"));
    let _ = s.get(&host_ar(), &victim).await;
    let o = s.ok(&["hosts", "remove", &victim, "--yes"]);
    assert_contains(
        &out(&o),
        &format!("byohost.infrastructure.cluster.x-k8s.io/{victim} removed"),
    );
    assert_contains(&out(&o), &format!("bootstrapkubeconfig/{victim}"));
    assert_contains(
        &out(&o),
        &format!("On {victim}: stop the agent before anything else"),
    );
    eventually(
        "the victim and what was issued for it gone",
        Duration::from_secs(30),
        async || {
            s.api(&host_ar()).get_opt(&victim).await.unwrap().is_none()
                && s.api(&bootstrap).get_opt(&victim).await.unwrap().is_none()
                && csrs.get_opt(&csr).await.unwrap().is_none()
                && secrets.get_opt(&token).await.unwrap().is_none()
        },
    )
    .await;
    let o = s.fails(1, &["hosts", "remove", &victim, "--yes"]);
    assert_contains(&err(&o), &format!("ByoHost \"{victim}\" not found"));
}

/// `hosts drain HOST --timeout 1s` deleted the Machine, returned 1, and the host,
/// released later by its agent, was left Available: BYOH could pick it again. The drain marks
/// the host before it deletes the Machine (BYOH's release keeps that mark), its timeout says
/// to re-run, and the re-run waits for the release and cordons the host.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_that_times_out_is_finished_by_a_rerun() {
    let s = Story::start("drain-rerun").await;
    let _players = s.cluster_on("c1", 1, 2, 0).await;
    s.until_ready("c1-md-0", 1).await;
    let victim = s.claimed().await.remove(0);

    let o = s.fails(
        1,
        &words(&format!("hosts drain {victim} --yes --timeout 1s")),
    );
    assert_contains(&err(&o), "re-run to finish");
    // Nobody waits any more; the agent releases the host.
    // (A quick release may find the first run still polling: it cordons then, and the
    // re-run waits for the replacement.)
    eventually(
        "the drained host released",
        Duration::from_secs(90),
        async || {
            let h = s.get(&host_ar(), &victim).await;
            h.data["status"]["machineRef"]["name"].is_null() && cluster_label(&h) != Some("c1")
        },
    )
    .await;
    // The re-run finishes: the host ends cordoned, the replacement runs on the spare.
    let o = s.ok(&words(&format!(
        "hosts drain {victim} --yes --timeout 120s"
    )));
    assert_contains(&out(&o), "drained and cordoned");
    let h = s.get(&host_ar(), &victim).await;
    assert_eq!(cluster_label(&h), Some(""), "{:?}", h.metadata);
    assert!(h.annotations().contains_key("capi-kamaji.io/cordoned"));
    assert!(!h.annotations().contains_key("capi-kamaji.io/draining"));
    let now = s.claimed().await;
    assert!(now.len() == 1 && !now.contains(&victim), "{now:?}");
    eventually(
        "the drained machine gone",
        Duration::from_secs(60),
        async || s.machines("c1").await == 1,
    )
    .await;
}

/// `hosts add`: the real BYOH controller issues the BootstrapKubeconfig, and its
/// token really authenticates (the testbed's API server accepts bootstrap tokens, as kubeadm's
/// do): `kubectl auth whoami` with it answers `system:bootstrap:<id>`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hosts_add_issues_a_working_bootstrap_kubeconfig() {
    let s = Story::start("onboard").await;
    let ns = &s.ns;
    let work = tempfile::tempdir().unwrap();

    // --check: the host's preflight alone, before any token: nothing issued.
    let o = s.ok(&words("hosts add rack1-node7 --check"));
    let script = out(&o);
    assert!(script.starts_with("#!/bin/sh\n"), "{script}");
    assert_contains(&script, "HOST=rack1-node7\n");
    assert_contains(&script, &format!("NAMESPACE={ns}\n"));
    assert_contains(&script, "TOKEN_TTL=0\n");
    assert_contains(&err(&o), "ssh rack1-node7 sudo sh");
    let bootstrap = ar(
        "infrastructure.cluster.x-k8s.io",
        "v1beta1",
        "BootstrapKubeconfig",
        "bootstrapkubeconfigs",
    );
    assert!(
        s.api(&bootstrap)
            .get_opt("rack1-node7")
            .await
            .unwrap()
            .is_none(),
        "--check issued nothing"
    );
    let o = s.fails(2, &words("hosts add a1 a2 --check"));
    assert_contains(&err(&o), "--check prints one host's preflight");

    // One host: the script on stdout (its kubeconfig inside), the agent command on stderr.
    let o = s.ok(&words("hosts add rack1-node7 --label site=lab,rack=r1"));
    assert_contains(
        &err(&o),
        &format!(
            "byoh-hostagent --bootstrap-kubeconfig /etc/byoh/bootstrap-kubeconfig.conf --namespace {ns} --label site=lab --label rack=r1"
        ),
    );
    let conf = work.path().join("bootstrap.conf");
    let printed = testbed::agent::bootstrap_kubeconfig_in(&out(&o))
        .unwrap_or_else(|| panic!("no kubeconfig in the script:\n{}", out(&o)));
    std::fs::write(&conf, &printed).unwrap();
    let kc: Value = serde_saphyr::from_str(&printed).unwrap();
    let token = kc["users"][0]["user"]["token"]
        .as_str()
        .unwrap()
        .to_string();
    let id = token.split('.').next().unwrap().to_string();
    assert_eq!(token.len(), 23, "a bootstrap token, id.secret: {token}");
    let who = Command::new("kubectl")
        .args([
            "auth",
            "whoami",
            "-o",
            "jsonpath={.status.userInfo.username}",
            "--kubeconfig",
        ])
        .arg(&conf)
        .env_remove("KUBECONFIG")
        .output()
        .unwrap();
    assert_eq!(
        assert_ok(&who, "kubectl auth whoami"),
        format!("system:bootstrap:{id}"),
        "the token authenticates"
    );

    // Several hosts need --output; with it, files per host, and a re-run is idempotent.
    let o = s.fails(2, &["hosts", "add", "a1", "a2"]);
    assert_contains(&err(&o), "--output DIR");
    let dir = work.path().join("byoh");
    for _ in 0..2 {
        s.ok(&[
            "hosts",
            "add",
            "a1",
            "a2",
            "--output",
            dir.to_str().unwrap(),
        ]);
    }
    for h in ["a1", "a2"] {
        let conf = dir.join(h).join("bootstrap-kubeconfig.conf");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&conf).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let script = std::fs::read_to_string(dir.join(h).join("agent.sh")).unwrap();
        assert_contains(&script, &format!("--namespace {ns}"));
        // The host's preflight runs first (its checks are core's build::byoh tests).
        assert_contains(&script, "preflight.sh\" ${PREFLIGHT_ARGS:-} || exit 1");
        let preflight = dir.join(h).join("preflight.sh");
        assert_eq!(
            std::fs::metadata(&preflight).unwrap().permissions().mode() & 0o777,
            0o755
        );
        assert_contains(
            &std::fs::read_to_string(&preflight).unwrap(),
            &format!("HOST={h}\n"),
        );
    }
    // Bad input: one line each, nothing created.
    s.fails(2, &["hosts", "add", "b1", "--label", "bad key=x"]);
    let o = s.fails(2, &words("hosts add b1 --apiserver http://10.0.0.1"));
    assert_contains(&err(&o), "https://host:port");
}

/// `hosts add` as a hostile or careless user drives it: text that would run as root on the
/// host, a port no host can dial, an empty or relative host path, a label given two values, a
/// namespace that is no name, all refused (exit 2) before anything is created; under `umask
/// 000` the directories it makes are private; a write that fails leaves no live token behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hosts_add_refuses_what_would_run_as_root_and_leaves_no_token_behind() {
    use std::os::unix::fs::PermissionsExt;
    let s = Story::start("hostile").await;
    let ns = &s.ns;
    let bk = ar(
        "infrastructure.cluster.x-k8s.io",
        "v1beta1",
        "BootstrapKubeconfig",
        "bootstrapkubeconfigs",
    );
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("byoh");
    let d = dir.to_str().unwrap();
    let pwned = work.path().join("PWNED");
    let inject = format!("/x\ntouch {}\n#", pwned.display());
    for (args, says) in [
        (
            vec!["hosts", "add", "p1", "--host-path", &inject, "--output", d],
            "control character",
        ),
        (
            vec!["hosts", "add", "p1", "--host-path", &inject],
            "control character",
        ),
        (
            vec!["hosts", "add", "p1", "--host-path", ""],
            "--host-path is empty",
        ),
        (
            vec!["hosts", "add", "p1", "--host-path", "b.conf"],
            "not an absolute file path",
        ),
        (
            vec![
                "hosts",
                "add",
                "p1",
                "--apiserver",
                "https://127.0.0.1:99999",
            ],
            "port 99999",
        ),
        (
            vec!["hosts", "add", "p1", "--label", "k=a,k=b"],
            "--label k is given twice (a and b)",
        ),
    ] {
        let o = s.fails(2, &args);
        assert_contains(&error_line(&o), says);
    }
    let o = testbed::fixtures::run::plugin(
        BIN,
        &s.tb.kubeconfig,
        &["hosts", "add", "z1", "-n", "a$(x)"],
    );
    exits(&o, 2);
    assert_contains(
        &error_line(&o),
        "\"a$(x)\" (-n) is not a valid namespace name",
    );
    assert!(!dir.exists() && !pwned.exists());
    assert!(
        s.api(&bk).get_opt("p1").await.unwrap().is_none(),
        "a token for refused input"
    );

    // Private directories whatever the umask: agent.sh runs as root, no one else may swap it.
    let mut cmd = std::process::Command::new("/bin/sh");
    cmd.args([
        "-c",
        "umask 000; exec \"$@\"",
        "sh",
        BIN,
        "hosts",
        "add",
        "u1",
        "--output",
        d,
    ])
    .arg("--kubeconfig")
    .arg(&s.tb.kubeconfig)
    .args(["-n", ns])
    .env_remove("KUBECONFIG")
    .env("NO_COLOR", "1");
    let o = cmd.output().unwrap();
    assert_ok(&o, "hosts add u1 --output under umask 000");
    for p in [dir.clone(), dir.join("u1")] {
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "{}", p.display());
    }
    // A host directory others can write in is refused before a token is issued.
    std::fs::create_dir(dir.join("w1")).unwrap();
    std::fs::set_permissions(dir.join("w1"), std::fs::Permissions::from_mode(0o777)).unwrap();
    let o = s.fails(2, &["hosts", "add", "w1", "--output", d]);
    assert_contains(&error_line(&o), "is writable by others than its owner");

    // A directory nothing can be written in (even root cannot make one in /proc/self): refused
    // before a token is issued.
    let o = s.fails(1, &["hosts", "add", "r1", "--output", "/proc/self"]);
    assert_contains(&error_line(&o), "no token was issued");
    // A write that fails after the token was issued (injected before the rename): the
    // BootstrapKubeconfig is deleted, and the error says so.
    let mut cmd = testbed::fixtures::run::command(
        BIN,
        &s.tb.kubeconfig,
        &["hosts", "add", "f1", "--output", d, "-n", ns],
    );
    cmd.env(kclient::kubeconfig::FAIL_BEFORE_RENAME_ENV, "1");
    let o = cmd.output().unwrap();
    exits(&o, 1);
    assert_contains(
        &error_line(&o),
        &format!(
            "the token just issued was withdrawn (bootstrapkubeconfig.infrastructure.cluster.x-k8s.io/f1 in {ns} deleted)"
        ),
    );
    for h in ["w1", "r1"] {
        assert!(
            s.api(&bk).get_opt(h).await.unwrap().is_none(),
            "{h}'s token left behind"
        );
    }
    eventually(
        "f1's BootstrapKubeconfig gone",
        Duration::from_secs(30),
        async || s.api(&bk).get_opt("f1").await.unwrap().is_none(),
    )
    .await;
    assert!(s.api(&bk).get_opt("u1").await.unwrap().is_some());
    s.tb.delete_namespace(&s.client, &s.ns).await;
}

/// A BootstrapKubeconfig made for another API server (a sandbox restarted on a new
/// port keeps its etcd data) is replaced, saying so, instead of reused: BYOH issued the old one
/// for the old server and never issues it again. A second run reuses the fresh one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hosts_add_replaces_a_bootstrap_kubeconfig_made_for_another_api_server() {
    let s = Story::start("onboard-stale").await;
    let bk = ar(
        "infrastructure.cluster.x-k8s.io",
        "v1beta1",
        "BootstrapKubeconfig",
        "bootstrapkubeconfigs",
    );
    let mine: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(&s.tb.kubeconfig).unwrap()).unwrap();
    let ca = mine["clusters"][0]["cluster"]["certificate-authority-data"].clone();
    let stale = "https://127.0.0.1:1";
    apply(
        &s.client,
        &s.ns,
        bk.clone(),
        json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
            "kind": "BootstrapKubeconfig",
            "metadata": {"name": "stale1"},
            "spec": {"apiserver": stale, "certificate-authority-data": ca},
        }),
    )
    .await;
    // BYOH issues it for the old server, as it did before the restart.
    eventually(
        "BYOH to issue the planted one",
        Duration::from_secs(60),
        async || {
            s.api(&bk)
                .get("stale1")
                .await
                .is_ok_and(|o| o.data.pointer("/status/bootstrapKubeconfigData").is_some())
        },
    )
    .await;
    let old_uid = s.get(&bk, "stale1").await.uid();

    let o = s.ok(&["hosts", "add", "stale1"]);
    assert_contains(
        &err(&o),
        &format!(
            "replacing the bootstrap kubeconfig of stale1: it names the API server {stale}, not https://"
        ),
    );
    let issued: Value =
        serde_saphyr::from_str(&testbed::agent::bootstrap_kubeconfig_in(&out(&o)).unwrap())
            .unwrap();
    let server = issued["clusters"][0]["cluster"]["server"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(server, stale, "the printed kubeconfig names the old server");
    let now = s.get(&bk, "stale1").await;
    assert_eq!(now.data["spec"]["apiserver"], server.as_str());
    assert_ne!(now.uid(), old_uid, "replaced, not patched");

    // Idempotent: the fresh one is reused, without a word about replacing.
    let o = s.ok(&["hosts", "add", "stale1"]);
    assert_lacks(&err(&o), "replacing");
    assert_eq!(s.get(&bk, "stale1").await.uid(), now.uid());
    s.tb.delete_namespace(&s.client, &s.ns).await;
}

/// The cluster-name label of a host: the cluster it serves, `""` while cordoned, none when free.
fn cluster_label(h: &DynamicObject) -> Option<&str> {
    h.labels()
        .get("cluster.x-k8s.io/cluster-name")
        .map(String::as_str)
}

/// The real BYOH v0.5.0 agent, started exactly as `hosts add` prints it (the
/// bootstrap kubeconfig at the path it names), on a host of its own (hostname, network, `/etc`;
/// `testbed::agent`). Its CSR (as the bootstrap token's user) is approved by the real BYOH
/// manager and signed by kube-controller-manager; it registers the ByoHost with upstream's
/// labels, host facts and conditions, as `byoh:host:<name>`; `kubectl capi hosts` shows it
/// Available.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_agent_registers_a_host_from_what_hosts_add_prints() {
    let s = Story::start("real-agent").await;
    let ns = &s.ns;
    let host = "real-01";
    // Pre-installed (as `kamaji create --preinstalled-hosts` expects): the printed command
    // carries --skip-installation, and the real agent takes it.
    let o = s.ok(&words(&format!(
        "hosts add {host} --label role=real --preinstalled"
    )));
    let command = testbed::agent::command_in(&err(&o))
        .unwrap_or_else(|| panic!("no agent command in:\n{}", err(&o)));
    assert_eq!(
        command[..3],
        [
            "byoh-hostagent",
            "--bootstrap-kubeconfig",
            testbed::agent::BOOTSTRAP_KUBECONFIG
        ]
    );
    assert!(
        command
            .windows(2)
            .any(|w| w == ["--namespace", ns.as_str()]),
        "{command:?}"
    );
    assert_eq!(
        command.last().map(String::as_str),
        Some("--skip-installation")
    );
    // The printed script on a host that lacks a kernel module: its preflight names it and the
    // agent never starts (no ByoHost), whatever the admin pasted.
    let bad = "real-00";
    let o0 = s.ok(&words(&format!("hosts add {bad} --preinstalled")));
    let image = testbed::agent::HostImage {
        missing_module: Some("br_netfilter".into()),
        ..Default::default()
    };
    let mut refused = testbed::agent::HostAgent::start_script(
        s.tb,
        bad,
        testbed::agent::next_ip(),
        &out(&o0),
        testbed::agent::Kubelet::Joins,
        &image,
    )
    .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while refused.running() {
        assert!(
            std::time::Instant::now() < deadline,
            "the printed script did not stop at its preflight:\n{}",
            refused.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let log = refused.log_tail();
    assert_contains(
        &log,
        "FAIL module br_netfilter: not loaded: modprobe br_netfilter",
    );
    assert_contains(
        &log,
        "real-00 failed its preflight (above): fix it and run this again; the agent was not started",
    );

    // Started as `capi-testbed host` does in the sandbox: the printed script through the
    // runner's inbox, served here (testbed::agent::inbox), on a host with kubelet v1.35.4.
    let dir = tempfile::tempdir().unwrap();
    let (d, script) = (dir.path().to_path_buf(), out(&o));
    let request = std::thread::spawn(move || {
        testbed::agent::inbox::request(&d, host, &script, Some("v1.35.4"))
    });
    let mut agents = Vec::new();
    while !request.is_finished() {
        testbed::agent::inbox::serve(s.tb, dir.path(), &mut agents);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let started = request
        .join()
        .unwrap()
        .expect("the runner started the agent");
    let mut agent = agents.pop().expect("the agent the runner started");
    let ip = started
        .split(['(', ')'])
        .nth(1)
        .unwrap_or_else(|| panic!("no address in {started:?}"))
        .to_string();
    assert!(started.starts_with(&format!("host {host} (")), "{started}");
    let hosts = ar(
        "infrastructure.cluster.x-k8s.io",
        "v1beta1",
        "ByoHost",
        "byohosts",
    );
    let api = s.api(&hosts);
    let registered = testbed::fixtures::poll::wait_for(
        "the real agent's ByoHost with its facts and conditions",
        Duration::from_secs(90),
        || format!("--- agent log ---\n{}", agent.log_tail()),
        || async {
            let h = api.get_opt(host).await.ok()??;
            let v = serde_json::to_value(&h).ok()?;
            let waiting = v["status"]["conditions"].as_array()?.iter().any(|c| {
                c["type"] == "K8sNodeBootstrapSucceeded"
                    && c["status"] == "False"
                    && c["reason"] == "WaitingForMachineRefToBeAssigned"
            });
            (waiting && v["status"]["hostinfo"]["osname"] == "linux").then_some(v)
        },
    )
    .await;
    assert!(agent.running(), "{}", agent.log_tail());
    assert_eq!(registered["metadata"]["labels"]["role"], "real");
    assert_eq!(
        registered["metadata"]["labels"]["capi-kamaji.io/kubernetes-version"], "v1.35.4",
        "the script read the host's kubelet and the agent labelled its ByoHost"
    );
    assert!(
        std::fs::read_to_string(agent.log.clone())
            .unwrap()
            .contains("preflight: real-01 is ready for byoh-hostagent"),
        "{}",
        agent.log_tail()
    );
    assert!(
        s.api(&ar(
            "infrastructure.cluster.x-k8s.io",
            "v1beta1",
            "ByoHost",
            "byohosts"
        ))
        .get_opt(bad)
        .await
        .unwrap()
        .is_none(),
        "the host that failed its preflight registered"
    );
    let info = &registered["status"]["hostinfo"];
    assert_eq!(
        info["architecture"],
        std::env::consts::ARCH.replace("x86_64", "amd64")
    );
    assert_eq!(
        info["osimage"], "Ubuntu 20.04.6 LTS",
        "read from the host's /etc/os-release (testbed::agent::OS_RELEASE)"
    );
    let nics = registered["status"]["network"].as_array().unwrap();
    let eth0 = nics
        .iter()
        .find(|n| n["networkInterfaceName"] == "eth0")
        .unwrap_or_else(|| panic!("{nics:?}"));
    assert!(
        eth0["ipAddrs"]
            .as_array()
            .is_some_and(|a| a.contains(&json!(format!("{ip}/24")))),
        "{eth0}"
    );
    assert_eq!(eth0["isDefault"], true, "{nics:?}");
    // Registered: a new token for it is refused, naming its state; --force issues one.
    let o = s.fails(2, &["hosts", "add", host]);
    assert_contains(
        &error_line(&o),
        &format!("{host} is already registered in {ns} (ByoHost, Available); no token was issued"),
    );
    s.ok(&["hosts", "add", host, "--force", "--preinstalled"]);

    // Its credentials: a certificate from the approved, signed CSR, for byoh:host:<name>.
    let csr: Value = serde_json::to_value(
        Api::<k8s_openapi::api::certificates::v1::CertificateSigningRequest>::all(s.client.clone())
            .get(&format!("byoh-csr-{host}"))
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        csr["spec"]["signerName"],
        "kubernetes.io/kube-apiserver-client"
    );
    assert!(
        csr["spec"]["username"]
            .as_str()
            .is_some_and(|u| u.starts_with("system:bootstrap:")),
        "{csr}"
    );
    assert!(csr["status"]["certificate"].is_string(), "signed: {csr}");
    let who = Command::new("kubectl")
        .args([
            "auth",
            "whoami",
            "-o",
            "jsonpath={.status.userInfo.username}",
            "--kubeconfig",
        ])
        .arg(agent.kubeconfig())
        .env_remove("KUBECONFIG")
        .output()
        .unwrap();
    assert_eq!(
        assert_ok(&who, "kubectl auth whoami as the agent"),
        format!("byoh:host:{host}")
    );

    // The CLI sees it as any host.
    let o = s.ok(&["hosts", "-o", "json"]);
    let list: Value = serde_json::from_str(&out(&o)).unwrap();
    let row = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == host)
        .unwrap_or_else(|| panic!("{list}"));
    assert_eq!(row["state"], "Available", "{row}");
}

/// `doctor` names a host whose bootstrap the real BYOH v0.5.0 agent retries forever: after a
/// failed bootstrap it marks the host `CloudInitExecutionFailed`, records a Warning Event
/// `BootstrapK8sNodeFailed` (client-go counts its repeats), resets the node and tries again
/// (`HostReconciler.reconcileNormal`, `agent/reconciler/host_reconciler.go`). Here the machine's
/// bootstrap data has a command that exits 1, as a `kubeadm join` to a control plane that does
/// not answer does; the agent, its cloud-init executor and its retries are all real.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_names_a_host_whose_bootstrap_keeps_failing() {
    let s = Story::start("loop").await;
    let ns = &s.ns;
    let players = s.cluster_on("c1", 0, 1, 0).await;
    let host = format!("{ns}-w01");
    let failing = "#cloud-config\nruncmd:\n  - echo 'kubeadm join: the control plane 192.0.2.1:6443 does not answer' >&2; exit 1\n";
    s.api(&ar("", "v1", "Secret", "secrets"))
        .patch(
            "c1-md-0-bootstrap",
            &PatchParams::default(),
            &Patch::Merge(json!({"stringData": {"value": failing}})),
        )
        .await
        .unwrap();
    s.api(&md_ar())
        .patch(
            "c1-md-0",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 1}})),
        )
        .await
        .unwrap();

    let doctor = || {
        let o = s.run(&["doctor", "--only", "workers", "-o", "json"]);
        let report: Value = serde_json::from_str(&out(&o))
            .unwrap_or_else(|e| panic!("doctor -o json: {e}\n{}\n{}", out(&o), err(&o)));
        (o, report)
    };
    let looping = |report: &Value| {
        report["findings"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|f| f["check"] == "HostBootstrapLoop")
            .cloned()
    };
    eventually(
        "doctor to name the looping host",
        Duration::from_secs(120),
        async || looping(&doctor().1).is_some(),
    )
    .await;
    let (o, report) = doctor();
    exits(&o, 1);
    let f = looping(&report).unwrap();
    assert_eq!(
        (&f["severity"], &f["object"]),
        (
            &json!("Error"),
            &json!({"kind": "ByoHost", "namespace": ns, "name": host})
        ),
        "{report:#}"
    );
    let cause = f["cause"].as_str().unwrap();
    for says in [
        "its agent failed ",
        "BootstrapK8sNodeFailed \"k8s Node Bootstrap failed\", condition CloudInitExecutionFailed",
        "resets the host and retries forever",
    ] {
        assert_contains(cause, says);
    }
    assert_eq!(
        f["fix"],
        format!(
            "kubectl capi hosts describe {host} -n {ns} (the failing command's output is in byoh-hostagent's log on the host); to stop it, move its machine to a spare host and cordon it: kubectl capi hosts drain {host} -n {ns} (kubectl capi hosts retire {host} -n {ns} --force if its agent is gone)"
        )
    );
    // Named once: as looping, not as a plain failure too.
    assert!(
        !report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["check"] == "HostFailed"),
        "{report:#}"
    );
    // The loop is the agent's own: it reset the node after each failed try.
    let agent = &players._agents[0];
    let resets = agent
        .commands()
        .iter()
        .filter(|c| c.as_str() == "kubeadm reset --force")
        .count();
    assert!(resets >= 2, "{:?}\n{}", agent.commands(), agent.log_tail());
    // For people: one row, naming the host.
    let o = s.run(&["doctor", "--only", "workers"]);
    exits(&o, 1);
    assert!(
        out(&o)
            .lines()
            .any(|l| l.contains(&format!("ByoHost/{ns}/{host}")) && l.contains("retries forever")),
        "{}",
        out(&o)
    );
}
