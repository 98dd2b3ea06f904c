//! `meshplan`: the command-line front end. It parses flags, reads files and
//! prints the reports `meshplan-core` builds — nothing else.
//!
//! Exit codes: 0 success (an infeasible plan is an answer), 1 a `check`
//! claim or a `validate` threshold failed, 2 bad input (unknown names,
//! malformed files, impossible hyperparameters).

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use cmd::blocks::{run, BlockArgs};
use meshplan_core::mfu::{self, MfuQuery};
use meshplan_core::roofline::{self, RooflineQuery};
use meshplan_core::sharding::collective::CollectiveQuery;
use meshplan_core::sharding::{self, ShardQuery};

/// `println!` for the report on stdout: a closed pipe ends the process quietly.
macro_rules! outln {
    () => {
        $crate::io::write_out(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::io::write_out(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `print!` counterpart of [`outln!`].
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::io::write_out(format_args!($($arg)*))
    };
}

/// `eprintln!` for diagnostics: best effort.
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::io::write_err(format_args!("{}\n", format_args!($($arg)*)))
    };
}

mod args;
mod cmd;
mod io;
mod output;
mod plot;

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
    Hw(cmd::model::HwCmd),
    /// Training: memory per device, collectives, step time and verdicts.
    Train(cmd::train::TrainArgs),
    /// Inference: KV cache, rooflines, latency, throughput and cost.
    Infer(cmd::infer::InferArgs),
    /// Planner: search every parallelism for the best training or serving plan.
    #[command(subcommand)]
    Plan(cmd::plan::PlanCmd),
    /// Check numeric claims (worked solutions, errata) against meshplan.
    Check(cmd::check::CheckArgs),
    /// Print a whole worked solution (inputs, formulas, values) for a claims file.
    Explain(cmd::check::ExplainArgs),
    /// Compare predictions with measured runs (Playbook CSV, published-runs JSON).
    Validate(cmd::validate::ValidateArgs),
    /// Fit a chip's efficiency parameters from measured runs.
    Calibrate(cmd::validate::CalibrateArgs),
    /// One collective's time on a mesh: AllGather, ReduceScatter, AllReduce, AllToAll, permute, gather to one.
    Collective(BlockArgs<CollectiveQuery>),
    /// One operation's roofline: FLOPs, bytes, intensity, T_math, T_mem, the bound.
    Roofline(BlockArgs<RooflineQuery>),
    /// A sharded array's layout, or a sharded matmul's collectives and cost.
    Shard(BlockArgs<ShardQuery>),
    /// Model FLOPs utilization of a measured run (tokens, time or chip-hours, chips).
    Mfu(BlockArgs<MfuQuery>),
    /// A local web page and JSON API on 127.0.0.1 (docs/web.md).
    Serve(meshplan_web::ServeArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    io::set_catalog_dir(cli.catalog.clone());
    let r = match cli.command {
        Command::Model(c) => cmd::model::run_model(c),
        Command::Hw(c) => cmd::model::run_hw(c),
        Command::Train(a) => cmd::train::run(a),
        Command::Infer(a) => cmd::infer::run(a),
        Command::Plan(c) => cmd::plan::run(c),
        Command::Check(a) => cmd::check::run(a),
        Command::Explain(a) => cmd::check::run_explain(a),
        Command::Validate(a) => cmd::validate::run(a),
        Command::Calibrate(a) => cmd::validate::run_calibrate(a),
        Command::Collective(a) => run(&a, sharding::collective::evaluate),
        Command::Roofline(a) => run(&a, roofline::evaluate),
        Command::Shard(a) => run(&a, sharding::evaluate),
        Command::Mfu(a) => run(&a, mfu::evaluate),
        Command::Serve(a) => {
            io::catalog().and_then(|c| Ok(meshplan_web::run(&a, c).map(|()| ExitCode::SUCCESS)?))
        }
    };
    match r {
        Ok(code) => code,
        Err(e) => {
            errln!("error: {e}");
            for c in e.chain().skip(1) {
                errln!("  caused by: {c}");
            }
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
