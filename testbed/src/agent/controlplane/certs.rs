//! kubeadm's `certs` and `kubeconfig` phases on a SIMULATED control-plane host (kubeadm
//! v1.36, `cmd/kubeadm/app/phases/certs/certlist.go` and `phases/kubeconfig/kubeconfig.go`).
//!
//! The bootstrap data CAPI's kubeadm bootstrap provider writes carries the same four pairs for
//! `kubeadm init` and for a control-plane join (`util/secret/certificates.go`,
//! `NewCertificatesForInitialControlPlane` and `NewControlPlaneJoinCerts`, CAPI v1.14):
//! `ca.crt`/`ca.key`, `etcd/ca.crt`/`etcd/ca.key`, `front-proxy-ca.crt`/`front-proxy-ca.key` and
//! `sa.key`/`sa.pub`, in the host's `/etc/kubernetes/pki`. From them this writes, into that same
//! folder as kubeadm does, every leaf the control plane needs: `apiserver`,
//! `apiserver-kubelet-client`, `apiserver-etcd-client`, `front-proxy-client`, `etcd/server`,
//! `etcd/peer` and `etcd/healthcheck-client`; and into its parent (`/etc/kubernetes`) the
//! kubeconfigs `admin.conf`, `kubelet.conf`, `controller-manager.conf` and `scheduler.conf`.
//!
//! The CA keys are what CAPI generated: RSA 2048 in PKCS#1 (`RSA PRIVATE KEY`) by default,
//! ECDSA in SEC1 (`EC PRIVATE KEY`) with an ECDSA `encryptionAlgorithm`. rcgen on ring reads
//! PKCS#8 only, so [`key_pair`] wraps either form into a PKCS#8 `PrivateKeyInfo` (RFC 5208:
//! the key's algorithm identifier and the key itself as an octet string) before handing it on;
//! nothing else about the key changes.
//!
//! What differs from kubeadm: the leaves' keys are ECDSA P-256 whatever the CA's algorithm
//! (ring cannot generate RSA keys); every leaf is written afresh (kubeadm keeps a valid one it
//! finds); the admin client is in `system:masters` (kubeadm's `admin.conf` is in
//! `kubeadm:cluster-admins`, bound to `cluster-admin`; KCP's own kubeconfig is `system:masters`
//! too); no `super-admin.conf`.

use std::path::Path;

use base64::Engine;
use rcgen::{CertificateParams, DnType, ExtendedKeyUsagePurpose, Issuer, KeyPair, KeyUsagePurpose};

