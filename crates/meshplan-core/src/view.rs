/*!
Reports laid out for reading, independent of the output format: a [`Doc`]
is a list of blocks (a title, lines, notes, label/value fields, tables,
lists). Every report of the library builds its own `Doc` ([`Render`]); the
CLI turns it into text or Markdown, the web page into HTML, the Python
package into a notebook's HTML — so what a report shows, and in which
order, is decided once, here in the library.

Numbers arrive already formatted (the report picks the unit and the
digits); a table says which of its columns are numeric (right-aligned).
*/

use serde::Serialize;

use crate::units::Seconds;

/// One block of a document.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Block {
    /// A heading line (what the report is about).
    Title {
        /// The text.
        text: String,
    },
    /// A sentence.
    Line {
        /// The text.
        text: String,
    },
    /// A remark the reader should not miss ("note: …").
    Note {
        /// The text.
        text: String,
    },
    /// A yes/no answer with its reason ("VERDICT: …", "INFEASIBLE: …").
    Verdict {
        /// Whether the answer is good news.
        ok: bool,
        /// The label ("VERDICT", "INFEASIBLE").
        label: String,
        /// The text.
        text: String,
        /// Supporting items (reasons, suggestions).
        items: Vec<String>,
    },
    /// Label/value pairs (a two-column table without a header).
    Fields {
        /// The pairs; a label starting with two spaces is a sub-item.
        rows: Vec<(String, String)>,
    },
    /// A table with a header.
    Table(Table),
    /// A titled list of items.
    List {
        /// The list's title.
        title: String,
        /// The items.
        items: Vec<String>,
    },
}

/// A table: header, rows, and which columns are numeric.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Table {
    /// Column titles.
    pub header: Vec<String>,
    /// Rows (each as long as the header).
    pub rows: Vec<Vec<String>>,
    /// Columns to right-align (indices).
    pub numeric: Vec<usize>,
}

impl Table {
    /// A table with these column titles; columns whose title is in
    /// `numeric` are right-aligned.
    pub fn new(header: &[&str], numeric: &[&str]) -> Table {
        Table {
            header: header.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
            numeric: header
                .iter()
                .enumerate()
                .filter(|(_, h)| numeric.contains(h))
                .map(|(i, _)| i)
                .collect(),
        }
    }
    /// Append a row.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }
    /// Drop the columns whose cells are all empty (besides the header).
    pub fn drop_empty_columns(mut self) -> Table {
        let keep: Vec<bool> = (0..self.header.len())
            .map(|i| {
                self.rows
                    .iter()
                    .any(|r| r.get(i).is_some_and(|c| !c.is_empty()))
            })
            .collect();
        let pick = |v: Vec<String>| -> Vec<String> {
            v.into_iter()
                .enumerate()
                .filter(|(i, _)| keep.get(*i).copied().unwrap_or(true))
                .map(|(_, c)| c)
                .collect()
        };
        let mut new_index = Vec::new();
        let mut n = 0;
        for k in &keep {
            new_index.push(n);
            n += usize::from(*k);
        }
        self.numeric = self
            .numeric
            .iter()
            .filter(|&&i| keep.get(i).copied().unwrap_or(false))
            .map(|&i| new_index[i])
            .collect();
        self.header = pick(self.header);
        self.rows = self.rows.into_iter().map(pick).collect();
        self
    }
}

/// A report laid out for reading.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Doc {
    /// The blocks, in reading order.
    pub blocks: Vec<Block>,
}

