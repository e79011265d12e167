//! `kubectl capi init --datastore etcd`: an etcd for Kamaji's tenants in Kamaji's namespace, set
//! up as the clastix `kamaji-etcd` Helm chart (the one Kamaji's docs install) sets it up: a
//! StatefulSet of three members serving TLS with client-certificate authentication, a headless
//! Service, and the DataStore that points Kamaji at them; but with cert-manager, which init
//! installs and waits for first, issuing the certificates in place of the chart's cfssl Job.
//! [`objects`] are, in apply order: the self-signed Issuer, the CA Certificate and the Issuer
//! that signs with it; the members' serving (and peer) certificate and the `root` client
//! certificate Kamaji dials with; the Service; the StatefulSet; the DataStore. Pure: the
//! preflights (a StorageClass to bind the volumes) and the waits are the plugin's.
//!
//! Not set up, on purpose: etcd's authentication, which the chart's setup Job turns on
//! (`etcdctl auth enable`). Once it is on, etcd answers every JSON-gateway request of a client
//! whose certificate has a CommonName with 400 ("CommonName of client sending a request against
//! gateway will be ignored", `embed/serve.go`, etcd v3.6.8), and the gateway is what `kubectl
//! kamaji backup`, `datastores` and the reconciler's TenantBackups speak (`ketcd`). Until they
//! speak etcd's gRPC API, as Kamaji's driver does, etcd does not enforce the user and role
//! Kamaji makes for each tenant: a certificate this CA signed reads every tenant's keys.

use serde_json::{Value, json};

use super::manifests::{COMPONENT_LABEL, VERSION_LABEL};
use super::set::KAMAJI_VERSION;
use crate::error::{Error, usage};
use crate::groups::{CERT_MANAGER_GROUP, KAMAJI_GROUP};
use crate::json::{i64_at, str_at};

/// Kamaji's namespace, where the etcd runs beside it.
pub const NAMESPACE: &str = "kamaji-system";
/// The StatefulSet, its headless Service, and the prefix of every other object's name.
pub const NAME: &str = "kamaji-etcd";
/// The members. Fixed: three is the smallest etcd that keeps a quorum through the loss of one
/// member, and growing or shrinking a running etcd takes member changes (`etcdctl member add`)
/// that a StatefulSet's replica count does not make.
pub const REPLICAS: usize = 3;
/// The etcd the testbed runs (`go.etcd.io/etcd/server/v3` v3.6.8 in `testbed/k8s/go.mod`), in
/// the image kubeadm names for it (`DefaultEtcdVersion = "3.6.8-0"`,
/// `cmd/kubeadm/app/constants/constants.go`, Kubernetes v1.36.3). Counted on to hold no shell:
/// recent tags there are etcd's own distroless images (kubernetes/k8s.io#8596), so the container
/// runs `etcd` itself and the kubelet expands `$(POD_NAME)` in its arguments.
pub const IMAGE: &str = "registry.k8s.io/etcd:3.6.8-0";
/// The CA: its Certificate, the Secret cert-manager writes it to, and the Issuer that signs
/// with it.
pub const CA: &str = "kamaji-etcd-ca";
/// The members' certificate (and its Secret), for serving clients and for their peers.
pub const SERVER_SECRET: &str = "kamaji-etcd-server";
/// The `root` client certificate (and its Secret) Kamaji dials etcd with.
pub const ROOT_CLIENT_SECRET: &str = "kamaji-etcd-root-client";
/// The Issuer that signs the CA itself.
pub const SELF_SIGNED_ISSUER: &str = "kamaji-etcd-selfsigned";
/// Each member's volume when `--datastore-size` is not given.
pub const DEFAULT_SIZE: &str = "10Gi";
/// The DataStore's name when none is given: Kamaji's default DataStore.
pub const DEFAULT_DATASTORE: &str = "default";

