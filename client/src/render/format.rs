//! The output flags' values: `-o` ([`OutputFormat`]), `--color` ([`ColorWhen`]) and what the
//! CLI layer parses them into ([`OutputOptions`]).

use super::jsonpath;

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
