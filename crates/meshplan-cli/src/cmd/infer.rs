//! `meshplan infer`: KV cache, rooflines, sharding, latency, throughput, cost.

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use meshplan_core::hardware::parse_shape;
use meshplan_core::inference::{self, check_mesh, InferQuery, Sharding};
use meshplan_core::trace::{NoTrace, Recorder};
use meshplan_core::units::{fmt_si, parse_count, DType};

use crate::common::{print_json, render_steps, scenario, user_catalog, ExplainFormat};

/// Arguments of `meshplan infer`.
#[derive(clap::Args, Debug)]
pub struct InferArgs {
    /// Scenario TOML ([model], [hardware], [inference], [parallelism]); flags override it.
    pub scenario: Option<PathBuf>,
    /// Catalog model name.
    #[arg(long)]
    pub model: Option<String>,
    /// Catalog chip name (`NAME@book` for the book's numbers).
    #[arg(long)]
    pub hw: Option<String>,
    /// Slice shape, e.g. 4x4 (TPU).
    #[arg(long)]
    pub mesh: Option<String>,
    /// Number of chips (GPUs) when no mesh is given.
    #[arg(long)]
    pub chips: Option<String>,
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

fn count(s: &Option<String>, file: Option<u64>, default: u64, what: &str) -> Result<u64> {
    match s {
        Some(v) => parse_count(v).with_context(|| format!("--{what}")),
        None => Ok(file.unwrap_or(default)),
    }
}

fn dtype(s: Option<&str>, default: DType) -> Result<DType> {
    Ok(match s {
        Some(v) => DType::parse(v)?,
        None => default,
    })
}

/// Run the command.
pub fn run(a: InferArgs) -> Result<ExitCode> {
    let cat = user_catalog()?;
    let mut sc = scenario(a.scenario.as_deref())?;
    if let Some(m) = &a.model {
        sc.model.name = Some(m.clone());
    }
    if let Some(h) = &a.hw {
        sc.hardware.chip = Some(h.clone());
    }
    if sc.model.name.is_none() && !sc.model.has_overrides() {
        bail!("no model given: use --model NAME or a scenario with [model]");
    }
    let model = sc.model.resolve(&cat)?;
    let chip = sc.hardware.resolve_chip(&cat)?;
    let inf = &sc.inference;
    let mesh = match (&a.mesh, &a.chips) {
        (Some(m), _) => parse_shape(m)?,
        (None, Some(c)) => vec![parse_count(c).context("--chips")?],
        (None, None) => match (&sc.hardware.mesh, sc.hardware.chips) {
            (Some(m), _) => parse_shape(m)?,
            (None, Some(c)) => vec![c.0],
            (None, None) => bail!("no slice given: use --mesh 4x4 (TPU) or --chips N"),
        },
    };
    check_mesh(&chip, &mesh)?;
    let wdt = dtype(
        a.weights_dtype.as_deref().or(inf.weights_dtype.as_deref()),
        DType::Bf16,
    )?;
    let kvdt = dtype(a.kv_dtype.as_deref().or(inf.kv_dtype.as_deref()), wdt)?;
    let cdt = dtype(
        a.compute_dtype.as_deref().or(inf.compute_dtype.as_deref()),
        DType::Bf16,
    )?;
    let context = count(&a.context, inf.context.map(|c| c.0), 4096, "context")?;
    let q = InferQuery {
        weights_dtype: wdt,
        kv_dtype: kvdt,
        compute_dtype: cdt,
        batch: count(&a.batch, inf.batch.map(|c| c.0), 1, "batch")?,
        prompt_len: count(
            &a.prompt_len,
            inf.prompt_len.map(|c| c.0),
            context.min(2048),
            "prompt-len",
        )?,
        context,
        gen_len: count(&a.gen_len, inf.gen_len.map(|c| c.0), 512, "gen-len")?,
        mesh,
        tp: a.tp.or(sc.parallelism.tp),
        ep: a.ep.or(sc.parallelism.ep),
        sharding: match a.sharding.as_deref().or(sc.parallelism.sharding.as_deref()) {
            Some(s) => Sharding::parse(s)?,
            None => Sharding::OneD,
        },
        mfu: a.mfu.or(inf.mfu).unwrap_or(1.0),
    };
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
        eprintln!("warning: {w}");
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
        println!(
            "{} on {} {} (TP {} × EP {} × {} replicas, {} sharding)",
            r.model, r.chip, r.mesh, r.tp, r.ep, r.replicas, r.sharding
        );
        println!(
            "weights            {} total, {} per chip ({})",
            s(r.weights_bytes.get(), "B"),
            s(r.weights_bytes_per_device.get(), "B"),
            r.weights_dtype.name()
        );
        println!(
            "KV cache           {} per token, {} per {}-token sequence ({})",
            s(r.kv_cache_bytes_per_token.get(), "B"),
            s(r.kv_cache_bytes_per_sequence.get(), "B"),
            r.context,
            r.kv_dtype.name()
        );
        println!(
            "free HBM per chip  {}",
            s(r.free_hbm_bytes_per_device.get(), "B")
        );
        println!(
            "max batch          {} (exact {:.3}; leftover {} per chip){}",
            r.max_batch,
            r.max_batch_exact,
            s(r.leftover_hbm_bytes_per_device.get(), "B"),
            r.max_batch_one_kv_head
                .map(|b| format!("; with 1 KV head: {b}"))
                .unwrap_or_default()
        );
        println!("B_crit             {:.0} tokens", r.b_crit_tokens);
        println!("weight-load bound  {}", s(r.weight_load_time_s.get(), "s"));
        println!(
            "decode step        {} at batch {} ({}-bound: KV {}, weights {}, FLOPs {}, comms {})",
            s(r.decode_step_time_s.get(), "s"),
            r.batch,
            r.bound_decode.name(),
            s(r.decode_kv_load_time_s.get(), "s"),
            s(r.weight_load_time_s.get(), "s"),
            s(r.decode_compute_time_s.get(), "s"),
            s(r.decode_comms_time_s.get(), "s")
        );
        println!(
            "prefill (TTFT)     {} for {} tokens ({}-bound)",
            s(r.prefill_time_s.get(), "s"),
            r.prompt_len,
            r.bound_prefill.name()
        );
        println!(
            "throughput         {:.1} tokens/s ({:.2} per chip)",
            r.tokens_per_s, r.tokens_per_s_per_chip
        );
        if let Some(c) = r.cost_per_million_tokens_usd {
            println!("cost               ${c:.3} per million output tokens");
        }
        println!(
            "TP limits          prefill < {:.1}-way, generation ICI-bound above {:.1}-way",
            r.tp_limit_prefill, r.tp_limit_generate
        );
        println!(
            "smallest slice     {} ({} chips for weights + batch KV)",
            r.min_slice.clone().unwrap_or_else(|| "none offered".into()),
            r.min_chips
        );
        println!(
            "disaggregated      {:.3} prefill servers per generate server",
            r.disagg_prefill_per_generate
        );
    }
    if a.explain {
        print!("{}", render_steps(&steps, a.explain_format));
    }
    Ok(ExitCode::SUCCESS)
}
