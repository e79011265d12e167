use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::*;
use crate::plan::ClusterObjects;
use crate::plan::upgrade::plan_upgrade;

fn cluster() -> Value {
    json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
           "metadata": {"name": "c", "namespace": "n"},
           "spec": {"controlPlaneRef": {"kind": "KubeadmControlPlane", "name": "c-cp"}}})
}

fn kcp(spec: &str, status: &str, ready: i64) -> Value {
    json!({"apiVersion": "controlplane.cluster.x-k8s.io/v1beta2", "kind": "KubeadmControlPlane",
           "metadata": {"name": "c-cp", "namespace": "n"},
           "spec": {"replicas": 1, "version": spec},
           "status": {"version": status, "replicas": 1, "readyReplicas": ready, "upToDateReplicas": ready}})
}

fn md(name: &str, spec: &str, status: &str) -> Value {
    json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment",
           "metadata": {"name": name, "namespace": "n", "labels": {"cluster.x-k8s.io/cluster-name": "c"}},
           "spec": {"replicas": 1, "template": {"spec": {"version": spec}}},
           "status": {"replicas": 1, "readyReplicas": 1, "upToDateReplicas": 1,
                      "versions": [{"version": status, "replicas": 1}]}})
}

struct World {
    cluster: Value,
    cp: Value,
    mds: Vec<Value>,
}

impl World {
    fn objs(&self) -> ClusterObjects<'_> {
        ClusterObjects {
            cluster: &self.cluster,
            control_plane: Some(&self.cp),
            machine_deployments: &self.mds,
            infra_templates: &[],
        }
    }
    fn observed(&self) -> Observed {
        Observed::from_objects(&self.objs(), &[])
    }
    fn decide(&self, plan: &[PlannedStep], current: &[u32], max: u32) -> Decision {
        self.decide_done(plan, current, &[], max)
    }
    fn decide_done(
        &self,
        plan: &[PlannedStep],
        current: &[u32],
        done: &[u32],
        max: u32,
    ) -> Decision {
        let observed = self.observed();
        let mut objects = BTreeMap::new();
        objects.insert("KubeadmControlPlane/c-cp".to_string(), &self.cp);
        for m in &self.mds {
            objects.insert(format!("MachineDeployment/{}", crate::json::name(m)), m);
        }
        decide(
            plan,
            current,
            done,
            &Observation {
                observed: &observed,
                objects,
            },
            max,
        )
    }
}

/// An upgrade to v1.35.2 whose command recorded v1.33.4 and v1.34.0 as the newest patches
/// (they replace the shipped table's): the world at v1.33.4 walks v1.34.0, v1.35.2.
fn to_v1_35_2() -> ClusterUpgradeSpec {
    ClusterUpgradeSpec {
        version: "v1.35.2".into(),
        patch_releases: vec!["v1.33.4".into(), "v1.34.0".into()],
        ..Default::default()
    }
}

fn two_minor_world() -> (World, Vec<PlannedStep>) {
    let w = World {
        cluster: cluster(),
        cp: kcp("v1.33.4", "v1.33.4", 1),
        mds: vec![md("a", "v1.33.4", "v1.33.4"), md("b", "v1.33.4", "v1.33.4")],
    };
    let spec = to_v1_35_2();
    let plan = plan_upgrade(&w.objs(), &request(&spec).unwrap(), &w.observed(), None).unwrap();
    (w, planned_steps(&plan))
}

