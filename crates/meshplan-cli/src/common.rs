//! Helpers shared by the subcommands: file reading with context, catalog and
//! scenario loading, JSON and explanation output, error printing.
//!
//! This is the only place (besides the command modules) where the CLI touches
//! the file system; `meshplan-core` parses text it is handed.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use anyhow::{Context, Result};
use meshplan_core::scenario::Scenario;
use meshplan_core::trace::{render_markdown, render_text, Step};
use meshplan_core::Catalog;

/// Write report text to stdout. A closed pipe (the reader stopped, as `head`
/// does) exits with status 0 like other Unix tools; any other write error
/// exits with status 2 and a message on stderr.
pub fn write_out(args: std::fmt::Arguments) {
    use std::io::Write;
    if let Err(e) = std::io::stdout().lock().write_fmt(args) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        write_err(format_args!(
            "error: cannot write to standard output: {e}\n"
        ));
        std::process::exit(2);
    }
}

/// Write diagnostics to stderr, ignoring failures (a closed stderr must not
/// stop the report on stdout).
pub fn write_err(args: std::fmt::Arguments) {
    use std::io::Write;
    let _ = std::io::stderr().lock().write_fmt(args);
}

/// Print an error chain to stderr as `error: …` lines.
pub fn print_error(e: &anyhow::Error) {
    errln!("error: {e}");
    for c in e.chain().skip(1) {
        errln!("  caused by: {c}");
    }
}

/// Read a whole text file, naming it in the error.
pub fn read_file(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("cannot read '{}'", path.display()))
}

/// The built-in catalog, plus every `models/*.toml` and `hardware/*.toml`
/// under `extra` (a user catalog directory) when given.
pub fn catalog(extra: Option<&Path>) -> Result<Catalog> {
    let mut c = Catalog::builtin().clone();
    if let Some(dir) = extra {
        for (sub, is_model) in [("models", true), ("hardware", false)] {
            let d = dir.join(sub);
            if !d.is_dir() {
                continue;
            }
            let mut files: Vec<PathBuf> = std::fs::read_dir(&d)
                .with_context(|| format!("cannot list '{}'", d.display()))?
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "toml"))
                .collect();
            files.sort();
            for f in files {
                let src = read_file(&f)?;
                let name = f.display().to_string();
                if is_model {
                    c.add_model_toml(&src, &name)?;
                } else {
                    c.add_chip_toml(&src, &name)?;
                }
            }
        }
    }
    Ok(c)
}

static CATALOG_DIR: OnceLock<Option<PathBuf>> = OnceLock::new();

/// Remember the global `--catalog DIR` option (called once by `main`).
pub fn set_catalog_dir(dir: Option<PathBuf>) {
    let _ = CATALOG_DIR.set(dir);
}

/// The directory given with the global `--catalog DIR` option, if any.
pub fn catalog_dir() -> Option<&'static Path> {
    CATALOG_DIR.get().and_then(|d| d.as_deref())
}

/// The catalog every command should use: built-in plus `--catalog DIR`.
pub fn user_catalog() -> Result<Catalog> {
    let dir = catalog_dir();
    if let Some(d) = dir {
        if !d.is_dir() {
            anyhow::bail!(
                "--catalog '{}' is not a directory (expected DIR/models/*.toml and/or DIR/hardware/*.toml)",
                d.display()
            );
        }
    }
    catalog(dir)
}

