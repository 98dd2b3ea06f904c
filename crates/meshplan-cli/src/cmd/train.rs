//! `meshplan train` (being built).

use std::process::ExitCode;

/// Arguments of `meshplan train`.
#[derive(clap::Args, Debug)]
pub struct TrainArgs {}

/// Run the command.
pub fn run(_a: TrainArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`meshplan train` is not available yet")
}
