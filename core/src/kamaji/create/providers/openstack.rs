//! OpenStack (CAPO, kubernetes-sigs/cluster-api-provider-openstack): the OpenStackCluster takes
//! the API server address as `apiServerFixedIP`, which older CAPO refuses to change later: without
//! `--service-address` it is created once Kamaji announces the address ([`fill_openstack_endpoint`]).

use serde_json::{Value, json};

use super::super::clusterclass::ADDRESS_VARIABLE;
use super::super::infra::{
    InfraObjects, WorkerInfra, infra_cluster, machine_template, need, secret_file,
};
use super::super::validate::validate_dns_subdomain;
use super::super::{CreateSpec, Ctx};
use super::{Descriptor, FLAVOR, IMAGE, InfraProvider, ProviderFlag, SSH_KEY};
use crate::Error;
use crate::error::usage;
use crate::kamaji::endpoint::EndpointPatch;

pub(super) struct OpenStack;

const OPENSTACK: Descriptor = Descriptor::new("openstack", "OpenStack")
    .kinds(
        "OpenStackCluster",
        "OpenStackMachineTemplate",
        "v1beta1",
        EndpointPatch::OpenStack,
    )
    .flags(&[
        FLAVOR,
        IMAGE,
        ProviderFlag::own("--network", "NETWORK", "network name of the workers")
            .place(40)
            .example("tenant-net"),
        SSH_KEY,
        ProviderFlag::own(
            "--cloud-name",
            "CLOUD",
            "cloud name in clouds.yaml (default openstack)",
        )
        .place(70)
        .example("openstack"),
        ProviderFlag::own(
            "--identity-secret",
            "SECRET",
            "Secret with clouds.yaml (default NAME-cloud-config)",
        )
        .place(80)
        .refused_with("--cloud-name")
        .example("c1-cloud-config"),
        ProviderFlag::own("--cloud-conf-secret", "SECRET", "Secret whose key cloud.conf the workers get as /etc/kubernetes/cloud.conf (kubelet --cloud-config)")
            .in_class("Secret whose key cloud.conf the workers get as /etc/kubernetes/cloud.conf")
            .place(90)
            .example("c1-cloud-conf"),
        ProviderFlag::own("--cloud-ca-key", "KEY", "key of that Secret holding the cloud's CA, written to /etc/certs/cacert on the workers")
            .in_class("key of that Secret holding the cloud's CA, written to /etc/certs/cacert")
            .place(100)
            .refused_with("--cloud-conf-secret")
            .example("cacert"),
    ]);

impl InfraProvider for OpenStack {
    fn descriptor(&self) -> &'static Descriptor {
        &OPENSTACK
    }
    fn check(&self, spec: &CreateSpec) -> Result<(), Error> {
        let flags = &spec.provider_flags;
        if flags.is_given("--cloud-ca-key") && !flags.is_given("--cloud-conf-secret") {
            return Err(usage(
                "--cloud-ca-key needs --cloud-conf-secret",
                "name the Secret holding cloud.conf (and the CA under that key) with --cloud-conf-secret",
            ));
        }
        if let Some(s) = flags.value("--cloud-conf-secret") {
            validate_dns_subdomain("--cloud-conf-secret", s)?;
        }
        Ok(())
    }
    fn objects(&self, ctx: &Ctx<'_>, _notes: &mut Vec<String>) -> Result<InfraObjects, Error> {
        objects(ctx)
    }
    fn class_patches(&self, infra_template: &Value) -> Vec<Value> {
        vec![json!({
            "selector": {
                "apiVersion": infra_template["apiVersion"], "kind": infra_template["kind"],
                "matchResources": {"infrastructureCluster": true},
            },
            "jsonPatches": [{"op": "add", "path": "/spec/template/spec/apiServerFixedIP", "valueFrom": {"variable": ADDRESS_VARIABLE}}],
        })]
    }
    fn class_notes(&self, spec: &CreateSpec) -> Vec<String> {
        let name = &spec.name;
        match spec.provider_flags.value("--identity-secret") {
            Some(_) => Vec::new(),
            None => vec![format!(
                "every cluster of class {name} reads its OpenStack credentials from Secret {name}-cloud-config (pass --identity-secret to name another)"
            )],
        }
    }
}

/// Where OpenStack workers find the cloud configuration and CA (the paths of seed 000's
/// KubeadmConfigTemplate).
const OPENSTACK_CLOUD_CONF_PATH: &str = "/etc/kubernetes/cloud.conf";
const OPENSTACK_CA_PATH: &str = "/etc/certs/cacert";

fn objects(ctx: &Ctx) -> Result<InfraObjects, Error> {
    let flags = &ctx.spec.provider_flags;
    let flavor = need(ctx, "--flavor")?;
    let image = need(ctx, "--image")?;
    let cloud = flags.value("--cloud-name").unwrap_or("openstack");
    let secret = flags
        .value("--identity-secret")
        .map_or_else(|| format!("{}-cloud-config", ctx.name()), str::to_string);
    let identity = json!({"name": secret, "cloudName": cloud});
    let mut s = json!({
        "identityRef": identity,
        "apiServerLoadBalancer": {"enabled": false},
        "disableAPIServerFloatingIP": true,
        "apiServerFixedIP": ctx.address.clone().unwrap_or_default(),
        "apiServerPort": ctx.port,
        "managedSecurityGroups": {},
    });
    if let Some(n) = flags.value("--network") {
        s["network"] = json!({"filter": {"name": n}});
    }
    let osc = infra_cluster(ctx, s);
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
    if let Some(k) = flags.value("--ssh-key") {
        ts["sshKeyName"] = json!(k);
    }
    // Seed 000 (the Kamaji provider discussion): the workers of an OpenStack cluster with an
    // external cloud controller get the cloud configuration and the cloud's CA as files, and
    // kubelet's cloud-config points at the former. The content comes from a Secret through
    // CABPK's `contentFrom`, so the credentials never sit in the template.
    let mut kubelet_args = vec![("cloud-provider", "external")];
    let mut files = Vec::new();
    if let Some(secret) = flags.value("--cloud-conf-secret") {
        kubelet_args.push(("cloud-config", OPENSTACK_CLOUD_CONF_PATH));
        files.push(secret_file(secret, "cloud.conf", OPENSTACK_CLOUD_CONF_PATH));
        if let Some(key) = flags.value("--cloud-ca-key") {
            files.push(secret_file(secret, key, OPENSTACK_CA_PATH));
        }
    }
    Ok(InfraObjects {
        cluster,
        deferred,
        workers: WorkerInfra {
            template: Some(machine_template(ctx, ts)),
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
