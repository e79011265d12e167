//! The SIMULATED control plane end to end, on the real binaries: `kubeadm init` on host A,
//! `kubeadm join --control-plane` of host B with a bootstrap token, then `kubeadm reset` of A,
//! the cluster answering through the VIP throughout.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod, Secret};
use kube::api::{Api, PostParams};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose};

use super::*;

/// A CA key as CAPI generates one by default (`util/certs`: RSA 2048, `x509.MarshalPKCS1PrivateKey`):
/// a throwaway test fixture made with `openssl genrsa -traditional 2048`.
const RSA_PKCS1_KEY: &str = concat!(
    "-----BEGIN RSA PRIVATE KEY-----\n",
    "MIIEpQIBAAKCAQEA9hylXkMlWNhSsv+H6CNlQlKJdp1RgZevTVgneA+mwHdKmOBX\n",
    "nsBMZissjThpQRXxaEseTjy1Z1ylyWGyoXSSdoWhtSpgEn7jto57xDwkXeCOaY4j\n",
    "zuWPWfnBgCvP9tZgrGfUsAUHSvrWWOVrsvUTa8JCytS3Uudzmy2hZPKOLP4LSZu3\n",
    "eiKHARF52eCjRy7CPmwK6w3SFrjeq6VFv+ukqwC/GNDGVwRrMGnq6wnvjKxz/NkX\n",
    "MipRZuKWStUTJiiTjKVJ1pmXYjU5HHTdaSFrVauFi0eKAzBwMor/uX95zVjKTEDF\n",
    "tmBrj9Pme2EaB97hUSH+qiZbsna7mcZfuu9GswIDAQABAoIBAB6ksnJqKdxGEwX2\n",
    "ixV8Ur9PR45dSCi6mjknIMLyL/EG6WLfjAlYKCsQdRugSnqwIL67m6piJLQZ9Qp9\n",
    "/5/aw+G+AcRs4klrQy8XzpFAa8bEjvbVm9/G9XJehplO2zYAu0i8JN9FwQK0+LtY\n",
    "1XAS07g3F9npYmoQJ3TK2a2YBdvUB0+7s0fqhHMFgYSUVj+KtFYNZAzsqd80Rv18\n",
    "PNcm9jJ8FyLtt22mOIhcccDJ+SdouXCW330H4Z0V5Z+BcXVgf4edXxgI8MKzGkeb\n",
    "8paYPdy99LUmoIXT9xFQ9S2VJCLGqe/LZ8J04E99Q7VLvZcRYZOm6wcvbJOpmrcZ\n",
    "t4tyZQECgYEA/1BOhTJuXAkXv6dz95w0BE7JJ9Gp0vHt8sCFys7ZATrepg1Y2WRM\n",
    "gjHknXh/xSdG1d02VjfDbnt6cS737q6BwBZGqy33J/vUaqmYL5pWFAY3K6edJHdT\n",
    "l5FymYbfD0DOKeBoG1/+zeHyq4fl2Kh1giWgyIVLE67RpN1oUo2lhRcCgYEA9sYB\n",
    "zsdFWTnsCC+7I4PL8BvBMJRZPgS5qRo0vZibwcLijIbMbplxcRHw6CNdLd3PALe4\n",
    "VfAhqIlJ8TzFhSHBRqiptBLMUuzIThzU1GEG7z+F39C8yo06Tu0kPhYxbdB4KEAC\n",
    "F1R6oI3UlLjE8/uNvmJ0M7GUYwX19JSSzMOQhMUCgYEA8T8K0uVSTnjxDdHGzIO2\n",
    "yxM/E/cTRxX/R1APnBFUD8t2suUNvWz+tk86vGkuIjb4wgCi5VkPu4fFrMk60Tfn\n",
    "tn/WCs4GKqvUjWzvNpvZFlbBLujUna57OE7hQJymjR0pMXywIp3UgOotiVOCJfUY\n",
    "BABWKuN4i4K26dekSc06R8UCgYEAg0nXHl7wK0dgpv5V7tAoyQbLIoBadl9nM2to\n",
    "0dIGU/DOPPteeh0SuJhV9fsSkNtoTTZxUO9fyN25xCmT4H+T53bGSrKRmDC3ZK98\n",
    "H727RcAjBm90ccLvWZxa4tlF1OnLc4aSVj0wvIiYp8MhrbiQsdCJiBMbIg/Cyivd\n",
    "ailFkw0CgYEA5vSADH9FaKE16hUigMh6dqlKpvqyYm2z4LibogtWTF3ODQbuhg2I\n",
    "+/NWltLPYunURJMyUSw8d/YYce9wEIgLjDYuyUBDaazC587tKVWDqNB+UeOj9OSQ\n",
    "zVxmL/eftfgJ4D2brjSacTEeqek1Y5cxp1xqsUCzJ4wNUEy/qsLrCCQ=\n",
    "-----END RSA PRIVATE KEY-----\n",
);

