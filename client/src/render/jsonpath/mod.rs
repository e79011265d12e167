//! kubectl's JSONPath templates (`-o jsonpath=…`) and custom columns (`-o custom-columns=…`),
//! evaluated over the JSON a verb prints with `-o json`.
//!
//! kubectl's dialect (`k8s.io/client-go/util/jsonpath`, documented at
//! kubernetes.io/docs/reference/kubectl/jsonpath) is not RFC 9535: expressions sit in `{…}`
//! inside literal text, start with `.` (relative to the current object), may use
//! `{range …}…{end}`, quoted literals such as `{"\n"}`, and `\.` for a dot inside a key
//! (`{.metadata.labels.app\.kubernetes\.io/name}`). We parse the template ourselves and
//! translate each expression to RFC 9535 for `jsonpath-rust` (already in the tree through
//! kube's exec-credential support), writing every member name in bracket form so keys with
//! `-` or `/` work as they do in kubectl.
//!
//! As `kubectl get` does by default (`--allow-missing-template-keys=true`), a path that
//! matches nothing prints nothing; several matches print separated by a space; strings print
//! as they are and other values as compact JSON.

use serde_json::Value;

mod columns;
mod expr;
pub use columns::{Columns, MAX_COLUMNS};
use expr::{Expr, query, translate};

/// The longest template accepted (kubectl has no limit; ours keeps a typo'd file argument from
/// being parsed as a template).
pub const MAX_TEMPLATE_BYTES: usize = 64 * 1024;
/// How deep `{range}` blocks may nest.
pub const MAX_RANGE_DEPTH: usize = 16;
/// The most text a template may produce (a `range` inside a `range` multiplies).
pub const MAX_OUTPUT_BYTES: usize = 64 * 1024 * 1024;

/// What is wrong with a template or column list, as one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct JsonPathError(pub String);

fn err(msg: impl Into<String>) -> JsonPathError {
    JsonPathError(msg.into())
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Node {
    Text(String),
    Expr(Expr),
    Range(Expr, Vec<Node>),
}

/// A parsed kubectl JSONPath template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    nodes: Vec<Node>,
}

/// The text of the next `{…}` action starting after the `{` at `start`, and the index after
/// its `}`. Braces inside quotes and brackets (filters) do not end the action.
fn action_end(src: &str, start: usize) -> Result<(String, usize), JsonPathError> {
    let mut quote: Option<char> = None;
    let mut brackets = 0usize;
    let mut escaped = false;
    for (i, c) in src[start..].char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        match (quote, c) {
            (_, '\\') => escaped = true,
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '[') => brackets = brackets.saturating_add(1),
            (None, ']') => brackets = brackets.saturating_sub(1),
            (None, '}') if brackets == 0 => {
                return Ok((src[start..start + i].to_string(), start + i + 1));
            }
            _ => {}
        }
    }
    Err(err(format!(
        "unclosed action in JSONPath template at byte {}",
        start.saturating_sub(1)
    )))
}

/// `"\n"` or `'x'`: the literal's text, with kubectl's escapes.
fn literal(action: &str) -> Option<String> {
    let a = action.trim();
    let q = a.chars().next()?;
    if !(q == '"' || q == '\'') || a.len() < 2 || !a.ends_with(q) {
        return None;
    }
    let inner = &a[1..a.len() - 1];
    let mut out = String::new();
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some(o) => out.push(o),
            None => out.push('\\'),
        }
    }
    Some(out)
}

impl Template {
    /// Parses a kubectl JSONPath template (`{.items[*].metadata.name}`, with `range`/`end`).
    pub fn parse(src: &str) -> Result<Template, JsonPathError> {
        if src.len() > MAX_TEMPLATE_BYTES {
            return Err(err(format!(
                "the JSONPath template is {} bytes; the limit is {MAX_TEMPLATE_BYTES}",
                src.len()
            )));
        }
        // Stack of open ranges: (expression, nodes so far); the bottom is the template.
        let mut stack: Vec<(Option<Expr>, Vec<Node>)> = vec![(None, Vec::new())];
        let mut i = 0;
        while i < src.len() {
            let Some(open) = src[i..].find('{').map(|o| i + o) else {
                top(&mut stack).push(Node::Text(src[i..].to_string()));
                break;
            };
            if open > i {
                top(&mut stack).push(Node::Text(src[i..open].to_string()));
            }
            let (action, next) = action_end(src, open + 1)?;
            i = next;
            let a = action.trim();
            if let Some(text) = literal(a) {
                top(&mut stack).push(Node::Text(text));
            } else if a == "end" {
                if stack.len() < 2 {
                    return Err(err("{end} without a {range} in the JSONPath template"));
                }
                let (expr, body) = stack.pop().unwrap_or((None, Vec::new()));
                if let Some(expr) = expr {
                    top(&mut stack).push(Node::Range(expr, body));
                }
            } else if let Some(r) = a
                .strip_prefix("range ")
                .or_else(|| a.strip_prefix("range\t"))
            {
                if stack.len() > MAX_RANGE_DEPTH {
                    return Err(err(format!(
                        "{{range}} nests deeper than {MAX_RANGE_DEPTH} in the JSONPath template"
                    )));
                }
                stack.push((Some(translate(r)?), Vec::new()));
            } else if a.is_empty() {
                return Err(err("empty {} in the JSONPath template"));
            } else {
                top(&mut stack).push(Node::Expr(translate(a)?));
            }
        }
        if stack.len() != 1 {
            return Err(err("{range} without {end} in the JSONPath template"));
        }
        let nodes = stack.pop().map(|(_, n)| n).unwrap_or_default();
        Ok(Template { nodes })
    }

    /// The template's text for `root`.
    pub fn render(&self, root: &Value) -> Result<String, JsonPathError> {
        let mut out = String::new();
        render_nodes(&self.nodes, root, root, &mut out)?;
        Ok(out)
    }
}

fn top(stack: &mut [(Option<Expr>, Vec<Node>)]) -> &mut Vec<Node> {
    // The stack always holds the template itself at the bottom (parse starts with it and
    // `end` pops only above it), so `last_mut` is `Some`; the fallback is unreachable.
    match stack.last_mut() {
        Some((_, nodes)) => nodes,
        None => unreachable!("the template frame is never popped"),
    }
}

/// How kubectl prints one value: strings bare, the rest as compact JSON.
pub fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn push_bounded(out: &mut String, s: &str) -> Result<(), JsonPathError> {
    if out.len().saturating_add(s.len()) > MAX_OUTPUT_BYTES {
        return Err(err(format!(
            "the JSONPath template produces more than {} MiB",
            MAX_OUTPUT_BYTES / (1024 * 1024)
        )));
    }
    out.push_str(s);
    Ok(())
}

fn render_nodes(
    nodes: &[Node],
    root: &Value,
    current: &Value,
    out: &mut String,
) -> Result<(), JsonPathError> {
    for n in nodes {
        match n {
            Node::Text(t) => push_bounded(out, t)?,
            Node::Expr(e) => {
                let vals: Vec<String> = query(e, root, current)?
                    .into_iter()
                    .map(value_text)
                    .collect();
                push_bounded(out, &vals.join(" "))?;
            }
            Node::Range(e, body) => {
                let vals = query(e, root, current)?;
                // `{range .items}` over one array iterates its elements, as kubectl does.
                let items: Vec<&Value> = match vals.as_slice() {
                    [Value::Array(a)] => a.iter().collect(),
                    _ => vals,
                };
                for item in items {
                    render_nodes(body, root, item, out)?;
                }
            }
        }
    }
    Ok(())
}
#[cfg(test)]
mod tests;
