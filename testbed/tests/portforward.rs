//! The SIMULATED kubelet's port-forward endpoint (`testbed::portforward`) behind the real
//! kube-apiserver's `pods/portforward`, as the Cluster API KubeadmControlPlane controller reaches
//! an etcd member through it: a Node whose kubelet endpoint is that server, a pod bound to it,
//! and a SPDY/3.1 client (`testbed::spdy`, its header blocks compressed with the SPDY/3
//! dictionary as Go's spdystream compresses them) upgrading through the API server. Two
//! forwarded connections at once, 4 MiB each way through one of them, and a port the pod does
//! not listen on, reported on the error stream.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;
use testbed::spdy::{self, Headers, Opener, Role, Stream, StreamRx};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const POD: &str = "etcd-0";
/// The port the pod "listens" on (the echo server behind it).
const LISTENING: u16 = 2379;
/// A port nothing behind the pod listens on.
const NOTHING: u16 = 2380;

/// A TCP echo server: each connection's bytes sent back, its end passed on as a half-close.
async fn echo_server() -> SocketAddr {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((c, _)) = l.accept().await {
            tokio::spawn(async move {
                let (mut r, mut w) = c.into_split();
                if tokio::io::copy(&mut r, &mut w).await.is_ok() {
                    let _ = w.shutdown().await;
                }
            });
        }
    });
    addr
}

/// How the client reaches the kubelet through the API server: client-go's SPDY round tripper,
/// or SPDY tunnelled in WebSocket (client-go's `NewSPDYOverWebsocketDialer`, which the
/// KubeadmControlPlane controller tries first), which the API server translates into the same
/// SPDY upgrade to the kubelet.
#[derive(Clone, Copy, Debug)]
enum Transport {
    Spdy,
    WebSocket,
}

/// `pods/{pod}/portforward` upgraded through the API server; returns the SPDY session (its
/// driver spawned) and the response head.
async fn upgrade(
    tb: &testbed::Testbed,
    ns: &str,
    pod: &str,
    transport: Transport,
) -> (spdy::Session, String) {
    use rustls::pki_types::pem::PemObject;
    let ca = rustls::pki_types::CertificateDer::from_pem_file(tb.dir.join("pki/serving-ca.crt"))
        .unwrap();
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let port = tb.api_port().unwrap();
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let mut tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .unwrap();
    let path = format!("/api/v1/namespaces/{ns}/pods/{pod}/portforward");
    let common = format!(
        "Host: 127.0.0.1:{port}\r\nAuthorization: Bearer {}\r\nConnection: Upgrade\r\n",
        testbed::ADMIN_TOKEN
    );
    let request = match transport {
        Transport::Spdy => format!(
            "POST {path} HTTP/1.1\r\n{common}Upgrade: SPDY/3.1\r\n\
             X-Stream-Protocol-Version: portforward.k8s.io\r\nContent-Length: 0\r\n\r\n"
        ),
        Transport::WebSocket => format!(
            "GET {path} HTTP/1.1\r\n{common}Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n\
             Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
             Sec-WebSocket-Protocol: SPDY/3.1+portforward.k8s.io\r\n\r\n"
        ),
    };
    tls.write_all(request.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    // Byte by byte: what follows the head is the session's to read.
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(
            tls.read(&mut byte).await.unwrap(),
            1,
            "the API server closed: {head:?}"
        );
        head.push(byte[0]);
        assert!(head.len() < 64 * 1024);
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    assert!(head.starts_with("HTTP/1.1 101"), "{transport:?}: {head}");
    // The SPDY bytes go over the TLS connection as they are, or in WebSocket messages.
    let session = match transport {
        Transport::Spdy => {
            let (r, w) = tokio::io::split(tls);
            let (session, driver) = spdy::session(r, w, Role::Client);
            tokio::spawn(driver);
            session
        }
        Transport::WebSocket => {
            let (ours, theirs) = tokio::io::duplex(256 * 1024);
            tokio::spawn(websocket_pump(tls, theirs));
            let (r, w) = tokio::io::split(ours);
            let (session, driver) = spdy::session(r, w, Role::Client);
            tokio::spawn(driver);
            session
        }
    };
    (session, head)
}

/// Carries the bytes of `local` in binary WebSocket messages over `net` (a client's frames,
/// masked), and the messages' payloads back; a close message or the end of `net` ends `local`.
async fn websocket_pump<S>(net: S, local: tokio::io::DuplexStream)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let (mut net_r, mut net_w) = tokio::io::split(net);
    let (mut local_r, mut local_w) = tokio::io::split(local);
    let outgoing = async {
        let mut buf = vec![0u8; 64 * 1024];
        let mut key = [0x5au8, 0x17, 0xc3, 0x88];
        loop {
            let n = local_r.read(&mut buf).await.unwrap_or(0);
            let (opcode, payload) = if n == 0 {
                (0x8, &[][..])
            } else {
                (0x2, &buf[..n])
            };
            let mut frame = vec![0x80 | opcode];
            match payload.len() {
                l if l < 126 => frame.push(0x80 | l as u8),
                l if l < 65536 => {
                    frame.push(0x80 | 126);
                    frame.extend_from_slice(&(l as u16).to_be_bytes());
                }
                l => {
                    frame.push(0x80 | 127);
                    frame.extend_from_slice(&(l as u64).to_be_bytes());
                }
            }
            key = key.map(|k| k.rotate_left(3) ^ n as u8);
            frame.extend_from_slice(&key);
            frame.extend(payload.iter().enumerate().map(|(i, b)| b ^ key[i % 4]));
            if net_w.write_all(&frame).await.is_err() || n == 0 {
                return;
            }
        }
    };
    let incoming = async {
        loop {
            let mut h = [0u8; 2];
            if net_r.read_exact(&mut h).await.is_err() {
                break;
            }
            let mut len = u64::from(h[1] & 0x7f);
            if len == 126 {
                len = u64::from(net_r.read_u16().await.unwrap_or(0));
            } else if len == 127 {
                len = net_r.read_u64().await.unwrap_or(0);
            }
            let mut mask = [0u8; 4];
            if h[1] & 0x80 != 0 && net_r.read_exact(&mut mask).await.is_err() {
                break;
            }
            let mut payload = vec![0u8; usize::try_from(len).unwrap()];
            if net_r.read_exact(&mut payload).await.is_err() {
                break;
            }
            payload
                .iter_mut()
                .enumerate()
                .for_each(|(i, b)| *b ^= mask[i % 4]);
            // Binary messages (and their continuations) carry the bytes, a close ends them;
            // nothing else is expected of the API server.
            let opcode = h[0] & 0x0f;
            let data = opcode == 0x0 || opcode == 0x2;
            if opcode == 0x8 || (data && local_w.write_all(&payload).await.is_err()) {
                break;
            }
        }
        let _ = local_w.shutdown().await;
    };
    tokio::join!(outgoing, incoming);
}

