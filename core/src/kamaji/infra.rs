//! The infrastructure-cluster patch table (pure: decides the patch, the controller applies it):
//! each provider of `kubectl kamaji create`'s registry ([`all`]) says what is done to its kind
//! ([`InfraProvider::endpoint_patch`](super::create::InfraProvider::endpoint_patch)), then the
//! kinds of providers `create` does not build.

use std::sync::LazyLock;

use serde_json::{Value, json};

use super::create::all;
use super::endpoint::{Endpoint, EndpointPatch};

/// The kinds of providers `kubectl kamaji create` does not build, which the reconciler serves
/// too (group `infrastructure.cluster.x-k8s.io`).
const OTHER_PROVIDERS: &[(&str, EndpointPatch)] = &[
    ("AzureCluster", EndpointPatch::Endpoint),
    ("HetznerCluster", EndpointPatch::Endpoint),
    ("IonosCloudCluster", EndpointPatch::Endpoint),
    ("NutanixCluster", EndpointPatch::EndpointAndReady),
    ("PacketCluster", EndpointPatch::EndpointAndReady),
    ("MetalStackCluster", EndpointPatch::CheckOnly),
    ("ProxmoxCluster", EndpointPatch::CheckOrSetWhenEmpty),
    ("TinkerbellCluster", EndpointPatch::CheckOrSetWhenEmpty),
    ("VSphereCluster", EndpointPatch::CheckOrSetWhenEmpty),
    ("OscCluster", EndpointPatch::Generic),
];

/// The built-in table: the registry's providers (their cluster kind and endpoint patch), then
/// [`OTHER_PROVIDERS`].
pub(crate) static TABLE: LazyLock<Vec<(&'static str, EndpointPatch)>> = LazyLock::new(|| {
    all()
        .iter()
        .filter_map(|p| Some((p.cluster_kind()?, p.endpoint_patch()?)))
        .chain(OTHER_PROVIDERS.iter().copied())
        .collect()
});

/// The action for `kind`, from the table or the extra kinds.
pub fn action_for(kind: &str, extra: &[String]) -> Option<EndpointPatch> {
    TABLE
        .iter()
        .find(|(k, _)| *k == kind)
        .map(|(_, a)| *a)
        .or_else(|| {
            extra
                .iter()
                .any(|k| k == kind)
                .then_some(EndpointPatch::Generic)
        })
}

/// The decision for one infrastructure object.
#[derive(Clone, Debug, PartialEq)]
pub enum Plan {
    /// Nothing to change.
    UpToDate,
    /// Merge-patch `spec` with this value; `status_ready` also sets `status.ready`.
    Patch { spec: Value, status_ready: bool },
    /// The object disagrees with Kamaji and this provider may not change it.
    Mismatch(String),
}

/// The port BYOH v0.5.0 writes into a ByoCluster's `spec.controlPlaneEndpoint` when it reads
/// none (controllers/infrastructure/byocluster_controller.go, `DefaultAPIEndpointPort`).
pub const BYOH_DEFAULT_PORT: i64 = 6443;

/// Whether the Cluster's `spec.controlPlaneEndpoint` is the one Cluster API copied from a
/// ByoCluster that BYOH had just put back on its default port: `ep`'s host with
/// [`BYOH_DEFAULT_PORT`], while the control plane serves `ep` on another port.
///
/// BYOH v0.5.0 fills a zero port with 6443 on every reconcile of a ByoCluster it read without
/// one, with a merge patch computed from that read; when it read the ByoCluster just before the
/// reconciler wrote `host:port` there, its patch lands after and leaves `host:6443`. Cluster API
/// copies the infrastructure's endpoint into the Cluster as soon as it has a host (v1.14,
/// core/reconcilers/cluster/cluster_controller_phases.go) and never again, so the reconciler's
/// own correction of the ByoCluster comes too late for the Cluster (our CI saw a class cluster
/// on port 41683 end up on `127.0.0.1:6443`). Nothing else writes that exact mix.
pub fn byoh_default_port_copied(cluster: &Value, ep: &Endpoint) -> bool {
    let infra_kind = cluster["spec"]["infrastructureRef"]["kind"].as_str();
    let (host, port) = current_endpoint(cluster);
    infra_kind == Some("ByoCluster")
        && host == ep.host
        && port == BYOH_DEFAULT_PORT
        && i64::from(ep.port) != BYOH_DEFAULT_PORT
}

fn current_endpoint(obj: &Value) -> (String, i64) {
    let ep = &obj["spec"]["controlPlaneEndpoint"];
    (
        ep["host"].as_str().unwrap_or_default().to_string(),
        ep["port"].as_i64().unwrap_or_default(),
    )
}

