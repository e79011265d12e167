//! The patches of a version change: the version field, and when the machine template names
//! the old version, a clone of the template under a new name (templates are immutable) with the
//! reference repointed in the same patch.

use serde_json::{Map, Value, json};

use super::{CloneTemplates, Planner, TemplateClone, key};
use crate::json::{self, at, str_at};
use crate::plan::scale::find_template;
use crate::plan::{FieldChange, Finding, ObjectPatch};
use crate::version::KubeVersion;

/// Replace every form of `from` (`v1.30.4`, `1.30.4`, `v1-30-4`, `1-30-4`, `v1_30_4`) with `to` in a string.
fn replace_version(s: &str, from: &KubeVersion, to: &KubeVersion) -> String {
    let f = format!("{}.{}.{}", from.major, from.minor, from.patch);
    let t = format!("{}.{}.{}", to.major, to.minor, to.patch);
    let mut out = s.replace(&f, &t);
    for sep in ['-', '_'] {
        let fs = f.replace('.', &sep.to_string());
        let ts = t.replace('.', &sep.to_string());
        out = out.replace(&fs, &ts);
    }
    out
}

fn replace_in(
    v: &Value,
    from: &KubeVersion,
    to: &KubeVersion,
    path: &str,
    changes: &mut Vec<FieldChange>,
) -> Value {
    match v {
        Value::String(s) => {
            let r = replace_version(s, from, to);
            if &r != s {
                changes.push(FieldChange {
                    path: path.to_string(),
                    from: json!(s),
                    to: json!(r),
                });
            }
            Value::String(r)
        }
        Value::Array(a) => Value::Array(
            a.iter()
                .enumerate()
                .map(|(i, x)| replace_in(x, from, to, &format!("{path}/{i}"), changes))
                .collect(),
        ),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, x)| {
                    (
                        k.clone(),
                        replace_in(
                            x,
                            from,
                            to,
                            &format!("{path}/{}", k.replace('~', "~0").replace('/', "~1")),
                            changes,
                        ),
                    )
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Clone a template for a version change, or `None` when it does not need to change.
pub(crate) fn clone_template(
    template: &Value,
    from: &KubeVersion,
    to: &KubeVersion,
    mode: CloneTemplates,
) -> Option<TemplateClone> {
    if mode == CloneTemplates::Never {
        return None;
    }
    let mut changes = Vec::new();
    let spec = replace_in(
        template.get("spec").unwrap_or(&Value::Null),
        from,
        to,
        "/spec",
        &mut changes,
    );
    if changes.is_empty() && mode == CloneTemplates::Auto {
        return None;
    }
    let source_name = json::name(template).to_string();
    let mut new_name = replace_version(&source_name, from, to);
    if new_name == source_name {
        new_name = format!("{source_name}-v{}-{}-{}", to.major, to.minor, to.patch);
    }
    if new_name.len() > 253 {
        new_name.truncate(253);
    }
    let mut meta = Map::new();
    meta.insert("name".into(), json!(new_name));
    if let Some(ns) = str_at(template, &["metadata", "namespace"]) {
        meta.insert("namespace".into(), json!(ns));
    }
    if let Some(l) = at(template, &["metadata", "labels"]) {
        meta.insert("labels".into(), l.clone());
    }
    if let Some(Value::Object(a)) = at(template, &["metadata", "annotations"]) {
        let kept: Map<String, Value> = a
            .iter()
            .filter(|(k, _)| k.as_str() != "kubectl.kubernetes.io/last-applied-configuration")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if !kept.is_empty() {
            meta.insert("annotations".into(), Value::Object(kept));
        }
    }
    if let Some(o) = at(template, &["metadata", "ownerReferences"]) {
        meta.insert("ownerReferences".into(), o.clone());
    }
    let object = json!({
        "apiVersion": template.get("apiVersion").cloned().unwrap_or(Value::Null),
        "kind": json::kind(template),
        "metadata": meta,
        "spec": spec,
    });
    Some(TemplateClone {
        kind: json::kind(template).to_string(),
        source_name,
        new_name,
        object,
        changes,
    })
}

/// Build a nested merge patch from a JSON pointer and value.
fn merge_at(pointer: &str, value: Value) -> Value {
    pointer
        .trim_start_matches('/')
        .split('/')
        .rev()
        .fold(value, |acc, k| json!({ k: acc }))
}

fn merge_patches(a: Value, b: Value) -> Value {
    match (a, b) {
        (Value::Object(mut x), Value::Object(y)) => {
            for (k, v) in y {
                let merged = match x.remove(&k) {
                    Some(old) => merge_patches(old, v),
                    None => v,
                };
                x.insert(k, merged);
            }
            Value::Object(x)
        }
        (_, b) => b,
    }
}

impl Planner<'_, '_> {
    /// The template `obj_key` uses now: its clone when an earlier step cloned it.
    pub(super) fn template_for(&self, obj_key: &str, kind: &str, name: &str) -> Option<Value> {
        let current = self
            .templates
            .get(obj_key)
            .cloned()
            .unwrap_or_else(|| name.to_string());
        self.clones
            .get(&current)
            .cloned()
            .or_else(|| find_template(self.objs, kind, &current).cloned())
    }

    /// The patch and clone for a version change on `obj` (control plane or MachineDeployment).
    pub(super) fn version_patch(
        &mut self,
        obj: &Value,
        version_path: &str,
        infra: Option<(&str, &str)>,
        infra_name_path: &str,
        from: &KubeVersion,
        to: &KubeVersion,
    ) -> (ObjectPatch, Vec<TemplateClone>) {
        let k = key(obj);
        let mut changes = vec![FieldChange {
            path: version_path.to_string(),
            from: json!(str_at(
                obj,
                &version_path
                    .trim_start_matches('/')
                    .split('/')
                    .collect::<Vec<_>>()
            )),
            to: json!(to.to_string()),
        }];
        let mut ops = vec![json!({"op": "add", "path": version_path, "value": to.to_string()})];
        let mut merge = merge_at(version_path, json!(to.to_string()));
        let mut clones = vec![];
        if let Some((kind, name)) = infra {
            match self.template_for(&k, kind, name) {
                Some(tpl) => {
                    if let Some(c) = clone_template(&tpl, from, to, self.req.clone_templates) {
                        changes.push(FieldChange {
                            path: infra_name_path.to_string(),
                            from: json!(json::name(&tpl)),
                            to: json!(c.new_name),
                        });
                        ops.push(
                            json!({"op": "add", "path": infra_name_path, "value": c.new_name}),
                        );
                        merge = merge_patches(merge, merge_at(infra_name_path, json!(c.new_name)));
                        self.templates.insert(k.clone(), c.new_name.clone());
                        self.clones.insert(c.new_name.clone(), c.object.clone());
                        clones.push(c);
                    }
                }
                None if self.req.clone_templates != CloneTemplates::Never => {
                    let msg = format!(
                        "{k}: {kind} {name} was not found; cannot tell whether it must be cloned for the new version"
                    );
                    if !self.findings.iter().any(|f| f.message == msg) {
                        self.findings.push(Finding::warning(msg));
                    }
                }
                None => {}
            }
        }
        let patch = ObjectPatch {
            api_version: str_at(obj, &["apiVersion"]).unwrap_or("").to_string(),
            kind: json::kind(obj).to_string(),
            namespace: json::namespace(obj).to_string(),
            name: json::name(obj).to_string(),
            subresource: None,
            changes,
            json_patch: Value::Array(ops),
            merge_patch: Some(merge),
        };
        (patch, clones)
    }
}
