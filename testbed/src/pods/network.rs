//! SIMULATED pod network: routing between the image pods ([`super::image`]).
//!
//! On a cluster the CNI plugin makes every pod's address reachable from every other pod (the
//! reference `bridge` plugin, for one, puts the pods of a node on a bridge in a node whose
//! `net.ipv4.ip_forward` is 1). Here each image pod has an `eth0` on a point-to-point link to the
//! host ([`NetSandbox::attach_link`]), which the host reaches directly (the API server calls
//! webhooks at those addresses), but the host does not forward between the links: its
//! `ip_forward` is 0, and a testbed changes no sysctl of the host.
//!
//! So each testbed runs one router of its own: a network namespace with forwarding on in it
//! alone ([`NetSandbox::start_router`]). Every image pod gets a second link, `eth1`, to it; the
//! pod routes the pod network (10.244.0.0/16) through the router, and the router routes each
//! pod's address down that pod's link. A pod keeps one address, its `eth0`'s: the source of
//! what it sends to another pod (the route says so), what the host reaches it at, and its
//! `podIP`. The neighbours are static on both ends of each link (the pod's end knows the
//! router's MAC, the router knows the pod's), so nothing hangs on the ARP sysctls a new
//! namespace inherits from the host. The router holds an address of its own (169.254.1.1 on
//! every link), so a connection to an address no pod holds any more (a restarted pod has a new
//! one) is refused at once with an ICMP "unreachable" instead of timing out.
//!
//! What differs from a CNI: no network policy, IPv4 only, and a pod reaches the pods of its own
//! testbed only (each testbed has its router; several run side by side on one machine).

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use crate::netns::NetSandbox;
use crate::{Error, Testbed};

/// The pod network every image pod's address is in ([`NetSandbox::attach_link`]'s).
const POD_NET: &str = "10.244.0.0/16";
/// The router's address on each link, and its MAC (locally administered).
const ROUTER_IP: &str = "169.254.1.1";
const ROUTER_MAC: &str = "02:74:00:00:00:01";

/// The router of one testbed's pod network.
pub(crate) struct Router {
    sandbox: NetSandbox,
    /// Numbers the router's ends of the links (`p<n>`, names in its own namespace only).
    next: AtomicU32,
}

impl Router {
    pub(crate) fn start(dir: &Path) -> Result<Router, Error> {
        Ok(Router {
            sandbox: NetSandbox::start_router(dir, "pod-router")?,
            next: AtomicU32::new(0),
        })
    }

    /// Links the pod whose namespace is `pod` and whose `eth0` address is `pod_ip` to the
    /// router. The link goes away with the pod's namespace, and the router's route with it.
    pub(crate) fn attach(&self, pod: &NetSandbox, pod_ip: Ipv4Addr) -> Result<(), Error> {
        let end = format!("p{:x}", self.next.fetch_add(1, Ordering::SeqCst));
        let mac = pod_mac(pod_ip);
        let ip = pod_ip.to_string();
        in_netns(
            self.sandbox.pid(),
            r#"set -e
ip link add "$1" address "$2" type veth peer name eth1 address "$3" netns "$4"
ip addr add "$5/32" dev "$1"
ip link set "$1" up
ip route replace "$6/32" dev "$1"
ip neigh replace "$6" lladdr "$3" dev "$1" nud permanent"#,
            &[
                &end,
                ROUTER_MAC,
                &mac,
                &pod.pid().to_string(),
                ROUTER_IP,
                &ip,
            ],
        )?;
        in_netns(
            pod.pid(),
            r#"set -e
ip link set eth1 up
ip neigh replace "$2" lladdr "$3" dev eth1 nud permanent
ip route add "$4" via "$2" dev eth1 onlink src "$1""#,
            &[&ip, ROUTER_IP, ROUTER_MAC, POD_NET],
        )
    }
}

/// A pod's `eth1` MAC: locally administered, with its address in it (unique among live pods,
/// as the addresses are).
fn pod_mac(ip: Ipv4Addr) -> String {
    let [a, b, c, d] = ip.octets();
    format!("02:74:{a:02x}:{b:02x}:{c:02x}:{d:02x}")
}

/// Runs `sh -c script sh args…` in the network namespace of process `pid`.
fn in_netns(pid: u32, script: &str, args: &[&str]) -> Result<(), Error> {
    let out = std::process::Command::new("nsenter")
        .args([
            "--target",
            &pid.to_string(),
            "--net",
            "sh",
            "-c",
            script,
            "sh",
        ])
        .args(args)
        .output()
        .map_err(|e| Error::Start(format!("running nsenter: {e}")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(Error::Start(format!(
            "SIMULATED pod network: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

impl Testbed {
    /// `nsenter` arguments that run a program in the network and mount namespaces of image pod
    /// `namespace/name` (its network, and its `/etc/hosts`), as `kubectl exec` would reach a
    /// container's; append the program and its arguments. `None` while no such pod runs.
    pub fn image_pod_enter_args(&self, namespace: &str, name: &str) -> Option<Vec<String>> {
        let prefix = format!("{namespace}_{name}_");
        let live = |dir: PathBuf| -> Option<(std::time::SystemTime, u32)> {
            let pid: u32 = std::fs::read_to_string(dir.join("pod-netns.pid"))
                .ok()?
                .trim()
                .parse()
                .ok()?;
            let alive = Path::new(&format!("/proc/{pid}")).exists();
            let modified = std::fs::metadata(&dir).and_then(|m| m.modified()).ok()?;
            alive.then_some((modified, pid))
        };
        // A deleted pod's folder goes once its processes have been told to stop: the newest
        // live one is the pod's current incarnation.
        let (_, pid) = std::fs::read_dir(self.dir.join("image-pods"))
            .ok()?
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
            .filter_map(|e| live(e.path()))
            .max()?;
        Some(vec![
            "--target".into(),
            pid.to_string(),
            "--net".into(),
            "--mount".into(),
            "--".into(),
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pods_mac_carries_its_address_and_is_locally_administered() {
        let mac = pod_mac(Ipv4Addr::new(10, 244, 1, 2));
        assert_eq!(mac, "02:74:0a:f4:01:02");
        assert_ne!(mac, ROUTER_MAC);
        // Bit 1 of the first octet: locally administered; bit 0 clear: unicast.
        assert_eq!(u8::from_str_radix(&mac[..2], 16).unwrap() & 0b11, 0b10);
    }
}
