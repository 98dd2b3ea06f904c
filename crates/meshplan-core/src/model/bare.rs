/*!
A model given only as a parameter count ("70B", "7e9"): a dense,
LLaMA-like shape with about that many parameters, for the questions that
only need `P` (FLOPs `6·P` per token, weights `P × bytes`, optimizer
state). What is approximated: the shape. `D` is 128 times a power of two
(so every power-of-two TP degree up to `N` divides the heads), `L` near
`D/128` (LLaMA's 7B–405B have `D/L` from 102 to 130), heads of 128,
grouped-query attention with `K = min(N, 8)` KV heads (as LLaMA-2/3 70B,
LLaMA-3 8B and 405B, Mistral: an MHA guess would give a 70B model 8× their
KV cache), a gated MLP whose `F` (a multiple of 256) is solved for `P`, separate
input and output embeddings whose vocabulary (near 32,000) takes the
remainder, so the total is `P` to within `2·D`. KV-cache sizes and attention FLOPs depend on that guessed
shape; the model's notes say so.
*/

use crate::error::{Error, Result};
use crate::model::params::count;
use crate::model::{Arch, ModelSpec};
use crate::trace::NoTrace;
use crate::units::parse_count;

const V: u64 = 32_000;

/// The parameter count a name spells ("70B", "7e9", "1.5T"), if it is one:
/// a count with a suffix or exponent, at least a million.
pub fn parse_bare(name: &str) -> Option<u64> {
    let t = name.trim();
    let spelled = t
        .chars()
        .last()
        .is_some_and(|c| matches!(c, 'B' | 'b' | 'M' | 'T' | 'k'))
        || t.contains(['e', 'E']);
    let first_digit = t.chars().next().is_some_and(|c| c.is_ascii_digit());
    match parse_count(t) {
        Ok(p) if spelled && first_digit && p >= 1_000_000 => Some(p),
        _ => None,
    }
}

/// KV heads of the guessed shape: grouped-query attention with 8 KV heads
/// (MHA below 8 query heads).
pub const GUESSED_KV_HEADS: u64 = 8;

fn shape(l: u64, d: u64, p: u64) -> Option<Arch> {
    let h = 128;
    let n = (d / h).max(1);
    let k = n.min(GUESSED_KV_HEADS);
    // P ≈ L·(2D² + 2·D·K·H + 3DF + 2D) + 2VD + D (N·H = D): solve for F.
    let (d1, kh) = (d as u128, (k * h) as u128);
    let per_layer_fixed = 2 * d1 * d1 + 2 * d1 * kh + 2 * d1;
    let fixed = (l as u128) * per_layer_fixed + 2 * V as u128 * d as u128 + d as u128;
    let rest = (p as u128).checked_sub(fixed)?;
    let f = (rest as f64 / (3.0 * l as f64 * d as f64)).round() as u64;
    if f < d {
        return None;
    }
    // F a multiple of 256 (so TP degrees divide it); the remainder, norms
    // included, goes into the vocabulary (2·D parameters per token)
    let f = (f / 256).max(1) * 256;
    let mut a = Arch::dense(l, d, f, n, k, h, V);
    let got = count(&a, &mut NoTrace).total as i128;
    let v = V as i128 + (p as i128 - got) / (2 * d as i128);
    if !(1000..=1_000_000).contains(&v) {
        return None;
    }
    a.vocab = v as u64;
    Some(a)
}

/// A dense model with about `p` parameters (see the module docs).
pub fn bare_model(p: u64) -> Result<ModelSpec> {
    let mut best: Option<(f64, Arch)> = None;
    for l in 1..=512u64 {
        // D = 128·2^j: N = D/128 heads, a power of two, so TP degrees divide it
        for d in (0..10).map(|j| 128u64 << j) {
            if let Some(a) = shape(l, d, p) {
                let ratio = a.d_ff as f64 / a.d_model as f64;
                // prefer F/D near LLaMA's 3.5 and D/L near 128
                let score = (ratio / 3.5).ln().abs() + ((d as f64 / l as f64) / 128.0).ln().abs();
                if best.as_ref().map_or(true, |(s, _)| score < *s) {
                    best = Some((score, a));
                }
            }
        }
    }
    let (_, arch) = best.ok_or_else(|| {
        Error::Invalid(format!(
            "no transformer shape has {p} parameters with a 32,000-token vocabulary; give at least 100M"
        ))
    })?;
    arch.validate()?;
    let got = count(&arch, &mut NoTrace).total;
    let label = if p >= 1_000_000_000 {
        format!("{}B", crate::units::sig4(p as f64 / 1e9))
    } else {
        format!("{}M", crate::units::sig4(p as f64 / 1e6))
    };
    let (kv_heads, heads) = (arch.n_kv_heads, arch.n_heads);
    let mut spec = ModelSpec::custom(&format!("dense-{label}"), arch);
    spec.source = format!(
        "a bare parameter count: guessed LLaMA-like shape, GQA with K = {} KV heads of N = {} (KV cache and attention follow this guess)",
        kv_heads, heads
    );
    spec.notes = format!(
        "Given only as {p} parameters: a LLaMA-like dense shape with {got} parameters ({:+.4}%), grouped-query attention with K = {} KV heads. \
         Parameter-only figures (6·P FLOPs per token, weight and optimizer bytes) are as exact as P; \
         KV cache, attention FLOPs and per-layer figures depend on the guessed shape.",
        100.0 * (got as f64 - p as f64) / p as f64,
        kv_heads
    );
    Ok(spec)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_counts() {
        assert_eq!(parse_bare("70B"), Some(70_000_000_000));
        assert_eq!(parse_bare("7e9"), Some(7_000_000_000));
        assert_eq!(parse_bare("llama-2-13b"), None);
        assert_eq!(parse_bare("1000"), None);
        for p in [
            125_000_000u64,
            7_000_000_000,
            70_000_000_000,
            405_000_000_000,
        ] {
            let m = bare_model(p).unwrap();
            let got = count(&m.arch, &mut NoTrace).total as f64;
            // the vocabulary takes the remainder: within 2·D
            let tol = 2.0 * m.arch.d_model as f64;
            assert!((got - p as f64).abs() <= tol, "{p}: {got}");
        }
    }

    /// A bare 70B is guessed as real 70B models are built (LLaMA-2/3 70B:
    /// N = 64 query heads, K = 8 KV heads of H = 128) and says so: its KV
    /// cache per token is 2·K·H·L·2 bytes, not the MHA guess's 8× that.
    #[test]
    fn a_bare_70b_is_gqa_and_names_its_guess() {
        let m = bare_model(70_000_000_000).unwrap();
        let a = &m.arch;
        assert_eq!(
            (a.n_heads * a.d_head, a.n_kv_heads, a.d_head),
            (a.d_model, 8, 128)
        );
        assert!(a.n_heads >= 32, "{a:?}");
        assert!(m.source.contains("GQA with K = 8"), "{}", m.source);
        // bf16: 2 (K and V) · 8 · 128 · L · 2 bytes = 4096·L bytes per token
        let kv = crate::model::kv::bytes_per_token(a, crate::units::DType::Bf16, &mut NoTrace);
        assert_eq!(kv.get(), 4096.0 * a.n_layers as f64);
    }
}
