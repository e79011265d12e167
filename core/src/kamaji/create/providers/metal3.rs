//! Metal3 (metal3-io/cluster-api-provider-metal3): workers on bare-metal hosts provisioned from
//! an image. Metal3Cluster needs the control-plane endpoint up front, so `create` needs
//! `--service-address`, the reconciler only checks the endpoint, and no ClusterClass is made.

use serde_json::json;

use super::super::Ctx;
use super::super::infra::{InfraObjects, endpoint, infra_cluster, machine_template, need};
use super::{Descriptor, IMAGE, InfraProvider, ProviderFlag};
use crate::Error;
use crate::error::usage;
use crate::kamaji::endpoint::EndpointPatch;

pub(super) struct Metal3;

const METAL3: Descriptor = Descriptor::new("metal3", "Metal3")
    .kinds(
        "Metal3Cluster",
        "Metal3MachineTemplate",
        "v1beta1",
        EndpointPatch::CheckOnly,
    )
    .needs_address()
    .flags(&[
        IMAGE,
        ProviderFlag::own(
            "--image-checksum",
            "CHECKSUM",
            "image checksum (URL or SHA-256)",
        )
        .place(30)
        .example("abc"),
    ]);

impl InfraProvider for Metal3 {
    fn descriptor(&self) -> &'static Descriptor {
        &METAL3
    }
    fn objects(&self, ctx: &Ctx<'_>, _notes: &mut Vec<String>) -> Result<InfraObjects, Error> {
        objects(ctx)
    }
    fn class_support(&self) -> Result<(), Error> {
        Err(usage(
            "--infrastructure metal3 cannot be a ClusterClass here: Metal3Cluster needs the control-plane endpoint before the control plane exists",
            "create Metal3 clusters with kubectl kamaji create NAME --infrastructure metal3 --service-address IP",
        ))
    }
}

fn objects(ctx: &Ctx) -> Result<InfraObjects, Error> {
    let image = need(ctx, "--image")?;
    let checksum = need(ctx, "--image-checksum")?;
    let cluster = infra_cluster(
        ctx,
        json!({"controlPlaneEndpoint": endpoint(ctx), "noCloudProvider": true}),
    );
    let image = json!({"image": {
        "url": image, "checksum": checksum, "checksumType": "sha256", "format": "raw",
    }});
    Ok(InfraObjects::new(cluster, machine_template(ctx, image)))
}
