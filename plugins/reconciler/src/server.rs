//! A tiny HTTP/1.1 server for `/healthz`, `/readyz` and `/metrics` (no extra dependencies).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::metrics::Metrics;

/// Serves until the process exits. `ready` drives `/readyz`.
pub async fn serve(
    addr: SocketAddr,
    metrics: Arc<Metrics>,
    ready: Arc<AtomicBool>,
) -> std::io::Result<()> {
    let listener = TcpListener::bind(addr).await?;
    tracing::info!(
        "serving /healthz, /readyz and /metrics on {}",
        listener.local_addr()?
    );
    loop {
        let (mut sock, _) = listener.accept().await?;
        let (metrics, ready) = (metrics.clone(), ready.clone());
        tokio::spawn(async move {
            let mut buf = [0u8; 2048];
            let n =
                match tokio::time::timeout(std::time::Duration::from_secs(5), sock.read(&mut buf))
                    .await
                {
                    Ok(Ok(n)) => n,
                    _ => return,
                };
            let req = String::from_utf8_lossy(&buf[..n]);
            let path = req.split_whitespace().nth(1).unwrap_or("/");
            let (code, ctype, body) = match path {
                "/healthz" | "/livez" => ("200 OK", "text/plain", "ok\n".to_string()),
                "/readyz" if ready.load(Ordering::SeqCst) => {
                    ("200 OK", "text/plain", "ok\n".to_string())
                }
                "/readyz" => (
                    "503 Service Unavailable",
                    "text/plain",
                    "not ready\n".to_string(),
                ),
                "/metrics" => ("200 OK", "text/plain; version=0.0.4", metrics.render()),
                _ => ("404 Not Found", "text/plain", "not found\n".to_string()),
            };
            let resp = format!(
                "HTTP/1.1 {code}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = sock.write_all(resp.as_bytes()).await;
            let _ = sock.shutdown().await;
        });
    }
}