/// The cluster's DNS domain the members' names end in (the chart's `clusterDomain` default).
const CLUSTER_DOMAIN: &str = "cluster.local";
const CLIENT_PORT: u16 = 2379;
const PEER_PORT: u16 = 2380;
const METRICS_PORT: u16 = 2381;
/// Where the members' Secret is mounted: cert-manager writes `ca.crt`, `tls.crt`, `tls.key`.
const PKI_DIR: &str = "/etc/etcd/pki";
/// The volume's mount; etcd's data directory is a folder in it, so a file system's own entries
/// at its root (`lost+found`) are never taken for etcd's.
const DATA_MOUNT: &str = "/var/lib/etcd";
/// The volume claim template's name (the claims are `data-kamaji-etcd-N`).
const CLAIM: &str = "data";

const GI: u128 = 1 << 30;
/// The smallest volume: etcd's own default backend quota (2 GiB) plus the room in
/// [`HEADROOM`].
const MIN_SIZE: u128 = 4 * GI;
/// The largest volume: a database is bounded by [`MAX_QUOTA`], but some clouds give a disk more
/// IOPS the larger it is.
const MAX_SIZE: u128 = 1 << 40;
/// The backend quota (`--quota-backend-bytes`): 8 GiB, the chart's value and the most etcd
/// recommends.
const MAX_QUOTA: u128 = 8 * GI;
/// What a volume keeps beyond the database: the write-ahead log and snapshots. An etcd whose
/// database reaches its quota refuses writes and raises an alarm (NOSPACE); one whose disk fills
/// stops.
const HEADROOM: u128 = 2 * GI;

/// What `--datastore etcd` lets a user choose; [`EtcdOptions::new`] bounds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EtcdOptions {
    storage_class: Option<String>,
    size: Option<String>,
    datastore: String,
}

impl Default for EtcdOptions {
    fn default() -> EtcdOptions {
        EtcdOptions {
            storage_class: None,
            size: None,
            datastore: DEFAULT_DATASTORE.to_string(),
        }
    }
}

impl EtcdOptions {
    /// Options from `--datastore-storage-class` and `--datastore-size` as typed: the class a
    /// DNS subdomain (a StorageClass's name), the size a Kubernetes quantity from 4Gi to 1Ti.
    pub fn new(storage_class: Option<&str>, size: Option<&str>) -> Result<EtcdOptions, Error> {
        if let Some(c) = storage_class
            && !dns_subdomain(c)
        {
            return Err(usage(
                format!("--datastore-storage-class {c:?} is not a StorageClass name"),
                "a StorageClass name is lower-case letters, digits, '-' and '.' (kubectl get storageclass lists them)",
            ));
        }
        if let Some(s) = size {
            check_size(s)?;
        }
        Ok(EtcdOptions {
            storage_class: storage_class.map(str::to_string),
            size: size.map(str::to_string),
            ..EtcdOptions::default()
        })
    }

    /// The same options with the DataStore named `name`.
    pub fn named(self, name: &str) -> Result<EtcdOptions, Error> {
        if !dns_subdomain(name) {
            return Err(usage(
                format!("{name:?} is not a DataStore name"),
                "use lower-case letters, digits, '-' and '.'",
            ));
        }
        Ok(EtcdOptions {
            datastore: name.to_string(),
            ..self
        })
    }

    /// The StorageClass given, if any (`None`: the cluster's default class).
    pub fn storage_class(&self) -> Option<&str> {
        self.storage_class.as_deref()
    }

    /// Each member's volume size, as given or [`DEFAULT_SIZE`].
    pub fn size(&self) -> &str {
        self.size.as_deref().unwrap_or(DEFAULT_SIZE)
    }

    /// The DataStore's name.
    pub fn datastore(&self) -> &str {
        &self.datastore
    }

