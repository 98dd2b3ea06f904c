//! Step times, throughput and cost (book ch7, ch8).

use serde::Serialize;

use crate::inference::roofline::Bound;
use crate::trace::{Step, Tracer};
use crate::units::{Bytes, BytesPerSec, FlopsPerSec, Seconds};

/// A decode step split into its terms.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct DecodeStep {
    /// `B·KV_seq/(N·W_hbm)`: attention reads the KV cache (always memory-bound).
    pub t_kv: Seconds,
    /// `P_bytes/(N·W_hbm)`: loading every weight once.
    pub t_weights: Seconds,
    /// `2·B·P/(N·C)`: matmul FLOPs.
    pub t_math: Seconds,
    /// Inter-chip communication (overlapped with the MLP term).
    pub t_comms: Seconds,
    /// `t_kv + max(t_math, t_weights, t_comms)`.
    pub step: Seconds,
    /// The largest of the four terms.
    pub bound: Bound,
}

/// The book's generation step (ch7):
/// `B·KV/(N·W_hbm) + max(2·B·P/(N·C), w_dev/W_hbm)`, with comms as a third
/// term of the max. `params` counts FLOPs (activated for MoE); `w_dev` the
/// weight bytes the most loaded chip reads (`P_bytes/N` when spread evenly).
#[allow(clippy::too_many_arguments)]
pub fn decode_step<T: Tracer>(
    batch: u64,
    kv_per_seq: Bytes,
    params: f64,
    w_dev: Bytes,
    chips: u64,
    c: FlopsPerSec,
    w_hbm: BytesPerSec,
    t_comms: Seconds,
    tr: &mut T,
) -> DecodeStep {
    let n = chips as f64;
    let b = batch as f64;
    let t_kv = Bytes::new(b * kv_per_seq.get()) / (w_hbm * n);
    let t_weights = w_dev / w_hbm;
    let t_math = Seconds::new(2.0 * b * params / (n * c.get()));
    let step = t_kv + t_math.max(t_weights).max(t_comms);
    let mut bound = Bound::KvLoad;
    let mut best = t_kv;
    for (t, k) in [
        (t_weights, Bound::WeightLoad),
        (t_math, Bound::Compute),
        (t_comms, Bound::Comms),
    ] {
        if t > best {
            best = t;
            bound = k;
        }
    }
    tr.record(|| {
        Step::new(
            "infer.decode_step_time",
            "Decode step time",
            "B·KV/(N·W_hbm) + max(2·B·P/(N·C), w_dev/W_hbm, T_comms)",
        )
        .bind("B", b, "sequences")
        .bind("KV", kv_per_seq.get(), "B")
        .bind("P", params, "params")
        .bind("w_dev", w_dev.get(), "B")
        .bind("N", n, "chips")
        .bind("C", c.get(), "FLOP/s")
        .bind("W_hbm", w_hbm.get(), "B/s")
        .bind("T_comms", t_comms.get(), "s")
        .result(step.get(), "s")
        .source("How To Scale Your Model, ch7 (general step time)")
    });
    DecodeStep {
        t_kv,
        t_weights,
        t_math,
        t_comms,
        step,
        bound,
    }
}

/// Tokens per second of a batch: `B/T_step` (book ch7 throughput).
pub fn tokens_per_s<T: Tracer>(batch: u64, step: Seconds, tr: &mut T) -> f64 {
    let r = batch as f64 / step.get();
    tr.record(|| {
        Step::new("infer.tokens_per_s", "Output tokens per second", "B/T_step")
            .bind("B", batch as f64, "sequences")
            .bind("T_step", step.get(), "s")
            .result(r, "tokens/s")
            .source("How To Scale Your Model, ch7")
    });
    r
}

/// USD per million output tokens: `N·price/3600/(tokens/s)·1e6`.
pub fn cost_per_million<T: Tracer>(
    chips: u64,
    usd_per_chip_hour: f64,
    tokens_per_s: f64,
    tr: &mut T,
) -> f64 {
    let c = chips as f64 * usd_per_chip_hour / 3600.0 / tokens_per_s * 1e6;
    tr.record(|| {
        Step::new(
            "infer.cost_per_million_tokens",
            "Cost per million output tokens",
            "N·price/3600/(tokens/s)·10⁶",
        )
        .bind("N", chips as f64, "chips")
        .bind("price", usd_per_chip_hour, "USD/chip-hour")
        .bind("tokens/s", tokens_per_s, "tokens/s")
        .result(c, "USD")
        .source("How To Scale Your Model, ch8 (cost)")
    });
    c
}

/// Prefill slices per generate slice so that prefill keeps up:
/// `P/G = B·T_prefill/(T_step·gen_len)` (book ch8, disaggregated serving).
pub fn disaggregation_ratio<T: Tracer>(
    batch: u64,
    t_prefill: Seconds,
    step: Seconds,
    gen_len: u64,
    tr: &mut T,
) -> f64 {
    let r = batch as f64 * t_prefill.get() / (step.get() * gen_len.max(1) as f64);
    tr.record(|| {
        Step::new(
            "infer.disagg_ratio",
            "Prefill : generate servers",
            "B·T_prefill/(T_step·gen_len)",
        )
        .bind("B", batch as f64, "sequences")
        .bind("T_prefill", t_prefill.get(), "s")
        .bind("T_step", step.get(), "s")
        .bind("gen_len", gen_len as f64, "tokens")
        .result(r, "")
        .source("How To Scale Your Model, ch8 (disaggregated serving)")
    });
    r
}
