//! Certificates and bootstrap tokens: X.509 expiry from Kamaji's Secrets, kubeadm's CA
//! public-key pin, and bootstrap-token Secrets.

use serde::Serialize;
use serde_json::{Value, json};

use crate::Error;

/// One certificate found in a Secret.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CertInfo {
    pub subject: String,
    pub issuer: String,
    /// RFC 3339.
    pub not_before: String,
    /// RFC 3339.
    pub not_after: String,
    /// Unix seconds of `not_after`.
    #[serde(skip)]
    pub not_after_unix: i64,
    pub is_ca: bool,
}

fn rfc3339(t: &x509_parser::time::ASN1Time) -> String {
    jiff::Timestamp::from_second(t.timestamp())
        .map(|ts| ts.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_default()
}

/// Every certificate in PEM text (other PEM blocks, like keys, are skipped).
pub fn pem_certificates(pem: &[u8]) -> Vec<CertInfo> {
    let mut out = Vec::new();
    for block in x509_parser::pem::Pem::iter_from_buffer(pem).flatten() {
        if block.label != "CERTIFICATE" {
            continue;
        }
        let Ok(cert) = block.parse_x509() else {
            continue;
        };
        let v = cert.validity();
        out.push(CertInfo {
            subject: cert.subject().to_string(),
            issuer: cert.issuer().to_string(),
            not_before: rfc3339(&v.not_before),
            not_after: rfc3339(&v.not_after),
            not_after_unix: v.not_after.timestamp(),
            is_ca: cert.is_ca(),
        });
    }
    out
}

/// The DER of each certificate in PEM text, in order (other blocks skipped).
pub fn pem_der(pem: &[u8]) -> Vec<Vec<u8>> {
    x509_parser::pem::Pem::iter_from_buffer(pem)
        .flatten()
        .filter(|b| b.label == "CERTIFICATE")
        .map(|b| b.contents)
        .collect()
}

/// A DER certificate's serial number (hex) and expiry, for a line that names it.
pub fn der_summary(der: &[u8]) -> Option<String> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    Some(format!(
        "serial {}, expires {}",
        cert.raw_serial_as_string(),
        rfc3339(&cert.validity().not_after)
    ))
}

/// The certificates of a Secret's data, with the key each came from: `*.crt` keys, and the
/// client certificates inside the kubeconfigs (`*.conf`) Kamaji keeps for a tenant's admin and
/// components. Data that is not PEM or not a kubeconfig is skipped. The one reader of a
/// Secret's certificates: the doctor's reads (`kubectl capi doctor` and kamaji-reconciler's
/// certificate scan, through `doctor::read`) and `kubectl kamaji status` read them here.
pub fn secret_certificates(
    data: &std::collections::BTreeMap<String, Vec<u8>>,
) -> Vec<(String, CertInfo)> {
    use base64::Engine;
    let mut out = Vec::new();
    for (k, v) in data {
        if k.ends_with(".crt") {
            out.extend(pem_certificates(v).into_iter().map(|c| (k.clone(), c)));
        } else if k.ends_with(".conf") {
            let Ok(kc) = std::str::from_utf8(v)
                .map_err(|_| ())
                .and_then(|t| serde_saphyr::from_str::<Value>(t).map_err(|_| ()))
            else {
                continue;
            };
            for u in kc["users"].as_array().into_iter().flatten() {
                if let Some(b64) = u["user"]["client-certificate-data"].as_str()
                    && let Ok(pem) = base64::engine::general_purpose::STANDARD.decode(b64)
                {
                    out.extend(pem_certificates(&pem).into_iter().map(|c| (k.clone(), c)));
                }
            }
        }
    }
    out
}

/// kubeadm's `--discovery-token-ca-cert-hash`: `sha256:` and the hex SHA-256 of the CA
/// certificate's DER SubjectPublicKeyInfo.
pub fn ca_cert_hash(ca_pem: &[u8]) -> Result<String, Error> {
    let bad = |why: String| Error::Other {
        message: format!("cannot read the cluster CA certificate: {why}"),
        hint: Some("check certificate-authority-data of the tenant's admin kubeconfig".into()),
    };
    let block = x509_parser::pem::Pem::iter_from_buffer(ca_pem)
        .flatten()
        .find(|b| b.label == "CERTIFICATE")
        .ok_or_else(|| bad("no PEM certificate".into()))?;
    let cert = block.parse_x509().map_err(|e| bad(e.to_string()))?;
    let spki = cert.tbs_certificate.subject_pki.raw;
    let digest = ring::digest::digest(&ring::digest::SHA256, spki);
    let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    Ok(format!("sha256:{hex}"))
}

const TOKEN_CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";

/// A bootstrap token `[a-z0-9]{6}.[a-z0-9]{16}` from 22 random bytes.
pub(crate) fn token_from_bytes(bytes: &[u8; 22]) -> (String, String) {
    let s: String = bytes
        .iter()
        .map(|b| TOKEN_CHARS[(*b as usize) % TOKEN_CHARS.len()] as char)
        .collect();
    (s[..6].to_string(), s[6..].to_string())
}

/// A fresh random bootstrap token (id, secret).
pub fn new_token() -> Result<(String, String), Error> {
    use ring::rand::SecureRandom;
    let mut bytes = [0u8; 22];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| Error::other("cannot get random bytes for a bootstrap token"))?;
    Ok(token_from_bytes(&bytes))
}

/// The group kubeadm joins nodes with.
pub(crate) const NODE_TOKEN_GROUP: &str = "system:bootstrappers:kubeadm:default-node-token";

