//! `meshplan model list|show`.

use std::process::ExitCode;

/// Model subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum ModelCmd {
    /// List the models in the catalog.
    List,
}

/// Run the command.
pub fn run(_c: ModelCmd) -> anyhow::Result<ExitCode> {
    anyhow::bail!("not available yet")
}
