//! Tables and field lists as kubectl prints them (comfy-table; colours only when asked).

use owo_colors::OwoColorize;

/// What a cell means, for its colour.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Tone {
    #[default]
    Plain,
    /// Healthy: green.
    Good,
    /// Failed: red.
    Bad,
    /// Unknown or in progress: yellow.
    Warn,
    /// Unimportant: dimmed.
    Dim,
    /// Emphasis: bold.
    Bold,
}

/// One table cell: text and tone.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Cell {
    pub text: String,
    pub tone: Tone,
}

impl Cell {
    pub fn new(text: impl Into<String>, tone: Tone) -> Cell {
        Cell {
            text: text.into(),
            tone,
        }
    }
    /// A `True`/`False`/`Unknown` cell coloured by polarity.
    pub fn status(status: &str) -> Cell {
        let tone = match status {
            "True" => Tone::Good,
            "False" => Tone::Bad,
            _ => Tone::Warn,
        };
        Cell::new(status, tone)
    }
    fn styled(&self, color: bool) -> String {
        if !color {
            return self.text.clone();
        }
        match self.tone {
            Tone::Plain => self.text.clone(),
            Tone::Good => self.text.green().to_string(),
            Tone::Bad => self.text.red().to_string(),
            Tone::Warn => self.text.yellow().to_string(),
            Tone::Dim => self.text.dimmed().to_string(),
            Tone::Bold => self.text.bold().to_string(),
        }
    }
}

impl From<&str> for Cell {
    fn from(s: &str) -> Cell {
        Cell::new(s, Tone::Plain)
    }
}
impl From<String> for Cell {
    fn from(s: String) -> Cell {
        Cell::new(s, Tone::Plain)
    }
}
impl From<&String> for Cell {
    fn from(s: &String) -> Cell {
        Cell::new(s.clone(), Tone::Plain)
    }
}

/// A borderless table like `kubectl get`: upper-case headers, columns three spaces apart.
/// Columns added with [`Table::wide`] appear only with `-o wide`.
#[derive(Clone, Debug, Default)]
pub struct Table {
    headers: Vec<String>,
    wide_from: usize,
    rows: Vec<Vec<Cell>>,
    /// A column printed after all others in every format (`--show-labels`).
    last: Option<(String, Vec<String>)>,
}

impl Table {
    /// Columns shown in every table format.
    pub fn new<I: IntoIterator<Item = S>, S: AsRef<str>>(headers: I) -> Table {
        let headers: Vec<String> = headers
            .into_iter()
            .map(|h| h.as_ref().to_uppercase())
            .collect();
        Table {
            wide_from: headers.len(),
            headers,
            rows: Vec::new(),
            last: None,
        }
    }
    /// A table of `rows` under `headers`, one row of `cells` each; `None` when there are no
    /// rows (a section then says so in its own words).
    pub fn of<R, I, C>(headers: &[&str], rows: &[R], cells: impl Fn(&R) -> I) -> Option<Table>
    where
        I: IntoIterator<Item = C>,
        C: Into<Cell>,
    {
        if rows.is_empty() {
            return None;
        }
        let mut t = Table::new(headers);
        for r in rows {
            t.row(cells(r));
        }
        Some(t)
    }
    /// Extra columns shown only with `-o wide`, after the others.
    pub fn wide<I: IntoIterator<Item = S>, S: AsRef<str>>(mut self, headers: I) -> Table {
        self.headers
            .extend(headers.into_iter().map(|h| h.as_ref().to_uppercase()));
        self
    }
    /// Adds a row: one cell per column (normal and wide); missing cells print as empty.
    pub fn row<I: IntoIterator<Item = C>, C: Into<Cell>>(&mut self, cells: I) -> &mut Table {
        self.rows.push(cells.into_iter().map(Into::into).collect());
        self
    }
    /// A column after every other one, in the table and wide formats (kubectl's LABELS).
    /// `values` holds one entry per row, in row order.
    pub fn last_column(&mut self, header: &str, values: Vec<String>) -> &mut Table {
        self.last = Some((header.to_uppercase(), values));
        self
    }
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// The table as text, one line per row, without trailing spaces.
    pub fn render(&self, wide: bool, headers: bool, color: bool) -> String {
        use comfy_table::{ContentArrangement, presets};
        let shown = if wide {
            self.headers.len()
        } else {
            self.wide_from
        };
        let mut header: Vec<&str> = self.headers[..shown].iter().map(String::as_str).collect();
        if let Some((h, _)) = &self.last {
            header.push(h);
        }
        let ncols = header.len();
        if ncols == 0 {
            return String::new();
        }
        let mut t = comfy_table::Table::new();
        t.load_style(presets::NOTHING)
            .set_content_arrangement(ContentArrangement::Disabled)
            .force_no_tty();
        if headers {
            t.set_header(header.iter().map(comfy_table::Cell::new));
        }
        for (n, r) in self.rows.iter().enumerate() {
            let mut cells: Vec<String> = (0..shown)
                .map(|i| r.get(i).map(|c| c.styled(color)).unwrap_or_default())
                .collect();
            if let Some((_, values)) = &self.last {
                cells.push(values.get(n).cloned().unwrap_or_default());
            }
            t.add_row(cells.into_iter().map(comfy_table::Cell::new));
        }
        for (i, col) in t.column_iter_mut().enumerate() {
            col.set_padding((0, if i + 1 == ncols { 0 } else { 3 }));
        }
        let mut out = String::new();
        for line in t.lines() {
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// Key/value lines (`Key:   value`), aligned, for single-object summaries like `version`.
#[derive(Clone, Debug, Default)]
pub struct Fields {
    rows: Vec<(String, Cell)>,
}

impl Fields {
    pub fn new() -> Fields {
        Fields::default()
    }
    pub fn add(&mut self, key: impl Into<String>, value: impl Into<Cell>) -> &mut Fields {
        self.rows.push((key.into(), value.into()));
        self
    }
    pub fn render(&self, color: bool) -> String {
        let width = self
            .rows
            .iter()
            .map(|(k, _)| k.chars().count() + 1)
            .max()
            .unwrap_or(0);
        let mut out = String::new();
        for (k, v) in &self.rows {
            let key = format!("{k}:");
            out.push_str(&format!("{key:<width$}   {}", v.styled(color)));
            let trimmed = out.trim_end().len();
            out.truncate(trimmed);
            out.push('\n');
        }
        out
    }
}
