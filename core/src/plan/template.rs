//! clusterctl-compatible template substitution (`clusterctl generate cluster` / `generate yaml`).
//!
//! clusterctl runs templates through `drone/envsubst` after rewriting the legacy forms `${ VAR }`,
//! `${ VAR}` and `${VAR }` to `${VAR}`. This module reproduces that behaviour:
//! - `${VAR}`; defaults `${VAR:=default}`, `${VAR=default}`, `${VAR:-default}` (and `:?`, `:+`,
//!   which drone/envsubst also treats as defaults). A default applies when the value is **empty
//!   or unset**, for every form. Defaults may nest variables: `${A:=${B}}`.
//! - `$$` outside braces is an escaped `$` (`$${VAR}` prints `${VAR}`); a `$` not followed by `{`
//!   is kept as is (`$VAR` is not substituted).
//! - string functions: `${#VAR}`, `${VAR,}`, `${VAR,,}`, `${VAR^}`, `${VAR^^}`, `${VAR:pos}`,
//!   `${VAR:pos:len}`, `${VAR/a/b}`, `${VAR//a/b}`, `${VAR/#a/b}`, `${VAR/%a/b}`, `${VAR#glob}`,
//!   `${VAR##glob}`, `${VAR%glob}`, `${VAR%%glob}`.
//! - variables are looked up in flag overrides, then the environment (as given, then upper-cased
//!   with `-` as `_`; an empty value counts as set), then the config file (keys case-insensitive,
//!   as viper reads them).
//! - a variable is required when its **first** occurrence has no (or an empty) default; every
//!   missing required variable is reported in one error.

use std::collections::BTreeMap;

use serde::Serialize;

/// Why a template cannot be rendered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    #[error("template line {line}, column {column}: {message}")]
    Parse {
        line: usize,
        column: usize,
        message: String,
    },
    #[error(
        "value for variables [{}] is not set: set them as environment variables or in the config file",
        .0.join(", ")
    )]
    MissingVariables(Vec<String>),
    #[error("{0}")]
    InvalidOption(String),
}

/// Where variable values come from, in priority order: `overrides` (values set by flags such as
/// `--kubernetes-version`), `env` (the process environment), `config` (the config file).
#[derive(Debug, Clone, Default)]
pub struct Variables {
    pub overrides: BTreeMap<String, String>,
    pub env: BTreeMap<String, String>,
    pub config: BTreeMap<String, String>,
}

/// Which source a value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    Flag,
    Env,
    Config,
}

impl Variables {
    /// The value of `name`, if set anywhere.
    pub fn lookup(&self, name: &str) -> Option<&str> {
        self.lookup_with_source(name).map(|(v, _)| v)
    }

    /// The value of `name` and where it was found.
    pub fn lookup_with_source(&self, name: &str) -> Option<(&str, Source)> {
        if let Some(v) = self.overrides.get(name) {
            return Some((v, Source::Flag));
        }
        if let Some(v) = self.env.get(name) {
            return Some((v, Source::Env));
        }
        let env_key = name.to_uppercase().replace('-', "_");
        if let Some(v) = self.env.get(&env_key) {
            return Some((v, Source::Env));
        }
        if let Some(v) = self.config.get(name) {
            return Some((v, Source::Config));
        }
        self.config
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| (v.as_str(), Source::Config))
    }
}

/// The flags of `generate cluster` that become variables, as clusterctl sets them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GenerateOptions {
    /// `NAME`: `CLUSTER_NAME` (a DNS-1123 subdomain).
    pub cluster_name: String,
    /// `--target-namespace` (or the current namespace): `NAMESPACE` (a DNS-1123 label).
    pub target_namespace: String,
    /// `--kubernetes-version`: `KUBERNETES_VERSION` when given (else env/config apply).
    pub kubernetes_version: Option<String>,
    /// `--control-plane-machine-count`: else env/config, else 1; at least 1.
    pub control_plane_machine_count: Option<i64>,
    /// `--worker-machine-count`: else env/config, else 0; at least 0.
    pub worker_machine_count: Option<i64>,
}

/// The template file clusterctl looks for: `cluster-template.yaml` or `cluster-template-<flavor>.yaml`.
pub fn template_file_name(flavor: Option<&str>) -> String {
    match flavor.filter(|f| !f.is_empty()) {
        Some(f) => format!("cluster-template-{f}.yaml"),
        None => "cluster-template.yaml".to_string(),
    }
}

