//! Step times, throughput and cost (book ch7, ch8).

use serde::Serialize;

use crate::inference::roofline::Bound;
use crate::trace::{Step, Tracer};
use crate::units::{Bytes, BytesPerSec, FlopsPerSec, Seconds};

/// A decode step split into its terms.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct DecodeStep {
    /// `B·KV_seq/(N·W_hbm·η_kv)`: attention reads the KV cache (always memory-bound).
    pub t_kv: Seconds,
    /// `w_dev/(W_hbm·η_hbm)`: loading every weight once.
    pub t_weights: Seconds,
    /// `2·B·P/(N·C·η_gemm)` (+ dequantisation): matmul FLOPs.
    pub t_math: Seconds,
    /// Inter-chip communication (overlapped with the MLP term in the book).
    pub t_comms: Seconds,
    /// Fixed per-step cost: `L·k·t_kernel + t_step` (0 in the book).
    pub t_fixed: Seconds,
    /// `t_kv + max(t_math, t_weights, t_comms)` (book), or
    /// `t_kv + max(t_math, t_weights) + t_comms + t_fixed` (an engine).
    pub step: Seconds,
    /// The largest of the terms.
    pub bound: Bound,
}

/// How an engine runs the decode roofline: the fractions of peak it reaches
/// and what it adds. [`StepEfficiency::BOOK`] is the book's roofline.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepEfficiency {
    /// η_hbm: weight streaming.
    pub hbm: f64,
    /// η_kv: KV-cache reads.
    pub kv: f64,
    /// η_gemm at this step's tokens.
    pub gemm: f64,
    /// Dequantisation time added to the matmul term.
    pub t_dequant: Seconds,
    /// Fixed per-step cost.
    pub t_fixed: Seconds,
    /// Communication overlaps the matmuls (the book) or adds to the step.
    pub comms_overlap: bool,
}

impl StepEfficiency {
    /// The book's roofline: everything at peak, communication overlapped.
    pub const BOOK: StepEfficiency = StepEfficiency {
        hbm: 1.0,
        kv: 1.0,
        gemm: 1.0,
        t_dequant: Seconds::ZERO,
        t_fixed: Seconds::ZERO,
        comms_overlap: true,
    };
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
    let hw = (chips, c, w_hbm);
    let work = (batch, kv_per_seq, params, w_dev);
    decode_step_with(work, hw, t_comms, &StepEfficiency::BOOK, tr)
}

/// The decode step as an engine runs it: the book's terms at the engine's
/// fractions of peak (`η`), plus its fixed cost; communication adds unless
/// it overlaps. With [`StepEfficiency::BOOK`] this is [`decode_step`].
/// `work` = (B, KV per sequence, P, w_dev), `hw` = (N, C, W_hbm).
pub fn decode_step_with<T: Tracer>(
    work: (u64, Bytes, f64, Bytes),
    hw: (u64, FlopsPerSec, BytesPerSec),
    t_comms: Seconds,
    e: &StepEfficiency,
    tr: &mut T,
) -> DecodeStep {
    let (batch, kv_per_seq, params, w_dev) = work;
    let (chips, c, w_hbm) = hw;
    let n = chips as f64;
    let b = batch as f64;
    let t_kv = Bytes::new(b * kv_per_seq.get()) / (w_hbm * (n * e.kv));
    let t_weights = w_dev / (w_hbm * e.hbm);
    let t_math = Seconds::new(2.0 * b * params / (n * c.get() * e.gemm)) + e.t_dequant;
    let step = if e.comms_overlap {
        t_kv + t_math.max(t_weights).max(t_comms) + e.t_fixed
    } else {
        t_kv + t_math.max(t_weights) + t_comms + e.t_fixed
    };
    let bound = Bound::dominant(
        (t_kv, Bound::KvLoad),
        &[
            (t_weights, Bound::WeightLoad),
            (t_math, Bound::Compute),
            (t_comms, Bound::Comms),
            (e.t_fixed, Bound::Overhead),
        ],
    );
    let book = *e == StepEfficiency::BOOK;
    tr.record(|| {
        let s = if book {
            Step::new(
                "infer.decode_step_time",
                "Decode step time",
                "B·KV/(N·W_hbm) + max(2·B·P/(N·C), w_dev/W_hbm, T_comms)",
            )
            .source("How To Scale Your Model, ch7 (general step time)")
        } else {
            Step::new(
                "infer.decode_step_time",
                "Decode step time (engine)",
                "B·KV/(N·W_hbm·η_kv) + max(2·B·P/(N·C·η_gemm) + T_deq, w_dev/(W_hbm·η_hbm)) + T_comms + T_fixed",
            )
            .bind("η_kv", e.kv, "")
            .bind("η_hbm", e.hbm, "")
            .bind("η_gemm", e.gemm, "")
            .bind("T_deq", e.t_dequant.get(), "s")
            .bind("T_fixed", e.t_fixed.get(), "s")
            .source("How To Scale Your Model ch7 step time at the engine profile's efficiencies (data/engines)")
        };
        s.bind("B", b, "sequences")
            .bind("KV", kv_per_seq.get(), "B")
            .bind("P", params, "params")
            .bind("w_dev", w_dev.get(), "B")
            .bind("N", n, "chips")
            .bind("C", c.get(), "FLOP/s")
            .bind("W_hbm", w_hbm.get(), "B/s")
            .bind("T_comms", t_comms.get(), "s")
            .result(step.get(), "s")
    });
    DecodeStep {
        t_kv,
        t_weights,
        t_math,
        t_comms,
        t_fixed: e.t_fixed,
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
