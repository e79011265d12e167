//! `preflight.sh` run by `/bin/sh` over a fake root (`PREFLIGHT_ROOT`): all checks pass on a
//! ready host, and each check, broken alone, fails alone with its fix.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::preflight_script;

const HOST: &str = "node-01";

/// A host ready for the agent, under a directory of its own.
struct FakeRoot {
    dir: PathBuf,
    /// Keeps containerd's socket bound.
    _socket: Option<std::os::unix::net::UnixListener>,
}

impl FakeRoot {
    fn ready(name: &str) -> FakeRoot {
        let dir = std::env::temp_dir().join(format!(
            "capi-kamaji-preflight-{}-{name}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        let put = |rel: &str, text: &str| {
            let p = dir.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        for m in ["overlay", "br_netfilter"] {
            std::fs::create_dir_all(dir.join("sys/module").join(m)).unwrap();
        }
        put("proc/sys/net/ipv4/ip_forward", "1\n");
        put("proc/sys/net/bridge/bridge-nf-call-iptables", "1\n");
        put(
            "proc/swaps",
            "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n",
        );
        // sshd on 22 (0x0016) listens; nothing on 10250.
        put(
            "proc/net/tcp",
            "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1\n",
        );
        put("proc/sys/kernel/hostname", &format!("{HOST}\n"));
        let sock = dir.join("run/containerd/containerd.sock");
        std::fs::create_dir_all(sock.parent().unwrap()).unwrap();
        let socket = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        FakeRoot {
            dir,
            _socket: Some(socket),
        }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.join(rel)
    }

    /// Runs the script issued `issued_ago` seconds ago: exit code and stdout.
    fn run(&self, issued_ago: i64, args: &[&str]) -> (i32, String) {
        let now = jiff::Timestamp::now().as_second();
        let text = preflight_script(HOST, "pool-a", now - issued_ago).unwrap();
        self.run_text(&text, args, None)
    }

    /// Runs `text` with `args`, with `path` as its PATH when given: exit code and output.
    fn run_text(&self, text: &str, args: &[&str], path: Option<&Path>) -> (i32, String) {
        let script = self.path("preflight.sh");
        std::fs::write(&script, text).unwrap();
        let mut cmd = Command::new("/bin/sh");
        cmd.arg(&script).args(args).env("PREFLIGHT_ROOT", &self.dir);
        if let Some(p) = path {
            cmd.env("PATH", p);
        }
        let out = cmd.output().unwrap();
        (
            out.status.code().unwrap_or(-1),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        )
    }
}

impl Drop for FakeRoot {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn write(p: &Path, text: &str) {
    std::fs::write(p, text).unwrap();
}

/// The one failed check's line, asserting it is the only one and the script exits 1.
#[track_caller]
fn fails_alone(r: (i32, String), check: &str, fix: &str) {
    let (code, out) = r;
    assert_eq!(code, 1, "{out}");
    let fails: Vec<&str> = out.lines().filter(|l| l.starts_with("FAIL ")).collect();
    assert_eq!(fails.len(), 1, "{out}");
    assert!(fails[0].starts_with(&format!("FAIL {check}: ")), "{out}");
    assert!(fails[0].contains(fix), "{out}");
}

#[test]
fn a_ready_host_passes() {
    let root = FakeRoot::ready("ready");
    let (code, out) = root.run(60, &[]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("node-01 is ready for byoh-hostagent"), "{out}");
}

#[test]
fn each_check_fails_alone_with_its_fix() {
    type Break = fn(&FakeRoot);
    let cases: [(&str, Break, &str, &str); 7] = [
        (
            "overlay",
            |r| std::fs::remove_dir(r.path("sys/module/overlay")).unwrap(),
            "module overlay",
            "modprobe overlay",
        ),
        (
            "br_netfilter",
            |r| std::fs::remove_dir(r.path("sys/module/br_netfilter")).unwrap(),
            "module br_netfilter",
            "modprobe br_netfilter",
        ),
        (
            "forward",
            |r| write(&r.path("proc/sys/net/ipv4/ip_forward"), "0\n"),
            "sysctl net.ipv4.ip_forward",
            "sysctl -w net.ipv4.ip_forward=1",
        ),
        (
            "bridge",
            |r| {
                std::fs::remove_file(r.path("proc/sys/net/bridge/bridge-nf-call-iptables")).unwrap()
            },
            "sysctl net.bridge.bridge-nf-call-iptables",
            "sysctl -w net.bridge.bridge-nf-call-iptables=1",
        ),
        (
            "swap",
            |r| {
                let p = r.path("proc/swaps");
                let mut s = std::fs::read_to_string(&p).unwrap();
                s.push_str("/swap.img\tfile\t2097148\t0\t-2\n");
                write(&p, &s);
            },
            "swap",
            "swapoff -a",
        ),
        (
            "containerd",
            |r| std::fs::remove_file(r.path("run/containerd/containerd.sock")).unwrap(),
            "container runtime",
            "systemctl enable --now containerd",
        ),
        (
            "port",
            |r| {
                let p = r.path("proc/net/tcp");
                let mut s = std::fs::read_to_string(&p).unwrap();
                s.push_str("   1: 00000000:280A 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2 1\n");
                write(&p, &s);
            },
            "port 10250",
            "kubeadm reset -f",
        ),
    ];
    for (name, break_it, check, fix) in cases {
        let root = FakeRoot::ready(name);
        break_it(&root);
        fails_alone(root.run(60, &[]), check, fix);
    }
}

#[test]
fn hostname_clock_and_token() {
    let root = FakeRoot::ready("hostname");
    write(&root.path("proc/sys/kernel/hostname"), "other\n");
    fails_alone(
        root.run(60, &[]),
        "hostname",
        "hostnamectl set-hostname node-01",
    );
    let root = FakeRoot::ready("clock");
    // Issued an hour from now, as this host's clock sees it: the clock is behind.
    fails_alone(root.run(-3600, &[]), "clock", "timedatectl set-ntp true");
    fails_alone(
        root.run(31 * 60, &[]),
        "bootstrap token",
        "kubectl capi hosts add node-01 -n pool-a",
    );
}

#[test]
fn ipvs_adds_its_modules_and_unknown_arguments_are_refused() {
    let root = FakeRoot::ready("ipvs");
    let (code, out) = root.run(60, &["--ipvs"]);
    assert_eq!(code, 1, "{out}");
    let fails: Vec<&str> = out.lines().filter(|l| l.starts_with("FAIL ")).collect();
    assert_eq!(fails.len(), 5, "{out}");
    assert!(fails[0].contains("module ip_vs: not loaded (kube-proxy's IPVS mode needs it)"));
    for m in ["ip_vs", "ip_vs_rr", "ip_vs_wrr", "ip_vs_sh", "nf_conntrack"] {
        std::fs::create_dir_all(root.path("sys/module").join(m)).unwrap();
    }
    assert_eq!(root.run(60, &["--ipvs"]).0, 0);
    let (code, out) = root.run(60, &["--ipv5"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("unknown argument --ipv5"), "{out}");
}

#[test]
fn the_check_before_a_token_passes_at_any_age_and_reports_the_kubernetes_installed() {
    use std::os::unix::fs::PermissionsExt;
    let root = FakeRoot::ready("check");
    // A host image with Kubernetes v1.35.4: the kubelet and kubeadm on the PATH.
    let bin = root.path("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for (name, says) in [("kubelet", "Kubernetes v1.35.4"), ("kubeadm", "v1.35.4")] {
        let p = bin.join(name);
        write(&p, &format!("#!/bin/sh\necho '{says}'\n"));
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let path = format!("{}:/usr/bin:/bin", bin.display());
    // Made a day ago, a script with a token would call it expired; the check has none.
    let day_ago = jiff::Timestamp::now().as_second() - 86_400;
    let text = super::check_script(HOST, "pool-a", day_ago).unwrap();
    let (code, out) = root.run_text(&text, &[], Some(Path::new(&path)));
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("installed: kubelet v1.35.4, kubeadm v1.35.4"),
        "{out}"
    );
    // Nothing installed: said, not failed.
    let (code, out) = root.run_text(&text, &[], Some(Path::new("/usr/bin:/bin")));
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("no kubelet or kubeadm installed"), "{out}");
    // The same age with a token: expired.
    let (code, out) = root.run(86_400, &[]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("FAIL bootstrap token"), "{out}");
}

/// The script `hosts add` prints for one host, run by a real `sh` as root would run it: over a
/// host that fails its preflight it stops before writing the kubeconfig or starting the agent;
/// over a ready host it writes the kubeconfig (0600, as issued, quotes and all) and starts the
/// agent with the host's kubelet version as a label.
#[test]
fn the_printed_host_script_runs_the_preflight_first() {
    use std::os::unix::fs::PermissionsExt;
    let root = FakeRoot::ready("host-script");
    let bin = root.path("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let started = root.path("agent-args");
    let exe = |name: &str, body: &str| {
        let p = bin.join(name);
        write(&p, &format!("#!/bin/sh\n{body}\n"));
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    exe(
        "byoh-hostagent",
        &format!(
            "for a in \"$@\"; do printf '%s\\n' \"$a\"; done > '{}'",
            started.display()
        ),
    );
    let path = format!("{}:/usr/bin:/bin", bin.display());
    let conf = root.path("etc/byoh/bootstrap-kubeconfig.conf");
    let conf_s = conf.display().to_string();
    let kubeconfig = "apiVersion: v1\nkind: Config\n# it's 'quoted' $(touch /tmp/x)\n";
    let command = super::agent_command(&conf_s, "pool-a", &[], true).unwrap();
    let now = jiff::Timestamp::now().as_second();
    let text =
        super::host_script(HOST, "pool-a", &conf_s, kubeconfig, now, &command, true).unwrap();

    std::fs::remove_dir(root.path("sys/module/br_netfilter")).unwrap();
    let (code, out) = root.run_text(&text, &[], Some(Path::new(&path)));
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("FAIL module br_netfilter"), "{out}");
    assert!(out.contains("the agent was not started"), "{out}");
    assert!(!started.exists() && !conf.exists(), "{out}");

    std::fs::create_dir(root.path("sys/module/br_netfilter")).unwrap();
    exe("kubelet", "echo 'Kubernetes v1.35.4'");
    let (code, out) = root.run_text(&text, &[], Some(Path::new(&path)));
    assert_eq!(code, 0, "{out}");
    assert_eq!(std::fs::read_to_string(&conf).unwrap(), kubeconfig);
    let mode = std::fs::metadata(&conf).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    let args = std::fs::read_to_string(&started).unwrap();
    let args: Vec<&str> = args.lines().collect();
    assert_eq!(
        args,
        [
            "--bootstrap-kubeconfig",
            conf_s.as_str(),
            "--namespace",
            "pool-a",
            "--skip-installation",
            "--label",
            "capi-kamaji.io/kubernetes-version=v1.35.4",
        ]
    );

    // A distribution's build suffix is dropped (a label value cannot hold `+`).
    exe("kubelet", "echo 'Kubernetes v1.35.4+k3s1'");
    std::fs::remove_file(&started).unwrap();
    let (code, out) = root.run_text(&text, &[], Some(Path::new(&path)));
    assert_eq!(code, 0, "{out}");
    let args = std::fs::read_to_string(&started).unwrap();
    assert!(args.ends_with("v1.35.4\n"), "{args}");
    // A kubelet that says something else than a version: no label.
    exe("kubelet", "echo 'Kubernetes $(touch x) v1;rm'");
    root.run_text(&text, &[], Some(Path::new(&path)));
    let args = std::fs::read_to_string(&started).unwrap();
    assert!(!args.contains("--label"), "{args}");
}
