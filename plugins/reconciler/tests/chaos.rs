//! Chaos: the reconciler is killed (SIGKILL) at a random moment of each phase of
//! create → ready → upgrade (two minors) → delete, over `CHAOS_CYCLES` cycles (100 by default,
//! [`BATCH`] at a time), and restarted; every cycle converges and leaves no orphan
//! (TenantControlPlane or Secret of a deleted KamajiControlPlane). The seed is printed, and
//! `CHAOS_SEED` replays one.

mod common;

use std::time::Duration;

use common::*;
use serde_json::json;

const V: &str = "v1alpha2";

/// Cycles that run side by side: each kill lands in the same phase of all of them, so every
/// cycle is still killed once in each of its four phases, in a quarter of the time (100 cycles
/// one by one took 555 s of `make test`). Several control planes in flight at a kill is also
/// the reconciler's real load.
const BATCH: usize = 4;

/// A small deterministic generator (xorshift64*): the schedule of kills, replayable by seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Milliseconds in `0..max`.
    fn ms(&mut self, max: u64) -> Duration {
        Duration::from_millis(self.next() % max)
    }
}

/// Kills the running reconciler after a random delay and starts a fresh one.
async fn kill_at_random(r: &mut Reconciler, rng: &mut Rng, tb: &testbed::Testbed, ns: &str) {
    tokio::time::sleep(rng.ms(1500)).await;
    r.kill();
    *r = start_reconciler(&tb.kubeconfig, ns, &[]);
}

#[tokio::test(flavor = "multi_thread")]
async fn killed_at_random_every_cycle_converges_without_orphans() {
    let cycles: usize = std::env::var("CHAOS_CYCLES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100);
    let seed: u64 = std::env::var("CHAOS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
                | 1
        });
    eprintln!("chaos: {cycles} cycles, CHAOS_SEED={seed}");
    let mut rng = Rng(seed);
    let tb = testbed::shared();
    let (c, ns) = namespace(tb, "kr-chaos").await;
    let net = small_net();
    let mut r = start_reconciler(&tb.kubeconfig, &ns, &[]);
    let mut kills = 0;
    let mut first = 0;
    while first < cycles {
        let batch: Vec<(String, String)> = (first..cycles.min(first + BATCH))
            .map(|i| (format!("c{i}"), format!("c{i}-cp")))
            .collect();
        first += batch.len();
        // Create, killed somewhere along the way.
        for (cl, kcp) in &batch {
            cluster_with_kcp(
                &c,
                &ns,
                "v1beta2",
                cl,
                kcp,
                None,
                net.clone(),
                json!({"version": "v1.33.0"}),
            )
            .await;
        }
        kill_at_random(&mut r, &mut rng, tb, &ns).await;
        kills += 1;
        for (_, kcp) in &batch {
            wait_tcp(&c, &ns, kcp, &r).await;
            kamaji_publish(&c, &ns, kcp, "10.0.0.5:6443", "v1.33.0", "Ready", 1).await;
        }
        kill_at_random(&mut r, &mut rng, tb, &ns).await;
        kills += 1;
        for (cl, kcp) in &batch {
            wait_for(60, "ready", Some(&r), || async {
                secret(&c, &ns, &format!("{cl}-kubeconfig")).await?;
                let k = get(&c, &ns, &kcp_ar(V), kcp).await?;
                (k["status"]["ready"] == json!(true)).then_some(())
            })
            .await;
        }
        // Upgrade two minors: the reconciler steps through v1.34.0 (the patch releases recorded
        // as `kubectl kamaji upgrade` records them), killed in between.
        for (_, kcp) in &batch {
            let to = json!({"metadata": {"annotations": {"capi-kamaji.io/patch-releases": "v1.33.0,v1.34.0"}},
                "spec": {"version": "v1.35.0"}});
            merge(&c, &ns, &kcp_ar(V), kcp, to).await;
        }
        kill_at_random(&mut r, &mut rng, tb, &ns).await;
        kills += 1;
        for step in ["v1.34.0", "v1.35.0"] {
            for (_, kcp) in &batch {
                wait_for(60, "the next step written", Some(&r), || async {
                    let t = get_tcp(&c, &ns, kcp).await?;
                    (t["spec"]["kubernetes"]["version"] == step).then_some(())
                })
                .await;
                kamaji_version(&c, &ns, kcp, step, "Ready").await;
            }
        }
        // Delete, killed somewhere along the way.
        for (_, kcp) in &batch {
            delete(&c, &ns, &kcp_ar(V), kcp).await;
        }
        kill_at_random(&mut r, &mut rng, tb, &ns).await;
        kills += 1;
        for (cl, kcp) in &batch {
            wait_for(90, "deleted and collected", Some(&r), || async {
                let gone = get(&c, &ns, &kcp_ar(V), kcp).await.is_none()
                    && get_tcp(&c, &ns, kcp).await.is_none()
                    && secret(&c, &ns, &format!("{cl}-kubeconfig")).await.is_none()
                    && secret(&c, &ns, &format!("{cl}-ca")).await.is_none();
                gone.then_some(())
            })
            .await;
        }
    }
    // No orphan at all: no TenantControlPlane is left in the namespace.
    let left = dyn_api(&c, &ns, &tcp_ar())
        .list(&Default::default())
        .await
        .unwrap();
    assert!(
        left.items.is_empty(),
        "orphaned TenantControlPlanes: {:?}",
        left.items
            .iter()
            .map(|t| t.metadata.name.clone())
            .collect::<Vec<_>>()
    );
    eprintln!("chaos: {cycles} cycles, {kills} kills, 0 orphans");
}
