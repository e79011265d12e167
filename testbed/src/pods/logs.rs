//! SIMULATED kubelet API of the image pods' node ([`super::image`]): the one endpoint the API
//! server's `pods/log` calls, `GET /containerLogs/{namespace}/{pod}/{container}`, so `kubectl
//! logs` and every client of `pods/log` read an image pod's containers as on a cluster.
//!
//! How the API server gets here (kubernetes v1.36.3): `LogLocation`
//! (`pkg/registry/core/pod/strategy.go`) builds `https://<address>:<port>/containerLogs/...`
//! from the pod's Node, its address by `--kubelet-preferred-address-types` (the testbed's
//! puts `InternalIP`, 127.0.0.1, first) and its port from the Node's
//! `status.daemonEndpoints.kubeletEndpoint.Port`, which the kubelet registers; its query carries
//! `follow`, `previous`, `timestamps`, `sinceSeconds`, `sinceTime` (RFC 3339), `tailLines`,
//! `limitBytes` and `stream`. The API server checks the kubelet's certificate only when it has
//! `--kubelet-certificate-authority` (`transportConfig` in `pkg/kubelet/client/kubelet_client.go`
//! sets `Insecure` without a CA), which the testbed does not give: the certificate here is
//! self-signed (rcgen).
//!
//! What it answers, as the kubelet's `getContainerLogs` (`pkg/kubelet/server/server.go`) and the
//! CRI log reader (`ReadLogs`, `k8s.io/cri-client` v0.36.3 `pkg/logs/logs.go`) do: the
//! container's log file as the runtime wrote it (the CRI format, [`crate::process::cri`]), each
//! record's text; with `timestamps`, each line prefixed by its time in RFC 3339 with nine
//! fractional digits and a space; `tailLines` counts from the end of the file, then `sinceTime`
//! or `sinceSeconds` drops the records before it, `stream` keeps one stream, `limitBytes` cuts
//! the output; `previous` reads the container's last terminated instance (`previous terminated
//! container ... not found` when there is none); `follow` keeps sending what the container
//! writes until it stops. A pod or container this node does not run is a 404, bad parameters a
//! 400 or 422, as there.
//!
//! What differs from a kubelet, and why: no authentication or authorization of the caller (the
//! testbed gives the API server no kubelet client certificate, and nothing else can reach
//! 127.0.0.1 here); HTTP/1.1 only, one request per connection; `follow` looks at the file every
//! 100 ms instead of waiting on inotify; no other kubelet endpoint (exec, attach, port-forward,
//! stats) is served.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::Timestamp;
use tokio::io::{AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// What the kubelet loop publishes for the server: each pod it runs, by namespace and name, its
/// folder (where each container's log is `<container>.log` and the last terminated instance's
/// `<container>.previous.log`) and whether each container runs.
#[derive(Clone, Default)]
pub(crate) struct LogIndex(Arc<Mutex<HashMap<(String, String), PodLogs>>>);

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct PodLogs {
    pub dir: PathBuf,
    /// Each container's name and whether it runs.
    pub containers: Vec<(String, bool)>,
}

impl LogIndex {
    /// Replaces what is published with `pods`.
    pub(crate) fn publish(&self, pods: HashMap<(String, String), PodLogs>) {
        if let Ok(mut m) = self.0.lock() {
            *m = pods;
        }
    }

    fn pod(&self, ns: &str, pod: &str) -> Option<PodLogs> {
        self.0
            .lock()
            .ok()?
            .get(&(ns.to_string(), pod.to_string()))
            .cloned()
    }

    /// Whether the container runs now (false once its pod is gone).
    fn running(&self, ns: &str, pod: &str, container: &str) -> bool {
        self.pod(ns, pod).is_some_and(|p| {
            p.containers
                .iter()
                .any(|(c, running)| c == container && *running)
        })
    }
}

/// A container's log file in its pod's folder.
pub(crate) fn log_path(dir: &Path, container: &str) -> PathBuf {
    dir.join(format!("{container}.log"))
}

/// Its last terminated instance's, kept when the container is restarted.
pub(crate) fn previous_log_path(dir: &Path, container: &str) -> PathBuf {
    dir.join(format!("{container}.previous.log"))
}

/// Which of the container's streams to send (`stream`, `PodLogsQuerySplitStreams`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Streams {
    All,
    Stdout,
    Stderr,
}

