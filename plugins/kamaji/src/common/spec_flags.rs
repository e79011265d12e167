//! The flags `create` and `generate clusterclass` share, defined once and flattened into both
//! verbs: the control plane's components and values file ([`ControlPlaneFlags`]), and the
//! infrastructure (help heading "Infrastructure"): the workers' machine ([`MachineFlags`]) and
//! the provider's settings ([`InfraFlags`]), two structs so that `create`'s own
//! `--image-checksum` keeps its place between them. The help of a flag only one provider takes
//! comes from that provider ([`provider_flag_help`], `kcore::kamaji::create::InfraProvider::flags`;
//! `generate clusterclass` words some for a class, [`class_wording`]); the flags several take are
//! described here. `--infrastructure`'s help and completion list the registry
//! ([`infrastructure_help`], [`InfraValues`]). [`base_spec`] reads them all into a [`CreateSpec`].

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::PathBuf;

use clap::Args as ClapArgs;
use clap::builder::{PossibleValue, StringValueParser, TypedValueParser};
use kclient::error::Error;
use kcore::kamaji::create::{self as kamaji, Addon, CreateSpec, InfraProvider};
use serde_json::Value;

/// The providers `--infrastructure` takes: all of them, or (`class`) those a ClusterClass can be
/// generated for.
fn providers(class: bool) -> impl Iterator<Item = &'static dyn InfraProvider> {
    kamaji::all()
        .iter()
        .copied()
        .filter(move |p| !class || (p.cluster_kind().is_some() && p.class_support().is_ok()))
}

/// `--infrastructure`'s help, listing the registry (`class`: for `generate clusterclass`).
pub(crate) fn infrastructure_help(class: bool) -> String {
    let items: Vec<&str> = providers(class).map(|p| p.help()).collect();
    let (last, rest) = items.split_last().map_or(("", &[][..]), |(l, r)| (*l, r));
    let comma = if class { "" } else { "," };
    format!(
        "Where the workers run: {}{comma} or {last}",
        rest.join(", ")
    )
}

/// `--infrastructure`'s values: any string parses (`Infrastructure::parse` refuses an unknown
/// one with its own message); the registry's names are the possible values shell completion
/// offers.
#[derive(Clone, Copy, Debug)]
pub(crate) struct InfraValues {
    /// Only the providers a ClusterClass can be generated for.
    pub class: bool,
}

impl TypedValueParser for InfraValues {
    type Value = String;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &OsStr,
    ) -> Result<String, clap::Error> {
        StringValueParser::new().parse_ref(cmd, arg, value)
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(Box::new(
            providers(self.class).map(|p| PossibleValue::new(p.name())),
        ))
    }
}

/// The help of `flag`, which one provider takes: `Title: help` (`class`: its wording for
/// `generate clusterclass`, if it has one).
pub(crate) fn provider_flag_help(flag: &str, class: bool) -> String {
    kamaji::all()
        .iter()
        .find_map(|p| {
            let f = p.flags().iter().find(|f| f.flag == flag)?;
            let help = f.help?;
            let help = f.class_help.filter(|_| class).unwrap_or(help);
            Some(format!("{}: {help}", p.title()))
        })
        .unwrap_or_default()
}

/// `generate clusterclass`'s wording of the providers' flags that have one (`mut_args`).
pub(crate) fn class_wording(arg: clap::Arg) -> clap::Arg {
    let flag = format!("--{}", arg.get_id().as_str().replace('_', "-"));
    let worded = kamaji::all()
        .iter()
        .flat_map(|p| p.flags())
        .any(|f| f.flag == flag && f.class_help.is_some());
    if worded {
        arg.help(provider_flag_help(&flag, true))
    } else {
        arg
    }
}

/// The control plane's addons, admission controllers, component arguments and values file.
#[derive(ClapArgs, Clone, Debug)]
pub struct ControlPlaneFlags {
    /// Addons Kamaji installs: coredns,kube-proxy,konnectivity (default all), or none
    #[arg(long, value_name = "LIST")]
    pub addons: Option<String>,
    /// Admission controllers to enable (comma separated, e.g. NodeRestriction,PodSecurity)
    #[arg(
        long = "admission-controllers",
        value_name = "LIST",
        value_delimiter = ','
    )]
    pub admission_controllers: Vec<String>,
    /// Extra kube-apiserver argument KEY=VALUE (repeatable)
    #[arg(long = "apiserver-arg", value_name = "KEY=VALUE")]
    pub apiserver_args: Vec<String>,
    /// Extra kube-controller-manager argument KEY=VALUE (repeatable)
    #[arg(long = "controller-manager-arg", value_name = "KEY=VALUE")]
    pub controller_manager_args: Vec<String>,
    /// Extra kube-scheduler argument KEY=VALUE (repeatable)
    #[arg(long = "scheduler-arg", value_name = "KEY=VALUE")]
    pub scheduler_args: Vec<String>,
    /// KamajiControlPlane fields from a YAML file (flags win); `-` reads stdin
    #[arg(long = "from-file", value_name = "FILE", value_hint = clap::ValueHint::FilePath)]
    pub from_file: Option<PathBuf>,
}