impl Doc {
    /// An empty document.
    pub fn new() -> Doc {
        Doc::default()
    }
    /// Add a title.
    pub fn title(&mut self, text: impl Into<String>) -> &mut Self {
        self.blocks.push(Block::Title { text: text.into() });
        self
    }
    /// Add a sentence.
    pub fn line(&mut self, text: impl Into<String>) -> &mut Self {
        self.blocks.push(Block::Line { text: text.into() });
        self
    }
    /// Add a note.
    pub fn note(&mut self, text: impl Into<String>) -> &mut Self {
        self.blocks.push(Block::Note { text: text.into() });
        self
    }
    /// Add a verdict.
    pub fn verdict(
        &mut self,
        ok: bool,
        label: &str,
        text: impl Into<String>,
        items: Vec<String>,
    ) -> &mut Self {
        self.blocks.push(Block::Verdict {
            ok,
            label: label.into(),
            text: text.into(),
            items,
        });
        self
    }
    /// Add label/value fields.
    pub fn fields(&mut self, rows: Vec<(String, String)>) -> &mut Self {
        if !rows.is_empty() {
            self.blocks.push(Block::Fields { rows });
        }
        self
    }
    /// Add a table (nothing when it has no rows).
    pub fn table(&mut self, t: Table) -> &mut Self {
        if !t.rows.is_empty() {
            self.blocks.push(Block::Table(t));
        }
        self
    }
    /// Add a titled list (nothing when empty).
    pub fn list(&mut self, title: impl Into<String>, items: Vec<String>) -> &mut Self {
        if !items.is_empty() {
            self.blocks.push(Block::List {
                title: title.into(),
                items,
            });
        }
        self
    }
    /// Append another document's blocks.
    pub fn extend(&mut self, other: Doc) -> &mut Self {
        self.blocks.extend(other.blocks);
        self
    }
}

/// A report that lays itself out.
pub trait Render {
    /// The report as a document.
    fn doc(&self) -> Doc;
}

/// `("label", value)` for [`Doc::fields`].
pub fn field(label: &str, value: impl std::fmt::Display) -> (String, String) {
    (label.to_string(), value.to_string())
}

/// The time of a step whose compute and traffic may overlap: the lower
/// bound (full overlap, the max) and the upper one (none, the sum).
pub fn time_bounds(overlap_s: f64, none_s: f64) -> (String, String) {
    let (lo, hi) = (Seconds::new(overlap_s), Seconds::new(none_s));
    field("time (overlap / none)", format!("{lo} / {hi}"))
}

/// A percentage with one decimal ("41.3%").
pub fn pct(x: f64) -> String {
    format!("{:.1}%", 100.0 * x)
}

