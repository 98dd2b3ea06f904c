//! Sharding for serving (book ch7, ch8): how far 1D tensor parallelism goes
//! for prefill and for generation, 2D weight-stationary (ESTI) sharding,
//! latency-bound collectives, and the smallest slice that holds a model.

use serde::Serialize;

use crate::hardware::fmt_shape;
use crate::trace::{Step, Tracer};
use crate::units::{Bytes, BytesPerSec, FlopsPerSec, Seconds};

/// Prefill TP limit: compute-bound iff `Y < M_Y·F·W_ici/C` (book ch5, ch7:
/// "≈ F/2200 per axis on v5e"). The ratio is independent of dtype when
/// activations and weights share it: int8 doubles C *and* halves the
/// activation bytes moved, so pass the bf16 `C` with bf16 activations, or
/// the int8 `C` with `bytes_a = 1` (`Y < M_Y·F·W_ici·(2/bytes_a)/C_int8`).
pub fn tp_prefill_limit<T: Tracer>(
    f: u64,
    m_y: u64,
    c: FlopsPerSec,
    w_ici_bidi: BytesPerSec,
    act_bytes: f64,
    tr: &mut T,
) -> f64 {
    let y = m_y as f64 * f as f64 * w_ici_bidi.get() * (2.0 / act_bytes) / c.get();
    tr.record(|| {
        Step::new(
            "infer.tp_prefill_limit",
            "Prefill TP stays compute-bound below",
            "M_Y·F·W_ici·(2/bytes_a)/C",
        )
        .bind("M_Y", m_y as f64, "")
        .bind("F", f as f64, "")
        .bind("W_ici", w_ici_bidi.get(), "B/s")
        .bind("bytes_a", act_bytes, "B")
        .bind("C", c.get(), "FLOP/s")
        .result(y, "ways")
        .source("How To Scale Your Model, ch5 (TP roofline), ch7 (prefill sharding)")
    });
    y
}

/// Generation TP limit while memory-bound: `T_hbm = 2DF/(Y·W_hbm)`,
/// `T_ici = 2BD/W_ici` → ICI-bound when `Y > F/(B·β)`, `β = W_hbm/W_ici`
/// (book ch7: 16384/(32·8) = 64-way).
pub fn tp_generate_limit<T: Tracer>(f: u64, batch: u64, beta: f64, tr: &mut T) -> f64 {
    let y = f as f64 / (batch.max(1) as f64 * beta);
    tr.record(|| {
        Step::new(
            "infer.tp_generate_limit",
            "Generation TP is ICI-bound above",
            "F/(B·β), β = W_hbm/W_ici",
        )
        .bind("F", f as f64, "")
        .bind("B", batch as f64, "sequences")
        .bind("β", beta, "")
        .result(y, "ways")
        .source("How To Scale Your Model, ch7 (model parallelism during generation)")
    });
    y
}

/// Bytes below which a `shards`-way ring collective is latency-bound: each hop
/// moves `bytes/shards`, which takes under one hop latency when
/// `bytes < shards·W_one-way·t_hop` (book ch7 App. C: 45 kB per hop on v5e,
/// 360 kB for 8 shards).
pub fn latency_bound_bytes<T: Tracer>(
    shards: u64,
    w_one_way: BytesPerSec,
    t_hop: Seconds,
    tr: &mut T,
) -> Bytes {
    let b = Bytes::new(shards as f64 * w_one_way.get() * t_hop.get());
    tr.record(|| {
        Step::new(
            "infer.latency_bound_bytes",
            "Collective is latency-bound below",
            "Y·W_one-way·t_hop",
        )
        .bind("Y", shards as f64, "")
        .bind("W_one-way", w_one_way.get(), "B/s")
        .bind("t_hop", t_hop.get(), "s")
        .result(b.get(), "B")
        .source("How To Scale Your Model, ch7 Appendix C")
    });
    b
}

