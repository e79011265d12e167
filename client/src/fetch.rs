//! Bounded downloads of small text files (Calico's release manifest for
//! `kubectl kamaji create --cni calico`), through kube's own HTTP client and TLS stack (the
//! platform's trust store), so no other HTTP crate is needed.

use std::time::Duration;

use futures::AsyncReadExt;

/// Why a download failed; one line each.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("invalid URL {0:?}: use http:// or https://")]
    Url(String),
    #[error("cannot set up the HTTP client: {0}")]
    Client(String),
    #[error("no complete answer within {}", kcore::text::human_duration(*.0))]
    Timeout(Duration),
    #[error("the server answered HTTP {code}")]
    Status { code: u16 },
    #[error("{0}")]
    Transport(String),
    #[error("it is larger than {} bytes", .0)]
    TooLarge(usize),
    #[error("it is not UTF-8 text")]
    NotText,
}

/// The first line of an error chain, without the noise of nested causes.
fn first_line(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut src = e.source();
    while let Some(s) = src {
        text = format!("{text}: {s}");
        src = s.source();
    }
    text.lines().next().unwrap_or_default().to_string()
}

/// GETs `url` as text: at most `max_bytes`, within `timeout` (connect and transfer).
pub async fn fetch_text(
    url: &str,
    max_bytes: usize,
    timeout: Duration,
) -> Result<String, FetchError> {
    tracing::info!("downloading {url} (at most {max_bytes} bytes, {timeout:?})");
    let bad = || FetchError::Url(url.to_string());
    let uri: http::Uri = url.parse().map_err(|_| bad())?;
    let scheme = uri.scheme_str().ok_or_else(bad)?;
    if scheme != "https" && scheme != "http" {
        return Err(bad());
    }
    let authority = uri.authority().ok_or_else(bad)?;
    let origin: http::Uri = format!("{scheme}://{authority}")
        .parse()
        .map_err(|_| bad())?;
    let path = uri
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "/".into());
    let mut config = kube::Config::new(origin);
    config.connect_timeout = Some(timeout);
    config.read_timeout = Some(timeout);
    let client = kube::Client::try_from(config).map_err(|e| FetchError::Client(first_line(&e)))?;
    let request = http::Request::get(path)
        .header(http::header::ACCEPT, "*/*")
        .body(Vec::new())
        .map_err(|_| bad())?;
    let download = async {
        let stream = client.request_stream(request).await.map_err(|e| match e {
            kube::Error::Api(s) => FetchError::Status { code: s.code },
            e => FetchError::Transport(first_line(&e)),
        })?;
        let mut body = Vec::new();
        // One byte more than allowed tells "exactly at the limit" from "too large".
        let limit = u64::try_from(max_bytes)
            .unwrap_or(u64::MAX)
            .saturating_add(1);
        stream
            .take(limit)
            .read_to_end(&mut body)
            .await
            .map_err(|e| FetchError::Transport(first_line(&e)))?;
        if body.len() > max_bytes {
            return Err(FetchError::TooLarge(max_bytes));
        }
        String::from_utf8(body).map_err(|_| FetchError::NotText)
    };
    tokio::time::timeout(timeout, download)
        .await
        .map_err(|_| FetchError::Timeout(timeout))?
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt};

    /// A one-shot HTTP/1.1 server answering every connection with `status` and `body`.
    async fn serve(status: &'static str, body: Vec<u8>, stall: bool) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                let body = body.clone();
                tokio::spawn(async move {
                    let mut buf = [0u8; 4096];
                    let _ = sock.read(&mut buf).await;
                    if stall {
                        tokio::time::sleep(Duration::from_secs(30)).await;
                    }
                    let head = format!(
                        "HTTP/1.1 {status}\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = sock.write_all(head.as_bytes()).await;
                    let _ = sock.write_all(&body).await;
                    let _ = sock.shutdown().await;
                });
            }
        });
        format!("http://{addr}/manifests/calico.yaml")
    }

    #[tokio::test]
    async fn downloads_text_within_bounds() {
        let t = Duration::from_secs(5);
        let url = serve("200 OK", b"kind: DaemonSet\n".to_vec(), false).await;
        assert_eq!(fetch_text(&url, 100, t).await.unwrap(), "kind: DaemonSet\n");
        // Exactly at the limit is fine; one byte more is not.
        assert_eq!(fetch_text(&url, 16, t).await.unwrap().len(), 16);
        let e = fetch_text(&url, 15, t).await.unwrap_err();
        assert_eq!(e.to_string(), "it is larger than 15 bytes");

        let url = serve("404 Not Found", b"404: Not Found".to_vec(), false).await;
        let e = fetch_text(&url, 100, t).await.unwrap_err();
        assert_eq!(e.to_string(), "the server answered HTTP 404");

        let url = serve("200 OK", vec![0xff, 0xfe], false).await;
        assert!(matches!(
            fetch_text(&url, 100, t).await,
            Err(FetchError::NotText)
        ));

        let url = serve("200 OK", b"late".to_vec(), true).await;
        let e = fetch_text(&url, 100, Duration::from_millis(300))
            .await
            .unwrap_err();
        assert!(matches!(e, FetchError::Timeout(_)), "{e}");

        // Nothing listens there.
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let e = fetch_text(&format!("http://127.0.0.1:{port}/x"), 100, t)
            .await
            .unwrap_err();
        assert!(matches!(e, FetchError::Transport(_)), "{e}");
        assert!(!e.to_string().contains('\n'));

        assert!(matches!(
            fetch_text("ftp://example.com/x", 1, t).await,
            Err(FetchError::Url(_))
        ));
    }
}
