//! The Machine rows: one per Machine with its infrastructure machine and bootstrap config, or
//! one `MachineGroup` row for siblings whose conditions agree (the grouping of Cluster API's
//! clusterctl, `cmd/clusterctl/client/tree/tree.go`).

use std::collections::BTreeMap;

use super::builder::{Builder, GroupKey};
use super::row::TreeMachine;
use super::{ConditionView, Counters, GroupInfo, TreeNode};
use crate::condition::Condition;
use crate::json::str_at;
use crate::plan::hosts::host_from_provider_id;

impl Builder<'_> {
    /// Machine rows for a grouping parent (`grouping` = the parent groups its children).
    pub(super) fn machines_under(&self, idx: &[usize], grouping_parent: bool) -> Vec<TreeNode> {
        let machines = self.input.machines;
        let mut singles: Vec<usize> = Vec::new();
        let mut groups: BTreeMap<GroupKey, Vec<usize>> = BTreeMap::new();
        if grouping_parent && self.opts.grouping {
            for &i in idx {
                groups
                    .entry(self.group_key(&machines[i]))
                    .or_default()
                    .push(i);
            }
            for (_, members) in std::mem::take(&mut groups).into_iter() {
                if members.len() == 1 {
                    singles.extend(members);
                } else {
                    groups.insert(self.group_key(&machines[members[0]]), members);
                }
            }
        } else {
            singles.extend_from_slice(idx);
        }
        let mut out: Vec<TreeNode> = singles
            .iter()
            .map(|&i| self.machine_node(&machines[i]))
            .collect();
        for members in groups.values() {
            out.push(self.group_node(members));
        }
        out.sort_by(|a, b| a.display_name.cmp(&b.display_name));
        out
    }

    fn host_of(&self, m: &TreeMachine) -> Option<String> {
        if let Some(h) = m.provider_id.as_deref().and_then(host_from_provider_id) {
            return Some(h.to_string());
        }
        let (kind, name) = m.infrastructure_key()?;
        if kind != "ByoMachine" {
            return None;
        }
        if let Some(bm) = self.infra_machines.get(&(kind, name))
            && let Some(h) = str_at(bm, &["spec", "providerID"]).and_then(host_from_provider_id)
        {
            return Some(h.to_string());
        }
        self.hosts_by_byomachine
            .get(&(m.namespace.as_str(), name))
            .map(|h| h.to_string())
    }

    fn machine_node(&self, m: &TreeMachine) -> TreeNode {
        let one = |t: &str| Some(i64::from(self.cond(m, t).is_some_and(|c| c.is_true())));
        let counters = Counters {
            current: Some(1),
            desired: None,
            available: one("Available"),
            ready: one("Ready"),
            up_to_date: one("UpToDate"),
        };
        let mut node = self.node(m, None, &["Ready"], Some(counters), m.version.clone());
        node.host = self.host_of(m);
        // Infrastructure machine and bootstrap config, hidden unless they say something new.
        let parent_ready = if self.v1beta1() {
            self.v1beta1_ready(m)
        } else {
            self.cond(m, "Ready")
        };
        let refs = [
            (
                "MachineInfrastructure",
                m.infrastructure_key(),
                &self.infra_machines,
            ),
            ("BootstrapConfig", m.bootstrap_key(), &self.bootstrap),
        ];
        for (meta, r, map) in refs {
            let Some(r) = r else { continue };
            let Some(&obj) = map.get(&r) else {
                continue;
            };
            let ready = if self.v1beta1() {
                self.v1beta1_ready(obj)
            } else {
                self.cond(obj, "Ready")
            };
            let same = match (&parent_ready, &ready) {
                (None, None) => true,
                (Some(a), Some(b)) => {
                    a.status == b.status
                        && a.reason == b.reason
                        && (!self.v1beta1() || a.severity == b.severity)
                }
                _ => false,
            };
            let hide = !self.opts.echo && (ready.as_ref().is_some_and(Condition::is_true) || same);
            if !hide {
                node.children
                    .push(self.node(obj, Some(meta), &["Ready"], None, None));
            }
        }
        node
    }

    fn group_node(&self, members: &[usize]) -> TreeNode {
        let machines = self.input.machines;
        let first = &machines[members[0]];
        let mut items: Vec<String> = members.iter().map(|&i| machines[i].name.clone()).collect();
        items.sort();
        let mut hosts: Vec<String> = members
            .iter()
            .filter_map(|&i| self.host_of(&machines[i]))
            .collect();
        hosts.sort();
        let count = |t: &str| {
            members
                .iter()
                .filter(|&&i| self.cond(&machines[i], t).is_some_and(|c| c.is_true()))
                .count() as i64
        };
        // The group's condition: the shared status and reason, the earliest transition, no message.
        let row_cond = if self.v1beta1() {
            self.v1beta1_ready(first)
        } else {
            self.cond(first, "Ready")
        };
        let status = row_cond.map(|mut c| {
            c.message = None;
            c.last_transition_time = members
                .iter()
                .filter_map(|&i| {
                    let r = if self.v1beta1() {
                        self.v1beta1_ready(&machines[i])
                    } else {
                        self.cond(&machines[i], "Ready")
                    };
                    r.and_then(|r| r.last_transition_time)
                })
                .min();
            ConditionView::new(&c, self.now())
        });
        let message = if items.len() <= 2 {
            format!("See {}", items.join(", "))
        } else {
            format!("See {}, ...", items[..2].join(", "))
        };
        let mut node = self.virtual_node("MachineGroup", &format!("{} Machines...", items.len()));
        node.counters = Some(Counters {
            current: Some(items.len() as i64),
            desired: None,
            available: Some(count("Available")),
            ready: Some(count("Ready")),
            up_to_date: Some(count("UpToDate")),
        });
        node.status = status;
        node.message = Some(message);
        node.version = first.version.clone();
        node.group = Some(GroupInfo {
            item_kind: "Machine".into(),
            items,
            hosts,
        });
        node
    }
}
