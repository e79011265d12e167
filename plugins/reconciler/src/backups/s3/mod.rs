//! The S3 client of TenantBackups with an S3 target: rusty-s3 signs each request (a SigV4
//! presigned URL, so no payload hashing) and parses S3's XML answers, reqwest sends it. Objects
//! are streamed up through a buffer of one [`PART`]: a small object is one PUT, a larger one a
//! multipart upload, so memory stays one part whatever the backup's size.
//!
//! Keys are full object names: the target's prefix is already in them
//! (`kcore::ops::backup::folder`).

use std::fmt::Display;
use std::time::Duration;

use kcore::ops::backup::{DEFAULT_REGION, S3Target};
use reqwest::header::ETAG;
use reqwest::{Response, StatusCode, Url};
use rusty_s3::actions::{CompleteMultipartUploadResponse, CreateMultipartUpload, ListObjectsV2};
use rusty_s3::{Credentials, S3Action, UrlStyle};

use crate::Error;

/// The size of every part of a multipart upload but the last, and so the most buffered: what
/// the AWS CLI uses, above S3's 5 MiB minimum.
pub const PART: usize = 8 * 1024 * 1024;

/// S3's limit on the parts of one upload (so objects up to 80,000 MiB at [`PART`]).
pub const MAX_PARTS: u16 = 10_000;

/// The most names [`Bucket::list`] returns: a tenant's folder holds `retention` (at most 1000)
/// backups, so more means a wrong folder, not something to page through for minutes.
pub const MAX_LISTED: usize = 10_000;

/// Each request's limit, from connecting to the answer's last byte: one part is 8 MiB, so this
/// takes links down to about 150 KB/s.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// How long connecting may take, within [`REQUEST_TIMEOUT`].
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a presigned URL is valid: it is signed just before it is sent, so a little longer
/// than the request may take, and no longer (the URL alone grants the request).
const URL_VALIDITY: Duration = Duration::from_secs(90);

/// The most read of an answer's body: a ListObjectsV2 page of 1000 keys is well under this.
const MAX_ANSWER: usize = 8 * 1024 * 1024;

/// The most read of an error's body (S3's `<Error>` document is a few hundred bytes).
const MAX_ERROR_BODY: usize = 64 * 1024;

/// Installs ring as rustls' process-wide crypto provider, which reqwest (built without one)
/// needs before a client is built; an already installed provider is kept.
pub fn install_crypto() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// A bucket with the credentials and the HTTP client to reach it.
#[derive(Debug)]
pub struct Bucket {
    bucket: rusty_s3::Bucket,
    credentials: Credentials,
    http: reqwest::Client,
}

/// What a request is, for its errors: `S3 PUT s3://bucket/key (UploadPart 3)`.
struct Op {
    method: rusty_s3::Method,
    location: String,
    action: String,
}

impl Op {
    fn error(&self, why: impl Display) -> Error {
        Error::Other(format!(
            "S3 {} {} ({}): {why}",
            self.method, self.location, self.action
        ))
    }
}

impl Bucket {
    /// Built from the target and its credentials; dials nothing.
    pub fn new(target: &S3Target, access_key: &str, secret_key: &str) -> Result<Bucket, Error> {
        let bad = |why: &dyn Display| {
            Error::Other(format!(
                "S3 target {} (bucket {}): {why}",
                target.endpoint, target.bucket
            ))
        };
        let endpoint: Url = target.endpoint.parse().map_err(|e| bad(&e))?;
        let style = if target.virtual_hosted_style {
            UrlStyle::VirtualHost
        } else {
            UrlStyle::Path
        };
        let region = target
            .region
            .clone()
            .filter(|r| !r.is_empty())
            .unwrap_or_else(|| DEFAULT_REGION.to_string());
        let bucket = rusty_s3::Bucket::new(endpoint, style, target.bucket.clone(), region)
            .map_err(|e| bad(&e))?;
        // reqwest panics building a client when rustls has no provider.
        install_crypto();
        let http = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .connect_timeout(CONNECT_TIMEOUT)
            // A redirect (wrong region, wrong style) is S3 telling what is wrong, and a signed
            // URL would not be valid where it points anyway.
            .redirect(reqwest::redirect::Policy::none())
            // The image ships no CA bundle: Mozilla's roots as well as any the system has.
            .tls_certs_merge(
                webpki_root_certs::TLS_SERVER_ROOT_CERTS
                    .iter()
                    .filter_map(|c| reqwest::Certificate::from_der(c).ok()),
            )
            .build()
            .map_err(|e| bad(&chain(&e)))?;
        Ok(Bucket {
            bucket,
            credentials: Credentials::new(access_key.to_string(), secret_key.to_string()),
            http,
        })
    }

