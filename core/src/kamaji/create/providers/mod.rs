//! The infrastructure providers `kubectl kamaji create` and `generate clusterclass` build for,
//! one file each behind one trait ([`InfraProvider`]), and the one registry ([`all`]) that
//! `create`, `generate clusterclass`, the flag checks, the flags' help, the shell completion of
//! `--infrastructure` and the reconciler's infrastructure-cluster patch table
//! (`kcore::kamaji::infra`) read. Nothing outside a provider's file matches on the provider.
//!
//! To add a provider:
//! 1. Write `providers/<name>.rs`: a unit struct implementing [`InfraProvider`]: its
//!    [`Descriptor`] (its name, its kinds and default API version, the endpoint patch the
//!    reconciler applies to its infrastructure cluster, its flags and their help), the objects
//!    `create` builds ([`InfraObjects`], with the helpers of `kamaji::create::infra`), and, where
//!    it differs from the defaults, its flag checks and its ClusterClass parts.
//! 2. Add `mod <name>;` below and its unit struct to [`REGISTRY`], where it should be listed
//!    (the order of help texts, hints and completion).
//! 3. If it takes a flag no provider took before, add the field to `CreateSpec` and the flag to
//!    `CreateSpec::infrastructure_flags` (`spec.rs`) and to `SCOPED` (`validate.rs`), and the
//!    clap flag to `plugins/kamaji/src/common/spec_flags.rs` (its help comes from the provider's
//!    [`InfraProvider::flags`]).
//! 4. Run `cargo test -p capi-kamaji-core --lib providers`: the registry test checks that the new
//!    provider is complete (names, kinds, versions, endpoint patch, objects, ClusterClass parts,
//!    help).

mod aws;
mod byoh;
mod kubevirt;
mod metal3;
mod none;
mod openstack;

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Deref;

use serde_json::Value;

use super::infra::InfraObjects;
use super::{CreateSpec, Ctx};
use crate::Error;
use crate::error::usage;
use crate::kamaji::endpoint::Action;

pub use openstack::fill_openstack_endpoint;

/// Every provider, in the order help texts, hints and completion list them.
const REGISTRY: &[&dyn InfraProvider] = &[
    &byoh::Byoh,
    &openstack::OpenStack,
    &kubevirt::Kubevirt,
    &metal3::Metal3,
    &aws::Aws,
    &none::NoInfrastructure,
];

/// The registry: every infrastructure provider.
pub fn all() -> &'static [&'static dyn InfraProvider] {
    REGISTRY
}

/// A flag only some providers take, as one provider declares it.
#[derive(Clone, Copy, Debug)]
pub struct FlagHelp {
    /// The long flag, e.g. `--network`.
    pub flag: &'static str,
    /// Its help in `create`, after the provider's title (`OpenStack: ...`); `None` for a flag
    /// several providers share, whose help names them all (`spec_flags.rs`).
    pub help: Option<&'static str>,
    /// Its help in `generate clusterclass`, when it is worded otherwise there.
    pub class_help: Option<&'static str>,
}

impl FlagHelp {
    /// A flag this provider shares with others.
    pub(crate) const fn shared(flag: &'static str) -> FlagHelp {
        FlagHelp {
            flag,
            help: None,
            class_help: None,
        }
    }

    /// A flag only this provider takes.
    pub(crate) const fn own(flag: &'static str, help: &'static str) -> FlagHelp {
        FlagHelp {
            flag,
            help: Some(help),
            class_help: None,
        }
    }

    /// The same flag, worded otherwise in `generate clusterclass`.
    pub(crate) const fn in_class(self, class_help: &'static str) -> FlagHelp {
        FlagHelp {
            class_help: Some(class_help),
            ..self
        }
    }
}

