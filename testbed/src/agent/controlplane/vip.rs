//! SIMULATED virtual IP of a workload cluster's `controlPlaneEndpoint`: what kube-vip (or a
//! load balancer in front of the control-plane hosts) does on a real BYOH site.
//!
//! A process-global registry maps each endpoint (`127.0.0.1:PORT`, as the ClusterConfiguration
//! names it) to the set of API servers behind it. The first registration binds a TCP listener
//! on the endpoint (on the testbed's background runtime, which outlives any one test's
//! runtime); each accepted connection is proxied byte for byte to a backend, round robin,
//! trying the next one when a connect fails (a backend whose process died refuses at once).
//! TLS passes through untouched, so clients see each kube-apiserver's own serving
//! certificate, as through kube-vip. Every second each backend's `/readyz` is asked
//! (anonymously, as a load balancer's health check does): connections go to ready backends,
//! to any when none is ready. A backend that fails [`FALL`] checks in a row is down: new
//! connections avoid it and the ones it holds are closed, as established connections break when
//! kube-vip moves the address off a node whose API server stopped serving (its leader lease
//! lapses there; the new holder answers the old flows with resets) and as a load balancer
//! with `on-marked-down shutdown-sessions` (HAProxy) or `expire_nodest_conn` (IPVS) does.
//! Without that, a client's HTTP/2 connection stays pinned to an API server whose etcd member
//! is gone: BYOH v0.5.0's agent never runs `kubeadm reset` on a host it releases when it runs
//! with `--skip-installation` (`hostCleanUp` in `agent/reconciler/host_reconciler.go` resets
//! only when `K8sComponentsInstallationSucceeded` is True, which that flag never sets), so a
//! released control-plane host keeps its kube-apiserver running, its reads answered from the
//! watch cache and its writes hanging. The last backend's removal closes the listener: a
//! cluster with no control plane left does not answer on its endpoint.
//!
//! What differs from kube-vip: no leader election and no ARP, and every ready backend takes
//! traffic (kube-vip's control-plane mode sends it all to its leader's node; its load-balancer
//! mode is this one). A backend is added once its kube-apiserver answers `/readyz` and removed
//! on `kubeadm reset` or when its host's control plane stops.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long one connect to a backend may take before the next is tried.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// How often each backend's `/readyz` is asked.
const HEALTH_EVERY: Duration = Duration::from_secs(1);
/// Failed checks in a row that take a backend down (HAProxy's `fall`): one slow answer while
/// etcd elects a leader does not cut every client off.
const FALL: u32 = 3;

/// One API server behind the VIP.
struct Backend {
    addr: SocketAddr,
    /// Failed health checks in a row; down from [`FALL`] on.
    fails: u32,
    /// Bumped each time the backend goes down: the sessions it holds end.
    downs: tokio::sync::watch::Sender<u64>,
}

impl Backend {
    fn new(addr: SocketAddr) -> Backend {
        Backend {
            addr,
            fails: 0,
            downs: tokio::sync::watch::Sender::new(0),
        }
    }

    fn up(&self) -> bool {
        self.fails < FALL
    }
}

type Backends = Arc<Mutex<Vec<Backend>>>;

struct Vip {
    backends: Backends,
    listener: tokio::task::AbortHandle,
}

static VIPS: Mutex<BTreeMap<String, Vip>> = Mutex::new(BTreeMap::new());

/// Adds `backend` behind `endpoint`, binding the endpoint on its first backend.
pub(crate) fn register(endpoint: &str, backend: SocketAddr) -> Result<(), String> {
    let mut vips = VIPS
        .lock()
        .map_err(|_| "the SIMULATED VIP registry lock is poisoned".to_string())?;
    if let Some(vip) = vips.get(endpoint) {
        if let Ok(mut b) = vip.backends.lock()
            && !b.iter().any(|x| x.addr == backend)
        {
            b.push(Backend::new(backend));
        }
        return Ok(());
    }
    let std_listener = std::net::TcpListener::bind(endpoint)
        .map_err(|e| format!("SIMULATED VIP {endpoint}: binding it: {e}"))?;
    std_listener
        .set_nonblocking(true)
        .map_err(|e| format!("SIMULATED VIP {endpoint}: {e}"))?;
    let backends: Backends = Arc::new(Mutex::new(vec![Backend::new(backend)]));
    let rt = crate::background().map_err(|e| e.to_string())?;
    let task = rt.spawn(serve(endpoint.to_string(), std_listener, backends.clone()));
    vips.insert(
        endpoint.to_string(),
        Vip {
            backends,
            listener: task.abort_handle(),
        },
    );
    Ok(())
}

/// Removes `backend` from behind `endpoint` (nothing when it is not there); the endpoint stops
/// listening with its last backend.
pub(crate) fn unregister(endpoint: &str, backend: SocketAddr) {
    let Ok(mut vips) = VIPS.lock() else { return };
    let empty = match vips.get(endpoint) {
        Some(vip) => match vip.backends.lock() {
            Ok(mut b) => {
                b.retain(|x| x.addr != backend);
                b.is_empty()
            }
            Err(_) => false,
        },
        None => return,
    };
    if empty && let Some(vip) = vips.remove(endpoint) {
        vip.listener.abort();
    }
}

