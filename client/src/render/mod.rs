//! The only place that prints.
//!
//! - [`Printer::print`] writes anything implementing [`Render`] as a kubectl-looking table
//!   (`-o table|wide`), key/value fields, JSON, YAML or `kind.group/name` lines (`-o name`).
//! - [`line()`], [`warn`], [`error`] and [`raw`] write messages; [`completions`] writes kubectl's
//!   plugin-completion answer.
//! - [`Progress`] and [`wait_until`] show spinners and bars on stderr when it is a terminal, and
//!   plain lines otherwise.

use std::io::{IsTerminal, Write};

use owo_colors::OwoColorize;
use serde::Serialize;
use serde_json::Value;

use crate::error::Error;

mod format;
pub mod jsonpath;
mod progress;
mod table;
pub use format::{ColorWhen, OutputFormat, OutputOptions, color_enabled};
pub use progress::{Backoff, Fault, Poll, Progress, Wait, classify, wait_until};
pub use table::{Cell, Fields, Table, Tone};

/// The human form of a result.
pub enum Human {
    Table(Table),
    Fields(Fields),
    Text(String),
}

/// Implemented by every verb's result. JSON and YAML come from `Serialize`: give results
/// plain structs with fixed field order so scripts can rely on them.
pub trait Render: Serialize {
    /// The table or fields shown for `-o table` and `-o wide`.
    fn human(&self) -> Human;
    /// The objects the table's rows are, when they are objects of one kind: what `-o name` and
    /// `--show-labels` print unless [`Render::names`] or [`Render::labels`] say otherwise.
    fn objects(&self) -> Option<RowObjects<'_>> {
        None
    }
    /// `kind.group/name` lines for `-o name`; `None` when a result has no objects.
    fn names(&self) -> Option<Vec<String>> {
        let o = self.objects()?;
        let names = o.rows.iter().map(|m| object_name(o.kind, o.group, &m.name));
        Some(names.collect())
    }
    /// A line printed after the table (`-o table|wide`, not with `--no-headers`), such as a
    /// summary: "40 hosts: 12 available, 25 running".
    fn footer(&self) -> Option<String> {
        None
    }
    /// Each table row's labels (`k=v,…`, `<none>` when empty) for `--show-labels`; `None` when
    /// the rows are not objects with labels.
    fn labels(&self) -> Option<Vec<String>> {
        labels_column(self.objects()?.rows.iter().map(|m| &m.labels))
    }
}

/// The objects of a list's rows ([`Render::objects`]): their kind and API group, and each
/// row's `metadata`.
pub struct RowObjects<'a> {
    kind: &'a str,
    group: &'a str,
    rows: Vec<&'a kcore::json::RowMeta>,
}

impl<'a> RowObjects<'a> {
    /// `rows` that are objects of `kind` in `group`, with the `metadata` of each.
    pub fn of<R>(
        kind: &'a str,
        group: &'a str,
        rows: &'a [R],
        metadata: impl Fn(&'a R) -> &'a kcore::json::RowMeta,
    ) -> Option<RowObjects<'a>> {
        Some(RowObjects {
            kind,
            group,
            rows: rows.iter().map(metadata).collect(),
        })
    }
}

/// Labels as `kubectl get --show-labels` prints them: `k=v` sorted by key, comma-separated,
/// `<none>` when there are none.
pub fn labels_text(labels: &std::collections::BTreeMap<String, String>) -> String {
    if labels.is_empty() {
        return "<none>".to_string();
    }
    labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The `--show-labels` column of a list's rows ([`Render::labels`]), from each row's labels.
pub fn labels_column<'a>(
    rows: impl IntoIterator<Item = &'a std::collections::BTreeMap<String, String>>,
) -> Option<Vec<String>> {
    Some(rows.into_iter().map(labels_text).collect())
}

/// `kind.group/name`, as `kubectl get -o name` prints it (`kind/name` for the core group).
pub fn object_name(kind: &str, group: &str, name: &str) -> String {
    if group.is_empty() {
        format!("{}/{name}", kind.to_lowercase())
    } else {
        format!("{}.{group}/{name}", kind.to_lowercase())
    }
}