    /// `s3://bucket/key`, for status and logs.
    pub fn location(&self, key: &str) -> String {
        format!("s3://{}/{key}", self.bucket.name())
    }

    /// Starts an upload of `key`: bytes are buffered up to [`PART`] (8 MiB); the first full
    /// part turns it into a multipart upload (CreateMultipartUpload, UploadPart...,
    /// CompleteMultipartUpload), so memory stays one part whatever the size; a small object is
    /// one PUT at finish.
    pub fn upload(&self, key: &str) -> Upload<'_> {
        Upload {
            bucket: self,
            key: key.to_string(),
            buf: Vec::new(),
            multipart: None,
            size: 0,
        }
    }

    /// The object names (keys with `folder` stripped) directly under `folder` (a prefix ending
    /// in `/`), ListObjectsV2 paged with continuation tokens, at most [`MAX_LISTED`] names (then
    /// an error saying so).
    pub async fn list(&self, folder: &str) -> Result<Vec<String>, Error> {
        self.list_paged(folder, None).await
    }

    /// [`Bucket::list`] with pages of `page` keys (S3's default, 1000, when `None`).
    async fn list_paged(&self, folder: &str, page: Option<usize>) -> Result<Vec<String>, Error> {
        let op = Op {
            method: ListObjectsV2::METHOD,
            location: self.location(folder),
            action: "ListObjectsV2".to_string(),
        };
        if !folder.ends_with('/') {
            return Err(op.error("a folder ends with /"));
        }
        let mut names = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let mut action = self.bucket.list_objects_v2(Some(&self.credentials));
            action.with_prefix(folder);
            // Objects directly under the folder; deeper ones come back as common prefixes.
            action.with_delimiter("/");
            if let Some(page) = page {
                action.with_max_keys(page);
            }
            if let Some(t) = &token {
                action.with_continuation_token(t.as_str());
            }
            let answer = self.send(&op, action.sign(URL_VALIDITY), None).await?;
            let body = read_text(&op, answer, MAX_ANSWER).await?;
            let parsed = ListObjectsV2::parse_response(&body)
                .map_err(|e| op.error(format!("unreadable answer: {e}")))?;
            for object in parsed.contents {
                let Some(name) = object.key.strip_prefix(folder) else {
                    continue;
                };
                if name.is_empty() || name.contains('/') {
                    continue;
                }
                if names.len() >= MAX_LISTED {
                    return Err(op.error(format!(
                        "more than {MAX_LISTED} objects in the folder; is it the right one?"
                    )));
                }
                names.push(name.to_string());
            }
            match parsed.next_continuation_token {
                Some(t) if token.as_deref() != Some(t.as_str()) => token = Some(t),
                Some(_) => return Err(op.error("the listing repeats its continuation token")),
                None => break,
            }
        }
        Ok(names)
    }

    /// Removes `key` (no error when there is no such object, as S3 answers).
    pub async fn delete(&self, key: &str) -> Result<(), Error> {
        let op = self.op(rusty_s3::actions::DeleteObject::METHOD, key, "DeleteObject");
        check_key(&op, key)?;
        let action = self.bucket.delete_object(Some(&self.credentials), key);
        self.send(&op, action.sign(URL_VALIDITY), None).await?;
        Ok(())
    }

    fn op(&self, method: rusty_s3::Method, key: &str, action: impl Into<String>) -> Op {
        Op {
            method,
            location: self.location(key),
            action: action.into(),
        }
    }

    /// `key` as one PUT.
    async fn put(&self, key: &str, body: Vec<u8>) -> Result<(), Error> {
        let op = self.op(rusty_s3::actions::PutObject::METHOD, key, "PutObject");
        let action = self.bucket.put_object(Some(&self.credentials), key);
        self.send(&op, action.sign(URL_VALIDITY), Some(body))
            .await?;
        Ok(())
    }

    /// Begins a multipart upload of `key`: its upload id.
    async fn create_multipart(&self, key: &str) -> Result<String, Error> {
        let op = self.op(CreateMultipartUpload::METHOD, key, "CreateMultipartUpload");
        let action = self
            .bucket
            .create_multipart_upload(Some(&self.credentials), key);
        let answer = self.send(&op, action.sign(URL_VALIDITY), None).await?;
        let body = read_text(&op, answer, MAX_ERROR_BODY).await?;
        let parsed = CreateMultipartUpload::parse_response(&body)
            .map_err(|e| op.error(format!("unreadable answer: {e}")))?;
        Ok(parsed.upload_id().to_string())
    }

    /// Sends part `number` of upload `id`: its ETag.
    async fn upload_part(
        &self,
        key: &str,
        id: &str,
        number: u16,
        body: Vec<u8>,
    ) -> Result<String, Error> {
        let op = self.op(
            rusty_s3::actions::UploadPart::METHOD,
            key,
            format!("UploadPart {number}"),
        );
        let action = self
            .bucket
            .upload_part(Some(&self.credentials), key, number, id);
        let answer = self
            .send(&op, action.sign(URL_VALIDITY), Some(body))
            .await?;
        answer
            .headers()
            .get(ETAG)
            .and_then(|v| v.to_str().ok())
            .filter(|v| !v.is_empty())
            .map(str::to_string)
            .ok_or_else(|| op.error("no ETag in the answer"))
    }

    /// Completes upload `id` of the parts whose ETags are `etags`, in order.
    async fn complete(&self, key: &str, id: &str, etags: &[String]) -> Result<(), Error> {
        let action = self.bucket.complete_multipart_upload(
            Some(&self.credentials),
            key,
            id,
            etags.iter().map(String::as_str),
        );
        let op = self.op(
            method_of(&action),
            key,
            format!("CompleteMultipartUpload of {} parts", etags.len()),
        );
        let url = action.sign(URL_VALIDITY);
        let answer = self
            .send(&op, url, Some(action.body().into_bytes()))
            .await?;
        // S3 may answer 200 and fail later, with an <Error> in the body.
        let body = read_text(&op, answer, MAX_ERROR_BODY).await?;
        match CompleteMultipartUploadResponse::parse(&body) {
            Ok(_) => Ok(()),
            Err(e) => Err(op.error(match s3_error(&body) {
                Some(said) => said,
                None => format!("unreadable answer: {e}"),
            })),
        }
    }

    /// Aborts upload `id`, so that its parts are not stored (and paid for) on.
    async fn abort_multipart(&self, key: &str, id: &str) -> Result<(), Error> {
        let op = self.op(
            rusty_s3::actions::AbortMultipartUpload::METHOD,
            key,
            "AbortMultipartUpload",
        );
        let action = self
            .bucket
            .abort_multipart_upload(Some(&self.credentials), key, id);
        self.send(&op, action.sign(URL_VALIDITY), None).await?;
        Ok(())
    }

    /// Sends `op` to the presigned `url`: the answer when its status is a success, else an error
    /// with the status and what S3 said.
    async fn send(&self, op: &Op, url: Url, body: Option<Vec<u8>>) -> Result<Response, Error> {
        let method = match op.method {
            rusty_s3::Method::Head => reqwest::Method::HEAD,
            rusty_s3::Method::Get => reqwest::Method::GET,
            rusty_s3::Method::Post => reqwest::Method::POST,
            rusty_s3::Method::Put => reqwest::Method::PUT,
            rusty_s3::Method::Delete => reqwest::Method::DELETE,
        };
        let mut request = self.http.request(method, url);
        if let Some(body) = body {
            // Vec bodies carry their Content-Length, which S3 requires of PUTs.
            request = request.body(body);
        }
        let answer = request.send().await.map_err(|e| op.error(transport(e)))?;
        let status = answer.status();
        if status.is_success() {
            return Ok(answer);
        }
        let body = read_capped(answer, MAX_ERROR_BODY)
            .await
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default();
        Err(op.error(status_error(status, &body)))
    }
}

