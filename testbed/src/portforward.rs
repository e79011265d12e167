//! SIMULATED kubelet port-forward endpoint: what the API server's `pods/portforward` reaches, so
//! a client of it (the Cluster API KubeadmControlPlane controller's `proxy/dial.go`, `kubectl
//! port-forward`) connects to a port "inside a pod" that really listens somewhere on this
//! machine ([`Resolve`]).
//!
//! How the API server gets here (kubernetes v1.36.3): `PortForwardLocation`
//! (`pkg/registry/core/pod/strategy.go`) builds `https://<address>:<port>/portForward/{ns}/{pod}`
//! from the pod's Node (its address by `--kubelet-preferred-address-types`, the testbed's putting
//! `InternalIP` first; its port from `status.daemonEndpoints.kubeletEndpoint.Port`), and its
//! upgrade-aware proxy sends the client's upgrade request there over HTTP/1.1 and then copies
//! bytes both ways. A WebSocket client (client-go's SPDY-over-WebSocket dialer, which the
//! KubeadmControlPlane controller tries first) is translated at the API server
//! (`NewTunnelingHandler`, unless the Node lists `ExtendWebSocketsToKubelet` in
//! `status.declaredFeatures`) into the same SPDY upgrade, its WebSocket subprotocol taken from
//! the `X-Stream-Protocol-Version` this answers with: here it is always SPDY/3.1
//! ([`crate::spdy`]). The API server checks the kubelet's certificate only with
//! `--kubelet-certificate-authority`, which the testbed does not give: this one is self-signed.
//!
//! What it answers, as the kubelet's `handleHTTPStreams` (`pkg/kubelet/cri/streaming/
//! portforward/httpstream.go`, kubernetes v1.36.3) with apimachinery's SPDY upgrader does: the
//! protocol negotiated from `X-Stream-Protocol-Version` (`portforward.k8s.io`; 400 without the
//! header, 403 without that protocol), `101 Switching Protocols` with `Upgrade: SPDY/3.1`; then
//! each stream the client opens must carry `streamtype` (`error` or `data`) and `port` (it is
//! reset otherwise, replied to with an empty header block when valid), the two of a forwarded
//! connection are paired by `requestid` (from the stream id for a client without one), a pair
//! incomplete after 30 s gets `timed out waiting for streams` on its error stream. A complete
//! pair is connected to the pod's port and bytes are copied both ways, each side's end passed on
//! as a half-close; a failure to connect is written to the error stream, as the kubelet does.
//!
//! What differs from a kubelet, and why: no authentication or authorization of the caller (the
//! API server has no kubelet client certificate here); the pod is not looked up (a port that
//! [`Resolve`] does not know is the error the kubelet gives for a port nothing listens on); no
//! WebSocket port-forward (the API server translates), no idle timeout, no exec or attach.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::Error;
use crate::spdy::{self, CANCEL, Headers, Role, Stream, header};

/// Resolves (namespace, pod, port) to where that pod's port really listens.
pub type Resolve = Arc<dyn Fn(&str, &str, u16) -> Option<SocketAddr> + Send + Sync>;

/// The protocol the kubelet speaks on the streams (`portforward.ProtocolV1Name`).
const PROTOCOL: &str = "portforward.k8s.io";
/// The longest request head read.
const MAX_HEAD: usize = 16 * 1024;
/// How long the second stream of a pair may take (the kubelet's default
/// `--streaming-connection-idle-timeout` is longer; its stream creation timeout is this).
const PAIR_TIMEOUT: Duration = Duration::from_secs(30);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a connection may take for its TLS handshake, and then for its request head.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);

/// The endpoint, serving until dropped.
pub struct PortForwardServer {
    port: u16,
    task: tokio::task::AbortHandle,
}

impl PortForwardServer {
    /// The port it listens on, for the Node's `status.daemonEndpoints.kubeletEndpoint.Port`.
    pub fn port(&self) -> u16 {
        self.port
    }
}

impl Drop for PortForwardServer {
    fn drop(&mut self) {
        // The accept loop owns every connection's task, which owns every forward's.
        self.task.abort();
    }
}

/// Listens on `bind`:0 (TLS, self-signed) and serves `/portForward/{ns}/{pod}` (and 404
/// otherwise, `/healthz` 200).
pub async fn serve(bind: IpAddr, resolve: Resolve) -> Result<PortForwardServer, Error> {
    // Outside a runtime, spawning would panic: an error instead.
    let runtime = tokio::runtime::Handle::try_current()
        .map_err(|e| Error::Start(format!("SIMULATED kubelet port-forward: {e}")))?;
    let what = Path::new("SIMULATED kubelet port-forward listener");
    let listener = TcpListener::bind((bind, 0))
        .await
        .map_err(|e| Error::io(what, e))?;
    let port = listener
        .local_addr()
        .map_err(|e| Error::io(what, e))?
        .port();
    let acceptor = acceptor(bind).map_err(Error::Pki)?;
    let task = runtime.spawn(accept_loop(listener, acceptor, resolve));
    Ok(PortForwardServer {
        port,
        task: task.abort_handle(),
    })
}