    /// These options fitted to the StatefulSet `existing` (as the API server returns it) that
    /// an earlier init made: a StatefulSet's volume claim templates cannot change, so what was
    /// not given is taken from it, and a size or class given that differs is refused.
    pub fn fit_to(&self, existing: &Value) -> Result<EtcdOptions, Error> {
        let template = existing
            .pointer("/spec/volumeClaimTemplates")
            .and_then(Value::as_array)
            .and_then(|ts| {
                ts.iter()
                    .find(|t| str_at(t, &["metadata", "name"]) == Some(CLAIM))
            });
        let Some(template) = template else {
            return Ok(self.clone());
        };
        let had_size = str_at(template, &["spec", "resources", "requests", "storage"]);
        let had_class = str_at(template, &["spec", "storageClassName"]);
        let hint = format!(
            "keep them (omit --datastore-size and --datastore-storage-class), or delete StatefulSet {NAMESPACE}/{NAME} and its claims first (its data goes with them)"
        );
        let mut fitted = self.clone();
        match (&self.size, had_size) {
            (Some(want), Some(had)) if quantity_bytes(want) != quantity_bytes(had) => {
                return Err(refused_change(format!("volumes of {had}"), hint));
            }
            (None, Some(had)) => fitted.size = Some(had.to_string()),
            _ => {}
        }
        match (&self.storage_class, had_class) {
            (Some(want), had) if had != Some(want.as_str()) => {
                let had = had.map_or("the default StorageClass".to_string(), |c| {
                    format!("StorageClass {c}")
                });
                return Err(refused_change(had, hint));
            }
            (None, Some(had)) => fitted.storage_class = Some(had.to_string()),
            _ => {}
        }
        Ok(fitted)
    }
}

fn refused_change(had: String, hint: String) -> Error {
    Error::Other {
        message: format!(
            "StatefulSet {NAMESPACE}/{NAME} exists with {had}: a StatefulSet's volumes cannot change; nothing was applied"
        ),
        hint: Some(hint),
    }
}

/// Checks `--datastore-size`: a quantity (`10Gi`, `20G`, `1.5Ti`) from 4Gi to 1Ti.
fn check_size(s: &str) -> Result<u128, Error> {
    let Some(bytes) = quantity_bytes(s) else {
        return Err(usage(
            format!("--datastore-size {s:?} is not a Kubernetes quantity"),
            "give a size with its unit, e.g. --datastore-size 20Gi",
        ));
    };
    if !(MIN_SIZE..=MAX_SIZE).contains(&bytes) {
        return Err(usage(
            format!("--datastore-size {s}: each etcd member's volume must be 4Gi to 1Ti"),
            format!("e.g. --datastore-size {DEFAULT_SIZE}"),
        ));
    }
    Ok(bytes)
}

/// The bytes of a Kubernetes quantity without sign or exponent (`10Gi`, `500M`, `1.5Ti`,
/// `4294967296`), rounded down; `None` for anything else. The milli suffix (`m`) is refused:
/// no volume is measured in thousandths of a byte.
fn quantity_bytes(q: &str) -> Option<u128> {
    if q.is_empty() || q.len() > 32 {
        return None;
    }
    let digits_end = q
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(q.len());
    let (number, suffix) = q.split_at(digits_end);
    let multiplier: u128 = match suffix {
        "" => 1,
        "k" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "T" => 1_000_000_000_000,
        "P" => 1_000_000_000_000_000,
        "E" => 1_000_000_000_000_000_000,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        "Pi" => 1 << 50,
        "Ei" => 1 << 60,
        _ => return None,
    };
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() || fraction.contains('.') || (number.contains('.') && fraction.is_empty()) {
        return None;
    }
    let whole: u128 = whole.parse().ok()?;
    let mut bytes = whole.checked_mul(multiplier)?;
    if !fraction.is_empty() {
        let scale = 10u128.checked_pow(u32::try_from(fraction.len()).ok()?)?;
        let part: u128 = fraction.parse().ok()?;
        bytes = bytes.checked_add(part.checked_mul(multiplier)? / scale)?;
    }
    Some(bytes)
}

/// A DNS subdomain (RFC 1123), what a StorageClass's or DataStore's name must be.
fn dns_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

/// Member `i`'s pod name (`kamaji-etcd-0`).
fn member(i: usize) -> String {
    format!("{NAME}-{i}")
}

