//! `meshplan validate` and `meshplan calibrate` (being built; issue 7).

use std::process::ExitCode;

/// Arguments of `meshplan validate`.
#[derive(clap::Args, Debug)]
pub struct ValidateArgs {}

/// Arguments of `meshplan calibrate`.
#[derive(clap::Args, Debug)]
pub struct CalibrateArgs {}

/// Run `validate`.
pub fn run(_a: ValidateArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`meshplan validate` is not available yet")
}

/// Run `calibrate`.
pub fn run_calibrate(_a: CalibrateArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`meshplan calibrate` is not available yet")
}
