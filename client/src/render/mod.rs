//! The only place that prints.
//!
//! - [`Printer::print`] writes anything implementing [`Render`] as a kubectl-looking table
//!   (`-o table|wide`), key/value fields, JSON, YAML or `kind.group/name` lines (`-o name`).
//! - [`line`], [`warn`], [`error`] and [`raw`] write messages; [`completions`] writes kubectl's
//!   plugin-completion answer.
//! - [`Progress`] and [`wait_until`] show spinners and bars on stderr when it is a terminal, and
//!   plain lines otherwise.

use std::io::{IsTerminal, Write};

use owo_colors::OwoColorize;
use serde::Serialize;
use serde_json::Value;

use crate::error::Error;

/// `-o` values.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum OutputFormat {
    /// kubectl-looking table
    #[default]
    Table,
    /// table with extra columns
    Wide,
    /// JSON, stable for scripts
    Json,
    /// YAML, stable for scripts
    Yaml,
    /// kind.group/name, one a line
    Name,
    /// `jsonpath=TEMPLATE` or `jsonpath-file=FILE`: kubectl's JSONPath over the `-o json` form
    JsonPath(jsonpath::Template),
    /// `custom-columns=HEADER:PATH,…` or `custom-columns-file=FILE`: a table of those columns
    CustomColumns(jsonpath::Columns),
}

impl OutputFormat {
    /// Formats a script reads (`-o json|yaml|jsonpath|custom-columns`): empty results print as
    /// data, not as "No resources found".
    pub fn is_structured(&self) -> bool {
        !matches!(
            self,
            OutputFormat::Table | OutputFormat::Wide | OutputFormat::Name
        )
    }
    /// The formats that take text after `=`, with what they print, for help and errors.
    pub const TEMPLATED: [(&'static str, &'static str); 4] = [
        ("jsonpath=TEMPLATE", "kubectl's JSONPath over the JSON form"),
        (
            "jsonpath-file=FILE",
            "the same, the template read from FILE",
        ),
        (
            "custom-columns=HEADER:PATH,...",
            "a table of JSONPath columns",
        ),
        (
            "custom-columns-file=FILE",
            "the same, headers and paths read from FILE",
        ),
    ];
}

/// `--color` values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ColorWhen {
    /// colour on a terminal unless NO_COLOR is set
    #[default]
    Auto,
    /// always colour (overrides NO_COLOR)
    Always,
    /// never colour
    Never,
}

/// Whether to colour, given the flag, `NO_COLOR` and whether the stream is a terminal.
pub fn color_enabled(when: ColorWhen, no_color_env: Option<&str>, is_tty: bool) -> bool {
    match when {
        ColorWhen::Always => true,
        ColorWhen::Never => false,
        ColorWhen::Auto => is_tty && no_color_env.is_none_or(str::is_empty),
    }
}

impl OutputFormat {
    /// Every `-o` value: the value, its name and what it prints.
    pub const ALL: [(OutputFormat, &'static str, &'static str); 5] = [
        (OutputFormat::Table, "table", "kubectl-looking table"),
        (OutputFormat::Wide, "wide", "table with extra columns"),
        (OutputFormat::Json, "json", "JSON, stable for scripts"),
        (OutputFormat::Yaml, "yaml", "YAML, stable for scripts"),
        (OutputFormat::Name, "name", "kind.group/name, one a line"),
    ];
}

impl ColorWhen {
    /// Every `--color` value: the value, its name and what it means.
    pub const ALL: [(ColorWhen, &'static str, &'static str); 3] = [
        (
            ColorWhen::Auto,
            "auto",
            "colour on a terminal unless NO_COLOR is set",
        ),
        (
            ColorWhen::Always,
            "always",
            "always colour (overrides NO_COLOR)",
        ),
        (ColorWhen::Never, "never", "never colour"),
    ];
}

/// Display and FromStr over an `ALL` table, so flags parse and print the one list of names.
macro_rules! named_values {
    ($t:ty, $what:literal) => {
        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                let name = <$t>::ALL
                    .iter()
                    .find(|(v, _, _)| v == self)
                    .map(|(_, n, _)| *n);
                f.write_str(name.unwrap_or_default())
            }
        }
        impl std::str::FromStr for $t {
            type Err = String;
            fn from_str(s: &str) -> Result<$t, String> {
                <$t>::ALL
                    .iter()
                    .find(|(_, n, _)| *n == s)
                    .map(|(v, _, _)| *v)
                    .ok_or_else(|| {
                        let names: Vec<&str> = <$t>::ALL.iter().map(|(_, n, _)| *n).collect();
                        format!("invalid {} {s:?} (use one of: {})", $what, names.join(", "))
                    })
            }
        }
    };
}
named_values!(ColorWhen, "--color value");