/// The query of one request, checked as the kubelet's `ValidatePodLogOptions` checks it.
#[derive(Clone, Debug, PartialEq)]
struct LogOptions {
    follow: bool,
    previous: bool,
    timestamps: bool,
    since: Option<Timestamp>,
    tail: Option<u64>,
    limit: Option<u64>,
    streams: Streams,
}

/// An HTTP error: status and body.
type Refusal = (u16, String);

/// A percent-encoded query or path part, decoded (`+` is a space in a query).
fn decode(s: &str) -> String {
    let hex = |c: u8| (c as char).to_digit(16);
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match (
            b[i],
            b.get(i + 1).copied().and_then(hex),
            b.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (b'+', _, _) => {
                out.push(b' ');
                i += 1;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn parse_options(query: &str, now: Timestamp) -> Result<LogOptions, Refusal> {
    let mut o = LogOptions {
        follow: false,
        previous: false,
        timestamps: false,
        since: None,
        tail: None,
        limit: None,
        streams: Streams::All,
    };
    let invalid = |what: &str| {
        (
            422,
            format!("{{\"message\": \"Invalid request.\"}} ({what})"),
        )
    };
    let undecodable = || {
        (
            400,
            "{\"message\": \"Unable to decode query.\"}".to_string(),
        )
    };
    let (mut since_seconds, mut since_time) = (None, None);
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let v = decode(v);
        let flag = || match v.as_str() {
            "" | "true" | "1" => Ok(true),
            "false" | "0" => Ok(false),
            _ => Err(undecodable()),
        };
        let int = || v.parse::<i64>().map_err(|_| undecodable());
        match decode(k).as_str() {
            "follow" => o.follow = flag()?,
            "previous" => o.previous = flag()?,
            "timestamps" => o.timestamps = flag()?,
            "sinceSeconds" => since_seconds = Some(int()?),
            "sinceTime" => {
                since_time = Some(v.parse::<Timestamp>().map_err(|_| undecodable())?);
            }
            // `tail` is the old name; `all` is no tail.
            "tailLines" | "tail" if v == "all" => o.tail = None,
            "tailLines" | "tail" => {
                o.tail = Some(u64::try_from(int()?).map_err(|_| invalid("tailLines < 0"))?);
            }
            "limitBytes" => {
                let n = int()?;
                if n < 1 {
                    return Err(invalid("limitBytes < 1"));
                }
                o.limit = u64::try_from(n).ok();
            }
            "stream" => {
                o.streams = match v.as_str() {
                    "All" => Streams::All,
                    "Stdout" => Streams::Stdout,
                    "Stderr" => Streams::Stderr,
                    s => return Err((400, format!("invalid stream type \"{s}\""))),
                }
            }
            _ => {}
        }
    }
    o.since = match (since_seconds, since_time) {
        (Some(_), Some(_)) => return Err(invalid("sinceSeconds and sinceTime")),
        (Some(s), None) if s < 1 => return Err(invalid("sinceSeconds < 1")),
        (Some(s), None) => Some(
            jiff::SignedDuration::from_secs(s)
                .checked_neg()
                .and_then(|d| now.checked_add(d).ok())
                .unwrap_or(Timestamp::MIN),
        ),
        (None, t) => t,
    };
    Ok(o)
}

/// One record of a CRI log line: its time, stream, whether it ends the line, and its text.
fn parse_record(line: &[u8]) -> Option<(Timestamp, &str, bool, &[u8])> {
    let mut parts = line.splitn(4, |b| *b == b' ');
    let time = std::str::from_utf8(parts.next()?).ok()?.parse().ok()?;
    let stream = std::str::from_utf8(parts.next()?).ok()?;
    let full = match parts.next()? {
        b"F" => true,
        b"P" => false,
        _ => return None,
    };
    Some((time, stream, full, parts.next().unwrap_or_default()))
}

/// What the writer carries from one piece of a file to the next (follow).
struct Writer {
    /// Bytes left of `limitBytes`.
    remain: Option<u64>,
    /// Whether the next record starts a line (gets the time prefix).
    line_start: bool,
}

impl Writer {
    fn new(o: &LogOptions) -> Writer {
        Writer {
            remain: o.limit,
            line_start: true,
        }
    }

    fn done(&self) -> bool {
        self.remain == Some(0)
    }

    /// Appends what the complete records of `text` give to `out`, as `ReadLogs` writes them.
    fn records(&mut self, text: &[u8], o: &LogOptions, out: &mut Vec<u8>) {
        for line in text.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            if self.done() {
                return;
            }
            let Some((time, stream, full, body)) = parse_record(line) else {
                continue;
            };
            let wanted = match o.streams {
                Streams::All => true,
                Streams::Stdout => stream == "stdout",
                Streams::Stderr => stream == "stderr",
            };
            if !wanted || o.since.is_some_and(|s| time < s) {
                continue;
            }
            let mut piece = Vec::with_capacity(body.len() + 32);
            if o.timestamps && self.line_start {
                piece.extend_from_slice(format!("{time:.9} ").as_bytes());
            }
            piece.extend_from_slice(body);
            if full {
                piece.push(b'\n');
            }
            self.line_start = full;
            if let Some(r) = self.remain.as_mut() {
                let n = usize::try_from(*r).unwrap_or(usize::MAX).min(piece.len());
                piece.truncate(n);
                *r -= n as u64;
            }
            out.extend_from_slice(&piece);
        }
    }
}

/// Where the last `tail` lines of `text` start (all of it when it has no more).
fn tail_start(text: &[u8], tail: Option<u64>) -> usize {
    let Some(tail) = tail else { return 0 };
    if tail == 0 {
        return text.len();
    }
    let body = text.strip_suffix(b"\n").unwrap_or(text);
    let mut seen = 0u64;
    for (i, b) in body.iter().enumerate().rev() {
        if *b == b'\n' {
            seen += 1;
            if seen == tail {
                return i + 1;
            }
        }
    }
    0
}

/// The file's inode, to tell the file followed from one that replaced it.
fn inode(path: &Path) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| m.ino())
}

