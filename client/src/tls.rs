//! One TLS handshake with an API server, verified against a CA we name (not the system's
//! roots, not a kubeconfig's): what `kubectl kamaji certificates rotate --verify` asks of a
//! tenant's endpoint. It returns the certificate the server presented, so the caller can tell
//! whether it is the one just issued.

use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::{CertificateDer, ServerName};

/// A handshake that does not finish within this is reported as not answering.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Connects to `host:port`, checks the server's certificate against `ca_pem` for the name
/// `host` (an IP address or a DNS name, as a client of that URL does) and returns the DER of
/// the certificate it presented. The error says what failed, in rustls's words.
pub async fn handshake(host: &str, port: u16, ca_pem: &[u8]) -> Result<Vec<u8>, String> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut roots = rustls::RootCertStore::empty();
    let mut found = 0;
    for der in kcore::build::pki::pem_der(ca_pem) {
        roots
            .add(CertificateDer::from(der))
            .map_err(|e| format!("the CA certificate cannot be used: {e}"))?;
        found += 1;
    }
    if found == 0 {
        return Err("the CA holds no certificate".into());
    }
    let config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = ServerName::try_from(host.to_string())
        .map_err(|e| format!("{host} is not a name TLS can check: {e}"))?;
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let attempt = async {
        let tcp = tokio::net::TcpStream::connect((host, port))
            .await
            .map_err(|e| format!("{host}:{port} does not answer: {e}"))?;
        let tls = connector
            .connect(name, tcp)
            .await
            .map_err(|e| format!("TLS with {host}:{port}: {e}"))?;
        let (_, session) = tls.get_ref();
        session
            .peer_certificates()
            .and_then(|c| c.first())
            .map(|c| c.as_ref().to_vec())
            .ok_or_else(|| format!("{host}:{port} presented no certificate"))
    };
    tokio::time::timeout(HANDSHAKE_TIMEOUT, attempt)
        .await
        .map_err(|_| {
            format!(
                "{host}:{port} did not finish a TLS handshake within {}s",
                HANDSHAKE_TIMEOUT.as_secs()
            )
        })?
}