/// A CA of the bootstrap data: its certificate and a signer with its exact subject.
pub(super) struct Ca {
    pub cert_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

/// A certificate and its key, as PEM.
#[derive(Clone)]
pub(super) struct Pair {
    pub cert: String,
    pub key: String,
}

/// Reads `<dir>/<name>.crt` and `<dir>/<name>.key`.
pub(super) fn load_ca(dir: &Path, name: &str) -> Result<Ca, String> {
    let read = |ext: &str| {
        let p = dir.join(format!("{name}.{ext}"));
        std::fs::read_to_string(&p).map_err(|e| {
            format!(
                "{}: {e} (the bootstrap data writes the cluster's CAs there)",
                p.display()
            )
        })
    };
    let (cert_pem, key_pem) = (read("crt")?, read("key")?);
    let key = key_pair(&key_pem).map_err(|e| format!("{name}.key: {e}"))?;
    let issuer =
        Issuer::from_ca_cert_pem(&cert_pem, key).map_err(|e| format!("{name}.crt: {e}"))?;
    Ok(Ca { cert_pem, issuer })
}

/// A private key in PEM: PKCS#8 (`PRIVATE KEY`), PKCS#1 RSA (`RSA PRIVATE KEY`) or SEC1 EC
/// (`EC PRIVATE KEY`) with a P-256 or P-384 key.
pub(super) fn key_pair(pem: &str) -> Result<KeyPair, String> {
    let (label, der) = pem_block(pem).ok_or("no PEM private key")?;
    let pkcs8 = match label.as_str() {
        "PRIVATE KEY" => der,
        "RSA PRIVATE KEY" => pkcs8_of(&[RSA_ENCRYPTION, DER_NULL].concat(), &der),
        "EC PRIVATE KEY" => {
            let curve = [P256, P384]
                .into_iter()
                .find(|oid| der.windows(oid.len()).any(|w| w == *oid))
                .ok_or("an EC key on a curve other than P-256 or P-384")?;
            pkcs8_of(&[EC_PUBLIC_KEY, curve].concat(), &der)
        }
        other => return Err(format!("a PEM block {other:?}, not a private key")),
    };
    KeyPair::try_from(pkcs8).map_err(|e| e.to_string())
}

/// DER object identifiers: rsaEncryption (1.2.840.113549.1.1.1) with its NULL parameters,
/// id-ecPublicKey (1.2.840.10045.2.1), prime256v1 (1.2.840.10045.3.1.7), secp384r1
/// (1.3.132.0.34).
const RSA_ENCRYPTION: &[u8] = &[
    0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01,
];
const DER_NULL: &[u8] = &[0x05, 0x00];
const EC_PUBLIC_KEY: &[u8] = &[0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];
const P256: &[u8] = &[0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];
const P384: &[u8] = &[0x06, 0x05, 0x2b, 0x81, 0x04, 0x00, 0x22];

/// `PrivateKeyInfo ::= SEQUENCE { version 0, AlgorithmIdentifier, OCTET STRING key }`.
fn pkcs8_of(algorithm: &[u8], key: &[u8]) -> Vec<u8> {
    let body = [
        &[0x02, 0x01, 0x00][..],
        &der(0x30, algorithm),
        &der(0x04, key),
    ]
    .concat();
    der(0x30, &body)
}

/// One DER TLV (definite length).
fn der(tag: u8, body: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    let n = body.len();
    if n < 0x80 {
        out.push(n as u8);
    } else {
        let bytes: Vec<u8> = n
            .to_be_bytes()
            .into_iter()
            .skip_while(|b| *b == 0)
            .collect();
        out.push(0x80 | bytes.len() as u8);
        out.extend(bytes);
    }
    out.extend_from_slice(body);
    out
}

/// The first PEM block of `text`: its label and content.
fn pem_block(text: &str) -> Option<(String, Vec<u8>)> {
    let start = text.find("-----BEGIN ")?;
    let rest = &text[start + "-----BEGIN ".len()..];
    let label_end = rest.find("-----")?;
    let label = rest[..label_end].to_string();
    let body_start = label_end + 5;
    let end = rest.find(&format!("-----END {label}-----"))?;
    let body: String = rest[body_start..end]
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    let der = base64::engine::general_purpose::STANDARD
        .decode(body)
        .ok()?;
    Some((label, der))
}

/// Valid from yesterday for a year (kubeadm: leaves one year).
fn validity(p: &mut CertificateParams) {
    let today = jiff::Timestamp::now()
        .to_zoned(jiff::tz::TimeZone::UTC)
        .date();
    let from = today.yesterday().unwrap_or(today);
    p.not_before = rcgen::date_time_ymd(from.year().into(), from.month() as u8, from.day() as u8);
    p.not_after = rcgen::date_time_ymd(
        i32::from(today.year()) + 1,
        today.month() as u8,
        today.day().min(28) as u8,
    );
}

/// A leaf signed by `ca` with a fresh ECDSA P-256 key.
pub(super) fn leaf(
    ca: &Ca,
    cn: &str,
    orgs: &[&str],
    sans: &[String],
    usages: &[ExtendedKeyUsagePurpose],
) -> Result<Pair, String> {
    let mut p = CertificateParams::new(sans.to_vec()).map_err(|e| format!("{cn}: {e}"))?;
    p.distinguished_name = rcgen::DistinguishedName::new();
    for o in orgs {
        p.distinguished_name.push(DnType::OrganizationName, *o);
    }
    p.distinguished_name.push(DnType::CommonName, cn);
    validity(&mut p);
    p.extended_key_usages = usages.to_vec();
    p.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    let key = KeyPair::generate().map_err(|e| e.to_string())?;
    let cert = p
        .signed_by(&key, &ca.issuer)
        .map_err(|e| format!("{cn}: {e}"))?;
    Ok(Pair {
        cert: cert.pem(),
        key: key.serialize_pem(),
    })
}

/// The cluster's CAs as the bootstrap data wrote them.
pub(super) struct Cas {
    pub ca: Ca,
    pub etcd: Ca,
    pub front_proxy: Ca,
}

impl Cas {
    pub(super) fn load(pki: &Path) -> Result<Cas, String> {
        for f in ["sa.key", "sa.pub"] {
            if !pki.join(f).exists() {
                return Err(format!(
                    "{}: missing (the bootstrap data writes the service-account key pair there)",
                    pki.join(f).display()
                ));
            }
        }
        Ok(Cas {
            ca: load_ca(pki, "ca")?,
            etcd: load_ca(pki, "etcd/ca")?,
            front_proxy: load_ca(pki, "front-proxy-ca")?,
        })
    }
}

/// What the `certs` phase decided, for the rest of the host's control plane.
pub(super) struct Issued {
    pub admin: Pair,
    pub kubelet: Pair,
    pub etcd_client: Pair,
}

/// The names and addresses a host's leaves carry.
pub(super) struct Names<'a> {
    pub host: &'a str,
    /// The apiserver's SANs beyond the host's: the first Service address, the endpoint's host,
    /// the ClusterConfiguration's `apiServer.certSANs`, `kubernetes.default.svc.<domain>`.
    pub apiserver: Vec<String>,
    pub etcd_server: Vec<String>,
    pub etcd_peer: Vec<String>,
}

