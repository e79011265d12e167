//! Day-2 verbs end to end, against the real CAPI v1.14 core manager (MachineDeployments really
//! get MachineSets and Machines, deleting a Cluster really cascades) and the real BYOH v0.5.0
//! controller manager (it picks hosts by the ByoMachine's selector, attaches, sets the Node's
//! provider ID in the workload cluster, and marks hosts for cleanup), and the real BYOH v0.5.0
//! host agent on every host, onboarded with `kubectl capi hosts add` (`testbed::agent`).
//!
//! `kcp` runs seed 004's path on the real KubeadmControlPlane controller: control-plane hosts
//! that run real control planes, workers that really join them (init, scale to 3, a rolling
//! upgrade across two minors, a powered-off host remediated, delete), nothing played.
//!
//! In the other stories the workload cluster is the testbed itself, as in the sandbox: no
//! KubeadmControlPlane controller runs for their namespaces, so they play the
//! KubeadmControlPlane provider (it mirrors `spec` into `status`), and no kubelet runs, so
//! they play the hosts' kubelets too: a SIMULATED Node
//! named after each host its agent bootstrapped (`play_kubelets`), and the hosts' SIMULATED
//! `kubeadm join` succeeds without joining (`testbed::agent::Kubelet::Played`): the testbed's
//! own API server cannot take the real join of `testbed::agent::join` (no bootstrap-token
//! authentication for the workload cluster it plays).
//!
//! The tests of this file take turns: one cluster's machines at a time on a 2-core machine.

mod common;

mod delete;
mod hosts;
mod kcp;
mod pause;
mod scale;
mod upgrade;