fn is_dns1123_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

impl Variables {
    /// Set `CLUSTER_NAME`, `NAMESPACE`, `KUBERNETES_VERSION`, `CONTROL_PLANE_MACHINE_COUNT` and
    /// `WORKER_MACHINE_COUNT` from the `generate cluster` flags, validating them as clusterctl does
    /// (counts not given fall back to the environment or config, then 1 and 0).
    pub fn apply_generate_options(&mut self, o: &GenerateOptions) -> Result<(), TemplateError> {
        let bad = |m: String| Err(TemplateError::InvalidOption(m));
        if !is_dns1123_label(&o.target_namespace) {
            return bad(format!(
                "invalid target namespace {:?}: use lowercase letters, digits and '-', at most 63 characters",
                o.target_namespace
            ));
        }
        let name = &o.cluster_name;
        if name.is_empty() || name.len() > 253 || !name.split('.').all(is_dns1123_label) {
            return bad(format!(
                "invalid cluster name {name:?}: use lowercase letters, digits, '-' and '.', starting and ending with a letter or digit"
            ));
        }
        self.overrides
            .insert("NAMESPACE".into(), o.target_namespace.clone());
        self.overrides.insert("CLUSTER_NAME".into(), name.clone());
        if let Some(v) = &o.kubernetes_version {
            if crate::version::KubeVersion::parse(v).is_err() {
                return bad(format!(
                    "invalid Kubernetes version {v:?}: use a semantic version such as v1.33.1"
                ));
            }
            self.overrides
                .insert("KUBERNETES_VERSION".into(), v.clone());
        }
        let count = |flag: Option<i64>, var: &str, default: i64| -> Result<i64, TemplateError> {
            match flag {
                Some(n) => Ok(n),
                None => match self.lookup(var) {
                    None => Ok(default),
                    Some(v) => v.trim().parse::<i64>().map_err(|_| {
                        TemplateError::InvalidOption(format!(
                            "invalid value {v:?} for {var}: use a whole number"
                        ))
                    }),
                },
            }
        };
        let cp = count(
            o.control_plane_machine_count,
            "CONTROL_PLANE_MACHINE_COUNT",
            1,
        )?;
        if cp < 1 {
            return bad(format!(
                "invalid control-plane machine count {cp}: use 1 or more"
            ));
        }
        let workers = count(o.worker_machine_count, "WORKER_MACHINE_COUNT", 0)?;
        if workers < 0 {
            return bad(format!(
                "invalid worker machine count {workers}: use 0 or more"
            ));
        }
        self.overrides
            .insert("CONTROL_PLANE_MACHINE_COUNT".into(), cp.to_string());
        self.overrides
            .insert("WORKER_MACHINE_COUNT".into(), workers.to_string());
        Ok(())
    }
}

/// One variable of a template, as `--list-variables` reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VariableInfo {
    pub name: String,
    /// No usable default: the value must come from flags, the environment or the config file.
    pub required: bool,
    /// The default as written in the template (nested variables shown as `${NAME}`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
}

/// A variable with its resolved value, for `--list-variables` with values.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VariableStatus {
    pub name: String,
    pub required: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
    /// Where the value comes from; `None` when unset (the default applies, or it is missing).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<Source>,
    /// Required and unset.
    pub missing: bool,
}

/// List the variables of a template, sorted by name.
pub fn list_variables(template: &str) -> Result<Vec<VariableInfo>, TemplateError> {
    let nodes = parse(template)?;
    Ok(collect(&nodes)
        .into_iter()
        .map(|(name, default)| VariableInfo {
            name,
            required: default.is_empty(),
            default: (!default.is_empty()).then_some(default),
        })
        .collect())
}

/// List the variables with where each value would come from.
pub fn variable_status(
    template: &str,
    vars: &Variables,
) -> Result<Vec<VariableStatus>, TemplateError> {
    Ok(list_variables(template)?
        .into_iter()
        .map(|v| {
            let source = vars.lookup_with_source(&v.name).map(|(_, s)| s);
            VariableStatus {
                missing: v.required && source.is_none(),
                source,
                name: v.name,
                required: v.required,
                default: v.default,
            }
        })
        .collect())
}

/// The required variables that have no value, sorted.
pub fn missing_variables(template: &str, vars: &Variables) -> Result<Vec<String>, TemplateError> {
    Ok(variable_status(template, vars)?
        .into_iter()
        .filter(|v| v.missing)
        .map(|v| v.name)
        .collect())
}

