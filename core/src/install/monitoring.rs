//! What `kubectl kamaji install` adds when the Prometheus operator's CRDs are served: a
//! PodMonitor that scrapes kamaji-reconciler's `/metrics`, a PrometheusRule with the alerts its
//! metrics are for, and a Grafana dashboard as a ConfigMap (the `grafana_dashboard` label is
//! what the Grafana Helm chart's dashboard sidecar loads). The rule groups and every panel's
//! query pass `promtool check rules`, and the alerts `promtool test rules`
//! (`plugins/kamaji/tests/alerts.rs`).

use serde_json::{Value, json};

use crate::labels::{OWNER_LABEL, RECONCILER as NAME, provider_labels as labels};

/// The Prometheus operator's API group and the kind whose presence turns this on.
pub const MONITORING_GROUP: &str = "monitoring.coreos.com";
pub const RULE_KIND: &str = "PrometheusRule";

/// The Grafana dashboard ConfigMap's name and the label its sidecar selects.
pub const DASHBOARD_CONFIGMAP: &str = "kamaji-reconciler-dashboard";
pub const DASHBOARD_LABEL: (&str, &str) = ("grafana_dashboard", "1");

/// The alerting rule groups (a Prometheus rules file's `groups`, the PrometheusRule's spec).
pub fn rule_groups() -> Value {
    let alert = |name: &str, expr: &str, for_: &str, severity: &str, summary: &str, fix: &str| {
        json!({"alert": name, "expr": expr, "for": for_,
               "labels": {"severity": severity},
               "annotations": {"summary": summary, "description": fix}})
    };
    json!([{
        "name": "kamaji-reconciler",
        "rules": [
            alert(
                "KamajiTenantCertificatesExpiring",
                "max by (namespace, tenant_control_plane) (kamaji_reconciler_tenant_certificates_expiring) > 0",
                "1h",
                "warning",
                "{{ $labels.namespace }}/{{ $labels.tenant_control_plane }}: {{ $value }} certificates expire within kamaji-reconciler's --cert-warn",
                "kubectl kamaji certificates {{ $labels.tenant_control_plane }} -n {{ $labels.namespace }} lists them; Kamaji renews the labelled ones a day before they expire, the CAs only when asked: kubectl kamaji certificates rotate {{ $labels.tenant_control_plane }} -n {{ $labels.namespace }} --certificates=... --verify",
            ),
            alert(
                "KamajiTenantCertificateExpiresWithinAWeek",
                "min by (namespace, tenant_control_plane) (kamaji_reconciler_tenant_certificate_expiry_timestamp_seconds) - time() < 7 * 86400",
                "10m",
                "critical",
                "{{ $labels.namespace }}/{{ $labels.tenant_control_plane }}: a certificate expires within a week",
                "kubectl kamaji certificates {{ $labels.tenant_control_plane }} -n {{ $labels.namespace }} names it and what renews it; rotate it with --verify",
            ),
            alert(
                "KamajiErrorFinding",
                "max by (check) (kamaji_reconciler_findings{severity=\"Error\"}) > 0",
                "15m",
                "critical",
                "{{ $value }} findings of the check {{ $labels.check }} at severity Error",
                "kubectl capi doctor names each with the command that fixes it",
            ),
            alert(
                "KamajiReconcilerScanStale",
                "time() - max(kamaji_reconciler_certificate_scan_timestamp_seconds) > 3600",
                "10m",
                "warning",
                "kamaji-reconciler has not scanned the tenants' certificates for over an hour",
                "kubectl kamaji doctor; kubectl logs -n <its namespace> deploy/kamaji-reconciler",
            ),
            alert(
                "KamajiTenantBackupFailing",
                "max by (namespace, tenantbackup) (kamaji_reconciler_tenant_backup_failing) > 0",
                "5m",
                "warning",
                "TenantBackup {{ $labels.namespace }}/{{ $labels.tenantbackup }}: its last run failed",
                "kubectl describe tenantbackup {{ $labels.tenantbackup }} -n {{ $labels.namespace }} says why (condition LastBackupSucceeded and the Events); a failed run is not retried before the next scheduled time; kubectl kamaji backup takes one now",
            ),
            alert(
                "KamajiTenantBackupStale",
                "(time() - max by (namespace, tenantbackup) (kamaji_reconciler_tenant_backup_last_success_timestamp_seconds) > 2 * max by (namespace, tenantbackup) (kamaji_reconciler_tenant_backup_interval_seconds)) and max by (namespace, tenantbackup) (kamaji_reconciler_tenant_backup_last_success_timestamp_seconds) > 0",
                "10m",
                "critical",
                "TenantBackup {{ $labels.namespace }}/{{ $labels.tenantbackup }}: no backup written for two scheduled intervals",
                "kubectl get tenantbackup {{ $labels.tenantbackup }} -n {{ $labels.namespace }} -o yaml shows the last success and the last run; kubectl kamaji backup takes one now",
            ),
            alert(
                "KamajiReconcilerNoLeader",
                "max(kamaji_reconciler_leader) < 1",
                "5m",
                "critical",
                "no kamaji-reconciler replica holds the leader Lease: KamajiControlPlanes are not reconciled",
                "kubectl kamaji doctor; kubectl get lease -A | grep kamaji-reconciler",
            ),
        ]
    }])
}

