//! SIMULATED parts, for the tests, the sandbox and the demo, of what cannot run here: the BYOH
//! host agents (they would run kubeadm on bare metal) and their kubelets. Kamaji and the BYOH
//! controller run for real (`testbed::shared_real()`, `capi-testbed up --real`).
//!
//! The agents write exactly what the upstream agent would write (status fields, conditions,
//! labels, annotations), as their own `byoh:host:<name>` users, and their kubelets join the live
//! tenant API servers, so the real controllers, our plugins and our reconciler see the same API
//! traffic as on a real management cluster. Every log line says `simulated`.
//!
//! They poll with one LIST per tick: simple and adequate for a sandbox of a few dozen objects.
//! (The product's reconciler is watch-driven; these are not the product.)

pub mod byoh;
pub mod join;

use std::time::Duration;

use kube::api::{ApiResource, DynamicObject};

/// Shared knobs.
#[derive(Clone, Debug)]
pub struct SimOptions {
    /// How long a simulated action (control plane start, host bootstrap, host cleanup) takes.
    pub delay: Duration,
    /// Probability (0.0 to 1.0) that a host bootstrap fails, as a bad install script would.
    pub failure_rate: f64,
    /// How often each simulator looks at the API.
    pub tick: Duration,
    /// Host agents act as their own `byoh:host:<name>` users (impersonated through this admin
    /// kubeconfig), as BYOH's ByoHost webhook requires. `None`: they use the client given.
    pub host_kubeconfig: Option<std::path::PathBuf>,
    /// Agents run the installer step (the real agent without `--skip-installation`): they wait
    /// for the installation secret the BYOH controller derives from the ByoMachine's
    /// `installerRef`. When false they behave as agents on hosts with Kubernetes pre-installed.
    pub install: bool,
    /// Agents join the workload cluster for real (TLS bootstrap, Node, heartbeats; see
    /// [`join`]). When false, no Node appears: whoever uses the agents plays the kubelet (a
    /// test whose workload cluster cannot take a real join), or the real BYOH controller never
    /// marks the machine ready.
    pub join: bool,
}

impl Default for SimOptions {
    fn default() -> Self {
        SimOptions {
            delay: Duration::from_secs(2),
            failure_rate: 0.0,
            tick: Duration::from_millis(500),
            host_kubeconfig: None,
            install: false,
            join: false,
        }
    }
}

/// An `ApiResource` from its parts (the core group is "").
pub fn ar(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: if group.is_empty() {
            version.into()
        } else {
            format!("{group}/{version}")
        },
        kind: kind.into(),
        plural: plural.into(),
    }
}

pub(crate) fn name(o: &DynamicObject) -> String {
    o.metadata.name.clone().unwrap_or_default()
}

pub(crate) fn label<'a>(o: &'a DynamicObject, key: &str) -> Option<&'a str> {
    entry(&o.metadata.labels, key)
}

pub(crate) fn annotation<'a>(o: &'a DynamicObject, key: &str) -> Option<&'a str> {
    entry(&o.metadata.annotations, key)
}

fn entry<'a>(
    map: &'a Option<std::collections::BTreeMap<String, String>>,
    key: &str,
) -> Option<&'a str> {
    map.as_ref().and_then(|m| m.get(key)).map(String::as_str)
}

pub(crate) fn now() -> String {
    // RFC 3339 without sub-second digits, as metav1.Time serialises.
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let t = k8s_openapi::jiff::Timestamp::from_second(secs as i64)
        .unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Now as a metav1.MicroTime (RFC 3339 with microseconds), as Lease renew times serialise.
pub(crate) fn now_micro() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%S%.6fZ")
        .to_string()
}

/// A cheap deterministic pseudo-random number in [0, 1) from a string (no rand dependency;
/// failures are reproducible per host and attempt).
pub(crate) fn unit_hash(s: &str) -> f64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in s.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    (h % 1_000_000) as f64 / 1_000_000.0
}
