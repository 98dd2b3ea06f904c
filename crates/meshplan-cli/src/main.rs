//! `meshplan`: the command-line front end. Parsing and rendering only; every
//! number comes from `meshplan-core`.
//!
//! Exit codes: 0 success, 1 a check/verdict failed (reserved for `check`),
//! 2 bad input (unknown names, malformed files, impossible hyperparameters).

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod cmd;
mod common;

/// Exact, fast scaling arithmetic for transformers: parameters, FLOPs,
/// memory, collectives, step times — with the derivation in the book's
/// notation (How To Scale Your Model; the Ultra-Scale Playbook).
#[derive(Parser, Debug)]
#[command(name = "meshplan", version, about, long_about = None)]
pub struct Cli {
    /// A catalog directory to add to the built-in one: every DIR/models/*.toml
    /// and DIR/hardware/*.toml (same format as the built-in files) is loaded,
    /// replacing built-in entries of the same name.
    #[arg(long, global = true, value_name = "DIR")]
    catalog: Option<std::path::PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Models: list the catalog, or show one model's counts.
    #[command(subcommand)]
    Model(cmd::model::ModelCmd),
    /// Hardware: list the chip catalog, or show one chip.
    #[command(subcommand)]
    Hw(cmd::hw::HwCmd),
    /// Training: memory per device, collectives, step time and verdicts.
    Train(cmd::train::TrainArgs),
    /// Inference: KV cache, rooflines, latency, throughput and cost.
    Infer(cmd::infer::InferArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    common::set_catalog_dir(cli.catalog.clone());
    let r = match cli.command {
        Command::Model(c) => cmd::model::run(c),
        Command::Hw(c) => cmd::hw::run(c),
        Command::Train(a) => cmd::train::run(a),
        Command::Infer(a) => cmd::infer::run(a),
    };
    match r {
        Ok(code) => code,
        Err(e) => {
            common::print_error(&e);
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn verify_cli() {
        use clap::CommandFactory;
        super::Cli::command().debug_assert();
    }
}
