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

use jsonpath_rust::JsonPath;
use serde_json::Value;

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

/// Where an expression starts: the document (`$`) or the current object (`.`, `@`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Base {
    Root,
    Current,
}

/// An expression translated to RFC 9535 (`$…`), evaluated on the root or the current object.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Expr {
    base: Base,
    rfc: String,
    /// Its index and slice selectors, checked against the arrays they apply to before the
    /// query runs: RFC 9535 selects nothing out of bounds where kubectl errors.
    arrays: Vec<ArraySel>,
}

/// One `[…]` of indexes and slices (`[2]`, `[-1:]`, `[0:4:2]`, `[0,3]`) and the RFC 9535 path
/// of what it applies to.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ArraySel {
    prefix: String,
    slices: Vec<Slice>,
}

/// One index or slice as kubectl's parser reads it (`parseArray`, client-go
/// `util/jsonpath/parser.go`, v0.36): a bare index `[i]` is the slice `[i:i+1]` with a derived
/// end. The step is checked at parse time and does not change the bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Slice {
    start: Option<i64>,
    end: Option<i64>,
    end_derived: bool,
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

fn quote_member(name: &str) -> String {
    let escaped = name.replace('\\', "\\\\").replace('\'', "\\'");
    format!("['{escaped}']")
}

/// The end of a `[...]` selector starting at `start` (the `[`), quotes respected.
fn bracket_end(s: &[char], start: usize) -> Result<usize, JsonPathError> {
    let mut depth = 0usize;
    let mut quote: Option<char> = None;
    let mut i = start;
    while i < s.len() {
        let c = s[i];
        match quote {
            Some(_) if c == '\\' => i += 1,
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None => match c {
                '"' | '\'' => quote = Some(c),
                '[' => depth += 1,
                ']' => {
                    depth -= 1;
                    if depth == 0 {
                        return Ok(i);
                    }
                }
                _ => {}
            },
        }
        i += 1;
    }
    Err(err("unclosed [ in JSONPath expression"))
}

/// A member name after `.`: up to the next unescaped `.`, `[` or blank, with `\.` meaning a dot.
fn member(s: &[char], mut i: usize) -> (String, usize) {
    let mut name = String::new();
    while i < s.len() {
        match s[i] {
            '\\' if i + 1 < s.len() => {
                name.push(s[i + 1]);
                i += 2;
            }
            '.' | '[' => break,
            c if c.is_whitespace() => break,
            c => {
                name.push(c);
                i += 1;
            }
        }
    }
    (name, i)
}

/// Translates one kubectl expression (`.items[*].metadata.name`, `$.kind`, `@`) to RFC 9535.
fn translate(expr: &str) -> Result<Expr, JsonPathError> {
    let e = expr.trim();
    let (base, rest) = if let Some(r) = e.strip_prefix('$') {
        (Base::Root, r)
    } else if let Some(r) = e.strip_prefix('@') {
        (Base::Current, r)
    } else if e.starts_with('.') || e.starts_with('[') {
        (Base::Current, e)
    } else {
        // kubectl's relaxed form for custom columns: `metadata.name`.
        return translate(&format!(".{e}"));
    };
    let s: Vec<char> = rest.chars().collect();
    let mut out = String::from("$");
    let mut arrays = Vec::new();
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            '.' if s.get(i + 1) == Some(&'.') => {
                out.push_str("..");
                i += 2;
                if s.get(i) == Some(&'[') {
                    continue;
                }
                let (name, next) = member(&s, i);
                out.push_str(&if name == "*" {
                    "*".to_string()
                } else {
                    quote_member(&name)
                });
                i = next;
            }
            '.' => {
                let (name, next) = member(&s, i + 1);
                i = next;
                match name.as_str() {
                    "" => {}
                    "*" => out.push_str("[*]"),
                    n => out.push_str(&quote_member(n)),
                }
            }
            '[' => {
                let end = bracket_end(&s, i)?;
                let inner: String = s[i + 1..end].iter().collect();
                // After `..` the prefix is no path of its own; kubectl's recursive descent
                // is left to the RFC query there.
                if let Some(slices) = array_slices(&inner)?
                    && !out.ends_with("..")
                {
                    arrays.push(ArraySel {
                        prefix: out.clone(),
                        slices,
                    });
                }
                out.push('[');
                out.push_str(&filter(&inner));
                out.push(']');
                i = end + 1;
            }
            c => {
                return Err(err(format!(
                    "unexpected {c:?} in JSONPath expression {expr:?} (paths look like .items[*].metadata.name)"
                )));
            }
        }
    }
    // Validate now, so a bad template fails before any request.
    if let Err(e) = Value::Null.query(&out) {
        return Err(err(format!("invalid JSONPath expression {expr:?}: {e}")));
    }
    Ok(Expr {
        base,
        rfc: out,
        arrays,
    })
}

