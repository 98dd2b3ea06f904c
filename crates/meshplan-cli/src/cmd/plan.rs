//! `meshplan plan train|infer`: search every parallelism for the best
//! training or serving plan (docs/planner.md).
//!
//! Exit codes: 0 when the search ran — also when nothing fits (that verdict,
//! with what would fit, is the answer); 2 only for input that cannot be
//! understood.

use std::process::ExitCode;

use anyhow::{Context, Result};
use meshplan_core::inference::{defaults, slo::SloValue};
use meshplan_core::planner::{
    plan_infer, plan_train_with, PlanInferRequest, PlanTrainRequest, SearchDims, TrainObjective,
};
use meshplan_core::scenario::Count;
use meshplan_core::training::scenario::resolve_workload;
use meshplan_core::units::parse_count;

use super::infer::ServeArgs;
use super::train::WorkloadArgs;
use crate::args::{sections, TargetArgs};
use crate::io;
use crate::output::{emit, OutputArgs, Progress};

/// Planner subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum PlanCmd {
    /// Search training plans: dp × fsdp × tp × pp × cp × ep, ZeRO, remat, schedule, micro-batches, SP.
    Train(PlanTrainArgs),
    /// Search serving plans: slices, TP/2D-WS/EP, replicas, batch, dtypes; Pareto front and SLOs.
    Infer(PlanInferArgs),
}

/// Arguments the two searches share.
#[derive(clap::Args, Debug)]
pub struct SearchArgs {
    /// Plans to list.
    #[arg(long, default_value_t = 10)]
    pub top: usize,
    /// Also print the derivation of the plan ranked N (1 = the best; --explain = 1).
    #[arg(long, value_name = "N")]
    pub explain_rank: Option<usize>,
    /// Worker threads (default: all cores; more than the machine has are capped).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Output.
    #[command(flatten)]
    pub out: OutputArgs,
}

impl SearchArgs {
    fn rank(&self) -> Option<usize> {
        self.explain_rank.or(self.out.explain.then_some(1))
    }
}

/// Arguments of `meshplan plan train`.
#[derive(clap::Args, Debug)]
pub struct PlanTrainArgs {
    /// Scenario, model, chip, mesh or chip count.
    #[command(flatten)]
    pub target: TargetArgs,
    /// Batch, sequence, precision and conventions.
    #[command(flatten)]
    pub workload: WorkloadArgs,
    /// time | cost | memory-headroom.
    #[arg(long, default_value = "time")]
    pub objective: String,
    /// GPU rank order: tp-cp-ep-dp-pp (default), tp-pp-dp, or auto (search both).
    #[arg(long)]
    pub rank_order: Option<String>,
    /// Also search the global batch: B, 2B, 4B, … up to this ("16Mi" tokens
    /// or "2048 seqs"); plans at another batch than --batch-tokens are listed
    /// with theirs and ranked per token.
    #[arg(long, value_name = "TOKENS|SEQS")]
    pub max_global_batch: Option<String>,
    /// Compute dtypes to search ("bf16,fp8"; default: the workload's --dtype only).
    #[arg(long, value_name = "LIST")]
    pub dtypes: Option<String>,
    /// Also search fp8 compute where the chip has an fp8 peak and the framework trains in fp8.
    #[arg(long)]
    pub allow_fp8: bool,
    /// Listing and derivation.
    #[command(flatten)]
    pub search: SearchArgs,
    /// `--plot FILE.svg`.
    #[command(flatten)]
    pub plot: crate::plot::PlotArgs,
}