/// The workers' machine: `--flavor`, `--image`.
#[derive(ClapArgs, Clone, Debug)]
pub struct MachineFlags {
    /// Workers: OpenStack flavor, AWS instance type, KubeVirt CORESxMEMORY (e.g. 2x4Gi)
    #[arg(long, value_name = "FLAVOR", help_heading = "Infrastructure")]
    pub flavor: Option<String>,
    /// Workers: OpenStack image name, AWS AMI id, KubeVirt container disk, Metal3 image URL
    #[arg(long, value_name = "IMAGE", help_heading = "Infrastructure")]
    pub image: Option<String>,
}

/// The provider's settings: OpenStack, AWS and BYOH.
#[derive(ClapArgs, Clone, Debug)]
pub struct InfraFlags {
    #[arg(long, value_name = "NETWORK", help_heading = "Infrastructure", help = provider_flag_help("--network", false))]
    pub network: Option<String>,
    /// OpenStack, AWS: SSH key name for the workers
    #[arg(long, value_name = "KEY", help_heading = "Infrastructure")]
    pub ssh_key: Option<String>,
    #[arg(long, value_name = "REGION", help_heading = "Infrastructure", help = provider_flag_help("--region", false))]
    pub region: Option<String>,
    #[arg(long, value_name = "CLOUD", help_heading = "Infrastructure", help = provider_flag_help("--cloud-name", false))]
    pub cloud_name: Option<String>,
    #[arg(long, value_name = "SECRET", help_heading = "Infrastructure", help = provider_flag_help("--identity-secret", false))]
    pub identity_secret: Option<String>,
    #[arg(long, value_name = "SECRET", help_heading = "Infrastructure", help = provider_flag_help("--cloud-conf-secret", false))]
    pub cloud_conf_secret: Option<String>,
    #[arg(long, value_name = "KEY", help_heading = "Infrastructure", help = provider_flag_help("--cloud-ca-key", false))]
    pub cloud_ca_key: Option<String>,
    #[arg(
        long = "host-selector",
        value_name = "KEY=VALUE",
        value_delimiter = ',',
        help_heading = "Infrastructure",
        help = provider_flag_help("--host-selector", false)
    )]
    pub host_selector: Vec<String>,
    #[arg(long, value_name = "REPO", help_heading = "Infrastructure", help = provider_flag_help("--bundle-repo", false))]
    pub bundle_repo: Option<String>,
    #[arg(long, value_name = "TYPE", help_heading = "Infrastructure", help = provider_flag_help("--bundle-type", false))]
    pub bundle_type: Option<String>,
    #[arg(long, help_heading = "Infrastructure", help = provider_flag_help("--preinstalled-hosts", false))]
    pub preinstalled_hosts: bool,
}

/// A spec with the shared flags' fields set and the rest default: the base the verbs' specs
/// extend (`..base_spec(..)?`). Reads the values file.
pub(crate) fn base_spec(
    cp: &ControlPlaneFlags,
    machine: &MachineFlags,
    infra: &InfraFlags,
) -> Result<CreateSpec, Error> {
    Ok(CreateSpec {
        addons: cp.addons.as_deref().map(Addon::parse_list).transpose()?,
        admission_controllers: cp.admission_controllers.clone(),
        apiserver_args: cp.apiserver_args.clone(),
        controller_manager_args: cp.controller_manager_args.clone(),
        scheduler_args: cp.scheduler_args.clone(),
        values: cp.from_file.as_deref().map(read_values).transpose()?,
        flavor: machine.flavor.clone(),
        image: machine.image.clone(),
        network: infra.network.clone(),
        ssh_key: infra.ssh_key.clone(),
        region: infra.region.clone(),
        cloud_name: infra.cloud_name.clone(),
        identity_secret: infra.identity_secret.clone(),
        cloud_conf_secret: infra.cloud_conf_secret.clone(),
        cloud_ca_key: infra.cloud_ca_key.clone(),
        host_selector: parse_selector(&infra.host_selector)?,
        bundle_repo: infra.bundle_repo.clone(),
        bundle_type: infra.bundle_type.clone(),
        preinstalled_hosts: infra.preinstalled_hosts,
        ..CreateSpec::default()
    })
}

/// `--host-selector KEY=VALUE,...` as a map.
fn parse_selector(pairs: &[String]) -> Result<BTreeMap<String, String>, Error> {
    let mut out = BTreeMap::new();
    for p in pairs {
        let (k, v) = p.split_once('=').ok_or_else(|| Error::Usage {
            message: format!("invalid --host-selector {p:?}"),
            hint: Some("use KEY=VALUE, e.g. --host-selector site=ams".into()),
        })?;
        out.insert(k.trim().to_string(), v.trim().to_string());
    }
    Ok(out)
}

/// `--from-file FILE` (`-` for stdin) as YAML, read through the one bounded reader.
fn read_values(path: &std::path::Path) -> Result<Value, Error> {
    let text = kclient::input::Input::new("--from-file", true)
        .read_text(path)
        .map_err(kclient::input::InputError::usage)?;
    serde_saphyr::from_str::<Value>(&text).map_err(|e| Error::Usage {
        message: format!(
            "--from-file {} is not valid YAML: {}",
            path.display(),
            kcore::yaml::error_line(&e)
        ),
        hint: Some("fix the YAML and run again".into()),
    })
}
