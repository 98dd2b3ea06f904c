/*!
Serving as engines run it and benchmarks measure it.

* [`crate::inference::engine`]: engine profiles (`ideal` = the book's roofline, `vllm`,
  `sglang`, `trtllm`), each number with its source (`data/engines/`).
* [`workload`]: static batch, continuous batching at a concurrency (random
  or fixed lengths) or a request rate.
* [`lockstep`]: a closed loop at fixed lengths whose users run in waves.
* [`prefill_batches`]: how many prompts a prefill-first scheduler batches
  under a staggered load.
* [`queue`]: the distributions behind the TTFT/TPOT percentiles.
* [`validation`](crate::inference::validation): predicted vs published serving measurements (`data/serving/`).
* [`continuous`]: steady-state continuous batching and disaggregated
  prefill/decode.
* [`eager_prefill`]: the host launch floor of a prefill forward that runs
  without CUDA graphs (SGLang).
* [`moe_prefill`]: the routed experts of a prefill as the engine's fused-MoE
  kernel runs them at prefill token counts.
* [`disagg`]: a prefill pool and a decode pool with their own layouts and
  worker counts, the KV hand-off between them.

The step times themselves come from [`crate::inference`] (one place); this
module composes them into what a benchmark reports.
*/

pub mod continuous;
pub mod disagg;
pub mod eager_prefill;
pub mod lockstep;
pub mod moe_prefill;
pub mod prefill_batches;
pub mod queue;
// Kept here too: the speculative-decoding options were first published under `serving`.
pub use super::speculative;
pub mod workload;

use serde::Serialize;

use crate::error::Result;
use crate::hardware::Chip;
use crate::inference::speculative::DraftFootprint;
use crate::inference::step::StepModel;
use crate::model::kv;
use crate::trace::{NoTrace, Step, Tracer};
use crate::units::Bytes;

pub use crate::inference::engine::EngineProfile;
pub use continuous::{Continuous, Disaggregated, Percentiles};
pub use workload::Workload;

/// A static batch: prefill every prompt, then decode them together.
#[derive(Clone, Debug, Default, Serialize)]
pub struct StaticBatch {
    /// B: prompts per replica.
    pub batch: u64,
    /// Time to first token: the batched prefill of all B prompts, s.
    pub ttft_s: f64,
    /// Time per output token: the decode step at the mean KV length
    /// `prompt + gen/2`, s.
    pub tpot_s: f64,
    /// TTFT + (gen − 1)·TPOT, s.
    pub total_time_s: f64,
    /// replicas·B·gen / total, output tokens/s of the slice.
    pub output_tokens_per_s: f64,
    /// The same per chip.
    pub output_tokens_per_s_per_chip: f64,
    /// Chunks the prefill runs in (the engine's `max_prefill_tokens`).
    pub prefill_chunks: u64,
}

/// What `infer` reports about serving under an engine profile.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ServingReport {
    /// The engine profile.
    pub engine: String,
    /// Largest batch the engine's paged KV cache holds at the context
    /// (memory reserve and block rounding applied).
    pub engine_max_batch: u64,
    /// The static-batch benchmark at `batch`.
    pub static_batch: StaticBatch,
    /// Steady-state continuous batching (with a concurrency or rate workload).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub continuous: Option<Continuous>,
    /// The same slice split into prefill and decode replicas.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disaggregated: Option<Disaggregated>,
    /// Speculative decoding at the static batch's mean length.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub speculative: Option<speculative::SpecReport>,
    /// Fraction of each prompt served from the prefix cache (omitted when 0).
    #[serde(skip_serializing_if = "no_prefix_cache")]
    pub prefix_cache_hit: f64,
}

fn no_prefix_cache(h: &f64) -> bool {
    *h == 0.0
}

/// Largest batch the engine's KV cache holds at `context` tokens: usable
/// HBM (`u·HBM − w`, or `u·(HBM − w)` when the fraction is of the free
/// memory) over the KV of a sequence rounded up to whole blocks.
pub(crate) fn engine_max_batch<T: Tracer>(sm: &StepModel, chip: &Chip, tr: &mut T) -> u64 {
    let e = sm.engine;
    let hbm = chip.hbm_capacity.get();
    let blk = e.kv_block_tokens.max(1);
    let ctx = sm.q.context.div_ceil(blk) * blk;
    let copies = crate::inference::memory::kv_copies(
        sm.m.arch.mla.is_some(),
        e.is_ideal(),
        sm.hw.replicated_chips,
        &mut NoTrace,
    );
    let kvs_all =
        kv::bytes_per_sequence(&sm.m.arch, ctx, sm.q.kv_dtype, &mut NoTrace) * copies as f64;
    let n = sm.nr as f64;
    let of = |w: f64, kvs: Bytes| {
        let usable = if e.memory_of_free {
            e.memory_utilization * (hbm - w)
        } else {
            e.memory_utilization * hbm - w
        };
        if kvs.get() > 0.0 && usable > 0.0 {
            (n * usable / kvs.get()).floor()
        } else {
            0.0
        }
    };
    // a draft model takes its weights and cache beside the first stage
    let d = sm.draft.map_or_else(DraftFootprint::default, |dm| {
        DraftFootprint::new(dm.m, dm.w_dev, (dm.nr, sm.nr), ctx, sm.q.kv_dtype)
    });
    let stage = |i: usize, w: Bytes, kvs: Bytes| {
        let (w, kvs) = match i {
            0 => (w + d.w_dev, kvs + d.kv_seq_share),
            _ => (w, kvs),
        };
        (w.get(), kvs, of(w.get(), kvs))
    };
    // a pipeline: the stage that holds the fewest sequences (its layers' KV)
    let (w, kvs, b) = match sm.pipeline {
        None => stage(0, sm.w_dev, kvs_all),
        Some(pl) => pl
            .stages
            .iter()
            .enumerate()
            .map(|(i, s)| stage(i, s.w_dev, kvs_all * s.frac))
            .min_by(|x, y| x.2.total_cmp(&y.2))
            .unwrap_or((sm.w_dev.get(), kvs_all, 0.0)),
    };
    tr.record(|| {
        Step::new(
            "serving.engine_max_batch",
            "Largest batch of the engine's paged KV cache",
            "⌊N·(u·HBM − w_dev)/KV(⌈S/blk⌉·blk)⌋ (w_dev and KV include a draft model's share; KV counts R copies of an MLA latent, infer.kv_copies)",
        )
        .bind("N", n, "chips")
        .bind("u", e.memory_utilization, "")
        .bind("HBM", hbm, "B")
        .bind("w_dev", w, "B")
        .bind("blk", blk as f64, "tokens")
        .bind("KV", kvs.get(), "B")
        .result(b, "sequences")
        .source("engine profile (data/engines): memory_utilization, kv_block_tokens")
    });
    b.min(u64::MAX as f64 / 4.0) as u64
}

