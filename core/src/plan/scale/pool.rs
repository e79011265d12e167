//! BYOH's free hosts: each new Machine needs one Available host matching its
//! ByoMachineTemplate's selector, and a host counted for one step is not counted again.

use serde_json::Value;

use super::{HostCheck, ScaleError, find_template};
use crate::json::at;
use crate::plan::hosts::{HostState, Inventory};
use crate::plan::selector::LabelSelector;
use crate::plan::{ClusterObjects, Finding};

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

    /// How many untaken free hosts match; take up to `needed` of them.
    pub fn claim(&mut self, sel: &LabelSelector, needed: usize) -> usize {
        let mut matching = 0;
        let mut claimed = 0;
        for (i, h) in self.free.iter().enumerate() {
            if !self.taken[i] && sel.matches_object(h) {
                matching += 1;
                if claimed < needed {
                    self.taken[i] = true;
                    claimed += 1;
                }
            }
        }
        matching
    }
}

/// The free-host check of a step from `from` to `to` Machines of the template `infra`; an
/// error when hosts are short, unless `force` (then a finding).
#[allow(clippy::too_many_arguments)]
pub(super) fn host_check(
    objs: &ClusterObjects<'_>,
    infra: Option<(&str, &str)>,
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
    let available = pool.claim(&sel, needed);
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
            available,
        };
        if !force {
            return Err(err);
        }
        findings.push(Finding::warning(format!("--force: {err}")));
    }
    Ok(Some(check))
}
