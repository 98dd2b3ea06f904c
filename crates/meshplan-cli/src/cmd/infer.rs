//! `meshplan infer`: KV cache, rooflines, sharding, latency, throughput, cost.

use std::process::ExitCode;

use anyhow::Result;
use meshplan_core::inference::{self, scenario::resolve};
use meshplan_core::scenario::Scenario;
use meshplan_core::trace::{NoTrace, Recorder};

use crate::args::{count_flag, TargetArgs};
use crate::io;
use crate::output::{emit, OutputArgs};

/// The serving workload flags `infer` and `plan infer` share.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ServeArgs {
    /// Weight dtype: bf16, fp8, int8, int4.
    #[arg(long)]
    pub weights_dtype: Option<String>,
    /// KV-cache dtype.
    #[arg(long)]
    pub kv_dtype: Option<String>,
    /// Prompt length (tokens; "128k" = 128,000).
    #[arg(long)]
    pub prompt_len: Option<String>,
    /// Tokens generated per request.
    #[arg(long)]
    pub gen_len: Option<String>,
    /// Serving engine: ideal (the book's roofline), vllm, sglang, trtllm.
    #[arg(long)]
    pub engine: Option<String>,
}

impl ServeArgs {
    /// Write the flags into the scenario's `[inference]`.
    pub fn apply(&self, sc: &mut Scenario) -> Result<()> {
        let inf = &mut sc.inference;
        for (dst, src) in [
            (&mut inf.weights_dtype, &self.weights_dtype),
            (&mut inf.kv_dtype, &self.kv_dtype),
            (&mut inf.engine, &self.engine),
        ] {
            if src.is_some() {
                dst.clone_from(src);
            }
        }
        for (dst, src, what) in [
            (&mut inf.prompt_len, &self.prompt_len, "prompt-len"),
            (&mut inf.gen_len, &self.gen_len, "gen-len"),
        ] {
            if let Some(c) = count_flag(src, what)? {
                *dst = Some(c);
            }
        }
        Ok(())
    }
}

/// Arguments of `meshplan infer`.
#[derive(clap::Args, Debug)]
pub struct InferArgs {
    /// Scenario, model, chip, mesh or chip count.
    #[command(flatten)]
    pub target: TargetArgs,
    /// Dtypes and request lengths.
    #[command(flatten)]
    pub serve: ServeArgs,
    /// Activation / matmul dtype.
    #[arg(long)]
    pub compute_dtype: Option<String>,
    /// Concurrent sequences per replica.
    #[arg(long)]
    pub batch: Option<String>,
    /// Context (KV length) to support.
    #[arg(long)]
    pub context: Option<String>,
    /// Tensor-parallel degree (default: all chips / ep).
    #[arg(long)]
    pub tp: Option<u64>,
    /// Expert-parallel degree.
    #[arg(long)]
    pub ep: Option<u64>,
    /// 1d | 2d-ws.
    #[arg(long)]
    pub sharding: Option<String>,
    /// Prefill MFU in (0, 1].
    #[arg(long)]
    pub mfu: Option<f64>,
    /// static | concurrency=N | rate=R (requests/s): continuous batching.
    #[arg(long)]
    pub workload: Option<String>,
    /// Output.
    #[command(flatten)]
    pub out: OutputArgs,
    /// `--plot FILE.svg`.
    #[command(flatten)]
    pub plot: crate::plot::InferPlotArgs,
}

/// Write the flags into the scenario (flags override the file).
fn apply_flags(a: &InferArgs, sc: &mut Scenario) -> Result<()> {
    a.serve.apply(sc)?;
    let inf = &mut sc.inference;
    for (dst, src) in [
        (&mut inf.compute_dtype, &a.compute_dtype),
        (&mut inf.workload, &a.workload),
    ] {
        if src.is_some() {
            dst.clone_from(src);
        }
    }
    for (dst, src, what) in [
        (&mut inf.batch, &a.batch, "batch"),
        (&mut inf.context, &a.context, "context"),
    ] {
        if let Some(c) = count_flag(src, what)? {
            *dst = Some(c);
        }
    }
    if a.mfu.is_some() {
        inf.mfu = a.mfu;
    }
    let p = &mut sc.parallelism;
    if a.tp.is_some() {
        p.tp = a.tp;
    }
    if a.ep.is_some() {
        p.ep = a.ep;
    }
    if a.sharding.is_some() {
        p.sharding.clone_from(&a.sharding);
    }
    Ok(())
}

/// Run the command.
pub fn run(a: InferArgs) -> Result<ExitCode> {
    let mut cat = io::catalog()?;
    let mut sc = a.target.load(&mut cat)?;
    apply_flags(&a, &mut sc)?;
    let s = resolve(&sc, &cat)?;
    let mut rec = Recorder::default();
    let r = if a.out.explain {
        inference::evaluate(&s.model, &s.chip, &s.query, &mut rec)?
    } else {
        inference::evaluate(&s.model, &s.chip, &s.query, &mut NoTrace)?
    };
    emit(&r, a.out.explain.then(|| rec.steps()), &a.out)?;
    crate::plot::infer(&s, &r, &a.plot)?;
    Ok(ExitCode::SUCCESS)
}
