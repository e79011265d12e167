//! Leader election on a `coordination.k8s.io/v1` Lease.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::Client;
use kube::api::{Api, PostParams};
use serde_json::json;

use kcore::labels::RECONCILER_LEASE;

use crate::Error;

/// The Lease name ([`RECONCILER_LEASE`]: `kubectl capi doctor` reads it too).
pub const LEASE_NAME: &str = RECONCILER_LEASE;
const LEASE_SECONDS: i32 = 15;

fn now() -> MicroTime {
    MicroTime(k8s_openapi::jiff::Timestamp::now())
}

/// Tries once to take or renew the lease. Returns whether `identity` holds it.
pub async fn try_acquire(api: &Api<Lease>, identity: &str) -> Result<bool, Error> {
    match api.get_opt(LEASE_NAME).await? {
        None => {
            let lease: Lease = serde_json::from_value(json!({
                "metadata": {"name": LEASE_NAME},
                "spec": {"holderIdentity": identity, "leaseDurationSeconds": LEASE_SECONDS, "leaseTransitions": 0}
            }))
            .map_err(|e| Error::Other(e.to_string()))?;
            let mut lease = lease;
            if let Some(s) = lease.spec.as_mut() {
                s.acquire_time = Some(now());
                s.renew_time = Some(now());
            }
            match api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(true),
                Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
                Err(e) => Err(e.into()),
            }
        }
        Some(mut lease) => {
            let spec = lease.spec.get_or_insert_with(Default::default);
            let holder = spec.holder_identity.clone().unwrap_or_default();
            let dur = i64::from(spec.lease_duration_seconds.unwrap_or(LEASE_SECONDS));
            let expired = spec.renew_time.as_ref().is_none_or(|t| {
                k8s_openapi::jiff::Timestamp::now().as_second() - t.0.as_second() > dur
            });
            if holder != identity && !holder.is_empty() && !expired {
                return Ok(false);
            }
            if holder != identity {
                spec.holder_identity = Some(identity.into());
                spec.acquire_time = Some(now());
                spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
            }
            spec.lease_duration_seconds = Some(LEASE_SECONDS);
            spec.renew_time = Some(now());
            match api
                .replace(LEASE_NAME, &PostParams::default(), &lease)
                .await
            {
                Ok(_) => Ok(true),
                Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
                Err(e) => Err(e.into()),
            }
        }
    }
}

/// Gives the Lease up (an empty holder), if `identity` still holds it, so that a standby
/// replica takes over at its next try instead of after the lease duration (controller-runtime's
/// `LeaderElectionReleaseOnCancel`). Called once the controllers have stopped.
pub async fn release(client: Client, namespace: &str, identity: &str) -> Result<(), Error> {
    let api: Api<Lease> = Api::namespaced(client, namespace);
    let Some(mut lease) = api.get_opt(LEASE_NAME).await? else {
        return Ok(());
    };
    let spec = lease.spec.get_or_insert_with(Default::default);
    if spec.holder_identity.as_deref() != Some(identity) {
        return Ok(());
    }
    spec.holder_identity = Some(String::new());
    match api
        .replace(LEASE_NAME, &PostParams::default(), &lease)
        .await
    {
        Ok(_) => Ok(()),
        // Renewed or taken meanwhile: nothing of ours to give up.
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Blocks until this process leads, then renews in the background; the returned future
/// completes when leadership is lost (the caller then exits, as controller-runtime does).
pub async fn acquire(
    client: Client,
    namespace: &str,
    identity: String,
) -> Result<tokio::task::JoinHandle<()>, Error> {
    let api: Api<Lease> = Api::namespaced(client, namespace);
    loop {
        match try_acquire(&api, &identity).await {
            Ok(true) => break,
            Ok(false) => {}
            Err(e) => tracing::warn!("leader election: {e}"),
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    tracing::info!("became leader ({identity}) on Lease {namespace}/{LEASE_NAME}");
    Ok(tokio::spawn(async move {
        let mut failures = 0;
        loop {
            tokio::time::sleep(Duration::from_secs((LEASE_SECONDS / 3) as u64)).await;
            match try_acquire(&api, &identity).await {
                Ok(true) => failures = 0,
                Ok(false) => {
                    tracing::error!("leadership lost");
                    return;
                }
                Err(e) => {
                    failures += 1;
                    tracing::warn!("renewing the lease: {e}");
                    if failures >= 2 {
                        tracing::error!("could not renew the lease; giving up leadership");
                        return;
                    }
                }
            }
        }
    }))
}
