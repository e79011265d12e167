//! Evaluation of a parsed template: the variables it uses (clusterctl's `inspectVariables`) and
//! the value of each substitution, with drone/envsubst's string functions.

use std::collections::BTreeMap;

use super::Variables;
use super::parser::Node;

/// The variables of the top-level substitutions with their default text (first occurrence wins),
/// as clusterctl's `inspectVariables` computes them.
pub(super) fn collect(nodes: &[Node]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for n in nodes {
        if let Node::Func(f) = n {
            out.entry(f.param.clone()).or_insert_with(|| {
                let mut d = String::new();
                for a in &f.args {
                    match a {
                        Node::Text(t) => d.push_str(t),
                        Node::Func(inner) => {
                            d.push_str("${");
                            d.push_str(&inner.param);
                            d.push('}');
                        }
                    }
                }
                d
            });
        }
    }
    out
}

pub(super) fn eval(node: &Node, vars: &Variables, out: &mut String) {
    match node {
        Node::Text(t) => out.push_str(t),
        Node::Func(f) => {
            let args: Vec<String> = f
                .args
                .iter()
                .map(|a| {
                    let mut s = String::new();
                    eval(a, vars, &mut s);
                    s
                })
                .collect();
            let v = vars.lookup(&f.param).unwrap_or("");
            out.push_str(&apply(&f.op, v, &args));
        }
    }
}

fn apply(op: &str, v: &str, args: &[String]) -> String {
    let arg = |i: usize| args.get(i).map(String::as_str);
    match op {
        "," => first_char_map(v, |c| c.to_lowercase().collect()),
        ",," => v.to_lowercase(),
        "^" => first_char_map(v, |c| c.to_uppercase().collect()),
        "^^" => v.to_uppercase(),
        "#" if args.is_empty() => v.len().to_string(),
        "#" => trim_prefix(v, arg(0).unwrap_or(""), false),
        "##" => trim_prefix(v, arg(0).unwrap_or(""), true),
        "%" => trim_suffix(v, arg(0).unwrap_or(""), false),
        "%%" => trim_suffix(v, arg(0).unwrap_or(""), true),
        ":" => substring(v, arg(0), arg(1)),
        "/" | "//" => match (arg(0), arg(1)) {
            (None, _) => v.to_string(),
            (Some(from), to) if op == "/" => v.replacen(from, to.unwrap_or(""), 1),
            (Some(from), to) => v.replace(from, to.unwrap_or("")),
        },
        "/#" => match (arg(0), arg(1)) {
            (Some(from), Some(to)) if v.starts_with(from) => format!("{to}{}", &v[from.len()..]),
            _ => v.to_string(),
        },
        "/%" => match (arg(0), arg(1)) {
            (Some(from), Some(to)) if v.ends_with(from) => {
                format!("{}{to}", &v[..v.len() - from.len()])
            }
            _ => v.to_string(),
        },
        // Every default form (and a plain `${VAR}`): the default applies when the value is empty.
        _ => {
            if v.is_empty() && !args.is_empty() {
                args.concat()
            } else {
                v.to_string()
            }
        }
    }
}

fn first_char_map(v: &str, f: impl Fn(char) -> String) -> String {
    let mut chars = v.chars();
    match chars.next() {
        Some(c) => f(c) + chars.as_str(),
        None => String::new(),
    }
}

fn substring(v: &str, pos: Option<&str>, len: Option<&str>) -> String {
    let chars: Vec<char> = v.chars().collect();
    let n = chars.len() as i64;
    let Some(Ok(mut p)) = pos.map(|p| p.trim().parse::<i64>()) else {
        return v.to_string();
    };
    if p < 0 {
        p = (n + p).max(0);
    }
    if p >= n {
        return String::new();
    }
    let end = match len {
        None => n,
        Some(l) => match l.trim().parse::<i64>() {
            Ok(l) => (p + l.max(0)).min(n),
            Err(_) => return v.to_string(),
        },
    };
    chars[p as usize..end as usize].iter().collect()
}

/// Shell-style glob: `*` any run, `?` one character, `\x` a literal `x`.
fn glob(pattern: &[char], s: &[char]) -> bool {
    match pattern.split_first() {
        None => s.is_empty(),
        Some(('*', rest)) => (0..=s.len()).any(|i| glob(rest, &s[i..])),
        Some(('?', rest)) => !s.is_empty() && glob(rest, &s[1..]),
        Some(('\\', rest)) if !rest.is_empty() => {
            s.first() == Some(&rest[0]) && glob(&rest[1..], &s[1..])
        }
        Some((c, rest)) => s.first() == Some(c) && glob(rest, &s[1..]),
    }
}

fn trim_prefix(v: &str, pattern: &str, longest: bool) -> String {
    let chars: Vec<char> = v.chars().collect();
    let pat: Vec<char> = pattern.chars().collect();
    let lens: Vec<usize> = if longest {
        (1..=chars.len()).rev().collect()
    } else {
        (1..=chars.len()).collect()
    };
    for l in lens {
        if glob(&pat, &chars[..l]) {
            return chars[l..].iter().collect();
        }
    }
    v.to_string()
}

fn trim_suffix(v: &str, pattern: &str, longest: bool) -> String {
    let rev: String = v.chars().rev().collect();
    let rpat: String = pattern.chars().rev().collect();
    trim_prefix(&rev, &rpat, longest).chars().rev().collect()
}
