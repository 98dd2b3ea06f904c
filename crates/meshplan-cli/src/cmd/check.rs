//! `meshplan check` and `meshplan explain` (being built; issue 6).

use std::process::ExitCode;

/// Arguments of `meshplan check`.
#[derive(clap::Args, Debug)]
pub struct CheckArgs {}

/// Arguments of `meshplan explain`.
#[derive(clap::Args, Debug)]
pub struct ExplainArgs {}

/// Run `check`.
pub fn run(_a: CheckArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`meshplan check` is not available yet")
}

/// Run `explain`.
pub fn run_explain(_a: ExplainArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`meshplan explain` is not available yet")
}