/// Render rows as an aligned plain-text table. The first row is the header
/// when the table has more than two columns (a rule is drawn under it);
/// columns listed in `right` are right-aligned.
pub fn render_table(rows: &[Vec<String>], right: &[usize]) -> String {
    let ncol = rows.iter().map(Vec::len).max().unwrap_or(0);
    let mut w = vec![0usize; ncol];
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let mut out = String::new();
    for (ri, r) in rows.iter().enumerate() {
        let mut line = String::new();
        for (i, c) in r.iter().enumerate() {
            let pad = w[i] - c.chars().count();
            if i > 0 {
                line.push_str("  ");
            }
            if right.contains(&i) {
                line.push_str(&" ".repeat(pad));
                line.push_str(c);
            } else {
                line.push_str(c);
                if i + 1 < r.len() {
                    line.push_str(&" ".repeat(pad));
                }
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
        if ri == 0 && ncol > 2 {
            let total = w.iter().sum::<usize>() + 2 * ncol.saturating_sub(1);
            out.push_str(&"-".repeat(total));
            out.push('\n');
        }
    }
    out
}

/// Load a scenario file, or an empty scenario when none is given.
#[allow(dead_code)] // used by `train` and `infer`
pub fn scenario(path: Option<&Path>) -> Result<Scenario> {
    match path {
        None => Ok(Scenario::default()),
        Some(p) => {
            let src = read_file(p)?;
            Ok(Scenario::parse(&src, &p.display().to_string())?)
        }
    }
}

/// Print one JSON object (pretty) to stdout.
pub fn print_json<T: serde::Serialize>(v: &T) -> Result<()> {
    outln!("{}", serde_json::to_string_pretty(v)?);
    Ok(())
}

/// Arguments of `meshplan model list` and `meshplan hw list`.
#[derive(clap::Args, Debug)]
pub struct ListArgs {
    /// Print one JSON object (the entries as an array under "models" or
    /// "chips") instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Format of `--explain` output.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ExplainFormat {
    /// Indented plain text.
    #[default]
    Text,
    /// Markdown list with LaTeX math.
    Markdown,
}

/// Render derivation steps in the chosen format.
pub fn render_steps(steps: &[Step], f: ExplainFormat) -> String {
    match f {
        ExplainFormat::Text => render_text(steps),
        ExplainFormat::Markdown => render_markdown(steps),
    }
}

/// The target of an analysis — scenario file, model, chip, and mesh or chip
/// count — shared by `train`, `infer` and `plan train` so the flags read and
/// override the scenario the same way everywhere.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct TargetArgs {
    /// Scenario TOML ([model], [hardware] and the command's workload sections); flags override it.
    #[arg(value_name = "SCENARIO")]
    pub scenario: Option<PathBuf>,
    /// Model: a catalog name or alias.
    #[arg(long)]
    pub model: Option<String>,
    /// Chip: a catalog name (NAME@book for the book's numbers).
    #[arg(long)]
    pub hw: Option<String>,
    /// TPU slice ("16x16x16"; "2*16x16x16" = 2 slices over DCN) or GPU layout NODESxGPUS ("8x8").
    #[arg(long)]
    pub mesh: Option<String>,
    /// Number of chips (GPUs), when no --mesh is given ("64", "16k").
    #[arg(long)]
    pub chips: Option<String>,
}

impl TargetArgs {
    /// Load the scenario (or an empty one) and write the flags into it:
    /// `--mesh` beats `--chips`, and either replaces the file's mesh/chips.
    pub fn load(&self) -> Result<Scenario> {
        let mut sc = scenario(self.scenario.as_deref())?;
        if let Some(m) = &self.model {
            sc.model.name = Some(m.clone());
        }
        if let Some(h) = &self.hw {
            sc.hardware.chip = Some(h.clone());
        }
        if let Some(m) = &self.mesh {
            sc.hardware.mesh = Some(m.clone());
        } else if let Some(c) = count_flag(&self.chips, "chips")? {
            sc.hardware.mesh = None;
            sc.hardware.chips = Some(c);
        }
        Ok(sc)
    }
}

/// Parse an optional count flag ("3M", "128k", "128Ki"), naming it on error.
pub fn count_flag(
    s: &Option<String>,
    flag: &str,
) -> Result<Option<meshplan_core::scenario::Count>> {
    s.as_deref()
        .map(|x| {
            meshplan_core::units::parse_count(x)
                .map(meshplan_core::scenario::Count)
                .with_context(|| format!("--{flag}"))
        })
        .transpose()
}
