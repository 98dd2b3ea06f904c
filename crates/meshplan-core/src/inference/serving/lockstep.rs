//! A closed loop whose users run in lockstep waves.
//!
//! A benchmark with fixed lengths (every prompt `T_in` tokens, every answer
//! exactly `T_out`: SGLang's `bench_serving --random-range-ratio 1`, `vllm
//! bench serve --dataset-name random --ignore-eos`) starts its N users
//! together. Whether they stay together depends on the engine's scheduler:
//!
//! * **Prefill first** (SGLang: a waiting prefill runs before the decodes;
//!   an engine without a token budget): the wave's prompts are prefilled in
//!   `n_b = ⌈N·T_in/K⌉` equal batches before any decode step, request j (in
//!   arrival order) getting its first token at the end of the batch that holds
//!   its last prompt token. Every request then decodes in the same steps,
//!   finishes at the same step, and its user sends the next one at the same
//!   time: the waves persist.
//! * **Chunked prefill mixed into the decode steps** (vLLM V1,
//!   TensorRT-LLM): a wave whose prompts fit one step (`N·T_in ≤ K`) is
//!   prefilled in that step and the waves persist. A larger wave is spread over
//!   several steps. The requests prefilled first start decoding first, finish
//!   first and come back first, so the offsets persist and the loop settles into
//!   the staggered steady state of [`super::continuous`].
//! * A wave larger than the engine's slots (`N > B`) is staggered too: the
//!   requests beyond B start when the first ones finish.
//!
//! With the wave's prefill `T_wave = T_prefill(N prompts of T_in)` (the
//! engine's chunks, as the static batch of N prompts) and the decode step `t_d(N)`:
//! * `TTFT_j = t_fe + T_wave·⌈j·n_b/N⌉/n_b`;
//! * `TPOT_j = t_d + (T_wave − t_j)/(T_out − 1)`: a request's decodes wait for
//!   the rest of the wave's prefill;
//! * every user's cycle is `t_fe + T_wave + (T_out − 1)·t_d`, so `R = N/cycle`.
//!
//! Why it matters: the staggered model prices one prompt's prefill behind
//! the others' occasional prefills, while here every request waits for up to
//! the whole wave's. dstack's DeepSeek-R1 sweep on 8 H200 (fixed 3,200-token
//! prompts) shows it: the TTFT grows in proportion to N, a constant 13–15 k
//! prompt tokens/s from N = 4 to 64 (docs/inference.md).

use super::continuous::{decode_step, two_point, Continuous, Percentiles};
use crate::inference::step::StepModel;
use crate::trace::{NoTrace, Step, Tracer};

/// Why a lockstep loop runs staggered instead.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Staggered {
    /// More users than the engine's slots.
    Slots,
    /// The wave's prompts need several mixed steps.
    MixedChunks,
}

/// One wave of N users: its prefill and the decode step they share.
#[derive(Clone, Copy, Debug)]
struct Wave {
    /// N: users (requests per wave).
    n: u64,
    /// n_b: prefill batches the wave's prompts run in.
    batches: u64,
    /// T_wave: the wave's prefill, s.
    t_wave: f64,
    /// t_d: the decode step of N requests, s.
    t_d: f64,
    /// t_fe: the engine's frontend, s.
    t_fe: f64,
    /// T_out − 1: the gaps between a request's tokens.
    gaps: f64,
}

impl Wave {
    /// The wave of `n` users, or why it does not stay in lockstep.
    fn of(sm: &StepModel, n: u64, slots: u64) -> Result<Wave, Staggered> {
        if n > slots {
            return Err(Staggered::Slots);
        }
        let pf = sm.prefill(n, sm.q.prompt_len, &mut NoTrace);
        if pf.chunks > 1 && sm.engine.mixes_prefill() {
            return Err(Staggered::MixedChunks);
        }
        let t_d = decode_step(sm, n as f64);
        Ok(Wave {
            n,
            batches: pf.chunks.max(1),
            t_wave: pf.total.get(),
            t_d,
            t_fe: sm.engine.frontend_s,
            gaps: sm.q.gen_len.saturating_sub(1) as f64,
        })
    }

