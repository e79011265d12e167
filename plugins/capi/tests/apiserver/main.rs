//! kubectl-capi's tests on the plain testbeds (a real API server, etcd and controller manager
//! with the upstream CRDs; the tests write what CAPI's and BYOH's controllers would), in one test
//! binary so that they share those testbeds (`testbed::shared`, `shared_v1beta1`, `shared_bare`)
//! instead of starting them once per file. Each test works in a namespace of its own.

mod fleet_common;

mod bad_input;
mod compat;
mod contracts;
mod doctor;
mod fleet;
mod fleet_v1beta1;
mod foundation;
mod generate;
mod krew;
mod kubeconfig_flags;
mod objects;
