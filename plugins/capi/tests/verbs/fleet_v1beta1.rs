//! Issue 4 acceptance on a v1beta1-only (CAPI 1.10-shaped) management cluster: the same checks
//! as `fleet.rs`, with every object written at v1beta1 (old conditions with severity, the
//! `status.v1beta2` blocks, versioned references).

use crate::fleet_common::*;

fn tb() -> &'static testbed::Testbed {
    testbed::shared_v1beta1()
}

#[tokio::test]
async fn v1beta1_hosts_every_format_filters_and_describe() {
    let fleet = seed(tb(), "v1b1-hosts").await;
    assert_eq!(fleet.capi_version, "v1beta1");
    hosts_in_every_format(tb(), &fleet).await;
    hosts_filters(tb(), &fleet).await;
    hosts_describe(tb(), &fleet).await;
}

#[tokio::test]
async fn v1beta1_machines_every_format() {
    let fleet = seed(tb(), "v1b1-machines").await;
    machines_in_every_format(tb(), &fleet).await;
}

#[tokio::test]
async fn v1beta1_list_every_format() {
    let fleet = seed(tb(), "v1b1-list").await;
    list_in_every_format(tb(), &fleet).await;
}

#[tokio::test]
async fn v1beta1_kubeconfig() {
    let fleet = seed(tb(), "v1b1-kubeconfig").await;
    kubeconfig_print_and_output(tb(), &fleet).await;
}

#[tokio::test]
async fn v1beta1_describe_every_format() {
    let fleet = seed(tb(), "v1b1-describe").await;
    describe_in_every_format(tb(), &fleet).await;
}