/// The static batch of `sm.q`: TTFT = prefill of B prompts; TPOT = decode
/// step at the mean KV length `T_in + T_out/2` (the KV term is linear in
/// the length, so the mean step is the step at the mean length).
pub(crate) fn static_batch<T: Tracer>(sm: &StepModel, replicas: u64, tr: &mut T) -> StaticBatch {
    let q = sm.q;
    let pf = sm.prefill(q.batch, q.prompt_len, &mut NoTrace);
    let mean_ctx = q.prompt_len.saturating_add(q.gen_len / 2);
    let tpot = sm.token_time(q.batch, mean_ctx).0;
    let total = pf.total + tpot * (q.gen_len.saturating_sub(1)) as f64;
    // in f64: a hostile batch (1e18) must not overflow the product
    let tokens = replicas as f64 * q.batch as f64 * q.gen_len as f64;
    let tps = tokens / total.get();
    tr.record(|| {
        Step::new(
            "serving.static_batch",
            "Static batch: output tokens/s including its prefill",
            "replicas·B·T_out / (TTFT(B·T_in) + (T_out − 1)·TPOT(B, T_in + T_out/2))",
        )
        .bind("B", q.batch as f64, "sequences")
        .bind("T_in", q.prompt_len as f64, "tokens")
        .bind("T_out", q.gen_len as f64, "tokens")
        .bind("TTFT", pf.total.get(), "s")
        .bind("T_step", tpot.get(), "s")
        .bind("replicas", replicas as f64, "")
        .result(tps, "tokens/s")
        .source("static-batch benchmark (prefill all prompts, then decode); step times from the engine profile")
    });
    StaticBatch {
        batch: q.batch,
        ttft_s: pf.total.get(),
        tpot_s: tpot.get(),
        total_time_s: total.get(),
        output_tokens_per_s: tps,
        output_tokens_per_s_per_chip: tps / (replicas * sm.replica_chips()) as f64,
        prefill_chunks: pf.chunks,
    }
}

/// Everything serving adds to the `infer` report.
pub(crate) fn report<T: Tracer>(
    sm: &StepModel,
    chip: &Chip,
    replicas: u64,
    tr: &mut T,
) -> Result<ServingReport> {
    let engine_max_batch = engine_max_batch(sm, chip, tr);
    let static_batch = static_batch(sm, replicas, tr);
    let (continuous, disaggregated) = match sm.q.workload {
        Workload::Static => (None, None),
        w => {
            let c = continuous::steady_state(sm, w, replicas, engine_max_batch, tr)?;
            let slots = sm.engine.slots(engine_max_batch);
            let d = continuous::disaggregated(sm, chip, w, replicas, slots, tr)?;
            (Some(c), d)
        }
    };
    let q = sm.q;
    let speculative = match q.speculative {
        Some(_) => {
            sm.token_time(q.batch, q.prompt_len.saturating_add(q.gen_len / 2))
                .1
        }
        None => None,
    };
    if let Some(s) = &speculative {
        tr.record(|| {
            Step::new(
                "serving.speculative_tpot",
                "Time per output token with speculative decoding",
                "(T_draft + T_verify(B·(γ + 1)))/E, E = (1 − α^(γ+1))/(1 − α)",
            )
            .bind("γ", s.gamma as f64, "tokens")
            .bind("α", s.acceptance, "")
            .bind("E", s.expected_tokens_per_step, "tokens")
            .bind("T_draft", s.draft_s, "s")
            .bind("T_verify", s.verify_step_s, "s")
            .result(s.tpot_s, "s")
            .source("Leviathan et al. 2023 (speculative decoding), eq. 1; step times from the engine profile")
        });
    }
    Ok(ServingReport {
        engine: sm.engine.name.clone(),
        engine_max_batch,
        static_batch,
        continuous,
        disaggregated,
        speculative,
        prefix_cache_hit: q.prefix_cache_hit,
    })
}

/// Bytes of KV one prompt of `len` tokens leaves (what disaggregated
/// serving moves from the prefill to the decode replica).
pub(crate) fn prompt_kv_bytes(sm: &StepModel, len: u64) -> Bytes {
    kv::bytes_per_sequence(&sm.m.arch, len, sm.q.kv_dtype, &mut NoTrace)
}
