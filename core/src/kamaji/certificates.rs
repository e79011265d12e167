//! Every certificate of a tenant, as `kubectl kamaji certificates` lists it: where it lives
//! (Kamaji's `<tenant>-<suffix>` Secrets), its issuer and expiry, and what renews it.
//!
//! What renews it is Kamaji's own rule (github.com/clastix/kamaji v1.0.0,
//! `controllers/certificate_lifecycle_controller.go`): a Secret labelled
//! [`LIFECYCLE_LABEL`] (the API server's serving and kubelet-client certificates, the
//! front-proxy client, the DataStore client, konnectivity's, and the admin and component
//! kubeconfigs) is re-issued once its certificate is within a day of expiring. The CAs carry no
//! such label: nothing renews them but a rotation someone asks for.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::build::pki;

/// The suffixes of a tenant's Secrets that hold certificates (`<tenant>-<suffix>`), as Kamaji
/// v1.0.0 names them (`internal/resources/*`).
pub const SECRET_SUFFIXES: [&str; 9] = [
    "ca",
    "api-server-certificate",
    "api-server-kubelet-client-certificate",
    "front-proxy-ca-certificate",
    "front-proxy-client-certificate",
    "konnectivity-certificate",
    "datastore-certificate",
    "admin-kubeconfig",
    "sa-certificate",
];

/// Kamaji's label on the Secrets its certificate lifecycle controller watches and renews.
pub const LIFECYCLE_LABEL: &str = "kamaji.clastix.io/certificate_lifecycle_controller";

/// One certificate of a tenant, read from Kamaji's Secrets: the few fields the doctor holds for
/// a whole fleet of tenants.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TenantCertificate {
    pub namespace: String,
    /// The TenantControlPlane (Kamaji's `kamaji.clastix.io/name` label on the Secret).
    pub tenant: String,
    pub secret: String,
    /// The Secret's key (`apiserver.crt`, `admin.conf`, ...).
    pub key: String,
    /// RFC 3339.
    pub not_after: String,
    /// Unix seconds.
    #[serde(skip)]
    pub not_after_unix: i64,
}

/// A [`TenantCertificate`] as `kubectl kamaji certificates` lists it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CertificateRow {
    #[serde(flatten)]
    pub certificate: TenantCertificate,
    pub subject: String,
    pub issuer: String,
    pub is_ca: bool,
    /// Whole days left (negative: expired), at the `now` given.
    pub days_left: i64,
    /// What renews it: Kamaji on its own, or the rotation to ask for.
    pub renewed_by: String,
}

/// The certificates of tenant `namespace/tenant`'s Secret `secret` (one of
/// `<tenant>-<SECRET_SUFFIXES>`), with its `labels` and `data`, at `now_unix`.
pub fn of_secret(
    namespace: &str,
    tenant: &str,
    secret: &str,
    labels: &BTreeMap<String, String>,
    data: &BTreeMap<String, Vec<u8>>,
    now_unix: i64,
) -> Vec<CertificateRow> {
    let suffix = secret
        .strip_prefix(tenant)
        .and_then(|s| s.strip_prefix('-'))
        .unwrap_or(secret);
    let renewed_by = renewed_by(tenant, suffix, labels);
    pki::secret_certificates(data)
        .into_iter()
        .map(|(key, c)| CertificateRow {
            certificate: TenantCertificate {
                namespace: namespace.to_string(),
                tenant: tenant.to_string(),
                secret: secret.to_string(),
                key,
                not_after: c.not_after,
                not_after_unix: c.not_after_unix,
            },
            subject: c.subject,
            issuer: c.issuer,
            is_ca: c.is_ca,
            days_left: c.not_after_unix.saturating_sub(now_unix).div_euclid(86_400),
            renewed_by: renewed_by.clone(),
        })
        .collect()
}

