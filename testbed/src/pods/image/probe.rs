//! The image kubelet's HTTP probes (`httpGet`), as a kubelet runs them: reached through a port
//! exposed from the pod's network namespace, 200-399 passing.

use std::time::{Duration, Instant};

use crate::netns::NetSandbox;

/// An HTTP probe of a container, and how it has fared.
pub(super) struct Probe {
    pub(super) path: String,
    /// The host port that reaches the container's port inside the pod's namespace.
    pub(super) port: u16,
    pub(super) initial_delay: Duration,
    pub(super) period: Duration,
    pub(super) failure_threshold: u32,
    pub(super) failures: u32,
    /// When the container started (for the initial delay) and when the probe last ran.
    pub(super) since: Option<Instant>,
    pub(super) last: Option<Instant>,
}

/// The probe `p` describes, when it is an HTTP one (`exec` and `tcpSocket` probes are not
/// run): its port (by number, or by the name of one of the container's `ports`) exposed on the
/// host's loopback.
pub(super) fn of(
    p: Option<&k8s_openapi::api::core::v1::Probe>,
    ports: &[(String, i32)],
    sandbox: &NetSandbox,
) -> Result<Option<Probe>, String> {
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    let Some(p) = p else { return Ok(None) };
    let Some(get) = &p.http_get else {
        return Ok(None);
    };
    let port = match &get.port {
        IntOrString::Int(n) => *n,
        IntOrString::String(name) => ports
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, p)| *p)
            .ok_or_else(|| format!("probe port {name:?} is not a container port"))?,
    };
    let inner = u16::try_from(port).map_err(|_| format!("probe port {port}"))?;
    let host = sandbox.expose(inner).map_err(|e| e.to_string())?;
    let secs = |v: Option<i32>, d: i32| Duration::from_secs(v.unwrap_or(d).max(0) as u64);
    Ok(Some(Probe {
        path: get.path.clone().unwrap_or_else(|| "/".into()),
        port: host,
        initial_delay: secs(p.initial_delay_seconds, 0),
        period: secs(p.period_seconds, 10),
        failure_threshold: p.failure_threshold.unwrap_or(3).max(1) as u32,
        failures: 0,
        since: None,
        last: None,
    }))
}

/// Whether a liveness probe is due: after its initial delay, once a period.
pub(super) fn due(pr: &mut Probe, now: Instant) -> bool {
    let start = *pr.since.get_or_insert(now);
    if now < start + pr.initial_delay || pr.last.is_some_and(|l| now < l + pr.period) {
        return false;
    }
    pr.last = Some(now);
    true
}

/// `GET http://127.0.0.1:<port><path>` as the kubelet's HTTP probe: 200-399 passes.
pub(super) async fn probe_ok(pr: &Probe) -> bool {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let attempt = async {
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", pr.port)).await?;
        s.write_all(
            format!(
                "GET {} HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: kube-probe/1.35\r\nConnection: close\r\n\r\n",
                pr.path
            )
            .as_bytes(),
        )
        .await?;
        let mut buf = [0u8; 64];
        let n = s.read(&mut buf).await?;
        Ok::<String, std::io::Error>(String::from_utf8_lossy(&buf[..n]).to_string())
    };
    match tokio::time::timeout(Duration::from_secs(1), attempt).await {
        Ok(Ok(line)) => line
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse::<u16>().ok())
            .is_some_and(|c| (200..400).contains(&c)),
        _ => false,
    }
}
