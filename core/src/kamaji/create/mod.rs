//! `kubectl kamaji create` and `generate clusterclass`: the consistent object set of a Kamaji-hosted cluster, from flags.
//!
//! [`build`] turns a [`CreateSpec`] (flags plus an optional values file) into the objects to
//! server-side apply, in apply order: the KamajiControlPlane, the infrastructure cluster, the
//! Cluster, and for workers a KubeadmConfigTemplate, a machine template and a
//! MachineDeployment. Shapes follow the served versions ([`Versions`]): CAPI v1beta2 or v1beta1
//! references, KamajiControlPlane v1alpha2 or v1alpha1.
//!
//! On OpenStack without `--service-address`, the OpenStackCluster is returned apart
//! ([`Built::deferred`]): older CAPO rejects a later change of `apiServerFixedIP`, so the verb
//! waits for Kamaji's endpoint and creates it pre-filled ([`fill_openstack_endpoint`]).
//!
//! One submodule per concept, each public item re-exported here:
//! - `spec`: what `create` takes ([`CreateSpec`], [`Addon`]);
//! - `providers`: the infrastructure providers, one file each, and their registry; the interface
//!   they implement, which the modules beside them name, is written here ([`InfraProvider`],
//!   [`Descriptor`], [`ProviderFlag`], [`ProviderFlags`], [`all`]; [`Infrastructure`] names one
//!   of them), so that imports go one way: `providers` uses its siblings, none uses `providers`;
//! - `versions`: the served API versions ([`Versions`]), Kubernetes releases, references;
//! - `validate`: the flag checks, one usage error each, run before anything is built;
//! - `endpoints`: the API server address, certificate SANs, pod and service CIDRs;
//! - `control_plane`: the KamajiControlPlane, from defaults, the values file and flags;
//! - `infra`: what a provider contributes (`InfraObjects`) and the helpers it builds it with;
//! - `cluster`: the Cluster, its network plugin, and what it owns;
//! - `workers`: the KubeadmConfigTemplate and the MachineDeployment;
//! - `clusterclass`: the ClusterClass of `generate clusterclass` and the topology Cluster of
//!   `create --class`.

mod cluster;
mod clusterclass;
mod control_plane;
mod endpoints;
mod infra;
mod providers;
mod spec;
mod validate;
mod values;
mod versions;
mod workers;

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Deref;

use serde_json::{Map, Value, json};

use crate::Error;
use crate::error::usage;
use crate::kamaji::endpoint::EndpointPatch;
use infra::InfraObjects;

pub use cluster::{OWNED_BY_CLUSTER, disowned_by_cluster, own_by_cluster};
pub use clusterclass::{ClassInfo, build_class, build_topology, check_topology};
pub use providers::fill_openstack_endpoint;
pub use spec::{Addon, CreateSpec};
pub use versions::Versions;

/// Field manager of everything `kubectl kamaji` applies.
pub const FIELD_MANAGER: &str = "kubectl-kamaji";
/// Label on every object `create` writes.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", FIELD_MANAGER);
use crate::groups::{BOOTSTRAP_GROUP, CONTROLPLANE_GROUP, INFRASTRUCTURE_GROUP as INFRA_GROUP};
use crate::kamaji::api::ADMISSION_CONTROLLERS;
use crate::kamaji::endpoint::DEFAULT_PORT;
use crate::labels::{CLUSTER_NAME_LABEL, DEPLOYMENT_NAME_LABEL};
/// BYOH's installer template kind: the BYOH controller makes one K8sInstallerConfig per
/// ByoMachine from it, whose installation secret the host agent runs to install Kubernetes.
pub const INSTALLER_TEMPLATE_KIND: &str = "K8sInstallerConfigTemplate";
/// Kamaji's TenantControlPlane defaults, written on the Cluster so they are visible.
pub(crate) const DEFAULT_POD_CIDR: &str = "10.244.0.0/16";
pub(crate) const DEFAULT_SERVICE_CIDR: &str = "10.96.0.0/16";

/// The objects to apply.
#[derive(Clone, Debug, PartialEq)]
pub struct Built {
    /// In apply order.
    pub objects: Vec<Value>,
    /// The OpenStackCluster, to create once Kamaji announces the endpoint (its
    /// `apiServerFixedIP` is empty until then).
    pub deferred: Option<Value>,
    /// The normalised Kubernetes version.
    pub version: String,
    /// What the objects imply that the YAML does not say, one line each, for the preview.
    pub notes: Vec<String>,
}

impl Built {
    /// Every object, the deferred one last.
    pub fn all(&self) -> Vec<Value> {
        let mut v = self.objects.clone();
        v.extend(self.deferred.clone());
        v
    }
}