#[test]
fn the_status_plan_is_the_cli_plan() {
    let (w, steps) = two_minor_world();
    let spec = to_v1_35_2();
    let plan = plan_upgrade(&w.objs(), &request(&spec).unwrap(), &w.observed(), None).unwrap();
    assert_eq!(steps.len(), plan.steps.len());
    for (a, b) in steps.iter().zip(&plan.steps) {
        assert_eq!(
            (
                a.number as usize,
                a.target.as_str(),
                a.from_version.as_str(),
                a.to_version.as_str()
            ),
            (
                b.number,
                b.target.as_str(),
                b.from_version.to_string().as_str(),
                b.to_version.to_string().as_str()
            )
        );
    }
    let st = fresh_status(&plan, Some(1), None, "n/c", "2026-12-01T00:00:00Z");
    assert_eq!(st.phase.as_deref(), Some(phase::PENDING));
    assert_eq!(st.path, ["v1.34.0", "v1.35.2"]);
    assert_eq!(st.steps.len(), 6);
}

#[test]
fn control_plane_first_then_workers_in_parallel_batches() {
    let (mut w, plan) = two_minor_world();
    // Nothing runs yet: the control plane's first minor starts alone.
    assert_eq!(w.decide(&plan, &[], 2), Decision::Start(vec![1]));
    // Its patch has not landed: a restarted reconciler sends it again rather than moving on.
    assert_eq!(w.decide(&plan, &[1], 2), Decision::Apply(vec![1]));
    // Landed, rolling: wait.
    w.cp = kcp("v1.34.0", "v1.33.4", 1);
    assert!(matches!(w.decide(&plan, &[1], 2), Decision::Wait(m) if m.contains("step 1")));
    // Reached everywhere: done.
    w.cp = kcp("v1.34.0", "v1.34.0", 1);
    assert_eq!(w.decide(&plan, &[1], 2), Decision::Completed(vec![1]));
    // Then both MachineDeployments of that minor at once (max 2), one at a time with max 1.
    assert_eq!(w.decide(&plan, &[], 2), Decision::Start(vec![2, 3]));
    assert_eq!(w.decide(&plan, &[], 1), Decision::Start(vec![2]));
    // The workers reached v1.34.0: the control plane's second minor, never a worker first.
    w.mds = vec![md("a", "v1.34.0", "v1.34.0"), md("b", "v1.34.0", "v1.34.0")];
    assert_eq!(w.decide(&plan, &[], 2), Decision::Start(vec![4]));
    w.cp = kcp("v1.35.2", "v1.35.2", 1);
    w.mds = vec![md("a", "v1.35.2", "v1.35.2"), md("b", "v1.35.2", "v1.35.2")];
    assert_eq!(w.decide(&plan, &[], 2), Decision::Finished);
}

#[test]
fn a_step_not_ready_is_not_complete() {
    let (mut w, plan) = two_minor_world();
    w.cp = kcp("v1.34.0", "v1.34.0", 0);
    assert!(matches!(w.decide(&plan, &[1], 1), Decision::Wait(m) if m.contains("0 ready")));
}

#[test]
fn status_bookkeeping_and_history() {
    let (w, _) = two_minor_world();
    let spec = to_v1_35_2();
    let plan = plan_upgrade(&w.objs(), &request(&spec).unwrap(), &w.observed(), None).unwrap();
    let now = "2026-12-01T00:00:00Z";
    let mut st = fresh_status(&plan, Some(1), None, "n/c", now);
    st.start(&[1], now);
    assert_eq!(st.current_steps, [1]);
    assert_eq!(st.steps[0].phase, "Running");
    st.complete(&[1], "2026-12-01T00:01:00Z");
    assert!(st.current_steps.is_empty());
    assert_eq!(st.progress.as_deref(), Some("1/6"));
    st.complete_all(now);
    st.finish(phase::SUCCEEDED, "Upgraded", "done", now);
    let ready = st.conditions.iter().find(|c| c.type_ == "Ready").unwrap();
    assert_eq!(ready.status, "True");
    // A new generation keeps the finished one as history, bounded.
    let mut next = fresh_status(&plan, Some(2), Some(&st), "n/c", now);
    assert_eq!(next.history.len(), 1);
    assert_eq!(next.history[0].phase, phase::SUCCEEDED);
    assert_eq!(next.history[0].version, "v1.35.2");
    for g in 3..30 {
        next = fresh_status(&plan, Some(g), Some(&next), "n/c", now);
    }
    assert_eq!(next.history.len(), MAX_HISTORY);
}