/// 2D weight-stationary sharding of an MLP block over `N = X·Y·Z` chips.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct TwoDWs {
    /// Continuous optimum `X* = sqrt(N·D/(2F))` (= sqrt(N/8) for F = 4D).
    pub x_opt: f64,
    /// `Y·Z = N/X*`.
    pub yz_opt: f64,
    /// `T_math = 4BDF/(N·C)`.
    pub t_math: Seconds,
    /// `T_comms = 2BD/(X·W) + 4BF/(YZ·W)` at `X*`.
    pub t_comms: Seconds,
    /// 1D over `M` axes: `4BD/(M·W)`.
    pub t_comms_1d: Seconds,
    /// Chips above which 2D beats 1D over `M` axes: `N > 2·M²·F/D`
    /// (= `32·(F/D)·(M/4)²`; 72 for F = 4D, M = 3).
    pub crossover_chips: f64,
}

/// `T_comms` of 2D weight-stationary sharding at a given `X` (book ch7 Q7).
pub fn two_d_ws_comms(b: f64, d: f64, f: f64, n: f64, x: f64, w: BytesPerSec) -> Seconds {
    Seconds::new((2.0 * b * d / x + 4.0 * b * f * x / n) / w.get())
}

/// Analyse 2D weight-stationary vs 1D model parallelism over `m_axes` axes.
#[allow(clippy::too_many_arguments)]
pub fn two_d_ws<T: Tracer>(
    b: u64,
    d: u64,
    f: u64,
    n: u64,
    m_axes: u64,
    c: FlopsPerSec,
    w_ici_bidi: BytesPerSec,
    tr: &mut T,
) -> TwoDWs {
    let (bf, df, ff, nf, m) = (b as f64, d as f64, f as f64, n as f64, m_axes.max(1) as f64);
    let x_opt = (nf * df / (2.0 * ff)).sqrt();
    let t_comms = two_d_ws_comms(bf, df, ff, nf, x_opt, w_ici_bidi);
    let t_math = Seconds::new(4.0 * bf * df * ff / (nf * c.get()));
    let t_comms_1d = Seconds::new(4.0 * bf * df / (m * w_ici_bidi.get()));
    let crossover = 2.0 * m * m * ff / df;
    tr.scope(
        || {
            Step::new(
                "infer.2d_ws",
                "2D weight-stationary (ESTI)",
                "T_comms = 2BD/(X·W) + 4BF/(YZ·W)",
            )
            .source("How To Scale Your Model, ch7 Q7 and Appendix B")
        },
        |tr| {
            tr.record(|| {
                Step::new("infer.2d_ws.x_opt", "Optimal X", "√(N·D/(2F))")
                    .bind("N", nf, "chips")
                    .bind("D", df, "")
                    .bind("F", ff, "")
                    .result(x_opt, "")
            });
            tr.record(|| {
                Step::new(
                    "infer.2d_ws.crossover",
                    "2D beats 1D over M axes when N >",
                    "2·M²·F/D",
                )
                .bind("M", m, "")
                .bind("F/D", ff / df, "")
                .result(crossover, "chips")
            });
        },
        |_, s| s.bind("B", bf, "tokens").result(t_comms.get(), "s"),
    );
    TwoDWs {
        x_opt,
        yz_opt: nf / x_opt,
        t_math,
        t_comms,
        t_comms_1d,
        crossover_chips: crossover,
    }
}

pub use crate::hardware::smallest_slice;

/// Chips needed to hold `bytes` (weights plus a KV budget) with `hbm` per
/// chip, fully sharded: `⌈bytes/HBM⌉` (book ch8).
pub fn min_chips<T: Tracer>(bytes: Bytes, hbm: Bytes, tr: &mut T) -> u64 {
    let n = (bytes.get() / hbm.get()).ceil().max(1.0) as u64;
    tr.record(|| {
        Step::new(
            "infer.min_chips",
            "Chips needed (memory)",
            "⌈(P·bytes_w + KV budget)/HBM⌉",
        )
        .bind("bytes", bytes.get(), "B")
        .bind("HBM", hbm.get(), "B")
        .result(n as f64, "chips")
        .source("How To Scale Your Model, ch8")
    });
    n
}

/// "4x8" for a shape.
pub fn shape_name(s: &[u64]) -> String {
    fmt_shape(s)
}
