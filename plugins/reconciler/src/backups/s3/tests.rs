use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use super::*;

const AK: &str = "test-access-key";
const SK: &str = "test-secret-key";
const BUCKET: &str = "backups";

/// s3s-fs serving a temporary directory on a free port, killed on drop.
struct Server {
    child: Child,
    port: u16,
    root: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `$S3S_FS`, else where `testbed/build-bins.sh s3` puts it.
fn s3s_fs() -> PathBuf {
    if let Some(p) = std::env::var_os("S3S_FS").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let cache = std::env::var_os("CAPI_TESTBED_CACHE")
        .filter(|c| !c.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            std::env::var_os("XDG_CACHE_HOME")
                .filter(|c| !c.is_empty())
                .map(PathBuf::from)
                .unwrap_or_else(|| {
                    PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache")
                })
                .join("kubectl-capi-kamaji")
        });
    cache.join("s3s-fs-0.14.1/bin/s3s-fs")
}

impl Server {
    fn start() -> Server {
        let bin = s3s_fs();
        assert!(
            bin.is_file(),
            "no s3s-fs at {}: run `testbed/build-bins.sh s3` (or set S3S_FS)",
            bin.display()
        );
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join(BUCKET)).unwrap();
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(&bin)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--access-key", AK, "--secret-key", SK])
            .arg(root.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut server = Server { child, port, root };
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
            if let Some(status) = server.child.try_wait().unwrap() {
                panic!("s3s-fs exited: {status}");
            }
            assert!(Instant::now() < deadline, "s3s-fs not listening after 30s");
            std::thread::sleep(Duration::from_millis(20));
        }
        server
    }

    fn target(&self) -> S3Target {
        S3Target {
            endpoint: format!("http://127.0.0.1:{}/", self.port),
            bucket: BUCKET.to_string(),
            credentials_secret: "s3-credentials".to_string(),
            ..Default::default()
        }
    }

    fn bucket(&self) -> Bucket {
        Bucket::new(&self.target(), AK, SK).unwrap()
    }

    fn file(&self, key: &str) -> PathBuf {
        self.root.path().join(BUCKET).join(key)
    }
}

/// What is stored at `key`, read back through a presigned GET.
async fn get(bucket: &Bucket, key: &str) -> Vec<u8> {
    let url = bucket
        .bucket
        .get_object(Some(&bucket.credentials), key)
        .sign(URL_VALIDITY);
    let answer = bucket.http.get(url).send().await.unwrap();
    assert!(
        answer.status().is_success(),
        "GET {key}: {}",
        answer.status()
    );
    answer.bytes().await.unwrap().to_vec()
}

/// Incompressible bytes (xorshift64*).
fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        out.extend_from_slice(&x.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes());
    }
    out.truncate(len);
    out
}

async fn put(bucket: &Bucket, key: &str, bytes: &[u8]) {
    let mut up = bucket.upload(key);
    up.write(bytes).await.unwrap();
    assert_eq!(up.finish().await.unwrap(), bytes.len() as u64);
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

#[tokio::test]
async fn a_small_object_is_one_put_and_reads_back() {
    let server = Server::start();
    let bucket = server.bucket();
    let key = "ns/t1/t1-20250101T000000Z.kamaji-backup";
    let bytes = b"a small backup".repeat(100);
    let mut up = bucket.upload(key);
    up.write(&bytes[..700]).await.unwrap();
    up.write(&bytes[700..]).await.unwrap();
    assert!(up.multipart.is_none());
    assert_eq!(up.finish().await.unwrap(), 1400);
    assert_eq!(get(&bucket, key).await, bytes);
    assert_eq!(std::fs::read(server.file(key)).unwrap(), bytes);
    assert_eq!(
        bucket.location(key),
        "s3://backups/ns/t1/t1-20250101T000000Z.kamaji-backup"
    );

    // An empty object, and one of exactly one part, are single PUTs too.
    put(&bucket, "ns/empty", b"").await;
    assert_eq!(get(&bucket, "ns/empty").await, b"");
    let one = noise(PART, 7);
    let mut up = bucket.upload("ns/one-part");
    up.write(&one).await.unwrap();
    assert!(up.multipart.is_none());
    assert_eq!(up.finish().await.unwrap(), PART as u64);
    assert_eq!(get(&bucket, "ns/one-part").await, one);
}

#[tokio::test]
async fn a_large_object_goes_multipart_and_reads_back() {
    let server = Server::start();
    let bucket = server.bucket();
    let key = "ns/t1/big.kamaji-backup";
    let bytes = noise(20 * 1024 * 1024, 42);
    let mut up = bucket.upload(key);
    for chunk in bytes.chunks(1024 * 1024) {
        up.write(chunk).await.unwrap();
        assert!(up.buf.capacity() <= PART);
    }
    let parts = up.multipart.as_ref().map(|m| m.etags.len());
    assert_eq!(parts, Some(2), "two full parts sent, the third at finish");
    assert_eq!(up.finish().await.unwrap(), bytes.len() as u64);
    let back = get(&bucket, key).await;
    assert_eq!(back.len(), bytes.len());
    assert!(back == bytes, "the object read back differs");
}

#[tokio::test]
async fn an_aborted_upload_leaves_no_object() {
    let server = Server::start();
    let bucket = server.bucket();
    let mut up = bucket.upload("ns/t1/aborted");
    up.write(&noise(PART + 1, 3)).await.unwrap();
    up.write(b"more").await.unwrap();
    assert!(up.multipart.is_some());
    up.abort().await;
    assert_eq!(bucket.list("ns/t1/").await.unwrap(), Vec::<String>::new());
    // s3s-fs keeps parts as `.upload_id-<id>.part-<n>` files in its root.
    let parts: Vec<_> = std::fs::read_dir(server.root.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".upload_id-"))
        .collect();
    assert!(parts.is_empty(), "parts left behind: {parts:?}");
    // Nothing written, aborting is a no-op.
    bucket.upload("ns/t1/nothing").abort().await;
}