/// Render a template. Fails with [`TemplateError::MissingVariables`] naming every missing variable.
pub fn substitute(template: &str, vars: &Variables) -> Result<String, TemplateError> {
    let nodes = parse(template)?;
    let missing: Vec<String> = collect(&nodes)
        .into_iter()
        .filter(|(name, default)| default.is_empty() && vars.lookup(name).is_none())
        .map(|(name, _)| name)
        .collect();
    if !missing.is_empty() {
        return Err(TemplateError::MissingVariables(missing));
    }
    let mut out = String::with_capacity(template.len());
    for n in &nodes {
        eval(n, vars, &mut out);
    }
    Ok(out)
}

#[derive(Debug, Clone, PartialEq)]
enum Node {
    Text(String),
    Func(Func),
}

#[derive(Debug, Clone, PartialEq)]
struct Func {
    param: String,
    op: String,
    args: Vec<Node>,
}

/// The variables of the top-level substitutions with their default text (first occurrence wins),
/// as clusterctl's `inspectVariables` computes them.
fn collect(nodes: &[Node]) -> BTreeMap<String, String> {
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

fn eval(node: &Node, vars: &Variables, out: &mut String) {
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

/// Rewrite the legacy `${ VAR }`, `${ VAR}`, `${VAR }` to `${VAR}` as clusterctl's
/// `convertLegacyVars` does (names of `[A-Za-z0-9_$]`, whitespace on at least one side).
fn convert_legacy(input: &str) -> String {
    let is_ws = |c: char| matches!(c, ' ' | '\t' | '\n' | '\r' | '\x0c');
    let is_name = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '$';
    let mut out = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(i) = rest.find("${") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 2..];
        if let Some(close) = after.find('}') {
            let inner = &after[..close];
            let trimmed = inner.trim_matches(is_ws);
            if trimmed.len() != inner.len() && !trimmed.is_empty() && trimmed.chars().all(is_name) {
                out.push_str("${");
                out.push_str(trimmed);
                out.push('}');
                rest = &after[close + 1..];
                continue;
            }
        }
        out.push('$');
        rest = &rest[i + 1..];
    }
    out.push_str(rest);
    out
}

fn parse(template: &str) -> Result<Vec<Node>, TemplateError> {
    let converted = convert_legacy(template);
    let mut p = Parser {
        s: converted.chars().collect(),
        pos: 0,
    };
    p.parse_top().map_err(|(pos, message)| {
        let (line, column) = p.line_col(pos);
        TemplateError::Parse {
            line,
            column,
            message: message.to_string(),
        }
    })
}

