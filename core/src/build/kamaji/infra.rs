//! The infrastructure objects of each provider: the infrastructure cluster the Cluster
//! references, and the machine template (with BYOH, the installer template) of the workers.

use serde_json::{Value, json};

use super::validate::usage;
use super::versions::api_version;
use super::{
    Ctx, DEFAULT_BUNDLE_REPO, DEFAULT_BUNDLE_TYPE, INFRA_GROUP, INSTALLER_TEMPLATE_KIND,
    Infrastructure,
};
use crate::Error;

/// What the infrastructure contributes.
#[derive(Default)]
pub(super) struct InfraObjects {
    /// The infrastructure cluster, applied before the Cluster.
    pub cluster: Option<Value>,
    /// The OpenStackCluster without an address, created once Kamaji announces it.
    pub deferred: Option<Value>,
    pub workers: WorkerInfra,
}

/// What the infrastructure contributes to the workers.
#[derive(Default)]
pub(super) struct WorkerInfra {
    /// The machine template the MachineDeployment references.
    pub template: Option<Value>,
    /// BYOH's K8sInstallerConfigTemplate.
    pub installer_template: Option<Value>,
    /// Kubelet arguments the provider needs in the kubeadm join configuration.
    pub kubelet_args: Vec<(&'static str, &'static str)>,
    /// Files the kubeadm bootstrap writes on every worker (`KubeadmConfigSpec.files`).
    pub files: Vec<Value>,
}

/// The objects of `ctx.infra`; BYOH adds notes for the preview.
pub(super) fn objects(ctx: &Ctx, notes: &mut Vec<String>) -> Result<InfraObjects, Error> {
    match ctx.infra {
        Infrastructure::None => Ok(InfraObjects::default()),
        Infrastructure::Byoh => Ok(byoh(ctx, notes)),
        Infrastructure::Openstack => openstack(ctx),
        Infrastructure::Kubevirt => kubevirt(ctx),
        Infrastructure::Metal3 => metal3(ctx),
        Infrastructure::Aws => aws(ctx),
    }
}

/// A flag the infrastructure needs, non-empty.
fn need(ctx: &Ctx, flag: &str, v: &Option<String>) -> Result<String, Error> {
    v.clone().filter(|s| !s.is_empty()).ok_or_else(|| {
        usage(
            format!("--infrastructure {} needs {flag}", ctx.infra.as_str()),
            format!("pass {flag} for the worker machines"),
        )
    })
}

/// The API server endpoint, when its address is known.
fn endpoint(ctx: &Ctx) -> Option<Value> {
    ctx.address
        .as_ref()
        .map(|a| json!({"host": a, "port": ctx.port}))
}

/// An infrastructure object of `kind`, at the served version `version`.
fn object(version: &str, kind: &str, metadata: Value, spec: Value) -> Value {
    json!({
        "apiVersion": api_version(INFRA_GROUP, version), "kind": kind,
        "metadata": metadata, "spec": spec,
    })
}

/// A machine template of `kind` whose machines have `machine_spec`.
fn machine_template(ctx: &Ctx, kind: &str, machine_spec: Value) -> Value {
    object(
        &ctx.infra_template_version(),
        kind,
        ctx.meta(&ctx.md_name),
        json!({"template": {"spec": machine_spec}}),
    )
}

fn byoh(ctx: &Ctx, notes: &mut Vec<String>) -> InfraObjects {
    let spec = ctx.spec;
    let mut s = json!({});
    if let Some(ep) = endpoint(ctx) {
        s["controlPlaneEndpoint"] = ep;
    }
    let cluster = object(
        &ctx.infra_cluster_version(),
        "ByoCluster",
        ctx.meta(ctx.name()),
        s,
    );
    let mut ts = json!({});
    if !spec.host_selector.is_empty() {
        ts["selector"] = json!({"matchLabels": spec.host_selector});
    }
    let mut installer_template = None;
    if spec.preinstalled_hosts {
        notes.push(format!(
            "--preinstalled-hosts: no K8sInstallerConfigTemplate and no installerRef; the hosts must have Kubernetes {} installed and their agents run with --skip-installation",
            ctx.version
        ));
    } else {
        let (installer_ref, template) = byoh_installer(ctx, notes);
        ts["installerRef"] = installer_ref;
        installer_template = Some(template);
    }
    InfraObjects {
        cluster: Some(cluster),
        deferred: None,
        workers: WorkerInfra {
            template: Some(machine_template(ctx, "ByoMachineTemplate", ts)),
            installer_template,
            kubelet_args: Vec::new(),
            files: Vec::new(),
        },
    }
}