#[tokio::test]
async fn list_names_what_is_directly_under_a_folder_and_delete_removes_one() {
    let server = Server::start();
    let bucket = server.bucket();
    for key in [
        "p/ns/t1/a",
        "p/ns/t1/b",
        "p/ns/t1/c",
        "p/ns/t1/d",
        "p/ns/t1/e",
        "p/ns/t1/deeper/x",
        "p/ns/t10/other",
        "p/ns/t2/f",
    ] {
        put(&bucket, key, key.as_bytes()).await;
    }
    let all = ["a", "b", "c", "d", "e"].map(String::from).to_vec();
    assert_eq!(sorted(bucket.list("p/ns/t1/").await.unwrap()), all);
    // Paged with continuation tokens.
    assert_eq!(
        sorted(bucket.list_paged("p/ns/t1/", Some(2)).await.unwrap()),
        all
    );
    assert_eq!(
        bucket.list("p/ns/t2/").await.unwrap(),
        vec!["f".to_string()]
    );
    assert_eq!(
        bucket.list("p/ns/none/").await.unwrap(),
        Vec::<String>::new()
    );
    let e = bucket.list("p/ns/t1").await.unwrap_err().to_string();
    assert!(e.contains("ends with /"), "{e}");

    bucket.delete("p/ns/t1/c").await.unwrap();
    assert_eq!(
        sorted(bucket.list("p/ns/t1/").await.unwrap()),
        ["a", "b", "d", "e"].map(String::from).to_vec()
    );
    assert!(!server.file("p/ns/t1/c").exists());
    assert!(server.file("p/ns/t1/d").exists());
    let e = bucket.delete("p/../x").await.unwrap_err().to_string();
    assert!(e.contains("not an object key"), "{e}");
}

#[tokio::test]
async fn a_wrong_secret_key_names_the_status_and_s3s_code() {
    let server = Server::start();
    let bucket = Bucket::new(&server.target(), AK, "not-the-secret").unwrap();
    let mut up = bucket.upload("ns/t1/x");
    up.write(b"x").await.unwrap();
    let e = up.finish().await.unwrap_err().to_string();
    assert!(e.contains("403"), "{e}");
    assert!(e.contains("SignatureDoesNotMatch"), "{e}");
    assert!(e.contains("PUT s3://backups/ns/t1/x"), "{e}");
    assert!(!e.contains('\n'), "{e}");
    let e = bucket.list("ns/t1/").await.unwrap_err().to_string();
    assert!(
        e.contains("403") && e.contains("SignatureDoesNotMatch"),
        "{e}"
    );
}

#[tokio::test]
async fn nothing_listening_says_so_without_the_signed_url() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let target = S3Target {
        endpoint: format!("http://127.0.0.1:{port}"),
        bucket: BUCKET.to_string(),
        ..Default::default()
    };
    let bucket = Bucket::new(&target, AK, SK).unwrap();
    let e = bucket.delete("k").await.unwrap_err().to_string();
    assert!(
        e.starts_with("S3 DELETE s3://backups/k (DeleteObject): "),
        "{e}"
    );
    assert!(!e.contains("X-Amz-Signature"), "{e}");
}

#[test]
fn targets_build_buckets_in_either_style() {
    let mut target = S3Target {
        endpoint: "https://s3.eu-west-1.amazonaws.com/".to_string(),
        bucket: "my-backups".to_string(),
        region: Some("eu-west-1".to_string()),
        ..Default::default()
    };
    let path = Bucket::new(&target, AK, SK).unwrap();
    assert_eq!(
        path.bucket.object_url("a/b").as_str(),
        "https://s3.eu-west-1.amazonaws.com/my-backups/a/b"
    );
    assert_eq!(path.bucket.region(), "eu-west-1");
    target.virtual_hosted_style = true;
    target.region = None;
    let host = Bucket::new(&target, AK, SK).unwrap();
    assert_eq!(
        host.bucket.object_url("a/b").as_str(),
        "https://my-backups.s3.eu-west-1.amazonaws.com/a/b"
    );
    assert_eq!(host.bucket.region(), DEFAULT_REGION);
    assert!(!format!("{host:?}").contains(SK));

    target.endpoint = "ftp://example.com".to_string();
    let e = Bucket::new(&target, AK, SK).unwrap_err().to_string();
    assert!(
        e.contains("ftp://example.com") && e.contains("scheme"),
        "{e}"
    );
    target.endpoint = "not a url".to_string();
    assert!(Bucket::new(&target, AK, SK).is_err());
}

#[test]
fn parts_stop_at_ten_thousand() {
    assert_eq!(part_number(0), Ok(1));
    assert_eq!(part_number(9_999), Ok(10_000));
    assert!(part_number(10_000).unwrap_err().contains("10000 parts"));
    assert!(part_number(usize::MAX).is_err());
}

#[test]
fn s3_errors_read_as_code_and_message() {
    let body = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>NoSuchBucket</Code>\
                <Message>The specified bucket\n does not &amp; exist</Message></Error>";
    assert_eq!(
        status_error(StatusCode::NOT_FOUND, body),
        "HTTP 404 Not Found: NoSuchBucket: The specified bucket does not & exist"
    );
    assert_eq!(
        status_error(StatusCode::BAD_GATEWAY, "<html>oops</html>"),
        "HTTP 502 Bad Gateway"
    );
}