/// Each dashboard panel's title and query, in order.
pub const PANELS: [(&str, &str); 8] = [
    (
        "Days until each tenant's first certificate expires",
        "(min by (namespace, tenant_control_plane) (kamaji_reconciler_tenant_certificate_expiry_timestamp_seconds) - time()) / 86400",
    ),
    (
        "Certificates expiring within --cert-warn",
        "sum by (namespace, tenant_control_plane) (kamaji_reconciler_tenant_certificates_expiring)",
    ),
    (
        "Findings by check and severity",
        "sum by (check, severity) (kamaji_reconciler_findings)",
    ),
    (
        "Reconciles per second",
        "sum(rate(kamaji_reconciler_reconciles_total[5m]))",
    ),
    (
        "Failed reconciles per second",
        "sum(rate(kamaji_reconciler_reconcile_errors_total[5m]))",
    ),
    (
        "API requests per second",
        "sum(rate(kamaji_reconciler_api_requests_total[5m]))",
    ),
    ("Leader", "max(kamaji_reconciler_leader)"),
    (
        "Hours since each TenantBackup's last backup",
        "(time() - max by (namespace, tenantbackup) (kamaji_reconciler_tenant_backup_last_success_timestamp_seconds)) / 3600",
    ),
];

/// The Grafana dashboard (JSON model, schema 39): one time series or table panel per [`PANELS`]
/// entry, on the datasource the dashboard's `datasource` variable picks.
pub fn dashboard() -> Value {
    let panels: Vec<Value> = PANELS
        .iter()
        .enumerate()
        .map(|(i, (title, expr))| {
            let id = i64::try_from(i).unwrap_or(0);
            json!({
                "id": id + 1,
                "type": if i < 2 { "table" } else { "timeseries" },
                "title": title,
                "datasource": {"type": "prometheus", "uid": "${datasource}"},
                "gridPos": {"h": 8, "w": 12, "x": (id % 2) * 12, "y": (id / 2) * 8},
                "targets": [{"refId": "A", "expr": expr, "instant": i < 2}]
            })
        })
        .collect();
    json!({
        "title": "kamaji-reconciler",
        "uid": "kamaji-reconciler",
        "schemaVersion": 39,
        "tags": ["kamaji", "cluster-api"],
        "time": {"from": "now-24h", "to": "now"},
        "templating": {"list": [{"name": "datasource", "type": "datasource", "query": "prometheus"}]},
        "panels": panels
    })
}

/// The objects: the PodMonitor, the PrometheusRule and the dashboard's ConfigMap.
pub fn manifests(namespace: &str) -> Vec<Value> {
    let pod_monitor = json!({
        "apiVersion": "monitoring.coreos.com/v1", "kind": "PodMonitor",
        "metadata": {"name": NAME, "namespace": namespace, "labels": labels()},
        "spec": {
            "selector": {"matchLabels": {OWNER_LABEL.0: OWNER_LABEL.1}},
            "podMetricsEndpoints": [{"port": "http", "path": "/metrics", "interval": "30s"}]
        }
    });
    let rule = json!({
        "apiVersion": "monitoring.coreos.com/v1", "kind": RULE_KIND,
        "metadata": {"name": NAME, "namespace": namespace, "labels": labels()},
        "spec": {"groups": rule_groups()}
    });
    let mut cm_labels = labels();
    cm_labels[DASHBOARD_LABEL.0] = json!(DASHBOARD_LABEL.1);
    let dashboard = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": DASHBOARD_CONFIGMAP, "namespace": namespace, "labels": cm_labels},
        "data": {"kamaji-reconciler.json": dashboard().to_string()}
    });
    vec![pod_monitor, rule, dashboard]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_alert_has_a_severity_a_summary_and_a_fix() {
        let groups = rule_groups();
        let rules = groups[0]["rules"].as_array().unwrap();
        assert_eq!(rules.len(), 7);
        for r in rules {
            assert!(
                ["warning", "critical"].contains(&r["labels"]["severity"].as_str().unwrap()),
                "{r}"
            );
            assert!(
                r["annotations"]["summary"]
                    .as_str()
                    .is_some_and(|s| !s.is_empty())
            );
            assert!(
                r["annotations"]["description"]
                    .as_str()
                    .is_some_and(|s| !s.is_empty())
            );
            assert!(
                r["expr"].as_str().unwrap().contains("kamaji_reconciler_"),
                "{r}"
            );
        }
    }

    #[test]
    fn the_monitor_scrapes_the_deployments_pods_on_their_metrics_port() {
        let m = manifests("ns");
        let kinds: Vec<&str> = m.iter().map(|o| o["kind"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["PodMonitor", "PrometheusRule", "ConfigMap"]);
        let d = super::super::deployment("img", "ns", 1);
        assert_eq!(
            m[0]["spec"]["selector"]["matchLabels"],
            d["spec"]["template"]["metadata"]["labels"]
        );
        assert_eq!(
            d["spec"]["template"]["spec"]["containers"][0]["ports"][0]["name"],
            "http"
        );
        let board: Value =
            serde_json::from_str(m[2]["data"]["kamaji-reconciler.json"].as_str().unwrap()).unwrap();
        assert_eq!(board["panels"].as_array().unwrap().len(), PANELS.len());
        assert_eq!(m[2]["metadata"]["labels"]["grafana_dashboard"], "1");
    }
}