/// Member `i`'s name through the headless Service, as it advertises itself.
fn member_host(i: usize) -> String {
    format!("{}.{NAME}.{NAMESPACE}.svc.{CLUSTER_DOMAIN}", member(i))
}

/// `--initial-cluster`: every member's name and peer URL.
fn initial_cluster() -> String {
    (0..REPLICAS)
        .map(|i| format!("{}=https://{}:{PEER_PORT}", member(i), member_host(i)))
        .collect::<Vec<_>>()
        .join(",")
}

/// What selects the members; it never changes, as a StatefulSet's selector cannot.
fn selector() -> Value {
    json!({
        "app.kubernetes.io/name": NAME,
        "app.kubernetes.io/instance": NAME,
    })
}

/// Every object's labels: the selector's, and those init puts on what it applies
/// ([`COMPONENT_LABEL`], [`VERSION_LABEL`]), as part of Kamaji's component.
fn labels() -> Value {
    let mut l = selector();
    l["app.kubernetes.io/component"] = "datastore".into();
    l["app.kubernetes.io/part-of"] = "kamaji".into();
    // The component is Kamaji's (its id in `set::COMPONENTS`): the etcd is applied with it.
    l[COMPONENT_LABEL] = "kamaji".into();
    l[VERSION_LABEL] = KAMAJI_VERSION.into();
    l
}

fn meta(name: &str, namespaced: bool) -> Value {
    let mut m = json!({ "name": name, "labels": labels() });
    if namespaced {
        m["namespace"] = NAMESPACE.into();
    }
    m
}

fn cert_manager(kind: &str, name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": format!("{CERT_MANAGER_GROUP}/v1"),
        "kind": kind,
        "metadata": meta(name, true),
        "spec": spec,
    })
}

fn issuer_ref(name: &str) -> Value {
    json!({ "name": name, "kind": "Issuer", "group": CERT_MANAGER_GROUP })
}

/// RSA 2048 in PKCS#1 for every key. Kamaji v1.0.0 signs each tenant's etcd client certificate
/// with the DataStore's CA key, which it parses with `x509.ParsePKCS1PrivateKey` and nothing
/// else (`ParsePrivateKeyBytes`, `internal/crypto/crypto.go`): an ECDSA CA (the chart's
/// cert-manager mode) or a PKCS#8 one would fail every tenant. etcd takes either; the members'
/// and `root`'s keys are RSA too, the one kind this repository's etcd clients are proven with.
fn private_key(rotate: bool) -> Value {
    let mut k = json!({ "algorithm": "RSA", "size": 2048, "encoding": "PKCS1" });
    if !rotate {
        k["rotationPolicy"] = "Never".into();
    }
    k
}

/// The members' certificate's DNS names: each member by the headless Service, short and
/// fully qualified, the Service itself, and `localhost` for a client on the member's own host.
fn server_dns_names() -> Vec<String> {
    let mut names = Vec::new();
    for i in 0..REPLICAS {
        names.push(member_host(i));
        names.push(format!("{}.{NAME}.{NAMESPACE}.svc", member(i)));
    }
    names.extend([
        NAME.to_string(),
        format!("{NAME}.{NAMESPACE}.svc"),
        format!("{NAME}.{NAMESPACE}.svc.{CLUSTER_DOMAIN}"),
        "localhost".to_string(),
    ]);
    names
}