/// An object being written; see [`Bucket::upload`]. After an error from `write`, call `abort`;
/// `finish` aborts by itself when it fails.
pub struct Upload<'a> {
    bucket: &'a Bucket,
    key: String,
    /// Up to [`PART`] bytes not sent yet.
    buf: Vec<u8>,
    /// Once the first part was sent.
    multipart: Option<Multipart>,
    /// The bytes written, sent or buffered.
    size: u64,
}

struct Multipart {
    id: String,
    /// The ETag of each part sent, in part order.
    etags: Vec<String>,
}

impl Upload<'_> {
    /// Buffers `bytes`, sending a part each time the buffer is full and more comes.
    pub async fn write(&mut self, bytes: &[u8]) -> Result<(), Error> {
        let added = u64::try_from(bytes.len()).ok();
        self.size = added
            .and_then(|n| self.size.checked_add(n))
            .ok_or_else(|| self.op("write").error("the object's size overflows"))?;
        let mut rest = bytes;
        while !rest.is_empty() {
            // Sent only when more comes, so the last part is never empty and an object of
            // exactly one part is a single PUT.
            if self.buf.len() >= PART {
                self.send_part().await?;
            }
            let n = rest.len().min(PART - self.buf.len());
            let wanted = self.buf.len() + n;
            if wanted > self.buf.capacity() {
                // Grown towards one part, never past it.
                let target = self.buf.capacity().saturating_mul(2).clamp(wanted, PART);
                self.buf.reserve_exact(target - self.buf.len());
            }
            self.buf.extend_from_slice(&rest[..n]);
            rest = &rest[n..];
        }
        Ok(())
    }

    /// Sends what is left and completes; returns the object's size in bytes.
    pub async fn finish(mut self) -> Result<u64, Error> {
        let bucket = self.bucket;
        check_key(&self.op("finish"), &self.key)?;
        let last = std::mem::take(&mut self.buf);
        let Some(mut multipart) = self.multipart.take() else {
            bucket.put(&self.key, last).await?;
            return Ok(self.size);
        };
        let done = async {
            if !last.is_empty() {
                let number = part_number(multipart.etags.len())
                    .map_err(|e| self.op("UploadPart").error(e))?;
                let etag = bucket
                    .upload_part(&self.key, &multipart.id, number, last)
                    .await?;
                multipart.etags.push(etag);
            }
            bucket
                .complete(&self.key, &multipart.id, &multipart.etags)
                .await
        }
        .await;
        if done.is_err() {
            abort_logged(bucket, &self.key, &multipart.id).await;
        }
        done.map(|()| self.size)
    }

    /// Aborts a multipart upload begun (best effort), so no parts are left behind.
    pub async fn abort(self) {
        if let Some(multipart) = &self.multipart {
            abort_logged(self.bucket, &self.key, &multipart.id).await;
        }
    }

    /// Sends the full buffer as the next part, beginning the multipart upload with the first.
    async fn send_part(&mut self) -> Result<(), Error> {
        check_key(&self.op("UploadPart"), &self.key)?;
        let bucket = self.bucket;
        let mut multipart = match self.multipart.take() {
            Some(m) => m,
            None => Multipart {
                id: bucket.create_multipart(&self.key).await?,
                etags: Vec::new(),
            },
        };
        let body = std::mem::take(&mut self.buf);
        let sent = match part_number(multipart.etags.len()) {
            Ok(number) => {
                bucket
                    .upload_part(&self.key, &multipart.id, number, body)
                    .await
            }
            Err(e) => Err(self.op("UploadPart").error(e)),
        };
        let sent = sent.map(|etag| {
            multipart.etags.push(etag);
            // The next part's room, now that the last one was sent and freed.
            self.buf.reserve_exact(PART);
        });
        // Kept whatever happened, for `abort`.
        self.multipart = Some(multipart);
        sent
    }

    fn op(&self, action: &str) -> Op {
        self.bucket
            .op(rusty_s3::Method::Put, &self.key, action.to_string())
    }
}