/// Checks the flags, then builds the object set.
pub fn build(spec: &CreateSpec, versions: &Versions) -> Result<Built, Error> {
    let ctx = Ctx::new(spec, versions, validate::check(spec)?);
    let kcp = control_plane::kamaji_control_plane(&ctx)?;
    let mut notes = Vec::new();
    let infra = ctx.infra.objects(&ctx, &mut notes)?;
    let (cluster, network_plugin) = cluster::cluster(&ctx, &mut notes)?;

    let mut objects = vec![kcp];
    objects.extend(infra.cluster);
    objects.push(cluster);
    objects.extend(network_plugin);
    objects.extend(workers::objects(&ctx, infra.workers));
    Ok(Built {
        objects,
        deferred: infra.deferred,
        version: ctx.version,
        notes,
    })
}

/// What every builder shares: the checked flags, the served versions, names and labels (what an
/// [`InfraProvider`] builds from; opaque outside this module).
pub struct Ctx<'a> {
    spec: &'a CreateSpec,
    versions: &'a Versions,
    infra: Infrastructure,
    /// The values file's KamajiControlPlane spec fields (empty without `--from-file`).
    file: Map<String, Value>,
    /// The normalised Kubernetes version.
    version: String,
    /// The API server address, from `--service-address` or the values file.
    address: Option<String>,
    /// MachineDeployment replicas (0 without infrastructure).
    workers: i64,
    port: u16,
    /// The name of the worker objects: `<name>-md-0`.
    md_name: String,
    /// The labels of every object.
    labels: Value,
}

impl<'a> Ctx<'a> {
    fn new(spec: &'a CreateSpec, versions: &'a Versions, checked: validate::Checked) -> Self {
        let name = spec.name.as_str();
        Ctx {
            spec,
            versions,
            infra: checked.infra,
            file: checked.file,
            version: checked.version,
            address: checked.address,
            workers: checked.workers,
            port: spec.port.unwrap_or(DEFAULT_PORT),
            md_name: format!("{name}-md-0"),
            labels: json!({CLUSTER_NAME_LABEL: name, MANAGED_BY.0: MANAGED_BY.1}),
        }
    }

    fn name(&self) -> &'a str {
        &self.spec.name
    }

    fn ns(&self) -> &'a str {
        &self.spec.namespace
    }

    /// The metadata of an object named `n`.
    fn meta(&self, n: &str) -> Value {
        json!({"name": n, "namespace": self.ns(), "labels": self.labels.clone()})
    }

    /// The version of the infrastructure cluster kind: served, else the provider's default.
    fn infra_cluster_version(&self) -> String {
        self.infra_version(&self.versions.infra_cluster)
    }

    /// The version of the machine template kind: served, else the provider's default.
    fn infra_template_version(&self) -> String {
        self.infra_version(&self.versions.infra_template)
    }

    fn infra_version(&self, v: &str) -> String {
        if v.is_empty() {
            self.infra.default_version().to_string()
        } else {
            v.to_string()
        }
    }
}

// The infrastructure providers' interface: what `providers/` implements, one file each, and what
// the modules beside it name. It sits here, above them all, so that `providers`, which builds
// with `spec`, `infra`, `versions`, `validate` and `clusterclass`, imports them one way.

/// The registry: every infrastructure provider.
pub fn all() -> &'static [&'static dyn InfraProvider] {
    providers::REGISTRY
}

