//! The steps of a plan: a control-plane step, a MachineDeployment step, a ClusterClass
//! topology step, each with its patch and, on BYOH, the spare hosts its rollout needs.

use serde_json::{Value, json};

use super::{CpKind, Planner, SpareHostCheck, StepRole, UpgradeStep, key};
use crate::json::{self, at, i64_at, str_at};
use crate::plan::hosts::version::{self, fits, uses_host_kubernetes};
use crate::plan::scale::{
    control_plane_infra_ref, deployment_infra_ref, deployment_strategy, kcp_max_surge,
};
use crate::plan::selector::LabelSelector;
use crate::plan::{FieldChange, Finding, ObjectPatch};
use crate::version::KubeVersion;
use crate::version::releases::PATCH_RELEASES_ANNOTATION;

impl Planner<'_, '_> {
    pub(super) fn cp_step(
        &mut self,
        cp: &Value,
        kind: CpKind,
        from: &KubeVersion,
        segment: &[KubeVersion],
    ) {
        let Some(to) = segment.last() else { return };
        let infra = control_plane_infra_ref(cp);
        let infra_path = if at(
            cp,
            &["spec", "machineTemplate", "spec", "infrastructureRef"],
        )
        .is_some()
        {
            "/spec/machineTemplate/spec/infrastructureRef/name"
        } else {
            "/spec/machineTemplate/infrastructureRef/name"
        };
        let (patch, clones) = if kind == CpKind::Kamaji {
            let (mut patch, clones) = self.version_patch(cp, "/spec/version", None, "", from, to);
            record_patch_releases(cp, &mut patch, &self.req.releases.recorded(from, to));
            (patch, clones)
        } else {
            self.version_patch(cp, "/spec/version", infra, infra_path, from, to)
        };
        let mut spare = vec![];
        if kind == CpKind::Kubeadm
            && let Some(c) = self.spare_check(cp, infra, to, usize::from(kcp_max_surge(cp) > 0), |needed, available, sel| {
                let mut w = vec![];
                let replicas = i64_at(cp, &["spec", "replicas"]).unwrap_or(1);
                if replicas >= 3 {
                    w.push("set the KubeadmControlPlane's maxSurge to 0: it removes an old machine before creating a new one".to_string());
                } else {
                    w.push(format!("maxSurge 0 (replace without a spare) needs at least 3 control-plane replicas; this one has {replicas}"));
                }
                w.push(format!("free or register {} more host(s) matching {sel}", needed - available));
                w
            })
        {
            spare.push(c);
        }
        let target = key(cp);
        let wait_for = if kind == CpKind::Kamaji {
            format!(
                "{target}: the reconciler reaches {} and every control-plane pod is updated",
                to
            )
        } else {
            format!("{target}: all replicas at {}, ready and up to date", to)
        };
        self.steps.push(UpgradeStep {
            number: 0,
            role: StepRole::ControlPlane,
            target,
            from_version: from.clone(),
            to_version: to.clone(),
            via: if kind == CpKind::Kamaji && segment.len() > 1 {
                segment.to_vec()
            } else {
                vec![]
            },
            stepped_by_reconciler: kind == CpKind::Kamaji,
            clone_templates: clones,
            patch,
            spare_hosts: spare,
            wait_for,
        });
    }

    pub(super) fn md_step(&mut self, md: &Value, from: &KubeVersion, to: &KubeVersion) {
        let infra = deployment_infra_ref(md);
        let (patch, clones) = self.version_patch(
            md,
            "/spec/template/spec/version",
            infra,
            "/spec/template/spec/infrastructureRef/name",
            from,
            to,
        );
        let mut spare = vec![];
        if let Some(c) = self.md_spare(md, infra, to) {
            spare.push(c);
        }
        let target = key(md);
        self.steps.push(UpgradeStep {
            number: 0,
            role: StepRole::Workers,
            wait_for: format!("{target}: all replicas at {}, ready and up to date", to),
            target,
            from_version: from.clone(),
            to_version: to.clone(),
            via: vec![],
            stepped_by_reconciler: false,
            clone_templates: clones,
            patch,
            spare_hosts: spare,
        });
    }

    fn md_spare(
        &mut self,
        md: &Value,
        infra: Option<(&str, &str)>,
        to: &KubeVersion,
    ) -> Option<SpareHostCheck> {
        let st = deployment_strategy(md);
        let replicas = i64_at(md, &["spec", "replicas"]).unwrap_or(1);
        let needed = if st.type_ == "OnDelete" || replicas == 0 {
            0
        } else {
            st.max_surge.clamp(0, replicas) as usize
        };
        let name = json::name(md).to_string();
        let cluster = json::name(self.objs.cluster).to_string();
        self.spare_check(md, infra, to, needed, |needed, available, sel| {
            let short = (needed - available) as i64;
            vec![
                "set maxSurge 0 and maxUnavailable 1: each machine is replaced in place, one at a time".to_string(),
                "use the OnDelete strategy and delete old Machines one by one".to_string(),
                format!(
                    "scale down by {short} first: kubectl capi scale {cluster} --workers {} --deployment {name}",
                    (replicas - short).max(0)
                ),
                format!("free or register {short} more host(s) matching {sel}"),
            ]
        })
    }

