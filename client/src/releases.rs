//! The newest patch of each minor an upgrade walks through, from Kubernetes' published
//! stable-release markers (`stable-1.N.txt`, one version per file, as kubeadm reads them for
//! `--kubernetes-version stable-1.N`), laid over the table shipped with this release
//! ([`kcore::version::releases`]). Bounded: one file per minor of the walk, at most
//! [`MAX_MINORS`] of them, [`MAX_MARKER_BYTES`] each, [`MARKERS_TIMEOUT`] for all together; a
//! minor whose marker cannot be read keeps the table's release, and the caller is told why.

use std::time::Duration;

use futures::StreamExt;
use kcore::version::KubeVersion;
use kcore::version::releases::{
    MAX_MARKER_BYTES, ReleaseSource, Releases, marker_name, parse_marker,
};

use crate::fetch::fetch_text;

/// Where the markers are read from: a base URL holding `stable-1.N.txt` (a mirror), or `off`
/// to use the shipped table alone.
pub const MARKERS_ENV: &str = "CAPI_KAMAJI_RELEASE_MARKERS";

/// Kubernetes' release bucket. `https://dl.k8s.io/release` redirects here; the markers are
/// read without following redirects.
pub const DEFAULT_MARKERS: &str = "https://cdn.dl.k8s.io/release";

/// The most minors whose markers one walk reads: a walk across more is a typo of the version.
pub const MAX_MINORS: usize = 16;

/// How long all the markers of one walk may take together.
pub const MARKERS_TIMEOUT: Duration = Duration::from_secs(5);

/// How long one marker may take (a mirror that accepts and never answers).
const MARKER_TIMEOUT: Duration = Duration::from_secs(2);

/// Markers read at once.
const CONCURRENCY: usize = 4;

/// The releases a walk from `from` to `to` steps through, and a note when some markers could
/// not be read (the shipped table stands in for those minors).
pub struct Resolved {
    pub releases: Releases,
    pub note: Option<String>,
}

/// Reads the markers of the minors a walk from `from` to `to` needs from `$MARKERS_ENV` (else
/// [`DEFAULT_MARKERS`]), over the shipped table.
pub async fn resolve(from: &KubeVersion, to: &KubeVersion) -> Resolved {
    let base = std::env::var(MARKERS_ENV).unwrap_or_else(|_| DEFAULT_MARKERS.to_string());
    resolve_from(base.trim(), from, to).await
}

