//! Continuous batching in steady state, and disaggregated prefill/decode.
//!
//! Per replica, with `C` requests in flight, prompt `T_in`, output `T_out`:
//! * decode step `t_d = T_step(C, T_in + T_out/2)` (the engine's step);
//! * a request's prefill costs the engine `s_p = T_prefill(C·T_in)/C` (the
//!   prompts of the batch prefilled together, in chunks) and its own
//!   prefill latency is `s_1 = T_prefill(T_in)`;
//! * with `R` requests/s per replica the GPU spends `ρ = R·s_p` of its time
//!   prefilling, so a decoding request advances one token every
//!   `TPOT = t_d/(1 − ρ)`;
//! * `TTFT = s_1 + t_d/2 + W̄` (the step in flight, then the M/D/1 prefill
//!   queue, [`super::queue`]);
//! * Little's law closes the loop: `C = R·(TTFT + (T_out − 1)·TPOT)`.
//!
//! A fixed concurrency solves it for `R`, a request rate for `C`.

use serde::Serialize;

use super::queue::{md1_wait_mean, poisson_quantile, wait_quantile};
use super::{prompt_kv_bytes, Workload};
use crate::error::Result;
use crate::hardware::Chip;
use crate::inference::step::StepModel;
use crate::trace::{NoTrace, Step, Tracer};

/// Mean and percentiles of a latency, s.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Percentiles {
    /// Mean.
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
}

/// Steady-state continuous batching of the whole slice.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Continuous {
    /// "concurrency=N" or "rate=R".
    pub workload: String,
    /// Requests in flight per replica (C).
    pub concurrency: f64,
    /// Finished requests per second, slice.
    pub requests_per_s: f64,
    /// Output tokens per second, slice.
    pub output_tokens_per_s: f64,
    /// The same per chip.
    pub output_tokens_per_s_per_chip: f64,
    /// ρ: fraction of GPU time spent on prefill.
    pub prefill_utilisation: f64,
    /// Decode step at C, s.
    pub decode_step_s: f64,
    /// Time to first token, s.
    pub ttft_s: Percentiles,
    /// Time per output token, s.
    pub tpot_s: Percentiles,
    /// Whether the rate or concurrency exceeds what the replicas can serve
    /// (numbers are then at capacity: the largest batch, ρ ≤ 0.95).
    pub saturated: bool,
}

/// Disaggregated serving: prefill replicas hand the KV to decode replicas.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Disaggregated {
    /// Prefill replicas.
    pub prefill_replicas: u64,
    /// Decode replicas.
    pub decode_replicas: u64,
    /// Requests in flight per decode replica.
    pub decode_concurrency: f64,
    /// Finished requests per second, slice.
    pub requests_per_s: f64,
    /// Output tokens per second, slice.
    pub output_tokens_per_s: f64,
    /// The same per chip.
    pub output_tokens_per_s_per_chip: f64,
    /// Utilisation of each prefill replica.
    pub prefill_utilisation: f64,
    /// KV hand-off of one prompt over the scale-up link, s.
    pub kv_transfer_s: f64,
    /// TTFT: prefill queue + prefill + KV transfer, s.
    pub ttft_s: Percentiles,
    /// TPOT: the decode step, no prefill interference (deterministic), s.
    pub tpot_s: Percentiles,
    /// Whether the workload exceeds the split's capacity.
    pub saturated: bool,
}

/// One solved operating point of a replica.
struct Point {
    c: f64,
    r: f64,
    rho: f64,
    t_d: f64,
    s_p: f64,
    s_1: f64,
    w_mean: f64,
    tpot: f64,
    saturated: bool,
}

const RHO_MAX: f64 = 0.95;

impl Point {
    /// The operating point at arrival rate `r` per replica.
    fn new(c: f64, r: f64, (t_d, s_p, s_1): (f64, f64, f64), saturated: bool) -> Point {
        let rho = r * s_p;
        Point {
            c,
            r,
            rho,
            t_d,
            s_p,
            s_1,
            w_mean: md1_wait_mean(rho, s_p),
            tpot: t_d / (1.0 - rho),
            saturated,
        }
    }
}

/// Decode step and per-request prefill cost at concurrency `c`.
fn costs(sm: &StepModel, c: f64) -> (f64, f64) {
    let q = sm.q;
    let b = c.ceil().max(1.0) as u64;
    // per output token: the decode step, or its speculative equivalent
    let t_d = sm.token_time(b, q.prompt_len + q.gen_len / 2).0.get();
    let s_p = sm.prefill(b, q.prompt_len, &mut NoTrace).total.get() / b as f64;
    (t_d, s_p)
}

