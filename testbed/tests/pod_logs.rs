//! `pods/log` of an image pod (`testbed::pods::image`): the real `kubectl logs`, through the
//! real API server, reads a container's stdout and stderr from the SIMULATED kubelet's API, with
//! `--timestamps`, `--since`, `--tail` and `-f`, as on a cluster.

use std::io::{BufRead, BufReader};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::api::{Api, PostParams};
use serde_json::json;
use testbed::{Options, Profile, Testbed};

fn kubectl(tb: &Testbed, args: &[&str]) -> Output {
    Command::new(testbed::fixtures::run::kubectl_bin())
        .args(args)
        .arg("--kubeconfig")
        .arg(&tb.kubeconfig)
        .env_remove("KUBECONFIG")
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The `tick N` numbers of `log`'s lines, in order.
fn ticks(log: &str) -> Vec<u64> {
    log.lines()
        .filter_map(|l| l.rsplit_once("tick ").and_then(|(_, n)| n.parse().ok()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_logs_reads_an_image_pod_through_the_api_server() {
    let tb = Testbed::start(Options {
        profile: Profile::Bare,
        images: true,
        ..Default::default()
    })
    .await
    .unwrap();
    let registry = tb.registry.clone().expect("the registry");
    let busybox = testbed::images::NODE_IMAGES
        .iter()
        .find(|u| u.release == testbed::node::BUSYBOX_IMAGE)
        .unwrap();
    let pushed = testbed::images::push(&registry, &[busybox]).await.unwrap();
    let image = pushed[0].image.clone();
    let client = tb.client().await;

    let ns = "logs-test";
    Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap(),
        )
        .await
        .unwrap();
    // A line on each stream, then one a second (the sleeps are the container's, not the test's).
    let script = "echo 'early on stdout'; echo 'early on stderr' >&2; i=0; \
                  while true; do busybox sleep 1; i=$((i+1)); echo \"tick $i\"; done";
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "talker", "namespace": ns},
        "spec": {"automountServiceAccountToken": false, "containers": [{
            "name": "talk", "image": image,
            "command": ["/bin/busybox", "sh", "-c", script]}]}
    }))
    .unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    pods.create(&PostParams::default(), &pod).await.unwrap();

    // The Node names the kubelet API's port, where pods/log goes.
    let nodes: Api<Node> = Api::all(client.clone());
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let node = nodes.get_opt(testbed::pods::image::NODE).await.unwrap();
        let port = node
            .and_then(|n| n.status)
            .and_then(|s| s.daemon_endpoints)
            .and_then(|d| d.kubelet_endpoint)
            .map_or(0, |e| e.port);
        if port > 0 {
            break;
        }
        assert!(Instant::now() < deadline, "no kubelet endpoint on the Node");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // Every line, from both streams, once the container has ticked past 6.
    let deadline = Instant::now() + Duration::from_secs(120);
    let log = loop {
        let o = kubectl(&tb, &["logs", "-n", ns, "talker"]);
        let out = String::from_utf8_lossy(&o.stdout).to_string();
        if o.status.success() && ticks(&out).last().is_some_and(|n| *n >= 6) {
            break out;
        }
        assert!(Instant::now() < deadline, "no ticks: {}", text(&o));
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    // The two streams are read apart (as containerd reads a container's two pipes), so lines
    // written within the same instant to each may land in either order.
    let mut early: Vec<&str> = log.lines().take(2).collect();
    early.sort_unstable();
    assert_eq!(early, ["early on stderr", "early on stdout"], "{log}");
    let all = ticks(&log);
    assert_eq!(all, (1..=all.len() as u64).collect::<Vec<_>>(), "{log}");

    // --timestamps: each line after its time, in order, all of them recent.
    let o = kubectl(&tb, &["logs", "-n", ns, "talker", "--timestamps"]);
    assert!(o.status.success(), "{}", text(&o));
    let stamped = String::from_utf8_lossy(&o.stdout).to_string();
    let now = jiff::Timestamp::now();
    let mut last = None;
    for line in stamped.lines() {
        let (t, rest) = line.split_once(' ').unwrap_or_else(|| panic!("{line}"));
        assert_eq!(t.len(), "2026-01-02T10:00:00.000000000Z".len(), "{line}");
        let t: jiff::Timestamp = t.parse().unwrap_or_else(|e| panic!("{line}: {e}"));
        assert!(
            now.duration_since(t) < jiff::SignedDuration::from_secs(300),
            "{line}"
        );
        assert!(last.is_none_or(|l| l <= t), "in order: {stamped}");
        last = Some(t);
        assert!(!rest.is_empty(), "{line}");
    }
    assert!(stamped.contains(" early on stderr\n"), "{stamped}");

    // --since: the early lines (six seconds and more before the last tick) are left out, the
    // last ticks are not.
    let o = kubectl(&tb, &["logs", "-n", ns, "talker", "--since=3s"]);
    assert!(o.status.success(), "{}", text(&o));
    let recent = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(!recent.contains("early"), "{recent}");
    assert!(!ticks(&recent).is_empty(), "{recent}");
    assert!(ticks(&recent)[0] > 1, "{recent}");

    // --tail, and --limit-bytes.
    let o = kubectl(&tb, &["logs", "-n", ns, "talker", "--tail=2"]);
    assert_eq!(
        ticks(&String::from_utf8_lossy(&o.stdout)).len(),
        2,
        "{}",
        text(&o)
    );
    let o = kubectl(&tb, &["logs", "-n", ns, "talker", "--limit-bytes=5"]);
    assert_eq!(String::from_utf8_lossy(&o.stdout), "early", "{}", text(&o));

    // -f: the lines written after it started arrive as they are written.
    let mut follow = Command::new(testbed::fixtures::run::kubectl_bin())
        .args(["logs", "-f", "--tail=1", "-n", ns, "talker", "--kubeconfig"])
        .arg(&tb.kubeconfig)
        .env_remove("KUBECONFIG")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let out = follow.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let first = rx.recv_timeout(Duration::from_secs(30)).unwrap();
    let from = ticks(&first)[0];
    let later = loop {
        let line = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("a line written after kubectl logs -f started");
        let n = ticks(&line)[0];
        if n >= from + 2 {
            break n;
        }
    };
    assert!(later >= from + 2);
    let _ = follow.kill();
    let _ = follow.wait();

    // A container the pod does not have, as the kubelet answers it.
    let o = kubectl(&tb, &["logs", "-n", ns, "talker", "-c", "nope"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("container nope is not valid"),
        "{}",
        text(&o)
    );
}
