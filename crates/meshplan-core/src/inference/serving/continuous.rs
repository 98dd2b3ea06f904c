//! Continuous batching in steady state, as serving benchmarks measure it,
//! and disaggregated prefill/decode.
//!
//! A closed loop (`concurrency=N`: N users, each sending its next request
//! when the previous one completes — vLLM/SGLang `benchmark_serving
//! --max-concurrency`, genai-perf/AIPerf) or an open loop (`rate=R`:
//! Poisson arrivals), per replica, prompt `T_in`, output `T_out`, under the
//! engine's scheduler: at most `B = min(max_num_seqs, KV capacity)` requests
//! run at once, the rest wait in its queue; a step carries at most
//! `K = max_prefill_tokens` tokens; chunked prefill shares steps with the
//! running decodes (or runs first with them paused, `prefill_priority`).
//! With `C = min(N, B)` requests running:
//! * decode step `t_d = T_step(C, T_in + T_out/2)` (the engine's
//!   `StepModel`, the one step model);
//! * a request's prefill: an engine that mixes prompt chunks into its
//!   decode steps takes `s_p = T_prefill(C·T_in)/C` of GPU time per request
//!   (the batched prefill's share) and its own latency is `s_1 =
//!   T_prefill(T_in)` plus `chunks·(t_d − t_fixed)` for the decode rows its
//!   chunks carry; a prefill-first engine batches the b prompts waiting
//!   ([`super::prefill_batches`]): `s_p = T(b)/b`, `s_1 = T(b)`, and each
//!   batch stalls the decodes for `t_ev = T(b)` (`t_ev = s_p` when mixed);
//! * the others' prefill load a request sees, `ρ_o = R·s_p·(C − 1)/C` (a
//!   user's own prefill never delays its own tokens; an open loop sees
//!   `ρ = R·s_p`, Poisson arrivals see time averages);
//! * `TPOT = min(t_d/(1 − ρ_o), t_full)`: a decoding request advances one
//!   token per step, the others' prefills stretching the steps, and a mixed
//!   step holds at most `K` tokens, so it never exceeds the full-budget step
//!   `t_full = t_d + T_prefill(K − C) − t_fixed`;
//! * `TTFT = t_fe + W_q + s_1 + t_d/2 + W̄`: the frontend, the wait for a
//!   slot or for the token budget `W_q`, the prefill, the step in flight and
//!   the M/D/1 queue of the others' prefill events of `t_ev` ([`super::queue`]);
//! * the closed loop closes with Little's law on the user cycle,
//!   `N = R·(TTFT + (T_out − 1)·TPOT)`: the requests beyond `B` (or the
//!   prefills beyond the budget) wait in `W_q` — TPOT holds, TTFT grows.
//!
//! Why analytic rather than a discrete-event simulation: every quantity is a
//! closed form or a one-dimensional monotone root (bisection on R), so the
//! planner can call it per candidate, `--explain` can show each term in
//! symbols, and the tests derive it by hand; a simulation of the same
//! deterministic requests would need a warm-up and an iteration bound and
//! adds no information the mean-value model lacks for equal-length requests.

use serde::Serialize;

