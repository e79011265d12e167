//! `make sandbox` / `make sandbox-down` as a user runs them: the runner in the background,
//! `kubectl api-resources` through the real kubectl, and nothing left afterwards.

use std::path::Path;
use std::process::{Command, Stdio};
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

#[test]
fn sandbox_up_serves_the_upstream_kinds_and_down_leaves_nothing() {
    let bin = env!("CARGO_BIN_EXE_capi-testbed");
    let dir = std::env::temp_dir().join(format!("capi-sandbox-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let dir_s = dir.display().to_string();
    let mut up = Command::new(bin)
        .args(["up", "--dir", &dir_s])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(180);
    while !dir.join("ready").exists() {
        assert!(
            up.try_wait().unwrap().is_none(),
            "sandbox runner exited early"
        );
        assert!(Instant::now() < deadline, "sandbox not ready in time");
        std::thread::sleep(Duration::from_millis(200));
    }
    let out = Command::new("kubectl")
        .args(["api-resources", "--no-headers"])
        .env("KUBECONFIG", dir.join("kubeconfig"))
        .output()
        .unwrap();
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

    let down = Command::new(bin)
        .args(["down", "--dir", &dir_s])
        .output()
        .unwrap();
    assert!(down.status.success());
    let _ = up.wait();
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