    /// The spare hosts `obj`'s rollout to `to` needs: free hosts its template's selector picks,
    /// carrying `to`'s minor when the template names no installer (the new machines run on the
    /// hosts' own Kubernetes).
    fn spare_check(
        &mut self,
        obj: &Value,
        infra: Option<(&str, &str)>,
        to: &KubeVersion,
        needed: usize,
        ways_out: impl Fn(usize, usize, &str) -> Vec<String>,
    ) -> Option<SpareHostCheck> {
        let free = self.free_hosts?;
        let (kind, name) = infra?;
        if kind != "ByoMachineTemplate" {
            return None;
        }
        let tpl = self.template_for(&key(obj), kind, name)?;
        let sel = LabelSelector::from_json(
            at(&tpl, &["spec", "template", "spec", "selector"]).unwrap_or(&Value::Null),
        )
        .ok()?;
        let own = uses_host_kubernetes(&tpl);
        let matching: Vec<&Value> = free
            .iter()
            .copied()
            .filter(|h| sel.matches_object(h))
            .collect();
        let available = matching.iter().filter(|h| !own || fits(h, to)).count();
        let ok = available >= needed;
        // The version is named only where it excluded a host.
        let misfits = match own {
            true => version::misfits(matching.iter().copied(), to),
            false => String::new(),
        };
        let braced = match misfits.as_str() {
            "" => sel.braced(),
            _ => format!("{}{}", sel.braced(), version::carrying(to)),
        };
        let check = SpareHostCheck {
            target: key(obj),
            selector: sel.to_string(),
            needed,
            available,
            ok,
            ways_out: if ok {
                vec![]
            } else {
                ways_out(needed, available, &braced)
            },
        };
        if !ok {
            let msg = format!(
                "{}: a rolling upgrade needs {needed} spare host(s) matching {braced}; {available} available{}",
                key(obj),
                match misfits.as_str() {
                    "" => String::new(),
                    m => format!(" (another Kubernetes on {m})"),
                }
            );
            if !self.findings.iter().any(|f| f.message == msg) {
                self.findings.push(Finding::error(msg));
            }
        }
        Some(check)
    }

    pub(super) fn plan_topology(
        &mut self,
        topology: &Value,
        cp_version: &KubeVersion,
        path: &[KubeVersion],
    ) {
        let cluster = self.objs.cluster;
        let mut from = cp_version.clone();
        for to in path {
            let mut spare = vec![];
            if let Some(cp) = self.objs.control_plane
                && json::kind(cp) == "KubeadmControlPlane"
                && let Some(c) = self.spare_check(
                    cp,
                    control_plane_infra_ref(cp),
                    to,
                    usize::from(kcp_max_surge(cp) > 0),
                    |n, a, sel| {
                        vec![format!(
                            "free or register {} more host(s) matching {sel}",
                            n - a
                        )]
                    },
                )
            {
                spare.push(c);
            }
            for md in self.objs.machine_deployments {
                if let Some(c) = self.md_spare(md, deployment_infra_ref(md), to) {
                    spare.push(c);
                }
            }
            let path_ptr = "/spec/topology/version";
            let patch = ObjectPatch::cluster_field(
                cluster,
                path_ptr,
                (json!(str_at(topology, &["version"])), json!(to.to_string())),
                json!([{"op": "add", "path": path_ptr, "value": to.to_string()}]),
                Some(json!({"spec": {"topology": {"version": to.to_string()}}})),
            );
            self.steps.push(UpgradeStep {
                number: 0,
                role: StepRole::Topology,
                target: key(cluster),
                from_version: from.clone(),
                to_version: to.clone(),
                via: vec![],
                stepped_by_reconciler: false,
                clone_templates: vec![],
                patch,
                spare_hosts: spare,
                wait_for: format!(
                    "Cluster {}: control plane, then every MachineDeployment at {}, ready and up to date",
                    json::name(cluster),
                    to
                ),
            });
            from = to.clone();
        }
    }
}

/// A Kamaji control plane's reconciler walks the minors itself: the step records the newest
/// patch of each minor it passes (its own included) on the KamajiControlPlane
/// ([`PATCH_RELEASES_ANNOTATION`]) so it steps through the ones the plan shows, whatever table
/// it ships with.
fn record_patch_releases(cp: &Value, patch: &mut ObjectPatch, recorded: &[String]) {
    if recorded.is_empty() {
        return;
    }
    let value = recorded.join(",");
    let has_annotations = at(cp, &["metadata", "annotations"]).is_some_and(Value::is_object);
    let op = if has_annotations {
        let path = format!(
            "/metadata/annotations/{}",
            PATCH_RELEASES_ANNOTATION
                .replace('~', "~0")
                .replace('/', "~1")
        );
        json!({"op": "add", "path": path, "value": value})
    } else {
        json!({"op": "add", "path": "/metadata/annotations",
            "value": {PATCH_RELEASES_ANNOTATION: value}})
    };
    patch.changes.push(FieldChange {
        path: format!("/metadata/annotations/{PATCH_RELEASES_ANNOTATION}"),
        from: json!(str_at(
            cp,
            &["metadata", "annotations", PATCH_RELEASES_ANNOTATION]
        )),
        to: json!(value),
    });
    if let Some(ops) = patch.json_patch.as_array_mut() {
        ops.push(op);
    }
    if let Some(m) = &mut patch.merge_patch {
        m["metadata"]["annotations"][PATCH_RELEASES_ANNOTATION] = json!(value);
    }
}
