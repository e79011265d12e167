//! The SIMULATED Services of tenant ports: TCP proxies to the API servers of Ready pods only,
//! as kube-proxy forwards to a Service's ready endpoints (see the module documentation of
//! [`super`] for why pods need them here).

use std::collections::HashMap;
use std::time::Duration;

/// The API servers behind each tenant port: pod uid, private port, ready.
pub(super) type Endpoints =
    std::sync::Arc<std::sync::Mutex<HashMap<u16, Vec<(String, u16, bool)>>>>;

/// Takes a pod's API server out of its Service; whether it was in one.
pub(super) fn unroute(endpoints: &Endpoints, uid: &str) -> bool {
    let Ok(mut eps) = endpoints.lock() else {
        return false;
    };
    let mut found = false;
    for list in eps.values_mut() {
        let before = list.len();
        list.retain(|(u, _, _)| u != uid);
        found |= list.len() != before;
    }
    found
}

/// The SIMULATED Service of a tenant port: accepts on 127.0.0.1:`port` and forwards each
/// connection to a ready API server behind it (round robin), or closes it when none is ready,
/// as a Service without ready endpoints refuses. Aborting the returned task releases the port.
pub(super) fn service(
    port: u16,
    endpoints: Endpoints,
) -> Result<tokio::task::JoinHandle<()>, String> {
    let listener = std::net::TcpListener::bind(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    listener.set_nonblocking(true).map_err(|e| e.to_string())?;
    let listener = tokio::net::TcpListener::from_std(listener).map_err(|e| e.to_string())?;
    let task = tokio::spawn(async move {
        let mut next = 0usize;
        loop {
            let Ok((mut inbound, _)) = listener.accept().await else {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            };
            let ready: Vec<u16> = endpoints
                .lock()
                .map(|eps| {
                    eps.get(&port)
                        .map(|l| l.iter().filter(|e| e.2).map(|e| e.1).collect())
                        .unwrap_or_default()
                })
                .unwrap_or_default();
            if ready.is_empty() {
                continue;
            }
            next = next.wrapping_add(1);
            let backend = ready[next % ready.len()];
            tokio::spawn(async move {
                if let Ok(mut out) = tokio::net::TcpStream::connect(("127.0.0.1", backend)).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut out).await;
                }
            });
        }
    });
    Ok(task)
}
