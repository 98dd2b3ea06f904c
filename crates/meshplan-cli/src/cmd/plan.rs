//! `meshplan plan train|infer` (being built; issue 5).

use std::process::ExitCode;

/// Planner subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum PlanCmd {
    /// Search training plans.
    Train,
    /// Search serving plans.
    Infer,
}

/// Run the command.
pub fn run(_c: PlanCmd) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`meshplan plan` is not available yet")
}