/// BYOH's installer: the machine template's `installerRef` and the K8sInstallerConfigTemplate
/// it names.
fn byoh_installer(ctx: &Ctx, notes: &mut Vec<String>) -> (Value, Value) {
    let (spec, versions, md_name, version) = (ctx.spec, ctx.versions, &ctx.md_name, &ctx.version);
    let iv = if versions.installer.is_empty() {
        "v1beta1"
    } else {
        versions.installer.as_str()
    };
    let repo = spec
        .bundle_repo
        .clone()
        .unwrap_or_else(|| DEFAULT_BUNDLE_REPO.to_string());
    let btype = spec
        .bundle_type
        .clone()
        .unwrap_or_else(|| DEFAULT_BUNDLE_TYPE.to_string());
    // BYOH reads the template at installerRef.namespace: it must be set.
    let installer_ref = json!({
        "apiVersion": api_version(INFRA_GROUP, iv),
        "kind": INSTALLER_TEMPLATE_KIND,
        "name": md_name,
        "namespace": ctx.ns(),
    });
    let template = object(
        iv,
        INSTALLER_TEMPLATE_KIND,
        ctx.meta(md_name),
        json!({"template": {"spec": {"bundleRepo": repo, "bundleType": btype}}}),
    );
    if ctx.workers > 0 {
        notes.push(format!(
            "BYOH agents install Kubernetes {version} from {repo}/byoh-bundle-<os>_k8s:{version} (K8sInstallerConfigTemplate {md_name}); the bundle must exist there, or pass --preinstalled-hosts for hosts with Kubernetes pre-installed"
        ));
    }
    (installer_ref, template)
}

/// Where OpenStack workers find the cloud configuration and CA (the paths of seed 000's
/// KubeadmConfigTemplate).
pub(crate) const OPENSTACK_CLOUD_CONF_PATH: &str = "/etc/kubernetes/cloud.conf";
pub(crate) const OPENSTACK_CA_PATH: &str = "/etc/certs/cacert";

/// A bootstrap file from `secret`'s `key`, root-only.
fn secret_file(secret: &str, key: &str, path: &str) -> Value {
    json!({
        "path": path,
        "owner": "root:root",
        "permissions": "0600",
        "contentFrom": {"secret": {"name": secret, "key": key}},
    })
}

fn openstack(ctx: &Ctx) -> Result<InfraObjects, Error> {
    let spec = ctx.spec;
    let flavor = need(ctx, "--flavor", &spec.flavor)?;
    let image = need(ctx, "--image", &spec.image)?;
    let cloud = spec
        .cloud_name
        .clone()
        .unwrap_or_else(|| "openstack".into());
    let secret = spec
        .identity_secret
        .clone()
        .unwrap_or_else(|| format!("{}-cloud-config", ctx.name()));
    let identity = json!({"name": secret, "cloudName": cloud});
    let mut s = json!({
        "identityRef": identity,
        "apiServerLoadBalancer": {"enabled": false},
        "disableAPIServerFloatingIP": true,
        "apiServerFixedIP": ctx.address.clone().unwrap_or_default(),
        "apiServerPort": ctx.port,
        "managedSecurityGroups": {},
    });
    if let Some(n) = &spec.network {
        s["network"] = json!({"filter": {"name": n}});
    }
    let osc = object(
        &ctx.infra_cluster_version(),
        "OpenStackCluster",
        ctx.meta(ctx.name()),
        s,
    );
    let (cluster, deferred) = if ctx.address.is_some() {
        (Some(osc), None)
    } else {
        (None, Some(osc))
    };
    let mut ts = json!({
        "flavor": flavor,
        "image": {"filter": {"name": image}},
        "identityRef": identity,
    });
    if let Some(k) = &spec.ssh_key {
        ts["sshKeyName"] = json!(k);
    }
    // Seed 000 (the Kamaji provider discussion): the workers of an OpenStack cluster with an
    // external cloud controller get the cloud configuration and the cloud's CA as files, and
    // kubelet's cloud-config points at the former. The content comes from a Secret through
    // CABPK's `contentFrom`, so the credentials never sit in the template.
    let mut kubelet_args = vec![("cloud-provider", "external")];
    let mut files = Vec::new();
    if let Some(secret) = &spec.cloud_conf_secret {
        kubelet_args.push(("cloud-config", OPENSTACK_CLOUD_CONF_PATH));
        files.push(secret_file(secret, "cloud.conf", OPENSTACK_CLOUD_CONF_PATH));
        if let Some(key) = &spec.cloud_ca_key {
            files.push(secret_file(secret, key, OPENSTACK_CA_PATH));
        }
    }
    Ok(InfraObjects {
        cluster,
        deferred,
        workers: WorkerInfra {
            template: Some(machine_template(ctx, "OpenStackMachineTemplate", ts)),
            installer_template: None,
            kubelet_args,
            files,
        },
    })
}

