//! A DataStore's etcd with its authentication on, as Kamaji's etcd chart sets it up: what the
//! reconciler's TenantBackups and `kubectl kamaji backup`/`datastores` read it with (`ketcd`,
//! etcd's JSON gateway, with the DataStore's `root` client certificate) is refused by etcd
//! v3.6.8 (`embed/serve.go`: every `/v3/` request of a certificate with a CommonName gets 400
//! once authentication is on), and says so in one line with what to do, rather than a bare
//! HTTP 400. This is why `kubectl capi init --datastore etcd` leaves authentication off. The
//! etcd is the testbed's DataStore etcd (TLS, client-certificate authentication); authentication
//! is turned on the way the chart's Job does it (user root, role root, auth enable), over the
//! gateway with `curl` while it is still off.

use std::path::Path;
use std::process::Command;

use kcore::kamaji::migrate::Reach;
use ketcd::{Etcd, EtcdCredentials};

/// POSTs `body` to `path` of the etcd at `endpoint` as `root` (the testbed's client certificate).
fn post(pki: &Path, endpoint: &str, path: &str, body: &str) -> String {
    let f = |n: &str| pki.join(n).display().to_string();
    let o = Command::new("curl")
        .args(["-sS", "--cacert", &f("ca.crt"), "--cert", &f("client.crt")])
        .args(["--key", &f("client.key"), "-X", "POST", "-d", body])
        .arg(format!("https://{endpoint}{path}"))
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        o.status.success(),
        "curl {path}: {out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn an_etcd_with_authentication_on_is_refused_in_one_line_that_says_why() {
    let assets = testbed::Assets::ensure(false).expect("the testbed's etcd");
    let dir = tempfile::tempdir().unwrap();
    let ds = testbed::datastore::start(dir.path(), &assets.etcd()).unwrap();
    let endpoint = format!("127.0.0.1:{}", ds.etcds[0].2);
    let pki = dir.path().join("datastore-pki");
    let creds = || EtcdCredentials {
        ca: ds.ca_crt.clone().into_bytes(),
        cert: ds.client_crt.clone().into_bytes(),
        key: ds.client_key.clone().into_bytes(),
    };
    let etcd = Etcd::new(&endpoint, &creds()).await.unwrap();
    etcd.put(b"/tenant-b/secret", b"x").await.unwrap();
    assert_eq!(etcd.count("/tenant-b/").await.unwrap(), 1, "read while off");

    for (path, body) in [
        (
            "/v3/auth/user/add",
            r#"{"name":"root","options":{"no_password":true}}"#,
        ),
        ("/v3/auth/user/grant", r#"{"user":"root","role":"root"}"#),
        ("/v3/auth/enable", "{}"),
    ] {
        let out = post(&pki, &endpoint, path, body);
        assert!(!out.contains("\"error\""), "{path}: {out}");
    }

    let e = etcd.count("/tenant-b/").await.unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains(
            "etcd's authentication is on, and etcd refuses certificate users on its JSON gateway"
        ),
        "{text}"
    );
    assert!(!text.contains('\n'), "one line: {text}");
    assert!(
        e.hint().is_some_and(|h| h.contains("etcdctl")),
        "{:?}",
        e.hint()
    );
    // Dialling a DataStore (what `datastores` and a TenantBackup do first) reports the same.
    match ketcd::dial(std::slice::from_ref(&endpoint), &creds()).await {
        Err(Reach::Failed(m)) => assert!(m.contains("authentication is on"), "{m}"),
        Err(other) => panic!("{other:?}"),
        Ok(_) => panic!("dialled an etcd that refuses the gateway"),
    }
}