/// The `bootstrap-token-<id>` Secret kubeadm reads (type `bootstrap.kubernetes.io/token`).
pub fn bootstrap_token_secret(
    id: &str,
    secret: &str,
    expiration: &str,
    description: &str,
) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": format!("bootstrap-token-{id}"), "namespace": "kube-system"},
        "type": "bootstrap.kubernetes.io/token",
        "stringData": {
            "description": description,
            "token-id": id,
            "token-secret": secret,
            "expiration": expiration,
            "usage-bootstrap-authentication": "true",
            "usage-bootstrap-signing": "true",
            "auth-extra-groups": NODE_TOKEN_GROUP,
        },
    })
}

/// A usable join token (`id.secret`) of a bootstrap-token Secret as the API returns it
/// (base64 `data`): for authentication, in the node group, and not expired at `now`.
/// kubeadm's documented placeholder token (`kubeadm config print init-defaults`). Kamaji v1.0.0's
/// bootstrap-token phase creates it in every tenant, so anyone can read it: never hand it out.
pub(crate) const PLACEHOLDER_TOKEN: &str = "abcdef.0123456789abcdef";

/// A valid node-join token held by `secret`, `None` for anything else, expired, or well known.
pub fn usable_token(secret: &Value, now: jiff::Timestamp) -> Option<String> {
    use base64::Engine;
    if secret["type"] != "bootstrap.kubernetes.io/token" {
        return None;
    }
    let get = |k: &str| -> Option<String> {
        let b64 = secret["data"][k].as_str()?;
        let bytes = base64::engine::general_purpose::STANDARD.decode(b64).ok()?;
        String::from_utf8(bytes).ok()
    };
    if get("usage-bootstrap-authentication").as_deref() != Some("true") {
        return None;
    }
    if !get("auth-extra-groups").is_some_and(|g| g.split(',').any(|x| x.trim() == NODE_TOKEN_GROUP))
    {
        return None;
    }
    if let Some(exp) = get("expiration") {
        let t: jiff::Timestamp = exp.parse().ok()?;
        if t <= now {
            return None;
        }
    }
    let token = format!("{}.{}", get("token-id")?, get("token-secret")?);
    (token != PLACEHOLDER_TOKEN).then_some(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CA: &str = "-----BEGIN CERTIFICATE-----
MIIBdzCCAR2gAwIBAgIUaM2Y2cEJ2YB3m6VSF9RWhV0aZV4wCgYIKoZIzj0EAwIw
ETEPMA0GA1UEAwwGdGVzdGNhMB4XDTI2MDEwMTAwMDAwMFoXDTM2MDEwMTAwMDAw
MFowETEPMA0GA1UEAwwGdGVzdGNhMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE
-----END CERTIFICATE-----
";

    #[test]
    fn tokens_have_kubeadm_shape() {
        let (id, secret) = token_from_bytes(&[7u8; 22]);
        assert_eq!(id.len(), 6);
        assert_eq!(secret.len(), 16);
        assert!(
            id.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        );
        let (a, _) = new_token().unwrap();
        let (b, _) = new_token().unwrap();
        assert_ne!(a, b);
    }

    #[test]
    fn token_secrets_round_trip_and_expire() {
        use base64::Engine;
        let api_of = |id: &str, secret: &str| {
            let s = bootstrap_token_secret(id, secret, "2030-01-01T00:00:00Z", "x");
            let enc =
                |v: &Value| base64::engine::general_purpose::STANDARD.encode(v.as_str().unwrap());
            let data: serde_json::Map<String, Value> = s["stringData"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| (k.clone(), json!(enc(v))))
                .collect();
            json!({"type": s["type"], "data": data})
        };
        let api = api_of("k3x9qa", "7hd0sl2mzq8c1v4b");
        let now: jiff::Timestamp = "2029-01-01T00:00:00Z".parse().unwrap();
        assert_eq!(
            usable_token(&api, now).as_deref(),
            Some("k3x9qa.7hd0sl2mzq8c1v4b")
        );
        let later: jiff::Timestamp = "2031-01-01T00:00:00Z".parse().unwrap();
        assert_eq!(usable_token(&api, later), None);
        // kubeadm's placeholder, which Kamaji v1.0.0 creates in every tenant, is never reused.
        assert_eq!(
            usable_token(&api_of("abcdef", "0123456789abcdef"), now),
            None
        );
    }

    #[test]
    fn reads_expiry_and_pins_the_public_key() {
        let ck = rcgen::generate_simple_self_signed(vec!["tenant".to_string()]).unwrap();
        let pem = ck.cert.pem();
        let certs = pem_certificates(pem.as_bytes());
        assert_eq!(certs.len(), 1);
        assert!(
            certs[0].not_after.starts_with("4096-01-01"),
            "{:?}",
            certs[0]
        );
        let spki_pem = ck.signing_key.public_key_pem();
        let spki = x509_parser::pem::Pem::iter_from_buffer(spki_pem.as_bytes())
            .next()
            .unwrap()
            .unwrap()
            .contents;
        let want = ring::digest::digest(&ring::digest::SHA256, &spki);
        let hex: String = want.as_ref().iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            ca_cert_hash(pem.as_bytes()).unwrap(),
            format!("sha256:{hex}")
        );
    }

    #[test]
    fn garbage_is_not_a_certificate() {
        assert!(pem_certificates(b"not pem").is_empty());
        assert!(ca_cert_hash(b"nothing").is_err());
        // A truncated certificate is skipped, not a panic.
        assert!(pem_certificates(CA.as_bytes()).is_empty());
    }
}
