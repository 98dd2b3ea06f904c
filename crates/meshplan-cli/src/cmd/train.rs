//! `meshplan train`: memory per device, collectives, step time and the book's
//! verdicts for one training configuration.
//!
//! Exit codes: 0 when the analysis ran (also when the configuration is
//! infeasible or does not fit: that is the answer); 2 only for input that
//! cannot be understood.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;
use meshplan_core::trace::Recorder;
use meshplan_core::training::scenario::resolve_with;

use serde::Serialize;
use serde_json::Value;

use crate::args::{finite, sections, TargetArgs};
use crate::io;
use crate::output::{emit, OutputArgs};

/// The workload flags `train` and `plan train` share (`[training]` keys).
#[derive(clap::Args, Debug, Clone, Default, Serialize)]
pub struct WorkloadArgs {
    /// Global batch B in tokens ("3M", "16Mi").
    #[arg(long)]
    pub batch_tokens: Option<String>,
    /// Sequence length T ("32Ki" = 32,768).
    #[arg(long)]
    pub seq_len: Option<String>,
    /// Optimizer: adam, adamw, sgd, sgd-momentum, adafactor.
    #[arg(long)]
    pub optimizer: Option<String>,
    /// Keep an fp32 master copy of the weights.
    #[arg(long)]
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub master_weights: bool,
    /// Ignore attention FLOPs (the book's 6·P·T convention, as its exercises do).
    #[arg(long)]
    #[serde(skip)]
    pub no_attention: bool,
    /// FLOP convention for T_math and MFU: model, hardware, book, nanotron, megatron.
    #[arg(long)]
    pub flops: Option<String>,
    /// Memory and runtime conventions: book, megatron, megatron-2022,
    /// megatron-2021, nanotron, maxtext, torchtitan (fsdp2), deepspeed
    /// (default: megatron where the chip has an efficiency profile, else book).
    #[arg(long)]
    pub framework: Option<String>,
    /// Fraction of link bandwidth collectives achieve (default 1).
    #[arg(long)]
    pub comm_efficiency: Option<f64>,
    /// Compute dtype of the GEMMs: bf16 (default), fp8, int8, fp4 (where the
    /// chip has a peak for it); weights stay bf16 with fp32 master and optimizer.
    #[arg(long = "dtype")]
    #[serde(rename = "compute_dtype", skip_serializing_if = "Option::is_none")]
    pub compute_dtype: Option<String>,
    /// FP8 recipe of the fp8 GEMMs (with --dtype fp8): delayed, current,
    /// blockwise (DeepSeek-style 1×128 / 128×128 scales); default: none.
    #[arg(long, value_name = "RECIPE")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fp8_recipe: Option<String>,
    /// TP communication overlap: none, ring (default: the profile's fitted
    /// fraction), pipelined (Transformer Engine comm-GEMM overlap; needs SP).
    #[arg(long)]
    pub tp_overlap: Option<String>,
    /// Data-parallel communication overlap: on (default), off.
    #[arg(long)]
    pub dp_overlap: Option<String>,
    /// The SP all-gather in the backward: keep (default), redo.
    #[arg(long)]
    pub sp_allgather: Option<String>,
    /// Keep state in host memory: optimizer, weights, activations (comma list; `plan train`: auto tries all).
    #[arg(long)]
    #[serde(skip)]
    pub offload: Option<String>,
    /// Efficiency profile TOML (`meshplan calibrate` output) instead of the chip's built-in one.
    #[arg(long, value_name = "FILE", alias = "profile")]
    #[serde(skip)]
    pub hw_profile: Option<PathBuf>,
}

impl WorkloadArgs {
    /// The flags as `[training]` keys.
    pub fn flags(&self) -> Result<Value> {
        finite("--comm-efficiency", self.comm_efficiency)?;
        let mut t = serde_json::to_value(self)?;
        if self.no_attention {
            t["include_attention"] = false.into();
        }
        if let Some(o) = &self.offload {
            t["offload"] = o.split(',').collect::<Vec<_>>().into();
        }
        Ok(t)
    }

    /// The `--hw-profile` file as (text, name).
    pub fn profile_file(&self) -> Result<Option<(String, String)>> {
        self.hw_profile
            .as_deref()
            .map(|p: &Path| Ok((io::read_file(p)?, p.display().to_string())))
            .transpose()
    }
}

/// Arguments of `meshplan train`.
#[derive(clap::Args, Debug)]
pub struct TrainArgs {
    /// Scenario, model, chip, mesh or chip count.
    #[command(flatten)]
    pub target: TargetArgs,
    /// Batch, sequence, precision and conventions.
    #[command(flatten)]
    pub workload: WorkloadArgs,
    /// Activation checkpointing, MFU, tokens to train on.
    #[command(flatten)]
    pub run: RunArgs,
    /// The parallelism.
    #[command(flatten)]
    pub parallel: ParallelArgs,
    /// Output.
    #[command(flatten)]
    pub out: OutputArgs,
    /// `--plot FILE.svg`.
    #[command(flatten)]
    pub plot: crate::plot::PlotArgs,
    /// Write the predicted step's timeline (per stage and stream) as a
    /// Chrome/Perfetto trace to FILE (ui.perfetto.dev, chrome://tracing).
    #[arg(long, value_name = "FILE.json")]
    pub trace: Option<PathBuf>,
}

