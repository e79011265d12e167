//! Bring Your Own Host (BYOH, vmware-tanzu/cluster-api-provider-bringyourownhost): workers on
//! hosts running BYOH's agent, picked by label; the agent installs Kubernetes from an installer
//! bundle (a K8sInstallerConfigTemplate) unless the hosts have it pre-installed.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::super::infra::{InfraObjects, endpoint, infra_cluster, machine_template, object};
use super::super::versions::api_version;
use super::super::{CreateSpec, Ctx, INFRA_GROUP, INSTALLER_TEMPLATE_KIND};
use super::{Descriptor, FlagHelp, InfraProvider};
use crate::Error;
use crate::error::usage;
use crate::kamaji::endpoint::Action;

/// The installer bundle repository of BYOH's own cluster templates and docs
/// (vmware-tanzu/cluster-api-provider-bringyourownhost).
pub(crate) const DEFAULT_BUNDLE_REPO: &str =
    "projects.registry.vmware.com/cluster_api_provider_bringyourownhost";
/// The only bundle type BYOH's installer knows.
pub(crate) const DEFAULT_BUNDLE_TYPE: &str = "k8s";

pub(super) struct Byoh;

const BYOH: Descriptor = Descriptor::new("byoh", "BYOH")
    .kinds("ByoCluster", "ByoMachineTemplate", "v1beta1", Action::Endpoint)
    .flags(&[
        FlagHelp::own(
            "--host-selector",
            "labels a host needs to become a worker (KEY=VALUE, comma separated)",
        ),
        FlagHelp::own("--bundle-repo", "OCI repository of the Kubernetes installer bundles, written to the K8sInstallerConfigTemplate (default projects.registry.vmware.com/cluster_api_provider_bringyourownhost)").in_class("OCI repository of the Kubernetes installer bundles"),
        FlagHelp::own("--bundle-type", "installer bundle type (default k8s)"),
        FlagHelp::own("--preinstalled-hosts", "the hosts have Kubernetes pre-installed (agents run with --skip-installation): no installer template").in_class("the hosts have Kubernetes pre-installed: no installer template"),
    ]);

impl InfraProvider for Byoh {
    fn descriptor(&self) -> &'static Descriptor {
        &BYOH
    }
    fn check(&self, spec: &CreateSpec) -> Result<(), Error> {
        check_bundle(spec)
    }
    fn host_pool<'a>(&self, spec: &'a CreateSpec) -> Option<&'a BTreeMap<String, String>> {
        Some(&spec.host_selector)
    }
    fn installer_template(&self, spec: &CreateSpec) -> bool {
        !spec.preinstalled_hosts
    }
    fn objects(&self, ctx: &Ctx<'_>, notes: &mut Vec<String>) -> Result<InfraObjects, Error> {
        Ok(objects(ctx, notes))
    }
}

fn objects(ctx: &Ctx, notes: &mut Vec<String>) -> InfraObjects {
    let spec = ctx.spec;
    let mut s = json!({});
    if let Some(ep) = endpoint(ctx) {
        s["controlPlaneEndpoint"] = ep;
    }
    let cluster = infra_cluster(ctx, s);
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
    let mut objects = InfraObjects::new(cluster, machine_template(ctx, ts));
    objects.workers.installer_template = installer_template;
    objects
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
        // Seen with the real agent and controllers: BYOH v0.5.0 names the installation Secret
        // after the K8sInstallerConfig, that is the machine (`storeInstallationData`, which
        // updates the Secret if it exists), and Cluster API v1.14's kubeadm bootstrap provider
        // names the bootstrap data Secret after the machine too. One overwrites the other.
        notes.push(
            "BYOH v0.5.0 gives its installation Secret the machine's name, as Cluster API's kubeadm bootstrap provider does its bootstrap data, and overwrites it: the agents install, report the node bootstrapped and never join; prefer --preinstalled-hosts".to_string(),
        );
    }
    (installer_ref, template)
}

/// BYOH's installer bundle flags.
fn check_bundle(spec: &CreateSpec) -> Result<(), Error> {
    if spec.preinstalled_hosts && (spec.bundle_repo.is_some() || spec.bundle_type.is_some()) {
        return Err(usage(
            "--preinstalled-hosts and --bundle-repo/--bundle-type cannot be used together",
            "hosts with Kubernetes pre-installed need no installer bundle: drop one of them",
        ));
    }
    if let Some(r) = &spec.bundle_repo {
        validate_bundle_repo(r)?;
    }
    if let Some(t) = &spec.bundle_type
        && t != DEFAULT_BUNDLE_TYPE
    {
        return Err(usage(
            format!("invalid --bundle-type {t:?}"),
            format!("BYOH's installer knows one bundle type: {DEFAULT_BUNDLE_TYPE}"),
        ));
    }
    Ok(())
}

/// An OCI repository as BYOH's installer joins it (`<repo>/byoh-bundle-<os>_k8s:<version>`):
/// `registry[/path]`, without scheme, tag or trailing `/`.
fn validate_bundle_repo(s: &str) -> Result<(), Error> {
    let last = s.rsplit('/').next().unwrap_or(s);
    let ok = s.contains('/')
        && !s.contains("://")
        && !s.contains(char::is_whitespace)
        && !s.starts_with('/')
        && !s.ends_with('/')
        && !last.contains([':', '@']);
    if ok {
        Ok(())
    } else {
        Err(usage(
            format!("invalid --bundle-repo {s:?}: not an OCI repository"),
            format!("use REGISTRY/PATH without scheme or tag, e.g. {DEFAULT_BUNDLE_REPO}"),
        ))
    }
}