/// Serves the kubelet API on `listener` until the future is dropped (which ends every
/// connection with it).
pub(crate) async fn serve(listener: tokio::net::TcpListener, index: LogIndex) {
    let acceptor = match acceptor() {
        Ok(a) => a,
        Err(e) => {
            tracing::warn!("SIMULATED kubelet API: no TLS configuration: {e}");
            return;
        }
    };
    let mut connections = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((tcp, _)) = accepted else { continue };
                let (acceptor, index) = (acceptor.clone(), index.clone());
                connections.spawn(async move {
                    match acceptor.accept(tcp).await {
                        Ok(tls) => {
                            if let Err(e) = handle(tls, &index).await {
                                tracing::debug!("SIMULATED kubelet API: {e}");
                            }
                        }
                        Err(e) => tracing::debug!("SIMULATED kubelet API: TLS: {e}"),
                    }
                });
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// A self-signed serving certificate for 127.0.0.1 and the node's name.
fn acceptor() -> Result<tokio_rustls::TlsAcceptor, String> {
    use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
    let key = rcgen::KeyPair::generate().map_err(|e| e.to_string())?;
    let params =
        rcgen::CertificateParams::new(vec!["127.0.0.1".to_string(), super::image::NODE.into()])
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
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}

/// The longest request head read.
const MAX_HEAD: usize = 16 * 1024;

async fn handle<S>(mut s: S, index: &LogIndex) -> std::io::Result<()>
where
    S: tokio::io::AsyncRead + AsyncWrite + Unpin,
{
    let mut head = Vec::new();
    let mut buf = [0u8; 2048];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = s.read(&mut buf).await?;
        if n == 0 || head.len() + n > MAX_HEAD {
            return Ok(());
        }
        head.extend_from_slice(&buf[..n]);
    }
    let head = String::from_utf8_lossy(&head);
    let mut words = head.lines().next().unwrap_or_default().split(' ');
    let (method, target) = (
        words.next().unwrap_or_default(),
        words.next().unwrap_or_default(),
    );
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let answer = match (method, path.strip_prefix("/containerLogs/")) {
        ("GET", Some(rest)) => request(rest, query, index),
        (_, Some(_)) => Err((405, "method not allowed".to_string())),
        _ => Err((404, format!("{path}: not served by the SIMULATED kubelet"))),
    };
    match answer {
        Err((code, body)) => {
            let reason = match code {
                400 => "Bad Request",
                404 => "Not Found",
                405 => "Method Not Allowed",
                422 => "Unprocessable Entity",
                _ => "Error",
            };
            let head = format!(
                "HTTP/1.1 {code} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            s.write_all(head.as_bytes()).await?;
            s.write_all(body.as_bytes()).await?;
            s.shutdown().await
        }
        Ok(req) => {
            s.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
            )
            .await?;
            stream(&mut s, req, index).await?;
            s.write_all(b"0\r\n\r\n").await?;
            s.shutdown().await
        }
    }
}