/// What a provider is, as data: its names, its kinds and the endpoint patch of its
/// infrastructure cluster, its flags. Each provider states one `const` of it, from
/// [`Descriptor::new`] and what differs from the defaults.
#[derive(Clone, Copy, Debug)]
pub struct Descriptor {
    name: &'static str,
    title: &'static str,
    aliases: &'static [&'static str],
    help: Option<&'static str>,
    kinds: Option<Kinds>,
    clusterctl_name: Option<&'static str>,
    needs_address: bool,
    flags: &'static [FlagHelp],
}

/// A provider's kinds (group `infrastructure.cluster.x-k8s.io`), the API version written when the
/// server does not serve them, and what the reconciler does to its infrastructure cluster.
#[derive(Clone, Copy, Debug)]
struct Kinds {
    cluster: &'static str,
    template: &'static str,
    version: &'static str,
    endpoint_patch: Action,
}

impl Descriptor {
    /// A provider named `name` (the `--infrastructure` value), titled `title` in its flags' help
    /// (`OpenStack: network name of the workers`), with no kinds and no flags.
    pub(crate) const fn new(name: &'static str, title: &'static str) -> Descriptor {
        Descriptor {
            name,
            title,
            aliases: &[],
            help: None,
            kinds: None,
            clusterctl_name: None,
            needs_address: false,
            flags: &[],
        }
    }

    /// Its infrastructure cluster and machine template kinds, their default API version, and
    /// the reconciler's patch of the cluster's endpoint.
    pub(crate) const fn kinds(
        self,
        cluster: &'static str,
        template: &'static str,
        version: &'static str,
        endpoint_patch: Action,
    ) -> Descriptor {
        Descriptor {
            kinds: Some(Kinds {
                cluster,
                template,
                version,
                endpoint_patch,
            }),
            ..self
        }
    }

    /// The infrastructure flags it takes, with their help.
    pub(crate) const fn flags(self, flags: &'static [FlagHelp]) -> Descriptor {
        Descriptor { flags, ..self }
    }

    /// How `--infrastructure`'s help lists it, when not by its name.
    pub(crate) const fn help(self, help: &'static str) -> Descriptor {
        Descriptor {
            help: Some(help),
            ..self
        }
    }

    /// Its `clusterctl init --infrastructure` name, when not its name.
    pub(crate) const fn clusterctl_name(self, name: &'static str) -> Descriptor {
        Descriptor {
            clusterctl_name: Some(name),
            ..self
        }
    }

    /// `create` needs the API server address up front (`--service-address`).
    pub(crate) const fn needs_address(self) -> Descriptor {
        Descriptor {
            needs_address: true,
            ..self
        }
    }
}

