//! `meshplan infer`: KV cache, rooflines, sharding, latency, throughput, cost.

use std::process::ExitCode;

use anyhow::Result;
use meshplan_core::inference::{self, scenario::resolve, serving::disagg};
use meshplan_core::trace::Recorder;

use serde::Serialize;

use crate::args::{finite, sections, TargetArgs};
use crate::io;
use crate::output::{emit, OutputArgs};

/// The serving workload flags `infer` and `plan infer` share (`[inference]` keys).
#[derive(clap::Args, Debug, Clone, Default, Serialize)]
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
    /// Serving engine: ideal (the book's roofline), vllm, sglang, trtllm, trtllm-2023, jetstream (TPU); `plan infer` also takes a comma list or "all".
    #[arg(long)]
    pub engine: Option<String>,
}

/// Arguments of `meshplan infer`.
#[derive(clap::Args, Debug)]
pub struct InferArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    #[command(flatten)]
    pub serve: ServeArgs,
    #[command(flatten)]
    pub run: InferRunArgs,
    #[command(flatten)]
    pub parallel: InferParallelArgs,
    #[command(flatten)]
    pub out: OutputArgs,
    #[command(flatten)]
    pub plot: crate::plot::InferPlotArgs,
}

/// The `[inference]` flags only `infer` takes.
#[derive(clap::Args, Debug, Serialize)]
pub struct InferRunArgs {
    /// Activation / matmul dtype.
    #[arg(long)]
    pub compute_dtype: Option<String>,
    /// Concurrent sequences per replica.
    #[arg(long)]
    pub batch: Option<String>,
    /// Context (KV length) to support.
    #[arg(long)]
    pub context: Option<String>,
    /// Prefill MFU in (0, 1].
    #[arg(long)]
    pub mfu: Option<f64>,
    /// static | concurrency=N | rate=R (requests/s): continuous batching.
    #[arg(long)]
    pub workload: Option<String>,
    /// Closed loop: N users, each sending its next request when the previous one completes (= --workload concurrency=N).
    #[arg(long, value_name = "N", conflicts_with_all = ["workload", "request_rate"])]
    #[serde(skip)]
    pub concurrency: Option<u64>,
    /// Open loop: Poisson arrivals at R requests/s over the slice (= --workload rate=R).
    #[arg(long, value_name = "R", conflicts_with = "workload")]
    #[serde(skip)]
    pub request_rate: Option<f64>,
    /// Speculative decoding: ngram | mtp | draft:MODEL.
    #[arg(long)]
    pub speculative: Option<String>,
    /// γ: tokens drafted per target step (default 4).
    #[arg(long)]
    pub spec_gamma: Option<u64>,
    /// α: acceptance rate of each drafted token.
    #[arg(long)]
    pub spec_acceptance: Option<f64>,
    /// Fraction of each prompt already in the prefix cache, [0, 1).
    #[arg(long)]
    pub prefix_cache_hit: Option<f64>,
    /// Disaggregated serving: the prefill pool, e.g. tp=4,workers=2 (keys tp, ep, pp, workers); with --decode.
    #[arg(long, value_name = "LAYOUT", requires = "decode")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefill: Option<String>,
    /// Disaggregated serving: the decode pool, e.g. tp=8,ep=8,workers=1,batch=64; with --prefill.
    #[arg(long, value_name = "LAYOUT", requires = "prefill")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decode: Option<String>,
    /// Disaggregated serving: move the KV layer by layer under the prefill (default: after it).
    #[arg(long)]
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub kv_overlap: bool,
}

/// `[parallelism]` flags of `infer`.
#[derive(clap::Args, Debug, Serialize)]
pub struct InferParallelArgs {
    /// Tensor-parallel degree (default: all chips / ep).
    #[arg(long)]
    pub tp: Option<u64>,
    /// Expert-parallel degree.
    #[arg(long)]
    pub ep: Option<u64>,
    /// Pipeline stages, each of tp·ep chips.
    #[arg(long)]
    pub pp: Option<u64>,
    /// 1d | 2d-ws.
    #[arg(long)]
    pub sharding: Option<String>,
}

/// Run the command.
pub fn run(mut a: InferArgs) -> Result<ExitCode> {
    let mut cat = io::catalog()?;
    finite("--request-rate", a.run.request_rate)?;
    if a.run.concurrency == Some(0) {
        anyhow::bail!("--concurrency must be at least 1 user");
    }
    if a.run.request_rate.is_some_and(|r| r <= 0.0) {
        anyhow::bail!("--request-rate must be above 0 requests/s");
    }
    // the benchmark-style flags are the [inference] workload key
    if let Some(n) = a.run.concurrency {
        a.run.workload = Some(format!("concurrency={n}"));
    }
    if let Some(r) = a.run.request_rate {
        a.run.workload = Some(format!("rate={r}"));
    }
    finite("--mfu", a.run.mfu)?;
    finite("--spec-acceptance", a.run.spec_acceptance)?;
    finite("--prefix-cache-hit", a.run.prefix_cache_hit)?;
    let slos = a.plot.slo_seconds()?;
    let flags = sections(&[
        ("inference", serde_json::to_value(&a.serve)?),
        ("inference", serde_json::to_value(&a.run)?),
        ("parallelism", serde_json::to_value(&a.parallel)?),
    ]);
    let sc = a.target.load(&mut cat, flags)?;
    let s = resolve(&sc, &cat)?;
    let mut rec = Recorder::default();
    if let Some(d) = &s.disagg {
        if a.plot.plot.plot.is_some() {
            anyhow::bail!("--plot: no plot of disaggregated pools yet (plan infer --disagg on --plot draws the Pareto front)");
        }
        let r = disagg::evaluate(&s.model, &s.chip, &s.query, d, &mut rec)?;
        emit(&r, a.out.explain.then(|| rec.steps()), &a.out)?;
        return Ok(ExitCode::SUCCESS);
    }
    let r = inference::evaluate(&s.model, &s.chip, &s.query, &mut rec)?;
    emit(&r, a.out.explain.then(|| rec.steps()), &a.out)?;
    crate::plot::infer(&s, &r, &a.plot, slos)?;
    Ok(ExitCode::SUCCESS)
}
