//! Which Machines the tree shows details of, so that `describe` reads the infrastructure
//! machines and bootstrap configs of those only.
//!
//! clusterctl reads a Machine's infrastructure machine and bootstrap config only when the
//! Machine is visible, i.e. not folded into a group (`addMachineFunc` in
//! `cmd/clusterctl/client/tree/discovery.go`, CAPI v1.14.2). Grouping depends on the Machines'
//! own conditions only, so the visible Machines are known before those objects are read.

use std::collections::BTreeSet;

use super::{TreeError, TreeInput, TreeOptions, build_tree};
use crate::json::{self, str_at};
use crate::plan::hosts::host_from_provider_id;

/// The names of the Machines whose infrastructure machine or bootstrap config the tree uses:
/// every Machine shown on a row of its own (its children say what the Machine does not), and
/// every BYOH Machine whose host no `spec.providerID` names yet (the HOST cell, grouped or
/// not, then comes from its ByoMachine).
pub fn machines_needing_details(
    input: TreeInput<'_>,
    opts: &TreeOptions,
) -> Result<BTreeSet<String>, TreeError> {
    let bare = TreeInput {
        infrastructure_machines: &[],
        bootstrap_configs: &[],
        byo_hosts: &[],
        ..input
    };
    let tree = build_tree(bare, opts)?;
    let mut names: BTreeSet<String> = tree
        .walk()
        .into_iter()
        .filter(|(_, n)| n.kind == "Machine" && !n.virtual_node)
        .map(|(_, n)| n.name.clone())
        .collect();
    names.extend(
        input
            .machines
            .iter()
            .filter(|m| {
                str_at(m, &["spec", "providerID"])
                    .and_then(host_from_provider_id)
                    .is_none()
                    && str_at(m, &["spec", "infrastructureRef", "kind"]) == Some("ByoMachine")
            })
            .map(|m| json::name(m).to_string()),
    );
    Ok(names)
}