/// Everything that varies per infrastructure provider: what it is ([`Descriptor`], read through
/// the getters), and what it checks and builds.
pub trait InfraProvider: Sync {
    /// What it is.
    fn descriptor(&self) -> &'static Descriptor;
    /// The `--infrastructure` value.
    fn name(&self) -> &'static str {
        self.descriptor().name
    }
    /// Other `--infrastructure` values accepted for it.
    fn aliases(&self) -> &'static [&'static str] {
        self.descriptor().aliases
    }
    /// How the help of its flags names it (`OpenStack: network name of the workers`).
    fn title(&self) -> &'static str {
        self.descriptor().title
    }
    /// How `--infrastructure`'s help lists it.
    fn help(&self) -> &'static str {
        self.descriptor().help.unwrap_or(self.name())
    }
    /// The infrastructure cluster kind (group `infrastructure.cluster.x-k8s.io`); `None`:
    /// no infrastructure cluster.
    fn cluster_kind(&self) -> Option<&'static str> {
        self.descriptor().kinds.map(|k| k.cluster)
    }
    /// The workers' machine template kind; `None`: no workers.
    fn template_kind(&self) -> Option<&'static str> {
        self.descriptor().kinds.map(|k| k.template)
    }
    /// The provider's current API version of its kinds, written when the server does not serve
    /// them (a client dry run against a cluster without the provider).
    fn default_version(&self) -> &'static str {
        self.descriptor().kinds.map_or("", |k| k.version)
    }
    /// The `clusterctl init --infrastructure` name, for hints.
    fn clusterctl_name(&self) -> &'static str {
        self.descriptor().clusterctl_name.unwrap_or(self.name())
    }
    /// What the reconciler does to its infrastructure cluster's endpoint; `None` only without
    /// an infrastructure cluster.
    fn endpoint_patch(&self) -> Option<Action> {
        self.descriptor().kinds.map(|k| k.endpoint_patch)
    }
    /// Whether `create` needs the API server address up front (`--service-address`).
    fn needs_address(&self) -> bool {
        self.descriptor().needs_address
    }
    /// The infrastructure flags it takes, with their help.
    fn flags(&self) -> &'static [FlagHelp] {
        self.descriptor().flags
    }
    /// Its own checks of its flags, after the flags it does not take were refused.
    fn check(&self, _spec: &CreateSpec) -> Result<(), Error> {
        Ok(())
    }
    /// When its workers take hosts from a pool (BYOH's ByoHosts, from every namespace): the
    /// labels a host needs for `spec`, which `create` checks enough free hosts carry. `None`:
    /// its machines are not picked from a pool.
    fn host_pool<'a>(&self, _spec: &'a CreateSpec) -> Option<&'a BTreeMap<String, String>> {
        None
    }
    /// Whether `create` writes BYOH's K8sInstallerConfigTemplate for `spec`.
    fn installer_template(&self, _spec: &CreateSpec) -> bool {
        false
    }
    /// The objects `create` builds; notes for the preview go to `notes`.
    fn objects(&self, ctx: &Ctx<'_>, notes: &mut Vec<String>) -> Result<InfraObjects, Error>;
    /// Whether a ClusterClass can be generated for it: the refusal otherwise.
    fn class_support(&self) -> Result<(), Error> {
        Ok(())
    }
    /// More definitions of the ClusterClass's address patch, on its cluster template
    /// `infra_template` (OpenStack's `apiServerFixedIP`).
    fn class_patches(&self, _infra_template: &Value) -> Vec<Value> {
        Vec::new()
    }
    /// Notes for `generate clusterclass`'s preview.
    fn class_notes(&self, _spec: &CreateSpec) -> Vec<String> {
        Vec::new()
    }
}

/// A provider of the registry: what `CreateSpec` holds and `--infrastructure` parses to.
#[derive(Clone, Copy)]
pub struct Infrastructure(&'static dyn InfraProvider);

impl Infrastructure {
    /// Parses a `--infrastructure` value (a name or an alias, any case); the error names the
    /// accepted ones.
    pub fn parse(s: &str) -> Result<Infrastructure, Error> {
        let lower = s.to_ascii_lowercase();
        REGISTRY
            .iter()
            .find(|p| p.name() == lower || p.aliases().contains(&lower.as_str()))
            .map(|p| Infrastructure(*p))
            .ok_or_else(|| usage(format!("unknown infrastructure {s:?}"), one_of()))
    }

    /// The provider of `name`, in tests.
    #[cfg(test)]
    pub(crate) fn named(name: &str) -> Infrastructure {
        Infrastructure::parse(name).expect("a registered provider")
    }
}

/// `use one of: byoh, openstack, ...`.
pub(super) fn one_of() -> String {
    let names: Vec<&str> = REGISTRY.iter().map(|p| p.name()).collect();
    format!("use one of: {}", names.join(", "))
}

impl Deref for Infrastructure {
    type Target = dyn InfraProvider;
    fn deref(&self) -> &Self::Target {
        self.0
    }
}

/// No infrastructure: a control plane only.
impl Default for Infrastructure {
    fn default() -> Self {
        Infrastructure(&none::NoInfrastructure)
    }
}

impl PartialEq for Infrastructure {
    fn eq(&self, other: &Self) -> bool {
        self.name() == other.name()
    }
}

impl Eq for Infrastructure {}

impl fmt::Debug for Infrastructure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests;
