//! Aggregates every serving question uses, derived from the rest of the
//! `infer` report (book ch7, ch8): the whole slice's HBM and what is free
//! of it, the KV cache of the whole batch, weights + KV, requests per second
//! (per chip), FLOPs per dollar, the unrounded chip count and the critical
//! intensities of int8 and fp8 weights.

use serde::Serialize;

use crate::hardware::Chip;
use crate::trace::{Step, Tracer};
use crate::units::DType;

use super::InferReport;

/// The derived keys, flattened into the `infer` report.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Aggregates {
    /// HBM of the whole slice: chips × HBM, bytes.
    pub slice_hbm_bytes: f64,
    /// Slice HBM minus every replica's weights, bytes (book ch7 Q2).
    pub slice_free_hbm_bytes: f64,
    /// KV cache of the whole batch (one replica): B × KV per sequence, bytes.
    pub kv_cache_bytes_batch: f64,
    /// Weights + the batch's KV (one replica), bytes.
    pub weights_plus_kv_bytes: f64,
    /// (weights + B·KV) / HBM per chip, before rounding up.
    pub min_chips_exact: f64,
    /// P·bytes_w / HBM per chip, before rounding up: the weights alone
    /// (book ch7/ch8 "how many chips just to hold the weights").
    pub min_chips_weights_exact: f64,
    /// Sequences that finish per decode step under continuous batching:
    /// B/G (book ch8: one in G steps per slot).
    pub completions_per_step: f64,
    /// KV tokens evicted per decode step: B·(P+G)/G, each finished
    /// sequence frees its prompt and generation (book ch8).
    pub kv_tokens_evicted_per_step: f64,
    /// The context T at which a decode step loads as many KV bytes as
    /// weight bytes at the report's batch: P·bytes_w / (B·KV_token)
    /// (longer contexts: KV loading dominates memory time, book ch7/ch8).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kv_equals_weights_context_len: Option<f64>,
    /// The batch B at which the KV bytes loaded per step equal the weight
    /// bytes at the report's context: P·bytes_w / (T·KV_token).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kv_equals_weights_batch: Option<f64>,
    /// The context T above which loading one sequence's KV takes longer than
    /// its token's matmul FLOPs, at any batch: 2·P_active·W_hbm / (C·KV_token)
    /// (book ch8: "at all sequence lengths greater than 2048 … KV cache
    /// loading \[beats\] FLOPs").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kv_load_equals_flops_context_len: Option<f64>,
    /// Finished requests per second of the slice: tokens/s / gen_len.
    pub requests_per_s: f64,
    /// The same per chip (book ch8: queries/s per chip).
    pub requests_per_s_per_chip: f64,
    /// C·3600 / (USD per chip-hour): bf16 FLOPs per dollar (book ch8).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flops_per_dollar: Option<f64>,
    /// C_int8 / W_hbm.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub critical_intensity_hbm_int8: Option<f64>,
    /// C_fp8 / W_hbm.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub critical_intensity_hbm_fp8: Option<f64>,
}

/// Derive the aggregates of `r` on `chip`.
pub fn aggregates<T: Tracer>(r: &InferReport, chip: &Chip, tr: &mut T) -> Aggregates {
    let hbm = chip.hbm_capacity.get();
    let slice = r.chips as f64 * hbm;
    let free = slice - r.weights_bytes.get() * r.replicas as f64;
    let kv = r.batch as f64 * r.kv_cache_bytes_per_sequence.get();
    let need = r.weights_bytes.get() + kv;
    let rps = if r.gen_len > 0 {
        r.tokens_per_s / r.gen_len as f64
    } else {
        0.0
    };
    let c = chip.flops(DType::Bf16).get();
    let fpd = chip
        .usd_per_chip_hour
        .filter(|p| *p > 0.0)
        .map(|p| c * 3600.0 / p);
    tr.record(|| {
        Step::new(
            "infer.slice_free_hbm",
            "Free HBM of the whole slice",
            "N·HBM − replicas·P·bytes_w",
        )
        .bind("N", r.chips as f64, "chips")
        .bind("HBM", hbm, "B")
        .bind("P·bytes_w", r.weights_bytes.get(), "B")
        .result(free, "B")
        .source("How To Scale Your Model ch7 Q2")
    });
    tr.record(|| {
        Step::new(
            "infer.min_chips_exact",
            "Chips the weights and the batch's KV need, unrounded",
            "(P·bytes_w + B·KV_seq) / HBM",
        )
        .bind("bytes", need, "B")
        .bind("HBM", hbm, "B")
        .result(need / hbm, "chips")
        .source("How To Scale Your Model ch8")
    });
    let weights_only = r.weights_bytes.get() / hbm;
    tr.record(|| {
        Step::new(
            "infer.min_chips_weights_exact",
            "Chips the weights alone need, unrounded",
            "P·bytes_w / HBM",
        )
        .bind("P·bytes_w", r.weights_bytes.get(), "B")
        .bind("HBM", hbm, "B")
        .result(weights_only, "chips")
        .source("How To Scale Your Model ch7, ch8")
    });
    let thresholds = kv_thresholds(r, chip, tr);
    let churn = turnover(r.batch, r.prompt_len, r.gen_len, tr);
    let ci = |d: DType| chip.peak.get(d).map(|x| x.get() / chip.hbm_bandwidth.get());
    Aggregates {
        slice_hbm_bytes: slice,
        slice_free_hbm_bytes: free,
        kv_cache_bytes_batch: kv,
        weights_plus_kv_bytes: need,
        min_chips_exact: need / hbm,
        min_chips_weights_exact: weights_only,
        completions_per_step: churn.0,
        kv_tokens_evicted_per_step: churn.1,
        kv_equals_weights_context_len: thresholds[0],
        kv_equals_weights_batch: thresholds[1],
        kv_load_equals_flops_context_len: thresholds[2],
        requests_per_s: rps,
        requests_per_s_per_chip: rps / r.chips.max(1) as f64,
        flops_per_dollar: fpd,
        critical_intensity_hbm_int8: ci(DType::Int8),
        critical_intensity_hbm_fp8: ci(DType::Fp8),
    }
}

