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
//! to any when none is ready, so a host whose etcd member KCP already removed stops taking
//! traffic before its `kubeadm reset`. The last backend's removal closes the listener: a
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

/// The backends and whether each answered its last health check.
type Backends = Arc<Mutex<Vec<(SocketAddr, bool)>>>;

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
            && !b.iter().any(|(a, _)| *a == backend)
        {
            b.push((backend, true));
        }
        return Ok(());
    }
    let std_listener = std::net::TcpListener::bind(endpoint)
        .map_err(|e| format!("SIMULATED VIP {endpoint}: binding it: {e}"))?;
    std_listener
        .set_nonblocking(true)
        .map_err(|e| format!("SIMULATED VIP {endpoint}: {e}"))?;
    let backends: Backends = Arc::new(Mutex::new(vec![(backend, true)]));
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
                b.retain(|(a, _)| *a != backend);
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
                .map(|b| b.iter().map(|(a, _)| *a).collect())
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

/// The ready backends, or all of them when none is.
fn choices(backends: &Backends) -> Vec<SocketAddr> {
    let all = backends.lock().map(|b| b.clone()).unwrap_or_default();
    let ready: Vec<SocketAddr> = all.iter().filter(|(_, ok)| *ok).map(|(a, _)| *a).collect();
    if ready.is_empty() {
        all.into_iter().map(|(a, _)| a).collect()
    } else {
        ready
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
            for i in 0..list.len() {
                let target = list[(start + i) % list.len()];
                let Ok(Ok(mut upstream)) =
                    tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::TcpStream::connect(target))
                        .await
                else {
                    continue;
                };
                let mut conn = conn;
                let _ = tokio::io::copy_bidirectional(&mut conn, &mut upstream).await;
                return;
            }
        });
    }
}

/// Asks each backend's `/readyz` every [`HEALTH_EVERY`] and records the answers.
async fn health(backends: Backends) {
    loop {
        tokio::time::sleep(HEALTH_EVERY).await;
        let list: Vec<SocketAddr> = backends
            .lock()
            .map(|b| b.iter().map(|(a, _)| *a).collect())
            .unwrap_or_default();
        for addr in list {
            let ok = ready(addr).await;
            if let Ok(mut b) = backends.lock()
                && let Some(slot) = b.iter_mut().find(|(a, _)| *a == addr)
            {
                slot.1 = ok;
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
