//! The kubectl-kamaji tests on the real controllers (the CAPI v1.14 managers, the Kamaji v1.0.0
//! operator with live tenant control planes, the BYOH v0.5.0 controller manager), in one test
//! binary so that they share one such testbed (`common::testbed_real`): starting one costs about
//! 20 CPU-seconds and, idle, it keeps a 2-core machine 5% busy for as long as its binary runs.
//! Each test works in a namespace of its own, with host selectors of its own. One test,
//! `v1beta1_real`, runs on a testbed of its own: a CAPI 1.10 management cluster with CAPI v1.10's
//! core manager and the real Kamaji (`common::testbed_v1beta1_real`).

#[path = "../common/mod.rs"]
mod common;

mod backup;
mod cert_paths;
mod clastix_compat;
mod clusterclass;
mod kamaji_range;
mod kube_proxy;
mod lifecycle;
mod migrate;
mod real;
mod scheduled_backup;
mod v1beta1_real;
