//! Faults: the reconciler's watches recover from an API server restart without help.
//! This binary has a testbed of its own: restarting its API server disturbs everything on it.

mod common;

use common::*;
use serde_json::json;

const V: &str = "v1alpha2";

#[tokio::test(flavor = "multi_thread")]
async fn watches_recover_from_an_api_server_restart() {
    let tb = testbed::shared();
    let (c, ns) = namespace(tb, "kr-restart").await;
    let net = small_net();
    plain_cluster(&c, &ns, "rs", net, json!({"version": "1.33.0"})).await;
    let r = start_reconciler(&tb.kubeconfig, &ns, &[]);
    wait_tcp(&c, &ns, "rs-cp", &r).await;

    for round in 0..1 {
        tb.restart_process("kube-apiserver").await.unwrap();
        let c = tb.client().await;
        // A change after the restart reaches the reconciler through its re-established watch.
        let want = format!("v1.33.{}", round + 1);
        merge(
            &c,
            &ns,
            &kcp_ar(V),
            "rs-cp",
            json!({"spec": {"version": want}}),
        )
        .await;
        wait_for(
            90,
            "the TCP to follow the KCP after a restart",
            Some(&r),
            || async {
                let t = get_tcp(&c, &ns, "rs-cp").await?;
                (t["spec"]["kubernetes"]["version"] == want.as_str()).then_some(())
            },
        )
        .await;
    }
}
