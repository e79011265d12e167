//! The infrastructure providers `kubectl kamaji create` and `generate clusterclass` build for,
//! one file each behind one trait ([`InfraProvider`], with the rest of the interface in
//! `kamaji::create`), and the one registry ([`all`]) that `create`, `generate clusterclass`,
//! their flags (declared by the providers: [`ProviderFlag`], read into
//! [`ProviderFlags`](super::ProviderFlags)), the flag checks, the shell completion of `--infrastructure`
//! and the reconciler's infrastructure-cluster patch table (`kcore::kamaji::infra`) read.
//! Nothing outside a provider's file matches on the provider.
//!
//! To add a provider: ARCHITECTURE.md's recipe "Add an infrastructure provider".

mod aws;
mod byoh;
mod kubevirt;
mod metal3;
mod none;
mod openstack;

// The interface the providers implement is their parent's (`kamaji::create`), which the modules
// beside this one name; here it is in scope for each provider's file.
use super::{Descriptor, InfraProvider, Infrastructure, ProviderFlag, all};

pub use openstack::fill_openstack_endpoint;

/// Every provider, in the order help texts, hints and completion list them.
pub(super) const REGISTRY: &[&dyn InfraProvider] = &[
    &byoh::Byoh,
    &openstack::OpenStack,
    &kubevirt::Kubevirt,
    &metal3::Metal3,
    &aws::Aws,
    &none::NoInfrastructure,
];

/// The flags several providers take, declared once here (their help names the providers); a
/// provider lists those it takes among its flags.
pub(crate) const FLAVOR: ProviderFlag = ProviderFlag::shared(
    "--flavor",
    "FLAVOR",
    "Workers: OpenStack flavor, AWS instance type, KubeVirt CORESxMEMORY (e.g. 2x4Gi)",
)
.in_class("Workers: OpenStack flavor, AWS instance type, KubeVirt CORESxMEMORY")
.place(10)
.example("2x4Gi");
pub(crate) const IMAGE: ProviderFlag = ProviderFlag::shared(
    "--image",
    "IMAGE",
    "Workers: OpenStack image name, AWS AMI id, KubeVirt container disk, Metal3 image URL",
)
.in_class("Workers: OpenStack image name, AWS AMI id, KubeVirt container disk")
.place(20)
.example("img");
pub(crate) const SSH_KEY: ProviderFlag = ProviderFlag::shared(
    "--ssh-key",
    "KEY",
    "OpenStack, AWS: SSH key name for the workers",
)
.place(50)
.example("ops");

/// No infrastructure: a control plane only.
impl Default for Infrastructure {
    fn default() -> Self {
        Infrastructure(&none::NoInfrastructure)
    }
}

#[cfg(test)]
mod tests;
