//! `meshplan check FILE.toml` and `meshplan explain FILE.toml`: verify the
//! numeric claims of a claims file (docs/check.md) against meshplan's reports.
//!
//! Exit status: 0 when every claim passes (CANNOT-CHECK does not fail unless
//! `--strict`), 1 when any claim fails, 2 on a malformed file.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;
use meshplan_core::check::render::{explain_all, explain_failures};
use meshplan_core::check::CheckReport;

use crate::io;
use crate::output::{doc_text, print_json, Format, OutputArgs};

/// Arguments of `meshplan check`.
#[derive(clap::Args, Debug)]
pub struct CheckArgs {
    /// A claims file (TOML; see docs/check.md).
    #[arg(value_name = "FILE.toml")]
    pub file: PathBuf,
    /// --json: one object {claims: [...], summary}; --explain: the
    /// derivation of meshplan's value for every FAIL.
    #[command(flatten)]
    pub out: OutputArgs,
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
    #[arg(long, value_enum, default_value_t = Format::Text, value_name = "FORMAT")]
    pub format: Format,
}

/// Read, parse and check a claims file; scenario files resolve relative to it.
fn run_check(path: &Path, with_trace: bool) -> Result<CheckReport> {
    Ok(meshplan_io::check_claims(
        path,
        &io::catalog()?,
        with_trace,
    )?)
}

/// Run `check`.
pub fn run(a: CheckArgs) -> Result<ExitCode> {
    let o = &a.out;
    let rep = run_check(&a.file, o.explain)?;
    if o.json {
        print_json(&rep)?;
    } else {
        use meshplan_core::view::Render;
        out!("{}", doc_text(&rep.doc(), o.explain_format));
        if o.explain && rep.summary.fail > 0 {
            outln!();
            out!("{}", explain_failures(&rep, o.explain_format));
        }
    }
    Ok(ExitCode::from(rep.exit_code(a.strict)))
}

/// Run `explain`.
pub fn run_explain(a: ExplainArgs) -> Result<ExitCode> {
    let rep = run_check(&a.file, true)?;
    out!("{}", explain_all(&rep, a.format));
    Ok(ExitCode::SUCCESS)
}