/// The `certs` phase: every leaf into `pki`.
pub(super) fn issue(cas: &Cas, pki: &Path, names: &Names<'_>) -> Result<Issued, String> {
    use ExtendedKeyUsagePurpose::{ClientAuth, ServerAuth};
    let host = names.host;
    let mut api_sans = vec![
        host.to_string(),
        "kubernetes".into(),
        "kubernetes.default".into(),
        "kubernetes.default.svc".into(),
        "localhost".into(),
        "127.0.0.1".into(),
    ];
    let mut etcd_sans = vec![
        host.to_string(),
        "localhost".into(),
        "127.0.0.1".into(),
        "::1".into(),
    ];
    for s in &names.apiserver {
        push_unique(&mut api_sans, s);
    }
    let mut peer_sans = etcd_sans.clone();
    for s in &names.etcd_server {
        push_unique(&mut etcd_sans, s);
    }
    for s in &names.etcd_peer {
        push_unique(&mut peer_sans, s);
    }
    let leaves: Vec<(&str, Pair)> = vec![
        (
            "apiserver",
            leaf(&cas.ca, "kube-apiserver", &[], &api_sans, &[ServerAuth])?,
        ),
        (
            "apiserver-kubelet-client",
            leaf(
                &cas.ca,
                "kube-apiserver-kubelet-client",
                &[],
                &[],
                &[ClientAuth],
            )?,
        ),
        (
            "front-proxy-client",
            leaf(
                &cas.front_proxy,
                "front-proxy-client",
                &[],
                &[],
                &[ClientAuth],
            )?,
        ),
        (
            "etcd/server",
            leaf(&cas.etcd, host, &[], &etcd_sans, &[ServerAuth, ClientAuth])?,
        ),
        (
            "etcd/peer",
            leaf(&cas.etcd, host, &[], &peer_sans, &[ServerAuth, ClientAuth])?,
        ),
        (
            "etcd/healthcheck-client",
            leaf(
                &cas.etcd,
                "kube-etcd-healthcheck-client",
                &[],
                &[],
                &[ClientAuth],
            )?,
        ),
        (
            "apiserver-etcd-client",
            leaf(
                &cas.etcd,
                "kube-apiserver-etcd-client",
                &[],
                &[],
                &[ClientAuth],
            )?,
        ),
    ];
    for (name, pair) in &leaves {
        write_pair(pki, name, pair)?;
    }
    let etcd_client = leaves
        .iter()
        .find(|(n, _)| *n == "apiserver-etcd-client")
        .map(|(_, p)| p.clone())
        .ok_or("no apiserver-etcd-client")?;
    Ok(Issued {
        admin: leaf(
            &cas.ca,
            "kubernetes-admin",
            &["system:masters"],
            &[],
            &[ClientAuth],
        )?,
        kubelet: leaf(
            &cas.ca,
            &format!("system:node:{host}"),
            &["system:nodes"],
            &[],
            &[ClientAuth],
        )?,
        etcd_client,
    })
}

fn push_unique(v: &mut Vec<String>, s: &str) {
    if !s.is_empty() && !v.iter().any(|x| x == s) {
        v.push(s.to_string());
    }
}

