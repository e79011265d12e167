//! No infrastructure: a control plane only; workers are joined by hand (`token join`).

use super::super::Ctx;
use super::super::infra::InfraObjects;
use super::{Descriptor, InfraProvider, all};
use crate::Error;
use crate::error::usage;

pub(super) struct NoInfrastructure;

const NONE: Descriptor = Descriptor::new("none", "none")
    .help("none (control plane only)")
    .clusterctl_name("");

impl InfraProvider for NoInfrastructure {
    fn descriptor(&self) -> &'static Descriptor {
        &NONE
    }
    fn objects(&self, _ctx: &Ctx<'_>, _notes: &mut Vec<String>) -> Result<InfraObjects, Error> {
        Ok(InfraObjects::default())
    }
    fn class_support(&self) -> Result<(), Error> {
        let classes: Vec<&str> = all()
            .iter()
            .filter(|p| p.makes_class())
            .map(|p| p.name())
            .collect();
        Err(usage(
            "a ClusterClass needs an infrastructure; --infrastructure none has none",
            format!(
                "use --infrastructure {}, or kubectl kamaji create --infrastructure none for a control plane only",
                classes.join("|")
            ),
        ))
    }
}