use super::prefill_batches::{Batches, Share};
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
    /// Requests running in the engine per replica (C ≤ slots).
    pub concurrency: f64,
    /// B: requests the engine runs at once per replica, `min(max_num_seqs,
    /// KV capacity)`.
    pub slots: u64,
    /// K: the engine's token budget per step (0: none).
    pub token_budget: u64,
    /// What bounds the operating point: "none", "slots" (requests beyond B
    /// wait) or "token-budget" (prompts wait for room in the steps).
    pub limited_by: String,
    /// Whether the users run in lockstep waves (`lockstep=N` whose waves
    /// persist, [`super::lockstep`]); omitted when false.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub lockstep: bool,
    /// Finished requests per second, slice.
    pub requests_per_s: f64,
    /// Output tokens per second, slice.
    pub output_tokens_per_s: f64,
    /// The same per chip.
    pub output_tokens_per_s_per_chip: f64,
    /// Output tokens per second one user receives, `1/TPOT`.
    pub output_tokens_per_s_per_user: f64,
    /// ρ: fraction of GPU time spent on prefill.
    pub prefill_utilisation: f64,
    /// Decode step at C, s.
    pub decode_step_s: f64,
    /// A request's own prefill latency, with the decode rows it shares its
    /// steps with, s.
    pub prefill_s: f64,
    /// The engine's frontend time per request (HTTP, tokenisation), s.
    pub frontend_s: f64,
    /// W_q: mean wait for a slot or for the token budget, s.
    pub queue_wait_s: f64,
    /// Time to first token, s.
    pub ttft_s: Percentiles,
    /// Time per output token, s.
    pub tpot_s: Percentiles,
    /// Inter-token latency (the gaps between a request's tokens), s: the
    /// decode step, or the step plus the prefill work it carries
    /// (`itl_percentiles`). Its mean is the TPOT's; its median is what
    /// `benchmark_serving` prints as "Median ITL".
    pub itl_s: Percentiles,
    /// End-to-end request latency `TTFT + (T_out − 1)·TPOT`, s (the
    /// percentiles add the two percentiles: exact if a request's TTFT and
    /// TPOT rise together).
    pub e2e_s: Percentiles,
    /// Whether the request rate exceeds what the replicas can serve
    /// (numbers are then at capacity: every slot busy).
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
    /// TTFT: frontend + prefill queue + prefill + KV transfer, s.
    pub ttft_s: Percentiles,
    /// TPOT: the decode step, no prefill interference (deterministic), s.
    pub tpot_s: Percentiles,
    /// Whether the workload exceeds the split's capacity.
    pub saturated: bool,
}

/// What bounds an operating point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Limit {
    None,
    Slots,
    TokenBudget,
}

impl Limit {
    fn name(self) -> &'static str {
        match self {
            Limit::None => "none",
            Limit::Slots => "slots",
            Limit::TokenBudget => "token-budget",
        }
    }
}

/// One solved operating point of a replica.
#[derive(Clone, Copy, Debug)]
struct Point {
    /// Requests running (≤ B).
    c: f64,
    /// Requests/s.
    r: f64,
    /// Prefill share of the GPU time, all requests.
    rho: f64,
    /// The others' prefill load one request sees.
    rho_o: f64,
    t_d: f64,
    s_p: f64,
    s_1: f64,
    /// The stall one prefill event puts on the decodes ([`Share::t_ev`]).
    t_ev: f64,
    /// Prompts per prefill batch ([`Share::b`]).
    b: f64,
    /// Length of the step a new request may find in flight (0: none).
    t_res: f64,
    /// The step an overlap scheduler launched before the request was
    /// received, less the prefill's host launch it hides ([`overlap_wait`]).
    t_ovl: f64,
    /// M/D/1 wait behind the others' prefills.
    w_mean: f64,
    tpot: f64,
    /// Whether every step is full (TPOT = t_full, deterministic).
    tpot_capped: bool,
    /// Wait for a slot or the token budget.
    queue_s: f64,
    limit: Limit,
    saturated: bool,
}

/// Open-loop stability bound: past ρ = 0.95 an M/D/1 queue's wait grows
/// without bound; a rate that needs more is reported at capacity.
const RHO_MAX: f64 = 0.95;

/// The decode step of `c` requests at the mean length `T_in + T_out/2`
/// (per output token: the step, or its speculative equivalent), s.
pub(super) fn decode_step(sm: &StepModel, c: f64) -> f64 {
    let q = sm.q;
    let b = c.ceil().max(1.0) as u64;
    sm.token_time(b, q.prompt_len + q.gen_len / 2).0.get()
}

/// Decode step and per-request share of the batched prefill at
/// concurrency `c`.
fn costs(sm: &StepModel, c: f64) -> (f64, f64) {
    let b = c.ceil().max(1.0) as u64;
    let s_p = sm.prefill(b, sm.q.prompt_len, &mut NoTrace).total.get() / b as f64;
    (decode_step(sm, c), s_p)
}

/// One request's own prefill, priced once per steady state (it does not
/// depend on the concurrency the loops solve for).
#[derive(Clone, Copy, Debug)]
struct OwnPrefill {
    /// `T_prefill(T_in)`, s.
    total: f64,
    /// Chunks it is prefilled in.
    chunks: f64,
    /// Host launch time beyond the GPU's (eager prefill), s.
    host: f64,
}

