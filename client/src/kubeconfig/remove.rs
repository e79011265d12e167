//! A context taken out of the user's kubeconfig (`delete`), with its cluster and user when
//! nothing else uses them, and only when it is what a merge added.

use std::path::Path;

use serde_json::Value;

use super::file::{FileLock, read_writable, replace_file};
use super::parse;
use crate::error::Error;

/// Removes `context` from a kubeconfig document, with its cluster and user when no other context
/// uses them. Returns whether it was there and whether it was the current context.
pub fn remove_context(doc: &mut Value, context: &str) -> (bool, bool) {
    let Some(contexts) = doc.get_mut("contexts").and_then(Value::as_array_mut) else {
        return (false, false);
    };
    let Some(i) = contexts.iter().position(|c| c["name"] == context) else {
        return (false, false);
    };
    let removed = contexts.remove(i);
    let used = |key: &str, name: &Value, contexts: &[Value]| {
        contexts.iter().any(|c| &c["context"][key] == name)
    };
    let remaining = contexts.clone();
    for (list, key) in [("clusters", "cluster"), ("users", "user")] {
        let name = removed["context"][key].clone();
        if name.is_null() || used(key, &name, &remaining) {
            continue;
        }
        if let Some(items) = doc.get_mut(list).and_then(Value::as_array_mut) {
            items.retain(|x| x["name"] != name);
        }
    }
    let was_current = doc["current-context"] == context;
    if was_current && let Some(m) = doc.as_object_mut() {
        m.insert("current-context".into(), Value::String(String::new()));
    }
    (true, was_current)
}

/// What [`remove_context_from_file`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContextRemoval {
    /// The file or the context does not exist.
    Absent,
    /// The context points at another server, or holds other credentials: someone else's, kept.
    NotOurs,
    Removed {
        was_current: bool,
    },
}

/// The server of `context`'s cluster in `doc`.
fn context_server<'a>(doc: &'a Value, context: &str) -> Option<&'a str> {
    let contexts = doc["contexts"].as_array()?;
    let ctx = contexts.iter().find(|c| c["name"] == context)?;
    let cluster = &ctx["context"]["cluster"];
    doc["clusters"]
        .as_array()?
        .iter()
        .find(|c| c["name"] == *cluster)?["cluster"]["server"]
        .as_str()
}

/// What a merge added for a cluster, to recognise it when it is removed: the API servers, and
/// the user entries (credentials) when they are known (empty: the server alone decides).
#[derive(Clone, Debug, Default)]
pub struct Added {
    pub servers: Vec<String>,
    pub users: Vec<Value>,
}

/// The user entry (`user:` body) of `context` in `doc`.
fn context_user<'a>(doc: &'a Value, context: &str) -> Option<&'a Value> {
    let ctx = doc["contexts"]
        .as_array()?
        .iter()
        .find(|c| c["name"] == context)?;
    let user = &ctx["context"]["user"];
    doc["users"]
        .as_array()?
        .iter()
        .find(|u| u["name"] == *user)
        .map(|u| &u["user"])
}

/// Removes `context` from the kubeconfig file at `path` (see [`remove_context`]) when it is what
/// a merge added ([`Added`]: its cluster's server, and its user's credentials when known),
/// replacing the file atomically under kubectl's lock and keeping the previous one as
/// `<file>.bak`.
pub fn remove_context_from_file(
    path: &Path,
    context: &str,
    added: &Added,
) -> Result<ContextRemoval, Error> {
    let servers = &added.servers;
    let target = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    if !target.exists() {
        return Ok(ContextRemoval::Absent);
    }
    let _lock = FileLock::acquire(&target)?;
    let (Some(old), mode) = read_writable(&target)? else {
        return Ok(ContextRemoval::Absent);
    };
    let mut doc = parse(&old, &target.display().to_string())?;
    match context_server(&doc, context) {
        Some(server)
            if !servers
                .iter()
                .any(|s| s.trim_end_matches('/') == server.trim_end_matches('/')) =>
        {
            return Ok(ContextRemoval::NotOurs);
        }
        _ => {}
    }
    if !added.users.is_empty()
        && let Some(user) = context_user(&doc, context)
        && !added.users.contains(user)
    {
        return Ok(ContextRemoval::NotOurs);
    }
    let (found, was_current) = remove_context(&mut doc, context);
    if !found {
        return Ok(ContextRemoval::Absent);
    }
    replace_file(&target, Some(&old), &crate::render::to_yaml(&doc)?, mode)?;
    Ok(ContextRemoval::Removed { was_current })
}