/// Continuous batching's turnover per decode step with B slots, prompts of
/// P and generations of G tokens: each slot finishes once every G steps, so
/// B/G sequences complete per step, each freeing its P + G cached tokens
/// (book ch8: "B·(P + G)/G"). (0, 0) when G = 0.
fn turnover<T: Tracer>(b: u64, p: u64, g: u64, tr: &mut T) -> (f64, f64) {
    if g == 0 {
        return (0.0, 0.0);
    }
    let done = b as f64 / g as f64;
    let evicted = done * (p + g) as f64;
    tr.record(|| {
        Step::new(
            "infer.completions_per_step",
            "Sequences finishing per decode step (continuous batching)",
            "B / G",
        )
        .bind("B", b as f64, "seqs")
        .bind("G", g as f64, "tokens")
        .result(done, "seqs")
        .source("How To Scale Your Model ch8 (continuous batching)")
    });
    tr.record(|| {
        Step::new(
            "infer.kv_tokens_evicted_per_step",
            "KV tokens evicted per decode step",
            "B·(P + G) / G",
        )
        .bind("B", b as f64, "seqs")
        .bind("P", p as f64, "tokens")
        .bind("G", g as f64, "tokens")
        .result(evicted, "tokens")
        .source("How To Scale Your Model ch8 (continuous batching)")
    });
    (done, evicted)
}

/// Where decode's memory time flips from weights to KV cache, and where
/// KV loading overtakes the matmul FLOPs: [T at the report's B, B at the
/// report's T, T at any B] (None where the KV cache is empty or the batch
/// or context is 0: no crossing).
fn kv_thresholds<T: Tracer>(r: &InferReport, chip: &Chip, tr: &mut T) -> [Option<f64>; 3] {
    let w = r.weights_bytes.get();
    let kv = r.kv_cache_bytes_per_token.get();
    let per = |x: f64| (x > 0.0).then(|| w / x);
    let t_star = per(r.batch as f64 * kv);
    let b_star = per(r.context as f64 * kv);
    let c = chip.flops(r.compute_dtype).get();
    let hbm_bw = chip.hbm_bandwidth.get();
    let flops_token = 2.0 * r.params_active as f64;
    let t_flops = (kv > 0.0 && c > 0.0).then(|| flops_token * hbm_bw / (c * kv));
    if let Some(v) = t_star {
        tr.record(|| {
            Step::new(
                "infer.kv_equals_weights_context_len",
                "Context at which the batch's KV bytes equal the weights'",
                "T* = P·bytes_w / (B·KV_token)",
            )
            .bind("P·bytes_w", w, "B")
            .bind("B", r.batch as f64, "seqs")
            .bind("KV_token", kv, "B")
            .result(v, "tokens")
            .source("How To Scale Your Model ch7 (KV loading vs parameter loading)")
        });
    }
    if let Some(v) = b_star {
        tr.record(|| {
            Step::new(
                "infer.kv_equals_weights_batch",
                "Batch at which the KV bytes equal the weights'",
                "B* = P·bytes_w / (T·KV_token)",
            )
            .bind("P·bytes_w", w, "B")
            .bind("T", r.context as f64, "tokens")
            .bind("KV_token", kv, "B")
            .result(v, "seqs")
            .source("How To Scale Your Model ch7 (KV loading vs parameter loading)")
        });
    }
    if let Some(v) = t_flops {
        tr.record(|| {
            Step::new(
                "infer.kv_load_equals_flops_context_len",
                "Context above which a sequence's KV load outlasts its token's FLOPs",
                "T* = 2·P_active·W_hbm / (C·KV_token)",
            )
            .bind("P_active", r.params_active as f64, "params")
            .bind("W_hbm", hbm_bw, "B/s")
            .bind("C", c, "FLOP/s")
            .bind("KV_token", kv, "B")
            .result(v, "tokens")
            .source("How To Scale Your Model ch8 (KV loading vs FLOPs per sequence length)")
        });
    }
    [t_star, b_star, t_flops]
}
