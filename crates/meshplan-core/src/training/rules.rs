//! The book's training rules (ch5, ch12) as traced functions: critical batch
//! sizes per strategy, the tensor-parallel limit, the optimal FSDP × TP split
//! and the DCN bound. `alpha` is always `C / W` with `W` the bidirectional
//! per-axis ICI bandwidth on TPUs (2550 on v5p) or the collective bandwidth on
//! GPUs.

use crate::trace::{Step, Tracer};

const CH5: &str = "How To Scale Your Model ch5 (training)";

/// α = C / W.
pub fn alpha<T: Tracer>(c: f64, w: f64, tr: &mut T) -> f64 {
    let a = c / w;
    tr.record(|| {
        Step::new("rules.alpha", "Critical intensity α", "C/W_ici")
            .bind("C", c, "FLOP/s")
            .bind("W_ici", w, "B/s")
            .result(a, "FLOPs/B")
            .source(CH5)
    });
    a
}

/// Pure data parallelism / FSDP: compute-bound iff `B/X > α/M_X` tokens per chip.
pub fn dp_min_batch_per_chip<T: Tracer>(alpha: f64, m_x: f64, tr: &mut T) -> f64 {
    let b = alpha / m_x;
    tr.record(|| {
        Step::new(
            "rules.dp_min_batch_per_chip",
            "DP/FSDP minimum batch per chip (T_math = 8BDF/(XC) vs T_comms = 8DF/(W·M_X))",
            "α/M_X",
        )
        .bind("α", alpha, "")
        .bind("M_X", m_x, "")
        .result(b, "tokens")
        .source(CH5)
    });
    b
}

/// Tensor parallelism: compute-bound iff `Y < M_Y·F/α`.
pub fn tp_max_degree<T: Tracer>(f: f64, alpha: f64, m_y: f64, tr: &mut T) -> f64 {
    let y = m_y * f / alpha;
    tr.record(|| {
        Step::new(
            "rules.tp_max",
            "Largest compute-bound TP degree (T_math = 4BDF/(YC) vs T_comms = 4BD/(W·M_Y))",
            "M_Y·F/α",
        )
        .bind("M_Y", m_y, "")
        .bind("F", f, "")
        .bind("α", alpha, "")
        .result(y, "ways")
        .source(CH5)
    });
    y
}

/// Mixed FSDP + TP: compute-bound iff `B/N > α²/(M_X·M_Y·F)` (May-2026 text;
/// the Feb-2025 text had `4α²/(M_X·M_Y·F)`, which is what you get by adding
/// T_FSDP and T_TP instead of overlapping them on their separate axes).
pub fn fsdp_tp_min_batch_per_chip<T: Tracer>(
    alpha: f64,
    m_x: f64,
    m_y: f64,
    f: f64,
    tr: &mut T,
) -> f64 {
    let b = alpha * alpha / (m_x * m_y * f);
    tr.record(|| {
        Step::new(
            "rules.fsdp_tp_min_batch_per_chip",
            "FSDP+TP minimum batch per chip",
            "α²/(M_X·M_Y·F)",
        )
        .bind("α", alpha, "")
        .bind("M_X", m_x, "")
        .bind("M_Y", m_y, "")
        .bind("F", f, "")
        .result(b, "tokens")
        .source(CH5)
    });
    b
}

/// Optimal FSDP degree `X_opt = sqrt((B/F)·(M_X/M_Y)·N)`.
pub fn x_opt<T: Tracer>(b: f64, f: f64, n: f64, m_x: f64, m_y: f64, tr: &mut T) -> f64 {
    let x = ((b / f) * (m_x / m_y) * n).sqrt();
    tr.record(|| {
        Step::new("rules.x_opt", "Optimal FSDP degree", "√((B/F)·(M_X/M_Y)·N)")
            .bind("B", b, "tokens")
            .bind("F", f, "")
            .bind("N", n, "chips")
            .bind("M_X", m_x, "")
            .bind("M_Y", m_y, "")
            .result(x, "chips")
            .source(CH5)
    });
    x
}

/// The divisor of `n` closest to `x` on a log scale (how the book rounds
/// X_opt = 1333 to 1024 and 13.7 to 16). Ties go to the smaller divisor.
pub fn nearest_divisor(n: u64, x: f64) -> u64 {
    let mut best = 1;
    let mut best_d = f64::INFINITY;
    let mut d = 1;
    // `d <= n / d`, not `d * d <= n`: no overflow for n near u64::MAX
    while d <= n / d {
        if n % d == 0 {
            for c in [d, n / d] {
                let dist = ((c as f64) / x).ln().abs();
                if dist < best_d - 1e-12 || ((dist - best_d).abs() <= 1e-12 && c < best) {
                    best = c;
                    best_d = dist;
                }
            }
        }
        d += 1;
    }
    best
}

/// Data parallelism across slices over DCN: per-slice batch > `C/W_dcn`.
pub fn dcn_min_batch_per_slice<T: Tracer>(c: f64, w_dcn: f64, tr: &mut T) -> f64 {
    let b = c / w_dcn;
    tr.record(|| {
        Step::new(
            "rules.dcn_min_batch_per_slice",
            "DCN data parallelism: minimum batch per slice (T_comms = 8DF/(M·W_dcn))",
            "C/W_dcn",
        )
        .bind("C", c, "FLOP/s")
        .bind("W_dcn", w_dcn, "B/s")
        .result(b, "tokens")
        .source(CH5)
    });
    b
}

/// FSDP+TP compute/comms ratio `sqrt(B·F·M_X·M_Y)/(α·sqrt(N))` at X_opt.
pub fn fsdp_tp_ratio(b: f64, f: f64, n: f64, alpha: f64, m_x: f64, m_y: f64) -> f64 {
    (b * f * m_x * m_y).sqrt() / (alpha * n.sqrt())
}
