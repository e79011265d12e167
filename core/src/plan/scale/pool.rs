//! BYOH's free hosts: each new Machine needs one Available host matching its
//! ByoMachineTemplate's selector, and a host counted for one step is not counted again.

use serde_json::Value;

use super::{HostCheck, ScaleError, find_template};
use crate::json::at;
use crate::plan::hosts::version::{self, fits, uses_host_kubernetes};
use crate::plan::hosts::{HostState, Inventory};
use crate::plan::selector::LabelSelector;
use crate::plan::{ClusterObjects, Finding};
use crate::version::KubeVersion;

/// Free-host bookkeeping across steps (a host counted for one step is not counted again).
pub struct HostPool<'a> {
    free: Vec<&'a Value>,
    taken: Vec<bool>,
}

impl<'a> HostPool<'a> {
    /// The Available hosts of an inventory.
    pub fn from_inventory(inv: &Inventory<'a>, hosts: &'a [Value]) -> Self {
        let free: Vec<&Value> = hosts
            .iter()
            .filter(|h| inv.state(h) == HostState::Available)
            .collect();
        let taken = vec![false; free.len()];
        HostPool { free, taken }
    }

    /// Free hosts given directly (already known to be Available).
    #[cfg(test)]
    pub(crate) fn from_free(free: Vec<&'a Value>) -> Self {
        let taken = vec![false; free.len()];
        HostPool { free, taken }
    }

    /// How many untaken free hosts match (and fit `version`, when machines need the host's
    /// own Kubernetes); take up to `needed` of them.
    pub fn claim(
        &mut self,
        sel: &LabelSelector,
        version: Option<&KubeVersion>,
        needed: usize,
    ) -> usize {
        let mut matching = 0;
        let mut claimed = 0;
        for (i, h) in self.free.iter().enumerate() {
            if !self.taken[i] && sel.matches_object(h) && version.is_none_or(|v| fits(h, v)) {
                matching += 1;
                if claimed < needed {
                    self.taken[i] = true;
                    claimed += 1;
                }
            }
        }
        matching
    }

    /// The untaken free hosts matching `sel` that do not fit `version`, named for a message.
    fn misfits(&self, sel: &LabelSelector, version: &KubeVersion) -> String {
        let candidates = self
            .free
            .iter()
            .zip(&self.taken)
            .filter(|(h, taken)| !**taken && sel.matches_object(h))
            .map(|(h, _)| *h);
        version::misfits(candidates, version)
    }
}

/// The free-host check of a step from `from` to `to` Machines of the template `infra`, at
/// `version` (the machines' Kubernetes, which hosts must carry when the template names no
/// installer); an error when hosts are short, unless `force` (then a finding).
#[allow(clippy::too_many_arguments)]
pub(super) fn host_check(
    objs: &ClusterObjects<'_>,
    infra: Option<(&str, &str)>,
    version: Option<&str>,
    from: Option<i64>,
    to: i64,
    pool: Option<&mut HostPool<'_>>,
    findings: &mut Vec<Finding>,
    force: bool,
    target: impl Fn() -> String,
) -> Result<Option<HostCheck>, ScaleError> {
    let Some((kind, name)) = infra else {
        return Ok(None);
    };
    if kind != "ByoMachineTemplate" {
        return Ok(None);
    }
    let needed = usize::try_from(to - from.unwrap_or(0)).unwrap_or(0);
    let Some(tpl) = find_template(objs, kind, name) else {
        findings.push(Finding::warning(format!(
            "{}: cannot check free hosts, {kind} {name} was not found",
            target()
        )));
        return Ok(None);
    };
    let sel = match LabelSelector::from_json(
        at(tpl, &["spec", "template", "spec", "selector"]).unwrap_or(&Value::Null),
    ) {
        Ok(s) => s,
        Err(e) => {
            findings.push(Finding::warning(format!(
                "{}: {kind} {name} has an invalid selector: {e}",
                target()
            )));
            return Ok(None);
        }
    };
    let Some(pool) = pool else {
        // Not read: fine for a step that needs no host, a skipped preflight otherwise.
        return Ok((needed == 0).then(|| HostCheck {
            template: format!("{kind}/{name}"),
            selector: sel.to_string(),
            needed,
            available: None,
            ok: true,
        }));
    };
    let version = version
        .filter(|_| uses_host_kubernetes(tpl))
        .and_then(|v| KubeVersion::parse_v(v).ok());
    let misfits = match &version {
        Some(v) if needed > 0 => pool.misfits(&sel, v),
        _ => String::new(),
    };
    let available = pool.claim(&sel, version.as_ref(), needed);
    let ok = available >= needed;
    let check = HostCheck {
        template: format!("{kind}/{name}"),
        selector: sel.to_string(),
        needed,
        available: Some(available),
        ok,
    };
    if !ok {
        let err = ScaleError::NotEnoughHosts {
            target: target(),
            needed,
            selector: sel.braced(),
            // The version is named only where it excluded a host.
            carrying: match (&version, misfits.as_str()) {
                (Some(v), m) if !m.is_empty() => version::carrying(v),
                _ => String::new(),
            },
            available,
            misfits: match misfits.as_str() {
                "" => String::new(),
                m => format!(" (another Kubernetes on {m})"),
            },
        };
        if !force {
            return Err(err);
        }
        findings.push(Finding::warning(format!("--force: {err}")));
    }
    Ok(Some(check))
}