fn write_pair(pki: &Path, name: &str, pair: &Pair) -> Result<(), String> {
    let crt = pki.join(format!("{name}.crt"));
    if let Some(parent) = crt.parent() {
        std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
    }
    std::fs::write(&crt, &pair.cert).map_err(|e| format!("{}: {e}", crt.display()))?;
    let key = pki.join(format!("{name}.key"));
    crate::write_private_bytes(&key, pair.key.as_bytes()).map_err(|e| e.to_string())
}

/// The files [`issue`] and [`kubeconfigs`] write, relative to `pki` and to its parent, and the
/// bootstrap data's: what `kubeadm reset` removes.
pub(super) const LEAVES: &[&str] = &[
    "apiserver",
    "apiserver-kubelet-client",
    "front-proxy-client",
    "etcd/server",
    "etcd/peer",
    "etcd/healthcheck-client",
    "apiserver-etcd-client",
];
pub(super) const KUBECONFIGS: &[&str] = &[
    "admin.conf",
    "kubelet.conf",
    "controller-manager.conf",
    "scheduler.conf",
];
/// What the bootstrap data writes (the host's `kubeadm reset` deletes them, not the testbed).
#[cfg(test)]
pub(super) const CA_FILES: &[&str] = &[
    "ca.crt",
    "ca.key",
    "etcd/ca.crt",
    "etcd/ca.key",
    "front-proxy-ca.crt",
    "front-proxy-ca.key",
    "sa.key",
    "sa.pub",
];

/// A kubeconfig of one user with a client certificate.
pub(super) fn kubeconfig(server: &str, ca_pem: &str, user: &str, pair: &Pair) -> String {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s.as_bytes());
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: kubernetes\n  cluster:\n    server: https://{server}\n    certificate-authority-data: {}\nusers:\n- name: {user}\n  user:\n    client-certificate-data: {}\n    client-key-data: {}\ncontexts:\n- name: {user}@kubernetes\n  context:\n    cluster: kubernetes\n    user: {user}\ncurrent-context: {user}@kubernetes\n",
        b64(ca_pem),
        b64(&pair.cert),
        b64(&pair.key)
    )
}

/// The `kubeconfig` phase: `admin.conf` and `kubelet.conf` to the cluster's endpoint,
/// `controller-manager.conf` and `scheduler.conf` (their own users, signed by the CA) to this
/// host's API server.
pub(super) fn kubeconfigs(
    cas: &Cas,
    issued: &Issued,
    pki: &Path,
    host: &str,
    endpoint: &str,
    local: &str,
) -> Result<(), String> {
    use ExtendedKeyUsagePurpose::ClientAuth;
    let dir = pki.parent().unwrap_or(pki);
    let ca = &cas.ca.cert_pem;
    let kcm = leaf(
        &cas.ca,
        "system:kube-controller-manager",
        &[],
        &[],
        &[ClientAuth],
    )?;
    let scheduler = leaf(&cas.ca, "system:kube-scheduler", &[], &[], &[ClientAuth])?;
    let files = [
        (
            "admin.conf",
            kubeconfig(endpoint, ca, "kubernetes-admin", &issued.admin),
        ),
        (
            "kubelet.conf",
            kubeconfig(
                endpoint,
                ca,
                &format!("system:node:{host}"),
                &issued.kubelet,
            ),
        ),
        (
            "controller-manager.conf",
            kubeconfig(local, ca, "system:kube-controller-manager", &kcm),
        ),
        (
            "scheduler.conf",
            kubeconfig(local, ca, "system:kube-scheduler", &scheduler),
        ),
    ];
    for (name, text) in &files {
        let p = dir.join(name);
        crate::write_private_bytes(&p, text.as_bytes()).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// A client of `server` (`host:port`) as the user of `pair`, trusting `ca_pem`.
pub(super) async fn client(
    server: &str,
    ca_pem: &str,
    pair: &Pair,
) -> Result<kube::Client, String> {
    let text = kubeconfig(server, ca_pem, "user", pair);
    let kc = kube::config::Kubeconfig::from_yaml(&text).map_err(|e| e.to_string())?;
    let mut c =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await
            .map_err(|e| e.to_string())?;
    c.connect_timeout = Some(std::time::Duration::from_secs(3));
    c.read_timeout = Some(std::time::Duration::from_secs(15));
    kube::Client::try_from(c).map_err(|e| e.to_string())
}