/// `kind.group/name` of an object, as `kubectl apply` prints it.
pub fn display_name(obj: &Value) -> String {
    let av = obj["apiVersion"].as_str().unwrap_or_default();
    let (group, _) = kcore::groups::split_api_version(av);
    object_name(
        obj["kind"].as_str().unwrap_or_default(),
        group,
        obj["metadata"]["name"].as_str().unwrap_or_default(),
    )
}

/// A stream of YAML documents that `kubectl apply -f -` accepts.
pub fn yaml_stream(objects: &[Value]) -> Result<String, Error> {
    let mut out = String::new();
    for o in objects {
        out.push_str("---\n");
        out.push_str(&to_yaml(o)?);
    }
    Ok(out)
}

/// Serialises to JSON the way every verb prints it (pretty, trailing newline).
pub fn to_json<T: Serialize + ?Sized>(value: &T) -> Result<String, Error> {
    let mut s = serde_json::to_string_pretty(value)
        .map_err(|e| Error::other(format!("cannot serialise the result as JSON: {e}")))?;
    s.push('\n');
    Ok(s)
}

/// Serialises to YAML (serde-saphyr) the way every verb prints it.
pub fn to_yaml<T: Serialize>(value: &T) -> Result<String, Error> {
    let mut s = serde_saphyr::to_string(value)
        .map_err(|e| Error::other(format!("cannot serialise the result as YAML: {e}")))?;
    if !s.ends_with('\n') {
        s.push('\n');
    }
    Ok(s)
}

/// Prints results in the format of the output flags.
#[derive(Clone, Debug)]
pub struct Printer {
    pub format: OutputFormat,
    pub headers: bool,
    pub show_labels: bool,
    pub color: bool,
}

impl Printer {
    /// From `-o`, `--no-headers`, `--color`, `NO_COLOR` and whether stdout is a terminal.
    pub fn new(flags: impl Into<OutputOptions>) -> Printer {
        let flags: OutputOptions = flags.into();
        let no_color = std::env::var("NO_COLOR").ok();
        Printer {
            format: flags.output,
            headers: !flags.no_headers,
            show_labels: flags.show_labels,
            color: color_enabled(
                flags.color,
                no_color.as_deref(),
                std::io::stdout().is_terminal(),
            ),
        }
    }

    /// The text `value` prints as.
    pub fn format<T: Render>(&self, value: &T) -> Result<String, Error> {
        match &self.format {
            OutputFormat::Json => to_json(value),
            OutputFormat::JsonPath(t) => t
                .render(&as_value(value)?)
                .map_err(|e| jsonpath_error("jsonpath", &e)),
            OutputFormat::CustomColumns(c) => custom_columns(c, &as_value(value)?, self.headers),
            OutputFormat::Yaml => to_yaml(value),
            OutputFormat::Name => match value.names() {
                Some(names) => Ok(names.iter().map(|n| format!("{n}\n")).collect()),
                None => Err(Error::usage(
                    "-o name is not supported here; use -o table, wide, json or yaml",
                )),
            },
            OutputFormat::Table | OutputFormat::Wide => Ok(match value.human() {
                Human::Table(mut t) => {
                    self.add_labels(value, &mut t)?;
                    let mut s =
                        t.render(self.format == OutputFormat::Wide, self.headers, self.color);
                    if self.headers
                        && let Some(f) = value.footer()
                    {
                        s.push_str(&f);
                        if !f.ends_with('\n') {
                            s.push('\n');
                        }
                    }
                    s
                }
                Human::Fields(f) => f.render(self.color),
                Human::Text(mut s) => {
                    if !s.is_empty() && !s.ends_with('\n') {
                        s.push('\n');
                    }
                    s
                }
            }),
        }
    }

    /// Prints `value` on stdout.
    pub fn print<T: Render>(&self, value: &T) -> Result<(), Error> {
        let text = self.format(value)?;
        raw(text.as_bytes());
        Ok(())
    }

