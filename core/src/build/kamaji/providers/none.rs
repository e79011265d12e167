//! No infrastructure: a control plane only; workers are joined by hand (`token join`).

use super::super::Ctx;
use super::super::infra::InfraObjects;
use super::super::validate::usage;
use super::{InfraProvider, all};
use crate::Error;
use crate::kcp::infra::Action;

pub(super) struct NoInfrastructure;

impl InfraProvider for NoInfrastructure {
    fn name(&self) -> &'static str {
        "none"
    }
    fn title(&self) -> &'static str {
        "none"
    }
    fn help(&self) -> &'static str {
        "none (control plane only)"
    }
    fn cluster_kind(&self) -> Option<&'static str> {
        None
    }
    fn template_kind(&self) -> Option<&'static str> {
        None
    }
    fn default_version(&self) -> &'static str {
        ""
    }
    fn clusterctl_name(&self) -> &'static str {
        ""
    }
    fn endpoint_patch(&self) -> Option<Action> {
        None
    }
    fn objects(&self, _ctx: &Ctx<'_>, _notes: &mut Vec<String>) -> Result<InfraObjects, Error> {
        Ok(InfraObjects::default())
    }
    fn class_support(&self) -> Result<(), Error> {
        let classes: Vec<&str> = all()
            .iter()
            .filter(|p| p.cluster_kind().is_some() && p.class_support().is_ok())
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
