//! KubeVirt (CAPK, kubernetes-sigs/cluster-api-provider-kubevirt): workers as virtual machines
//! from a container disk; the KubevirtCluster is externally managed (Kamaji's endpoint, and
//! `status.ready` from the reconciler).

use serde_json::json;

use super::super::Ctx;
use super::super::infra::{InfraObjects, infra_cluster, machine_template, need};
use super::{Descriptor, FLAVOR, IMAGE, InfraProvider};
use crate::Error;
use crate::error::usage;
use crate::kamaji::endpoint::EndpointPatch;

pub(super) struct Kubevirt;

const KUBEVIRT: Descriptor = Descriptor::new("kubevirt", "KubeVirt")
    .kinds(
        "KubevirtCluster",
        "KubevirtMachineTemplate",
        "v1alpha1",
        EndpointPatch::EndpointAndReady,
    )
    .flags(&[FLAVOR, IMAGE]);

impl InfraProvider for Kubevirt {
    fn descriptor(&self) -> &'static Descriptor {
        &KUBEVIRT
    }
    fn objects(&self, ctx: &Ctx<'_>, _notes: &mut Vec<String>) -> Result<InfraObjects, Error> {
        objects(ctx)
    }
}

fn objects(ctx: &Ctx) -> Result<InfraObjects, Error> {
    let image = need(ctx, "--image")?;
    let (cores, memory) = parse_kubevirt_flavor(ctx.spec.provider_flags.value("--flavor"))?;
    let mut cluster = infra_cluster(ctx, json!({}));
    cluster["metadata"]["annotations"] = json!({"cluster.x-k8s.io/managed-by": "kamaji"});
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
    Ok(InfraObjects::new(cluster, machine_template(ctx, vm)))
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
