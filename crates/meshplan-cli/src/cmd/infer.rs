//! `meshplan infer` (being built).

use std::process::ExitCode;

/// Arguments of `meshplan infer`.
#[derive(clap::Args, Debug)]
pub struct InferArgs {}

/// Run the command.
pub fn run(_a: InferArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`meshplan infer` is not available yet")
}