impl std::fmt::Display for OutputFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = match self {
            OutputFormat::JsonPath(_) => "jsonpath",
            OutputFormat::CustomColumns(_) => "custom-columns",
            simple => OutputFormat::ALL
                .iter()
                .find(|(v, _, _)| v == simple)
                .map(|(_, n, _)| *n)
                .unwrap_or_default(),
        };
        f.write_str(name)
    }
}

/// How to print: `-o`, `--no-headers`, `--show-labels` and `--color`, as parsed by the CLI layer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OutputOptions {
    pub output: OutputFormat,
    pub no_headers: bool,
    pub show_labels: bool,
    pub color: ColorWhen,
}

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
    let group = av.rsplit_once('/').map(|(g, _)| g).unwrap_or("");
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
            OutputFormat::CustomColumns(c) => {
                let mut table = Table::new(&c.headers);
                let rows = c
                    .rows(&as_value(value)?)
                    .map_err(|e| jsonpath_error("custom-columns", &e))?;
                for row in rows {
                    table.row(row);
                }
                Ok(table.render(false, self.headers, false))
            }
            OutputFormat::Yaml => to_yaml(value),
            OutputFormat::Name => match value.names() {
                Some(names) => Ok(names.iter().map(|n| format!("{n}\n")).collect()),
                None => Err(Error::usage(
                    "-o name is not supported here; use -o table, wide, json or yaml",
                )),
            },
            OutputFormat::Table | OutputFormat::Wide => Ok(match value.human() {
                Human::Table(mut t) => {
                    if self.show_labels {
                        let Some(labels) = value.labels() else {
                            return Err(Error::usage(
                                "--show-labels is not supported here; it applies to lists of objects",
                            ));
                        };
                        t.last_column("LABELS", labels);
                    }
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
                if self.show_labels {
                    let Some(labels) = value.labels() else {
                        return Err(Error::usage(
                            "--show-labels is not supported here; it applies to lists of objects",
                        ));
                    };
                    table.last_column("LABELS", labels);
                }
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
        OutputFormat::CustomColumns(c) => {
            let mut table = Table::new(&c.headers);
            let rows = c
                .rows(&list())
                .map_err(|e| jsonpath_error("custom-columns", &e))?;
            for row in rows {
                table.row(row);
            }
            table.render(false, true, false)
        }
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

pub mod jsonpath;
mod progress;
mod table;
pub use progress::{Backoff, Fault, Poll, Progress, Wait, classify, wait_until};
pub use table::{Cell, Fields, Table, Tone};

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn color_rules() {
        assert!(color_enabled(ColorWhen::Auto, None, true));
        assert!(!color_enabled(ColorWhen::Auto, Some("1"), true));
        assert!(color_enabled(ColorWhen::Auto, Some(""), true));
        assert!(!color_enabled(ColorWhen::Auto, None, false));
        assert!(color_enabled(ColorWhen::Always, Some("1"), false));
        assert!(!color_enabled(ColorWhen::Never, None, true));
    }

    #[test]
    fn value_names_round_trip() {
        for (v, name, _) in OutputFormat::ALL {
            assert_eq!(v.to_string(), name);
        }
        for (v, name, _) in ColorWhen::ALL {
            assert_eq!(name.parse::<ColorWhen>(), Ok(v));
        }
        assert!(
            "sometimes"
                .parse::<ColorWhen>()
                .unwrap_err()
                .contains("auto, always")
        );
    }

    #[test]
    fn yaml_stream_round_trips() {
        let objects = [
            serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}}),
            serde_json::json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
                "metadata": {"name": "prod"}}),
        ];
        let y = yaml_stream(&objects).unwrap();
        assert_eq!(y.matches("---\n").count(), 2);
        assert!(y.contains("name: prod"), "{y}");
        assert_eq!(display_name(&objects[0]), "namespace/a");
        assert_eq!(display_name(&objects[1]), "cluster.cluster.x-k8s.io/prod");
    }

    fn sample() -> Table {
        let mut t = Table::new(["name", "ready", "age"]).wide(["node"]);
        t.row(["web-1", "True", "5m", "node-a"]);
        t.row([
            Cell::from("database-primary"),
            Cell::status("False"),
            Cell::from("12d"),
            Cell::from("node-b"),
        ]);
        t
    }

    #[test]
    fn table_looks_like_kubectl_get() {
        let t = sample();
        assert_eq!(
            t.render(false, true, false),
            "NAME               READY   AGE\nweb-1              True    5m\ndatabase-primary   False   12d\n"
        );
        assert_eq!(
            t.render(true, false, false),
            "web-1              True    5m    node-a\ndatabase-primary   False   12d   node-b\n"
        );
    }

    #[test]
    fn coloured_cells_keep_columns_aligned() {
        let t = sample();
        let plain = t.render(false, true, false);
        let coloured = t.render(false, true, true);
        assert!(
            coloured.contains("\u{1b}[31mFalse\u{1b}[39m"),
            "{coloured:?}"
        );
        let strip = |s: &str| {
            let mut out = String::new();
            let mut in_esc = false;
            for c in s.chars() {
                match (in_esc, c) {
                    (false, '\u{1b}') => in_esc = true,
                    (true, 'm') => in_esc = false,
                    (true, _) => {}
                    (false, c) => out.push(c),
                }
            }
            out
        };
        assert_eq!(strip(&coloured), plain);
    }

    #[test]
    fn fields_align_keys() {
        let mut f = Fields::new();
        f.add("Client Version", "v0.1.0")
            .add("Cluster API", "v1beta2");
        assert_eq!(
            f.render(false),
            "Client Version:   v0.1.0\nCluster API:      v1beta2\n"
        );
    }

    #[derive(Serialize)]
    struct Items {
        items: Vec<String>,
        #[serde(rename = "apiVersion")]
        api_version: String,
    }
    impl Render for Items {
        fn human(&self) -> Human {
            let mut t = Table::new(["name"]);
            for i in &self.items {
                t.row([i.as_str()]);
            }
            Human::Table(t)
        }
        fn names(&self) -> Option<Vec<String>> {
            Some(
                self.items
                    .iter()
                    .map(|i| object_name("Cluster", "cluster.x-k8s.io", i))
                    .collect(),
            )
        }
    }

    fn printer(format: OutputFormat) -> Printer {
        Printer {
            format,
            headers: true,
            show_labels: false,
            color: false,
        }
    }

    #[test]
    fn jsonpath_custom_columns_and_labels() {
        let v = Items {
            items: vec!["a".into(), "b".into()],
            api_version: "v9".into(),
        };
        let t = jsonpath::Template::parse("{.items[*]} {.apiVersion}").unwrap();
        assert_eq!(
            printer(OutputFormat::JsonPath(t)).format(&v).unwrap(),
            "a b v9"
        );
        let c = jsonpath::Columns::parse("N:@,V:$.apiVersion").unwrap();
        assert_eq!(
            printer(OutputFormat::CustomColumns(c)).format(&v).unwrap(),
            "N   V\na   v9\nb   v9\n"
        );
        let labelled = Printer {
            show_labels: true,
            ..printer(OutputFormat::Table)
        };
        let e = labelled.format(&v).unwrap_err();
        assert!(e.to_string().contains("--show-labels is not supported"));
    }

    #[test]
    fn json_yaml_and_name_outputs_are_stable() {
        let v = Items {
            items: vec!["a".into(), "b".into()],
            api_version: "v1".into(),
        };
        assert_eq!(
            printer(OutputFormat::Json).format(&v).unwrap(),
            "{\n  \"items\": [\n    \"a\",\n    \"b\"\n  ],\n  \"apiVersion\": \"v1\"\n}\n"
        );
        let y = printer(OutputFormat::Yaml).format(&v).unwrap();
        let back: serde_json::Value = serde_saphyr::from_str(&y).unwrap();
        assert_eq!(
            back,
            serde_json::json!({"items": ["a", "b"], "apiVersion": "v1"})
        );
        assert_eq!(
            printer(OutputFormat::Name).format(&v).unwrap(),
            "cluster.cluster.x-k8s.io/a\ncluster.cluster.x-k8s.io/b\n"
        );
        assert_eq!(
            printer(OutputFormat::Table).format(&v).unwrap(),
            "NAME\na\nb\n"
        );
    }

    #[test]
    fn errors_print_one_line_and_a_hint() {
        let e = Error::NotInstalled {
            product: "Cluster API".into(),
            group: "cluster.x-k8s.io".into(),
            install: "install it with clusterctl init".into(),
            context: "kind-mgmt".into(),
        };
        let text = error_text(&e, false);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(
            lines[0],
            "error: Cluster API is not installed on this cluster (no cluster.x-k8s.io API); install it with clusterctl init"
        );
        assert!(lines[1].starts_with("hint: context \"kind-mgmt\""));
    }

    #[test]
    fn completion_answer_ends_with_directive() {
        assert_eq!(completions_text(&["a".into(), "b".into()], 4), "a\nb\n:4\n");
        assert_eq!(completions_text(&[], 0), ":0\n");
    }

    #[tokio::test]
    async fn wait_until_times_out_with_last_status() {
        let mut n = 0;
        let r: Result<(), Error> = wait_until(
            "waiting for x",
            Duration::from_millis(50),
            Duration::from_millis(10),
            || {
                n += 1;
                let k = n;
                async move { Ok(Poll::Pending(format!("step {k}"))) }
            },
        )
        .await;
        let e = r.unwrap_err();
        assert!(matches!(e, Error::Timeout { .. }));
        assert!(
            e.to_string()
                .starts_with("timed out after 50ms while waiting for x (last seen: step"),
            "{e}"
        );
        let r = wait_until(
            "y",
            Duration::from_secs(5),
            Duration::from_millis(1),
            || async { Ok(Poll::Ready(7)) },
        )
        .await;
        assert_eq!(r.unwrap(), 7);
    }
}
