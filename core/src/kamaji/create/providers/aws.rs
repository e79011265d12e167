//! AWS (CAPA, kubernetes-sigs/cluster-api-provider-aws): workers as EC2 instances; the
//! AWSCluster's load balancer is off, Kamaji serves the API.

use serde_json::json;

use super::super::Ctx;
use super::super::infra::{InfraObjects, endpoint, infra_cluster, machine_template, need};
use super::{Descriptor, FLAVOR, IMAGE, InfraProvider, ProviderFlag, SSH_KEY};
use crate::Error;
use crate::kamaji::endpoint::EndpointPatch;

pub(super) struct Aws;

const AWS: Descriptor = Descriptor::new("aws", "AWS")
    .kinds(
        "AWSCluster",
        "AWSMachineTemplate",
        "v1beta2",
        EndpointPatch::Endpoint,
    )
    .flags(&[
        FLAVOR,
        IMAGE,
        SSH_KEY,
        ProviderFlag::own("--region", "REGION", "region")
            .place(60)
            .example("eu-west-1"),
    ]);

impl InfraProvider for Aws {
    fn descriptor(&self) -> &'static Descriptor {
        &AWS
    }
    fn objects(&self, ctx: &Ctx<'_>, _notes: &mut Vec<String>) -> Result<InfraObjects, Error> {
        objects(ctx)
    }
}

fn objects(ctx: &Ctx) -> Result<InfraObjects, Error> {
    let flags = &ctx.spec.provider_flags;
    let region = need(ctx, "--region")?;
    let flavor = need(ctx, "--flavor")?;
    let mut s = json!({
        "region": region,
        "controlPlaneLoadBalancer": {"loadBalancerType": "disabled"},
    });
    if let Some(k) = flags.value("--ssh-key") {
        s["sshKeyName"] = json!(k);
    }
    if let Some(ep) = endpoint(ctx) {
        s["controlPlaneEndpoint"] = ep;
    }
    let cluster = infra_cluster(ctx, s);
    let mut ts = json!({
        "instanceType": flavor,
        "iamInstanceProfile": "nodes.cluster-api-provider-aws.sigs.k8s.io",
    });
    if let Some(i) = flags.value("--image") {
        ts["ami"] = json!({"id": i});
    }
    if let Some(k) = flags.value("--ssh-key") {
        ts["sshKeyName"] = json!(k);
    }
    let mut objects = InfraObjects::new(cluster, machine_template(ctx, ts));
    objects.workers.kubelet_args = vec![("cloud-provider", "external")];
    Ok(objects)
}
