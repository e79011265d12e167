//! Adaptation of a TenantControlPlane `spec` (newest Kamaji shape) to the TenantControlPlane CRD
//! actually installed, which may be an older Kamaji's.

use serde_json::{Value, json};

/// The outcome of fitting a spec to the installed TenantControlPlane CRD.
#[derive(Debug, Clone, PartialEq)]
pub enum Fit {
    /// The spec fits (after benign renames and drops).
    Ok(Value),
    /// The installed CRD cannot hold what the KamajiControlPlane asks for.
    Unsupported(Vec<String>),
}

/// Values whose loss changes nothing: empty or false values, and Kamaji's own defaults.
fn benign_drop(path: &str, v: &Value) -> bool {
    match v {
        Value::Null | Value::Bool(false) => true,
        Value::String(s) if s.is_empty() => true,
        Value::Array(a) if a.is_empty() => true,
        Value::Object(o) if o.is_empty() => true,
        Value::Number(n) if n.as_i64() == Some(0) && path.ends_with(".replicas") => true,
        Value::String(s) => {
            (path == "spec.networkProfile.clusterDomain" && s == "cluster.local")
                || (path.ends_with("konnectivity.agent.mode") && s == "DaemonSet")
        }
        _ => false,
    }
}

fn prune(v: &mut Value, schema: &Value, path: &str, dropped: &mut Vec<String>) {
    if schema["x-kubernetes-preserve-unknown-fields"] == json!(true)
        && schema.get("properties").is_none()
    {
        return;
    }
    match v {
        Value::Object(m) => {
            if let Some(props) = schema["properties"].as_object() {
                let keys: Vec<String> = m.keys().cloned().collect();
                for k in keys {
                    let p = format!("{path}.{k}");
                    match props.get(&k) {
                        Some(s) => {
                            if let Some(c) = m.get_mut(&k) {
                                prune(c, s, &p, dropped);
                            }
                        }
                        None => {
                            if schema["x-kubernetes-preserve-unknown-fields"] == json!(true) {
                                continue;
                            }
                            if let Some(val) = m.remove(&k)
                                && !benign_drop(&p, &val)
                            {
                                dropped.push(p);
                            }
                        }
                    }
                }
            } else if schema["additionalProperties"].is_object() {
                for (k, c) in m.iter_mut() {
                    prune(
                        c,
                        &schema["additionalProperties"],
                        &format!("{path}.{k}"),
                        dropped,
                    );
                }
            }
        }
        Value::Array(a) if schema["items"].is_object() => {
            for c in a.iter_mut() {
                prune(c, &schema["items"], &format!("{path}[]"), dropped);
            }
        }
        _ => {}
    }
}

/// Fits a TenantControlPlane `spec` (newest shape) to the `spec` schema of the installed CRD:
/// plural CIDR lists become the singular fields when only those exist (a second CIDR, i.e. dual
/// stack, cannot be expressed there and is reported), and fields the CRD does not know are
/// reported unless dropping them changes nothing.
pub fn fit_to_schema(spec: &Value, spec_schema: &Value) -> Fit {
    let mut v = spec.clone();
    let mut unsupported = Vec::new();
    let np_schema = &spec_schema["properties"]["networkProfile"]["properties"];
    for (plural, singular) in [("serviceCidrs", "serviceCidr"), ("podCidrs", "podCidr")] {
        if np_schema.get(plural).is_some() {
            continue;
        }
        let Some(list) = v["networkProfile"]
            .as_object_mut()
            .and_then(|np| np.remove(plural))
        else {
            continue;
        };
        let items: Vec<Value> = list.as_array().cloned().unwrap_or_default();
        if items.len() > 1 {
            unsupported.push(format!(
                "spec.networkProfile.{plural} ({} CIDR blocks, dual stack; the installed Kamaji has only {singular})",
                items.len()
            ));
        }
        if let Some(first) = items.into_iter().next()
            && np_schema.get(singular).is_some()
        {
            v["networkProfile"][singular] = first;
        }
    }
    prune(&mut v, spec_schema, "spec", &mut unsupported);
    if unsupported.is_empty() {
        Fit::Ok(v)
    } else {
        Fit::Unsupported(unsupported)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn old_schema() -> Value {
        json!({"properties": {
            "networkProfile": {"properties": {"serviceCidr": {"type": "string"}, "podCidr": {"type": "string"}, "port": {"type": "integer"}}},
            "kubernetes": {"properties": {"version": {"type": "string"}, "kubelet": {"properties": {"cgroupfs": {"type": "string"}}}}},
            "controlPlane": {"properties": {"service": {"properties": {"serviceType": {"type": "string"}}}}}
        }})
    }

    #[test]
    fn fit_maps_single_stack_to_singular_fields() {
        let spec = json!({"networkProfile": {"serviceCidrs": ["10.96.0.0/16"], "podCidrs": ["10.244.0.0/16"], "clusterDomain": "cluster.local"},
            "kubernetes": {"version": "v1.33.0", "kubelet": {"cgroupfs": "systemd"}},
            "controlPlane": {"service": {"serviceType": "ClusterIP"}}});
        let Fit::Ok(v) = fit_to_schema(&spec, &old_schema()) else {
            panic!("should fit")
        };
        assert_eq!(
            v["networkProfile"],
            json!({"serviceCidr": "10.96.0.0/16", "podCidr": "10.244.0.0/16"})
        );
    }

    #[test]
    fn fit_reports_dual_stack_and_unknown_fields_on_an_old_crd() {
        let spec = json!({"networkProfile": {"serviceCidrs": ["10.96.0.0/16", "fd00::/108"]},
            "kubernetes": {"version": "v1.33.0", "kubelet": {}},
            "controlPlane": {"service": {"serviceType": "ClusterIP"}, "gateway": {"hostname": "x"}}});
        let Fit::Unsupported(why) = fit_to_schema(&spec, &old_schema()) else {
            panic!("should not fit")
        };
        assert!(why[0].contains("dual stack"), "{why:?}");
        assert!(
            why.contains(&"spec.controlPlane.gateway".to_string()),
            "{why:?}"
        );
        // A CRD with the plural fields keeps both CIDRs.
        let mut new = old_schema();
        new["properties"]["networkProfile"]["properties"]["serviceCidrs"] =
            json!({"type": "array", "items": {"type": "string"}});
        new["properties"]["controlPlane"]["properties"]["gateway"] =
            json!({"type": "object", "properties": {"hostname": {"type": "string"}}});
        let Fit::Ok(v) = fit_to_schema(&spec, &new) else {
            panic!("should fit")
        };
        assert_eq!(
            v["networkProfile"]["serviceCidrs"],
            json!(["10.96.0.0/16", "fd00::/108"])
        );
    }
}