/// Arguments of `meshplan plan infer`: the flags of a
/// [`PlanInferRequest`], whose defaults and checks are the core's.
#[derive(clap::Args, Debug)]
pub struct PlanInferArgs {
    /// Scenario, model, chip, and the chips (exactly, from --chips, --mesh or the scenario).
    #[command(flatten)]
    pub target: TargetArgs,
    /// Any slice up to this many chips (instead of exactly --chips).
    #[arg(long, conflicts_with = "chips")]
    pub max_chips: Option<String>,
    /// Dtypes (a given dtype is the only one tried) and request lengths.
    #[command(flatten)]
    pub serve: ServeArgs,
    /// Time-to-first-token SLO ("500ms", or seconds).
    #[arg(long)]
    pub ttft_slo: Option<String>,
    /// Time-per-output-token SLO ("50ms", or seconds).
    #[arg(long)]
    pub tpot_slo: Option<String>,
    /// throughput (default) | cost | latency.
    #[arg(long)]
    pub objective: Option<String>,
    /// Also search int8/fp8 weights and KV (default: the model's bf16 only, unless --weights-dtype/--kv-dtype pin one).
    #[arg(long)]
    pub allow_quantization: bool,
    /// Disaggregated prefill/decode pools: off (default), on (aggregated and disaggregated; the pool ratio is searched), only.
    #[arg(long, value_name = "MODE")]
    pub disagg: Option<String>,
    /// Listing and derivation.
    #[command(flatten)]
    pub search: InferListArgs,
    /// `--plot FILE.svg`: the Pareto front of output tokens/s per chip against tokens/s per user.
    #[command(flatten)]
    pub plot: crate::plot::PlotArgs,
}

/// Listing and derivation of `plan infer` (as [`SearchArgs`], with the
/// core's default listing length).
#[derive(clap::Args, Debug)]
pub struct InferListArgs {
    /// Plans to list.
    #[arg(long, default_value_t = defaults::PLAN_TOP)]
    pub top: usize,
    /// Also print the derivation of the plan ranked N (1 = the best; --explain = 1).
    #[arg(long, value_name = "N")]
    pub explain_rank: Option<usize>,
    /// Worker threads (default: all cores; more than the machine has are capped).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Output.
    #[command(flatten)]
    pub out: OutputArgs,
}

/// Run the command.
pub fn run(c: PlanCmd) -> Result<ExitCode> {
    match c {
        PlanCmd::Train(a) => run_train(a),
        PlanCmd::Infer(a) => run_infer(a),
    }
}

fn run_train(a: PlanTrainArgs) -> Result<ExitCode> {
    let mut cat = io::catalog()?;
    let flags = sections(&[
        ("training", a.workload.flags()?),
        (
            "parallelism",
            a.rank_order.map_or(
                serde_json::json!({}),
                |o| serde_json::json!({ "rank_order": o }),
            ),
        ),
    ]);
    let sc = a.target.load(&mut cat, flags)?;
    let user = a.workload.profile_file()?;
    let req = PlanTrainRequest {
        workload: resolve_workload(
            &sc,
            &cat,
            user.as_ref().map(|(t, f)| (t.as_str(), f.as_str())),
        )?,
        objective: TrainObjective::parse(&a.objective)?,
        top: a.search.top,
        threads: a.search.threads,
        explain_rank: a.search.rank(),
        cancel: None,
    };
    let bar = Progress::new(
        !a.search.out.json,
        "searching {bar:30} {pos}/{len} degree tuples ({elapsed})",
        "degree tuples",
    );
    let dims = SearchDims {
        max_global_batch: a.max_global_batch,
        dtypes: a.dtypes,
        allow_fp8: a.allow_fp8,
    };
    let r = plan_train_with(&req, &dims, &|d, t| bar.tick(d, t));
    bar.finish();
    let mut r = r?;
    let steps = r.derivation.take();
    emit(&r, steps.as_deref(), &a.search.out)?;
    crate::plot::plan_train(&r, &a.plot)?;
    Ok(ExitCode::SUCCESS)
}

fn run_infer(a: PlanInferArgs) -> Result<ExitCode> {
    let mut cat = io::catalog()?;
    let flags = sections(&[("inference", serde_json::to_value(&a.serve)?)]);
    let max_chips = a.max_chips.as_deref().map(parse_count).transpose();
    let req = PlanInferRequest {
        scenario: a.target.load(&mut cat, flags)?,
        max_chips: max_chips.context("--max-chips")?.map(Count),
        ttft_slo: a.ttft_slo.map(SloValue::Text),
        tpot_slo: a.tpot_slo.map(SloValue::Text),
        objective: a.objective,
        allow_quantization: a.allow_quantization.then_some(true),
        top: Some(a.search.top),
        explain_rank: a.search.explain_rank.or(a.search.out.explain.then_some(1)),
        threads: a.search.threads,
        disagg: a.disagg,
    };
    let mut r = plan_infer(&req, &cat)?;
    let steps = r.derivation.take();
    emit(&r, steps.as_deref(), &a.search.out)?;
    crate::plot::plan_infer(&r, &a.plot)?;
    Ok(ExitCode::SUCCESS)
}