/// The backends behind `endpoint` now.
#[cfg(test)]
pub(crate) fn backends(endpoint: &str) -> Vec<SocketAddr> {
    VIPS.lock()
        .ok()
        .and_then(|v| {
            v.get(endpoint)
                .and_then(|vip| vip.backends.lock().ok())
                .map(|b| b.iter().map(|x| x.addr).collect())
        })
        .unwrap_or_default()
}

async fn serve(endpoint: String, listener: std::net::TcpListener, backends: Backends) {
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!("SIMULATED VIP {endpoint}: {e}");
            return;
        }
    };
    tokio::join!(accept(listener, backends.clone()), health(backends));
}

/// A backend to connect to and the signal that it went down.
type Choice = (SocketAddr, tokio::sync::watch::Receiver<u64>);

/// The backends that are up, or all of them when none is.
fn choices(backends: &Backends) -> Vec<Choice> {
    let Ok(all) = backends.lock() else {
        return Vec::new();
    };
    let choice = |b: &Backend| (b.addr, b.downs.subscribe());
    let up: Vec<Choice> = all.iter().filter(|b| b.up()).map(choice).collect();
    if up.is_empty() {
        all.iter().map(choice).collect()
    } else {
        up
    }
}

async fn accept(listener: tokio::net::TcpListener, backends: Backends) {
    let next = Arc::new(AtomicUsize::new(0));
    loop {
        let Ok((conn, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let list = choices(&backends);
        let next = next.clone();
        tokio::spawn(async move {
            if list.is_empty() {
                return;
            }
            let start = next.fetch_add(1, Ordering::Relaxed);
            let n = list.len();
            let mut list = list;
            list.rotate_left(start % n);
            for (target, mut down) in list {
                let Ok(Ok(mut upstream)) =
                    tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::TcpStream::connect(target))
                        .await
                else {
                    continue;
                };
                let mut conn = conn;
                // Until either side closes, or the backend goes down (dropping both ends
                // closes the client's connection: it reconnects to one that is up).
                tokio::select! {
                    _ = tokio::io::copy_bidirectional(&mut conn, &mut upstream) => {}
                    _ = down.changed() => {}
                }
                return;
            }
        });
    }
}

/// Asks each backend's `/readyz` every [`HEALTH_EVERY`]; a backend that goes down has its
/// sessions closed.
async fn health(backends: Backends) {
    loop {
        tokio::time::sleep(HEALTH_EVERY).await;
        let list: Vec<SocketAddr> = backends
            .lock()
            .map(|b| b.iter().map(|x| x.addr).collect())
            .unwrap_or_default();
        for addr in list {
            let ok = ready(addr).await;
            if let Ok(mut b) = backends.lock()
                && let Some(slot) = b.iter_mut().find(|x| x.addr == addr)
            {
                if ok {
                    slot.fails = 0;
                } else {
                    slot.fails = slot.fails.saturating_add(1);
                    if slot.fails == FALL {
                        tracing::info!("SIMULATED VIP: {addr} is down; closing its connections");
                        slot.downs.send_modify(|n| *n = n.wrapping_add(1));
                    }
                }
            }
        }
    }
}

/// `GET https://<addr>/readyz`, anonymously and without verifying the serving certificate, as
/// a load balancer's HTTPS health check does.
async fn ready(addr: SocketAddr) -> bool {
    let Ok(url) = format!("https://{addr}").parse::<http::Uri>() else {
        return false;
    };
    let mut config = kube::Config::new(url);
    config.accept_invalid_certs = true;
    config.connect_timeout = Some(Duration::from_secs(1));
    config.read_timeout = Some(Duration::from_secs(2));
    let Ok(client) = kube::Client::try_from(config) else {
        return false;
    };
    let Ok(req) = http::Request::get("/readyz").body(Vec::new()) else {
        return false;
    };
    matches!(client.request_text(req).await, Ok(t) if t.trim() == "ok")
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// A backend that never passes its health check (it does not speak TLS) is taken down after
    /// [`FALL`] checks, and the connection a client holds through the VIP to it is closed.
    #[tokio::test]
    async fn a_backend_that_goes_down_loses_its_connections() {
        let backend = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = backend.local_addr().unwrap();
        tokio::spawn(async move {
            loop {
                let Ok((mut c, _)) = backend.accept().await else {
                    return;
                };
                tokio::spawn(async move {
                    let mut buf = [0u8; 64];
                    while let Ok(n) = c.read(&mut buf).await {
                        if n == 0 || c.write_all(&buf[..n]).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        let endpoint = format!("127.0.0.1:{}", crate::free_port().unwrap());
        register(&endpoint, addr).unwrap();
        let mut client = tokio::net::TcpStream::connect(&endpoint).await.unwrap();
        client.write_all(b"ping").await.unwrap();
        let mut buf = [0u8; 4];
        client.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"ping", "proxied to the backend");
        let closed =
            tokio::time::timeout(HEALTH_EVERY * (FALL + 5), client.read(&mut [0u8; 8])).await;
        unregister(&endpoint, addr);
        assert!(
            matches!(closed, Ok(Ok(0)) | Ok(Err(_))),
            "the VIP kept a session to a backend that is down: {closed:?}"
        );
    }
}