async fn accept_loop(listener: TcpListener, acceptor: tokio_rustls::TlsAcceptor, resolve: Resolve) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((tcp, _)) = accepted else {
                    // Out of descriptors, say: let connections end rather than spin.
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                };
                let (acceptor, resolve) = (acceptor.clone(), resolve.clone());
                connections.spawn(async move {
                    // A peer that never completes its handshake does not keep a task.
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                        Ok(Ok(tls)) => {
                            if let Err(e) = connection(tls, resolve).await {
                                tracing::debug!("SIMULATED kubelet port-forward: {e}");
                            }
                        }
                        Ok(Err(e)) => tracing::debug!("SIMULATED kubelet port-forward: TLS: {e}"),
                        Err(_) => tracing::debug!("SIMULATED kubelet port-forward: TLS timed out"),
                    }
                });
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// A self-signed serving certificate for the address it listens on.
fn acceptor(bind: IpAddr) -> Result<tokio_rustls::TlsAcceptor, String> {
    use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
    let key = rcgen::KeyPair::generate().map_err(|e| e.to_string())?;
    let params = rcgen::CertificateParams::new(vec![bind.to_string(), "localhost".into()])
        .map_err(|e| e.to_string())?;
    let cert = params.self_signed(&key).map_err(|e| e.to_string())?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        )
        .map_err(|e| e.to_string())?;
    // The API server's dialer for upgrades offers http/1.1 only.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}

/// A request head: method, path (query dropped, percent-decoded parts), lowercase header names.
struct Request {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
}

impl Request {
    /// Every value of `name`, over repeated header lines and comma-separated lists.
    fn values(&self, name: &str) -> Vec<String> {
        self.headers
            .iter()
            .filter(|(n, _)| n == name)
            .flat_map(|(_, v)| v.split(','))
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .collect()
    }
    fn has(&self, name: &str) -> bool {
        self.headers.iter().any(|(n, _)| n == name)
    }
}

/// Reads a request head; returns it and the bytes read past it (the start of the SPDY frames).
async fn read_head<S: AsyncRead + Unpin>(s: &mut S) -> std::io::Result<Option<(Request, Vec<u8>)>> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 2048];
    let end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        let n = s.read(&mut chunk).await?;
        if n == 0 || buf.len() + n > MAX_HEAD {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let rest = buf.split_off(end + 4);
    let text = String::from_utf8_lossy(&buf);
    let mut lines = text.split("\r\n");
    let mut words = lines.next().unwrap_or_default().split(' ');
    let method = words.next().unwrap_or_default().to_string();
    let target = words.next().unwrap_or_default();
    let path = target
        .split_once('?')
        .map_or(target, |(p, _)| p)
        .to_string();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Ok(Some((
        Request {
            method,
            path,
            headers,
        },
        rest,
    )))
}

async fn respond<S: AsyncWrite + Unpin>(
    s: &mut S,
    code: u16,
    extra: &str,
    body: &str,
) -> std::io::Result<()> {
    let reason = match code {
        200 => "OK",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        _ => "Error",
    };
    let head = format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\n{extra}Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).await?;
    s.write_all(body.as_bytes()).await?;
    s.shutdown().await
}

