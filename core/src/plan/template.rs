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

//!
//! Submodules: `variables` (value sources, `generate cluster` flags), `parser` (the grammar),
//! `eval` (the variables a template uses, the string functions).

mod eval;
mod parser;
mod variables;

use serde::Serialize;

use eval::{collect, eval};
use parser::parse;

pub use variables::{GenerateOptions, Source, Variables};

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
    /// Past [`MAX_TEMPLATE_BYTES`] or [`MAX_OUTPUT_BYTES`].
    #[error("{0}")]
    TooLarge(String),
}

/// The largest template read: clusterctl's templates are tens of kilobytes; anything near this
/// is not a cluster template, and parsing holds four bytes per character.
pub const MAX_TEMPLATE_BYTES: usize = 8 << 20;
/// The largest rendered output (defaults and substitutions can only grow a template so far).
pub const MAX_OUTPUT_BYTES: usize = 32 << 20;

/// The template file clusterctl looks for: `cluster-template.yaml` or `cluster-template-<flavor>.yaml`.
pub fn template_file_name(flavor: Option<&str>) -> String {
    match flavor.filter(|f| !f.is_empty()) {
        Some(f) => format!("cluster-template-{f}.yaml"),
        None => "cluster-template.yaml".to_string(),
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
        if out.len() > MAX_OUTPUT_BYTES {
            return Err(TemplateError::TooLarge(format!(
                "the template renders to more than {} MiB",
                MAX_OUTPUT_BYTES >> 20
            )));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