/// Solve one replica at concurrency `c` (requests in flight).
fn at_concurrency(sm: &StepModel, c: f64, s_1: f64, saturated: bool) -> Point {
    let q = sm.q;
    let (t_d, s_p) = costs(sm, c);
    let gaps = q.gen_len.saturating_sub(1) as f64;
    let mut r = c / (gaps * t_d + s_1);
    let mut sat = saturated;
    for _ in 0..200 {
        let rho = (r * s_p).min(RHO_MAX);
        let tpot = t_d / (1.0 - rho);
        let life = s_1 + t_d / 2.0 + md1_wait_mean(rho, s_p) + gaps * tpot;
        let next = c / life;
        if (next - r).abs() <= 1e-12 * r.max(1e-30) {
            r = next;
            break;
        }
        r = 0.5 * (r + next);
    }
    if r * s_p > RHO_MAX {
        sat = true;
        r = RHO_MAX / s_p;
    }
    Point::new(c, r, (t_d, s_p, s_1), sat)
}

/// Solve one replica at arrival rate `r` (requests/s): the concurrency
/// Little's law gives, capped at the largest batch.
fn at_rate(sm: &StepModel, r: f64, s_1: f64, max_batch: u64) -> Point {
    let q = sm.q;
    let gaps = q.gen_len.saturating_sub(1) as f64;
    let cap = max_batch.max(1) as f64;
    let mut c = 1.0f64;
    for _ in 0..200 {
        let (t_d, s_p) = costs(sm, c);
        let rho = r * s_p;
        if rho >= RHO_MAX {
            return at_concurrency(sm, cap, s_1, true);
        }
        let tpot = t_d / (1.0 - rho);
        let next = (r * (s_1 + t_d / 2.0 + md1_wait_mean(rho, s_p) + gaps * tpot)).max(1.0);
        if next > cap {
            return at_concurrency(sm, cap, s_1, true);
        }
        if (next - c).abs() < 1e-9 * c {
            c = next;
            break;
        }
        c = next;
    }
    let (t_d, s_p) = costs(sm, c);
    Point::new(c, r, (t_d, s_p, s_1), false)
}

fn ttft_percentiles(base: f64, t_res: f64, rho: f64, w_mean: f64) -> Percentiles {
    let q = |p| base + wait_quantile(p, t_res, rho, w_mean);
    Percentiles {
        mean: base + t_res / 2.0 + w_mean,
        p50: q(0.5),
        p90: q(0.9),
        p99: q(0.99),
    }
}

/// TPOT percentiles: `t_d + K·s_p/(T_out − 1)`, K ~ Poisson(R·(T_out − 1)·TPOT).
fn tpot_percentiles(pt: &Point, gaps: f64) -> Percentiles {
    if gaps <= 0.0 {
        return Percentiles::default();
    }
    let mean_k = pt.r * gaps * pt.tpot;
    let q = |p| pt.t_d + poisson_quantile(p, mean_k) as f64 * pt.s_p / gaps;
    Percentiles {
        mean: pt.tpot,
        p50: q(0.5),
        p90: q(0.9),
        p99: q(0.99),
    }
}

/// Steady-state continuous batching of `w` on the slice.
pub(crate) fn steady_state<T: Tracer>(
    sm: &StepModel,
    w: Workload,
    replicas: u64,
    max_batch: u64,
    tr: &mut T,
) -> Result<Continuous> {
    let q = sm.q;
    let s_1 = sm.prefill(1, q.prompt_len, &mut NoTrace).total.get();
    let reps = replicas.max(1) as f64;
    let pt = match w {
        Workload::Concurrency(c) => {
            let cap = max_batch.max(1);
            at_concurrency(sm, c.min(cap) as f64, s_1, c > cap)
        }
        Workload::Rate(r) => at_rate(sm, r / reps, s_1, max_batch),
        Workload::Static => at_concurrency(sm, q.batch as f64, s_1, false),
    };
    let gaps = q.gen_len.saturating_sub(1) as f64;
    let out = Continuous {
        workload: w.to_string(),
        concurrency: pt.c,
        requests_per_s: pt.r * reps,
        output_tokens_per_s: pt.r * reps * q.gen_len as f64,
        output_tokens_per_s_per_chip: pt.r * q.gen_len as f64 / sm.replica_chips() as f64,
        prefill_utilisation: pt.rho,
        decode_step_s: pt.t_d,
        ttft_s: ttft_percentiles(pt.s_1, pt.t_d, pt.rho, pt.w_mean),
        tpot_s: tpot_percentiles(&pt, gaps),
        saturated: pt.saturated,
    };
    tr.record(|| {
        Step::new(
            "serving.continuous",
            "Continuous batching, steady state (per replica)",
            "ρ = R·s_p; TPOT = t_d/(1 − ρ); TTFT = s_1 + t_d/2 + ρ·s_p/(2(1 − ρ)); C = R·(TTFT + (T_out − 1)·TPOT)",
        )
        .bind("C", pt.c, "requests")
        .bind("t_d", pt.t_d, "s")
        .bind("s_p", pt.s_p, "s")
        .bind("s_1", pt.s_1, "s")
        .bind("T_out", q.gen_len as f64, "tokens")
        .result(pt.r, "requests/s")
        .source("Little's law; M/D/1 prefill queue (Pollaczek–Khinchine), Poisson arrivals (docs/inference.md)")
    });
    Ok(out)
}