    /// t_j: when request `j` (1..=N) gets its first token after the wave
    /// arrives, `T_wave·⌈j·n_b/N⌉/n_b`.
    fn first_token(&self, j: u64) -> f64 {
        let b = (j as u128 * self.batches as u128).div_ceil(self.n.max(1) as u128);
        self.t_wave * b as f64 / self.batches as f64
    }

    /// The mean of t_j over the wave: `T_wave·Σ_j ⌈j·n_b/N⌉/(N·n_b)`, the
    /// sum in closed form (`Σ_{j<N} ⌊j·m/N⌋ = ((m − 1)(N − 1) + g − 1)/2`,
    /// g = gcd(m, N); a ceiling exceeds its floor except at the g integers).
    fn mean_first_token(&self) -> f64 {
        let (n, m) = (self.n.max(1) as f64, self.batches as f64);
        let g = gcd(self.n.max(1), self.batches) as f64;
        let floors = ((m - 1.0) * (n - 1.0) + g - 1.0) / 2.0 + m;
        self.t_wave * (floors + n - g) / (n * m)
    }

    /// The request at the `p` quantile (nearest rank) of the arrival order.
    fn rank(&self, p: f64) -> u64 {
        ((p * self.n as f64).ceil() as u64).clamp(1, self.n.max(1))
    }

    /// A user's cycle: `t_fe + T_wave + (T_out − 1)·t_d`.
    fn cycle(&self) -> f64 {
        self.t_fe + self.t_wave + self.gaps * self.t_d
    }

    fn ttft(&self) -> Percentiles {
        let at = |p| self.t_fe + self.first_token(self.rank(p));
        Percentiles {
            mean: self.t_fe + self.mean_first_token(),
            p50: at(0.5),
            p90: at(0.9),
            p99: at(0.99),
        }
    }

    /// `TPOT_j = t_d + (T_wave − t_j)/(T_out − 1)`, largest for the first
    /// requests: the p quantile is request `N − rank(p) + 1`.
    fn tpot(&self) -> Percentiles {
        if self.gaps <= 0.0 {
            return Percentiles::default();
        }
        let of = |t_j: f64| self.t_d + (self.t_wave - t_j) / self.gaps;
        let at = |p| of(self.first_token(self.n - self.rank(p) + 1));
        Percentiles {
            mean: of(self.mean_first_token()),
            p50: at(0.5),
            p90: at(0.9),
            p99: at(0.99),
        }
    }