type PResult<T> = Result<T, (usize, &'static str)>;

struct Parser {
    s: Vec<char>,
    pos: usize,
}

impl Parser {
    fn peek(&self) -> Option<char> {
        self.s.get(self.pos).copied()
    }

    fn peek_at(&self, off: usize) -> Option<char> {
        self.s.get(self.pos + off).copied()
    }

    fn at_lbrack(&self) -> bool {
        self.peek() == Some('$') && self.peek_at(1) == Some('{')
    }

    fn line_col(&self, pos: usize) -> (usize, usize) {
        let mut line = 1;
        let mut col = 1;
        for c in self.s.iter().take(pos) {
            if *c == '\n' {
                line += 1;
                col = 1;
            } else {
                col += 1;
            }
        }
        (line, col)
    }

    fn parse_top(&mut self) -> PResult<Vec<Node>> {
        let mut nodes = Vec::new();
        let mut text = String::new();
        while let Some(c) = self.peek() {
            if self.at_lbrack() {
                if !text.is_empty() {
                    nodes.push(Node::Text(std::mem::take(&mut text)));
                }
                self.pos += 2;
                nodes.push(Node::Func(self.parse_func()?));
            } else if c == '$' && self.peek_at(1) == Some('$') {
                text.push('$');
                self.pos += 2;
            } else {
                text.push(c);
                self.pos += 1;
            }
        }
        if !text.is_empty() {
            nodes.push(Node::Text(text));
        }
        Ok(nodes)
    }

    fn ident(&mut self) -> String {
        let start = self.pos;
        while self.peek().is_some_and(|c| c.is_alphanumeric() || c == '_') {
            self.pos += 1;
        }
        self.s[start..self.pos].iter().collect()
    }

    fn expect_close(&mut self, message: &'static str) -> PResult<()> {
        if self.peek() == Some('}') {
            self.pos += 1;
            Ok(())
        } else {
            Err((self.pos, message))
        }
    }

    /// After `${`.
    fn parse_func(&mut self) -> PResult<Func> {
        let start = self.pos;
        if self.peek() == Some('#') {
            self.pos += 1;
            let param = self.ident();
            if param.is_empty() {
                return Err((
                    self.pos,
                    "bad substitution: expected a variable name after ${#",
                ));
            }
            self.expect_close("bad substitution: expected } after ${#NAME")?;
            return Ok(Func {
                param,
                op: "#".into(),
                args: vec![],
            });
        }
        let param = self.ident();
        if param.is_empty() {
            return Err((start, "unable to parse variable name after ${"));
        }
        let mut f = Func {
            param,
            op: String::new(),
            args: vec![],
        };
        match self.peek() {
            Some('}') => {
                self.pos += 1;
            }
            Some(':') if matches!(self.peek_at(1), Some('=' | '-' | '?' | '+')) => {
                f.op = self.s[self.pos..self.pos + 2].iter().collect();
                self.pos += 2;
                self.parse_default_args(&mut f)?;
            }
            Some('=') => {
                f.op = "=".into();
                self.pos += 1;
                self.parse_default_args(&mut f)?;
            }
            Some(':') => {
                f.op = ":".into();
                self.pos += 1;
                f.args.push(self.param(|c| c != ':' && c != '}', false)?);
                match self.peek() {
                    Some('}') => self.pos += 1,
                    Some(':') => {
                        self.pos += 1;
                        f.args.push(self.param(|c| c != '}', false)?);
                        self.expect_close("bad substitution: expected } after ${NAME:pos:len")?;
                    }
                    _ => return Err((self.pos, "bad substitution in ${NAME:pos}")),
                }
            }
            Some(',' | '^') => {
                let mut op = String::new();
                while op.len() < 2 && matches!(self.peek(), Some(',' | '^')) {
                    op.push(self.s[self.pos]);
                    self.pos += 1;
                }
                f.op = op;
                self.expect_close("bad substitution: expected } after a case conversion")?;
            }
            Some('/') => {
                let mut op = "/".to_string();
                self.pos += 1;
                if let Some(c @ ('/' | '#' | '%')) = self.peek() {
                    op.push(c);
                    self.pos += 1;
                }
                f.op = op;
                f.args.push(self.param(|c| c != '/', true)?);
                if self.peek() != Some('/') {
                    return Err((
                        self.pos,
                        "bad substitution: expected / in ${NAME/pattern/string}",
                    ));
                }
                self.pos += 1;
                if self.peek() != Some('}') {
                    f.args.push(self.param(|c| c != '}', true)?);
                }
                self.expect_close("bad substitution: expected } after ${NAME/pattern/string")?;
            }
            Some(c @ ('#' | '%')) => {
                let mut op = String::new();
                while op.len() < 2 && self.peek() == Some(c) {
                    op.push(c);
                    self.pos += 1;
                }
                f.op = op;
                f.args.push(self.param(|c| c != '}', false)?);
                self.expect_close("bad substitution: expected } after a pattern")?;
            }
            None => return Err((start.saturating_sub(2), "missing closing brace")),
            Some(_) => {
                return Err((
                    self.pos,
                    "missing closing brace (a variable name is letters, digits and _; defaults are written ${NAME:=value})",
                ));
            }
        }
        Ok(f)
    }

    fn parse_default_args(&mut self, f: &mut Func) -> PResult<()> {
        loop {
            match self.peek() {
                Some('}') => {
                    self.pos += 1;
                    return Ok(());
                }
                None => return Err((self.pos, "missing closing brace")),
                Some(_) => f.args.push(self.param(|c| c != '}', false)?),
            }
        }
    }

    /// One function argument: a nested `${...}` or a run of accepted characters.
    fn param(&mut self, accept: impl Fn(char) -> bool, escapes: bool) -> PResult<Node> {
        if self.at_lbrack() {
            self.pos += 2;
            return Ok(Node::Func(self.parse_func()?));
        }
        let mut text = String::new();
        let mut any = false;
        while let Some(c) = self.peek() {
            if self.at_lbrack() {
                break;
            }
            if escapes {
                let next = self.peek_at(1);
                if (c == '$' && next == Some('$'))
                    || (c == '\\' && matches!(next, Some('/' | '\\')))
                {
                    if let Some(n) = next {
                        text.push(n);
                    }
                    self.pos += 2;
                    any = true;
                    continue;
                }
            }
            if !accept(c) {
                break;
            }
            text.push(c);
            self.pos += 1;
            any = true;
        }
        if !any {
            return Err((
                self.pos,
                "unable to parse substitution within function (missing closing brace?)",
            ));
        }
        Ok(Node::Text(text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(env: &[(&str, &str)], config: &[(&str, &str)]) -> Variables {
        Variables {
            overrides: BTreeMap::new(),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            config: config
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    fn sub(t: &str, env: &[(&str, &str)]) -> String {
        substitute(t, &vars(env, &[])).unwrap()
    }

    #[test]
    fn plain_variable() {
        assert_eq!(
            sub("name: ${CLUSTER_NAME}\n", &[("CLUSTER_NAME", "c1")]),
            "name: c1\n"
        );
        assert_eq!(sub("a${X}b${X}c", &[("X", "-")]), "a-b-c");
    }

    #[test]
    fn every_default_form() {
        for t in ["${V:=d}", "${V=d}", "${V:-d}", "${V:?d}", "${V:+d}"] {
            assert_eq!(sub(t, &[]), "d", "{t} unset");
            assert_eq!(sub(t, &[("V", "x")]), "x", "{t} set");
            // drone/envsubst applies the default to an empty value too, for every form.
            assert_eq!(sub(t, &[("V", "")]), "d", "{t} empty");
        }
    }

    #[test]
    fn defaults_with_spaces_colons_and_nesting() {
        assert_eq!(sub("${V:=a b:c=d}", &[]), "a b:c=d");
        assert_eq!(sub("${V:=}", &[("V", "x")]), "x");
        assert_eq!(sub("${A:=${B}}", &[("B", "bee")]), "bee");
        assert_eq!(sub("${A:=pre-${B:=b}-post}", &[]), "pre-b-post");
        assert_eq!(sub("${V:=v1.30.0}", &[]), "v1.30.0");
        assert_eq!(sub("${V==x}", &[]), "=x");
    }

    #[test]
    fn spaces_inside_braces() {
        let e = &[("CLUSTER_NAME", "c1")];
        assert_eq!(sub("${ CLUSTER_NAME }", e), "c1");
        assert_eq!(sub("${ CLUSTER_NAME}", e), "c1");
        assert_eq!(sub("${CLUSTER_NAME }", e), "c1");
        assert_eq!(sub("${\tCLUSTER_NAME\n}", e), "c1");
        assert_eq!(list_variables("${ A }").unwrap()[0].name, "A");
    }

    #[test]
    fn escaped_dollar() {
        assert_eq!(sub("cost: $$5", &[]), "cost: $5");
        assert_eq!(sub("literal: $${NOT_A_VAR}", &[]), "literal: ${NOT_A_VAR}");
        assert_eq!(sub("$$$", &[]), "$$");
        assert_eq!(sub("$HOME and $ alone", &[]), "$HOME and $ alone");
        assert_eq!(sub("$${ X }", &[]), "${X}");
        assert!(list_variables("$${NOT_A_VAR}").unwrap().is_empty());
        // inside a default `$$` is kept as written, as drone/envsubst does
        assert_eq!(sub("${V:=a$$b}", &[]), "a$$b");
    }

    #[test]
    fn env_then_config_then_case_insensitive_config() {
        let v = vars(
            &[("A", "env")],
            &[
                ("A", "cfg"),
                ("B", "cfg"),
                ("kubernetes_version", "v1.31.0"),
            ],
        );
        assert_eq!(
            substitute("${A} ${B} ${KUBERNETES_VERSION}", &v).unwrap(),
            "env cfg v1.31.0"
        );
        let mut v2 = v.clone();
        v2.overrides.insert("A".into(), "flag".into());
        assert_eq!(substitute("${A}", &v2).unwrap(), "flag");
        assert_eq!(v2.lookup_with_source("A"), Some(("flag", Source::Flag)));
        assert_eq!(v2.lookup_with_source("B"), Some(("cfg", Source::Config)));
        // the environment is searched upper-cased with - as _, like viper's AutomaticEnv
        let v3 = vars(&[("MY_VAR", "e")], &[]);
        assert_eq!(v3.lookup("my-var"), Some("e"));
        // an empty environment value counts as set
        let v4 = vars(&[("E", "")], &[]);
        assert_eq!(substitute("[${E}]", &v4).unwrap(), "[]");
    }

    #[test]
    fn names_every_missing_variable() {
        let t = "${CLUSTER_NAME}\n${NAMESPACE}\n${KUBERNETES_VERSION:=v1.31.0}\n${CONTROL_PLANE_ENDPOINT_IP}\n${X:=}";
        let err = substitute(t, &vars(&[("NAMESPACE", "ns")], &[])).unwrap_err();
        assert_eq!(
            err,
            TemplateError::MissingVariables(vec![
                "CLUSTER_NAME".into(),
                "CONTROL_PLANE_ENDPOINT_IP".into(),
                "X".into()
            ])
        );
        let msg = err.to_string();
        assert!(
            msg.contains("[CLUSTER_NAME, CONTROL_PLANE_ENDPOINT_IP, X]"),
            "{msg}"
        );
        assert_eq!(
            missing_variables(t, &vars(&[], &[("CLUSTER_NAME", "c")])).unwrap(),
            vec!["CONTROL_PLANE_ENDPOINT_IP", "NAMESPACE", "X"]
        );
    }

    #[test]
    fn first_occurrence_decides_required() {
        // clusterctl keys each variable to its first occurrence
        let l = list_variables("${A}\n${A:=x}\n${B:=y}\n${B}").unwrap();
        assert_eq!(
            l[0],
            VariableInfo {
                name: "A".into(),
                required: true,
                default: None
            }
        );
        assert_eq!(
            l[1],
            VariableInfo {
                name: "B".into(),
                required: false,
                default: Some("y".into())
            }
        );
        assert!(substitute("${A}\n${A:=x}", &Variables::default()).is_err());
    }

    #[test]
    fn list_variables_sorted_with_defaults() {
        let t = "${WORKER_MACHINE_COUNT:=1}\n${CLUSTER_NAME}\n${A:=${B}-x}\n$${ESCAPED}";
        let l = list_variables(t).unwrap();
        let names: Vec<_> = l.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, ["A", "CLUSTER_NAME", "WORKER_MACHINE_COUNT"]);
        assert_eq!(l[0].default.as_deref(), Some("${B}-x"));
        assert!(l[1].required);
        assert_eq!(l[2].default.as_deref(), Some("1"));
        let st = variable_status(t, &vars(&[("CLUSTER_NAME", "c")], &[])).unwrap();
        assert_eq!(st[1].source, Some(Source::Env));
        assert!(!st[1].missing);
        assert!(st.iter().all(|s| !s.missing));
    }

    #[test]
    fn string_functions() {
        let e = &[("V", "Hello/World"), ("N", "abcdef")];
        assert_eq!(sub("${#N}", e), "6");
        assert_eq!(sub("${V,}", e), "hello/World");
        assert_eq!(sub("${V,,}", e), "hello/world");
        assert_eq!(sub("${N^}", e), "Abcdef");
        assert_eq!(sub("${N^^}", e), "ABCDEF");
        assert_eq!(sub("${N:2}", e), "cdef");
        assert_eq!(sub("${N:1:3}", e), "bcd");
        assert_eq!(sub("${N:10}", e), "");
        assert_eq!(sub("${V/o/0}", e), "Hell0/World");
        assert_eq!(sub("${V//o/0}", e), "Hell0/W0rld");
        assert_eq!(sub("${V/\\//-}", e), "Hello-World");
        assert_eq!(sub("${N/#ab/X}", e), "Xcdef");
        assert_eq!(sub("${N/%ef/X}", e), "abcdX");
        assert_eq!(sub("${N#a*c}", e), "def");
        assert_eq!(sub("${N##*[}", &[("N", "a[b[c")]), "c");
        assert_eq!(sub("${N%d*}", e), "abc");
        assert_eq!(sub("${N%%?e*}", &[("N", "xde1de2")]), "x");
        assert_eq!(sub("${N%de*}", &[("N", "xde1de2")]), "xde1");
    }

    #[test]
    fn malformed_templates_report_position() {
        for (t, line) in [
            ("a: ${}", 1),
            ("x\ny: ${NAME", 2),
            ("${A B}", 1),
            ("${A:=x", 1),
            ("${#}", 1),
            ("${A-x}", 1),
        ] {
            match substitute(t, &Variables::default()) {
                Err(TemplateError::Parse { line: l, .. }) => assert_eq!(l, line, "{t}"),
                other => panic!("{t}: {other:?}"),
            }
        }
        let msg = substitute("ok\n  v: ${A B}", &Variables::default())
            .unwrap_err()
            .to_string();
        assert!(msg.starts_with("template line 2, column "), "{msg}");
    }

    #[test]
    fn byoh_style_template_renders() {
        let t = r#"apiVersion: cluster.x-k8s.io/v1beta2
kind: Cluster
metadata:
  name: ${CLUSTER_NAME}
  namespace: ${NAMESPACE}
spec:
  topology:
    version: ${KUBERNETES_VERSION}
---
kind: KubeadmControlPlane
spec:
  replicas: ${CONTROL_PLANE_MACHINE_COUNT:=1}
  kubeadmConfigSpec:
    files:
    - content: |
        vip_address=${CONTROL_PLANE_ENDPOINT_IP}
        echo $$HOME
"#;
        let mut v = vars(
            &[("CONTROL_PLANE_ENDPOINT_IP", "10.0.0.10")],
            &[("NAMESPACE", "default")],
        );
        v.overrides.insert("CLUSTER_NAME".into(), "byoh-1".into());
        v.overrides
            .insert("KUBERNETES_VERSION".into(), "v1.33.1".into());
        let out = substitute(t, &v).unwrap();
        assert!(out.contains("name: byoh-1\n  namespace: default\n"));
        assert!(out.contains("version: v1.33.1"));
        assert!(out.contains("replicas: 1\n"));
        assert!(out.contains("vip_address=10.0.0.10\n        echo $HOME\n"));
        assert!(!out.contains("${"));
    }

    #[test]
    fn generate_options_become_variables() {
        let mut v = vars(&[("WORKER_MACHINE_COUNT", "3")], &[]);
        let o = GenerateOptions {
            cluster_name: "byoh-1".into(),
            target_namespace: "team-a".into(),
            kubernetes_version: Some("v1.33.1".into()),
            ..Default::default()
        };
        v.apply_generate_options(&o).unwrap();
        assert_eq!(v.lookup("CLUSTER_NAME"), Some("byoh-1"));
        assert_eq!(v.lookup("NAMESPACE"), Some("team-a"));
        assert_eq!(v.lookup("KUBERNETES_VERSION"), Some("v1.33.1"));
        assert_eq!(v.lookup("CONTROL_PLANE_MACHINE_COUNT"), Some("1"));
        // not given on the command line: the environment's value is kept
        assert_eq!(v.lookup("WORKER_MACHINE_COUNT"), Some("3"));
        let mut v2 = Variables::default();
        v2.apply_generate_options(&GenerateOptions {
            worker_machine_count: Some(2),
            control_plane_machine_count: Some(3),
            ..o.clone()
        })
        .unwrap();
        assert_eq!(v2.lookup("WORKER_MACHINE_COUNT"), Some("2"));
        assert_eq!(v2.lookup("CONTROL_PLANE_MACHINE_COUNT"), Some("3"));
        assert_eq!(
            Variables::default().apply_generate_options(&GenerateOptions {
                kubernetes_version: None,
                ..o.clone()
            }),
            Ok(())
        );

        for bad in [
            GenerateOptions {
                cluster_name: "Bad_Name".into(),
                ..o.clone()
            },
            GenerateOptions {
                target_namespace: "a.b".into(),
                ..o.clone()
            },
            GenerateOptions {
                kubernetes_version: Some("latest".into()),
                ..o.clone()
            },
            GenerateOptions {
                control_plane_machine_count: Some(0),
                ..o.clone()
            },
            GenerateOptions {
                worker_machine_count: Some(-1),
                ..o.clone()
            },
        ] {
            assert!(
                matches!(
                    Variables::default().apply_generate_options(&bad),
                    Err(TemplateError::InvalidOption(_))
                ),
                "{bad:?}"
            );
        }
        let mut v3 = vars(&[("CONTROL_PLANE_MACHINE_COUNT", "three")], &[]);
        let e = v3.apply_generate_options(&o).unwrap_err().to_string();
        assert!(e.contains("CONTROL_PLANE_MACHINE_COUNT"), "{e}");
        assert_eq!(template_file_name(None), "cluster-template.yaml");
        assert_eq!(
            template_file_name(Some("docker")),
            "cluster-template-docker.yaml"
        );
    }
}
