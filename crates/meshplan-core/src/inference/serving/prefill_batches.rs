//! The prefill batches of a prefill-first scheduler under a staggered load.
//!
//! SGLang forms a prefill batch from the prompts waiting when it schedules
//! the next step, and the running decodes wait for it. The same holds for any
//! engine that does not mix prompt chunks into its decode steps. When
//! requests arrive one by one (a closed loop in steady state, or Poisson
//! arrivals), a batch holds the prompts that arrived during the step before
//! it: usually one or two, not the C requests running. So a batch's fixed
//! cost is shared by a few prompts at most. That cost is the eager launch floor
//! of a forward without CUDA graphs ([`super::eager_prefill`], 50–80 ms for a
//! large model), the weight read and the step overhead.
//!
//! With arrivals at `R`/s, decode steps of `t_d` and `T(b)` the prefill of a
//! batch of b prompts: a batch starts after every interval that saw an
//! arrival, a decode step (probability `1 − e^(−R·t_d)`) or a batch
//! (`1 − e^(−R·T(b))`). Counting `n_d` decode steps and `n_p` batches over a
//! long time `L`: `n_p·e^(−R·T) = n_d·(1 − e^(−R·t_d))`, `L = n_d·t_d + n_p·T`,
//! and every arrival joins one batch, `R·L = n_p·b`. So
//!
//! `b = R·(T(b) + t_d·e^(−R·T(b))/(1 − e^(−R·t_d)))`,
//!
//! which tends to `1 + R·t_d/2` at light load and to `R·T(b)` when batches run
//! back to back. It is solved by fixed-point iteration (a contraction while a
//! prompt's own prefill time times R stays below 1; beyond, b is at its cap).
//! A batch holds at most the `⌊K/T_in⌋` prompts of the token budget (at least
//! one), no more than the C requests running, and no more than the engine's
//! `prefill_batch_max` (JetStream: one).
//!
//! A request's prefill then takes `s_p = T(b)/b` of GPU time, its own latency
//! is its batch `T(b)`, and each batch stalls the running decodes for `T(b)`.
//! The previous model shared one batch of all C prompts (`T(C·T_in)/C`), which
//! is right for a static batch but spreads the fixed cost over C prompts that
//! never meet.

use std::cell::RefCell;
use std::collections::HashMap;

use crate::inference::step::StepModel;
use crate::trace::NoTrace;

/// What a request's prefill costs under a staggered load.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Share {
    /// s_p: the GPU time its prefill takes from the other requests, s.
    pub s_p: f64,
    /// s_1: its own prefill latency, s.
    pub s_1: f64,
    /// The stall one prefill event puts on the running decodes: a batch
    /// `T(b)` (prefill first), or the per-request share `s_p` (mixed steps).
    pub t_ev: f64,
    /// b: prompts per prefill batch (1 where prompts are not batched apart).
    pub b: f64,
}

/// The prefill batches of a prefill-first engine: `T(b)` memoised.
pub(super) struct Batches<'s, 'a> {
    sm: &'s StepModel<'a>,
    /// ⌊K/T_in⌋ ≥ 1 prompts by the token budget (unbounded without one),
    /// at most the engine's `prefill_batch_max`.
    by_budget: f64,
    memo: RefCell<HashMap<u64, f64>>,
}

impl<'s, 'a> Batches<'s, 'a> {
    /// The batches of `sm`'s engine, or None when it mixes prompt chunks into
    /// its decode steps (the per-request share is then the batched prefill's).
    pub(super) fn of(sm: &'s StepModel<'a>) -> Option<Batches<'s, 'a>> {
        let e = sm.engine;
        if e.mixes_prefill() {
            return None;
        }
        let tokens = super::continuous::prefill_tokens(sm);
        let by_budget = match e.max_prefill_tokens {
            0 => f64::INFINITY,
            k => (k as f64 / tokens).floor().max(1.0),
        };
        let by_budget = match e.prefill_batch_max {
            0 => by_budget,
            m => by_budget.min(m as f64),
        };
        Some(Batches {
            sm,
            by_budget,
            memo: RefCell::new(HashMap::new()),
        })
    }

    /// `T(b)`: the prefill of a batch of `b ≥ 1` prompts, s.
    fn time(&self, b: u64) -> f64 {
        let b = b.max(1);
        if let Some(t) = self.memo.borrow().get(&b) {
            return *t;
        }
        let t = self
            .sm
            .prefill(b, self.sm.q.prompt_len, &mut NoTrace)
            .total
            .get();
        self.memo.borrow_mut().insert(b, t);
        t
    }

