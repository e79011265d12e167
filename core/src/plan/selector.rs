//! Kubernetes label selectors: the `-l` string syntax and `metav1.LabelSelector` objects
//! (`matchLabels` + `matchExpressions`), with matching as the API server does it.

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;
use serde_json::Value;

/// A malformed selector.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    #[error("invalid label selector {selector:?}: {reason}")]
    Syntax { selector: String, reason: String },
    #[error("invalid label selector: {0}")]
    Object(String),
}

/// How a requirement compares a label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Operator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

/// One requirement: `key in (a,b)`, `key notin (a)`, `key`, `!key`. `key=v` is `In [v]`, `key!=v` is `NotIn [v]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Requirement {
    pub key: String,
    pub operator: Operator,
    pub values: Vec<String>,
}

impl Requirement {
    fn matches(&self, get: &dyn Fn(&str) -> Option<String>) -> bool {
        let value = get(&self.key);
        match self.operator {
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
            Operator::In => value.is_some_and(|v| self.values.contains(&v)),
            // As in Kubernetes: NotIn (and !=) also match objects without the label.
            Operator::NotIn => value.is_none_or(|v| !self.values.contains(&v)),
        }
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.operator, self.values.as_slice()) {
            (Operator::Exists, _) => write!(f, "{}", self.key),
            (Operator::DoesNotExist, _) => write!(f, "!{}", self.key),
            (Operator::In, [one]) => write!(f, "{}={}", self.key, one),
            (Operator::NotIn, [one]) => write!(f, "{}!={}", self.key, one),
            (Operator::In, vals) => write!(f, "{} in ({})", self.key, vals.join(",")),
            (Operator::NotIn, vals) => write!(f, "{} notin ({})", self.key, vals.join(",")),
        }
    }
}

/// A conjunction of requirements; the empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LabelSelector {
    pub requirements: Vec<Requirement>,
}

impl fmt::Display for LabelSelector {
    /// kubectl syntax, e.g. `role=worker,zone in (a,b),!gpu`; the empty selector prints as nothing.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

impl LabelSelector {
    /// Whether the selector has no requirement (matches every object).
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// `{role=worker}` for messages; `{}` (any labels) for the empty selector.
    pub(crate) fn braced(&self) -> String {
        format!("{{{self}}}")
    }

    /// Parse the `kubectl -l` syntax: `a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x)`, `a`, `!a`,
    /// joined by commas.
    pub fn parse(input: &str) -> Result<Self, SelectorError> {
        let err = |reason: &str| SelectorError::Syntax {
            selector: input.to_string(),
            reason: reason.to_string(),
        };
        let mut requirements = Vec::new();
        for part in split_top_level(input).map_err(|r| err(&r))? {
            let part = part.trim();
            if part.is_empty() {
                if input.trim().is_empty() {
                    continue;
                }
                return Err(err(
                    "empty requirement (check for a doubled or trailing comma)",
                ));
            }
            requirements.push(parse_requirement(part).map_err(|r| err(&r))?);
        }
        Ok(LabelSelector { requirements })
    }

    /// Read a `metav1.LabelSelector` object (`matchLabels`, `matchExpressions`). `null` is the empty selector.
    pub(crate) fn from_json(v: &Value) -> Result<Self, SelectorError> {
        let mut requirements = Vec::new();
        if v.is_null() {
            return Ok(LabelSelector { requirements });
        }
        if let Some(ml) = v.get("matchLabels").filter(|m| !m.is_null()) {
            let obj = ml
                .as_object()
                .ok_or_else(|| SelectorError::Object("matchLabels must be a map".into()))?;
            for (k, val) in obj {
                let s = val.as_str().ok_or_else(|| {
                    SelectorError::Object(format!("matchLabels value of {k:?} must be a string"))
                })?;
                validate_key(k).map_err(SelectorError::Object)?;
                requirements.push(Requirement {
                    key: k.clone(),
                    operator: Operator::In,
                    values: vec![s.to_string()],
                });
            }
        }
        if let Some(me) = v.get("matchExpressions").filter(|m| !m.is_null()) {
            let arr = me
                .as_array()
                .ok_or_else(|| SelectorError::Object("matchExpressions must be a list".into()))?;
            for e in arr {
                let key = e
                    .get("key")
                    .and_then(Value::as_str)
                    .ok_or_else(|| SelectorError::Object("a matchExpression has no key".into()))?;
                validate_key(key).map_err(SelectorError::Object)?;
                let op = e.get("operator").and_then(Value::as_str).unwrap_or("");
                let values = crate::json::strings_at(e, &["values"]);
                let operator = match op {
                    "In" => Operator::In,
                    "NotIn" => Operator::NotIn,
                    "Exists" => Operator::Exists,
                    "DoesNotExist" => Operator::DoesNotExist,
                    other => {
                        return Err(SelectorError::Object(format!(
                            "operator {other:?} of key {key:?} is not one of In, NotIn, Exists, DoesNotExist"
                        )));
                    }
                };
                match operator {
                    Operator::In | Operator::NotIn if values.is_empty() => {
                        return Err(SelectorError::Object(format!(
                            "operator {op} of key {key:?} needs values"
                        )));
                    }
                    Operator::Exists | Operator::DoesNotExist if !values.is_empty() => {
                        return Err(SelectorError::Object(format!(
                            "operator {op} of key {key:?} takes no values"
                        )));
                    }
                    _ => {}
                }
                requirements.push(Requirement {
                    key: key.to_string(),
                    operator,
                    values,
                });
            }
        }
        Ok(LabelSelector { requirements })
    }