fn certificates() -> Vec<Value> {
    vec![
        cert_manager("Issuer", SELF_SIGNED_ISSUER, json!({ "selfSigned": {} })),
        // Ten years, and its key kept when cert-manager renews it: the tenants' certificates
        // Kamaji signed with it (valid ten years, `NewCertificateTemplate`) and the members'
        // trust must outlive a renewal.
        cert_manager(
            "Certificate",
            CA,
            json!({
                "isCA": true,
                "commonName": CA,
                "secretName": CA,
                "duration": "87600h",
                "privateKey": private_key(false),
                "issuerRef": issuer_ref(SELF_SIGNED_ISSUER),
            }),
        ),
        cert_manager("Issuer", CA, json!({ "ca": { "secretName": CA } })),
        // Client auth too: a member presents it to its peers (--peer-client-cert-auth).
        cert_manager(
            "Certificate",
            SERVER_SECRET,
            json!({
                "commonName": NAME,
                "secretName": SERVER_SECRET,
                "usages": ["digital signature", "key encipherment", "server auth", "client auth"],
                "dnsNames": server_dns_names(),
                "ipAddresses": ["127.0.0.1"],
                "privateKey": private_key(true),
                "issuerRef": issuer_ref(CA),
            }),
        ),
        // etcd takes a client certificate's common name as its user: `root`.
        cert_manager(
            "Certificate",
            ROOT_CLIENT_SECRET,
            json!({
                "commonName": "root",
                "secretName": ROOT_CLIENT_SECRET,
                "usages": ["digital signature", "key encipherment", "client auth"],
                "privateKey": private_key(true),
                "issuerRef": issuer_ref(CA),
            }),
        ),
    ]
}

/// Headless, and publishing members before they are ready: a member is not ready until the
/// cluster has formed, which needs the others to find it by name.
fn service() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta(NAME, true),
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": true,
            "selector": selector(),
            "ports": [
                { "name": "client", "port": CLIENT_PORT, "targetPort": CLIENT_PORT },
                { "name": "peer", "port": PEER_PORT, "targetPort": PEER_PORT },
                { "name": "metrics", "port": METRICS_PORT, "targetPort": METRICS_PORT },
            ],
        },
    })
}

/// etcd's arguments: `$(POD_NAME)` is the member's own name, which the kubelet expands.
fn etcd_args(quota: u128) -> Vec<String> {
    let own = format!("$(POD_NAME).{NAME}.{NAMESPACE}.svc.{CLUSTER_DOMAIN}");
    vec![
        "--name=$(POD_NAME)".into(),
        format!("--data-dir={DATA_MOUNT}/data"),
        format!("--listen-client-urls=https://0.0.0.0:{CLIENT_PORT}"),
        format!("--advertise-client-urls=https://{own}:{CLIENT_PORT}"),
        format!("--listen-peer-urls=https://0.0.0.0:{PEER_PORT}"),
        format!("--initial-advertise-peer-urls=https://{own}:{PEER_PORT}"),
        format!("--initial-cluster={}", initial_cluster()),
        "--initial-cluster-state=new".into(),
        format!("--initial-cluster-token={NAME}"),
        "--client-cert-auth=true".into(),
        format!("--trusted-ca-file={PKI_DIR}/ca.crt"),
        format!("--cert-file={PKI_DIR}/tls.crt"),
        format!("--key-file={PKI_DIR}/tls.key"),
        "--peer-client-cert-auth=true".into(),
        format!("--peer-trusted-ca-file={PKI_DIR}/ca.crt"),
        format!("--peer-cert-file={PKI_DIR}/tls.crt"),
        format!("--peer-key-file={PKI_DIR}/tls.key"),
        format!("--listen-metrics-urls=http://0.0.0.0:{METRICS_PORT}"),
        "--auto-compaction-mode=periodic".into(),
        "--auto-compaction-retention=5m".into(),
        format!("--quota-backend-bytes={quota}"),
    ]
}

/// The backend quota for a volume of `size` bytes: [`MAX_QUOTA`], or the volume less
/// [`HEADROOM`] when that is smaller.
fn quota(size: u128) -> u128 {
    MAX_QUOTA.min(size.saturating_sub(HEADROOM))
}

/// An HTTP probe of the metrics listener, which serves `/livez` and `/readyz` (etcd v3.6.8,
/// `embed/etcd.go` `serveMetrics` → `etcdhttp.HandleHealth`).
fn probe(path: &str, period: u32, failures: u32) -> Value {
    json!({
        "httpGet": { "path": path, "port": METRICS_PORT, "scheme": "HTTP" },
        "periodSeconds": period,
        "timeoutSeconds": 15,
        "failureThreshold": failures,
    })
}