    /// `T(b)` at a mean batch size: linear between the whole batches around it.
    fn time_at(&self, b: f64) -> f64 {
        let lo = b.floor().max(1.0);
        let t_lo = self.time(lo as u64);
        if b <= lo {
            return t_lo;
        }
        let t_hi = self.time(lo as u64 + 1);
        t_lo + (b - lo) * (t_hi - t_lo)
    }

    /// Most prompts a batch holds with `c` requests running.
    fn cap(&self, c: f64) -> f64 {
        c.floor().max(1.0).min(self.by_budget)
    }

    /// The largest batch's per-prompt share `T(cap)/cap`, the least `s_p` can
    /// be (`T(b)/b` falls as the batch's fixed cost is shared).
    pub(super) fn least_share(&self, c: f64) -> f64 {
        let cap = self.cap(c);
        self.time_at(cap) / cap
    }

    /// b: the mean batch at `r` requests/s with decode steps of `t_d` and `c`
    /// requests running.
    pub(super) fn size(&self, r: f64, t_d: f64, c: f64) -> f64 {
        mean_batch(r, t_d, self.cap(c), |b| self.time_at(b))
    }

    /// A request's prefill at `r` requests/s.
    pub(super) fn share(&self, r: f64, t_d: f64, c: f64) -> Share {
        let b = self.size(r, t_d, c);
        let t = self.time_at(b);
        Share {
            s_p: t / b,
            s_1: t,
            t_ev: t,
            b,
        }
    }
}

/// The fixed point of `b = R·(T(b) + t_d·e^(−R·T(b))/(1 − e^(−R·t_d)))` on
/// `[1, cap]`, iterated from `b = 1` (the module's equation; `time` is `T`).
fn mean_batch(r: f64, t_d: f64, cap: f64, time: impl Fn(f64) -> f64) -> f64 {
    // (a NaN or non-positive rate never batches)
    if r.is_nan() || r <= 0.0 || cap <= 1.0 {
        return 1.0;
    }
    // t_d/(1 − e^(−R·t_d)): the decode time until a step sees an arrival
    let x = r * t_d;
    let idle = if x > 1e-12 {
        t_d / -(-x).exp_m1()
    } else {
        1.0 / r
    };
    let mut b = 1.0;
    for _ in 0..200 {
        let t = time(b);
        let next = (r * (t + idle * (-r * t).exp())).clamp(1.0, cap);
        let done = (next - b).abs() <= 1e-9 * b;
        b = next;
        if done {
            break;
        }
    }
    b
}

#[cfg(test)]
mod tests {
    use super::mean_batch;

    #[test]
    fn a_fixed_cost_batch_by_hand() {
        // T(b) = 50 ms for any b (a host-bound forward), t_d = 20 ms, R = 10/s:
        // idle = 0.02/(1 − e^(−0.2)) = 0.110333 s, e^(−0.5) = 0.606531, so
        // b = 10·(0.05 + 0.110333·0.606531) = 1.169205
        let b = mean_batch(10.0, 0.02, 100.0, |_| 0.05);
        assert!((b - 1.169_205).abs() < 1e-6, "{b}");
        // light load: b → 1 + R·t_d/2 (R = 0.1/s: 1 + 0.001, plus R·T = 0.005
        // less the first-order e^(−R·T) correction R·T·(1 + R·t_d/2) ≈ 0.005)
        let b = mean_batch(0.1, 0.02, 100.0, |_| 0.05);
        assert!((b - 1.001).abs() < 1e-4, "{b}");
    }

    #[test]
    fn back_to_back_batches_and_caps() {
        // T(b) = 10 ms + 2 ms per prompt at R = 400/s: prefills run back to
        // back, b ≈ R·T(b) = 4 + 0.8·b → b = 20 (the idle term is e^(−R·T)
        // = e^(−20) small)
        let b = mean_batch(400.0, 0.02, 1e9, |b| 0.01 + 0.002 * b);
        assert!((b - 20.0).abs() < 1e-3, "{b}");
        // the budget caps it, and one user never batches
        assert_eq!(mean_batch(400.0, 0.02, 8.0, |b| 0.01 + 0.002 * b), 8.0);
        assert_eq!(mean_batch(400.0, 0.02, 1.0, |b| 0.01 + 0.002 * b), 1.0);
        // a prefill slower than the arrivals (R·2 ms·b grows faster than b):
        // at the cap, finite
        assert_eq!(mean_batch(1000.0, 0.02, 64.0, |b| 0.002 * b), 64.0);
        for r in [0.0, -1.0, f64::NAN] {
            assert_eq!(mean_batch(r, 0.02, 64.0, |_| 0.05), 1.0);
        }
    }
}
