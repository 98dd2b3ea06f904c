//! The CSV sweeps' common reading: named columns (any order, any case),
//! `#` comment lines, every error at `file:line` with the column.

use crate::error::Result;
use crate::fidelity::perr_at;

/// A CSV sweep: its header and its rows with their lines in the file.
pub struct Table<'a> {
    /// File name, for errors.
    pub file: &'a str,
    header: Vec<String>,
    rows: Vec<(usize, Vec<String>)>,
}

/// One row: its 1-based line and its fields.
pub struct Row<'t> {
    table: &'t Table<'t>,
    /// 1-based line of the row in the file.
    pub line: usize,
    fields: &'t [String],
}

impl<'a> Table<'a> {
    /// Read `src` (named `file` in errors). Errors on a missing header, a
    /// row with more fields than the header, and a file without rows.
    pub fn parse(src: &str, file: &'a str) -> Result<Table<'a>> {
        let mut header: Option<Vec<String>> = None;
        let mut rows = Vec::new();
        for (i, raw) in src.lines().enumerate() {
            let line = i + 1;
            let text = raw.trim();
            if text.is_empty() || text.starts_with('#') {
                continue;
            }
            let fields: Vec<String> = text.split(',').map(|f| f.trim().to_string()).collect();
            match &header {
                None => header = Some(fields.iter().map(|f| f.to_lowercase()).collect()),
                Some(h) if fields.len() > h.len() => {
                    return Err(perr_at(
                        file,
                        line,
                        None,
                        format!("{} fields, the header has {}", fields.len(), h.len()),
                    ))
                }
                Some(_) => rows.push((line, fields)),
            }
        }
        let header = header.ok_or_else(|| perr_at(file, 1, None, "empty file: no header"))?;
        if rows.is_empty() {
            return Err(perr_at(file, 1, None, "no data rows after the header"));
        }
        Ok(Table { file, header, rows })
    }

    /// Whether the header has column `name`.
    pub fn has(&self, name: &str) -> bool {
        self.col(name).is_some()
    }

    /// The first of `names` the header has.
    pub fn first_of<'n>(&self, names: &[&'n str]) -> Option<&'n str> {
        names.iter().copied().find(|n| self.has(n))
    }

    fn col(&self, name: &str) -> Option<usize> {
        self.header.iter().position(|h| h == name)
    }

    /// Error unless the header has every one of `names`.
    pub fn require(&self, names: &[&str]) -> Result<()> {
        match names.iter().find(|n| !self.has(n)) {
            Some(n) => Err(perr_at(
                self.file,
                1,
                Some(n),
                format!("missing column (the header is: {})", self.header.join(",")),
            )),
            None => Ok(()),
        }
    }

    /// The rows.
    pub fn rows(&self) -> impl Iterator<Item = Row<'_>> {
        self.rows.iter().map(|(line, fields)| Row {
            table: self,
            line: *line,
            fields,
        })
    }
}

impl Row<'_> {
    /// The text of column `name` ("" when absent or empty).
    pub fn text(&self, name: &str) -> &str {
        self.table
            .col(name)
            .and_then(|i| self.fields.get(i))
            .map_or("", String::as_str)
    }

    /// An error at this row and column.
    pub fn err(&self, name: &str, msg: impl std::fmt::Display) -> crate::error::Error {
        perr_at(self.table.file, self.line, Some(name), msg)
    }

    /// Column `name` as a finite number > 0.
    pub fn positive(&self, name: &str) -> Result<f64> {
        let t = self.text(name);
        match t.parse::<f64>() {
            Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
            Ok(v) => Err(self.err(name, format!("{v} must be a finite number > 0"))),
            Err(_) if t.is_empty() => Err(self.err(name, "missing value")),
            Err(_) => Err(self.err(name, format!("bad number `{t}`"))),
        }
    }

    /// Column `name` as a boolean (`1`/`0`, `true`/`false`, `yes`/`no`);
    /// `default` when the column is absent or empty.
    pub fn flag(&self, name: &str, default: bool) -> Result<bool> {
        match self.text(name).to_lowercase().as_str() {
            "" => Ok(default),
            "1" | "true" | "yes" | "causal" => Ok(true),
            "0" | "false" | "no" | "none" => Ok(false),
            t => Err(self.err(name, format!("`{t}`: expected 1/0, true/false or yes/no"))),
        }
    }
}

/// Seconds per unit of a time column (`time_s`, `time_ms`, `latency_ms`,
/// `time_us`), or `None` for a rate column (`tflops`).
pub fn time_unit(col: &str) -> Option<f64> {
    match col {
        "time_s" => Some(1.0),
        "time_ms" | "latency_ms" => Some(1e-3),
        "time_us" => Some(1e-6),
        _ => None,
    }
}

/// The columns a sweep may give its measurement in (exactly one).
pub const TIME_COLUMNS: [&str; 5] = ["time_s", "time_ms", "latency_ms", "time_us", "tflops"];

/// The measurement column of a sweep: exactly one of [`TIME_COLUMNS`].
pub fn time_column(t: &Table) -> Result<&'static str> {
    let given: Vec<&str> = TIME_COLUMNS.iter().copied().filter(|c| t.has(c)).collect();
    match given.as_slice() {
        [one] => Ok(one),
        [] => Err(perr_at(
            t.file,
            1,
            None,
            format!("no time column: give one of {}", TIME_COLUMNS.join(", ")),
        )),
        many => Err(perr_at(
            t.file,
            1,
            None,
            format!(
                "several time columns ({}): give exactly one",
                many.join(", ")
            ),
        )),
    }
}

/// The seconds a row took for `flops` of work, from its time or TFLOP/s column.
pub fn seconds(r: &Row, col: &str, flops: f64) -> Result<f64> {
    let v = r.positive(col)?;
    Ok(match time_unit(col) {
        Some(unit) => v * unit,
        None => flops / (v * 1e12),
    })
}

/// Largest fraction of the catalog peak a measurement may claim: above it
/// the time is almost surely in another unit than its column says (a
/// catalog peak is the boost-clock figure, so real kernels stay below 1).
pub const MAX_EFFICIENCY: f64 = 1.2;

/// Error unless `efficiency` is at most [`MAX_EFFICIENCY`].
pub fn plausible(r: &Row, col: &str, efficiency: f64, peak: f64) -> Result<()> {
    if efficiency > MAX_EFFICIENCY {
        return Err(r.err(
            col,
            format!(
                "{:.0} TFLOP/s is {efficiency:.2} × the chip's {:.0} TFLOP/s peak: is `{col}` in its unit?",
                efficiency * peak / 1e12,
                peak / 1e12
            ),
        ));
    }
    Ok(())
}