/// Fills the deferred OpenStackCluster with the endpoint Kamaji announced.
pub fn fill_openstack_endpoint(osc: &mut Value, host: &str, port: u16) {
    osc["spec"]["apiServerFixedIP"] = json!(host);
    osc["spec"]["apiServerPort"] = json!(port);
}

fn kubevirt(ctx: &Ctx) -> Result<InfraObjects, Error> {
    let image = need(ctx, "--image", &ctx.spec.image)?;
    let (cores, memory) = parse_kubevirt_flavor(ctx.spec.flavor.as_deref())?;
    let mut m = ctx.meta(ctx.name());
    m["annotations"] = json!({"cluster.x-k8s.io/managed-by": "kamaji"});
    let cluster = object(
        &ctx.infra_cluster_version(),
        "KubevirtCluster",
        m,
        json!({}),
    );
    let vm = json!({"virtualMachineTemplate": {"spec": {
        "runStrategy": "Always",
        "template": {"spec": {
            "domain": {
                "cpu": {"cores": cores},
                "memory": {"guest": memory},
                "devices": {"disks": [{"name": "containervolume", "disk": {"bus": "virtio"}}]},
            },
            "evictionStrategy": "External",
            "volumes": [{"name": "containervolume", "containerDisk": {"image": image}}],
        }},
    }}});
    Ok(InfraObjects {
        cluster: Some(cluster),
        deferred: None,
        workers: WorkerInfra {
            template: Some(machine_template(ctx, "KubevirtMachineTemplate", vm)),
            ..WorkerInfra::default()
        },
    })
}

/// `CORESxMEMORY` (e.g. `2x4Gi`); default 2 cores, 4Gi.
fn parse_kubevirt_flavor(s: Option<&str>) -> Result<(u32, String), Error> {
    let Some(s) = s else {
        return Ok((2, "4Gi".into()));
    };
    let bad = || {
        usage(
            format!("invalid --flavor {s:?} for kubevirt"),
            "use CORESxMEMORY, e.g. 2x4Gi",
        )
    };
    let (c, m) = s.split_once('x').ok_or_else(bad)?;
    let cores: u32 = c.parse().map_err(|_| bad())?;
    if cores == 0 || m.is_empty() || !m.starts_with(|ch: char| ch.is_ascii_digit()) {
        return Err(bad());
    }
    Ok((cores, m.to_string()))
}

fn metal3(ctx: &Ctx) -> Result<InfraObjects, Error> {
    let image = need(ctx, "--image", &ctx.spec.image)?;
    let checksum = need(ctx, "--image-checksum", &ctx.spec.image_checksum)?;
    let cluster = object(
        &ctx.infra_cluster_version(),
        "Metal3Cluster",
        ctx.meta(ctx.name()),
        json!({"controlPlaneEndpoint": endpoint(ctx), "noCloudProvider": true}),
    );
    let image = json!({"image": {
        "url": image, "checksum": checksum, "checksumType": "sha256", "format": "raw",
    }});
    Ok(InfraObjects {
        cluster: Some(cluster),
        deferred: None,
        workers: WorkerInfra {
            template: Some(machine_template(ctx, "Metal3MachineTemplate", image)),
            ..WorkerInfra::default()
        },
    })
}

fn aws(ctx: &Ctx) -> Result<InfraObjects, Error> {
    let spec = ctx.spec;
    let region = need(ctx, "--region", &spec.region)?;
    let flavor = need(ctx, "--flavor", &spec.flavor)?;
    let mut s = json!({
        "region": region,
        "controlPlaneLoadBalancer": {"loadBalancerType": "disabled"},
    });
    if let Some(k) = &spec.ssh_key {
        s["sshKeyName"] = json!(k);
    }
    if let Some(ep) = endpoint(ctx) {
        s["controlPlaneEndpoint"] = ep;
    }
    let cluster = object(
        &ctx.infra_cluster_version(),
        "AWSCluster",
        ctx.meta(ctx.name()),
        s,
    );
    let mut ts = json!({
        "instanceType": flavor,
        "iamInstanceProfile": "nodes.cluster-api-provider-aws.sigs.k8s.io",
    });
    if let Some(i) = &spec.image {
        ts["ami"] = json!({"id": i});
    }
    if let Some(k) = &spec.ssh_key {
        ts["sshKeyName"] = json!(k);
    }
    Ok(InfraObjects {
        cluster: Some(cluster),
        deferred: None,
        workers: WorkerInfra {
            template: Some(machine_template(ctx, "AWSMachineTemplate", ts)),
            installer_template: None,
            kubelet_args: vec![("cloud-provider", "external")],
            files: Vec::new(),
        },
    })
}