/// A percent-encoded path part, decoded.
fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let hex = |i: usize| b.get(i).and_then(|c| (*c as char).to_digit(16));
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match (b[i], hex(i + 1), hex(i + 2)) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// One connection from the API server: a request, and for a port-forward its SPDY session.
async fn connection<S>(mut s: S, resolve: Resolve) -> std::io::Result<()>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let Ok(head) = tokio::time::timeout(HANDSHAKE_TIMEOUT, read_head(&mut s)).await else {
        return Ok(());
    };
    let Some((req, rest)) = head? else {
        return Ok(());
    };
    if req.path == "/healthz" {
        return respond(&mut s, 200, "", "ok").await;
    }
    // `/portForward/{ns}/{pod}` or, with the pod's uid, `/portForward/{ns}/{pod}/{uid}`.
    let parts: Vec<String> = req.path.split('/').map(decode).collect();
    let (ns, pod) = match parts.as_slice() {
        [empty, pf, ns, pod] | [empty, pf, ns, pod, _]
            if empty.is_empty() && pf == "portForward" && !ns.is_empty() && !pod.is_empty() =>
        {
            (ns.clone(), pod.clone())
        }
        _ => {
            let body = format!("{}: not served by the SIMULATED kubelet", req.path);
            return respond(&mut s, 404, "", &body).await;
        }
    };
    if req.method != "GET" && req.method != "POST" {
        return respond(&mut s, 405, "", "method not allowed").await;
    }
    // httpstream.Handshake first, then the SPDY upgrader's check, as the kubelet orders them.
    if !req.has("x-stream-protocol-version") {
        let body = "unable to upgrade: header X-Stream-Protocol-Version does not exist in request";
        return respond(&mut s, 400, "", body).await;
    }
    let offered = req.values("x-stream-protocol-version");
    if !offered.iter().any(|p| p == PROTOCOL) {
        let extra = format!("X-Accepted-Stream-Protocol-Versions: {PROTOCOL}\r\n");
        let body = format!(
            "unable to upgrade: unable to negotiate protocol: client supports {offered:?}, server accepts [\"{PROTOCOL}\"]"
        );
        return respond(&mut s, 403, &extra, &body).await;
    }
    let connection = req.values("connection").join(",").to_ascii_lowercase();
    let upgrade = req.values("upgrade").join(",").to_ascii_lowercase();
    if !connection.contains("upgrade") || !upgrade.contains("spdy/3.1") {
        let body = "unable to upgrade: missing upgrade headers in request (the SIMULATED kubelet serves SPDY/3.1 only)";
        return respond(&mut s, 400, "", body).await;
    }
    tracing::debug!(
        ns,
        pod,
        method = req.method,
        headers = ?req.headers,
        "SIMULATED kubelet: port-forward upgrade"
    );
    s.write_all(
        format!(
            "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: {PROTOCOL}\r\n\r\n"
        )
        .as_bytes(),
    )
    .await?;
    s.flush().await?;
    let (read, write) = tokio::io::split(s);
    let read = std::io::Cursor::new(rest).chain(read);
    let (session, driver) = spdy::session(read, write, Role::Server);
    let target = Target { ns, pod, resolve };
    // The streams end with the connection: the driver ending drops the pairing and forwards.
    tokio::select! {
        r = driver => r,
        () = pair_streams(session.incoming, target) => Ok(()),
    }
}

/// Which pod the connection forwards to.
#[derive(Clone)]
struct Target {
    ns: String,
    pod: String,
    resolve: Resolve,
}

/// The streams of one forwarded connection, as they arrive.
struct Pair {
    error: Option<Stream>,
    data: Option<Stream>,
    deadline: Instant,
}

/// The error stream's header values, checked as the kubelet's `httpStreamReceived` does.
fn check(headers: &Headers) -> Result<(u16, bool), String> {
    let port = header(headers, "port").ok_or("\"port\" header is required")?;
    let port: u16 = port
        .parse()
        .map_err(|e| format!("unable to parse {port:?} as a port: {e}"))?;
    if port < 1 {
        return Err(format!("port \"{port}\" must be > 0"));
    }
    match header(headers, "streamtype") {
        Some("error") => Ok((port, true)),
        Some("data") => Ok((port, false)),
        Some(t) => Err(format!("invalid stream type {t:?}")),
        None => Err("\"streamType\" header is required".into()),
    }
}