    /// Match against a label map.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.matches_with(&|k| labels.get(k).cloned())
    }

    /// Match against an object's `metadata.labels` as JSON (no copy of the labels is made per key).
    pub(crate) fn matches_object(&self, obj: &Value) -> bool {
        if self.requirements.is_empty() {
            return true;
        }
        let labels = obj
            .get("metadata")
            .and_then(|m| m.get("labels"))
            .and_then(Value::as_object);
        self.requirements.iter().all(|r| {
            let value = labels.and_then(|l| l.get(&r.key)).and_then(Value::as_str);
            match r.operator {
                Operator::Exists => value.is_some(),
                Operator::DoesNotExist => value.is_none(),
                Operator::In => value.is_some_and(|v| r.values.iter().any(|x| x == v)),
                Operator::NotIn => value.is_none_or(|v| !r.values.iter().any(|x| x == v)),
            }
        })
    }

    fn matches_with(&self, get: &dyn Fn(&str) -> Option<String>) -> bool {
        self.requirements.iter().all(|r| r.matches(get))
    }
}

fn split_top_level(input: &str) -> Result<Vec<&str>, String> {
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in input.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth < 0 {
                    return Err("unbalanced ')'".into());
                }
            }
            ',' if depth == 0 => {
                parts.push(&input[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err("unbalanced '('".into());
    }
    parts.push(&input[start..]);
    Ok(parts)
}

fn parse_requirement(part: &str) -> Result<Requirement, String> {
    if let Some(key) = part.strip_prefix('!') {
        let key = key.trim();
        validate_key(key)?;
        return Ok(Requirement {
            key: key.to_string(),
            operator: Operator::DoesNotExist,
            values: vec![],
        });
    }
    for (sym, op) in [
        ("!=", Operator::NotIn),
        ("==", Operator::In),
        ("=", Operator::In),
    ] {
        if let Some((k, v)) = part.split_once(sym) {
            let (k, v) = (k.trim(), v.trim());
            validate_key(k)?;
            validate_value(v)?;
            return Ok(Requirement {
                key: k.to_string(),
                operator: op,
                values: vec![v.to_string()],
            });
        }
    }
    let words: Vec<&str> = part.splitn(2, char::is_whitespace).collect();
    if words.len() == 2 {
        let key = words[0];
        let rest = words[1].trim_start();
        let (op, list) = if let Some(r) = rest.strip_prefix("notin") {
            (Operator::NotIn, r)
        } else if let Some(r) = rest.strip_prefix("in") {
            (Operator::In, r)
        } else {
            return Err(format!("expected =, !=, in or notin after {key:?}"));
        };
        let list = list.trim();
        let inner = list
            .strip_prefix('(')
            .and_then(|l| l.strip_suffix(')'))
            .ok_or_else(|| format!("expected a parenthesised value list after {key:?}"))?;
        validate_key(key)?;
        let values: Vec<String> = inner.split(',').map(|s| s.trim().to_string()).collect();
        if values.iter().all(String::is_empty) {
            return Err(format!("empty value list for {key:?}"));
        }
        for v in &values {
            validate_value(v)?;
        }
        return Ok(Requirement {
            key: key.to_string(),
            operator: op,
            values,
        });
    }
    validate_key(part)?;
    Ok(Requirement {
        key: part.to_string(),
        operator: Operator::Exists,
        values: vec![],
    })
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.'
}

fn validate_key(key: &str) -> Result<(), String> {
    let name = match key.rsplit_once('/') {
        Some((prefix, name)) => {
            if prefix.is_empty()
                || prefix.len() > 253
                || !prefix
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
            {
                return Err(format!("invalid label key prefix in {key:?}"));
            }
            name
        }
        None => key,
    };
    if name.is_empty() || name.len() > 63 || !name.chars().all(is_name_char) {
        return Err(format!("invalid label key {key:?}"));
    }
    if !name.starts_with(|c: char| c.is_ascii_alphanumeric())
        || !name.ends_with(|c: char| c.is_ascii_alphanumeric())
    {
        return Err(format!(
            "invalid label key {key:?}: must start and end with a letter or digit"
        ));
    }
    Ok(())
}

fn validate_value(v: &str) -> Result<(), String> {
    if v.is_empty() {
        return Ok(());
    }
    if v.len() > 63
        || !v.chars().all(is_name_char)
        || !v.starts_with(|c: char| c.is_ascii_alphanumeric())
        || !v.ends_with(|c: char| c.is_ascii_alphanumeric())
    {
        return Err(format!("invalid label value {v:?}"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn m(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn parses_kubectl_syntax() {
        let s = LabelSelector::parse(
            "role=worker, zone in (a, b),!gpu,tier!=db,env==prod,example.com/ssd",
        )
        .unwrap();
        assert_eq!(s.requirements.len(), 6);
        assert_eq!(
            s.to_string(),
            "role=worker,zone in (a,b),!gpu,tier!=db,env=prod,example.com/ssd"
        );
        assert!(s.matches(&m(&[
            ("role", "worker"),
            ("zone", "b"),
            ("env", "prod"),
            ("example.com/ssd", "")
        ])));
        assert!(!s.matches(&m(&[
            ("role", "worker"),
            ("zone", "c"),
            ("env", "prod"),
            ("example.com/ssd", "")
        ])));
        assert!(!s.matches(&m(&[
            ("role", "worker"),
            ("zone", "a"),
            ("env", "prod"),
            ("gpu", "1"),
            ("example.com/ssd", "")
        ])));
        assert!(!s.matches(&m(&[
            ("role", "worker"),
            ("zone", "a"),
            ("env", "prod"),
            ("tier", "db"),
            ("example.com/ssd", "")
        ])));
    }

    #[test]
    fn notin_matches_missing_label() {
        let s = LabelSelector::parse("zone notin (a)").unwrap();
        assert!(s.matches(&m(&[])));
        assert!(!s.matches(&m(&[("zone", "a")])));
        assert!(s.matches(&m(&[("zone", "b")])));
    }

    #[test]
    fn empty_selector_matches_all() {
        let s = LabelSelector::parse("").unwrap();
        assert!(s.is_empty());
        assert!(s.matches(&m(&[("a", "b")])));
        assert_eq!(s.braced(), "{}");
        assert!(
            LabelSelector::from_json(&Value::Null)
                .unwrap()
                .matches_object(&json!({}))
        );
        assert!(LabelSelector::from_json(&json!({})).unwrap().is_empty());
    }

    #[test]
    fn rejects_bad_syntax() {
        for bad in [
            "a=b,", "a in b", "a in ()", "(a", "a b", "-a=b", "a=b c", "a=-b", "a in (x",
        ] {
            assert!(LabelSelector::parse(bad).is_err(), "{bad} should fail");
        }
        let e = LabelSelector::parse("a in b").unwrap_err().to_string();
        assert!(e.contains("a in b"), "{e}");
    }

    #[test]
    fn reads_metav1_label_selector() {
        let sel = json!({"matchLabels": {"role": "worker"},
            "matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]},
                                 {"key": "gpu", "operator": "DoesNotExist"}]});
        let s = LabelSelector::from_json(&sel).unwrap();
        assert_eq!(s.braced(), "{role=worker,zone in (a,b),!gpu}");
        let host = json!({"metadata": {"labels": {"role": "worker", "zone": "a"}}});
        assert!(s.matches_object(&host));
        let host2 = json!({"metadata": {"labels": {"role": "worker", "zone": "a", "gpu": "x"}}});
        assert!(!s.matches_object(&host2));
        assert!(!s.matches_object(&json!({"metadata": {}})));
    }

    #[test]
    fn rejects_bad_label_selector_objects() {
        for bad in [
            json!({"matchExpressions": [{"key": "a", "operator": "Bogus"}]}),
            json!({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]}),
            json!({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}),
            json!({"matchExpressions": [{"operator": "Exists"}]}),
            json!({"matchLabels": {"a": 1}}),
            json!({"matchLabels": []}),
        ] {
            assert!(LabelSelector::from_json(&bad).is_err(), "{bad}");
        }
    }
}