fn statefulset(opts: &EtcdOptions) -> Value {
    let size = opts.size();
    let bytes = quantity_bytes(size).unwrap_or(MAX_QUOTA + HEADROOM);
    let mut claim = json!({
        "metadata": { "name": CLAIM },
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": { "requests": { "storage": size } },
        },
    });
    if let Some(c) = opts.storage_class() {
        claim["spec"]["storageClassName"] = c.into();
    }
    let container = json!({
        "name": "etcd",
        "image": IMAGE,
        "command": ["/usr/local/bin/etcd"],
        "args": etcd_args(quota(bytes)),
        "env": [{ "name": "POD_NAME", "valueFrom": { "fieldRef": { "fieldPath": "metadata.name" } } }],
        "ports": [
            { "name": "client", "containerPort": CLIENT_PORT },
            { "name": "peer", "containerPort": PEER_PORT },
            { "name": "metrics", "containerPort": METRICS_PORT },
        ],
        "volumeMounts": [
            { "name": CLAIM, "mountPath": DATA_MOUNT },
            { "name": "pki", "mountPath": PKI_DIR, "readOnly": true },
        ],
        "resources": { "requests": { "cpu": "100m", "memory": "256Mi" } },
        // Up to five minutes for the three members to find each other and elect a leader
        // before the liveness probe may restart one.
        "startupProbe": probe("/livez", 10, 30),
        "livenessProbe": probe("/livez", 10, 8),
        "readinessProbe": probe("/readyz", 5, 3),
        "securityContext": { "allowPrivilegeEscalation": false },
    });
    json!({
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": meta(NAME, true),
        "spec": {
            "replicas": REPLICAS,
            "serviceName": NAME,
            // The members start together: the first cannot become ready (or be waited for,
            // as OrderedReady would) until a quorum of them runs.
            "podManagementPolicy": "Parallel",
            "selector": { "matchLabels": selector() },
            "template": {
                // The selector's labels only: a label that moves with init's version here
                // would restart every member on each upgrade.
                "metadata": { "labels": selector() },
                "spec": {
                    "containers": [container],
                    // The Secret mounted whole (no subPath), so the kubelet refreshes the files
                    // when cert-manager renews them; etcd reads them again on each handshake.
                    "volumes": [{ "name": "pki", "secret": { "secretName": SERVER_SECRET } }],
                    "affinity": { "podAntiAffinity": {
                        "preferredDuringSchedulingIgnoredDuringExecution": [{
                            "weight": 100,
                            "podAffinityTerm": {
                                "labelSelector": { "matchLabels": selector() },
                                "topologyKey": "kubernetes.io/hostname",
                            },
                        }],
                    } },
                },
            },
            "volumeClaimTemplates": [claim],
        },
    })
}

/// A `secretReference` of the DataStore (Kamaji v1.0.0, `api/v1alpha1/datastore_types.go`:
/// `SecretReference` is a core `SecretReference` inlined with a `keyPath`).
fn secret_ref(name: &str, key: &str) -> Value {
    json!({ "secretReference": { "name": name, "namespace": NAMESPACE, "keyPath": key } })
}

/// Each member's client endpoint, `host:port` (the DataStore's endpoints take no scheme).
fn endpoints() -> Vec<String> {
    (0..REPLICAS)
        .map(|i| format!("{}:{CLIENT_PORT}", member_host(i)))
        .collect()
}

/// Each member by its own name, as the chart's `datastore.headless` default lists them
/// (clastix/kamaji#856): Kamaji's etcd client balances over them.
fn datastore(opts: &EtcdOptions) -> Value {
    json!({
        "apiVersion": format!("{KAMAJI_GROUP}/v1alpha1"),
        "kind": "DataStore",
        "metadata": meta(opts.datastore(), false),
        "spec": {
            "driver": "etcd",
            "endpoints": endpoints(),
            "tlsConfig": {
                // Kamaji signs each tenant's client certificate with this pair.
                "certificateAuthority": {
                    "certificate": secret_ref(CA, "tls.crt"),
                    "privateKey": secret_ref(CA, "tls.key"),
                },
                "clientCertificate": {
                    "certificate": secret_ref(ROOT_CLIENT_SECRET, "tls.crt"),
                    "privateKey": secret_ref(ROOT_CLIENT_SECRET, "tls.key"),
                },
            },
        },
    })
}