/// The HTTP method of `action`.
fn method_of<'a, A: S3Action<'a>>(_: &A) -> rusty_s3::Method {
    A::METHOD
}

/// Aborts upload `id` of `key`, logging a failure (the upload stays until the bucket's
/// lifecycle rules remove it).
async fn abort_logged(bucket: &Bucket, key: &str, id: &str) {
    if let Err(e) = bucket.abort_multipart(key, id).await {
        tracing::warn!(error = %e, "could not abort a multipart upload; its parts stay in the bucket");
    }
}

/// The number of the part after `sent` parts, within S3's [`MAX_PARTS`].
fn part_number(sent: usize) -> Result<u16, String> {
    sent.checked_add(1)
        .and_then(|n| u16::try_from(n).ok())
        .filter(|n| *n <= MAX_PARTS)
        .ok_or_else(|| {
            format!(
                "the object needs more than {MAX_PARTS} parts of {} MiB",
                PART / (1024 * 1024)
            )
        })
}

/// Rejects keys a URL cannot carry as they are: rusty-s3 resolves `.` and `..` segments, and an
/// empty key addresses the bucket itself (DeleteObject would be DeleteBucket).
fn check_key(op: &Op, key: &str) -> Result<(), Error> {
    let bad =
        key.is_empty() || key.starts_with('/') || key.split('/').any(|s| s == "." || s == "..");
    if bad {
        return Err(
            op.error("not an object key (empty, starting with /, or with a . or .. segment)")
        );
    }
    Ok(())
}