impl OwnPrefill {
    fn of(sm: &StepModel) -> OwnPrefill {
        let pf = sm.prefill(1, sm.q.prompt_len, &mut NoTrace);
        OwnPrefill {
            total: pf.total.get(),
            chunks: pf.chunks as f64,
            host: pf.host.get(),
        }
    }
}

/// A request's own prefill latency: `T_prefill(T_in)`, plus the decode rows
/// of the `others` running requests in each of its chunks when the engine
/// mixes them into the same steps (`chunks·(t_d − t_fixed)`).
fn prefill_latency(sm: &StepModel, pf: OwnPrefill, others: f64, t_d: f64) -> f64 {
    let shared = if others >= 1.0 && sm.engine.mixes_prefill() {
        pf.chunks * (t_d - sm.fixed().get()).max(0.0)
    } else {
        0.0
    };
    pf.total + shared
}

/// A request's prefill at `r` requests/s with `c` running and decode steps
/// of `t_d`: a prefill-first engine's batches of the prompts waiting
/// ([`super::prefill_batches`]); a mixing engine's share of the batched
/// prefill `s_p = T_prefill(C·T_in)/C` and its own latency with the decode
/// rows its chunks carry.
fn share_at(
    sm: &StepModel,
    pf: OwnPrefill,
    batches: Option<&Batches>,
    (c, t_d, s_p): (f64, f64, f64),
    r: f64,
) -> Share {
    match batches {
        Some(b) => b.share(r, t_d, c),
        None => Share {
            s_p,
            s_1: prefill_latency(sm, pf, c - 1.0, t_d),
            t_ev: s_p,
            b: 1.0,
        },
    }
}

/// The step of `c` decode rows that fills the token budget with a prompt
/// chunk of `K − c` tokens: `t_full = t_d + T_prefill(K − c) − t_fixed`;
/// None when the engine does not mix prefill into decode steps or the
/// decodes alone fill the budget.
fn full_step(sm: &StepModel, c: f64, t_d: f64) -> Option<f64> {
    let e = sm.engine;
    if !e.mixes_prefill() {
        return None;
    }
    let room = e.max_prefill_tokens as f64 - c.ceil();
    if room < 1.0 {
        return None;
    }
    // prefill() prefills (1 − h) of the prompt: ask for the chunk's tokens
    let h = sm.q.prefix_cache_hit.clamp(0.0, 0.999);
    let len = (room / (1.0 - h)).round().max(1.0) as u64;
    let chunk = sm.prefill(1, len, &mut NoTrace).total.get() - sm.fixed().get();
    Some(t_d + chunk.max(0.0))
}

/// Prompt tokens a request prefills (the uncached share).
pub(super) fn prefill_tokens(sm: &StepModel) -> f64 {
    let h = sm.q.prefix_cache_hit.clamp(0.0, 0.999);
    (sm.q.prompt_len.max(1) as f64 * (1.0 - h)).max(1.0)
}

