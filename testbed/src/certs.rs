//! The testbed's PKI, as envtest builds it: a serving CA and certificate (with the IP SAN
//! 127.0.0.1 that rustls insists on), a client CA and an admin client certificate in
//! `system:masters`, and a service-account signing key.

use std::path::Path;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

use crate::Error;

pub struct Pki {
    pub serving_ca_pem: String,
    pub admin_cert_pem: String,
    pub admin_key_pem: String,
}

/// Days since the Unix epoch, today (UTC), from the system clock.
fn epoch_days() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() / 86_400)
        .unwrap_or(0) as i64
}

/// Today's date as (year, month, day), from the system clock (civil-from-days, proleptic
/// Gregorian), so certificates have kubeadm-like validity periods instead of rcgen's default.
fn today() -> (i32, u8, u8) {
    let (y, m, d) = civil(epoch_days());
    (y, m, d.min(28))
}

/// A self-signed PEM certificate (CN kube-apiserver, as Kamaji's API server certificate) that
/// expires at midnight UTC `days` from today (negative: expired), and that moment in Unix
/// seconds: what a test plants to play a tenant's certificate issued short.
pub fn expiring_certificate(days: i64) -> (String, i64) {
    let day = epoch_days() + days;
    let (y, m, d) = civil(day);
    let mut p = CertificateParams::new(vec!["kube-apiserver".to_string()]).unwrap_or_default();
    p.not_before = rcgen::date_time_ymd(2020, 1, 1);
    p.not_after = rcgen::date_time_ymd(y, m, d);
    let pem = KeyPair::generate()
        .and_then(|key| p.self_signed(&key))
        .map(|c| c.pem())
        .unwrap_or_default();
    (pem, day * 86_400)
}

/// The civil date (year, month, day) of a day counted from the Unix epoch.
fn civil(days: i64) -> (i32, u8, u8) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u8;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u8;
    let y = (yoe + era * 400 + i64::from(m <= 2)) as i32;
    (y, m, d)
}

/// Valid from today for `years` (kubeadm: CAs 10 years, leaves 1 year).
fn validity(p: &mut CertificateParams, years: i32) {
    let (y, m, d) = today();
    p.not_before = rcgen::date_time_ymd(y, m, d);
    p.not_after = rcgen::date_time_ymd(y + years, m, d);
}

fn ca(cn: &str) -> Result<(CertificateParams, KeyPair, String), Error> {
    let mut p = CertificateParams::new(Vec::<String>::new()).map_err(Error::pki)?;
    validity(&mut p, 10);
    p.distinguished_name.push(DnType::CommonName, cn);
    p.distinguished_name
        .push(DnType::OrganizationName, "capi-kamaji-testbed");
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::CrlSign,
    ];
    let key = KeyPair::generate().map_err(Error::pki)?;
    let cert = p.self_signed(&key).map_err(Error::pki)?;
    Ok((p, key, cert.pem()))
}

/// A leaf certificate signed by `issuer`.
pub fn leaf(
    issuer: &Issuer<'_, KeyPair>,
    cn: &str,
    orgs: &[&str],
    sans: &[&str],
    usage: ExtendedKeyUsagePurpose,
) -> Result<(String, String), Error> {
    let mut p = CertificateParams::new(sans.iter().map(|s| s.to_string()).collect::<Vec<_>>())
        .map_err(Error::pki)?;
    p.distinguished_name.push(DnType::CommonName, cn);
    validity(&mut p, 1);
    for o in orgs {
        p.distinguished_name.push(DnType::OrganizationName, *o);
    }
    p.extended_key_usages = vec![usage];
    p.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    let key = KeyPair::generate().map_err(Error::pki)?;
    let cert = p.signed_by(&key, issuer).map_err(Error::pki)?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// A self-signed serving certificate for a local webhook server, with its CA bundle.
pub fn webhook_serving(dir: &Path) -> Result<String, Error> {
    let (ca_params, ca_key, ca_pem) = ca("testbed-webhook-ca")?;
    let issuer = Issuer::new(ca_params, ca_key);
    let (crt, key) = leaf(
        &issuer,
        "localhost",
        &[],
        &["localhost", "127.0.0.1"],
        ExtendedKeyUsagePurpose::ServerAuth,
    )?;
    write(dir, "tls.crt", &crt)?;
    write(dir, "tls.key", &key)?;
    write(dir, "ca.crt", &ca_pem)?;
    Ok(ca_pem)
}

fn write(dir: &Path, name: &str, data: &str) -> Result<(), Error> {
    let p = dir.join(name);
    std::fs::write(&p, data).map_err(|e| Error::io(&p, e))
}

impl Pki {
    pub fn generate(dir: &Path) -> Result<Pki, Error> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let (serving_params, serving_key, serving_ca_pem) = ca("testbed-serving-ca")?;
        // Kept so that simulated tenant control planes can publish a complete CA secret.
        write(dir, "serving-ca.key", &serving_key.serialize_pem())?;
        let serving = Issuer::new(serving_params, serving_key);
        let (crt, key) = leaf(
            &serving,
            "kube-apiserver",
            &[],
            // 10.0.0.1 and the Service's names: pods of a real node reach the API server as the
            // `kubernetes` Service, the first address of --service-cluster-ip-range.
            &[
                "localhost",
                "127.0.0.1",
                "10.0.0.1",
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
                "kubernetes.default.svc.cluster.local",
            ],
            ExtendedKeyUsagePurpose::ServerAuth,
        )?;
        write(dir, "apiserver.crt", &crt)?;
        write(dir, "apiserver.key", &key)?;
        write(dir, "serving-ca.crt", &serving_ca_pem)?;

        let (client_params, client_key, client_ca_pem) = ca("testbed-client-ca")?;
        // kube-controller-manager's csrsigning controller signs client certificates with it
        // (`kubernetes.io/kube-apiserver-client`: the BYOH host agent's CSR).
        write(dir, "client-ca.key", &client_key.serialize_pem())?;
        let client = Issuer::new(client_params, client_key);
        write(dir, "client-ca.crt", &client_ca_pem)?;
        let (admin_cert_pem, admin_key_pem) = leaf(
            &client,
            "admin",
            &["system:masters"],
            &[],
            ExtendedKeyUsagePurpose::ClientAuth,
        )?;

        let sa = KeyPair::generate().map_err(Error::pki)?;
        write(dir, "sa.key", &sa.serialize_pem())?;
        write(dir, "sa.pub", &sa.public_key_pem())?;

        Ok(Pki {
            serving_ca_pem,
            admin_cert_pem,
            admin_key_pem,
        })
    }
}