/// What renews the certificates of `<tenant>-<suffix>`.
fn renewed_by(tenant: &str, suffix: &str, labels: &BTreeMap<String, String>) -> String {
    if labels.contains_key(LIFECYCLE_LABEL) {
        return "Kamaji, a day before it expires".into();
    }
    let asked = match suffix {
        "ca" => "CA",
        "front-proxy-ca-certificate" => "FrontProxyCA",
        "api-server-certificate" => "APIServer",
        "api-server-kubelet-client-certificate" => "APIServerKubeletClient",
        "front-proxy-client-certificate" => "FrontProxyClient",
        "konnectivity-certificate" => "Konnectivity",
        "datastore-certificate" => "Datastore",
        _ => return "kubectl kamaji kubeconfig rotate".into(),
    };
    format!("no one: kubectl kamaji certificates rotate {tenant} --certificates={asked}")
}

/// Soonest expiry first; then by tenant, Secret and key, so the order is stable.
pub fn sort(rows: &mut [CertificateRow]) {
    rows.sort_by(|a, b| {
        let (a, b) = (&a.certificate, &b.certificate);
        (a.not_after_unix, &a.namespace, &a.tenant, &a.secret, &a.key).cmp(&(
            b.not_after_unix,
            &b.namespace,
            &b.tenant,
            &b.secret,
            &b.key,
        ))
    });
}

/// A path that uses a tenant's certificates, as `certificates rotate --verify` checks it. They
/// are checked in this order: each later one needs the earlier (a client reaches the API server
/// before it reaches a kubelet through it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum CertPath {
    /// The endpoint presents the re-issued serving certificate, signed by the tenant's CA.
    Serving,
    /// Kamaji's admin kubeconfig is accepted (client certificate and CA).
    Admin,
    /// Cluster API's `<cluster>-kubeconfig` is accepted: how CAPI reaches the workload cluster.
    ClusterApiKubeconfig,
    /// Cluster API's `<cluster>-ca` is the tenant's CA: what joining workers trust.
    ClusterApiCa,
    /// The API server reaches a kubelet with its kubelet client certificate (`logs`, `exec`),
    /// through Konnectivity when the tenant uses it.
    Kubelet,
}

impl CertPath {
    pub fn label(self) -> &'static str {
        match self {
            CertPath::Serving => "API server serving certificate",
            CertPath::Admin => "admin kubeconfig",
            CertPath::ClusterApiKubeconfig => "Cluster API's kubeconfig",
            CertPath::ClusterApiCa => "Cluster API's CA",
            CertPath::Kubelet => "API server to kubelet",
        }
    }

    /// What to do when this path fails after a rotation of `tenant`.
    pub fn rollback(self, tenant: &str) -> String {
        match self {
            CertPath::Serving => format!(
                "Kamaji re-issues it from the CA: rotate it again (kubectl kamaji certificates rotate {tenant} --certificates=APIServer), or put the tenant's Secrets back from a backup (kubectl kamaji restore)"
            ),
            CertPath::Admin => format!(
                "have Kamaji re-issue it: kubectl kamaji kubeconfig rotate {tenant}"
            ),
            CertPath::ClusterApiKubeconfig | CertPath::ClusterApiCa => format!(
                "kamaji-reconciler copies Kamaji's admin kubeconfig and CA for Cluster API: check that it runs (kubectl kamaji doctor; kubectl kamaji status {tenant}); until then Cluster API cannot reach the workload cluster and new workers trust the old CA"
            ),
            CertPath::Kubelet => "the kubelets still trust the CA from before the rotation (clastix/kamaji#1151): re-join the workers (kubectl capi hosts retire, then scale), or put the old CA back from a backup (kubectl kamaji restore)".to_string(),
        }
    }
}

/// How one path fared.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "result", rename_all = "camelCase")]
pub enum PathOutcome {
    Passed { detail: String },
    Failed { cause: String },
    NotChecked { why: String },
}

/// One path and how it fared.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PathCheck {
    pub path: CertPath,
    #[serde(flatten)]
    pub outcome: PathOutcome,
}

impl PathCheck {
    pub fn line(&self) -> String {
        match &self.outcome {
            PathOutcome::Passed { detail } => format!("{}: ok ({detail})", self.path.label()),
            PathOutcome::Failed { cause } => format!("{}: FAILED: {cause}", self.path.label()),
            PathOutcome::NotChecked { why } => {
                format!("{}: not checked ({why})", self.path.label())
            }
        }
    }
}

