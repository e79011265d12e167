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

impl Table {
    /// Writes `rows` under this table's headers (its own rows, if any, are not written) to
    /// `out` exactly as [`Table::render`] prints them, `cells` making a row's cells each time
    /// they are needed: once to measure the columns, once to write the row. A fleet-sized
    /// table is then never held whole, neither its cells nor its text. A column set with
    /// [`Table::last_column`] holds one value per row of `rows`. Cells of anything but
    /// printable ASCII (another script, a line break, an escape) are measured as comfy-table
    /// measures them: the table is then built and rendered whole.
    pub fn write_rows<R>(
        &self,
        out: &mut impl std::io::Write,
        rows: &[R],
        cells: impl Fn(&R) -> Vec<Cell>,
        wide: bool,
        headers: bool,
        color: bool,
    ) -> std::io::Result<()> {
        let shown = if wide {
            self.headers.len()
        } else {
            self.wide_from
        };
        let last = self.last.as_ref();
        let ncols = shown + usize::from(last.is_some());
        if ncols == 0 {
            return Ok(());
        }
        // comfy-table's widths: the widest line of each column, at least 1 (padding aside).
        let mut widths = vec![1usize; ncols];
        let plain = |s: &str| s.bytes().all(|b| (0x20..0x7f).contains(&b));
        let mut measure = |i: usize, s: &str| {
            if !plain(s) || s.len() > usize::from(u16::MAX) {
                return false;
            }
            widths[i] = widths[i].max(s.len());
            true
        };
        let mut simple = true;
        if headers {
            let header = self.headers[..shown].iter().chain(last.map(|(h, _)| h));
            for (i, h) in header.enumerate() {
                simple &= measure(i, h);
            }
        }
        for (n, r) in rows.iter().enumerate() {
            if !simple {
                break;
            }
            let row = cells(r);
            for i in 0..shown {
                simple &= measure(i, row.get(i).map_or("", |c| c.text.as_str()));
            }
            if let Some((_, values)) = last {
                simple &= measure(shown, values.get(n).map_or("", String::as_str));
            }
        }
        if !simple {
            let mut whole = self.clone();
            whole.rows = rows.iter().map(&cells).collect();
            return out.write_all(whole.render(wide, headers, color).as_bytes());
        }
        let mut line = String::new();
        let mut write_line =
            |out: &mut dyn std::io::Write, cols: &mut dyn Iterator<Item = (String, usize)>| {
                line.clear();
                for (i, (text, width)) in cols.enumerate() {
                    line.push_str(&text);
                    let pad = widths[i] - width + if i + 1 == ncols { 0 } else { 3 };
                    line.extend(std::iter::repeat_n(' ', pad));
                }
                let end = line.trim_end().len();
                line.truncate(end);
                line.push('\n');
                out.write_all(line.as_bytes())
            };
        if headers {
            let header = self.headers[..shown].iter().chain(last.map(|(h, _)| h));
            write_line(out, &mut header.map(|h| (h.clone(), h.len())))?;
        }
        for (n, r) in rows.iter().enumerate() {
            let row = cells(r);
            let shown_cells = (0..shown).map(|i| match row.get(i) {
                // comfy-table closes a style left open (a colour's own reset is not a full
                // reset): its cell says how.
                Some(c) if color && c.tone != Tone::Plain => {
                    let styled = comfy_table::Cell::new(c.styled(color)).content();
                    (styled, c.text.len())
                }
                Some(c) => (c.text.clone(), c.text.len()),
                None => (String::new(), 0),
            });
            let last_cell = last.map(|(_, values)| {
                let v = values.get(n).cloned().unwrap_or_default();
                let w = v.len();
                (v, w)
            });
            write_line(out, &mut shown_cells.chain(last_cell))?;
        }
        Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    /// `write_rows` prints what `render` prints, byte for byte: tables of every shape (empty
    /// and missing cells, spaces at either end, wide columns, a last column, no headers,
    /// colours), and the whole-table fallback (another script, a line break, an escape).
    #[test]
    fn rows_written_one_by_one_print_as_the_whole_table() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        let words = [
            "",
            " ",
            "a",
            "web-1",
            "  padded ",
            "True",
            "<none>",
            "x=y,z=w",
            "Ünïcode",
            "two\nlines",
            "\u{1b}[1mbold\u{1b}[0m",
            "日本",
            "tab\there",
        ];
        let tones = [
            Tone::Plain,
            Tone::Good,
            Tone::Bad,
            Tone::Warn,
            Tone::Dim,
            Tone::Bold,
        ];
        for case in 0..600 {
            // Half the cases plain ASCII only (the streamed path), half anything.
            let pick = |n: usize| if case % 2 == 0 { n % 8 } else { n };
            let ncols = 1 + next(5);
            let names: Vec<String> = (0..ncols)
                .map(|i| format!("h{i}{}", words[pick(next(13))]))
                .collect();
            let narrow = next(ncols + 1);
            let mut t = Table::new(&names[..narrow]).wide(&names[narrow..]);
            let nrows = next(7);
            let rows: Vec<Vec<Cell>> = (0..nrows)
                .map(|_| {
                    (0..next(ncols + 2))
                        .map(|_| Cell::new(words[pick(next(13))], tones[next(6)]))
                        .collect()
                })
                .collect();
            if next(3) == 0 {
                let values = (0..nrows + next(2))
                    .map(|_| words[pick(next(13))].to_string())
                    .collect();
                t.last_column("labels", values);
            }
            let mut whole = t.clone();
            for r in &rows {
                whole.row(r.clone());
            }
            for (wide, headers, color) in [
                (false, true, false),
                (true, true, false),
                (false, false, true),
                (true, true, true),
                (true, false, false),
            ] {
                let mut out = Vec::new();
                t.write_rows(&mut out, &rows, Clone::clone, wide, headers, color)
                    .unwrap();
                assert_eq!(
                    String::from_utf8(out).unwrap(),
                    whole.render(wide, headers, color),
                    "case {case}: {names:?} {rows:?} wide={wide} headers={headers} color={color}"
                );
            }
        }
    }
}
