//! The flags `create` and `generate clusterclass` share, defined once and flattened into both
//! verbs: the control plane's components and values file ([`ControlPlaneFlags`]), and the
//! infrastructure (help heading "Infrastructure"): the workers' machine ([`MachineFlags`]) and
//! the provider's settings ([`InfraFlags`]), two structs so that `create`'s own
//! `--image-checksum` keeps its place between them. The help texts here are `create`'s;
//! `generate clusterclass` words a few for a class (`mut_arg` there). [`base_spec`] reads them
//! all into a [`CreateSpec`].

use std::collections::BTreeMap;
use std::path::PathBuf;

use clap::Args as ClapArgs;
use serde_json::Value;
use shared::build::kamaji::{Addon, CreateSpec};
use shared::error::Error;

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
    /// OpenStack: network name of the workers
    #[arg(long, value_name = "NETWORK", help_heading = "Infrastructure")]
    pub network: Option<String>,
    /// OpenStack, AWS: SSH key name for the workers
    #[arg(long, value_name = "KEY", help_heading = "Infrastructure")]
    pub ssh_key: Option<String>,
    /// AWS: region
    #[arg(long, value_name = "REGION", help_heading = "Infrastructure")]
    pub region: Option<String>,
    /// OpenStack: cloud name in clouds.yaml (default openstack)
    #[arg(long, value_name = "CLOUD", help_heading = "Infrastructure")]
    pub cloud_name: Option<String>,
    /// OpenStack: Secret with clouds.yaml (default NAME-cloud-config)
    #[arg(long, value_name = "SECRET", help_heading = "Infrastructure")]
    pub identity_secret: Option<String>,
    /// OpenStack: Secret whose key cloud.conf the workers get as /etc/kubernetes/cloud.conf (kubelet --cloud-config)
    #[arg(long, value_name = "SECRET", help_heading = "Infrastructure")]
    pub cloud_conf_secret: Option<String>,
    /// OpenStack: key of that Secret holding the cloud's CA, written to /etc/certs/cacert on the workers
    #[arg(long, value_name = "KEY", help_heading = "Infrastructure")]
    pub cloud_ca_key: Option<String>,
    /// BYOH: labels a host needs to become a worker (KEY=VALUE, comma separated)
    #[arg(
        long = "host-selector",
        value_name = "KEY=VALUE",
        value_delimiter = ',',
        help_heading = "Infrastructure"
    )]
    pub host_selector: Vec<String>,
    /// BYOH: OCI repository of the Kubernetes installer bundles, written to the K8sInstallerConfigTemplate (default projects.registry.vmware.com/cluster_api_provider_bringyourownhost)
    #[arg(long, value_name = "REPO", help_heading = "Infrastructure")]
    pub bundle_repo: Option<String>,
    /// BYOH: installer bundle type (default k8s)
    #[arg(long, value_name = "TYPE", help_heading = "Infrastructure")]
    pub bundle_type: Option<String>,
    /// BYOH: the hosts have Kubernetes pre-installed (agents run with --skip-installation): no installer template
    #[arg(long, help_heading = "Infrastructure")]
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
    let text = shared::input::Input::new("--from-file", true)
        .read_text(path)
        .map_err(shared::input::InputError::usage)?;
    serde_saphyr::from_str::<Value>(&text).map_err(|e| Error::Usage {
        message: format!(
            "--from-file {} is not valid YAML: {}",
            path.display(),
            kcore::yaml::error_line(&e)
        ),
        hint: Some("fix the YAML and run again".into()),
    })
}
