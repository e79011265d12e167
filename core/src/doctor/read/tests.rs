//! The reads against a cluster held in memory: which LISTs are made, and what a refusal does.

use std::cell::RefCell;
use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::*;

/// Why the fake cluster did not answer.
#[derive(Debug, Clone, PartialEq)]
enum Fail {
    Forbidden(String, Option<String>),
    Down,
}

/// A cluster in memory: objects by (plural, namespace), the LISTs refused, and what was asked.
#[derive(Default)]
struct Fake {
    objects: BTreeMap<(String, Option<String>), Vec<Value>>,
    refused: Vec<(String, Option<String>)>,
    down: Vec<String>,
    asked: RefCell<Vec<String>>,
}

impl Fake {
    fn with(mut self, plural: &str, ns: Option<&str>, objs: Vec<Value>) -> Fake {
        self.objects
            .insert((plural.into(), ns.map(str::to_string)), objs);
        self
    }
    fn refusing(mut self, plural: &str, ns: Option<&str>) -> Fake {
        self.refused.push((plural.into(), ns.map(str::to_string)));
        self
    }
}

impl FleetSource for Fake {
    type Error = Fail;

    fn refusal(&self, error: &Fail) -> Option<Refusal> {
        match error {
            Fail::Forbidden(resource, namespace) => Some(Refusal {
                verb: "list".into(),
                resource: resource.clone(),
                namespace: namespace.clone(),
            }),
            Fail::Down => None,
        }
    }

    fn served(&self, group: &str, kind: &str) -> Option<ApiResource> {
        let plural = format!("{}s", kind.to_lowercase());
        (group != OPS_GROUP).then(|| ApiResource {
            group: group.into(),
            version: "v1".into(),
            api_version: format!("{group}/v1"),
            kind: kind.into(),
            plural,
        })
    }

    async fn list_as<T, U, F>(&self, list: &ListRequest<'_>, keep: F) -> Result<Vec<U>, Fail>
    where
        T: DeserializeOwned + 'static,
        U: Send + 'static,
        F: Fn(T) -> U + Send + 'static,
    {
        let plural = list.resource.plural.clone();
        let ns = list.namespace.map(str::to_string);
        self.asked
            .borrow_mut()
            .push(format!("{plural} {}", list.namespace.unwrap_or("-A")));
        if self.down.contains(&plural) {
            return Err(Fail::Down);
        }
        if self.refused.contains(&(plural.clone(), ns.clone())) {
            return Err(Fail::Forbidden(plural, ns));
        }
        let objs = self.objects.get(&(plural, ns)).cloned().unwrap_or_default();
        Ok(objs
            .into_iter()
            .map(|o| keep(serde_json::from_value(o).unwrap()))
            .collect())
    }

    async fn get(&self, _: &ApiResource, _: &str, _: &str) -> Result<Option<Value>, Fail> {
        Ok(None)
    }

    async fn all<'a>(&'a self, reads: Vec<Pending<'a, Fail>>, _: usize) -> Result<(), Fail> {
        for r in reads {
            r.await?;
        }
        Ok(())
    }
}

/// Runs a future of the fake, which never waits.
fn run<T>(f: impl Future<Output = T>) -> T {
    let mut f = std::pin::pin!(f);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match f.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(v) => v,
        std::task::Poll::Pending => panic!("the fake cluster never waits"),
    }
}

fn obj(ns: &str, name: &str, labels: Value) -> Value {
    json!({"metadata": {"name": name, "namespace": ns, "labels": labels}})
}

fn everything() -> Ask<'static> {
    Ask {
        certificates: true,
        bootstrap_kubeconfigs: true,
        datastores: true,
        crds: true,
        ..Ask::default()
    }
}

#[test]
fn secrets_refused_everywhere_are_read_where_the_fleet_is() {
    let secret = obj("team-a", "c1-kubeconfig", json!({CLUSTER_NAME_LABEL: "c1"}));
    let fake = Fake::default()
        .with("clusters", None, vec![obj("team-a", "c1", json!({}))])
        .with(
            "tenantcontrolplanes",
            None,
            vec![obj("team-b", "t1", json!({}))],
        )
        .with("secrets", Some("team-a"), vec![secret])
        .refusing("secrets", None)
        .refusing("secrets", Some("team-b"));
    let fleet = run(fleet(&fake, &everything())).unwrap();
    assert_eq!(
        fleet.cluster_secrets,
        BTreeMap::from([(("team-a".to_string(), "c1".to_string()), 1)])
    );
    let unread: Vec<(FleetRead, &str, bool)> = fleet
        .unread
        .iter()
        .map(|u| (u.input, u.missing.as_str(), u.partial))
        .collect();
    assert_eq!(
        unread,
        vec![
            (FleetRead::ClusterSecrets, "list secrets -A", true),
            (FleetRead::Certificates, "list secrets -n team-b", true),
        ]
    );
    let asked = fake.asked.borrow();
    for want in ["secrets team-a", "secrets team-b", "leases -A"] {
        assert!(asked.iter().any(|a| a == want), "{want} in {asked:?}");
    }
}

