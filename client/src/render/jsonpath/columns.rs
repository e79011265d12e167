//! `-o custom-columns`: headers and the JSONPath of each column, a row per object.

use serde_json::Value;

use super::expr::{Expr, query, translate};
use super::{JsonPathError, MAX_TEMPLATE_BYTES, err, value_text};

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