/// Decides what to do with infrastructure object `obj` for endpoint `ep`.
pub fn plan(action: EndpointPatch, kind: &str, obj: &Value, ep: &Endpoint) -> Plan {
    let (host, port) = current_endpoint(obj);
    let same = host == ep.host && port == i64::from(ep.port);
    let set_ep = json!({"controlPlaneEndpoint": {"host": ep.host, "port": ep.port}});
    match action {
        EndpointPatch::Endpoint | EndpointPatch::Generic => {
            if same {
                Plan::UpToDate
            } else {
                Plan::Patch {
                    spec: set_ep,
                    status_ready: false,
                }
            }
        }
        EndpointPatch::EndpointAndReady => {
            let ready = obj["status"]["ready"] == json!(true);
            if same && ready {
                Plan::UpToDate
            } else {
                Plan::Patch {
                    spec: if same { json!({}) } else { set_ep },
                    status_ready: !ready,
                }
            }
        }
        EndpointPatch::OpenStack => {
            let ip = obj["spec"]["apiServerFixedIP"].as_str().unwrap_or_default();
            let p = obj["spec"]["apiServerPort"].as_i64().unwrap_or_default();
            if ip == ep.host && p == i64::from(ep.port) {
                Plan::UpToDate
            } else {
                Plan::Patch {
                    spec: json!({"apiServerFixedIP": ep.host, "apiServerPort": ep.port}),
                    status_ready: false,
                }
            }
        }
        EndpointPatch::CheckOnly | EndpointPatch::CheckOrSetWhenEmpty => {
            if same {
                Plan::UpToDate
            } else if host.is_empty() && action == EndpointPatch::CheckOrSetWhenEmpty {
                Plan::Patch {
                    spec: set_ep,
                    status_ready: false,
                }
            } else if host.is_empty() {
                Plan::Mismatch(format!(
                    "{kind} has no spec.controlPlaneEndpoint, and this provider does not set it for {kind}: set it to {ep} (pre-assign the address with the KamajiControlPlane's network.serviceAddress)"
                ))
            } else {
                Plan::Mismatch(format!(
                    "{kind} spec.controlPlaneEndpoint is {host}:{port} but the TenantControlPlane serves {ep}: make them equal (pre-assign the address with the KamajiControlPlane's network.serviceAddress, or fix the {kind})"
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ep() -> Endpoint {
        Endpoint {
            host: "10.0.0.5".into(),
            port: 6443,
        }
    }

    /// CI: a class cluster on port 41683 ended up on `127.0.0.1:6443`, BYOH's default port.
    #[test]
    fn a_cluster_on_byohs_default_port_is_recognised() {
        let ep = Endpoint {
            host: "127.0.0.1".into(),
            port: 41683,
        };
        let cluster = |kind: &str, port: i64| {
            json!({"spec": {"infrastructureRef": {"kind": kind, "name": "c1"},
                "controlPlaneEndpoint": {"host": "127.0.0.1", "port": port}}})
        };
        assert!(byoh_default_port_copied(&cluster("ByoCluster", 6443), &ep));
        assert!(!byoh_default_port_copied(
            &cluster("ByoCluster", 41683),
            &ep
        ));
        assert!(!byoh_default_port_copied(&cluster("AWSCluster", 6443), &ep));
        // Served on 6443 itself: nothing to repair.
        let on_default = Endpoint {
            host: "127.0.0.1".into(),
            port: 6443,
        };
        assert!(!byoh_default_port_copied(
            &cluster("ByoCluster", 6443),
            &on_default
        ));
        // Another host: a user's choice, not BYOH's mix.
        let mut other = cluster("ByoCluster", 6443);
        other["spec"]["controlPlaneEndpoint"]["host"] = json!("10.0.0.9");
        assert!(!byoh_default_port_copied(&other, &ep));
    }

    #[test]
    fn table_lookup_and_extra_kinds() {
        assert_eq!(
            action_for("OpenStackCluster", &[]),
            Some(EndpointPatch::OpenStack)
        );
        assert_eq!(action_for("DockerCluster", &[]), None);
        assert_eq!(
            action_for("DockerCluster", &["DockerCluster".into()]),
            Some(EndpointPatch::Generic)
        );
    }

    #[test]
    fn openstack_sets_fixed_ip_and_port_once() {
        let o = json!({"spec": {"apiServerFixedIP": ""}});
        assert_eq!(
            plan(EndpointPatch::OpenStack, "OpenStackCluster", &o, &ep()),
            Plan::Patch {
                spec: json!({"apiServerFixedIP": "10.0.0.5", "apiServerPort": 6443}),
                status_ready: false
            }
        );
        let o = json!({"spec": {"apiServerFixedIP": "10.0.0.5", "apiServerPort": 6443}});
        assert_eq!(
            plan(EndpointPatch::OpenStack, "OpenStackCluster", &o, &ep()),
            Plan::UpToDate
        );
    }

    #[test]
    fn kubevirt_gets_endpoint_and_ready() {
        let o = json!({"spec": {}});
        assert!(matches!(
            plan(
                EndpointPatch::EndpointAndReady,
                "KubevirtCluster",
                &o,
                &ep()
            ),
            Plan::Patch {
                status_ready: true,
                ..
            }
        ));
        let o = json!({"spec": {"controlPlaneEndpoint": {"host": "10.0.0.5", "port": 6443}}, "status": {"ready": true}});
        assert_eq!(
            plan(
                EndpointPatch::EndpointAndReady,
                "KubevirtCluster",
                &o,
                &ep()
            ),
            Plan::UpToDate
        );
    }

    #[test]
    fn metal3_is_checked_only() {
        let o = json!({"spec": {"controlPlaneEndpoint": {"host": "10.9.9.9", "port": 6443}}});
        assert!(
            matches!(plan(EndpointPatch::CheckOnly, "Metal3Cluster", &o, &ep()), Plan::Mismatch(m) if m.contains("10.9.9.9:6443"))
        );
        let o = json!({"spec": {"controlPlaneEndpoint": {"host": "10.0.0.5", "port": 6443}}});
        assert_eq!(
            plan(EndpointPatch::CheckOnly, "Metal3Cluster", &o, &ep()),
            Plan::UpToDate
        );
        let o = json!({"spec": {}});
        assert!(matches!(
            plan(
                EndpointPatch::CheckOrSetWhenEmpty,
                "VSphereCluster",
                &o,
                &ep()
            ),
            Plan::Patch { .. }
        ));
    }
}