/// A CA key as CAPI generates one with `encryptionAlgorithm: ECDSA-P256` (SEC1): a throwaway test
/// fixture made with `openssl ecparam -name prime256v1 -genkey -noout`.
const EC_SEC1_KEY: &str = concat!(
    "-----BEGIN EC PRIVATE KEY-----\n",
    "MHcCAQEEIKb1JNMs+YtL+6YhRp/V5H+ixo8EKnX/O0F4ow5hjPzFoAoGCCqGSM49\n",
    "AwEHoUQDQgAET7vKZJYsD/lSwES60v6k0tXcqGsL4gMfzoDkBxiVeLAw+Cw0PKst\n",
    "PJZpM0lFgi77yxR6+oUmhstCVLd8AEEJjg==\n",
    "-----END EC PRIVATE KEY-----\n",
);

const VERSION: &str = "v1.36.3";
const TOKEN: &str = "cpjoin.0123456789abcdef";

/// The cached release of [`VERSION`] with its etcd, as `make testbed` builds it.
fn release() -> PathBuf {
    let root = std::env::var_os("CAPI_TESTBED_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            std::env::var_os("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .unwrap_or_else(|| {
                    PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache")
                })
                .join("kubectl-capi-kamaji")
        });
    let prefix = format!("k8s-{VERSION}-etcd-");
    let dir = std::fs::read_dir(&root).ok().and_then(|rd| {
        rd.flatten().map(|e| e.path()).find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(&prefix))
        })
    });
    match dir {
        Some(d)
            if [
                "etcd",
                "kube-apiserver",
                "kube-controller-manager",
                "kube-scheduler",
            ]
            .iter()
            .all(|b| d.join(b).is_file()) =>
        {
            d
        }
        _ => panic!(
            "no {prefix}* release with etcd, kube-apiserver, kube-controller-manager and kube-scheduler in {}: run `make testbed`",
            root.display()
        ),
    }
}

/// A self-signed CA named `cn` with `key` (its PEM written as given).
fn write_ca(pki: &Path, name: &str, cn: &str, key_pem: &str) {
    let key = certs::key_pair(key_pem).unwrap();
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.distinguished_name = rcgen::DistinguishedName::new();
    p.distinguished_name.push(DnType::CommonName, cn);
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    p.not_before = rcgen::date_time_ymd(2024, 1, 1);
    p.not_after = rcgen::date_time_ymd(2034, 1, 1);
    let cert = p.self_signed(&key).unwrap();
    let crt = pki.join(format!("{name}.crt"));
    std::fs::create_dir_all(crt.parent().unwrap()).unwrap();
    std::fs::write(&crt, cert.pem()).unwrap();
    std::fs::write(pki.join(format!("{name}.key")), key_pem).unwrap();
}

/// What CAPI's bootstrap data writes into `/etc/kubernetes/pki`: the cluster CA (RSA, PKCS#1,
/// as CAPI's default), the etcd CA (ECDSA, SEC1), the front-proxy CA (ECDSA, PKCS#8) and the
/// service-account key pair.
fn write_pki(pki: &Path) {
    write_ca(pki, "ca", "kubernetes", RSA_PKCS1_KEY);
    write_ca(pki, "etcd/ca", "etcd-ca", EC_SEC1_KEY);
    write_ca(
        pki,
        "front-proxy-ca",
        "front-proxy-ca",
        &KeyPair::generate().unwrap().serialize_pem(),
    );
    let sa = KeyPair::generate().unwrap();
    std::fs::write(pki.join("sa.key"), sa.serialize_pem()).unwrap();
    std::fs::write(pki.join("sa.pub"), sa.public_key_pem()).unwrap();
}

fn copy_pki(from: &Path, to: &Path) {
    for f in certs::CA_FILES {
        let dst = to.join(f);
        std::fs::create_dir_all(dst.parent().unwrap()).unwrap();
        std::fs::copy(from.join(f), dst).unwrap();
    }
}

