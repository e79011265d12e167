//! One kubectl JSONPath expression (`.items[*].metadata.name`, `$.kind`, `@`) translated to
//! RFC 9535 for `jsonpath-rust`, and evaluated with kubectl's bounds checks.

use jsonpath_rust::JsonPath;
use serde_json::Value;

use super::{JsonPathError, err};

/// Where an expression starts: the document (`$`) or the current object (`.`, `@`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Base {
    Root,
    Current,
}

/// An expression translated to RFC 9535 (`$…`), evaluated on the root or the current object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Expr {
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
pub(super) fn translate(expr: &str) -> Result<Expr, JsonPathError> {
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

pub(super) fn query<'a>(
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