/// The indexes and slices of a `[…]` selector, `None` when it is something else (`*`, a
/// filter, a quoted key), which the RFC query handles alone. A step of 0 or less is refused
/// here, as kubectl refuses it (`step must be > 0`), since it depends on no data.
fn array_slices(inner: &str) -> Result<Option<Vec<Slice>>, JsonPathError> {
    let t = inner.trim();
    let mut slices = Vec::new();
    for part in t.split(',') {
        let pieces: Vec<&str> = part.trim().split(':').collect();
        let numeric = |p: &str| {
            let digits = p.strip_prefix('-').unwrap_or(p);
            digits.chars().all(|c| c.is_ascii_digit())
        };
        if pieces.len() > 3 || !pieces.iter().all(|p| numeric(p)) {
            return Ok(None);
        }
        let number = |p: &str| -> Result<Option<i64>, JsonPathError> {
            if p.is_empty() {
                return Ok(None);
            }
            p.parse::<i64>()
                .map(Some)
                .map_err(|_| err(format!("array index {p} is not a number")))
        };
        let start = number(pieces[0])?;
        let (end, end_derived) = match pieces.get(1) {
            Some(p) => (number(p)?, false),
            // kubectl: `[i]` ends at i+1.
            None => {
                let next = start
                    .unwrap_or(0)
                    .checked_add(1)
                    .ok_or_else(|| err(format!("array index {} is too large", pieces[0])))?;
                (Some(next), true)
            }
        };
        if let Some(step) = pieces.get(2).map(|p| number(p)).transpose()?.flatten()
            && step <= 0
        {
            return Err(err(format!(
                "step must be > 0 (in [{t}]); a slice is [start:end:step] with a positive step"
            )));
        }
        slices.push(Slice {
            start,
            end,
            end_derived,
        });
    }
    Ok(Some(slices))
}

/// kubectl's bounds check of one index or slice on an array of `len` items (`evalArray`,
/// client-go `util/jsonpath/jsonpath.go`, v0.36): negative positions count from the end, an
/// empty slice passes, anything else must lie inside the array.
fn check_bounds(s: &Slice, len: usize) -> Result<(), JsonPathError> {
    let n = i64::try_from(len).unwrap_or(i64::MAX);
    let mut start = s.start.unwrap_or(0);
    if start < 0 {
        start = start.saturating_add(n);
    }
    let mut end = s.end.unwrap_or(n);
    if end < 0 || (end == 0 && s.end_derived) {
        end = end.saturating_add(n);
    }
    if start == end {
        return Ok(());
    }
    if start < 0 || start >= n {
        return Err(err(format!(
            "array index out of bounds: index {start}, length {len}"
        )));
    }
    if end < 0 || end > n {
        return Err(err(format!(
            "array index out of bounds: index {}, length {len}",
            end.saturating_sub(1)
        )));
    }
    if start > end {
        return Err(err(format!(
            "starting index {start} is greater than ending index {end}"
        )));
    }
    Ok(())
}

