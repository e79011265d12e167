//! Which Machines the tree shows details of, so that `describe` reads the infrastructure
//! machines and bootstrap configs of those only.
//!
//! clusterctl reads a Machine's infrastructure machine and bootstrap config only when the
//! Machine is visible, i.e. not folded into a group (`addMachineFunc` in
//! `cmd/clusterctl/client/tree/discovery.go`, CAPI v1.14.2). Grouping depends on the Machines'
//! own conditions only, so the visible Machines are known before those objects are read.

use std::collections::BTreeSet;

use super::{TreeError, TreeInput, TreeOptions, build_tree};

/// The names of the Machines shown on a row of their own: the tree shows their infrastructure
/// machine and bootstrap config when those say what the Machine does not. (The HOST of a
/// Machine whose host no providerID names comes from the ByoHosts BYOH labels with the name of
/// its ByoMachine, which needs no ByoMachine read.)
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
    Ok(tree
        .walk()
        .into_iter()
        .filter(|(_, n)| n.kind == "Machine" && !n.virtual_node)
        .map(|(_, n)| n.name.clone())
        .collect())
}