/// The status and, when the body is S3's `<Error>`, its Code and Message.
fn status_error(status: StatusCode, body: &str) -> String {
    match s3_error(body) {
        Some(said) => format!("HTTP {status}: {said}"),
        None => format!("HTTP {status}"),
    }
}

/// `Code: Message` of S3's `<Error>` document, on one line.
fn s3_error(body: &str) -> Option<String> {
    if !body.contains("<Error>") {
        return None;
    }
    let code = xml_element(body, "Code");
    let message = xml_element(body, "Message");
    match (code, message) {
        (Some(c), Some(m)) => Some(format!("{c}: {m}")),
        (Some(c), None) => Some(c),
        (None, Some(m)) => Some(m),
        (None, None) => None,
    }
}

/// The text of the first `<name>` element of `xml`, unescaped and on one line.
fn xml_element(xml: &str, name: &str) -> Option<String> {
    let open = format!("<{name}>");
    let close = format!("</{name}>");
    let start = xml.find(&open)? + open.len();
    let len = xml[start..].find(&close)?;
    let text = xml[start..start + len]
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&amp;", "&");
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    (!one_line.is_empty()).then_some(one_line)
}

/// A failure to get an answer, with its causes and without the URL (its signature grants the
/// request for a while).
fn transport(e: reqwest::Error) -> String {
    if e.is_timeout() {
        return format!("no answer within {}s", REQUEST_TIMEOUT.as_secs());
    }
    chain(&e.without_url())
}

/// An error and its sources, `: `-separated.
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let c = cause.to_string();
        if !s.contains(&c) {
            s.push_str(": ");
            s.push_str(&c);
        }
        source = cause.source();
    }
    s
}

/// The body of a successful answer, as text.
async fn read_text(op: &Op, answer: Response, max: usize) -> Result<String, Error> {
    let bytes = read_capped(answer, max).await.map_err(|e| op.error(e))?;
    String::from_utf8(bytes).map_err(|_| op.error("the answer is not UTF-8"))
}

/// At most `max` bytes of the body: an error past them.
async fn read_capped(mut answer: Response, max: usize) -> Result<Vec<u8>, String> {
    let mut bytes = Vec::new();
    while let Some(chunk) = answer.chunk().await.map_err(transport)? {
        if bytes.len().saturating_add(chunk.len()) > max {
            return Err(format!("the answer is larger than {max} bytes"));
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests;
