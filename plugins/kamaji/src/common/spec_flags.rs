//! The flags `create` and `generate clusterclass` share, defined once and flattened into both
//! verbs: the control plane's components and values file ([`ControlPlaneFlags`]), and the
//! infrastructure providers' flags (help heading "Infrastructure", [`InfraFlags`]), which the
//! providers declare (`kcore::kamaji::create::ProviderFlag`) and which are built here from the
//! registry, with clap's builder (`generate clusterclass`: those of the providers a class can be
//! made for, worded for a class). `--infrastructure`'s help and completion list the registry
//! ([`infrastructure_help`], [`InfraValues`]). [`base_spec`] reads them all into a [`CreateSpec`].

use std::ffi::OsStr;
use std::path::PathBuf;

use clap::builder::{PossibleValue, StringValueParser, TypedValueParser};
use clap::{Arg, ArgAction, ArgMatches, Args as ClapArgs, Command, FromArgMatches};
use kclient::error::Error;
use kcore::kamaji::create::{
    self as kamaji, Addon, CreateSpec, FlagValue, InfraProvider, ProviderFlag, ProviderFlags,
};
use serde_json::Value;

/// The providers `--infrastructure` takes: all of them, or (`class`) those a ClusterClass can be
/// generated for.
fn providers(class: bool) -> impl Iterator<Item = &'static dyn InfraProvider> {
    kamaji::all()
        .iter()
        .copied()
        .filter(move |p| !class || p.makes_class())
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

/// The infrastructure providers' flags, as the registry declares them (`CLASS`: those of
/// `generate clusterclass`), with the values given: added to the verb's command by
/// [`ClapArgs::augment_args`], read back from its matches, checked by [`base_spec`].
#[derive(Clone, Debug, Default)]
pub struct InfraFlags<const CLASS: bool> {
    given: Vec<(&'static ProviderFlag, Vec<String>)>,
}

/// The clap argument of a provider's flag.
fn provider_arg(flag: &'static ProviderFlag, class: bool) -> Arg {
    let arg = Arg::new(flag.long())
        .long(flag.long())
        .help(flag.help(class))
        .help_heading("Infrastructure");
    match flag.value() {
        FlagValue::One(name) => arg
            .value_name(name)
            .action(ArgAction::Set)
            .value_parser(clap::value_parser!(String)),
        FlagValue::List(name) => arg
            .value_name(name)
            .action(ArgAction::Append)
            .value_delimiter(',')
            .value_parser(clap::value_parser!(String)),
        FlagValue::Switch => arg.action(ArgAction::SetTrue),
    }
}

impl<const CLASS: bool> ClapArgs for InfraFlags<CLASS> {
    fn augment_args(cmd: Command) -> Command {
        cmd.args(
            kamaji::all_flags(CLASS)
                .into_iter()
                .map(|f| provider_arg(f, CLASS)),
        )
    }
    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

impl<const CLASS: bool> FromArgMatches for InfraFlags<CLASS> {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        let mut flags = InfraFlags::default();
        flags.update_from_arg_matches(m)?;
        Ok(flags)
    }
    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        for flag in kamaji::all_flags(CLASS) {
            let id = flag.long();
            let values = match flag.value() {
                FlagValue::Switch => m.get_flag(id).then(Vec::new),
                FlagValue::One(_) | FlagValue::List(_) => {
                    m.get_many::<String>(id).map(|vs| vs.cloned().collect())
                }
            };
            if let Some(values) = values {
                self.given.retain(|(f, _)| f.name() != flag.name());
                self.given.push((flag, values));
            }
        }
        Ok(())
    }
}

/// A spec with the shared flags' fields set and the rest default: the base the verbs' specs
/// extend (`..base_spec(..)?`). Reads the values file.
pub(crate) fn base_spec<const CLASS: bool>(
    cp: &ControlPlaneFlags,
    infra: &InfraFlags<CLASS>,
) -> Result<CreateSpec, Error> {
    Ok(CreateSpec {
        addons: cp.addons.as_deref().map(Addon::parse_list).transpose()?,
        admission_controllers: cp.admission_controllers.clone(),
        apiserver_args: cp.apiserver_args.clone(),
        controller_manager_args: cp.controller_manager_args.clone(),
        scheduler_args: cp.scheduler_args.clone(),
        values: cp.from_file.as_deref().map(read_values).transpose()?,
        provider_flags: provider_flags(infra)?,
        ..CreateSpec::default()
    })
}

/// The providers' flags given, each value checked by its flag's own check, in the flags' order.
fn provider_flags<const CLASS: bool>(infra: &InfraFlags<CLASS>) -> Result<ProviderFlags, Error> {
    let mut flags = ProviderFlags::default();
    for (flag, values) in &infra.given {
        flags.insert(flag, values.clone())?;
    }
    Ok(flags)
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