    /// Prints `value` on stdout as [`Printer::print`] does, without making its text whole
    /// first, for a fleet-sized list: `-o json` is written as it is serialised, and the
    /// table formats row by row ([`Table::write_rows`]): `table` is the value's table without
    /// rows, `rows` its rows and `cells` each row's cells (as the value's [`Render::human`]
    /// makes them). The other formats print as [`Printer::print`] prints them. A closed pipe
    /// (`| head`) ends the output and is not an error.
    pub fn print_rows<T: Render, R>(
        &self,
        value: &T,
        mut table: Table,
        rows: &[R],
        cells: impl Fn(&R) -> Vec<Cell>,
    ) -> Result<(), Error> {
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        let written = match &self.format {
            OutputFormat::Json => match serde_json::to_writer_pretty(&mut out, value) {
                Err(e) if !e.is_io() => {
                    return Err(Error::other(format!(
                        "cannot serialise the result as JSON: {e}"
                    )));
                }
                Err(_) => return Ok(()),
                Ok(()) => out.write_all(b"\n"),
            },
            OutputFormat::Table | OutputFormat::Wide => {
                self.add_labels(value, &mut table)?;
                let wide = self.format == OutputFormat::Wide;
                table
                    .write_rows(&mut out, rows, cells, wide, self.headers, self.color)
                    .and_then(|()| match value.footer().filter(|_| self.headers) {
                        Some(f) if f.ends_with('\n') => out.write_all(f.as_bytes()),
                        Some(f) => out.write_all(format!("{f}\n").as_bytes()),
                        None => Ok(()),
                    })
            }
            _ => {
                drop(out);
                return self.print(value);
            }
        };
        // A closed pipe is not an error (as in `raw`).
        let _ = written.and_then(|()| out.flush());
        Ok(())
    }

    /// With `--show-labels`, the LABELS column of `value`'s rows, last in `table`.
    fn add_labels<T: Render>(&self, value: &T, table: &mut Table) -> Result<(), Error> {
        if self.show_labels {
            let Some(labels) = value.labels() else {
                return Err(Error::usage(
                    "--show-labels is not supported here; it applies to lists of objects",
                ));
            };
            table.last_column("LABELS", labels);
        }
        Ok(())
    }
}

/// The `-o custom-columns` table of `value`.
fn custom_columns(c: &jsonpath::Columns, value: &Value, headers: bool) -> Result<String, Error> {
    let mut table = Table::new(&c.headers);
    let rows = c
        .rows(value)
        .map_err(|e| jsonpath_error("custom-columns", &e))?;
    for row in rows {
        table.row(row);
    }
    Ok(table.render(false, headers, false))
}

/// A template that fails on the data (an index outside its array), as kubectl reports it
/// (exit 1): the template parsed, so it is the data that does not fit.
fn jsonpath_error(format: &str, e: &jsonpath::JsonPathError) -> Error {
    Error::Other {
        message: format!("-o {format}: {e}"),
        hint: Some(
            "check the template against the objects (-o json shows them); [*] selects only what exists".into(),
        ),
    }
}

/// Objects a verb creates (or would, with `--dry-run=client`) in the `-o` format: a YAML
/// stream `kubectl apply -f -` takes, a JSON `List`, `kind.group/name` lines, JSONPath or
/// custom columns over that List, or `kind.group/name <suffix>` lines for the table formats.
pub fn print_objects(format: &OutputFormat, objects: &[Value], suffix: &str) -> Result<(), Error> {
    let text = objects_text(format, objects, suffix)?;
    raw(text.as_bytes());
    Ok(())
}

/// The text [`print_objects`] prints, for a verb that writes it to a file instead.
pub fn objects_text(
    format: &OutputFormat,
    objects: &[Value],
    suffix: &str,
) -> Result<String, Error> {
    let list = || kcore::kamaji::create::json_list(objects);
    let text = match format {
        OutputFormat::Yaml => yaml_stream(objects)?,
        OutputFormat::Json => to_json(&list())?,
        OutputFormat::Name => objects
            .iter()
            .map(|o| format!("{}\n", display_name(o)))
            .collect(),
        OutputFormat::JsonPath(t) => t
            .render(&list())
            .map_err(|e| jsonpath_error("jsonpath", &e))?,
        OutputFormat::CustomColumns(c) => custom_columns(c, &list(), true)?,
        OutputFormat::Table | OutputFormat::Wide => objects
            .iter()
            .map(|o| format!("{} {suffix}\n", display_name(o)))
            .collect(),
    };
    Ok(text)
}

/// The `-o json` form of a result as a JSON value, for the JSONPath formats.
fn as_value<T: Serialize>(value: &T) -> Result<Value, Error> {
    serde_json::to_value(value)
        .map_err(|e| Error::other(format!("cannot serialise the result as JSON: {e}")))
}

