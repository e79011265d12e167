//! Watches of TenantControlPlanes that live in another cluster (`externalClusterReference`):
//! ownerReferences do not cross clusters, so the controller's own TenantControlPlane watch never
//! sees them. Each KamajiControlPlane whose TenantControlPlane is remote gets one watch of that
//! one object (a field selector on its name), through the client its kubeconfig Secret gives;
//! every event it brings is a reconcile of that KamajiControlPlane. kube's watcher re-lists and
//! re-watches with back-off when the remote API server goes away, so a restart there costs a
//! few seconds, not a resync period; and after each re-list the KamajiControlPlane is reconciled
//! once, for what the watch may have missed meanwhile.
//!
//! A watch is keyed by what it watches (the kubeconfig's text, the TenantControlPlane's namespace
//! and name): a changed Secret or reference replaces it; a KamajiControlPlane that no longer
//! needs one (its TenantControlPlane local again, or its finalizer released) drops it.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Mutex;

use futures::StreamExt;
use futures::channel::mpsc::UnboundedSender;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::{WatchStreamExt, watcher};

/// (namespace, name) of a KamajiControlPlane.
pub(super) type KcpKey = (String, String);

/// The remote watches of one controller.
pub(super) struct RemoteWatches {
    /// The controller's trigger stream (the certificate scan uses it too).
    trigger: UnboundedSender<KcpKey>,
    watches: Mutex<HashMap<KcpKey, (u64, tokio::task::AbortHandle)>>,
}

/// What one watch watches.
pub(super) struct Target<'a> {
    /// The kubeconfig Secret's text, as the client was made from it.
    pub kubeconfig: &'a str,
    pub client: Client,
    pub tcp: &'a ApiResource,
    pub namespace: &'a str,
    pub name: &'a str,
}

impl RemoteWatches {
    pub(super) fn new(trigger: UnboundedSender<KcpKey>) -> RemoteWatches {
        RemoteWatches {
            trigger,
            watches: Mutex::new(HashMap::new()),
        }
    }

    /// Makes sure `kcp` has a watch on `target` (idempotent; replaces a watch of anything else).
    pub(super) fn ensure(&self, kcp: &KcpKey, target: Target<'_>) {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (target.kubeconfig, target.namespace, target.name).hash(&mut h);
        let key = h.finish();
        let Ok(mut watches) = self.watches.lock() else {
            return;
        };
        if watches.get(kcp).is_some_and(|(k, _)| *k == key) {
            return;
        }
        let api: Api<DynamicObject> =
            Api::namespaced_with(target.client, target.namespace, target.tcp);
        let cfg = watcher::Config::default().fields(&format!("metadata.name={}", target.name));
        let trigger = self.trigger.clone();
        let who = kcp.clone();
        let task = tokio::spawn(async move {
            let mut events = std::pin::pin!(watcher::watcher(api, cfg).default_backoff());
            while let Some(ev) = events.next().await {
                match ev {
                    // A change, a deletion, or a (re-)list finished: look again.
                    Ok(
                        watcher::Event::Apply(_)
                        | watcher::Event::Delete(_)
                        | watcher::Event::InitDone,
                    ) => {
                        if trigger.unbounded_send(who.clone()).is_err() {
                            return;
                        }
                    }
                    Ok(watcher::Event::Init | watcher::Event::InitApply(_)) => {}
                    // The back-off retries; the reconcile says why the cluster is unreachable.
                    Err(e) => tracing::debug!(
                        kcp = %format!("{}/{}", who.0, who.1),
                        error = %e,
                        "remote TenantControlPlane watch"
                    ),
                }
            }
        });
        if let Some((_, old)) = watches.insert(kcp.clone(), (key, task.abort_handle())) {
            old.abort();
        }
    }

    /// Drops `kcp`'s watch, if any.
    pub(super) fn stop(&self, kcp: &KcpKey) {
        if let Ok(mut watches) = self.watches.lock()
            && let Some((_, task)) = watches.remove(kcp)
        {
            task.abort();
        }
    }
}

impl Drop for RemoteWatches {
    fn drop(&mut self) {
        if let Ok(mut watches) = self.watches.lock() {
            for (_, (_, task)) in watches.drain() {
                task.abort();
            }
        }
    }
}