#[test]
fn a_refused_kind_is_not_read_a_kind_not_served_reads_as_none() {
    let fake = Fake::default()
        .refusing("machines", Some("team-a"))
        .refusing("tenantcontrolplanes", None)
        .refusing("secrets", None);
    let namespaces = vec!["team-a".to_string()];
    let ask = Ask {
        namespaces: &namespaces,
        ..everything()
    };
    let fleet = run(fleet(&fake, &ask)).unwrap();
    assert_eq!(
        fleet.unread,
        vec![Unread {
            input: FleetRead::Machines,
            missing: "list machines -n team-a".into(),
            partial: false,
        }]
    );
    // Our API (not served by the fake) is not asked for.
    assert!(!fake.asked.borrow().iter().any(|a| a.contains("upgrades")));
    // In every namespace: Secrets refused, and where Kamaji's are is not known either.
    let everywhere = run(super::fleet(&fake, &everything())).unwrap();
    let certificates: Vec<&Unread> = everywhere
        .unread
        .iter()
        .filter(|u| u.input == FleetRead::Certificates)
        .collect();
    assert_eq!(certificates.len(), 1);
    assert_eq!(
        (certificates[0].missing.as_str(), certificates[0].partial),
        ("list secrets -A", false)
    );
}

#[test]
fn another_error_ends_the_read_and_a_source_without_refusals_fails_on_them() {
    let mut fake = Fake::default();
    fake.down.push("leases".into());
    assert_eq!(run(fleet(&fake, &everything())).unwrap_err(), Fail::Down);
    // The reconciler's findings scan: fewer reads.
    let fake = Fake::default();
    run(fleet(&fake, &Ask::default())).unwrap();
    let asked = fake.asked.borrow();
    for left_out in [
        "bootstrapkubeconfigs",
        "datastores",
        "customresourcedefinitions",
    ] {
        assert!(!asked.iter().any(|a| a.starts_with(left_out)), "{asked:?}");
    }
}

#[test]
fn host_events_are_read_when_asked_and_a_refusal_is_noted() {
    let failure = json!({"involvedObject": {"kind": "ByoHost", "namespace": "hosts", "name": "h1"},
        "type": "Warning", "reason": "BootstrapK8sNodeFailed", "message": "k8s Node Bootstrap failed",
        "count": 3, "firstTimestamp": "2026-12-01T11:00:00Z", "lastTimestamp": "2026-12-01T11:59:00Z"});
    let reset = json!({"involvedObject": {"kind": "ByoHost", "namespace": "hosts", "name": "h1"},
        "type": "Normal", "reason": "ResetK8sNodeSucceeded", "count": 3});
    let fake = Fake::default().with("events", None, vec![failure, reset]);
    let ask = Ask {
        host_events: true,
        ..everything()
    };
    let f = run(fleet(&fake, &ask)).unwrap();
    assert_eq!(
        f.host_events
            .iter()
            .map(|e| (e.host.as_str(), e.reason.as_str(), e.count))
            .collect::<Vec<_>>(),
        vec![("h1", "BootstrapK8sNodeFailed", 3)]
    );
    // Not asked (the reconciler's scan): not read.
    let fake = Fake::default().with("events", None, vec![]);
    run(fleet(&fake, &everything())).unwrap();
    assert!(!fake.asked.borrow().iter().any(|a| a.starts_with("events")));
    // Refused: noted, the rest read.
    let fake = Fake::default().refusing("events", Some("team-a"));
    let namespaces = vec!["team-a".to_string()];
    let ask = Ask {
        namespaces: &namespaces,
        host_events: true,
        ..everything()
    };
    let f = run(fleet(&fake, &ask)).unwrap();
    assert_eq!(
        f.unread,
        vec![Unread {
            input: FleetRead::HostEvents,
            missing: "list events -n team-a".into(),
            partial: false,
        }]
    );
}