/// A request that names a container of this node, with its options.
struct LogRequest {
    ns: String,
    pod: String,
    container: String,
    path: PathBuf,
    options: LogOptions,
}

fn request(rest: &str, query: &str, index: &LogIndex) -> Result<LogRequest, Refusal> {
    let parts: Vec<String> = rest.split('/').map(decode).collect();
    let [ns, pod, container] = parts.as_slice() else {
        return Err((400, "{\"message\": \"Missing container name.\"}".into()));
    };
    let options = parse_options(query, Timestamp::now())?;
    let Some(p) = index.pod(ns, pod) else {
        return Err((404, format!("pod \"{pod}\" does not exist")));
    };
    if !p.containers.iter().any(|(c, _)| c == container) {
        return Err((
            404,
            format!("container \"{container}\" not found in pod \"{pod}\""),
        ));
    }
    let path = if options.previous {
        let prev = previous_log_path(&p.dir, container);
        if !prev.is_file() {
            return Err((
                400,
                format!("previous terminated container \"{container}\" in pod \"{pod}\" not found"),
            ));
        }
        prev
    } else {
        log_path(&p.dir, container)
    };
    Ok(LogRequest {
        ns: ns.clone(),
        pod: pod.clone(),
        container: container.clone(),
        path,
        options,
    })
}

async fn chunk<S: AsyncWrite + Unpin>(s: &mut S, data: &[u8]) -> std::io::Result<()> {
    if data.is_empty() {
        return Ok(());
    }
    s.write_all(format!("{:x}\r\n", data.len()).as_bytes())
        .await?;
    s.write_all(data).await?;
    s.write_all(b"\r\n").await?;
    s.flush().await
}

