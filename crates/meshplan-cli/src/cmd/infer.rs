//! `meshplan infer`: KV cache, rooflines, sharding, latency, throughput, cost.

use std::process::ExitCode;

use anyhow::{bail, Result};
use meshplan_core::inference::scenario::{resolve, InferSetup};
use meshplan_core::inference::{self};
use meshplan_core::scenario::Scenario;
use meshplan_core::trace::{NoTrace, Recorder};
use meshplan_core::units::fmt_si;

use crate::common::{print_json, render_steps, user_catalog, ExplainFormat};

/// Arguments of `meshplan infer`.
#[derive(clap::Args, Debug)]
pub struct InferArgs {
    /// Scenario, model, chip, mesh or chip count.
    #[command(flatten)]
    pub target: crate::common::TargetArgs,
    /// Weight dtype: bf16, fp8, int8, int4.
    #[arg(long)]
    pub weights_dtype: Option<String>,
    /// KV-cache dtype.
    #[arg(long)]
    pub kv_dtype: Option<String>,
    /// Activation / matmul dtype.
    #[arg(long)]
    pub compute_dtype: Option<String>,
    /// Concurrent sequences per replica.
    #[arg(long)]
    pub batch: Option<String>,
    /// Prompt length (tokens; "128k" = 128,000).
    #[arg(long)]
    pub prompt_len: Option<String>,
    /// Context (KV length) to support.
    #[arg(long)]
    pub context: Option<String>,
    /// Tokens generated per request.
    #[arg(long)]
    pub gen_len: Option<String>,
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
    /// Print the report as JSON (SI units).
    #[arg(long)]
    pub json: bool,
    /// Print the derivation.
    #[arg(long)]
    pub explain: bool,
    /// Derivation format.
    #[arg(long, value_enum, default_value_t = ExplainFormat::Text)]
    pub explain_format: ExplainFormat,
}

/// Write the flags into the scenario (flags override the file).
fn apply_flags(a: &InferArgs, sc: &mut Scenario) -> Result<()> {
    let count = crate::common::count_flag;
    let inf = &mut sc.inference;
    for (dst, src) in [
        (&mut inf.weights_dtype, &a.weights_dtype),
        (&mut inf.kv_dtype, &a.kv_dtype),
        (&mut inf.compute_dtype, &a.compute_dtype),
    ] {
        if src.is_some() {
            dst.clone_from(src);
        }
    }
    for (dst, src, what) in [
        (&mut inf.batch, &a.batch, "batch"),
        (&mut inf.prompt_len, &a.prompt_len, "prompt-len"),
        (&mut inf.context, &a.context, "context"),
        (&mut inf.gen_len, &a.gen_len, "gen-len"),
    ] {
        if let Some(c) = count(src, what)? {
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
    let cat = user_catalog()?;
    let mut sc = a.target.load()?;
    apply_flags(&a, &mut sc)?;
    let InferSetup {
        model,
        chip,
        query: q,
    } = resolve(&sc, &cat)?;
    let (r, steps) = if a.explain {
        let mut rec = Recorder::default();
        let r = inference::evaluate(&model, &chip, &q, &mut rec)?;
        (r, rec.into_steps())
    } else {
        (
            inference::evaluate(&model, &chip, &q, &mut NoTrace)?,
            Vec::new(),
        )
    };
    for w in &r.warnings {
        errln!("warning: {w}");
    }
    if !r.fits {
        bail!(
            "{} does not fit on {} {} even at batch 1: weights {} per chip, HBM {} per chip, one {}-token sequence of KV is {}",
            r.model,
            chip.display_name,
            r.mesh,
            fmt_si(r.weights_bytes_per_device.get(), "B"),
            fmt_si(r.hbm_bytes_per_device.get(), "B"),
            r.context,
            fmt_si(r.kv_cache_bytes_per_sequence.get(), "B")
        );
    }
    if a.json {
        print_json(&r)?;
    } else {
        let s = |v: f64, u: &str| fmt_si(v, u);
        outln!(
            "{} on {} {} (TP {} × EP {} × {} replicas, {} sharding)",
            r.model,
            r.chip,
            r.mesh,
            r.tp,
            r.ep,
            r.replicas,
            r.sharding
        );
        outln!(
            "weights            {} total, {} per chip ({})",
            s(r.weights_bytes.get(), "B"),
            s(r.weights_bytes_per_device.get(), "B"),
            r.weights_dtype.name()
        );
        outln!(
            "KV cache           {} per token, {} per {}-token sequence ({})",
            s(r.kv_cache_bytes_per_token.get(), "B"),
            s(r.kv_cache_bytes_per_sequence.get(), "B"),
            r.context,
            r.kv_dtype.name()
        );
        outln!(
            "free HBM per chip  {}",
            s(r.free_hbm_bytes_per_device.get(), "B")
        );
        outln!(
            "max batch          {} (exact {:.3}; leftover {} per chip){}",
            r.max_batch,
            r.max_batch_exact,
            s(r.leftover_hbm_bytes_per_device.get(), "B"),
            r.max_batch_one_kv_head
                .map(|b| format!("; with 1 KV head: {b}"))
                .unwrap_or_default()
        );
        outln!("B_crit             {:.0} tokens", r.b_crit_tokens);
        outln!("weight-load bound  {}", s(r.weight_load_time_s.get(), "s"));
        outln!(
            "decode step        {} at batch {} ({}-bound: KV {}, weights {}, FLOPs {}, comms {})",
            s(r.decode_step_time_s.get(), "s"),
            r.batch,
            r.bound_decode.name(),
            s(r.decode_kv_load_time_s.get(), "s"),
            s(r.weight_load_time_s.get(), "s"),
            s(r.decode_compute_time_s.get(), "s"),
            s(r.decode_comms_time_s.get(), "s")
        );
        outln!(
            "prefill (TTFT)     {} for {} tokens ({}-bound)",
            s(r.prefill_time_s.get(), "s"),
            r.prompt_len,
            r.bound_prefill.name()
        );
        outln!(
            "throughput         {:.1} tokens/s ({:.2} per chip)",
            r.tokens_per_s,
            r.tokens_per_s_per_chip
        );
        if let Some(c) = r.cost_per_million_tokens_usd {
            outln!("cost               ${c:.3} per million output tokens");
        }
        outln!(
            "TP limits          prefill < {:.1}-way, generation ICI-bound above {:.1}-way",
            r.tp_limit_prefill,
            r.tp_limit_generate
        );
        outln!(
            "smallest slice     {} ({} chips for weights + batch KV)",
            r.min_slice.clone().unwrap_or_else(|| "none offered".into()),
            r.min_chips
        );
        outln!(
            "disaggregated      {:.3} prefill servers per generate server",
            r.disagg_prefill_per_generate
        );
    }
    if a.explain {
        out!("{}", render_steps(&steps, a.explain_format));
    }
    Ok(ExitCode::SUCCESS)
}
