//! kubectl-kamaji's tests on the plain testbeds (a real API server, etcd and controller manager
//! with the upstream CRDs; the tests write what CAPI and Kamaji would), in one test binary so that
//! they share those testbeds instead of starting them once per file. Each test works in a
//! namespace of its own. The tests that install or remove our CRDs and RBAC, or stop the API
//! server, keep binaries (and testbeds) of their own; those on the real controllers are in `controllers`.

#[path = "../common/mod.rs"]
mod common;

mod bad_input;
mod create;
mod foundation;
mod v1beta1;
