//! `meshplan hw list|show`.

use std::process::ExitCode;

/// Hardware subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum HwCmd {
    /// List the chips in the catalog.
    List,
}

/// Run the command.
pub fn run(_c: HwCmd) -> anyhow::Result<ExitCode> {
    anyhow::bail!("not available yet")
}