/// [`resolve`] from the markers under `base` (`off`: none).
pub async fn resolve_from(base: &str, from: &KubeVersion, to: &KubeVersion) -> Resolved {
    let shipped = Releases::shipped();
    let minors = Releases::marker_minors(from, to);
    if minors.is_empty() || base == "off" {
        return Resolved {
            releases: shipped,
            note: None,
        };
    }
    if minors.len() > MAX_MINORS {
        return Resolved {
            releases: shipped,
            note: Some(format!(
                "{} minors to walk: more than {MAX_MINORS}, so no stable-release marker was read",
                minors.len()
            )),
        };
    }
    let base = base.trim_end_matches('/');
    let reads = futures::stream::iter(minors)
        .map(|(major, minor)| async move {
            let url = format!("{base}/{}", marker_name(major, minor));
            fetch_text(&url, MAX_MARKER_BYTES, MARKER_TIMEOUT)
                .await
                .map_err(|e| e.to_string())
                .and_then(|body| parse_marker(major, minor, &body))
                .map_err(|e| format!("{url}: {e}"))
        })
        .buffer_unordered(CONCURRENCY)
        .collect::<Vec<_>>();
    let results = match tokio::time::timeout(MARKERS_TIMEOUT, reads).await {
        Ok(r) => r,
        Err(_) => {
            return Resolved {
                releases: shipped,
                note: Some(format!(
                    "the stable-release markers under {base} did not answer within {}",
                    kcore::text::human_duration(MARKERS_TIMEOUT)
                )),
            };
        }
    };
    let mut found = Vec::new();
    let mut failed = Vec::new();
    for r in results {
        match r {
            Ok(v) => found.push(v.to_string()),
            Err(e) => failed.push(e),
        }
    }
    failed.sort();
    let note = failed.first().map(|first| {
        let more = match failed.len() {
            1 => String::new(),
            n => format!(" (and {} more)", n - 1),
        };
        format!(
            "cannot read a stable-release marker: {first}{more}; the shipped table stands in (set {MARKERS_ENV} to a mirror, or to off)"
        )
    });
    Resolved {
        releases: shipped.with(found, ReleaseSource::Markers),
        note,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt};

    /// An HTTP/1.1 server answering `/stable-1.N.txt` from `markers` and 404 otherwise.
    async fn mirror(markers: &'static [(&'static str, &'static str)]) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut buf = [0u8; 4096];
                    let n = sock.read(&mut buf).await.unwrap_or(0);
                    let head = String::from_utf8_lossy(&buf[..n]).to_string();
                    let path = head.split_whitespace().nth(1).unwrap_or("").to_string();
                    let (status, body) = match markers.iter().find(|(p, _)| path == *p) {
                        Some((_, b)) => ("200 OK", b.to_string()),
                        None => ("404 Not Found", "no".to_string()),
                    };
                    let out = format!(
                        "HTTP/1.1 {status}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = sock.write_all(out.as_bytes()).await;
                    let _ = sock.shutdown().await;
                });
            }
        });
        format!("http://{addr}/release/")
    }

    fn v(s: &str) -> KubeVersion {
        KubeVersion::parse(s).unwrap()
    }

    /// The newest patch of each minor from `from`'s to the one before `to`'s.
    fn steps(r: &Resolved, from: &str, to: &str) -> Vec<String> {
        let mut s = r.releases.recorded(&v(from), &v(to));
        s.push(to.to_string());
        s
    }

    #[tokio::test]
    async fn markers_replace_the_table_and_an_unreadable_one_is_named() {
        let base = mirror(&[
            ("/release/stable-1.33.txt", "v1.33.9\n"),
            ("/release/stable-1.34.txt", "v1.35.0\n"),
        ])
        .await;
        let r = resolve_from(&base, &v("v1.33.1"), &v("v1.35.2")).await;
        // 1.33 from the marker; 1.34's marker names another minor, so the table's 1.34.4.
        assert_eq!(
            steps(&r, "v1.33.1", "v1.35.2"),
            ["v1.33.9", "v1.34.4", "v1.35.2"]
        );
        let note = r.note.clone().unwrap();
        assert!(note.contains("stable-1.34.txt holds \"v1.35.0\""), "{note}");
        assert!(note.contains(MARKERS_ENV), "{note}");

        let r = resolve_from("off", &v("v1.33.1"), &v("v1.35.2")).await;
        assert!(r.note.is_none());
        assert_eq!(
            steps(&r, "v1.33.1", "v1.35.2"),
            ["v1.33.6", "v1.34.4", "v1.35.2"]
        );

        let r = resolve_from(&base, &v("v1.20.1"), &v("v1.37.0")).await;
        assert!(r.note.unwrap().contains("more than 16"));
    }

    #[tokio::test]
    async fn a_mirror_that_does_not_answer_costs_the_timeout_at_most() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        // Accepts and never answers.
        let _keep = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((s, _)) = listener.accept().await {
                held.push(s);
            }
        });
        let started = std::time::Instant::now();
        let r = resolve_from(&format!("http://{addr}"), &v("v1.33.1"), &v("v1.35.2")).await;
        assert!(started.elapsed() < MARKERS_TIMEOUT + Duration::from_secs(2));
        let note = r.note.clone().unwrap();
        assert!(note.contains("no complete answer"), "{note}");
        assert_eq!(
            steps(&r, "v1.33.1", "v1.35.2"),
            ["v1.33.6", "v1.34.4", "v1.35.2"]
        );
    }
}
