//! kamaji-reconciler's tests on the plain testbeds (a real API server, etcd and controller
//! manager with the upstream CRDs; the tests write what CAPI and Kamaji would), in one test binary
//! so that they share those testbeds instead of starting them once per file. Each test runs its
//! own reconciler, watching a namespace of its own. The tests that stop the API server, kill
//! reconcilers at random, elect leaders or start from a bare testbed keep binaries of their own.

#[path = "../common/mod.rs"]
mod common;

mod bounds;
mod certificates;
mod e2e;
mod findings;
mod image;
mod infra;
mod install;
mod rbac;
mod schema;
mod v1beta1;