fn stream_headers(kind: &str, port: u16, request: u32) -> Headers {
    [
        ("streamtype", kind.to_string()),
        ("port", port.to_string()),
        ("requestid", request.to_string()),
    ]
    .into_iter()
    .map(|(n, v)| (n.to_string(), v))
    .collect()
}

/// The error stream and the data stream of one forwarded connection, opened as client-go does
/// (error first).
async fn open_pair(opener: &Opener, port: u16, request: u32) -> (Stream, Stream) {
    let error = opener
        .open(stream_headers("error", port, request))
        .await
        .unwrap();
    let data = opener
        .open(stream_headers("data", port, request))
        .await
        .unwrap();
    (error, data)
}

/// Everything until the peer's FIN.
async fn read_to_end(rx: &mut StreamRx) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    while let Some(d) = rx.read().await? {
        out.extend(d);
    }
    Ok(out)
}

/// Exactly `n` bytes (not waiting for a FIN).
async fn read_exact(rx: &mut StreamRx, n: usize) -> Vec<u8> {
    let mut out = Vec::new();
    while out.len() < n {
        match rx.read().await.unwrap() {
            Some(d) => out.extend(d),
            None => panic!("FIN after {} of {n} bytes: {out:?}", out.len()),
        }
    }
    out
}

/// Bytes that show a reordering, a loss or a duplicate (an xorshift sequence).
fn pattern(n: usize) -> Vec<u8> {
    let mut x: u32 = 0x9e37_79b9;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

/// The upgrade through the API server, then: two forwarded connections open at once, 4 MiB
/// each way through one, and a port nothing listens on.
async fn forward_through(tb: &testbed::Testbed, ns: &str, transport: Transport) {
    let (session, head) = upgrade(tb, ns, POD, transport).await;
    let head = head.to_ascii_lowercase();
    let negotiated = match transport {
        // The kubelet's answer, relayed.
        Transport::Spdy => {
            head.contains("x-stream-protocol-version: portforward.k8s.io")
                && head.contains("upgrade: spdy/3.1")
        }
        // The API server's own, from the protocol the kubelet's answer names.
        Transport::WebSocket => {
            head.contains("sec-websocket-protocol: spdy/3.1+portforward.k8s.io")
        }
    };
    assert!(negotiated, "{transport:?}: {head}");
    let opener = &session.opener;

    // Two forwarded connections open at once, each answered on its own.
    let (mut e0, mut d0) = open_pair(opener, LISTENING, 0).await;
    let (mut e1, mut d1) = open_pair(opener, LISTENING, 1).await;
    d0.tx.write(b"hello from request 0").await.unwrap();
    d1.tx.write(b"and from request 1").await.unwrap();
    assert_eq!(read_exact(&mut d1.rx, 18).await, b"and from request 1");
    assert_eq!(read_exact(&mut d0.rx, 20).await, b"hello from request 0");
    // Each side's end is passed on: the client's FIN reaches the echo server, whose end
    // comes back as the stream's FIN, after the last bytes.
    d1.tx.write(b", done").await.unwrap();
    d1.tx.finish().await.unwrap();
    assert_eq!(read_to_end(&mut d1.rx).await.unwrap(), b", done");
    assert_eq!(read_to_end(&mut e1.rx).await.unwrap(), b"");
    d0.tx.finish().await.unwrap();
    assert_eq!(read_to_end(&mut d0.rx).await.unwrap(), b"");
    assert_eq!(read_to_end(&mut e0.rx).await.unwrap(), b"");

    // 4 MiB each way through one stream, written while read.
    let payload = pattern(4 << 20);
    let (mut e2, d2) = open_pair(opener, LISTENING, 2).await;
    let Stream {
        rx: mut rx2,
        tx: tx2,
        ..
    } = d2;
    let send = async {
        tx2.write(&payload).await.unwrap();
        tx2.finish().await.unwrap();
    };
    let (_, echoed) = tokio::join!(send, read_to_end(&mut rx2));
    let echoed = echoed.unwrap();
    assert_eq!(echoed.len(), payload.len());
    assert!(echoed == payload, "4 MiB came back altered");
    assert_eq!(read_to_end(&mut e2.rx).await.unwrap(), b"");

    // A port nothing listens on: the reason on the error stream, the data stream reset.
    let (mut e3, mut d3) = open_pair(opener, NOTHING, 3).await;
    let message = String::from_utf8(read_to_end(&mut e3.rx).await.unwrap()).unwrap();
    assert!(
        message.contains("SIMULATED")
            && message.contains(&format!("localhost:{NOTHING}"))
            && message.contains(ns),
        "{message}"
    );
    let reset = d3.rx.read().await.map(|d| d.map(|d| d.len()));
    assert!(
        reset
            .as_ref()
            .is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionReset),
        "{reset:?}"
    );
}