/// How a provider's flag takes its value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlagValue {
    /// `--flag VALUE`, once; the value name (`NETWORK`).
    One(&'static str),
    /// `--flag A,B`, repeatable: every value; the value name (`KEY=VALUE`).
    List(&'static str),
    /// `--flag`, without a value.
    Switch,
}

/// A flag only some providers take, as a provider declares it: what `create` and `generate
/// clusterclass` show (built from the registry, [`all_flags`]), and how its values are read
/// into [`ProviderFlags`].
#[derive(Clone, Copy, Debug)]
pub struct ProviderFlag {
    flag: &'static str,
    value: FlagValue,
    help: &'static str,
    class_help: Option<&'static str>,
    /// Several providers take it: its help names them, instead of the provider's title.
    shared: bool,
    place: u16,
    refused_with: Option<&'static str>,
    // A value the registry's test builds with: read there only.
    #[cfg_attr(not(test), expect(dead_code))]
    example: Option<&'static str>,
    check: Option<ValueCheck>,
}

/// A check of one value of a provider's flag ([`ProviderFlag::check_each`]).
pub(crate) type ValueCheck = fn(&str) -> Result<(), Error>;

impl ProviderFlag {
    /// A flag only this provider takes, with a value named `value_name`; its help is shown after
    /// the provider's title (`OpenStack: network name of the workers`).
    pub(crate) const fn own(
        flag: &'static str,
        value_name: &'static str,
        help: &'static str,
    ) -> ProviderFlag {
        ProviderFlag {
            flag,
            value: FlagValue::One(value_name),
            help,
            class_help: None,
            shared: false,
            place: u16::MAX,
            refused_with: None,
            example: None,
            check: None,
        }
    }

    /// A flag only this provider takes, without a value.
    pub(crate) const fn switch(flag: &'static str, help: &'static str) -> ProviderFlag {
        ProviderFlag {
            value: FlagValue::Switch,
            ..ProviderFlag::own(flag, "", help)
        }
    }

    /// A flag several providers take, whose help (shown as it is) names them.
    const fn shared(
        flag: &'static str,
        value_name: &'static str,
        help: &'static str,
    ) -> ProviderFlag {
        ProviderFlag {
            shared: true,
            ..ProviderFlag::own(flag, value_name, help)
        }
    }

    /// It takes a comma-separated list of values, and may be repeated.
    pub(crate) const fn list(self) -> ProviderFlag {
        let value = match self.value {
            FlagValue::One(name) | FlagValue::List(name) => FlagValue::List(name),
            FlagValue::Switch => FlagValue::Switch,
        };
        ProviderFlag { value, ..self }
    }

    /// Its help in `generate clusterclass`, when it is worded otherwise there.
    pub(crate) const fn in_class(self, class_help: &'static str) -> ProviderFlag {
        ProviderFlag {
            class_help: Some(class_help),
            ..self
        }
    }

    /// Its place among the providers' flags: the order of their help and completion, and the
    /// order `create` checks them in (lower first). Flags without one follow the others, in the
    /// order of the registry.
    pub(crate) const fn place(self, place: u16) -> ProviderFlag {
        ProviderFlag { place, ..self }
    }

    /// It is refused together with `other` (a flag placed before it), in one refusal naming
    /// both (`--cloud-name/--identity-secret does not apply to ...`).
    pub(crate) const fn refused_with(self, other: &'static str) -> ProviderFlag {
        ProviderFlag {
            refused_with: Some(other),
            ..self
        }
    }

    /// A plausible value, which the registry's test builds every provider taking it with.
    pub(crate) const fn example(self, example: &'static str) -> ProviderFlag {
        ProviderFlag {
            example: Some(example),
            ..self
        }
    }

    /// A check of each of its values, run when the flags are read ([`ProviderFlags::insert`]),
    /// before any other check.
    pub(crate) const fn check_each(self, check: ValueCheck) -> ProviderFlag {
        ProviderFlag {
            check: Some(check),
            ..self
        }
    }

    /// The flag, e.g. `--network`.
    pub fn name(&self) -> &'static str {
        self.flag
    }

    /// The flag without its dashes, e.g. `network`.
    pub fn long(&self) -> &'static str {
        self.flag.trim_start_matches('-')
    }

    /// How it takes its value.
    pub fn value(&self) -> FlagValue {
        self.value
    }

    /// Its help (`class`: in `generate clusterclass`): a flag of one provider after its title.
    pub fn help(&self, class: bool) -> String {
        let text = self.class_help.filter(|_| class).unwrap_or(self.help);
        if self.shared {
            return text.to_string();
        }
        let title = providers::REGISTRY
            .iter()
            .find(|p| p.takes(self.flag))
            .map_or("", |p| p.title());
        format!("{title}: {text}")
    }
}

/// Every provider's flags, each once, in their order (their places, then the registry's);
/// `class`: only those of the providers a ClusterClass can be generated for.
pub fn all_flags(class: bool) -> Vec<&'static ProviderFlag> {
    let mut flags: Vec<&'static ProviderFlag> = Vec::new();
    for p in providers::REGISTRY
        .iter()
        .filter(|p| !class || p.makes_class())
    {
        for f in p.flags() {
            if !flags.iter().any(|g| g.flag == f.flag) {
                flags.push(f);
            }
        }
    }
    flags.sort_by_key(|f| f.place);
    flags
}

/// The providers' flags as their refusals name them, in their order: one flag, or several
/// refused together (`--a/--b`).
fn refusals() -> Vec<String> {
    let flags = all_flags(false);
    flags
        .iter()
        .filter(|f| f.refused_with.is_none())
        .map(|f| {
            let mut names = vec![f.flag];
            names.extend(
                flags
                    .iter()
                    .filter(|g| g.refused_with == Some(f.flag))
                    .map(|g| g.flag),
            );
            names.join("/")
        })
        .collect()
}