/// Accepts the client's streams, pairs them by request id and forwards each complete pair.
async fn pair_streams(mut incoming: tokio::sync::mpsc::Receiver<Stream>, target: Target) {
    let mut pending: HashMap<String, Pair> = HashMap::new();
    let mut forwards = JoinSet::new();
    loop {
        let next_deadline = pending.values().map(|p| p.deadline).min();
        tokio::select! {
            s = incoming.recv() => {
                let Some(s) = s else { return };
                let (port, is_error) = match check(&s.headers) {
                    Ok(v) => v,
                    Err(e) => {
                        tracing::debug!("SIMULATED kubelet port-forward: stream {}: {e}", s.id);
                        let _ = s.tx.reset(CANCEL).await;
                        continue;
                    }
                };
                if s.tx.reply(Headers::new()).await.is_err() {
                    return;
                }
                // An old client sends no request id: the kubelet derives it from the stream
                // ids, the error stream's id and the data stream's two below.
                let id = header(&s.headers, "requestid").map_or_else(
                    || if is_error { s.id.to_string() } else { s.id.saturating_sub(2).to_string() },
                    str::to_string,
                );
                let pair = pending.entry(id.clone()).or_insert_with(|| Pair {
                    error: None,
                    data: None,
                    deadline: Instant::now() + PAIR_TIMEOUT,
                });
                let slot = if is_error { &mut pair.error } else { &mut pair.data };
                if slot.is_some() {
                    let which = if is_error { "error" } else { "data" };
                    let msg = format!(
                        "error processing stream for request {id}: {which} stream already assigned"
                    );
                    if let Some(e) = &pair.error {
                        let _ = e.tx.write(msg.as_bytes()).await;
                    }
                    continue;
                }
                *slot = Some(s);
                if pair.error.is_some() && pair.data.is_some()
                    && let Some(Pair { error: Some(error), data: Some(data), .. }) = pending.remove(&id)
                {
                    forwards.spawn(forward(target.clone(), port, error, data));
                }
            }
            () = sleep_until(next_deadline) => {
                let now = Instant::now();
                let expired: Vec<String> = pending
                    .iter()
                    .filter(|(_, p)| p.deadline <= now)
                    .map(|(id, _)| id.clone())
                    .collect();
                for id in expired {
                    if let Some(Pair { error: Some(e), .. }) = pending.remove(&id) {
                        let msg = format!("(request={id}) timed out waiting for streams");
                        let _ = e.tx.write(msg.as_bytes()).await;
                        let _ = e.tx.finish().await;
                    }
                }
            }
            Some(_) = forwards.join_next(), if !forwards.is_empty() => {}
        }
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

/// One forwarded connection: the pod's port connected, bytes copied both ways until both sides
/// have ended, the error stream then finished (with the failure, if any).
async fn forward(target: Target, port: u16, error: Stream, data: Stream) {
    let connected = match (target.resolve)(&target.ns, &target.pod, port) {
        None => Err("connect: connection refused (no such port in the SIMULATED pod)".to_string()),
        Some(addr) => match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr)).await {
            Ok(Ok(tcp)) => Ok(tcp),
            Ok(Err(e)) => Err(format!("dial tcp {addr}: {e}")),
            Err(_) => Err(format!("dial tcp {addr}: i/o timeout")),
        },
    };
    let result = match connected {
        Ok(tcp) => copy(tcp, data).await,
        Err(why) => {
            // The kubelet resets the data stream after writing why to the error stream.
            let _ = data.tx.reset(CANCEL).await;
            Err(format!(
                "SIMULATED kubelet: failed to connect to localhost:{port} inside namespace \"{ns}\" of pod \"{pod}\": {why}",
                ns = target.ns,
                pod = target.pod,
            ))
        }
    };
    if let Err(why) = result {
        let msg = format!(
            "error forwarding port {port} to pod {pod}_{ns}: {why}",
            pod = target.pod,
            ns = target.ns
        );
        tracing::debug!("{msg}");
        let _ = error.tx.write(msg.as_bytes()).await;
    }
    let _ = error.tx.finish().await;
}

/// Copies between the data stream and the pod's port, each end passed on as a half-close. A
/// reset of the stream or a broken connection ends both directions.
async fn copy(tcp: TcpStream, data: Stream) -> Result<(), String> {
    let (mut from_pod, mut to_pod) = tcp.into_split();
    let Stream {
        rx: mut from_client,
        tx: to_client,
        ..
    } = data;
    let upstream = async {
        while let Some(bytes) = from_client.read().await.map_err(|e| e.to_string())? {
            to_pod.write_all(&bytes).await.map_err(|e| e.to_string())?;
        }
        // The client finished: so does the pod's side of the connection.
        to_pod.shutdown().await.map_err(|e| e.to_string())
    };
    let downstream = async {
        let mut buf = vec![0u8; 32 * 1024];
        loop {
            let n = from_pod.read(&mut buf).await.map_err(|e| e.to_string())?;
            if n == 0 {
                return to_client.finish().await.map_err(|e| e.to_string());
            }
            to_client
                .write(&buf[..n])
                .await
                .map_err(|e| e.to_string())?;
        }
    };
    tokio::try_join!(upstream, downstream).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(pairs: &[(&str, &str)]) -> Headers {
        pairs
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn streams_are_checked_as_the_kubelet_checks_them() {
        assert_eq!(
            check(&h(&[("port", "2379"), ("streamtype", "data")])),
            Ok((2379, false))
        );
        assert_eq!(
            check(&h(&[("port", "1"), ("streamtype", "error")])),
            Ok((1, true))
        );
        for bad in [
            h(&[("streamtype", "data")]),
            h(&[("port", "0"), ("streamtype", "data")]),
            h(&[("port", "65536"), ("streamtype", "data")]),
            h(&[("port", "x"), ("streamtype", "data")]),
            h(&[("port", "80")]),
            h(&[("port", "80"), ("streamtype", "stdin")]),
        ] {
            assert!(check(&bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn path_parts_are_decoded() {
        assert_eq!(decode("kube%2Dsystem"), "kube-system");
        assert_eq!(decode("a%2"), "a%2");
    }
}
