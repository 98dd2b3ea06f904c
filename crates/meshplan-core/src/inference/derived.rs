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
    let ci = |d: DType| chip.peak.get(d).map(|x| x.get() / chip.hbm_bandwidth.get());
    Aggregates {
        slice_hbm_bytes: slice,
        slice_free_hbm_bytes: free,
        kv_cache_bytes_batch: kv,
        weights_plus_kv_bytes: need,
        min_chips_exact: need / hbm,
        requests_per_s: rps,
        requests_per_s_per_chip: rps / r.chips.max(1) as f64,
        flops_per_dollar: fpd,
        critical_intensity_hbm_int8: ci(DType::Int8),
        critical_intensity_hbm_fp8: ci(DType::Fp8),
    }
}