fn ctx(root: &Path, host: &str, release: &Path) -> Ctx {
    Ctx {
        dir: root.join(host).join("run"),
        host: host.into(),
        version: VERSION.into(),
        etcd: release.join("etcd"),
        release: release.to_path_buf(),
        hosts_file: None,
    }
}

/// Waits up to `secs` for `f` to hold.
async fn eventually<F, Fut>(what: &str, secs: u64, f: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<(), String>>,
{
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        match f().await {
            Ok(()) => return,
            Err(e) if Instant::now() > deadline => panic!("{what}: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(300)).await,
        }
    }
}

async fn mirror_pods_ready(admin: &Client, host: &str) -> Result<(), String> {
    let pods: Api<Pod> = Api::namespaced(admin.clone(), "kube-system");
    for c in pods::COMPONENTS {
        let name = pods::name(c, host);
        let pod = pods.get(&name).await.map_err(|e| format!("{name}: {e}"))?;
        let ready = pod
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        if !ready {
            return Err(format!("{name} is not Ready"));
        }
        let labels = pod.metadata.labels.unwrap_or_default();
        if labels.get("component").map(String::as_str) != Some(c) {
            return Err(format!("{name}: labels {labels:?}"));
        }
    }
    Ok(())
}

async fn members(cp: &ControlPlane) -> Vec<etcd::Member> {
    let url = format!("https://127.0.0.1:{}", cp.ports.etcd_client);
    let gw = etcd::Gateway::new(&url, &cp.etcd_ca, &cp.etcd_client)
        .await
        .unwrap();
    gw.members().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_control_plane_inits_joins_a_second_host_and_outlives_the_first_ones_reset() {
    let t0 = Instant::now();
    let release = release();
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let endpoint = format!("127.0.0.1:{}", crate::free_port().unwrap());
    let pki_a = root.join("cp-a/etc/kubernetes/pki");
    let pki_b = root.join("cp-b/etc/kubernetes/pki");
    write_pki(&pki_a);
    copy_pki(&pki_a, &pki_b);

    // kubeadm init on A.
    let init = format!(
        "---\napiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\ncontrolPlaneEndpoint: {endpoint}\nkubernetesVersion: {VERSION}\nclusterName: cp-test\napiServer:\n  certSANs:\n  - cp.example.test\n---\napiVersion: kubeadm.k8s.io/v1beta4\nkind: InitConfiguration\nnodeRegistration:\n  name: cp-a\n"
    );
    let a = ControlPlane::init(ctx(root, "cp-a", &release), &init, &pki_a)
        .await
        .unwrap_or_else(|e| panic!("kubeadm init: {e}"));
    assert_eq!(a.version(), VERSION);
    assert_eq!(a.joined().endpoint, endpoint);
    assert_eq!(vip::backends(&endpoint), [loopback(a.ports.apiserver)]);
    assert_eq!(
        a.target("etcd-cp-a", 2379),
        Some(loopback(a.ports.etcd_client))
    );
    assert_eq!(
        a.target("kube-apiserver", 6443),
        Some(loopback(a.ports.apiserver))
    );
    assert_eq!(a.target("kube-apiserver", 1), None);
    let admin = a.admin_client().await.unwrap();
    assert!(
        readyz(admin.clone()).await,
        "the VIP does not answer /readyz"
    );

    let cms = |ns: &str| Api::<ConfigMap>::namespaced(admin.clone(), ns);
    let kc = cms("kube-system").get("kubeadm-config").await.unwrap();
    let cc = &kc.data.unwrap()["ClusterConfiguration"];
    assert!(
        cc.contains("kubeadm.k8s.io/v1beta4") && cc.contains(&endpoint),
        "{cc}"
    );
    assert!(cms("kube-system").get("kubelet-config").await.is_ok());
    let info = cms("kube-public").get("cluster-info").await.unwrap();
    assert!(info.data.unwrap()["kubeconfig"].contains(&format!("server: https://{endpoint}")));

    let node = Api::<Node>::all(admin.clone()).get("cp-a").await.unwrap();
    let labels = node.metadata.labels.unwrap_or_default();
    assert_eq!(
        labels
            .get("node-role.kubernetes.io/control-plane")
            .map(String::as_str),
        Some("")
    );
    let taints = node.spec.and_then(|s| s.taints).unwrap_or_default();
    assert!(
        taints
            .iter()
            .any(|t| t.key == "node-role.kubernetes.io/control-plane" && t.effect == "NoSchedule"),
        "{taints:?}"
    );
    a.refresh_mirror_pods(&admin).await;
    mirror_pods_ready(&admin, "cp-a").await.unwrap();
    let t_init = t0.elapsed();

    // A bootstrap token, as CAPI's bootstrap provider creates one for a join.
    let (id, secret) = TOKEN.split_once('.').unwrap();
    let token: Secret = serde_json::from_value(serde_json::json!({
        "metadata": {"name": format!("bootstrap-token-{id}"), "namespace": "kube-system"},
        "type": "bootstrap.kubernetes.io/token",
        "stringData": {"token-id": id, "token-secret": secret,
            "usage-bootstrap-authentication": "true", "usage-bootstrap-signing": "true",
            "auth-extra-groups": "system:bootstrappers:kubeadm:default-node-token"}}))
    .unwrap();
    Api::<Secret>::namespaced(admin.clone(), "kube-system")
        .create(&PostParams::default(), &token)
        .await
        .unwrap();

    // kubeadm join --control-plane on B.
    let join_cfg = format!(
        "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\ncontrolPlane:\n  localAPIEndpoint:\n    advertiseAddress: 127.0.0.1\n    bindPort: 6443\ndiscovery:\n  bootstrapToken:\n    apiServerEndpoint: {endpoint}\n    token: {TOKEN}\n    unsafeSkipCAVerification: true\nnodeRegistration:\n  name: cp-b\n"
    );
    assert!(is_control_plane_join(&join_cfg));
    let b = ControlPlane::join(ctx(root, "cp-b", &release), &join_cfg, &pki_b)
        .await
        .unwrap_or_else(|e| panic!("kubeadm join --control-plane: {e}"));
    let ms = members(&b).await;
    assert_eq!(ms.len(), 2, "{ms:?}");
    assert!(ms.iter().all(|m| !m.learner), "{ms:?}");
    b.refresh_mirror_pods(&admin).await;
    mirror_pods_ready(&admin, "cp-b").await.unwrap();
    let node_b = Api::<Node>::all(admin.clone()).get("cp-b").await.unwrap();
    assert!(
        node_b
            .metadata
            .labels
            .unwrap_or_default()
            .contains_key("node-role.kubernetes.io/control-plane")
    );
    let t_join = t0.elapsed();

    // kubeadm reset on A: B carries on alone.
    a.reset().await;
    // The certificates the testbed made are gone; the CAs the bootstrap data wrote are the
    // host's `kubeadm reset` shim's to delete (through the host's /etc overlay).
    assert!(!pki_a.join("apiserver.crt").exists() && pki_a.join("ca.key").exists());
    eventually("one etcd member left", 30, || async {
        let ms = members(&b).await;
        (ms.len() == 1 && ms[0].name == "cp-b")
            .then_some(())
            .ok_or(format!("{ms:?}"))
    })
    .await;
    assert_eq!(vip::backends(&endpoint), [loopback(b.ports.apiserver)]);
    let admin_b = b.admin_client().await.unwrap();
    eventually("the VIP answers through B", 30, || {
        let c = admin_b.clone();
        async move { readyz(c).await.then_some(()).ok_or("not ready".to_string()) }
    })
    .await;
    eventually("A's mirror pods are gone", 30, || {
        let c = admin_b.clone();
        async move {
            let left = Api::<Pod>::namespaced(c, "kube-system")
                .get_opt("etcd-cp-a")
                .await
                .map_err(|e| e.to_string())?;
            left.is_none()
                .then_some(())
                .ok_or("etcd-cp-a is still there".to_string())
        }
    })
    .await;
    eprintln!(
        "SIMULATED control plane: init {t_init:?}, join {:?}, all {:?}",
        t_join - t_init,
        t0.elapsed()
    );
    drop(b);
    assert!(vip::backends(&endpoint).is_empty());
}

#[test]
fn every_form_capi_writes_a_ca_key_in_loads() {
    let rsa = certs::key_pair(RSA_PKCS1_KEY).unwrap();
    assert_eq!(rsa.algorithm(), &rcgen::PKCS_RSA_SHA256);
    let ec = certs::key_pair(EC_SEC1_KEY).unwrap();
    assert_eq!(ec.algorithm(), &rcgen::PKCS_ECDSA_P256_SHA256);
    let pkcs8 = KeyPair::generate().unwrap().serialize_pem();
    assert!(certs::key_pair(&pkcs8).is_ok());
    assert!(
        certs::key_pair("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n").is_err()
    );
}