/// "yes" / "no".
pub fn yes_no(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

// ---------------------------------------------------------------- rendering

fn width(s: &str) -> usize {
    s.chars().count()
}

/// Plain text: label/value fields aligned across the whole document,
/// tables with a rule under the header and numeric columns right-aligned.
pub fn render_text(d: &Doc) -> String {
    render_text_width(d, None)
}

/// [`render_text`] for a screen `max` columns wide: a table wider than that
/// wraps its widest text column (see [`text_table_width`]); `None` never
/// wraps (piped output, files, snapshots).
pub fn render_text_width(d: &Doc, max: Option<usize>) -> String {
    let label_w = d
        .blocks
        .iter()
        .filter_map(|b| match b {
            Block::Fields { rows } => rows.iter().map(|r| width(&r.0)).max(),
            _ => None,
        })
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    let mut prev_fields = false;
    for b in &d.blocks {
        let is_fields = matches!(b, Block::Fields { .. });
        if is_fields && prev_fields {
            out.push('\n');
        }
        prev_fields = is_fields;
        match b {
            Block::Title { text } | Block::Line { text } => out.push_str(&format!("{text}\n")),
            Block::Note { text } => out.push_str(&format!("note: {text}\n")),
            Block::Verdict {
                label, text, items, ..
            } => {
                out.push_str(&format!("{label}: {text}\n"));
                for i in items {
                    out.push_str(&format!("  - {i}\n"));
                }
            }
            Block::Fields { rows } => {
                for (k, v) in rows {
                    let line = format!("{k}{}  {v}", " ".repeat(label_w - width(k)));
                    out.push_str(line.trim_end());
                    out.push('\n');
                }
            }
            Block::Table(t) => out.push_str(&text_table_width(t, max)),
            Block::List { title, items } => {
                out.push_str(&format!("{title}:\n"));
                for i in items {
                    out.push_str(&format!("  - {i}\n"));
                }
            }
        }
    }
    out
}

/// An aligned plain-text table.
pub fn text_table(t: &Table) -> String {
    text_table_width(t, None)
}

/// Narrowest a wrapped column gets: a long word still fits whole below this.
const MIN_WRAPPED: usize = 16;

/// Split `s` into lines of at most `w` characters at spaces (a longer word
/// keeps its own line).
fn wrap_words(s: &str, w: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut cur = String::new();
    for word in s.split(' ').filter(|x| !x.is_empty()) {
        if !cur.is_empty() && width(&cur) + 1 + width(word) > w {
            lines.push(std::mem::take(&mut cur));
        }
        if !cur.is_empty() {
            cur.push(' ');
        }
        cur.push_str(word);
    }
    lines.push(cur);
    lines
}

/// An aligned plain-text table at most `max` columns wide where it can be:
/// the widest text (non-numeric) column is narrowed and its cells wrapped
/// onto continuation lines (numbers are never split, so a table of numbers
/// stays as wide as it is).
pub fn text_table_width(t: &Table, max: Option<usize>) -> String {
    let ncol = t.header.len();
    let mut w = vec![0usize; ncol];
    for r in std::iter::once(&t.header).chain(&t.rows) {
        for (i, c) in r.iter().enumerate().take(ncol) {
            w[i] = w[i].max(width(c));
        }
    }
    let total = w.iter().sum::<usize>() + 2 * ncol.saturating_sub(1);
    let wrap = max.filter(|&m| total > m).and_then(|m| {
        let i = (0..ncol)
            .filter(|i| !t.numeric.contains(i))
            .max_by_key(|&i| w[i])?;
        let narrower = w[i].saturating_sub(total - m).max(MIN_WRAPPED);
        (narrower < w[i]).then_some((i, narrower))
    });
    let rows: Vec<Vec<String>> = match wrap {
        None => t.rows.clone(),
        Some((col, cw)) => {
            // the column never gets narrower than its longest word
            let longest_word = |r: &Vec<String>| {
                r.get(col)
                    .map_or(0, |c| c.split(' ').map(width).max().unwrap_or(0))
            };
            w[col] = t
                .rows
                .iter()
                .map(longest_word)
                .fold(cw.max(width(&t.header[col])), usize::max);
            t.rows
                .iter()
                .flat_map(|r| {
                    let parts = wrap_words(r.get(col).map_or("", String::as_str), w[col]);
                    parts.into_iter().enumerate().map(move |(k, p)| {
                        (0..r.len())
                            .map(|i| match (i == col, k) {
                                (true, _) => p.clone(),
                                (false, 0) => r[i].clone(),
                                (false, _) => String::new(),
                            })
                            .collect()
                    })
                })
                .collect()
        }
    };
    let line = |r: &Vec<String>| -> String {
        let mut s = String::new();
        for (i, c) in r.iter().enumerate().take(ncol) {
            let pad = " ".repeat(w[i] - width(c));
            if i > 0 {
                s.push_str("  ");
            }
            if t.numeric.contains(&i) {
                s.push_str(&pad);
                s.push_str(c);
            } else {
                s.push_str(c);
                s.push_str(&pad);
            }
        }
        format!("{}\n", s.trim_end())
    };
    let mut out = line(&t.header);
    out.push_str(&"-".repeat(w.iter().sum::<usize>() + 2 * ncol.saturating_sub(1)));
    out.push('\n');
    for r in &rows {
        out.push_str(&line(r));
    }
    out
}

fn md_cell(s: &str) -> String {
    s.replace('|', "\\|")
}

fn md_table(header: &[String], rows: &[Vec<String>], numeric: &[usize]) -> String {
    let mut out = format!(
        "| {} |\n|{}|\n",
        header
            .iter()
            .map(|h| md_cell(h))
            .collect::<Vec<_>>()
            .join(" | "),
        (0..header.len())
            .map(|i| if numeric.contains(&i) { "---:" } else { "---" })
            .collect::<Vec<_>>()
            .join("|")
    );
    for r in rows {
        out.push_str(&format!(
            "| {} |\n",
            r.iter().map(|c| md_cell(c)).collect::<Vec<_>>().join(" | ")
        ));
    }
    out.push('\n');
    out
}

/// Markdown: a heading, paragraphs, quoted notes, tables.
pub fn render_markdown(d: &Doc) -> String {
    let mut out = String::new();
    for b in &d.blocks {
        match b {
            Block::Title { text } => out.push_str(&format!("## {text}\n\n")),
            Block::Line { text } => out.push_str(&format!("{text}\n\n")),
            Block::Note { text } => out.push_str(&format!("> note: {text}\n\n")),
            Block::Verdict {
                label, text, items, ..
            } => {
                out.push_str(&format!("**{label}:** {text}\n\n"));
                for i in items {
                    out.push_str(&format!("- {i}\n"));
                }
                if !items.is_empty() {
                    out.push('\n');
                }
            }
            Block::Fields { rows } => {
                let rows: Vec<Vec<String>> = rows
                    .iter()
                    .map(|(k, v)| vec![k.trim().to_string(), v.clone()])
                    .collect();
                out.push_str(&md_table(&["".into(), "".into()], &rows, &[]));
            }
            Block::Table(t) => out.push_str(&md_table(&t.header, &t.rows, &t.numeric)),
            Block::List { title, items } => {
                out.push_str(&format!("**{title}**\n\n"));
                for i in items {
                    out.push_str(&format!("- {i}\n"));
                }
                out.push('\n');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_columns_are_dropped_and_numeric_indices_follow() {
        let mut t = Table::new(&["a", "b", "c"], &["c"]);
        t.row(vec!["1".into(), String::new(), "3".into()]);
        let t = t.drop_empty_columns();
        assert_eq!(t.header, ["a", "c"]);
        assert_eq!(t.rows, vec![vec!["1".to_string(), "3".to_string()]]);
        assert_eq!(t.numeric, [1]);
    }

    fn wide_table() -> Table {
        let mut t = Table::new(&["id", "what", "V"], &["V"]);
        t.row(vec![
            "a".into(),
            "zero-1/2: reduce-scatter gradients over the data-parallel ranks".into(),
            "109.1 MB".into(),
        ]);
        t.row(vec!["bb".into(), "short".into(), "7 kB".into()]);
        t
    }

    #[test]
    fn wide_tables_wrap_their_widest_text_column_to_the_screen() {
        let t = wide_table();
        let full = text_table(&t);
        assert!(full.lines().any(|l| width(l) > 40), "{full}");
        assert_eq!(text_table_width(&t, None), full);
        assert_eq!(text_table_width(&t, Some(500)), full);
        let narrow = text_table_width(&t, Some(40));
        assert!(narrow.lines().all(|l| width(l) <= 40), "{narrow}");
        // the words are all there, in order, on continuation lines of row 1
        let lines: Vec<&str> = narrow.lines().collect();
        assert!(
            lines[2].starts_with("a ") && lines[2].ends_with("109.1 MB"),
            "{narrow}"
        );
        let words: Vec<&str> = lines[2..lines.len() - 1]
            .iter()
            .flat_map(|l| l.split_whitespace())
            .filter(|w| !["a", "109.1", "MB"].contains(w))
            .collect();
        assert_eq!(
            words.join(" "),
            "zero-1/2: reduce-scatter gradients over the data-parallel ranks"
        );
        assert!(lines.last().unwrap().starts_with("bb"), "{narrow}");
        assert!(lines.last().unwrap().ends_with("7 kB"), "{narrow}");
        // a screen too narrow for anything: the column keeps its longest word
        let tiny = text_table_width(&t, Some(5));
        assert!(tiny.contains("data-parallel"), "{tiny}");
    }

    #[test]
    fn documents_wrap_only_their_tables() {
        let mut d = Doc::new();
        d.fields(vec![field(
            "a long label",
            "a long value that is not a table",
        )]);
        d.table(wide_table());
        let text = render_text_width(&d, Some(40));
        assert!(text.starts_with("a long label  a long value that is not a table\n"));
        assert_eq!(render_text_width(&d, None), render_text(&d));
    }
}