/// The values of the providers' flags, by flag (`--network`), in place of a field of
/// [`CreateSpec`] each: a provider's file reads its own. A flag not given is absent; a switch
/// given has no values.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProviderFlags(BTreeMap<String, Vec<String>>);

impl ProviderFlags {
    /// `flag` was given these values (none: a switch), each checked by the flag's own check.
    pub fn insert(&mut self, flag: &ProviderFlag, values: Vec<String>) -> Result<(), Error> {
        if let Some(check) = flag.check {
            values.iter().try_for_each(|v| check(v))?;
        }
        self.0.insert(flag.flag.to_string(), values);
        Ok(())
    }

    /// `flag` was given `value` (unchecked).
    #[cfg(test)]
    pub(crate) fn set(&mut self, flag: &str, value: &str) {
        self.0.insert(flag.to_string(), vec![value.to_string()]);
    }

    /// The switch `flag` was given.
    #[cfg(test)]
    pub(crate) fn switch_on(&mut self, flag: &str) {
        self.0.insert(flag.to_string(), Vec::new());
    }

    /// `flag` is not given.
    #[cfg(test)]
    pub(crate) fn unset(&mut self, flag: &str) {
        self.0.remove(flag);
    }

    /// Whether `flag` was given.
    pub(crate) fn is_given(&self, flag: &str) -> bool {
        self.0.contains_key(flag)
    }

    /// The value of `flag`, when given.
    pub(crate) fn value(&self, flag: &str) -> Option<&str> {
        self.0.get(flag)?.first().map(String::as_str)
    }

    /// Every value of `flag` (a list).
    pub(crate) fn values(&self, flag: &str) -> &[String] {
        self.0.get(flag).map_or(&[], Vec::as_slice)
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
    flags: &'static [ProviderFlag],
}

/// A provider's kinds (group `infrastructure.cluster.x-k8s.io`), the API version written when the
/// server does not serve them, and what the reconciler does to its infrastructure cluster.
#[derive(Clone, Copy, Debug)]
struct Kinds {
    cluster: &'static str,
    template: &'static str,
    version: &'static str,
    endpoint_patch: EndpointPatch,
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
        endpoint_patch: EndpointPatch,
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

    /// The infrastructure flags it takes: the shared ones it takes (`providers::FLAVOR`, `providers::IMAGE`,
    /// `providers::SSH_KEY`) and its own.
    pub(crate) const fn flags(self, flags: &'static [ProviderFlag]) -> Descriptor {
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
    fn endpoint_patch(&self) -> Option<EndpointPatch> {
        self.descriptor().kinds.map(|k| k.endpoint_patch)
    }
    /// Whether `create` needs the API server address up front (`--service-address`).
    fn needs_address(&self) -> bool {
        self.descriptor().needs_address
    }
    /// The infrastructure flags it takes, with their help.
    fn flags(&self) -> &'static [ProviderFlag] {
        self.descriptor().flags
    }
    /// Whether it takes the flag `flag` (`--network`).
    fn takes(&self, flag: &str) -> bool {
        self.flags().iter().any(|f| f.flag == flag)
    }
    /// Its own checks of its flags, after the flags it does not take were refused.
    fn check(&self, _spec: &CreateSpec) -> Result<(), Error> {
        Ok(())
    }
    /// When its workers take hosts from a pool (BYOH's ByoHosts, from every namespace): the
    /// labels a host needs for `spec`, which `create` checks enough free hosts carry. `None`:
    /// its machines are not picked from a pool.
    fn host_pool(&self, _spec: &CreateSpec) -> Option<BTreeMap<String, String>> {
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
    /// Whether `generate clusterclass` takes it: it has an infrastructure cluster and does not
    /// refuse a class.
    fn makes_class(&self) -> bool {
        self.cluster_kind().is_some() && self.class_support().is_ok()
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
        providers::REGISTRY
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
fn one_of() -> String {
    let names: Vec<&str> = providers::REGISTRY.iter().map(|p| p.name()).collect();
    format!("use one of: {}", names.join(", "))
}

impl Deref for Infrastructure {
    type Target = dyn InfraProvider;
    fn deref(&self) -> &Self::Target {
        self.0
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

/// A `v1/List` (JSON output), which `kubectl apply -f -` accepts too.
pub fn json_list(objects: &[Value]) -> Value {
    json!({"apiVersion": "v1", "kind": "List", "items": objects})
}

#[cfg(test)]
mod tests;