/// The first path that failed, if any.
pub fn first_failure(checks: &[PathCheck]) -> Option<&PathCheck> {
    checks
        .iter()
        .find(|c| matches!(c.outcome, PathOutcome::Failed { .. }))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_first_failing_path_is_named_with_its_rollback() {
        let checks = [
            PathCheck {
                path: CertPath::Serving,
                outcome: PathOutcome::Passed {
                    detail: "serial 01".into(),
                },
            },
            PathCheck {
                path: CertPath::ClusterApiKubeconfig,
                outcome: PathOutcome::Failed {
                    cause: "x509: unknown authority".into(),
                },
            },
            PathCheck {
                path: CertPath::Kubelet,
                outcome: PathOutcome::Failed {
                    cause: "later".into(),
                },
            },
        ];
        let f = first_failure(&checks).unwrap();
        assert_eq!(
            f.line(),
            "Cluster API's kubeconfig: FAILED: x509: unknown authority"
        );
        assert!(f.path.rollback("prod").contains("kamaji-reconciler copies"));
        assert_eq!(
            checks[0].line(),
            "API server serving certificate: ok (serial 01)"
        );
        let json = serde_json::to_value(&checks[1]).unwrap();
        assert_eq!(json["result"], "failed");
        assert_eq!(json["path"], "clusterApiKubeconfig");
        assert!(first_failure(&checks[..1]).is_none());
        assert!(
            CertPath::Kubelet
                .rollback("p")
                .contains("clastix/kamaji#1151")
        );
    }

    use super::*;

    fn pem(days: u32, ca: bool, name: &str) -> Vec<u8> {
        let mut p = rcgen::CertificateParams::new(vec![name.to_string()]).unwrap();
        p.distinguished_name = rcgen::DistinguishedName::new();
        p.distinguished_name
            .push(rcgen::DnType::CommonName, name.to_string());
        p.not_before = rcgen::date_time_ymd(2026, 1, 1);
        p.not_after = p.not_before + std::time::Duration::from_secs(u64::from(days) * 86_400);
        if ca {
            p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        }
        let key = rcgen::KeyPair::generate().unwrap();
        p.self_signed(&key).unwrap().pem().into_bytes()
    }

    #[test]
    fn each_certificate_with_its_expiry_and_what_renews_it_soonest_first() {
        let now = jiff::Timestamp::from_second(1_767_225_600 + 10 * 86_400)
            .unwrap()
            .as_second(); // 2026-01-11
        let lifecycle = BTreeMap::from([(LIFECYCLE_LABEL.to_string(), "x509".to_string())]);
        let mut all = of_secret(
            "team-a",
            "t1",
            "t1-api-server-certificate",
            &lifecycle,
            &BTreeMap::from([("apiserver.crt".to_string(), pem(365, false, "t1"))]),
            now,
        );
        all.extend(of_secret(
            "team-a",
            "t1",
            "t1-ca",
            &BTreeMap::new(),
            &BTreeMap::from([
                ("ca.crt".to_string(), pem(20, true, "kubernetes")),
                ("ca.key".to_string(), b"not a certificate".to_vec()),
            ]),
            now,
        ));
        sort(&mut all);
        let rows: Vec<(&str, &str, i64, bool, &str)> = all
            .iter()
            .map(|c| {
                (
                    c.certificate.secret.as_str(),
                    c.certificate.key.as_str(),
                    c.days_left,
                    c.is_ca,
                    c.renewed_by.as_str(),
                )
            })
            .collect();
        assert_eq!(
            rows,
            [
                (
                    "t1-ca",
                    "ca.crt",
                    10,
                    true,
                    "no one: kubectl kamaji certificates rotate t1 --certificates=CA"
                ),
                (
                    "t1-api-server-certificate",
                    "apiserver.crt",
                    355,
                    false,
                    "Kamaji, a day before it expires"
                ),
            ]
        );
        assert!(all[0].issuer.contains("kubernetes"), "{:?}", all[0]);
        // Expired: negative days.
        let late = of_secret(
            "team-a",
            "t1",
            "t1-ca",
            &BTreeMap::new(),
            &BTreeMap::from([("ca.crt".to_string(), pem(5, true, "kubernetes"))]),
            now,
        );
        assert_eq!(late[0].days_left, -5);
    }
}
