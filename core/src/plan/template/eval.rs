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

/// One element of a shell-style glob: `*` any run, `?` one character, anything else (or `\x`)
/// a literal.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Glob {
    Star,
    Any,
    Lit(char),
}

fn glob_tokens(pattern: &str) -> Vec<Glob> {
    let mut out = Vec::new();
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        out.push(match c {
            '*' => Glob::Star,
            '?' => Glob::Any,
            '\\' => Glob::Lit(chars.next().unwrap_or('\\')),
            c => Glob::Lit(c),
        });
    }
    out
}

/// For every prefix length `l` of `s`, whether `pattern` matches `s[..l]`: the pattern run as
/// an automaton over `s` once, O(|s|·|pattern|). (A backtracking matcher is exponential in the
/// number of `*`: `${X##*a*a*a…*b}` ran for minutes.)
fn prefix_matches(pattern: &[Glob], s: &[char]) -> Vec<bool> {
    let m = pattern.len();
    // Active pattern positions; a `*` also lets the next position start (it matches nothing).
    let close = |active: &mut Vec<bool>| {
        for i in 0..m {
            if active[i] && pattern[i] == Glob::Star {
                active[i + 1] = true;
            }
        }
    };
    let mut active = vec![false; m + 1];
    active[0] = true;
    close(&mut active);
    let mut out = Vec::with_capacity(s.len() + 1);
    out.push(active[m]);
    for &c in s {
        let mut next = vec![false; m + 1];
        for i in (0..m).filter(|&i| active[i]) {
            match pattern[i] {
                Glob::Star => next[i] = true,
                Glob::Any => next[i + 1] = true,
                Glob::Lit(x) if x == c => next[i + 1] = true,
                Glob::Lit(_) => {}
            }
        }
        close(&mut next);
        out.push(next[m]);
        if !next.iter().any(|a| *a) {
            // Nothing can match a longer prefix.
            out.resize(s.len() + 1, false);
            break;
        }
        active = next;
    }
    out
}

/// `${v#pattern}` (shortest) and `${v##pattern}` (longest): `v` without the matching prefix.
fn trim_prefix(v: &str, pattern: &str, longest: bool) -> String {
    let chars: Vec<char> = v.chars().collect();
    trim_chars(&chars, &glob_tokens(pattern), longest)
        .iter()
        .collect()
}

fn trim_chars(chars: &[char], pattern: &[Glob], longest: bool) -> Vec<char> {
    let hits = prefix_matches(pattern, chars);
    // A match of the empty prefix removes nothing, as in the shell.
    let mut lens = (1..=chars.len()).filter(|&l| hits[l]);
    let l = if longest {
        lens.next_back()
    } else {
        lens.next()
    };
    chars[l.unwrap_or(0)..].to_vec()
}

/// `${v%pattern}` and `${v%%pattern}`: the same on the reversed string and pattern.
fn trim_suffix(v: &str, pattern: &str, longest: bool) -> String {
    let rev: Vec<char> = v.chars().rev().collect();
    let mut rpat = glob_tokens(pattern);
    rpat.reverse();
    let mut out = trim_chars(&rev, &rpat, longest);
    out.reverse();
    out.iter().collect()
}
