//! Speculative decoding and prefix caching as serving options.
//!
//! Speculative decoding drafts γ tokens per sequence, then the target model
//! verifies them in one forward step of γ + 1 tokens per sequence. With a
//! per-token acceptance rate α (each drafted token accepted independently
//! while all before it were), the tokens a target step emits are
//! `E = 1 + α + … + α^γ = (1 − α^(γ+1))/(1 − α)` (Leviathan et al. 2023,
//! eq. 1; γ + 1 when α = 1). The time per output token is
//! `(T_draft + T_verify)/E`.
//!
//! The draft costs: `ngram` (prompt lookup on the host) nothing; `mtp`
//! (DeepSeek-V3's multi-token prediction: one extra transformer block
//! sharing the embedding and head) γ × one layer's share of the target's
//! step; `draft:MODEL` γ decode steps of the draft model on the same chips.

use std::fmt;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::model::{kv, ModelSpec};
use crate::trace::NoTrace;
use crate::units::{Bytes, DType};

/// How the draft tokens are proposed.
#[derive(Clone, Debug, PartialEq)]
pub enum DraftMethod {
    /// Prompt/n-gram lookup: no model, no device time.
    Ngram,
    /// Multi-token prediction heads: one transformer block per draft token.
    Mtp,
    /// A smaller draft model run on the same chips.
    Draft(Box<ModelSpec>),
}

/// Speculative decoding settings.
#[derive(Clone, Debug, PartialEq)]
pub struct Speculative {
    /// Draft method.
    pub method: DraftMethod,
    /// γ: tokens drafted per target step.
    pub gamma: u64,
    /// α: probability each drafted token is accepted.
    pub acceptance: f64,
}

impl Speculative {
    /// Check γ ≥ 1 and α in [0, 1].
    pub fn new(method: DraftMethod, gamma: u64, acceptance: f64) -> Result<Speculative> {
        if gamma == 0 || gamma > 64 {
            return Err(Error::BadValue {
                what: "speculative draft length γ".into(),
                input: gamma.to_string(),
                expected: "1 to 64 tokens".into(),
            });
        }
        if !(0.0..=1.0).contains(&acceptance) {
            return Err(Error::BadValue {
                what: "speculative acceptance rate α".into(),
                input: acceptance.to_string(),
                expected: "a probability in [0, 1]".into(),
            });
        }
        Ok(Speculative {
            method,
            gamma,
            acceptance,
        })
    }

    /// `E = (1 − α^(γ+1))/(1 − α)`: tokens per target step.
    pub fn expected_tokens(&self) -> f64 {
        expected_tokens(self.acceptance, self.gamma)
    }
}

/// `E = (1 − α^(γ+1))/(1 − α)` (γ + 1 at α = 1).
pub fn expected_tokens(alpha: f64, gamma: u64) -> f64 {
    let g = gamma as f64;
    if (1.0 - alpha).abs() < 1e-12 {
        g + 1.0
    } else {
        (1.0 - alpha.powf(g + 1.0)) / (1.0 - alpha)
    }
}

impl fmt::Display for DraftMethod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DraftMethod::Ngram => f.write_str("ngram"),
            DraftMethod::Mtp => f.write_str("mtp"),
            DraftMethod::Draft(m) => write!(f, "draft:{}", m.name),
        }
    }
}

/// HBM a draft model (`draft:MODEL`) takes beside the target on one replica.
///
/// The draft runs on the target's tensor-parallel group (vLLM's default:
/// the draft's TP degree is the target's), beside the first pipeline stage.
/// Its weights add `w_d` per chip; its cache lives on those `tp` chips only,
/// so there a batch B needs `w + w_d + B·(KV/n + KV_d/tp)` per chip, i.e.
/// `B ≤ n·(HBM − w − w_d)/(KV + KV_d·n/tp)` with `n` the chips that share a
/// sequence's target KV: the draft adds `KV_d·n/tp` to each sequence's share.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct DraftFootprint {
    /// w_d: the draft's weights per chip.
    pub w_dev: Bytes,
    /// KV_d·n/tp: the draft's KV per sequence, as a share of the n-chip pool.
    pub kv_seq_share: Bytes,
}

impl DraftFootprint {
    /// The footprint of `draft` with `w_dev` weights per chip on `tp` chips,
    /// beside a target whose sequence KV spreads over `n` chips, at
    /// `context` tokens of `kv_dtype` cache.
    pub fn new(
        draft: &ModelSpec,
        w_dev: Bytes,
        (tp, n): (u64, u64),
        context: u64,
        kv_dtype: DType,
    ) -> Self {
        let kv_d = kv::bytes_per_sequence(&draft.arch, context, kv_dtype, &mut NoTrace);
        DraftFootprint {
            w_dev,
            kv_seq_share: kv_d * (n.max(1) as f64 / tp.max(1) as f64),
        }
    }
}

/// What speculative decoding does to one decode step (per replica).
#[derive(Clone, Debug, Default, Serialize)]
pub struct SpecReport {
    /// "ngram" | "mtp" | "draft:MODEL".
    pub method: String,
    /// γ.
    pub gamma: u64,
    /// α.
    pub acceptance: f64,
    /// E: tokens per target step.
    pub expected_tokens_per_step: f64,
    /// The target's step over γ + 1 tokens per sequence, s.
    pub verify_step_s: f64,
    /// γ draft steps, s.
    pub draft_s: f64,
    /// (T_draft + T_verify)/E, s.
    pub tpot_s: f64,
    /// Plain decode step / TPOT with speculation.
    pub speedup: f64,
}

/// Prefix caching: the fraction `h` of each prompt already in the cache.
/// Prefill then runs the matmuls over the `(1 − h)·T` new tokens, the
/// attention of those tokens over the whole prefix — `1 − h²` of the causal
/// `T²/2` score FLOPs — and writes `(1 − h)` of the KV.
pub fn check_prefix_hit(h: f64) -> Result<f64> {
    if (0.0..1.0).contains(&h) {
        Ok(h)
    } else {
        Err(Error::BadValue {
            what: "prefix cache hit fraction".into(),
            input: h.to_string(),
            expected: "a fraction in [0, 1) of each prompt already cached".into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expected_tokens_by_hand() {
        // α = 0.5, γ = 3: 1 + 0.5 + 0.25 + 0.125 = 1.875
        assert!((expected_tokens(0.5, 3) - 1.875).abs() < 1e-12);
        // α = 0.8, γ = 4: 1 + .8 + .64 + .512 + .4096 = 3.3616
        assert!((expected_tokens(0.8, 4) - 3.3616).abs() < 1e-12);
        assert_eq!(expected_tokens(1.0, 4), 5.0);
        assert_eq!(expected_tokens(0.0, 4), 1.0);
        assert!(Speculative::new(DraftMethod::Ngram, 0, 0.5).is_err());
        assert!(Speculative::new(DraftMethod::Ngram, 2, 1.5).is_err());
        assert!(Speculative::new(DraftMethod::Ngram, 2, f64::NAN).is_err());
        assert!(check_prefix_hit(1.0).is_err());
        assert!(check_prefix_hit(f64::NAN).is_err());
    }
}