/// Sends the log: the file as it is, then, with `follow`, what is appended to it until the
/// container stops (or its file is replaced, or the limit is reached).
async fn stream<S: AsyncWrite + Unpin>(
    s: &mut S,
    req: LogRequest,
    index: &LogIndex,
) -> std::io::Result<()> {
    let o = &req.options;
    let ino = inode(&req.path);
    let text = tokio::fs::read(&req.path).await.unwrap_or_default();
    // Only complete records: the runtime may be half-way through one.
    let complete = text.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    let start = tail_start(&text[..complete], o.tail);
    let mut w = Writer::new(o);
    let mut out = Vec::new();
    w.records(&text[start..complete], o, &mut out);
    chunk(s, &out).await?;
    if !o.follow || o.previous {
        return Ok(());
    }
    let mut offset = complete as u64;
    loop {
        if w.done() {
            return Ok(());
        }
        let running = index.running(&req.ns, &req.pod, &req.container);
        let text = read_from(&req.path, offset).await;
        let complete = text.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        if complete > 0 {
            let mut out = Vec::new();
            w.records(&text[..complete], o, &mut out);
            chunk(s, &out).await?;
            offset += complete as u64;
            continue;
        }
        if !running || inode(&req.path) != ino {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The file's bytes from `offset` on (nothing when it is gone), at most 1 MiB at a time.
async fn read_from(path: &Path, offset: u64) -> Vec<u8> {
    use tokio::io::AsyncSeekExt;
    let Ok(mut f) = tokio::fs::File::open(path).await else {
        return Vec::new();
    };
    if f.seek(std::io::SeekFrom::Start(offset)).await.is_err() {
        return Vec::new();
    }
    let mut out = Vec::new();
    let _ = f.take(1 << 20).read_to_end(&mut out).await;
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    const LOG: &str = "2026-01-02T10:00:00.5Z stdout F first\n\
2026-01-02T10:00:01.000000001Z stderr F second\n\
2026-01-02T10:00:02Z stdout P thi\n\
2026-01-02T10:00:02.1Z stdout F rd\n\
2026-01-02T10:00:03Z stdout F fourth\n";

    fn render(query: &str) -> String {
        let o = parse_options(query, ts("2026-01-02T10:00:04Z")).unwrap();
        let text = LOG.as_bytes();
        let mut out = Vec::new();
        Writer::new(&o).records(&text[tail_start(text, o.tail)..], &o, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn records_are_read_back_as_the_kubelet_writes_them() {
        assert_eq!(render(""), "first\nsecond\nthird\nfourth\n");
        assert_eq!(
            render("timestamps=true&tailLines=3"),
            "2026-01-02T10:00:02.000000000Z third\n2026-01-02T10:00:03.000000000Z fourth\n"
        );
        assert_eq!(render("sinceSeconds=3"), "second\nthird\nfourth\n");
        assert_eq!(
            render("sinceTime=2026-01-02T10%3A00%3A02Z"),
            "third\nfourth\n"
        );
        assert_eq!(render("stream=Stderr"), "second\n");
        assert_eq!(render("limitBytes=8"), "first\nse");
        assert_eq!(render("tailLines=0"), "");
    }

    #[test]
    fn bad_options_are_refused_as_the_kubelet_refuses_them() {
        let now = ts("2026-01-02T10:00:04Z");
        for (q, code) in [
            ("sinceSeconds=0", 422),
            ("sinceSeconds=1&sinceTime=2026-01-02T10:00:02Z", 422),
            ("limitBytes=0", 422),
            ("tailLines=-1", 422),
            ("tailLines=x", 400),
            ("stream=Both", 400),
        ] {
            assert_eq!(parse_options(q, now).unwrap_err().0, code, "{q}");
        }
    }

    /// A line longer than a record is written as partial records and read back whole; a last
    /// line without its newline is kept.
    #[test]
    fn the_copier_splits_long_lines_and_the_reader_joins_them() {
        use crate::process::cri::{MAX_RECORD, copy};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.log");
        let file = Arc::new(Mutex::new(std::fs::File::create(&path).unwrap()));
        let long = "x".repeat(MAX_RECORD + 10);
        let input = format!("{long}\nshort\nno newline");
        copy("t", "stdout", std::io::Cursor::new(input), file)
            .unwrap()
            .join()
            .unwrap();
        let text = std::fs::read(&path).unwrap();
        let tags: Vec<bool> = text
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| parse_record(l).unwrap().2)
            .collect();
        assert_eq!(tags, [false, true, true, true]);
        let o = parse_options("", Timestamp::now()).unwrap();
        let mut out = Vec::new();
        Writer::new(&o).records(&text, &o, &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            format!("{long}\nshort\nno newline\n")
        );
    }

    #[test]
    fn a_record_written_by_the_copier_parses() {
        let t = ts("2026-01-02T10:00:00.000000123Z");
        let rec = crate::process::cri::record(t, "stderr", true, b"a b");
        assert_eq!(
            String::from_utf8_lossy(&rec),
            "2026-01-02T10:00:00.000000123Z stderr F a b\n"
        );
        let line = rec.strip_suffix(b"\n").unwrap();
        assert_eq!(parse_record(line), Some((t, "stderr", true, &b"a b"[..])));
    }
}