/// The closed loop of `n` users per replica on `slots` slots.
fn closed_loop(sm: &StepModel, pf: OwnPrefill, n: u64, slots: u64) -> Point {
    let q = sm.q;
    let c = n.min(slots).max(1) as f64;
    let (t_d, s_p) = costs(sm, c);
    let batches = Batches::of(sm);
    let at = |r: f64| share_at(sm, pf, batches.as_ref(), (c, t_d, s_p), r);
    let others = c - 1.0;
    let share = others / c;
    let t_fe = sm.engine.frontend_s;
    let t_res = if others > 0.0 { t_d } else { 0.0 };
    let t_ovl = overlap_wait(sm, pf, t_res);
    let gaps = q.gen_len.saturating_sub(1) as f64;
    // the user cycle at R requests/s: frontend, prefill, step in flight,
    // M/D/1 wait behind the others' prefills, T_out − 1 stretched steps
    let cycle = |r: f64| {
        let sh = at(r);
        let rho_o = r * sh.s_p * share;
        if rho_o >= 1.0 {
            return f64::INFINITY;
        }
        t_fe + sh.s_1
            + t_ovl
            + t_res / 2.0
            + md1_wait_mean(rho_o, sh.t_ev)
            + gaps * t_d / (1.0 - rho_o)
    };
    // C = R·cycle(R) is increasing in R below ρ_o = 1: bisection (s_p is
    // least for the largest batch)
    let least = batches.as_ref().map_or(s_p, |b| b.least_share(c));
    let r = if share <= 0.0 || least <= 0.0 {
        c / cycle(0.0)
    } else {
        let (mut lo, mut hi) = (0.0, 1.0 / (least * share));
        for _ in 0..200 {
            let mid = 0.5 * (lo + hi);
            if mid * cycle(mid) < c {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        lo
    };
    let sh = at(r);
    let rho_o = r * sh.s_p * share;
    let in_engine =
        |rho_o: f64, sh: Share| t_fe + sh.s_1 + t_ovl + t_res / 2.0 + md1_wait_mean(rho_o, sh.t_ev);
    let mut pt = Point {
        c,
        r,
        rho: r * sh.s_p,
        rho_o,
        t_d,
        s_p: sh.s_p,
        s_1: sh.s_1,
        t_ev: sh.t_ev,
        b: sh.b,
        t_res,
        t_ovl,
        w_mean: md1_wait_mean(rho_o, sh.t_ev),
        tpot: t_d / (1.0 - rho_o),
        tpot_capped: false,
        queue_s: 0.0,
        limit: Limit::None,
        saturated: false,
    };
    // a mixed step holds at most K tokens: TPOT holds at the full step, the
    // prompts the budget cannot take wait (TTFT grows)
    if let Some(t_full) = full_step(sm, c, t_d).filter(|t| pt.tpot > *t) {
        let room = sm.engine.max_prefill_tokens as f64 - c.ceil();
        pt.tpot = t_full;
        pt.tpot_capped = true;
        pt.r = room / (t_full * prefill_tokens(sm));
        pt.rho = 1.0 - t_d / t_full;
        pt.rho_o = pt.rho * share;
        pt.w_mean = 0.0;
        pt.limit = Limit::TokenBudget;
    }
    // Little's law on the user cycle: N = R·(TTFT + (T_out − 1)·TPOT)
    let base = in_engine(if pt.tpot_capped { 0.0 } else { pt.rho_o }, sh);
    let little = n as f64 / pt.r - gaps * pt.tpot;
    if n as f64 > c && pt.limit == Limit::None {
        pt.limit = Limit::Slots;
    }
    // (a loop within its slots and budget closes at W_q = 0, to rounding)
    let wait = little - base;
    pt.queue_s = if wait > 1e-9 * little.abs() {
        wait
    } else {
        0.0
    };
    // a TTFT above Little's law lowers the rate to keep the loop closed
    pt.r = n as f64 / (base + pt.queue_s + gaps * pt.tpot);
    pt
}

/// The open loop at `r` requests/s per replica: the concurrency Little's
/// law gives; past the slots, the token budget or ρ = 0.95 the rate is more
/// than the replica serves and the point is its capacity (every slot busy).
fn open_loop(sm: &StepModel, pf: OwnPrefill, r: f64, slots: u64) -> Point {
    let cap = slots.max(1) as f64;
    let capacity = || Point {
        saturated: true,
        ..closed_loop(sm, pf, slots, slots)
    };
    let batches = Batches::of(sm);
    let at = |c: f64| {
        let (t_d, s_p) = costs(sm, c);
        (t_d, share_at(sm, pf, batches.as_ref(), (c, t_d, s_p), r))
    };
    let mut c = 1.0f64;
    for _ in 0..200 {
        let (t_d, sh) = at(c);
        let rho = r * sh.s_p;
        if rho >= RHO_MAX {
            return capacity();
        }
        let tpot = t_d / (1.0 - rho);
        if full_step(sm, c, t_d).is_some_and(|t| tpot > t) {
            return capacity();
        }
        let (life, _) = open_life(sm, pf, r, t_d, sh);
        let next = (r * life).max(1.0);
        if next > cap {
            return capacity();
        }
        let done = (next - c).abs() < 1e-9 * c;
        c = next;
        if done {
            break;
        }
    }
    let (t_d, sh) = at(c);
    let rho = r * sh.s_p;
    let (_, t_res) = open_life(sm, pf, r, t_d, sh);
    Point {
        t_ovl: overlap_wait(sm, pf, t_res),
        c,
        r,
        rho,
        rho_o: rho,
        t_d,
        s_p: sh.s_p,
        s_1: sh.s_1,
        t_ev: sh.t_ev,
        b: sh.b,
        t_res,
        w_mean: md1_wait_mean(rho, sh.t_ev),
        tpot: t_d / (1.0 - rho),
        tpot_capped: false,
        queue_s: 0.0,
        limit: Limit::None,
        saturated: false,
    }
}

/// A request's time in the system at rate `r`, and the step it may find in
/// flight: a decode step with the probability the engine is busy,
/// `min(1, R·(life without it))` (Poisson arrivals see time averages; an
/// idle engine has no step in flight).
fn open_life(sm: &StepModel, pf: OwnPrefill, r: f64, t_d: f64, sh: Share) -> (f64, f64) {
    let gaps = sm.q.gen_len.saturating_sub(1) as f64;
    let rho = r * sh.s_p;
    let life =
        sm.engine.frontend_s + sh.s_1 + md1_wait_mean(rho, sh.t_ev) + gaps * t_d / (1.0 - rho);
    let t_res = t_d * (r * life).min(1.0);
    (life + overlap_wait(sm, pf, t_res) + t_res / 2.0, t_res)
}

/// The extra wait of an overlap scheduler: SGLang's default
/// `event_loop_overlap` receives new requests only at the top of its loop,
/// right after it has launched the next decode step behind the one the GPU
/// is running, so a new prompt's prefill queues behind one more step than a
/// synchronous loop's (`t_res`, the step in flight, when decodes run). The
/// CPU launches an eager prefill's kernels while the GPU still runs that
/// step, so the host launch time beyond the GPU's (`PrefillTime::host`)
/// hides it: `max(0, t_res − T_host_excess)`; 0 for other engines.
fn overlap_wait(sm: &StepModel, pf: OwnPrefill, t_res: f64) -> f64 {
    if !sm.engine.overlap_schedule || t_res <= 0.0 {
        return 0.0;
    }
    (t_res - pf.host).max(0.0)
}

/// TTFT: `t_fe + W_q + s_1 + U·t_res + W`, U uniform on [0, 1], W the
/// M/D/1 wait (exponential tail, [`wait_quantile`]).
fn ttft_percentiles(base: f64, t_res: f64, rho: f64, w_mean: f64) -> Percentiles {
    let q = |p| base + wait_quantile(p, t_res, rho, w_mean);
    Percentiles {
        mean: base + t_res / 2.0 + w_mean,
        p50: q(0.5),
        p90: q(0.9),
        p99: q(0.99),
    }
}

/// TPOT percentiles: `t_d + K·t_ev/(T_out − 1)`, K ~ Poisson((ρ_o/t_ev)·(T_out
/// − 1)·TPOT) the others' prefill events (a prefill-first engine's batches,
/// a mixing engine's prompts) in a request's decode window; every step full
/// (the token budget binds): TPOT = t_full for every request.
fn tpot_percentiles(pt: &Point, gaps: f64) -> Percentiles {
    if gaps <= 0.0 {
        return Percentiles::default();
    }
    if pt.tpot_capped {
        return Percentiles {
            mean: pt.tpot,
            p50: pt.tpot,
            p90: pt.tpot,
            p99: pt.tpot,
        };
    }
    // prefill events (batches) of the others per second, each a stall t_ev
    let r_o = if pt.t_ev > 0.0 {
        pt.rho_o / pt.t_ev
    } else {
        0.0
    };
    let mean_k = r_o * gaps * pt.tpot;
    let q = |p| pt.t_d + poisson_quantile(p, mean_k) as f64 * pt.t_ev / gaps;
    Percentiles {
        mean: pt.tpot,
        p50: q(0.5),
        p90: q(0.9),
        p99: q(0.99),
    }
}

/// The extra time a token gap holds when it carries prefill work, and the
/// fraction of gaps that do: a two-point distribution (`t_d`, or `t_d + x`
/// with probability `q`).
///
/// * Prefill-priority engines (SGLang: the waiting prefill runs in its own
///   step, the decodes wait for it): one gap of a running request holds a
///   whole prefill batch of others, `x = T(b)` ([`super::prefill_batches`]).
/// * Mixing engines (vLLM chunked prefill: decodes first, prompt chunks of
///   `K − C` tokens fill the step): a prompt spreads over `n_c =
///   ⌈T_in/(K − C)⌉` steps, each gap holding a chunk, `x = s_p/n_c`.
///
/// A request's decode window `(T_out − 1)·TPOT` sees `(ρ_o/t_ev)·(T_out −
/// 1)·TPOT` prefill events of the others, each spanning `t_ev/x` gaps, so the
/// fraction of gaps with prefill work is `q = ρ_o·TPOT/x` (capped at 1); the
/// mean gap `t_d + q·x = t_d + ρ_o·TPOT = t_d/(1 − ρ_o)` is the mean TPOT, as
/// it must be.
fn itl_mix(sm: &StepModel, pt: &Point) -> (f64, f64) {
    let e = sm.engine;
    let chunks = if e.mixes_prefill() {
        let room = e.max_prefill_tokens as f64 - pt.c.ceil();
        if room >= 1.0 {
            (prefill_tokens(sm) / room).ceil().max(1.0)
        } else {
            1.0
        }
    } else {
        1.0
    };
    let x = pt.t_ev / chunks;
    let q = if x > 0.0 {
        (pt.rho_o * pt.tpot / x).clamp(0.0, 1.0)
    } else {
        0.0
    };
    (x, q)
}

/// Inter-token latency percentiles: the gap is the decode step `t_d` with
/// probability `1 − q` and `t_d + x` with probability `q` ([`itl_mix`]);
/// every step full (the token budget binds): every gap is `t_full`.
fn itl_percentiles(sm: &StepModel, pt: &Point, gaps: f64) -> Percentiles {
    if gaps <= 0.0 {
        return Percentiles::default();
    }
    if pt.tpot_capped {
        return Percentiles {
            mean: pt.tpot,
            p50: pt.tpot,
            p90: pt.tpot,
            p99: pt.tpot,
        };
    }
    let (x, q) = itl_mix(sm, pt);
    two_point(pt.t_d, x, q)
}

/// Percentiles of `t` with probability `1 − q`, `t + x` with probability `q`.
pub(super) fn two_point(t: f64, x: f64, q: f64) -> Percentiles {
    let at = |p: f64| if p <= 1.0 - q { t } else { t + x };
    Percentiles {
        mean: t + q * x,
        p50: at(0.5),
        p90: at(0.9),
        p99: at(0.99),
    }
}

/// `TTFT + (T_out − 1)·TPOT`, percentile by percentile.
fn e2e_percentiles(ttft: &Percentiles, tpot: &Percentiles, gaps: f64) -> Percentiles {
    Percentiles {
        mean: ttft.mean + gaps * tpot.mean,
        p50: ttft.p50 + gaps * tpot.p50,
        p90: ttft.p90 + gaps * tpot.p90,
        p99: ttft.p99 + gaps * tpot.p99,
    }
}

/// Steady-state continuous batching of `w` on the slice (`max_batch`: the
/// sequences the engine's KV cache holds per replica).
pub(crate) fn steady_state<T: Tracer>(
    sm: &StepModel,
    w: Workload,
    replicas: u64,
    max_batch: u64,
    tr: &mut T,
) -> Result<Continuous> {
    let q = sm.q;
    let e = sm.engine;
    let slots = e.slots(max_batch);
    let reps = replicas.max(1) as f64;
    let pf = OwnPrefill::of(sm);
    let pt = match w {
        Workload::Concurrency(n) => closed_loop(sm, pf, n, slots),
        Workload::Lockstep(n) => match super::lockstep::steady_state(sm, n, slots, replicas, tr) {
            Ok(waves) => return Ok(waves),
            // the waves do not persist: the staggered loop of n users
            Err(_) => closed_loop(sm, pf, n, slots),
        },
        Workload::Rate(r) => open_loop(sm, pf, r / reps, slots),
        Workload::Static => closed_loop(sm, pf, q.batch, slots),
    };
    let gaps = q.gen_len.saturating_sub(1) as f64;
    let base = e.frontend_s + pt.queue_s + pt.s_1 + pt.t_ovl;
    let ttft = ttft_percentiles(base, pt.t_res, pt.rho_o, pt.w_mean);
    let tpot = tpot_percentiles(&pt, gaps);
    let itl = itl_percentiles(sm, &pt, gaps);
    let out = Continuous {
        workload: w.to_string(),
        concurrency: pt.c,
        slots,
        token_budget: e.max_prefill_tokens,
        limited_by: pt.limit.name().into(),
        lockstep: false,
        requests_per_s: pt.r * reps,
        output_tokens_per_s: pt.r * reps * q.gen_len as f64,
        output_tokens_per_s_per_chip: pt.r * q.gen_len as f64 / sm.replica_chips() as f64,
        output_tokens_per_s_per_user: if tpot.mean > 0.0 {
            1.0 / tpot.mean
        } else {
            0.0
        },
        prefill_utilisation: pt.rho,
        decode_step_s: pt.t_d,
        prefill_s: pt.s_1,
        frontend_s: e.frontend_s,
        queue_wait_s: pt.queue_s,
        e2e_s: e2e_percentiles(&ttft, &tpot, gaps),
        ttft_s: ttft,
        tpot_s: tpot,
        itl_s: itl,
        saturated: pt.saturated,
    };
    record(sm, w, &pt, &out, tr);
    Ok(out)
}

/// The `--explain` steps of the steady state.
fn record<T: Tracer>(sm: &StepModel, w: Workload, pt: &Point, c: &Continuous, tr: &mut T) {
    let q = sm.q;
    tr.record(|| {
        Step::new(
            "serving.slots",
            "Requests the engine runs at once (per replica)",
            "B = min(max_num_seqs, KV capacity)",
        )
        .bind(
            "max_num_seqs",
            sm.engine.max_num_seqs as f64,
            "requests (0: none)",
        )
        .result(c.slots as f64, "requests")
        .source("engine profile (data/engines): max_num_seqs; serving.engine_max_batch")
    });
    let (id, label, formula) = match w {
        Workload::Rate(_) => (
            "serving.open_loop",
            "Open loop (Poisson arrivals at a rate), per replica",
            "C = R·(t_fe + s_1 + t_ovl + t_res/2 + ρ·s_p/(2(1 − ρ)) + (T_out − 1)·t_d/(1 − ρ)), ρ = R·s_p, t_res = t_d·min(1, R·life)",
        ),
        _ => (
            "serving.closed_loop",
            "Closed loop (N users, each sends its next request when the previous completes), per replica",
            "R solving N = R·(TTFT + (T_out − 1)·TPOT), C = min(N, B), ρ_o = R·s_p·(C − 1)/C",
        ),
    };
    let users = match w {
        Workload::Concurrency(n) | Workload::Lockstep(n) => Some(n as f64),
        Workload::Static => Some(q.batch as f64),
        Workload::Rate(_) => None,
    };
    tr.record(|| {
        let st = Step::new(id, label, formula);
        let st = match users {
            Some(n) => st.bind("N", n, "users"),
            None => st.bind("R_in", pt.r, "requests/s"),
        };
        st.bind("C", pt.c, "requests")
            .bind("B", c.slots as f64, "requests")
            .bind("t_d", pt.t_d, "s")
            .bind("s_p", pt.s_p, "s")
            .bind("T_out", q.gen_len as f64, "tokens")
            .result(pt.r, "requests/s")
            .source("Little's law; M/D/1 prefill queue (Pollaczek–Khinchine); the engine's scheduler (docs/inference.md)")
    });
    if !sm.engine.mixes_prefill() {
        tr.record(|| {
            Step::new(
                "serving.prefill_batches",
                "Prompts per prefill batch (prefill first, staggered arrivals)",
                "b = R·(T(b) + t_d·e^(−R·T(b))/(1 − e^(−R·t_d))), b ≤ min(C, ⌊K/T_in⌋, prefill_batch_max); s_p = T(b)/b, s_1 = T(b)",
            )
            .bind("R", pt.r, "requests/s")
            .bind("t_d", pt.t_d, "s")
            .bind("T(b)", pt.t_ev, "s")
            .bind("s_p", pt.s_p, "s")
            .result(pt.b, "prompts")
            .source("the scheduler batches the prompts waiting when it forms a prefill batch (SGLang Scheduler.get_new_batch_prefill); decode steps and batches counted over a long run (inference/serving/prefill_batches.rs)")
        });
    }
    tr.record(|| {
        let mut s = Step::new(
            "serving.tpot",
            "Time per output token (mean)",
            "TPOT = min(t_d/(1 − ρ_o), t_full), t_full = t_d + T_prefill(K − C) − t_fixed",
        )
        .bind("t_d", pt.t_d, "s")
        .bind("ρ_o", pt.rho_o, "")
        .bind("K", sm.engine.max_prefill_tokens as f64, "tokens");
        if let Some(t) = full_step(sm, pt.c, pt.t_d) {
            s = s.bind("t_full", t, "s");
        }
        s.result(c.tpot_s.mean, "s")
            .source("the engine's scheduler: decodes first, prompt chunks fill the token budget (vLLM max_num_batched_tokens, TensorRT-LLM max_num_tokens)")
    });
    tr.record(|| {
        Step::new(
            "serving.ttft",
            "Time to first token (mean)",
            "TTFT = t_fe + W_q + s_1 + t_ovl + t_res/2 + ρ_o·t_ev/(2(1 − ρ_o)), t_ovl = max(0, t_res − T_host_excess) under an overlap scheduler; t_ev = T(b) prefill first, s_p mixed",
        )
        .bind("t_fe", c.frontend_s, "s")
        .bind("W_q", pt.queue_s, "s")
        .bind("s_1", pt.s_1, "s")
        .bind("t_ovl", pt.t_ovl, "s")
        .bind("t_res", pt.t_res, "s")
        .bind("W̄", pt.w_mean, "s")
        .result(c.ttft_s.mean, "s")
            .source("frontend (engine profile frontend_s), queue for a slot or the token budget, prefill, the step an overlap scheduler launched ahead (overlap_schedule), the step in flight, M/D/1 prefill queue")
    });
    tr.record(|| {
        let (x, q) = itl_mix(sm, pt);
        Step::new(
            "serving.itl",
            "Inter-token latency (median)",
            "ITL = t_d with probability 1 − q, t_d + x with probability q; q = min(1, ρ_o·TPOT/x); x = T(b) (prefill priority: a batch of b prompts) or s_p/⌈T_in/(K − C)⌉ (chunked, mixed steps); every step full: t_full",
        )
        .bind("t_d", pt.t_d, "s")
        .bind("x", x, "s")
        .bind("q", if pt.tpot_capped { 1.0 } else { q }, "")
        .result(c.itl_s.p50, "s")
        .source("the engine's scheduler (data/engines: prefill_priority, max_prefill_tokens); benchmark_serving's ITL (gaps between a request's streamed tokens)")
    });
    tr.record(|| {
        Step::new(
            "serving.e2e",
            "End-to-end request latency (mean)",
            "E2E = TTFT + (T_out − 1)·TPOT",
        )
        .bind("TTFT", c.ttft_s.mean, "s")
        .bind("TPOT", c.tpot_s.mean, "s")
        .bind("T_out", q.gen_len as f64, "tokens")
        .result(c.e2e_s.mean, "s")
        .source("benchmark_serving / genai-perf definitions")
    });
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
        Workload::Concurrency(c) | Workload::Lockstep(c) => ((c as f64).min(cap), c as f64 > cap),
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
        ttft_s: ttft_percentiles(sm.engine.frontend_s + s_1 + kv_transfer_s, 0.0, rho, w_mean),
        tpot_s: tpot,
        saturated,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_point_percentiles_by_hand() {
        // t = 30 ms, x = 2 s, q = 0.1: the median and p90 are the decode
        // step (0.5 ≤ 0.9 ≤ 1 − q), p99 holds the prefill; the mean is
        // 0.03 + 0.1·2 = 0.23 s
        let p = two_point(0.03, 2.0, 0.1);
        assert_eq!((p.p50, p.p90), (0.03, 0.03));
        assert!((p.p99 - 2.03).abs() < 1e-12);
        assert!((p.mean - 0.23).abs() < 1e-12);
        // q = 0.6: more than half the gaps hold prefill work
        let p = two_point(0.03, 0.5, 0.6);
        assert!((p.p50 - 0.53).abs() < 1e-12);
        // q = 0: the decode step everywhere
        let p = two_point(0.03, 0.5, 0.0);
        assert_eq!((p.mean, p.p99), (0.03, 0.03));
    }
}
