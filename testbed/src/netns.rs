//! A private network and mount namespace for one upstream process, reached through loopback
//! forwarders.
//!
//! Kamaji v1.0.0 and BYOH v0.5.0 both hard-code their webhook server to port 9443 on every
//! interface (`cmd/manager/cmd.go` and `main.go` upstream), so the two cannot share one network
//! namespace. Kamaji also reaches each tenant API server as `https://<tcp>.<namespace>.svc:<port>`
//! (`internal/utilities/tenant_client.go`), a name only cluster DNS resolves. So Kamaji runs in a
//! namespace of its own, as it would in its own pod: its `/etc/hosts` is a file of ours
//! (bind-mounted in a private mount namespace, the machine's stays untouched) and every port it
//! must reach on the host's loopback (the API server, the datastore, each tenant) is forwarded
//! from the same port on the namespace's loopback. Needs root (as the testbed's CI runs).

use std::collections::BTreeSet;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::{Error, Proc};

pub struct NetSandbox {
    /// `sleep infinity`, holding the namespaces open.
    holder: Proc,
    netns: File,
    hosts: PathBuf,
    names: Mutex<Hosts>,
    forwarded: Mutex<BTreeSet<u16>>,
    forwarded_addrs: Mutex<BTreeSet<std::net::SocketAddrV4>>,
}

/// What the namespace's hosts file says besides `localhost`: names served on its own loopback
/// (the tenant plumbing's, [`NetSandbox::add_host`]) and names of other addresses (the
/// SIMULATED cluster DNS of [`crate::pods::names`], [`NetSandbox::set_mapped`]).
#[derive(Default)]
struct Hosts {
    local: BTreeSet<String>,
    mapped: Vec<(std::net::Ipv4Addr, Vec<String>)>,
}

impl Hosts {
    fn render(&self) -> String {
        let mut text = String::from("127.0.0.1 localhost\n::1 localhost\n");
        for n in &self.local {
            text.push_str(&format!("127.0.0.1 {n}\n"));
        }
        text.push_str(&render_mapped(&self.mapped));
        text
    }
}

/// `hosts(5)` lines: each address, then its names.
pub(crate) fn render_mapped(mapped: &[(std::net::Ipv4Addr, Vec<String>)]) -> String {
    let mut text = String::new();
    for (ip, names) in mapped.iter().filter(|(_, n)| !n.is_empty()) {
        text.push_str(&format!("{ip} {}\n", names.join(" ")));
    }
    text
}

impl NetSandbox {
    pub fn start(dir: &Path, name: &str) -> Result<NetSandbox, Error> {
        // sh brings loopback up, mounts our hosts file and becomes `sleep`.
        let script = r#"set -e; ip link set lo up; mount --bind "$1" /etc/hosts; : > "$2"; exec sleep infinity"#;
        NetSandbox::spawn(dir, name, &[], script, &[])
    }

    /// The namespaces of a real node ([`crate::node`]): network, mount and PID (with its own
    /// `/proc`) and forwarding on. When the holder goes, the
    /// kernel kills every process in the PID namespace, containerd's shims included.
    pub fn start_node(dir: &Path, name: &str) -> Result<NetSandbox, Error> {
        let script = r#"set -e
ip link set lo up
mount --bind "$1" /etc/hosts
echo 1 > /proc/sys/net/ipv4/ip_forward
: > "$2"
exec sleep infinity"#;
        NetSandbox::spawn(
            dir,
            name,
            &[
                "--pid".into(),
                "--fork".into(),
                "--kill-child".into(),
                "--mount-proc".into(),
            ],
            script,
            &[],
        )
    }

    /// `nsenter` arguments that run a program inside a node's namespaces, its PID namespace
    /// included (append the program and its arguments).
    pub fn enter_node_args(&self) -> Result<Vec<String>, Error> {
        // `unshare --fork` holds the namespaces in its child, the PID namespace's first process.
        let pid = self.holder.pid();
        let path = format!("/proc/{pid}/task/{pid}/children");
        let children =
            std::fs::read_to_string(&path).map_err(|e| Error::io(Path::new(&path), e))?;
        let child = children.split_whitespace().next().ok_or_else(|| {
            Error::Start(format!("the node's namespaces have no process ({path})"))
        })?;
        Ok(vec![
            "--target".into(),
            child.to_string(),
            "--net".into(),
            "--mount".into(),
            "--pid".into(),
            "--".into(),
        ])
    }

