//! `meshplan train`: memory per device, collectives, step time and the book's
//! verdicts for one training configuration.
//!
//! Exit codes: 0 when the analysis ran (also when the configuration is
//! infeasible or does not fit: that is the answer); 2 only for input that
//! cannot be understood.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;
use meshplan_core::scenario::Scenario;
use meshplan_core::trace::{NoTrace, Recorder};
use meshplan_core::training::analyze_with;
use meshplan_core::training::scenario::resolve_with;

use crate::args::{count_flag, TargetArgs};
use crate::io;
use crate::output::{emit, OutputArgs};

/// The workload flags `train` and `plan train` share.
#[derive(clap::Args, Debug, Clone, Default)]
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
    pub master_weights: bool,
    /// Ignore attention FLOPs (the book's 6·P·T convention, as its exercises do).
    #[arg(long)]
    pub no_attention: bool,
    /// FLOP convention for T_math and MFU: model, hardware, book, nanotron, megatron.
    #[arg(long)]
    pub flops: Option<String>,
    /// Memory and runtime conventions: book, megatron, megatron-2022, nanotron
    /// (default: megatron where the chip has an efficiency profile, else book).
    #[arg(long)]
    pub framework: Option<String>,
    /// Fraction of link bandwidth collectives achieve (default 1).
    #[arg(long)]
    pub comm_efficiency: Option<f64>,
    /// Efficiency profile TOML (`meshplan calibrate` output) instead of the chip's built-in one.
    #[arg(long, value_name = "FILE")]
    pub hw_profile: Option<PathBuf>,
}

impl WorkloadArgs {
    /// Write the flags into the scenario's `[training]`.
    pub fn apply(&self, sc: &mut Scenario) -> Result<()> {
        let t = &mut sc.training;
        if let Some(b) = count_flag(&self.batch_tokens, "batch-tokens")? {
            t.batch_tokens = Some(b);
        }
        if let Some(x) = count_flag(&self.seq_len, "seq-len")? {
            t.seq_len = Some(x);
        }
        for (dst, src) in [
            (&mut t.optimizer, &self.optimizer),
            (&mut t.flops, &self.flops),
            (&mut t.framework, &self.framework),
        ] {
            if src.is_some() {
                dst.clone_from(src);
            }
        }
        if self.master_weights {
            t.master_weights = Some(true);
        }
        if self.no_attention {
            t.include_attention = Some(false);
        }
        if self.comm_efficiency.is_some() {
            t.comm_efficiency = self.comm_efficiency;
        }
        Ok(())
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
    /// Micro-batches per step: pipeline micro-batches, or gradient accumulation with pp = 1.
    #[arg(long)]
    pub microbatches: Option<u64>,
    /// Pipeline schedule: gpipe/afab, 1f1b, interleaved.
    #[arg(long)]
    pub schedule: Option<String>,
    /// Virtual stages per device (interleaved).
    #[arg(long)]
    pub virtual_stages: Option<u64>,
    /// Activation checkpointing: none, full, after-matmuls, selective.
    #[arg(long)]
    pub remat: Option<String>,
    /// ZeRO stage over dp·cp (0–3).
    #[arg(long)]
    pub zero: Option<u64>,
    /// Model-FLOPs utilisation to quote the step time at (0–1).
    #[arg(long)]
    pub mfu: Option<f64>,
    /// Megatron sequence parallelism with TP.
    #[arg(long)]
    pub sequence_parallel: bool,
    /// Tokens to train on (total time, chip-hours, cost).
    #[arg(long)]
    pub train_tokens: Option<String>,
    /// Output.
    #[command(flatten)]
    pub out: OutputArgs,
    /// `--plot FILE.svg`.
    #[command(flatten)]
    pub plot: crate::plot::TrainPlotArgs,
}

/// Write the plan flags into the scenario (flags override the file).
fn apply_plan(a: &TrainArgs, sc: &mut Scenario) -> Result<()> {
    let t = &mut sc.training;
    if let Some(x) = count_flag(&a.train_tokens, "train-tokens")? {
        t.train_tokens = Some(x);
    }
    if a.remat.is_some() {
        t.remat.clone_from(&a.remat);
    }
    if a.mfu.is_some() {
        t.mfu = a.mfu;
    }
    let p = &mut sc.parallelism;
    for (dst, src) in [
        (&mut p.dp, a.dp),
        (&mut p.fsdp, a.fsdp),
        (&mut p.tp, a.tp),
        (&mut p.pp, a.pp),
        (&mut p.cp, a.cp),
        (&mut p.ep, a.ep),
        (&mut p.zero, a.zero),
        (&mut p.microbatches, a.microbatches),
        (&mut p.virtual_stages, a.virtual_stages),
    ] {
        if src.is_some() {
            *dst = src;
        }
    }
    if a.schedule.is_some() {
        p.schedule.clone_from(&a.schedule);
    }
    if a.sequence_parallel {
        p.sequence_parallel = Some(true);
    }
    Ok(())
}

/// Run the command.
pub fn run(a: TrainArgs) -> Result<ExitCode> {
    let mut cat = io::catalog()?;
    let mut sc = a.target.load(&mut cat)?;
    a.workload.apply(&mut sc)?;
    apply_plan(&a, &mut sc)?;
    let user = a.workload.profile_file()?;
    let s = resolve_with(
        &sc,
        &cat,
        user.as_ref().map(|(t, f)| (t.as_str(), f.as_str())),
    )?;
    let prof = s.profile.as_ref();
    let mut rec = Recorder::default();
    let r = if a.out.explain {
        analyze_with(&s.spec, &s.chip, &s.topo, &s.cfg, prof, &mut rec)
    } else {
        analyze_with(&s.spec, &s.chip, &s.topo, &s.cfg, prof, &mut NoTrace)
    };
    emit(&r, a.out.explain.then(|| rec.steps()), &a.out)?;
    crate::plot::train(&r, &a.plot)?;
    Ok(ExitCode::SUCCESS)
}
