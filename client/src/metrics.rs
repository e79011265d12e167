//! What an API server's `/metrics` says about its clients: the deprecated APIs they still call
//! ([`kcore::plan::upgrade::deprecated`]). The text is read as it streams, line by line, and
//! only the samples of one gauge are kept: a kube-apiserver's metrics run to megabytes.

use std::time::Duration;

use futures::{AsyncBufReadExt, AsyncReadExt, StreamExt};
use kcore::plan::upgrade::deprecated::{self, DeprecatedApi, MAX_APIS};

use crate::error::{ApiServer, Error, Op, from_kube};

/// The most bytes of `/metrics` read (a kube-apiserver's are a few megabytes).
pub const MAX_METRICS_BYTES: u64 = 64 * 1024 * 1024;

/// How long reading `/metrics` may take.
pub const METRICS_TIMEOUT: Duration = Duration::from_secs(30);

/// The deprecated APIs the clients of the API server behind `client` requested since it started
/// (`apiserver_requested_deprecated_apis`), at most [`MAX_APIS`].
pub async fn requested_deprecated_apis(
    client: &kube::Client,
    target: &ApiServer,
) -> Result<Vec<DeprecatedApi>, Error> {
    let op = Op::new("get", "", "/metrics", "metrics");
    let request = http::Request::get("/metrics")
        .header(http::header::ACCEPT, "text/plain")
        .body(Vec::new())
        .map_err(|e| Error::other(format!("the /metrics request: {e}")))?;
    let read = async {
        let body = client
            .request_stream(request)
            .await
            .map_err(|e| from_kube(e, target, &op))?;
        let mut lines = body.take(MAX_METRICS_BYTES).lines();
        let mut apis = Vec::new();
        while let Some(line) = lines.next().await {
            let line = line
                .map_err(|e| Error::other(format!("reading /metrics of {}: {e}", target.server)))?;
            if let Some(api) = deprecated::parse_line(&line) {
                apis.push(api);
                if apis.len() >= MAX_APIS {
                    break;
                }
            }
        }
        Ok(apis)
    };
    tokio::time::timeout(METRICS_TIMEOUT, read)
        .await
        .map_err(|_| {
            Error::other(format!(
                "/metrics of {} did not answer within {}",
                target.server,
                kcore::text::human_duration(METRICS_TIMEOUT)
            ))
        })?
}