    /// The namespace of the SIMULATED pod network's router ([`crate::pods::network`]), with
    /// forwarding on in it alone: a sysctl of a namespace of ours, the host's stay as they are.
    pub fn start_router(dir: &Path, name: &str) -> Result<NetSandbox, Error> {
        let script = r#"set -e
ip link set lo up
echo 1 > /proc/sys/net/ipv4/ip_forward
: > "$2"
exec sleep infinity"#;
        NetSandbox::spawn(dir, name, &[], script, &[])
    }

    /// The namespaces of a machine of its own for a host agent (`crate::agent`): also a UTS
    /// namespace with `hostname` as its name, an `eth0` with `ip`/24 and a default route (the
    /// agent reads its default interface from `/proc/net/route`), `/etc` an overlay of the
    /// machine's with writes kept in `etc_upper` (so files a host has, such as its bootstrap
    /// kubeconfig, are placed there), and a private `/run`, `/opt` and `/var/lib` (the
    /// installer scripts write and remove files there).
    pub fn start_host(
        dir: &Path,
        name: &str,
        hostname: &str,
        ip: std::net::Ipv4Addr,
        etc_upper: &Path,
    ) -> Result<NetSandbox, Error> {
        let work = dir.join(format!("{name}-etc-work"));
        std::fs::create_dir_all(&work).map_err(|e| Error::io(&work, e))?;
        std::fs::create_dir_all(etc_upper).map_err(|e| Error::io(etc_upper, e))?;
        let script = r#"set -e
ip link set lo up
ip link add eth0 type veth peer name eth0-peer
ip addr add "$3/24" dev eth0
ip link set eth0 up; ip link set eth0-peer up
ip route add default via "${3%.*}.1" dev eth0 onlink
hostname "$4"
mount -t overlay overlay -o "lowerdir=/etc,upperdir=$5,workdir=$6" /etc
mount --bind "$1" /etc/hosts
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /opt
mount -t tmpfs tmpfs /var/lib
: > "$2"
exec sleep infinity"#;
        NetSandbox::spawn(
            dir,
            name,
            &["--uts".into()],
            script,
            &[
                ip.to_string(),
                hostname.to_string(),
                etc_upper.display().to_string(),
                work.display().to_string(),
            ],
        )
    }

