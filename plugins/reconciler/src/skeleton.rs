//! The skeleton every controller of the reconciler is built on (KamajiControlPlane,
//! ClusterUpgrade, FleetUpgrade): what each reconcile reaches besides its own state ([`Base`]),
//! the retry of failed reconciles ([`Retries`]), the CAPI contract the server serves
//! ([`discover_contract`]) and the run loop ([`drive`]).
//!
//! A controller is a `Ctx` holding a [`Base`] and a [`Retries`] of its kind, a `reconcile` that
//! calls [`Retries::succeeded`] when it ends well, an `error_policy` that returns
//! [`Retries::failed`], and a [`kube::runtime::Controller`] with its watches handed to [`drive`].
//! ARCHITECTURE.md's "add a controller" recipe walks through it.

use std::collections::HashMap;
use std::fmt::Debug;
use std::hash::Hash;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use kcore::groups::{CAPI_GROUP, CapiVersion};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::ObjectRef;
use kube::{Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;

use crate::Error;
use crate::metrics::Metrics;

/// Field manager of everything the reconciler writes, and the reporter of its Events.
pub const MANAGER: &str = kcore::labels::RECONCILER;

/// What every controller's reconcile reaches: the client, the process counters and the Event
/// recorder.
pub struct Base {
    pub client: Client,
    pub metrics: Arc<Metrics>,
    pub recorder: Recorder,
}

impl Base {
    pub fn new(client: Client, metrics: Arc<Metrics>) -> Base {
        Base {
            recorder: Recorder::new(client.clone(), Reporter::from(MANAGER)),
            client,
            metrics,
        }
    }
}

/// The CAPI contract the management cluster serves, as the `cluster.x-k8s.io` version to use:
/// v1beta2 when served, else v1beta1.
pub async fn discover_contract(client: &Client) -> Result<CapiVersion, Error> {
    let capi = kube::discovery::group(client, CAPI_GROUP)
        .await
        .map_err(|e| {
            Error::Other(format!(
                "Cluster API is not installed (API group {CAPI_GROUP} not served: {e}); install it with clusterctl init"
            ))
        })?;
    let versions: Vec<&str> = capi.versions().collect();
    CapiVersion::choose(versions.iter().copied()).ok_or_else(|| {
        Error::Other(format!(
            "{CAPI_GROUP} serves {versions:?}; this provider needs v1beta2 or v1beta1"
        ))
    })
}

/// Whether the server serves `kind` of `group` (a group may be served for another of its kinds:
/// an install from before a kind was added).
pub async fn served(client: &Client, group: &str, kind: &str) -> bool {
    kube::discovery::group(client, group)
        .await
        .is_ok_and(|g| g.recommended_kind(kind).is_some())
}

/// When a failed reconcile runs again.
#[derive(Clone, Copy, Debug)]
enum Policy {
    /// After 2, 4, 8 … 256 s: the delay doubles with each consecutive failure of the object and
    /// stays at 256 s from the eighth on; a success resets the count.
    Doubling,
    /// After the same delay each time.
    Every(Duration),
}

/// The retry of failed reconciles of one kind, counted per object.
pub struct Retries<K: Resource> {
    policy: Policy,
    failures: Mutex<HashMap<ObjectRef<K>, u32>>,
}

impl<K> Retries<K>
where
    K: Resource,
    K::DynamicType: Default + Eq + Hash + Clone,
{
    /// Doubling delays (see [`Policy::Doubling`]).
    pub fn doubling() -> Retries<K> {
        Retries {
            policy: Policy::Doubling,
            failures: Mutex::new(HashMap::new()),
        }
    }

    /// The same delay after every failure.
    pub fn every(delay: Duration) -> Retries<K> {
        Retries {
            policy: Policy::Every(delay),
            failures: Mutex::new(HashMap::new()),
        }
    }

    /// Counts a failure of `obj` (and in the process's error counter), logs it as `what`'s,
    /// and says when to run again.
    pub fn failed(&self, base: &Base, what: &str, obj: &K, err: &Error) -> Action {
        base.metrics
            .reconcile_errors
            .fetch_add(1, Ordering::Relaxed);
        let n = self
            .failures
            .lock()
            .map(|mut m| {
                let e = m.entry(ObjectRef::from(obj)).or_insert(0);
                *e = e.saturating_add(1);
                *e
            })
            .unwrap_or(1);
        let delay = match self.policy {
            Policy::Doubling => Duration::from_secs(1u64 << n.min(8)),
            Policy::Every(d) => d,
        };
        let secs = delay.as_secs();
        tracing::warn!(name = %obj.name_any(), ns = ?obj.namespace(), "{what} reconcile failed (retry in {secs}s): {err}");
        Action::requeue(delay)
    }

    /// `obj` reconciled well: its next failure starts the delays over.
    pub fn succeeded(&self, obj: &K) {
        if let Ok(mut m) = self.failures.lock() {
            m.remove(&ObjectRef::from(obj));
        }
    }
}

/// Runs `controller` until a shutdown signal, logging each outcome at debug level as `what`'s.
pub async fn drive<K, C, R, Fut, P>(
    controller: Controller<K>,
    reconcile: R,
    error_policy: P,
    ctx: Arc<C>,
    what: &'static str,
) where
    K: Clone + Resource + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Debug + Unpin + Eq + Hash + Clone + Send + Sync,
    C: Send + Sync + 'static,
    R: FnMut(Arc<K>, Arc<C>) -> Fut,
    Fut: Future<Output = Result<Action, Error>> + Send + 'static,
    P: Fn(Arc<K>, &Error, Arc<C>) -> Action,
{
    controller
        .shutdown_on_signal()
        .run(reconcile, error_policy, ctx)
        .for_each(|r| async move {
            match r {
                Ok((o, _)) => tracing::debug!(object = %o, "{what} reconciled"),
                Err(e) => tracing::debug!("{what} reconcile: {e}"),
            }
        })
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::api::ObjectMeta;
    use kube::runtime::controller::Action;

    fn cm(name: &str) -> k8s_openapi::api::core::v1::ConfigMap {
        k8s_openapi::api::core::v1::ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn base() -> Option<Base> {
        // A client needs a runtime and a config; any URL will do, nothing is sent.
        let config = kube::Config::new("http://127.0.0.1:1".parse().ok()?);
        let client = Client::try_from(config).ok()?;
        Some(Base::new(client, Arc::new(Metrics::default())))
    }

    #[tokio::test]
    async fn doubling_delays_are_per_object_capped_and_reset() {
        let base = base().unwrap();
        let r = Retries::doubling();
        let (a, b) = (cm("a"), cm("b"));
        let err = Error::Other("boom".into());
        let delays: Vec<Action> = (0..10).map(|_| r.failed(&base, "t", &a, &err)).collect();
        let want: Vec<Action> = [2, 4, 8, 16, 32, 64, 128, 256, 256, 256]
            .iter()
            .map(|s| Action::requeue(Duration::from_secs(*s)))
            .collect();
        assert_eq!(delays, want);
        assert_eq!(
            r.failed(&base, "t", &b, &err),
            Action::requeue(Duration::from_secs(2))
        );
        r.succeeded(&a);
        assert_eq!(
            r.failed(&base, "t", &a, &err),
            Action::requeue(Duration::from_secs(2))
        );
        assert_eq!(base.metrics.reconcile_errors.load(Ordering::Relaxed), 12);
    }

    #[tokio::test]
    async fn every_keeps_its_delay() {
        let base = base().unwrap();
        let r = Retries::every(Duration::from_secs(10));
        let err = Error::Other("boom".into());
        for _ in 0..3 {
            assert_eq!(
                r.failed(&base, "t", &cm("a"), &err),
                Action::requeue(Duration::from_secs(10))
            );
        }
    }
}