    /// The gaps: `t_d`, except each early request's first gap, which also
    /// holds the rest of the wave's prefill (`x`, with probability `q` per
    /// gap).
    fn itl(&self) -> Percentiles {
        if self.gaps <= 0.0 {
            return Percentiles::default();
        }
        // requests whose first token comes before the last batch ends
        let early = (self.n as u128 * (self.batches - 1) as u128 / self.batches as u128) as f64;
        let frac = early / self.n as f64;
        let wait = self.t_wave - self.mean_first_token();
        let x = if frac > 0.0 { wait / frac } else { 0.0 };
        two_point(self.t_d, x, frac / self.gaps)
    }
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// The steady state of `n` users at fixed lengths per replica, or why it is
/// staggered (then [`super::continuous`] prices it as `concurrency=n`).
pub(crate) fn steady_state<T: Tracer>(
    sm: &StepModel,
    n: u64,
    slots: u64,
    replicas: u64,
    tr: &mut T,
) -> Result<Continuous, Staggered> {
    // (the parser refuses no users; a query built in code gets one)
    let n = n.max(1);
    let wave =
        Wave::of(sm, n, slots).inspect_err(|why| record_staggered(sm, n, slots, *why, tr))?;
    let q = sm.q;
    let reps = replicas.max(1) as f64;
    let cycle = wave.cycle();
    let r = n as f64 / cycle;
    let ttft = wave.ttft();
    let tpot = wave.tpot();
    let e2e = Percentiles {
        mean: cycle,
        p50: cycle,
        p90: cycle,
        p99: cycle,
    };
    let out = Continuous {
        workload: q.workload.to_string(),
        concurrency: n as f64,
        slots,
        token_budget: sm.engine.max_prefill_tokens,
        limited_by: "none".into(),
        lockstep: true,
        requests_per_s: r * reps,
        output_tokens_per_s: r * reps * q.gen_len as f64,
        output_tokens_per_s_per_chip: r * q.gen_len as f64 / sm.replica_chips() as f64,
        output_tokens_per_s_per_user: if tpot.mean > 0.0 {
            1.0 / tpot.mean
        } else {
            0.0
        },
        prefill_utilisation: wave.t_wave / cycle,
        decode_step_s: wave.t_d,
        prefill_s: wave.first_token(1),
        frontend_s: wave.t_fe,
        queue_wait_s: wave.mean_first_token() - wave.first_token(1),
        ttft_s: ttft,
        itl_s: wave.itl(),
        tpot_s: tpot,
        e2e_s: e2e,
        saturated: false,
    };
    record(sm, &wave, &out, tr);
    Ok(out)
}

/// The `--explain` steps of a lockstep loop.
fn record<T: Tracer>(sm: &StepModel, w: &Wave, c: &Continuous, tr: &mut T) {
    tr.record(|| {
        Step::new(
            "serving.lockstep",
            "Closed loop at fixed lengths: N users in lockstep waves, per replica",
            "R = N/(t_fe + T_wave + (T_out − 1)·t_d), T_wave = T_prefill(N prompts of T_in) in n_b = ⌈N·T_in/K⌉ batches",
        )
        .bind("N", w.n as f64, "users")
        .bind("T_in", sm.q.prompt_len as f64, "tokens")
        .bind("K", sm.engine.max_prefill_tokens as f64, "tokens (0: none)")
        .bind("n_b", w.batches as f64, "batches")
        .bind("T_wave", w.t_wave, "s")
        .bind("t_d", w.t_d, "s")
        .bind("t_fe", w.t_fe, "s")
        .bind("T_out", sm.q.gen_len as f64, "tokens")
        .result(c.requests_per_s, "requests/s")
        .source("the engine's scheduler (data/engines: prefill_priority, max_prefill_tokens): prefill first, or the whole wave in one mixed step, keeps the users in phase (inference/serving/lockstep.rs)")
    });
    tr.record(|| {
        Step::new(
            "serving.ttft",
            "Time to first token (mean over the wave)",
            "TTFT_j = t_fe + T_wave·⌈j·n_b/N⌉/n_b, j = 1..N",
        )
        .bind("t_fe", w.t_fe, "s")
        .bind("T_wave", w.t_wave, "s")
        .bind("n_b", w.batches as f64, "batches")
        .bind("N", w.n as f64, "users")
        .result(c.ttft_s.mean, "s")
        .source("the wave's prompts prefilled in arrival order, a request's first token at the end of the batch holding its last prompt token")
    });
    tr.record(|| {
        Step::new(
            "serving.tpot",
            "Time per output token (mean over the wave)",
            "TPOT_j = t_d + (T_wave − t_j)/(T_out − 1)",
        )
        .bind("t_d", w.t_d, "s")
        .bind("T_wave", w.t_wave, "s")
        .bind("t̄_j", w.mean_first_token(), "s")
        .bind("T_out", sm.q.gen_len as f64, "tokens")
        .result(c.tpot_s.mean, "s")
        .source("the decodes start together once the wave is prefilled")
    });
}

/// The `--explain` step of a lockstep loop that runs staggered.
fn record_staggered<T: Tracer>(sm: &StepModel, n: u64, slots: u64, why: Staggered, tr: &mut T) {
    let (formula, reason) = match why {
        Staggered::Slots => (
            "N > B",
            "more users than the engine runs at once: the requests beyond B start as the first finish",
        ),
        Staggered::MixedChunks => (
            "N·T_in > K under chunked prefill mixed into the decode steps",
            "the wave's prompts span several mixed steps: the first prefilled finish first and come back first",
        ),
    };
    tr.record(|| {
        Step::new(
            "serving.lockstep",
            "Closed loop at fixed lengths: the waves do not persist (priced as concurrency=N)",
            formula,
        )
        .bind("N", n as f64, "users")
        .bind("B", slots as f64, "requests")
        .bind("T_in", sm.q.prompt_len as f64, "tokens")
        .bind("K", sm.engine.max_prefill_tokens as f64, "tokens (0: none)")
        .result(0.0, "waves")
        .source(reason)
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wave(n: u64, batches: u64) -> Wave {
        Wave {
            n,
            batches,
            t_wave: 1.0,
            t_d: 0.02,
            t_fe: 0.01,
            gaps: 99.0,
        }
    }

    #[test]
    fn first_tokens_by_hand() {
        // N = 4 prompts in 2 batches: requests 1, 2 after the first batch
        // (0.5 s), 3, 4 after the second (1 s); mean 0.75 s
        let w = wave(4, 2);
        let t: Vec<f64> = (1..=4).map(|j| w.first_token(j)).collect();
        assert_eq!(t, [0.5, 0.5, 1.0, 1.0]);
        assert!((w.mean_first_token() - 0.75).abs() < 1e-12);
        // N = 3 in 2 batches: ⌈2/3⌉ = 1, ⌈4/3⌉ = 2, ⌈2⌉ = 2 → (0.5 + 1 + 1)/3
        let w = wave(3, 2);
        assert!((w.mean_first_token() - 2.5 / 3.0).abs() < 1e-12);
        // one batch: every request after the whole wave
        let w = wave(7, 1);
        assert_eq!(w.first_token(1), 1.0);
        assert!((w.mean_first_token() - 1.0).abs() < 1e-12);
    }

    #[test]
    fn the_closed_form_mean_is_the_sum() {
        for n in 1..40u64 {
            for m in 1..25u64 {
                let w = wave(n, m);
                let sum: f64 = (1..=n).map(|j| w.first_token(j)).sum::<f64>() / n as f64;
                assert!((w.mean_first_token() - sum).abs() < 1e-12, "N {n} n_b {m}");
            }
        }
    }

    #[test]
    fn percentiles_by_hand() {
        // N = 4, 2 batches, T_out − 1 = 99 gaps of 20 ms
        let w = wave(4, 2);
        let ttft = w.ttft();
        // p50: request 2 (0.5 s); p90, p99: request 4 (1 s); plus t_fe
        assert!((ttft.p50 - 0.51).abs() < 1e-12);
        assert!((ttft.p99 - 1.01).abs() < 1e-12);
        assert!((ttft.mean - 0.76).abs() < 1e-12);
        let tpot = w.tpot();
        // requests 1, 2 wait 0.5 s for the second batch: 0.02 + 0.5/99
        let slow = 0.02 + 0.5 / 99.0;
        assert!((tpot.p99 - slow).abs() < 1e-12);
        // the median is request 4 − 2 + 1 = 3: no wait
        assert!((tpot.p50 - 0.02).abs() < 1e-12);
        assert!((tpot.mean - (0.02 + 0.25 / 99.0)).abs() < 1e-12);
        // ITL: 2 of 4 requests hold one gap of 0.5 s more out of 99
        let itl = w.itl();
        assert!((itl.mean - (0.02 + 0.25 / 99.0)).abs() < 1e-12);
        assert_eq!(itl.p99, 0.02);
        // the cycle is the same for every request
        assert!((w.cycle() - (0.01 + 1.0 + 99.0 * 0.02)).abs() < 1e-12);
    }

    #[test]
    fn hostile_sizes_stay_finite() {
        let w = wave(u64::MAX / 4, u64::MAX / 8);
        for x in [
            w.mean_first_token(),
            w.ttft().p99,
            w.tpot().mean,
            w.itl().p50,
        ] {
            assert!(x.is_finite(), "{x}");
        }
    }
}