    /// `unshare --net --mount <flags> sh -c <script> sh <hosts file> <ready file> <args>…`: the
    /// script must write the ready file, then exec `sleep infinity` (holding the namespaces).
    fn spawn(
        dir: &Path,
        name: &str,
        flags: &[String],
        script: &str,
        args: &[String],
    ) -> Result<NetSandbox, Error> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let hosts = dir.join(format!("{name}-hosts"));
        let ready = dir.join(format!("{name}-netns-ready"));
        let _ = std::fs::remove_file(&ready);
        std::fs::write(&hosts, Hosts::default().render()).map_err(|e| Error::io(&hosts, e))?;
        let log = dir.join(format!("{name}-netns.log"));
        // `unshare` without --fork execs sh in the new namespaces.
        let mut argv: Vec<String> = vec![
            "--net".into(),
            "--mount".into(),
            "--propagation".into(),
            "private".into(),
        ];
        argv.extend(flags.iter().cloned());
        argv.extend([
            "sh".into(),
            "-c".into(),
            script.into(),
            "sh".into(),
            hosts.display().to_string(),
            ready.display().to_string(),
        ]);
        argv.extend(args.iter().cloned());
        let mut holder = Proc::spawn(&format!("{name}-netns"), Path::new("unshare"), &argv, &log)?;
        let deadline = Instant::now() + Duration::from_secs(10);
        while !ready.exists() {
            if let Some(status) = holder.exited() {
                // Without root, unshare says why (`Operation not permitted`).
                let what = format!("the {name} network namespace (unshare, needs root)");
                return Err(crate::process::exited_error(&what, status, &log));
            }
            if Instant::now() > deadline {
                return Err(Error::Start(format!(
                    "the {name} network namespace did not come up (needs root, unshare and ip); {}:\n{}",
                    log.display(),
                    crate::log_tail(&log)
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let ns_path = PathBuf::from(format!("/proc/{}/ns/net", holder.pid()));
        let netns = File::open(&ns_path).map_err(|e| Error::io(&ns_path, e))?;
        // Where a test finds the namespaces to enter (`nsenter --target`).
        let pid_file = dir.join(format!("{name}-netns.pid"));
        std::fs::write(&pid_file, holder.pid().to_string()).map_err(|e| Error::io(&pid_file, e))?;
        Ok(NetSandbox {
            holder,
            netns,
            hosts,
            names: Mutex::new(Hosts::default()),
            forwarded: Mutex::new(BTreeSet::new()),
            forwarded_addrs: Mutex::new(BTreeSet::new()),
        })
    }

    /// A namespace for a controller of `tb`, with the testbed's API server port forwarded in.
    pub fn for_controller(tb: &crate::Testbed, name: &str) -> Result<NetSandbox, Error> {
        let sandbox = NetSandbox::start(&tb.dir, name)?;
        sandbox.forward(tb.api_port()?)?;
        Ok(sandbox)
    }

    /// The namespace's hosts file (what [`NetSandbox::add_host`] writes), for a container's
    /// `/etc/hosts` as a kubelet manages it.
    pub fn hosts_file(&self) -> &Path {
        &self.hosts
    }

    /// The pid holding the namespaces (`nsenter --target`).
    pub fn pid(&self) -> u32 {
        self.holder.pid()
    }

    /// `nsenter` arguments that run a program inside (append the program and its arguments).
    pub fn enter_args(&self) -> Vec<String> {
        vec![
            "--target".into(),
            self.holder.pid().to_string(),
            "--net".into(),
            "--mount".into(),
            "--".into(),
        ]
    }

    /// Makes `name` resolve to 127.0.0.1 inside (idempotent). The file is rewritten in place:
    /// the bind mount follows the inode, and Go's resolver rereads it when its mtime changes.
    pub fn add_host(&self, name: &str) -> Result<(), Error> {
        let Ok(mut names) = self.names.lock() else {
            return Err(Error::Start("hosts lock poisoned".into()));
        };
        if !names.local.insert(name.to_string()) {
            return Ok(());
        }
        std::fs::write(&self.hosts, names.render()).map_err(|e| Error::io(&self.hosts, e))
    }

    /// Makes each name of `mapped` resolve to its address inside, in place of the names set
    /// before, rewriting the file (in place, as [`NetSandbox::add_host`] does) only when that
    /// changes it.
    pub fn set_mapped(&self, mapped: &[(std::net::Ipv4Addr, Vec<String>)]) -> Result<(), Error> {
        let Ok(mut names) = self.names.lock() else {
            return Err(Error::Start("hosts lock poisoned".into()));
        };
        if names.mapped == mapped {
            return Ok(());
        }
        names.mapped = mapped.to_vec();
        std::fs::write(&self.hosts, names.render()).map_err(|e| Error::io(&self.hosts, e))
    }

    /// Forwards `ip:port` inside (an address of the namespace's own) to `127.0.0.1:port` on the
    /// host. Not idempotent: once per address and port.
    pub fn forward_on(&self, ip: std::net::Ipv4Addr, port: u16) -> Result<(), Error> {
        let listener = listen_in(&self.netns, ip, port)?;
        serve(
            listener,
            format!("forwarder {ip}:{port}"),
            move |mut inside| async move {
                if let Ok(mut host) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await {
                    let _ = tokio::io::copy_bidirectional(&mut inside, &mut host).await;
                }
            },
        )
    }

    /// Forwards `addr` inside (a loopback address: all of 127.0.0.0/8 is local) to the same
    /// address on the host, as a SIMULATED control-plane VIP there is reached from inside
    /// (idempotent).
    pub fn forward_same(&self, addr: std::net::SocketAddrV4) -> Result<(), Error> {
        let Ok(mut done) = self.forwarded_addrs.lock() else {
            return Err(Error::Start("forwarder lock poisoned".into()));
        };
        if done.contains(&addr) {
            return Ok(());
        }
        let listener = listen_in(&self.netns, *addr.ip(), addr.port())?;
        serve(
            listener,
            format!("forwarder {addr}"),
            move |mut inside| async move {
                if let Ok(mut host) = tokio::net::TcpStream::connect(addr).await {
                    let _ = tokio::io::copy_bidirectional(&mut inside, &mut host).await;
                }
            },
        )?;
        done.insert(addr);
        Ok(())
    }

    /// Forwards `127.0.0.1:port` inside to `127.0.0.1:port` on the host (idempotent).
    pub fn forward(&self, port: u16) -> Result<(), Error> {
        let Ok(mut done) = self.forwarded.lock() else {
            return Err(Error::Start("forwarder lock poisoned".into()));
        };
        if done.contains(&port) {
            return Ok(());
        }
        let listener = listen_in(&self.netns, std::net::Ipv4Addr::LOCALHOST, port)?;
        serve(
            listener,
            format!("forwarder {port}"),
            move |mut inside| async move {
                if let Ok(mut host) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await {
                    let _ = tokio::io::copy_bidirectional(&mut inside, &mut host).await;
                }
            },
        )?;
        done.insert(port);
        Ok(())
    }
}

/// The pod network of the image pods: /30 links carved out of 10.244.0.0/16, one per pod, so
/// each pod has an address of its own that the host (the API server calling a webhook Service,
/// by way of the pod's EndpointSlice) reaches directly.
const POD_NET: [u8; 2] = [10, 244];
/// How many /30 links 10.244.0.0/16 holds.
const POD_LINKS: u32 = 1 << 14;

/// A point-to-point link between the host and a namespace: the host's end and the pod's.
#[derive(Clone, Debug)]
pub struct PodLink {
    pub host_if: String,
    pub host_ip: std::net::Ipv4Addr,
    pub pod_ip: std::net::Ipv4Addr,
}

impl PodLink {
    fn nth(i: u32) -> PodLink {
        let base = i.wrapping_mul(4) % (POD_LINKS * 4);
        let ip = |off: u32| {
            let v = base + off;
            std::net::Ipv4Addr::new(POD_NET[0], POD_NET[1], (v >> 8) as u8, (v & 0xff) as u8)
        };
        PodLink {
            host_if: format!("tbp{:x}", i % POD_LINKS),
            host_ip: ip(1),
            pod_ip: ip(2),
        }
    }
}

fn ip_cmd(args: &[&str]) -> Result<(), String> {
    let out = std::process::Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("running ip: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl NetSandbox {
    /// Gives the namespace an `eth0` with an address of its own on a veth link to the host
    /// (the host's end goes away with the namespace). Several testbeds run at once on one
    /// machine, so the link is picked at random among the free ones, and a name or address
    /// another testbed took meanwhile makes it try the next.
    pub fn attach_link(&self) -> Result<PodLink, Error> {
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u32(self.pid());
        let start = (h.finish() % u64::from(POD_LINKS)) as u32;
        let mut last = String::new();
        for k in 0..32u32 {
            let link = PodLink::nth(start.wrapping_add(k.wrapping_mul(7919)));
            let pid = self.pid().to_string();
            let host_cidr = format!("{}/30", link.host_ip);
            let attempt = ip_cmd(&[
                "link",
                "add",
                &link.host_if,
                "type",
                "veth",
                "peer",
                "name",
                "eth0",
                "netns",
                &pid,
            ])
            .and_then(|()| ip_cmd(&["addr", "add", &host_cidr, "dev", &link.host_if]))
            .and_then(|()| ip_cmd(&["link", "set", &link.host_if, "up"]));
            if let Err(e) = attempt {
                let _ = ip_cmd(&["link", "del", &link.host_if]);
                last = e;
                continue;
            }
            let pod_cidr = format!("{}/30", link.pod_ip);
            let host_ip = link.host_ip.to_string();
            let inside = std::process::Command::new("nsenter")
                .args(["--target", &pid, "--net", "sh", "-c"])
                .arg(r#"set -e; ip addr add "$1" dev eth0; ip link set eth0 up; ip route add default via "$2""#)
                .args(["sh", &pod_cidr, &host_ip])
                .output()
                .map_err(|e| Error::Start(format!("running nsenter: {e}")))?;
            if !inside.status.success() {
                return Err(Error::Start(format!(
                    "configuring the pod's eth0: {}",
                    String::from_utf8_lossy(&inside.stderr).trim()
                )));
            }
            return Ok(link);
        }
        Err(Error::Start(format!(
            "no free pod link in 10.244.0.0/16 (needs root and ip): {last}"
        )))
    }

    /// Exposes `127.0.0.1:inner` inside on a free port of the host's loopback (for a webhook
    /// server inside that the API server must call). Returns the host port.
    pub fn expose(&self, inner: u16) -> Result<u16, Error> {
        let failed = |e: std::io::Error| Error::Start(format!("exposing port {inner}: {e}"));
        let listener = std::net::TcpListener::bind(("127.0.0.1", 0)).map_err(failed)?;
        let port = listener.local_addr().map_err(failed)?.port();
        listener.set_nonblocking(true).map_err(failed)?;
        let fd = self.netns.try_clone().map_err(failed)?;
        let fd = std::sync::Arc::new(fd);
        serve(listener, format!("exposing {inner}"), move |mut outside| {
            let fd = fd.clone();
            async move {
                // A fresh thread enters the namespace to connect (never a pooled one:
                // setns would stick to it).
                let (tx, rx) = tokio::sync::oneshot::channel();
                std::thread::spawn(move || {
                    let _ = tx.send(connect_in(&fd, inner));
                });
                let Ok(Ok(stream)) = rx.await else { return };
                let Ok(mut inside) = tokio::net::TcpStream::from_std(stream) else {
                    return;
                };
                let _ = tokio::io::copy_bidirectional(&mut outside, &mut inside).await;
            }
        })?;
        Ok(port)
    }
}

/// Accepts connections on `listener` (non-blocking) for good, on the background runtime, each
/// served by `conn` on a task of its own; `what` names the listener in a warning.
fn serve<F, Fut>(listener: std::net::TcpListener, what: String, conn: F) -> Result<(), Error>
where
    F: Fn(tokio::net::TcpStream) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    crate::background()?.spawn(async move {
        let listener = match tokio::net::TcpListener::from_std(listener) {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!("{what}: {e}");
                return;
            }
        };
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            };
            tokio::spawn(conn(stream));
        }
    });
    Ok(())
}

/// Connects to `127.0.0.1:port` inside `netns`; call on a thread of its own.
fn connect_in(netns: &File, port: u16) -> std::io::Result<std::net::TcpStream> {
    // SAFETY: setns on a namespace file descriptor we hold open; affects this thread only.
    if unsafe { libc::setns(netns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let s = std::net::TcpStream::connect(("127.0.0.1", port))?;
    s.set_nonblocking(true)?;
    Ok(s)
}

/// Binds `ip:port` inside `netns`. `setns` moves only the calling thread, so a
/// short-lived thread enters the namespace, binds, and ends; the socket stays in the namespace
/// it was created in.
fn listen_in(
    netns: &File,
    ip: std::net::Ipv4Addr,
    port: u16,
) -> Result<std::net::TcpListener, Error> {
    let fd = netns.as_raw_fd();
    let joined = std::thread::spawn(move || -> std::io::Result<std::net::TcpListener> {
        // SAFETY: setns on a namespace file descriptor we hold open; affects this thread only.
        if unsafe { libc::setns(fd, libc::CLONE_NEWNET) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let l = std::net::TcpListener::bind((ip, port))?;
        l.set_nonblocking(true)?;
        Ok(l)
    })
    .join()
    .map_err(|_| Error::Start(format!("forwarder thread for port {port} panicked")))?;
    joined.map_err(|e| Error::Start(format!("forwarding port {port} into a namespace: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_links_are_disjoint_slash_30s_in_the_pod_net() {
        let a = PodLink::nth(0);
        assert_eq!(
            (a.host_ip.to_string(), a.pod_ip.to_string()),
            ("10.244.0.1".into(), "10.244.0.2".into())
        );
        let b = PodLink::nth(64);
        assert_eq!(b.pod_ip.to_string(), "10.244.1.2");
        let last = PodLink::nth(POD_LINKS - 1);
        assert_eq!(last.pod_ip.to_string(), "10.244.255.254");
        assert_eq!(
            PodLink::nth(POD_LINKS).pod_ip,
            a.pod_ip,
            "wraps inside the /16"
        );
        assert!(last.host_if.len() <= 15, "an interface name fits IFNAMSIZ");
    }
}
