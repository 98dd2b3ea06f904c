//! The distributions behind the latency percentiles of continuous batching.
//!
//! Assumptions (stated in docs/inference.md): requests arrive as a Poisson
//! process, all with the same prompt and output lengths. A new request waits
//! for the decode step in flight (uniform on `[0, t_step]`), then for the
//! prefills queued before it — an M/D/1 queue whose waiting time has the
//! Pollaczek–Khinchine mean `W̄ = ρ·s/(2(1 − ρ))` and, in Kingman's
//! exponential approximation (exact in heavy traffic), `P(W > t) = ρ·e^(−t/θ)`
//! with `θ = W̄/ρ`. A request's time per output token is the decode step
//! plus the prefills of the others that land in its decode window, a
//! Poisson count.

/// Mean M/D/1 waiting time, `ρ·s/(2(1 − ρ))`, for service time `s`.
pub fn md1_wait_mean(rho: f64, s: f64) -> f64 {
    if rho <= 0.0 {
        0.0
    } else {
        rho * s / (2.0 * (1.0 - rho))
    }
}

/// `P(U·t_res + W ≤ t)`: `∫₀¹ P(W ≤ t − u·t_res) du` in closed form, with
/// `P(W ≤ x) = 1 − ρ·e^(−x/θ)` for `x ≥ 0`, `θ = W̄/ρ`: over
/// `u ≤ u_max = min(1, t/t_res)` it is
/// `u_max − ρ·e^(−t/θ)·(θ/t_res)·(e^(u_max·t_res/θ) − 1)`.
fn residual_wait_cdf(t: f64, t_res: f64, rho: f64, w_mean: f64) -> f64 {
    if t < 0.0 {
        return 0.0;
    }
    let u_max = if t_res > 0.0 {
        (t / t_res).min(1.0)
    } else {
        1.0
    };
    if rho <= 0.0 || w_mean <= 0.0 {
        return u_max;
    }
    let theta = w_mean / rho;
    let queued = if t_res > 0.0 {
        rho * theta / t_res * ((u_max * t_res - t) / theta).exp()
            - rho * theta / t_res * (-t / theta).exp()
    } else {
        rho * (-t / theta).exp()
    };
    u_max - queued
}

/// The `p`-quantile of `U·t_res + W` (U uniform on [0, 1], W the M/D/1
/// wait), by bisection on its CDF.
pub fn wait_quantile(p: f64, t_res: f64, rho: f64, w_mean: f64) -> f64 {
    let cdf = |t: f64| residual_wait_cdf(t, t_res, rho, w_mean);
    let mut hi = t_res + w_mean.max(1e-12) * 64.0 / rho.max(1e-9);
    while cdf(hi) < p && hi < 1e9 {
        hi *= 2.0;
    }
    let mut lo = 0.0;
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if cdf(mid) < p {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    hi
}

/// The `p`-quantile of a Poisson count with mean `mean` (exact summation).
pub fn poisson_quantile(p: f64, mean: f64) -> u64 {
    if mean <= 0.0 {
        return 0;
    }
    // start from the mode's neighbourhood through log-space terms
    let mut k = 0u64;
    let mut log_term = -mean;
    let mut cdf = log_term.exp();
    while cdf < p && k < 10_000_000 {
        k += 1;
        log_term += mean.ln() - (k as f64).ln();
        cdf += log_term.exp();
    }
    k
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_queue_is_uniform_residual() {
        // ρ = 0: U·t_res, so the median is t_res/2 and p90 0.9·t_res
        assert!((wait_quantile(0.5, 2.0, 0.0, 0.0) - 1.0).abs() < 1e-3);
        assert!((wait_quantile(0.9, 2.0, 0.0, 0.0) - 1.8).abs() < 1e-3);
    }

    #[test]
    fn exponential_tail_quantile_by_hand() {
        // no residual: P(W > t) = ρ e^{-t ρ/W̄} → t_p = (W̄/ρ)·ln(ρ/(1−p));
        // ρ = 0.5, s = 1: W̄ = 0.5·1/(2·0.5) = 0.5, θ = 1, p99: ln(50) = 3.912
        let w = md1_wait_mean(0.5, 1.0);
        assert!((w - 0.5).abs() < 1e-12);
        assert!((wait_quantile(0.99, 0.0, 0.5, w) - 50f64.ln()).abs() < 1e-3);
        // below 1 − ρ the wait is 0
        assert!(wait_quantile(0.4, 0.0, 0.5, w) < 1e-6);
    }

    #[test]
    fn closed_form_cdf_matches_quadrature() {
        let (t_res, rho, w) = (0.02, 0.6, md1_wait_mean(0.6, 0.05));
        let theta = w / rho;
        for t in [0.005, 0.02, 0.1] {
            let n = 20_000;
            let quad: f64 = (0..n)
                .map(|i| {
                    let x = t - (i as f64 + 0.5) / n as f64 * t_res;
                    if x < 0.0 {
                        0.0
                    } else {
                        1.0 - rho * (-x / theta).exp()
                    }
                })
                .sum::<f64>()
                / n as f64;
            assert!((residual_wait_cdf(t, t_res, rho, w) - quad).abs() < 1e-6);
        }
    }

    #[test]
    fn poisson_quantiles_by_hand() {
        // mean 1: CDF(0) = 0.368, CDF(1) = 0.736, CDF(2) = 0.920, CDF(3) = 0.981
        assert_eq!(poisson_quantile(0.5, 1.0), 1);
        assert_eq!(poisson_quantile(0.9, 1.0), 2);
        assert_eq!(poisson_quantile(0.95, 1.0), 3);
        assert_eq!(poisson_quantile(0.99, 0.0), 0);
    }
}