/// A member name inside a filter: letters, digits, `_`, `-`, `/` and `\.` (an escaped dot).
fn filter_member(s: &[char], mut i: usize) -> (String, usize) {
    let mut name = String::new();
    while i < s.len() {
        match s[i] {
            '\\' if s.get(i + 1) == Some(&'.') => {
                name.push('.');
                i += 2;
            }
            c if c.is_alphanumeric() || "_-/".contains(c) => {
                name.push(c);
                i += 1;
            }
            _ => break,
        }
    }
    (name, i)
}

/// kubectl filters use `?(@.a == "x")`; RFC 9535 takes the same with the parentheses, but
/// `@.a-b` needs bracket form there too. Rewrite `@.name` paths inside filters.
fn filter(inner: &str) -> String {
    let t = inner.trim();
    if !t.starts_with('?') {
        return t.to_string();
    }
    let s: Vec<char> = t.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    let mut quote: Option<char> = None;
    while i < s.len() {
        let c = s[i];
        if let Some(q) = quote {
            out.push(c);
            if c == q {
                quote = None;
            }
            i += 1;
            continue;
        }
        match c {
            '"' | '\'' => {
                quote = Some(c);
                out.push(c);
                i += 1;
            }
            '@' | '$' => {
                out.push(c);
                i += 1;
                while s.get(i) == Some(&'.') && s.get(i + 1) != Some(&'.') {
                    let (name, next) = filter_member(&s, i + 1);
                    if name.is_empty() {
                        break;
                    }
                    out.push_str(&quote_member(&name));
                    i = next;
                }
            }
            _ => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
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

fn query<'a>(
    e: &Expr,
    root: &'a Value,
    current: &'a Value,
) -> Result<Vec<&'a Value>, JsonPathError> {
    let doc = match e.base {
        Base::Root => root,
        Base::Current => current,
    };
    // kubectl evaluates left to right and stops at the first index outside its array; a
    // missing key or a null before it selects nothing, which kubectl prints as nothing.
    for sel in &e.arrays {
        for v in doc.query(&sel.prefix).unwrap_or_default() {
            let Value::Array(items) = v else { continue };
            for s in &sel.slices {
                check_bounds(s, items.len())?;
            }
        }
    }
    // Expressions were validated at parse time; a failure here can only be a path that
    // does not apply, which kubectl prints as nothing.
    Ok(doc.query(&e.rfc).unwrap_or_default())
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

/// `-o custom-columns=HEADER:.path,…`: the column headers and their expressions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Columns {
    pub headers: Vec<String>,
    exprs: Vec<Expr>,
}

/// The most columns a custom-columns spec may name.
pub const MAX_COLUMNS: usize = 64;

impl Columns {
    /// Parses kubectl's inline form: `NAME:.metadata.name,STATE:.state`.
    pub fn parse(spec: &str) -> Result<Columns, JsonPathError> {
        if spec.len() > MAX_TEMPLATE_BYTES {
            return Err(err("the custom-columns spec is too long"));
        }
        let mut pairs = Vec::new();
        for part in spec.split(',') {
            let Some((h, p)) = part.split_once(':') else {
                return Err(err(format!(
                    "custom-columns {part:?} is not HEADER:JSONPATH (e.g. NAME:.metadata.name)"
                )));
            };
            pairs.push((h.to_string(), p.to_string()));
        }
        Columns::from_pairs(pairs)
    }

    /// Parses kubectl's file form: a line of headers, then a line of paths, whitespace-separated.
    pub fn parse_file(text: &str) -> Result<Columns, JsonPathError> {
        let mut lines = text.lines().filter(|l| !l.trim().is_empty());
        let (Some(h), Some(p)) = (lines.next(), lines.next()) else {
            return Err(err(
                "a custom-columns file holds two lines: the headers, then the JSONPath of each",
            ));
        };
        let headers: Vec<&str> = h.split_whitespace().collect();
        let paths: Vec<&str> = p.split_whitespace().collect();
        if headers.len() != paths.len() {
            return Err(err(format!(
                "the custom-columns file names {} headers and {} paths",
                headers.len(),
                paths.len()
            )));
        }
        Columns::from_pairs(
            headers
                .into_iter()
                .zip(paths)
                .map(|(h, p)| (h.to_string(), p.to_string()))
                .collect(),
        )
    }

    fn from_pairs(pairs: Vec<(String, String)>) -> Result<Columns, JsonPathError> {
        if pairs.len() > MAX_COLUMNS {
            return Err(err(format!("more than {MAX_COLUMNS} custom columns")));
        }
        let mut headers = Vec::new();
        let mut exprs = Vec::new();
        for (h, p) in pairs {
            let p = p.trim();
            let p = p
                .strip_prefix('{')
                .and_then(|x| x.strip_suffix('}'))
                .unwrap_or(p);
            if h.trim().is_empty() || p.is_empty() {
                return Err(err("a custom column needs a header and a JSONPath"));
            }
            headers.push(h.trim().to_string());
            exprs.push(translate(p)?);
        }
        Ok(Columns { headers, exprs })
    }

    /// One row per object: the `items` of a list, else the value itself. A column matching
    /// nothing is `<none>`; several matches are joined with commas, as kubectl prints them. An
    /// index outside its array is an error, as in kubectl.
    pub fn rows(&self, root: &Value) -> Result<Vec<Vec<String>>, JsonPathError> {
        let objects: Vec<&Value> = match root.get("items").and_then(Value::as_array) {
            Some(items) => items.iter().collect(),
            None => vec![root],
        };
        objects
            .into_iter()
            .map(|o| {
                self.exprs
                    .iter()
                    .map(|e| {
                        let vals: Vec<String> =
                            query(e, root, o)?.into_iter().map(value_text).collect();
                        Ok(if vals.is_empty() {
                            "<none>".to_string()
                        } else {
                            vals.join(",")
                        })
                    })
                    .collect()
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn list() -> Value {
        json!({"items": [
            {"metadata": {"name": "a", "labels": {"app.kubernetes.io/name": "x", "tier-1": "db"}}, "state": "Available", "n": 1},
            {"metadata": {"name": "b", "labels": {}}, "state": "Running", "n": 2}
        ]})
    }

    fn render(t: &str) -> String {
        Template::parse(t).unwrap().render(&list()).unwrap()
    }

    #[test]
    fn kubectl_examples() {
        let cases = [
            ("{.items[*].metadata.name}", "a b"),
            (
                "{range .items[*]}{.metadata.name}{\"\\t\"}{.state}{\"\\n\"}{end}",
                "a\tAvailable\nb\tRunning\n",
            ),
            ("names: {.items[0].metadata.name}!", "names: a!"),
            (
                "{.items[*].metadata.labels.app\\.kubernetes\\.io/name}",
                "x",
            ),
            ("{.items[0].metadata.labels.tier-1}", "db"),
            ("{.items[?(@.state==\"Running\")].metadata.name}", "b"),
            ("{.items[*].n}", "1 2"),
            ("{.items[1].metadata}", "{\"labels\":{},\"name\":\"b\"}"),
            ("{..name}", "a b"),
            ("{$.items[-1:].metadata.name}", "b"),
            ("{.nothing.here}", ""),
            ("{range .items}{.n}{end}", "12"),
            ("{range .items[*]}{$.items[0].n}{end}", "11"),
        ];
        for (template, want) in cases {
            assert_eq!(render(template), want, "{template}");
        }
    }

    #[test]
    fn bad_templates_are_one_line_errors() {
        for t in [
            "{.items",
            "{range .items[*]}x",
            "{end}",
            "{}",
            "{.items[}",
            "{.a b}",
        ] {
            let e = Template::parse(t).unwrap_err().to_string();
            assert!(!e.is_empty() && !e.contains('\n'), "{t}: {e}");
        }
        let deep = "{range .a}".repeat(MAX_RANGE_DEPTH + 1);
        assert!(
            Template::parse(&deep)
                .unwrap_err()
                .0
                .contains("nests deeper")
        );
        assert!(Template::parse(&"x".repeat(MAX_TEMPLATE_BYTES + 1)).is_err());
    }

    #[test]
    fn output_is_bounded() {
        let big = json!({"items": vec![json!({"s": "x".repeat(1024 * 1024)}); 70]});
        let t = Template::parse("{range .items[*]}{.s}{end}").unwrap();
        assert!(t.render(&big).unwrap_err().0.contains("MiB"));
    }

    #[test]
    fn custom_columns() {
        let c =
            Columns::parse("NAME:.metadata.name,STATE:state,L:{.metadata.labels.tier-1}").unwrap();
        assert_eq!(c.headers, ["NAME", "STATE", "L"]);
        assert_eq!(
            c.rows(&list()).unwrap(),
            vec![vec!["a", "Available", "db"], vec!["b", "Running", "<none>"]]
        );
        let f = Columns::parse_file("NAME   N\n.metadata.name   .n\n").unwrap();
        assert_eq!(f.rows(&list()).unwrap()[1], vec!["b", "2"]);
        assert!(Columns::parse("NAME").is_err());
        assert!(Columns::parse(":.a").is_err());
        assert!(Columns::parse_file("A B\n.a\n").is_err());
        let one = Columns::parse("K:.kind").unwrap();
        assert_eq!(one.rows(&json!({"kind": "X"})).unwrap(), vec![vec!["X"]]);
    }

    /// Issue 24: kubectl errors on an index outside its array and on a step of 0; RFC 9535
    /// selects nothing there, and we printed nothing with exit 0.
    #[test]
    fn indexes_outside_the_array_error_as_kubectl_does() {
        let e = |t: &str| Template::parse(t).unwrap().render(&list()).unwrap_err().0;
        assert_eq!(
            e("{.items[-99999999]}"),
            "array index out of bounds: index -99999997, length 2"
        );
        assert_eq!(
            e("{.items[5].metadata.name}"),
            "array index out of bounds: index 5, length 2"
        );
        assert_eq!(
            e("{.items[0:5]}"),
            "array index out of bounds: index 4, length 2"
        );
        assert_eq!(
            e("{.items[1:0]}"),
            "starting index 1 is greater than ending index 0"
        );
        assert_eq!(
            e("{range .items[0,7]}{.n}{end}"),
            "array index out of bounds: index 7, length 2"
        );
        let empty = Template::parse("{.items[0].metadata.name}").unwrap();
        assert_eq!(
            empty.render(&json!({"items": []})).unwrap_err().0,
            "array index out of bounds: index 0, length 0"
        );
        // What kubectl prints quietly stays quiet: empty slices, missing keys, negatives
        // inside the array.
        assert_eq!(render("{.items[1:1]}"), "");
        assert_eq!(render("{.nothing[3]}"), "");
        assert_eq!(render("{.items[-2].metadata.name}"), "a");
        assert_eq!(render("{.items[0:2:1].n}"), "1 2");
        for t in ["{.items[0:2:0]}", "{.items[::-1]}"] {
            let e = Template::parse(t).unwrap_err().0;
            assert!(e.starts_with("step must be > 0"), "{t}: {e}");
        }
        assert!(
            Template::parse("{.items[99999999999999999999]}")
                .unwrap_err()
                .0
                .contains("is not a number")
        );
    }

    #[test]
    fn custom_columns_check_indexes_as_kubectl_does() {
        let c = Columns::parse("FIRST:$.items[7].n").unwrap();
        assert_eq!(
            c.rows(&list()).unwrap_err().0,
            "array index out of bounds: index 7, length 2"
        );
        let c = Columns::parse("FIRST:$.items[-1].n").unwrap();
        assert_eq!(c.rows(&list()).unwrap(), vec![vec!["2"], vec!["2"]]);
    }
}
