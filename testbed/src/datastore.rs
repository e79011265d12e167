//! The etcds that Kamaji uses as its DataStores: `default` (the one `kamaji manager
//! --datastore=default` uses) and [`SECOND`] (the target `kubectl kamaji migrate` moves a tenant
//! to), etcds of the testbed's own, serving https with client-certificate authentication, as
//! Kamaji's etcd driver requires.
//!
//! Kamaji v1.0.0 signs each tenant's etcd client certificate with the datastore CA, and parses
//! that CA's key with `x509.ParsePKCS1PrivateKey` (`internal/crypto/crypto.go`), so every key
//! here is RSA in PKCS#1 form. rcgen cannot generate RSA keys with the ring backend, so the
//! `openssl` command line makes them.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::{Error, Proc, free_port};

/// The etcds Kamaji's DataStores name: `default` first, then [`SECOND`], sharing one CA and one
/// client certificate (each DataStore names them through Secrets, as Kamaji's Helm chart and
/// kamaji-etcd install them).
pub struct DataStore {
    /// The etcd processes and their client ports, by DataStore name.
    pub etcds: Vec<(&'static str, Proc, u16)>,
    pub ca_crt: String,
    pub ca_key: String,
    pub client_crt: String,
    pub client_key: String,
}

fn openssl(dir: &Path, args: &[&str]) -> Result<(), Error> {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .map_err(|e| Error::Pki(format!("cannot run openssl: {e}")))?;
    if !out.status.success() {
        return Err(Error::Pki(format!(
            "openssl {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}

/// A CA, a server certificate for 127.0.0.1 and a client certificate, all RSA/PKCS#1.
fn pki(dir: &Path) -> Result<(), Error> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    std::fs::write(
        dir.join("server.ext"),
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n",
    )
    .map_err(|e| Error::io(dir, e))?;
    std::fs::write(dir.join("client.ext"), "extendedKeyUsage=clientAuth\n")
        .map_err(|e| Error::io(dir, e))?;
    openssl(dir, &["genrsa", "-traditional", "-out", "ca.key", "2048"])?;
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-new",
            "-key",
            "ca.key",
            "-subj",
            "/CN=kamaji-datastore-ca",
            "-days",
            "3650",
            "-out",
            "ca.crt",
        ],
    )?;
    for (name, cn) in [("server", "/CN=etcd-server"), ("client", "/CN=root")] {
        let key = format!("{name}.key");
        let csr = format!("{name}.csr");
        let crt = format!("{name}.crt");
        let ext = format!("{name}.ext");
        openssl(dir, &["genrsa", "-traditional", "-out", &key, "2048"])?;
        openssl(
            dir,
            &["req", "-new", "-key", &key, "-subj", cn, "-out", &csr],
        )?;
        openssl(
            dir,
            &[
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                "ca.crt",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-days",
                "365",
                "-extfile",
                &ext,
                "-out",
                &crt,
            ],
        )?;
    }
    Ok(())
}

/// The second etcd DataStore's name (as in Kamaji's datastore-migration guide).
pub const SECOND: &str = "dedicated";

pub fn start(dir: &Path, etcd: &Path) -> Result<DataStore, Error> {
    let pki_dir = dir.join("datastore-pki");
    pki(&pki_dir)?;
    let read = |f: &str| -> Result<String, Error> {
        let p: PathBuf = pki_dir.join(f);
        std::fs::read_to_string(&p).map_err(|e| Error::io(&p, e))
    };
    let mut etcds = Vec::new();
    // The first keeps the file names of earlier testbeds (`datastore-etcd`).
    for (name, stem) in [
        ("default", "datastore-etcd"),
        (SECOND, "datastore-dedicated-etcd"),
    ] {
        let (proc, port) = spawn(dir, etcd, &pki_dir, stem)?;
        etcds.push((name, proc, port));
    }
    Ok(DataStore {
        etcds,
        ca_crt: read("ca.crt")?,
        ca_key: read("ca.key")?,
        client_crt: read("client.crt")?,
        client_key: read("client.key")?,
    })
}

/// One etcd serving the PKI in `pki_dir`, its data in `<dir>/<stem>` and its log in
/// `<dir>/<stem>.log`; returns once it listens.
fn spawn(dir: &Path, etcd: &Path, pki_dir: &Path, stem: &str) -> Result<(Proc, u16), Error> {
    let (port, peer) = (free_port()?, free_port()?);
    let p = |f: &str| pki_dir.join(f).display().to_string();
    let log = dir.join(format!("{stem}.log"));
    let mut proc = Proc::spawn(
        stem,
        etcd,
        &[
            "--name=datastore".into(),
            format!("--data-dir={}", dir.join(stem).display()),
            format!("--listen-client-urls=https://127.0.0.1:{port}"),
            format!("--advertise-client-urls=https://127.0.0.1:{port}"),
            format!("--listen-peer-urls=http://127.0.0.1:{peer}"),
            format!("--initial-advertise-peer-urls=http://127.0.0.1:{peer}"),
            format!("--initial-cluster=datastore=http://127.0.0.1:{peer}"),
            format!("--cert-file={}", p("server.crt")),
            format!("--key-file={}", p("server.key")),
            format!("--trusted-ca-file={}", p("ca.crt")),
            "--client-cert-auth=true".into(),
            "--unsafe-no-fsync=true".into(),
            "--log-level=warn".into(),
        ],
        &log,
    )?;
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Some(status) = proc.exited() {
            return Err(crate::process::exited_error(stem, status, &log));
        }
        if Instant::now() > deadline {
            return Err(Error::Start(format!(
                "the datastore etcd {stem} did not listen within 30s; {}:\n{}",
                log.display(),
                crate::log_tail(&log)
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok((proc, port))
}
