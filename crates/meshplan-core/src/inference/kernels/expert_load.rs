//! Expert load imbalance under expert parallelism at decode batch sizes.
//!
//! With experts sharded over Z GPUs (E/Z each), a decode step waits for the
//! GPU with the most experts to stream, not for the mean one. Each of the
//! T tokens picks k of the E experts; an expert is touched by some token
//! with probability `p = 1 − (1 − k/E)^T`, so the number a GPU touches is
//! about `X ~ Binomial(E/Z, p)` (treating the experts as independent), and
//! the step streams the expected maximum of Z such counts,
//! `E[max_j X_j] = Σ_{m=0}^{n−1} (1 − F(m)^Z)` with `n = E/Z` and F the
//! binomial CDF (the order-statistics identity `E[M] = Σ_m P(M > m)` for a
//! count M). At one token with E = 256, k = 8 (DeepSeek-V3) and Z = 8 the
//! busiest GPU streams 2.54 experts
//! against a mean of 1; once the batch touches every expert (p → 1) the
//! maximum equals the mean and nothing changes. Z = 1 (tensor-parallel
//! experts, every GPU a slice of each) is the mean `n·p`.

use crate::trace::{Step, Tracer};

/// `E[max over z GPUs of the experts each touches]` for `tokens` tokens
/// each routed to `k` of `e` experts, `e/z` experts per GPU.
pub fn busiest_gpu_experts(e: u64, k: u64, z: u64, tokens: f64) -> f64 {
    if e == 0 || z == 0 {
        return 0.0;
    }
    let n = e / z.max(1);
    let p = 1.0 - (1.0 - (k as f64 / e as f64).min(1.0)).powf(tokens.max(0.0));
    if z <= 1 || p <= 0.0 || p >= 1.0 || n == 0 {
        return n as f64 * p;
    }
    // ln pmf(m) by the ratio pmf(m+1)/pmf(m) = (n − m)/(m + 1)·p/(1 − p)
    let (lp, lq) = (p.ln(), (1.0 - p).ln());
    let mut ln_pmf = n as f64 * lq;
    let mut cdf = 0.0;
    let mut expected = 0.0;
    for m in 0..n {
        cdf = (cdf + ln_pmf.exp()).min(1.0);
        expected += 1.0 - cdf.powf(z as f64);
        ln_pmf += ((n - m) as f64 / (m + 1) as f64).ln() + lp - lq;
    }
    expected
}

/// The fraction of a GPU's routed experts the busiest GPU streams:
/// `E[max_j X_j]/(E/Z)`.
pub fn busiest_fraction(e: u64, k: u64, z: u64, tokens: f64) -> f64 {
    let n = (e / z.max(1)) as f64;
    if n <= 0.0 {
        return 0.0;
    }
    (busiest_gpu_experts(e, k, z, tokens) / n).clamp(0.0, 1.0)
}

/// Record the imbalance under `--explain` (EP only).
pub fn record<T: Tracer>((e, k, z): (u64, u64, u64), tokens: f64, tr: &mut T) {
    if z <= 1 {
        return;
    }
    tr.record(|| {
        let n = (e / z) as f64;
        let p = 1.0 - (1.0 - k as f64 / e as f64).powf(tokens);
        Step::new(
            "infer.decode_expert_load",
            "Experts the busiest EP rank streams in a decode step",
            "E[max_j X_j] = Σ_{m<E/Z} (1 − F(m)^Z), X_j ~ Binomial(E/Z, 1 − (1 − k/E)^T)",
        )
        .bind("E", e as f64, "experts")
        .bind("k", k as f64, "")
        .bind("Z", z as f64, "ranks")
        .bind("T", tokens, "tokens")
        .bind("mean", n * p, "experts")
        .result(busiest_gpu_experts(e, k, z, tokens), "experts")
        .source("order statistics of the per-rank touched-expert counts (uniform routing, experts independent); the MoE curve's power-law tables carry the skew inside one rank")
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// DeepSeek-V3 at one token on EP 8: n = 32 experts per rank, p = 8/256;
    /// the exact sum Σ_{m<32} (1 − F(m)^8) over the Binomial(32, 1/32) CDF,
    /// evaluated independently with exact binomial coefficients (Python
    /// `math.comb`), is 2.5444873983613885 (the module doc's figure).
    #[test]
    fn deepseek_one_token_on_ep8() {
        let got = busiest_gpu_experts(256, 8, 8, 1.0);
        assert!((got - 2.544_487_398).abs() < 1e-9, "{got}");
    }

    #[test]
    fn two_ranks_of_two_experts_by_hand() {
        // E = 4, k = 1, T = 1: p = 1 − 3/4 = 1/4; X ~ Bin(2, 1/4):
        // F(0) = 9/16, F(1) = 15/16; E[max of 2] = (1 − 81/256) + (1 − 225/256)
        // = 206/256 = 0.8046875 (the mean is 2·1/4 = 0.5)
        let got = busiest_gpu_experts(4, 1, 2, 1.0);
        assert!((got - 206.0 / 256.0).abs() < 1e-12, "{got}");
        assert!((busiest_gpu_experts(4, 1, 1, 1.0) - 1.0).abs() < 1e-12);
        assert!((busiest_fraction(4, 1, 2, 1.0) - 206.0 / 512.0).abs() < 1e-12);
    }

    #[test]
    fn one_rank_is_the_mean_and_a_full_batch_every_expert() {
        // Z = 1: 256·(1 − (1 − 8/256)^50)
        let mean = 256.0 * (1.0 - (1.0 - 8.0 / 256.0f64).powi(50));
        assert!((busiest_gpu_experts(256, 8, 1, 50.0) - mean).abs() < 1e-9);
        // Z = 8 at 4096 tokens: p = 1 − (31/32)^4096 ≈ 1, all 32 touched
        assert!((busiest_gpu_experts(256, 8, 8, 4096.0) - 32.0).abs() < 1e-6);
        // the busiest of 8 ranks at one token streams more than the mean 1
        let one = busiest_gpu_experts(256, 8, 8, 1.0);
        assert!(one > 1.5 && one < 4.0, "{one}");
    }
}