/// Writes bytes to stdout as they are (completion scripts, kubeconfigs). A closed pipe
/// (`| head`) is not an error.
pub fn raw(bytes: &[u8]) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(bytes).and_then(|_| out.flush());
}

/// Writes one line to stdout (`cluster.cluster.x-k8s.io/foo created`).
pub fn line(msg: &str) {
    raw(format!("{msg}\n").as_bytes());
}

fn stderr_color() -> bool {
    let no_color = std::env::var("NO_COLOR").ok();
    color_enabled(
        ColorWhen::Auto,
        no_color.as_deref(),
        std::io::stderr().is_terminal(),
    )
}

fn eprint(text: &str) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(text.as_bytes()).and_then(|_| err.flush());
}

/// A note on stderr (progress without a terminal, what a command is about to do).
pub fn info(msg: &str) {
    eprint(&format!("{msg}\n"));
}

/// "No clusters found." (or "... found in namespace NS.") on stderr: what a table format says
/// for an empty list of `what`.
pub fn none_found(what: &str, namespace: Option<&str>) {
    match namespace {
        Some(ns) => info(&format!("No {what} found in namespace {ns}.")),
        None => info(&format!("No {what} found.")),
    }
}

/// A question on stderr, without a newline (the answer is typed after it).
pub fn prompt(msg: &str) {
    eprint(msg);
}

/// Refuses (exit 2) when stdin is not a terminal, so there is nobody to ask before something is
/// destroyed: `refusing to <what> without confirmation: stdin is not a terminal`, and `hint`
/// (which names `--yes`). Every destructive verb says it the same way.
pub fn require_terminal(what: &str, hint: String) -> Result<(), Error> {
    if std::io::IsTerminal::is_terminal(&std::io::stdin()) {
        return Ok(());
    }
    Err(Error::Usage {
        message: format!("refusing to {what} without confirmation: stdin is not a terminal"),
        hint: Some(hint),
    })
}

/// Asks a yes/no question on the terminal (stderr), as kubectl does; anything but y/yes is no.
/// Callers ask only when stdin is a terminal and `--yes` was not given.
pub fn confirm(question: &str) -> Result<bool, Error> {
    prompt(&format!("{question} [y/N]: "));
    let mut answer = String::new();
    std::io::stdin()
        .read_line(&mut answer)
        .map_err(|e| Error::other(format!("cannot read the answer: {e}")))?;
    Ok(matches!(
        answer.trim().to_ascii_lowercase().as_str(),
        "y" | "yes"
    ))
}

/// `Warning: ...` on stderr, as kubectl prints warnings.
pub fn warn(msg: &str) {
    let head = if stderr_color() {
        "Warning:".yellow().to_string()
    } else {
        "Warning:".to_string()
    };
    eprint(&format!("{head} {msg}\n"));
}

/// The text of an error as it is printed: `error: <line>` and, if any, `hint: <hint>`.
pub fn error_text(e: &Error, color: bool) -> String {
    let (head, hint) = if color {
        (
            "error:".red().bold().to_string(),
            "hint:".cyan().to_string(),
        )
    } else {
        ("error:".to_string(), "hint:".to_string())
    };
    let mut s = format!("{head} {e}\n");
    // Every error gets its second line: a usage error without a specific hint points at help.
    let h = e.hint().or_else(|| {
        (e.exit_code() == crate::error::EXIT_USAGE)
            .then(|| "see --help for the accepted forms".to_string())
    });
    if let Some(h) = h {
        s.push_str(&format!("{hint} {h}\n"));
    }
    s
}

/// Prints an error on stderr: one line, plus a hint line.
pub fn error(e: &Error) {
    eprint(&error_text(e, stderr_color()));
}

/// kubectl's plugin-completion answer: one candidate per line, then `:<directive>`.
pub fn completions_text(candidates: &[String], directive: u32) -> String {
    let mut s = String::new();
    for c in candidates {
        s.push_str(c);
        s.push('\n');
    }
    s.push_str(&format!(":{directive}\n"));
    s
}

/// Prints kubectl's plugin-completion answer on stdout.
pub fn completions(candidates: &[String], directive: u32) {
    raw(completions_text(candidates, directive).as_bytes());
}

#[cfg(test)]
mod tests;
