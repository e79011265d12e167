//! `make sandbox` / `make sandbox-down` as a user runs them: the runner in the background,
//! `kubectl api-resources` through the real kubectl, and nothing left afterwards.

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Processes whose command line mentions `needle` (our sandbox dir is unique per test).
fn processes_mentioning(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if !name.chars().all(|c| c.is_ascii_digit()) {
            continue;
        }
        if let Ok(cmd) = std::fs::read(e.path().join("cmdline")) {
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            if cmd.contains(needle) {
                found.push(format!("{name}: {cmd}"));
            }
        }
    }
    found
}

/// A running `capi-testbed up`, killed if the test fails before it stops it: a failed
/// assertion must not leave a sandbox running on the machine.
struct Runner(Child);

impl Drop for Runner {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Starts `capi-testbed up` in `dir` as `make sandbox` does (its stderr into `dir/sandbox.log`,
/// not a terminal) and waits for `dir/ready`.
fn up(bin: &str, dir: &Path) -> Runner {
    up_with(bin, dir, &[])
}

/// [`up`] with more flags (`--day0`).
fn up_with(bin: &str, dir: &Path, flags: &[&str]) -> Runner {
    let log = std::fs::File::create(dir.join("sandbox.log")).unwrap();
    let mut up = Runner(
        Command::new(bin)
            .args(["up", "--dir", &dir.display().to_string()])
            .args(flags)
            .env_remove("NO_COLOR")
            .env_remove("TESTBED_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(180);
    while !dir.join("ready").exists() {
        let log = std::fs::read_to_string(dir.join("sandbox.log")).unwrap_or_default();
        assert!(
            up.0.try_wait().unwrap().is_none(),
            "sandbox runner exited early:\n{log}"
        );
        assert!(
            Instant::now() < deadline,
            "sandbox not ready in time:\n{log}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    up
}

/// `capi-testbed down`, then waits for the runner to end.
fn down(bin: &str, dir: &Path, mut up: Runner) {
    let down = Command::new(bin)
        .args(["down", "--dir", &dir.display().to_string()])
        .output()
        .unwrap();
    assert!(down.status.success());
    let _ = up.0.wait();
}

/// Runs the real kubectl against the sandbox in `dir`.
fn kubectl(dir: &Path, args: &[&str]) -> Output {
    Command::new("kubectl")
        .args(args)
        .env("KUBECONFIG", dir.join("kubeconfig"))
        .output()
        .unwrap()
}

#[test]
fn sandbox_up_serves_the_upstream_kinds_and_down_leaves_nothing() {
    let bin = env!("CARGO_BIN_EXE_capi-testbed");
    let dir = std::env::temp_dir().join(format!("capi-sandbox-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let dir_s = dir.display().to_string();
    let first = up(bin, &dir);
    let out = kubectl(&dir, &["api-resources", "--no-headers"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    for kind in ["clusters", "machines", "byohosts", "tenantcontrolplanes"] {
        assert!(
            text.lines()
                .any(|l| l.split_whitespace().next() == Some(kind)),
            "{kind} missing from kubectl api-resources:\n{text}"
        );
    }
    assert!(
        processes_mentioning(&dir_s).len() >= 3,
        "etcd, apiserver and KCM run"
    );
    // An object written against this sandbox's API server (as `hosts add` writes a
    // BootstrapKubeconfig naming its URL) must not outlive it.
    let out = kubectl(
        &dir,
        &[
            "create",
            "configmap",
            "from-the-last-sandbox",
            "-n",
            "default",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let second_up_refused = Command::new(bin)
        .args(["up", "--dir", &dir_s])
        .output()
        .unwrap();
    assert_eq!(second_up_refused.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&second_up_refused.stderr)
            .contains("a sandbox is already running in"),
        "{}",
        String::from_utf8_lossy(&second_up_refused.stderr)
    );
    down(bin, &dir, first);

    // Its logs to a file carry no colour codes (`make demo > file` showed them).
    let log = std::fs::read_to_string(dir.join("sandbox.log")).unwrap();
    assert!(log.contains("kube-apiserver ready at"), "{log}");
    assert!(
        !log.contains("\x1b["),
        "colour codes in a redirected log:\n{log:?}"
    );

    // `make sandbox-down` then `make sandbox` starts clean, on a new port.
    let again = up(bin, &dir);
    let out = kubectl(
        &dir,
        &["get", "configmap", "from-the-last-sandbox", "-n", "default"],
    );
    assert!(
        !out.status.success() && String::from_utf8_lossy(&out.stderr).contains("NotFound"),
        "the last sandbox's data is still there: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    down(bin, &dir, again);

    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left = processes_mentioning(&dir_s);
        if left.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "processes left behind: {left:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(!Path::new(&dir.join("pid")).exists());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Processes whose root (`/proc/PID/root`: an image pod's container is chrooted into its image)
/// is under `dir`.
fn chrooted_under(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if name.chars().all(|c| c.is_ascii_digit())
            && let Ok(root) = std::fs::read_link(e.path().join("root"))
            && root.starts_with(dir)
        {
            found.push(format!("{name}: {}", root.display()));
        }
    }
    found
}

/// A runner killed by a signal (SIGKILL: no clean-up of its own runs) takes the containers of
/// its SIMULATED image kubelet with it. They run as their pods' users, which clears the
/// parent-death signal; each container's PID namespace is what ends them.
#[test]
fn a_killed_runner_takes_its_image_pods_with_it() {
    let bin = env!("CARGO_BIN_EXE_capi-testbed");
    let dir = std::env::temp_dir().join(format!("capi-sandbox-kill-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut runner = up_with(bin, &dir, &["--day0"]);
    let registry = std::fs::read_to_string(dir.join("registry")).unwrap();
    let deployment = format!(
        r#"{{"apiVersion": "apps/v1", "kind": "Deployment",
  "metadata": {{"name": "proxy", "namespace": "default"}},
  "spec": {{"selector": {{"matchLabels": {{"app": "proxy"}}}},
    "template": {{"metadata": {{"labels": {{"app": "proxy"}}}}, "spec": {{
      "serviceAccountName": "default", "containers": [{{
      "name": "proxy", "image": "{}/kube-rbac-proxy:v0.8.0",
      "args": ["--insecure-listen-address=127.0.0.1:8080", "--upstream=http://127.0.0.1:1/"]}}]}}}}}}}}"#,
        registry.trim()
    );
    let file = dir.join("proxy.json");
    std::fs::write(&file, deployment).unwrap();
    // Its token (kube-rbac-proxy builds its client from it, else it exits) is of the
    // namespace's `default` ServiceAccount, which kube-controller-manager's ServiceAccount
    // controller makes (the kubelet asks again each tick until it exists).
    let out = kubectl(&dir, &["apply", "-f", &file.display().to_string()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let deadline = Instant::now() + Duration::from_secs(90);
    while chrooted_under(&dir).is_empty() {
        assert!(
            Instant::now() < deadline,
            "the image pod's container did not start:\n{}",
            std::fs::read_to_string(dir.join("sandbox.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // Up for good, not crash-looping: the same process a second later.
    let first = chrooted_under(&dir);
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(chrooted_under(&dir), first, "the container keeps running");
    runner.0.kill().unwrap();
    let _ = runner.0.wait();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left = chrooted_under(&dir);
        if left.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "containers outlived their killed runner: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = std::fs::remove_dir_all(&dir);
}
