//! `meshplan check FILE.toml` and `meshplan explain FILE.toml`: verify the
//! numeric claims of a claims file (docs/check.md) against meshplan's reports.
//!
//! Exit status: 0 when every claim passes (CANNOT-CHECK does not fail unless
//! `--strict`), 1 when any claim fails, 2 on a malformed file.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;
use meshplan_core::check::render::{explain_all, explain_failures, fmt_rel, Format};
use meshplan_core::check::{check, parse_claims, CheckReport, ClaimsFile};
use meshplan_core::trace::fmt_value;

use crate::common;

/// Output format of explanations.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ExplainFmt {
    /// Indented plain text.
    #[default]
    Text,
    /// Markdown with LaTeX math.
    Markdown,
    /// LaTeX (align* environments).
    Latex,
}

impl From<ExplainFmt> for Format {
    fn from(f: ExplainFmt) -> Self {
        match f {
            ExplainFmt::Text => Format::Text,
            ExplainFmt::Markdown => Format::Markdown,
            ExplainFmt::Latex => Format::Latex,
        }
    }
}

/// Arguments of `meshplan check`.
#[derive(clap::Args, Debug)]
pub struct CheckArgs {
    /// A claims file (TOML; see docs/check.md).
    #[arg(value_name = "FILE.toml")]
    pub file: PathBuf,
    /// Print one JSON object {claims: [...], summary} instead of a table.
    #[arg(long)]
    pub json: bool,
    /// For every FAIL, print the derivation of meshplan's value.
    #[arg(long)]
    pub explain: bool,
    /// Format of the --explain output.
    #[arg(long, value_enum, default_value_t = ExplainFmt::Text, value_name = "FORMAT")]
    pub explain_format: ExplainFmt,
    /// Exit 1 also when a claim cannot be checked.
    #[arg(long)]
    pub strict: bool,
}

/// Arguments of `meshplan explain`.
#[derive(clap::Args, Debug)]
pub struct ExplainArgs {
    /// A claims file (TOML; see docs/check.md).
    #[arg(value_name = "FILE.toml")]
    pub file: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = ExplainFmt::Text, value_name = "FORMAT")]
    pub format: ExplainFmt,
}

/// Read and parse a claims file; scenario files resolve relative to it.
fn load(path: &Path) -> Result<ClaimsFile> {
    let src = common::read_file(path)?;
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let mut resolve = |p: &str| {
        let full = dir.join(p);
        std::fs::read_to_string(&full)
            .map(|t| (full.display().to_string(), t))
            .map_err(|e| format!("{}: {e}", full.display()))
    };
    Ok(parse_claims(
        &src,
        &path.display().to_string(),
        &mut resolve,
    )?)
}

fn run_check(path: &Path, with_trace: bool) -> Result<CheckReport> {
    let f = load(path)?;
    let cat = common::user_catalog()?;
    Ok(check(&f, &cat, with_trace)?)
}

/// Run `check`.
pub fn run(a: CheckArgs) -> Result<ExitCode> {
    let rep = run_check(&a.file, a.explain)?;
    if a.json {
        common::print_json(&rep)?;
    } else {
        out!("{}", table(&rep));
        if a.explain && rep.summary.fail > 0 {
            outln!();
            out!("{}", explain_failures(&rep, a.explain_format.into()));
        }
    }
    Ok(ExitCode::from(rep.exit_code(a.strict)))
}

/// Run `explain`.
pub fn run_explain(a: ExplainArgs) -> Result<ExitCode> {
    let rep = run_check(&a.file, true)?;
    out!("{}", explain_all(&rep, a.format.into()));
    Ok(ExitCode::SUCCESS)
}

fn table(rep: &CheckReport) -> String {
    let mut rows = vec![vec![
        "id".to_string(),
        "quantity".into(),
        "claimed".into(),
        "meshplan".into(),
        "rel. error".into(),
        "verdict".into(),
        "hint".into(),
    ]];
    for r in &rep.claims {
        let mesh = match &r.meshplan {
            None => "—".to_string(),
            Some(serde_json::Value::Number(n)) => fmt_value(n.as_f64().unwrap_or(f64::NAN), r.unit),
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(v) => v.to_string(),
        };
        let hint = match (&r.hint, &r.reason) {
            (Some(h), _) => h.message.clone(),
            (None, Some(reason)) => reason.clone(),
            _ => String::new(),
        };
        rows.push(vec![
            r.id.clone(),
            r.quantity.clone(),
            r.claimed.clone(),
            mesh,
            r.rel_error.map(fmt_rel).unwrap_or_else(|| "—".into()),
            r.verdict.as_str().into(),
            hint,
        ]);
    }
    let mut out = String::new();
    if let Some(t) = &rep.title {
        out.push_str(&format!("{t}\n"));
    }
    out.push_str(&common::render_table(&rows, &[3, 4]));
    let s = &rep.summary;
    out.push_str(&format!(
        "\n{} claims: {} PASS, {} FAIL, {} CANNOT-CHECK\n",
        s.total, s.pass, s.fail, s.cannot_check
    ));
    out
}