/// One prefill/decode split of the slice's replicas.
fn split(
    sm: &StepModel,
    w: Workload,
    (n_p, n_d): (u64, u64),
    s_1: f64,
    max_batch: u64,
) -> (f64, f64, f64, f64, bool) {
    let q = sm.q;
    let gaps = q.gen_len.saturating_sub(1).max(1) as f64;
    let cap = max_batch.max(1) as f64;
    let (c, sat_c) = match w {
        Workload::Concurrency(c) => ((c as f64).min(cap), c as f64 > cap),
        Workload::Rate(r) => {
            let mut c = 1.0f64;
            for _ in 0..100 {
                let t_d = costs(sm, c).0;
                c = (r / n_d as f64 * gaps * t_d).max(1.0);
            }
            (c.min(cap), c > cap)
        }
        Workload::Static => (q.batch as f64, false),
    };
    let (t_d, s_p) = costs(sm, c);
    let decode_cap = n_d as f64 * c / (gaps * t_d);
    let prefill_cap = RHO_MAX * n_p as f64 / s_p.max(s_1 * 1e-9);
    let (r, sat) = match w {
        Workload::Rate(r) => (
            r.min(decode_cap).min(prefill_cap),
            sat_c || r > decode_cap.min(prefill_cap),
        ),
        _ => (decode_cap.min(prefill_cap), sat_c),
    };
    (c, r, t_d, s_p, sat)
}

/// Disaggregated prefill/decode over the slice's replicas (≥ 2): the split
/// that serves the most requests/s; TTFT adds the KV hand-off over the
/// scale-up link, TPOT has no prefill interference.
pub(crate) fn disaggregated<T: Tracer>(
    sm: &StepModel,
    chip: &Chip,
    w: Workload,
    replicas: u64,
    max_batch: u64,
    tr: &mut T,
) -> Result<Option<Disaggregated>> {
    if replicas < 2 {
        return Ok(None);
    }
    let q = sm.q;
    let s_1 = sm.prefill(1, q.prompt_len, &mut NoTrace).total.get();
    let best = (1..replicas)
        .map(|n_p| (n_p, split(sm, w, (n_p, replicas - n_p), s_1, max_batch)))
        .max_by(|a, b| a.1 .1.total_cmp(&b.1 .1))
        .expect("at least one split");
    let (n_p, (c, r, t_d, s_p, saturated)) = best;
    let link = chip
        .nvlink
        .as_ref()
        .map(|n| n.per_gpu.one_way_rate().get())
        .or_else(|| {
            chip.scale_out
                .as_ref()
                .map(|s| s.per_chip.one_way_rate().get())
        })
        .unwrap_or(0.0)
        * sm.replica_chips() as f64;
    let kv = prompt_kv_bytes(sm, q.prompt_len).get();
    let kv_transfer_s = if link > 0.0 { kv / link } else { 0.0 };
    let rho = (r / n_p as f64 * s_p).min(RHO_MAX);
    let w_mean = md1_wait_mean(rho, s_p);
    let tpot = Percentiles {
        mean: t_d,
        p50: t_d,
        p90: t_d,
        p99: t_d,
    };
    tr.record(|| {
        Step::new(
            "serving.disaggregated",
            "Disaggregated prefill/decode: requests/s of the best split",
            "min(n_d·C/((T_out − 1)·t_d), ρ_max·n_p/s_p)",
        )
        .bind("n_p", n_p as f64, "replicas")
        .bind("n_d", (replicas - n_p) as f64, "replicas")
        .bind("C", c, "requests")
        .bind("t_d", t_d, "s")
        .bind("s_p", s_p, "s")
        .result(r, "requests/s")
        .source("How To Scale Your Model ch8 (disaggregated serving), M/D/1 prefill queue")
    });
    Ok(Some(Disaggregated {
        prefill_replicas: n_p,
        decode_replicas: replicas - n_p,
        decode_concurrency: c,
        requests_per_s: r,
        output_tokens_per_s: r * q.gen_len as f64,
        output_tokens_per_s_per_chip: r * q.gen_len as f64 / (replicas * sm.replica_chips()) as f64,
        prefill_utilisation: rho,
        kv_transfer_s,
        ttft_s: ttft_percentiles(s_1 + kv_transfer_s, 0.0, rho, w_mean),
        tpot_s: tpot,
        saturated,
    }))
}