async fn exercise(tb: &testbed::Testbed, client: &kube::Client, ns: &str) {
    let echo = echo_server().await;
    let wanted_ns = ns.to_string();
    let resolve: testbed::portforward::Resolve = Arc::new(move |ns, pod, port| {
        (ns == wanted_ns && pod == POD && port == LISTENING).then_some(echo)
    });
    let server = testbed::portforward::serve(IpAddr::V4(Ipv4Addr::LOCALHOST), resolve)
        .await
        .unwrap();

    // A Node as a kubelet registers it: the API server dials its InternalIP first
    // (--kubelet-preferred-address-types) at its kubelet endpoint's port.
    let node = format!("portforward-test-{}", std::process::id());
    let nodes: Api<Node> = Api::all(client.clone());
    let n: Node = serde_json::from_value(json!({
        "metadata": {"name": node, "labels": {"kubernetes.io/hostname": node}}
    }))
    .unwrap();
    nodes.create(&PostParams::default(), &n).await.unwrap();
    let status = json!({"status": {
        "addresses": [{"type": "InternalIP", "address": "127.0.0.1"},
                      {"type": "Hostname", "address": node}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": server.port()}}
    }});
    nodes
        .patch_status(&node, &PatchParams::default(), &Patch::Merge(status))
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": POD},
        "spec": {"nodeName": node, "containers": [{"name": "etcd",
            "image": "registry.k8s.io/etcd:3.6.0-0",
            "ports": [{"containerPort": LISTENING}]}]}
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();

    for transport in [Transport::Spdy, Transport::WebSocket] {
        let started = Instant::now();
        forward_through(tb, ns, transport).await;
        eprintln!(
            "port-forward through the API server ({transport:?}): {:?} for the upgrade and all streams",
            started.elapsed()
        );
    }

    let _ = pods
        .delete(POD, &DeleteParams::default().grace_period(0))
        .await;
    let _ = nodes.delete(&node, &DeleteParams::default()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn port_forward_through_the_api_server_reaches_the_pods_port() {
    let tb = testbed::shared_bare();
    let (client, ns) = tb.namespace("portforward").await;
    tokio::time::timeout(Duration::from_secs(120), exercise(tb, &client, &ns))
        .await
        .expect("port-forward did not finish within 120 s");
    tb.delete_namespace(&client, &ns).await;
}
