//! `meshplan check FILE.toml…` and `meshplan explain FILE.toml`: verify the
//! numeric claims of claims files (docs/check.md) against meshplan's reports.
//!
//! Exit status: 0 when no claim fails except the book's own annotated slips
//! (CANNOT-CHECK and those do not fail unless `--strict`), 1 when any other
//! claim fails (in any of the files), 2 on a malformed file (docs/check.md
//! says why).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;
use meshplan_core::check::render::{explain_all, explain_failures};
use meshplan_core::check::{CheckReport, ClaimResult, Verdict};

use crate::io;
use crate::output::{doc_text, print_json, Format, OutputArgs};

/// Arguments of `meshplan check`.
#[derive(clap::Args, Debug)]
pub struct CheckArgs {
    /// Claims files (TOML; see docs/check.md): `check examples/book/*.toml`
    /// checks every chapter, each file's table in turn.
    #[arg(value_name = "FILE.toml", required = true, num_args = 1..)]
    pub files: Vec<PathBuf>,
    /// --json: one object {claims: [...], summary} (several files: an array
    /// of them, each with its `file`); --explain: the derivation of
    /// meshplan's value for every FAIL.
    #[command(flatten)]
    pub out: OutputArgs,
    /// Exit 1 also when a claim cannot be checked or fails as an annotated book slip.
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

/// One file's report in a several-file `--json` answer.
#[derive(serde::Serialize)]
struct FileReport<'a> {
    file: &'a Path,
    #[serde(flatten)]
    report: &'a CheckReport,
}

/// Run `check`: every file is read and checked before anything is printed
/// (a malformed file is an error naming it, exit 2, with no partial table);
/// the exit status is the worst file's.
pub fn run(a: CheckArgs) -> Result<ExitCode> {
    let o = &a.out;
    let reps = a
        .files
        .iter()
        .map(|f| run_check(f, o.explain))
        .collect::<Result<Vec<_>>>()?;
    if o.json {
        match reps.as_slice() {
            [rep] => print_json(rep)?,
            _ => {
                let all: Vec<FileReport> = a
                    .files
                    .iter()
                    .zip(&reps)
                    .map(|(file, report)| FileReport { file, report })
                    .collect();
                print_json(&all)?;
            }
        }
    } else {
        use meshplan_core::view::Render;
        for (i, rep) in reps.iter().enumerate() {
            if reps.len() > 1 {
                if i > 0 {
                    outln!();
                }
                outln!("== {} ==", a.files[i].display());
            }
            out!("{}", doc_text(&rep.doc(), o.explain_format));
            if o.explain && rep.summary.fail > 0 {
                outln!();
                out!("{}", explain_failures(rep, o.explain_format));
            }
        }
    }
    let worst = reps.iter().map(|r| exit_code(r, a.strict)).max();
    Ok(ExitCode::from(worst.unwrap_or(0)))
}

/// Whether a FAIL is one the file expects: its note marks it as the book's
/// own slip, simplification or approximation ("BOOK SLIP: …"), which the
/// claims file records so the book's text can be checked as written. A
/// `WRONG:` note (a worked solution's mistake) is the failure `check` is
/// there to catch, so it still fails.
pub fn is_expected_fail(c: &ClaimResult) -> bool {
    c.verdict == Verdict::Fail && c.note.as_deref().is_some_and(|n| n.starts_with("BOOK "))
}

/// The exit status: 1 when a claim fails unexpectedly (or, with `strict`,
/// at all, or cannot be checked), else 0 — so CI on the book's files is
/// green until a claim that passed starts failing.
pub fn exit_code(rep: &CheckReport, strict: bool) -> u8 {
    let expected = rep.claims.iter().filter(|c| is_expected_fail(c)).count();
    if strict {
        return rep.exit_code(true);
    }
    if expected > 0 && rep.summary.fail == expected {
        errln!(
            "check: {expected} FAIL{} annotated as the book's own slip{} (expected): exit 0; --strict makes them fail",
            if expected == 1 { " is" } else { "s are" },
            if expected == 1 { "" } else { "s" }
        );
    }
    u8::from(rep.summary.fail > expected)
}

/// Run `explain`.
pub fn run_explain(a: ExplainArgs) -> Result<ExitCode> {
    let rep = run_check(&a.file, true)?;
    out!("{}", explain_all(&rep, a.format));
    Ok(ExitCode::SUCCESS)
}