#[test]
fn a_blocked_plan_fails_with_the_preflight_reason() {
    let (w, _) = two_minor_world();
    let spec = to_v1_35_2();
    let mut plan = plan_upgrade(&w.objs(), &request(&spec).unwrap(), &w.observed(), None).unwrap();
    plan.blocked = true;
    plan.findings
        .push(crate::plan::Finding::error("short of hosts"));
    let st = fresh_status(&plan, Some(1), None, "n/c", "2026-12-01T00:00:00Z");
    assert_eq!(st.phase.as_deref(), Some(phase::FAILED));
    assert!(st.message.as_deref().unwrap().contains("short of hosts"));
}

#[test]
fn applied_reads_every_value_of_the_patch() {
    let (_, plan) = two_minor_world();
    let s = &plan[0];
    assert!(!applied(s, Some(&kcp("v1.33.4", "v1.33.4", 1))));
    assert!(applied(s, Some(&kcp("v1.34.0", "v1.33.4", 1))));
    assert!(!applied(s, None));
}

/// An empty MachineDeployment has nothing to observe: once its step is recorded done, the
/// next step starts (it used to start the same step again, forever).
#[test]
fn an_empty_deployment_step_completes_once() {
    let mut w = World {
        cluster: cluster(),
        cp: kcp("v1.34.0", "v1.34.0", 1),
        mds: vec![md("a", "v1.33.4", "v1.33.4")],
    };
    w.mds[0]["spec"]["replicas"] = json!(0);
    w.mds[0]["status"] = json!({"replicas": 0});
    let spec = to_v1_35_2();
    let plan = plan_upgrade(&w.objs(), &request(&spec).unwrap(), &w.observed(), None).unwrap();
    let steps = planned_steps(&plan);
    assert_eq!(w.decide_done(&steps, &[], &[], 1), Decision::Start(vec![1]));
    w.mds[0]["spec"]["template"]["spec"]["version"] = json!("v1.34.0");
    assert_eq!(
        w.decide_done(&steps, &[1], &[], 1),
        Decision::Completed(vec![1])
    );
    assert_eq!(
        w.decide_done(&steps, &[], &[1], 1),
        Decision::Start(vec![2])
    );
}

#[test]
fn input_the_reconciler_cannot_act_on_is_reported_once_per_generation() {
    let now = "2026-12-01T00:00:00Z";
    let mut st = ClusterUpgradeStatus::default();
    let m = "Cluster ns/c not found";
    assert!(st.cannot_act(Some(1), super::super::reason::CLUSTER_NOT_FOUND, m, now));
    assert_eq!(st.phase.as_deref(), Some(phase::PENDING));
    assert_eq!(st.message.as_deref(), Some(m));
    let ready = st.conditions.iter().find(|c| c.type_ == "Ready").unwrap();
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "ClusterNotFound")
    );
    assert_eq!(ready.observed_generation, Some(1));
    assert!(
        st.plan.is_empty(),
        "nothing is planned for a missing cluster"
    );
    assert!(
        !st.cannot_act(Some(1), "ClusterNotFound", m, now),
        "no news"
    );
    assert!(
        st.cannot_act(Some(2), "ClusterNotFound", m, now),
        "a new generation"
    );
    // Under way: the phase and the plan stay, so the upgrade resumes once the input is fixed.
    let (w, _) = two_minor_world();
    let spec = to_v1_35_2();
    let plan = plan_upgrade(&w.objs(), &request(&spec).unwrap(), &w.observed(), None).unwrap();
    let mut st = fresh_status(&plan, Some(1), None, "n/c", now);
    st.start(&[1], now);
    st.cannot_act(Some(1), "ClusterNotFound", m, now);
    assert_eq!(st.phase.as_deref(), Some(phase::RUNNING));
    assert_eq!(st.current_steps, [1]);
}
