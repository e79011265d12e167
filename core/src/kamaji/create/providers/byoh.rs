//! Bring Your Own Host (BYOH, vmware-tanzu/cluster-api-provider-bringyourownhost): workers on
//! hosts running BYOH's agent, picked by label; the agent installs Kubernetes from an installer
//! bundle (a K8sInstallerConfigTemplate) unless the hosts have it pre-installed.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::super::infra::{InfraObjects, endpoint, infra_cluster, machine_template, object};
use super::super::versions::api_version;
use super::super::{CreateSpec, Ctx, INFRA_GROUP, INSTALLER_TEMPLATE_KIND};
use super::{Descriptor, InfraProvider, ProviderFlag};
use crate::Error;
use crate::error::usage;
use crate::kamaji::endpoint::EndpointPatch;

/// The installer bundle repository of BYOH's own cluster templates and docs
/// (vmware-tanzu/cluster-api-provider-bringyourownhost).
pub(crate) const DEFAULT_BUNDLE_REPO: &str =
    "projects.registry.vmware.com/cluster_api_provider_bringyourownhost";
/// The only bundle type BYOH's installer knows.
pub(crate) const DEFAULT_BUNDLE_TYPE: &str = "k8s";

pub(super) struct Byoh;

const BYOH: Descriptor = Descriptor::new("byoh", "BYOH")
    .kinds("ByoCluster", "ByoMachineTemplate", "v1beta1", EndpointPatch::Endpoint)
    .flags(&[
        ProviderFlag::own(
            "--host-selector",
            "KEY=VALUE",
            "labels a host needs to become a worker (KEY=VALUE, comma separated)",
        )
        .list()
        .check_each(check_selector_pair)
        .place(110)
        .example("site=ams"),
        ProviderFlag::own("--bundle-repo", "REPO", "OCI repository of the Kubernetes installer bundles, written to the K8sInstallerConfigTemplate (default projects.registry.vmware.com/cluster_api_provider_bringyourownhost)")
            .in_class("OCI repository of the Kubernetes installer bundles")
            .place(120)
            .example("registry.example.com/byoh/bundles"),
        ProviderFlag::own("--bundle-type", "TYPE", "installer bundle type (default k8s)")
            .place(130)
            .refused_with("--bundle-repo")
            .example(DEFAULT_BUNDLE_TYPE),
        ProviderFlag::switch("--preinstalled-hosts", "the hosts have Kubernetes pre-installed (agents run with --skip-installation): no installer template")
            .in_class("the hosts have Kubernetes pre-installed: no installer template")
            .place(140),
    ]);

impl InfraProvider for Byoh {
    fn descriptor(&self) -> &'static Descriptor {
        &BYOH
    }
    fn check(&self, spec: &CreateSpec) -> Result<(), Error> {
        check_bundle(spec)
    }
    fn host_pool(&self, spec: &CreateSpec) -> Option<BTreeMap<String, String>> {
        Some(host_selector(spec))
    }
    fn installer_template(&self, spec: &CreateSpec) -> bool {
        !spec.provider_flags.is_given("--preinstalled-hosts")
    }
    fn objects(&self, ctx: &Ctx<'_>, notes: &mut Vec<String>) -> Result<InfraObjects, Error> {
        Ok(objects(ctx, notes))
    }
}

/// `--host-selector KEY=VALUE,...` as a map (a key given twice: the last value).
fn host_selector(spec: &CreateSpec) -> BTreeMap<String, String> {
    spec.provider_flags
        .values("--host-selector")
        .iter()
        .filter_map(|p| p.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

/// One `--host-selector` value, when the flags are read.
fn check_selector_pair(p: &str) -> Result<(), Error> {
    match p.split_once('=') {
        Some(_) => Ok(()),
        None => Err(usage(
            format!("invalid --host-selector {p:?}"),
            "use KEY=VALUE, e.g. --host-selector site=ams",
        )),
    }
}

fn objects(ctx: &Ctx, notes: &mut Vec<String>) -> InfraObjects {
    let selector = host_selector(ctx.spec);
    let mut s = json!({});
    if let Some(ep) = endpoint(ctx) {
        s["controlPlaneEndpoint"] = ep;
    }
    let cluster = infra_cluster(ctx, s);
    let mut ts = json!({});
    if !selector.is_empty() {
        ts["selector"] = json!({"matchLabels": selector});
    }
    let mut installer_template = None;
    if ctx.spec.provider_flags.is_given("--preinstalled-hosts") {
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
    let (flags, versions, md_name, version) = (
        &ctx.spec.provider_flags,
        ctx.versions,
        &ctx.md_name,
        &ctx.version,
    );
    let iv = if versions.installer.is_empty() {
        "v1beta1"
    } else {
        versions.installer.as_str()
    };
    let repo = flags.value("--bundle-repo").unwrap_or(DEFAULT_BUNDLE_REPO);
    let btype = flags.value("--bundle-type").unwrap_or(DEFAULT_BUNDLE_TYPE);
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
    let flags = &spec.provider_flags;
    if flags.is_given("--preinstalled-hosts")
        && (flags.is_given("--bundle-repo") || flags.is_given("--bundle-type"))
    {
        return Err(usage(
            "--preinstalled-hosts and --bundle-repo/--bundle-type cannot be used together",
            "hosts with Kubernetes pre-installed need no installer bundle: drop one of them",
        ));
    }
    if let Some(r) = flags.value("--bundle-repo") {
        validate_bundle_repo(r)?;
    }
    if let Some(t) = flags.value("--bundle-type")
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