/// The etcd's objects, in apply order: certificates (the Issuers and the CA before what they
/// sign), the Service, the StatefulSet, the DataStore.
pub fn objects(opts: &EtcdOptions) -> Vec<Value> {
    let mut out = certificates();
    out.push(service());
    out.push(statefulset(opts));
    out.push(datastore(opts));
    out
}

/// The Secrets `datastore` names (namespace, name) that a cert-manager Certificate among
/// `earlier` writes: Kamaji's DataStore webhook refuses a DataStore whose Secrets do not
/// exist (`validateContentReference`, `internal/webhook/handlers/ds_validate.go`, Kamaji
/// v1.0.0), so the DataStore waits for cert-manager to issue them.
pub fn awaited_secrets(datastore: &Value, earlier: &[Value]) -> Vec<(String, String)> {
    let spec = &datastore["spec"];
    let refs = [
        &spec["tlsConfig"]["certificateAuthority"]["certificate"],
        &spec["tlsConfig"]["certificateAuthority"]["privateKey"],
        &spec["tlsConfig"]["clientCertificate"]["certificate"],
        &spec["tlsConfig"]["clientCertificate"]["privateKey"],
        &spec["basicAuth"]["username"],
        &spec["basicAuth"]["password"],
    ];
    let issued = |ns: &str, name: &str| {
        earlier.iter().any(|o| {
            o["kind"] == "Certificate"
                && o["apiVersion"]
                    .as_str()
                    .is_some_and(|av| av.starts_with(&format!("{CERT_MANAGER_GROUP}/")))
                && str_at(o, &["metadata", "namespace"]) == Some(ns)
                && str_at(o, &["spec", "secretName"]) == Some(name)
        })
    };
    let mut out: Vec<(String, String)> = Vec::new();
    for r in refs {
        let (Some(ns), Some(name)) = (
            str_at(r, &["secretReference", "namespace"]),
            str_at(r, &["secretReference", "name"]),
        ) else {
            continue;
        };
        let pair = (ns.to_string(), name.to_string());
        if issued(ns, name) && !out.contains(&pair) {
            out.push(pair);
        }
    }
    out
}

/// What the etcd's StatefulSet (as the API server returns it) still waits for before every
/// member is ready: `None` when the controller has seen its spec and every member runs it,
/// ready.
pub fn members_waiting(sts: &Value) -> Option<String> {
    let generation = i64_at(sts, &["metadata", "generation"]).unwrap_or(0);
    let observed = i64_at(sts, &["status", "observedGeneration"]).unwrap_or(0);
    if observed < generation {
        return Some("the StatefulSet controller has not seen the new spec yet".into());
    }
    // A StatefulSet without spec.replicas runs the API server's default of 1.
    let wanted = i64_at(sts, &["spec", "replicas"]).unwrap_or(1);
    let status = |k: &str| i64_at(sts, &["status", k]).unwrap_or(0);
    let (ready, updated) = (status("readyReplicas"), status("updatedReplicas"));
    if updated < wanted {
        Some(format!(
            "{updated} of {wanted} members run the current spec"
        ))
    } else if ready < wanted {
        Some(format!("{ready} of {wanted} members ready"))
    } else {
        None
    }
}

/// Whether the StorageClass `sc` is the cluster's default: the annotation the
/// DefaultStorageClass admission plugin reads, or its beta form, which it still honours
/// (`IsDefaultAnnotation`, `pkg/volume/util/storageclass.go`, Kubernetes v1.36.3).
pub fn is_default_class(sc: &Value) -> bool {
    let annotations = &sc["metadata"]["annotations"];
    [
        "storageclass.kubernetes.io/is-default-class",
        "storageclass.beta.kubernetes.io/is-default-class",
    ]
    .iter()
    .any(|k| annotations[*k] == "true")
}

#[cfg(test)]
mod tests;