/// The `[training]` flags only `train` takes.
#[derive(clap::Args, Debug, Serialize)]
pub struct RunArgs {
    /// Activation checkpointing: none, full, after-matmuls, selective.
    #[arg(long)]
    pub remat: Option<String>,
    /// k activation checkpoints of [B, D] per layer (the book's ch5/ch6
    /// convention: saved activations k·B·D·L·bytes under the book accounting).
    #[arg(long, value_name = "K")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checkpoints_per_layer: Option<u64>,
    /// Model-FLOPs utilisation to quote the step time at (0–1).
    #[arg(long)]
    pub mfu: Option<f64>,
    /// Tokens to train on (total time, chip-hours, cost).
    #[arg(long)]
    pub train_tokens: Option<String>,
    /// Also print the step by block (FLOPs, HBM bytes, roofline time).
    #[arg(long)]
    #[serde(skip)]
    pub breakdown: bool,
}

/// `[parallelism]` flags of `train`.
#[derive(clap::Args, Debug, Serialize)]
pub struct ParallelArgs {
    /// Data-parallel degree.
    #[arg(long)]
    pub dp: Option<u64>,
    /// FSDP degree.
    #[arg(long)]
    pub fsdp: Option<u64>,
    /// Tensor-parallel degree.
    #[arg(long)]
    pub tp: Option<u64>,
    /// Pipeline stages.
    #[arg(long)]
    pub pp: Option<u64>,
    /// Context-parallel degree.
    #[arg(long)]
    pub cp: Option<u64>,
    /// Expert-parallel degree.
    #[arg(long)]
    pub ep: Option<u64>,
    /// Expert tensor-parallel degree: TP inside each expert (default tp; 1 = whole experts).
    #[arg(long)]
    pub etp: Option<u64>,
    /// GPU rank order: tp-cp-ep-dp-pp (Megatron's default) or tp-pp-dp (pipeline inside the node).
    #[arg(long)]
    pub rank_order: Option<String>,
    /// Micro-batches per step: pipeline micro-batches, or gradient accumulation with pp = 1.
    #[arg(long)]
    pub microbatches: Option<u64>,
    /// Pipeline schedule: gpipe/afab, 1f1b, interleaved, dualpipe.
    #[arg(long)]
    pub schedule: Option<String>,
    /// Virtual stages per device (interleaved).
    #[arg(long)]
    pub virtual_stages: Option<u64>,
    /// Layers on the first pipeline stage (Megatron's --decoder-first-pipeline-num-layers; default: the framework's split).
    #[arg(long, value_name = "LAYERS")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_stage_layers: Option<u64>,
    /// Layers on the last pipeline stage (Megatron's --decoder-last-pipeline-num-layers; default: the framework's split).
    #[arg(long, value_name = "LAYERS")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_stage_layers: Option<u64>,
    /// Context-parallel K/V exchange: ring (default; Megatron's --cp-comm-type p2p) or all-gather (Llama 3's).
    #[arg(long, value_parser = cp_comm)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cp_comm: Option<meshplan_core::parallelism::CpComm>,
    /// ZeRO stage over dp·cp (0–3).
    #[arg(long)]
    pub zero: Option<u64>,
    /// Megatron sequence parallelism with TP.
    #[arg(long)]
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub sequence_parallel: bool,
}

/// `--cp-comm`, parsed where the flag is read (the scenario key takes the
/// same names, `CpComm::parse`).
fn cp_comm(s: &str) -> std::result::Result<meshplan_core::parallelism::CpComm, String> {
    meshplan_core::parallelism::CpComm::parse(s).map_err(|e| e.to_string())
}

/// Run the command.
pub fn run(a: TrainArgs) -> Result<ExitCode> {
    let mut cat = io::catalog()?;
    finite("--mfu", a.run.mfu)?;
    let flags = sections(&[
        ("training", a.workload.flags()?),
        ("training", serde_json::to_value(&a.run)?),
        ("parallelism", serde_json::to_value(&a.parallel)?),
    ]);
    let sc = a.target.load(&mut cat, flags)?;
    let user = a.workload.profile_file()?;
    let s = resolve_with(
        &sc,
        &cat,
        user.as_ref().map(|(t, f)| (t.as_str(), f.as_str())),
    )?;
    // one analysis: recording its derivation costs microseconds
    let mut rec = Recorder::default();
    let r = s.analyze(&mut rec);
    if let Some(path) = &a.trace {
        write_trace(&a, path, &s, &r)?;
    }
    emit(&r, a.out.explain.then(|| rec.steps()), &a.out)?;
    if a.run.breakdown && !a.out.json {
        let d = meshplan_core::training::render::blocks_doc(&r);
        outln!(
            "\n{}",
            crate::output::doc_text(&d, a.out.explain_format).trim_end()
        );
    }
    crate::plot::train(&s, &r, &a.plot)?;
    Ok(ExitCode::SUCCESS)
}

/// `--trace FILE.json`: the predicted step's timeline as a Chrome trace,
/// written before the report is printed (no prediction is an error that
/// says why), never over one of the command's input files.
fn write_trace(
    a: &TrainArgs,
    path: &Path,
    s: &meshplan_core::training::scenario::TrainSetup,
    r: &meshplan_core::training::TrainReport,
) -> Result<()> {
    let t = meshplan_core::timeline::of_setup(s, r).map_err(|e| anyhow::anyhow!("--trace: {e}"))?;
    let json = serde_json::to_string(&meshplan_core::timeline::chrome_trace(&t))?;
    let model = a.target.model.as_deref().map(Path::new);
    let inputs: Vec<&Path> = [
        a.target.scenario.as_deref(),
        model,
        a.workload.hw_profile.as_deref(),
    ]
    .into_iter()
    .flatten()
    .collect();
    crate::plot::write_output("--trace", path, &json, &inputs)
}
