/*!
FLOP accounting: the FLOPs of a training step under a named
[`FlopConvention`], the recompute a remat policy adds, and MFU. `train`,
`plan train`, `validate` and the fidelity model all count through
[`step_flops`], so one model and plan give one MFU per convention.

Per token (T = sequence length, S_eff = keys per query, causal: T/2):

| convention | FLOPs per token |
|---|---|
| `model` | `3·(2·P_matmul + 2·N·(H_qk+H_v)·L·S_eff)` (= `model show`'s training FLOPs) |
| `hardware` | `model` + the recomputed forward (full: `2·P_matmul + attention`; selective, after-matmuls: attention) |
| `book` | `6·P_active` (embeddings included, attention ignored: the book's ch5) |
| `nanotron` | `3·[L·(2·D·NH + 4·D·KH + 4·NH·T + 2·NH·D + 2·m·D·F) + 2·D·V]` |
| `megatron` | `72·L·D²·(1 + T/(6·D) + V/(12·D·L))` |
*/

use serde::Serialize;

use crate::model::flops::per_token;
use crate::model::params::ParamCounts;
use crate::model::Arch;
use crate::parallelism::{FlopConvention, Remat};
use crate::trace::NoTrace;

/// FLOPs of one training step.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct StepFlops {
    /// The convention's model FLOPs (the MFU numerator).
    pub model: f64,
    /// FLOPs the remat policy recomputes (forward passes run twice).
    pub recompute: f64,
    /// What the chips execute: model + recompute (for `hardware`, = model).
    pub hardware: f64,
}

/// What a step's FLOPs depend on besides the model.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FlopQuery {
    /// Convention.
    pub convention: FlopConvention,
    /// T.
    pub seq_len: u64,
    /// Causal attention (half the score FLOPs).
    pub causal: bool,
    /// Tokens in the step (B).
    pub tokens: f64,
    /// Checkpoint policy (recompute).
    pub remat: Remat,
}

/// Forward (matmul, attention) FLOPs per token of the `model` convention.
fn forward_parts(a: &Arch, pc: &ParamCounts, seq_len: u64, causal: bool) -> (f64, f64) {
    let f = per_token(a, pc, seq_len, causal, &mut NoTrace);
    (f.forward_matmul.get(), f.forward_attention.get())
}

/// nanotron `get_flops` per token (variant A in the validation README):
/// full attention, router GEMMs not counted, MoE through the active width.
pub fn nanotron_per_token(a: &Arch, seq_len: u64) -> f64 {
    let (d, f, v) = (a.d_model as f64, a.ffn_width_active(), a.vocab as f64);
    let nh = (a.n_heads * a.d_head) as f64;
    let kh = (a.n_kv_heads * a.d_head) as f64;
    let l = a.n_layers as f64;
    let m = a.mlp.matrices() as f64;
    3.0 * (l
        * (2.0 * d * nh
            + 4.0 * d * kh
            + 4.0 * nh * seq_len as f64
            + 2.0 * nh * d
            + 2.0 * m * d * f)
        + 2.0 * d * v)
}

/// Megatron (Narayanan et al. 2021) model FLOPs per token.
pub fn megatron_per_token(a: &Arch, seq_len: u64) -> f64 {
    let (d, l, v) = (a.d_model as f64, a.n_layers as f64, a.vocab as f64);
    72.0 * l * d * d * (1.0 + seq_len as f64 / (6.0 * d) + v / (12.0 * d * l))
}

/// Model FLOPs per token under `conv` (no recompute).
pub fn per_token_flops(
    a: &Arch,
    pc: &ParamCounts,
    conv: FlopConvention,
    seq_len: u64,
    causal: bool,
) -> f64 {
    match conv {
        FlopConvention::Model | FlopConvention::Hardware => {
            let (mm, attn) = forward_parts(a, pc, seq_len, causal);
            3.0 * (mm + attn)
        }
        FlopConvention::Book => 6.0 * pc.active as f64,
        FlopConvention::Nanotron => nanotron_per_token(a, seq_len),
        FlopConvention::Megatron => megatron_per_token(a, seq_len),
    }
}

/// Recomputed forward FLOPs per token under `remat` (the book convention
/// recomputes `2·P` and has no attention term).
pub fn recompute_per_token(
    a: &Arch,
    pc: &ParamCounts,
    conv: FlopConvention,
    seq_len: u64,
    causal: bool,
    remat: Remat,
) -> f64 {
    let (mm, attn) = match conv {
        FlopConvention::Book => (2.0 * pc.active as f64, 0.0),
        _ => forward_parts(a, pc, seq_len, causal),
    };
    match remat {
        Remat::None => 0.0,
        Remat::Full => mm + attn,
        Remat::AfterMatmuls | Remat::Selective => attn,
    }
}

/// FLOPs of one step.
pub fn step_flops(a: &Arch, pc: &ParamCounts, q: &FlopQuery) -> StepFlops {
    let per = per_token_flops(a, pc, q.convention, q.seq_len, q.causal);
    let rec = recompute_per_token(a, pc, q.convention, q.seq_len, q.causal, q.remat) * q.tokens;
    let model = per * q.tokens;
    if q.convention == FlopConvention::Hardware {
        StepFlops {
            model: model + rec,
            recompute: rec,
            hardware: model + rec,
        }
    } else {
        StepFlops {
            model,
            recompute: rec,
            hardware: model + rec,
        }
    }
}

/// MFU: model FLOPs / (chips · C · step time); 0 for a non-positive time.
pub fn mfu(model_flops: f64, chips: f64, peak: f64, step_time_s: f64) -> f64 {
    let denom = chips * peak * step_time_s;
    if denom > 0.0 && denom.is_finite() {
        model_flops / denom
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::params::count;
    use crate::Catalog;

    #[test]
    fn conventions_by_hand_llama_2_7b() {
        let spec = Catalog::builtin().model("llama-2-7b").unwrap();
        let a = &spec.arch;
        let pc = count(a, &mut NoTrace);
        // book: 6·P with P = 6,738,415,616 (published, all parameters)
        let book = per_token_flops(a, &pc, FlopConvention::Book, 4096, true);
        assert_eq!(book, 6.0 * 6_738_415_616.0);
        // model: 6·P_matmul + 6·N·(2H)·L·T/2; P_matmul = P − V·D (input
        // embedding lookup) = 6,738,415,616 − 32,000·4,096 − norms 266,240
        let p_mm = 6_738_415_616.0 - 131_072_000.0 - (2.0 * 32.0 + 1.0) * 4096.0;
        let attn = 2.0 * 32.0 * 256.0 * 32.0 * 2048.0;
        let model = per_token_flops(a, &pc, FlopConvention::Model, 4096, true);
        assert!(
            (model / (3.0 * (2.0 * p_mm + attn)) - 1.0).abs() < 1e-12,
            "{model}"
        );
        // megatron: 72·L·D²·(1 + T/6D + V/12DL)
        let meg = per_token_flops(a, &pc, FlopConvention::Megatron, 4096, true);
        let want = 72.0
            * 32.0
            * 4096.0f64.powi(2)
            * (1.0 + 4096.0 / 24576.0 + 32000.0 / (12.0 * 4096.0 * 32.0));
        assert!((meg / want - 1.0).abs() < 1e-12);
    }

    #[test]
    fn hardware_adds_recompute_and_mfu_is_guarded() {
        let spec = Catalog::builtin().model("llama-2-7b").unwrap();
        let pc = count(&spec.arch, &mut NoTrace);
        let q = FlopQuery {
            convention: FlopConvention::Hardware,
            seq_len: 4096,
            causal: true,
            tokens: 1e6,
            remat: Remat::Full,
        };
        let h = step_flops(&spec.arch, &pc, &q);
        let m = step_flops(
            &spec.arch,
            &pc,
            &FlopQuery {
                convention: FlopConvention::Model,
                ..q
            },
        );
        // full remat reruns the forward: hardware = model · 4/3
        assert!((h.model / m.model - 4.0 / 3.0).abs() < 1e-12);
        assert_eq!(m.hardware, h.hardware);
        assert_eq!(mfu(1.0, 0.0, 1.0, 1.0), 0.0);
        assert_eq!(mfu(1e15, 2.0, 1e15, 1.0), 0.5);
    }
}
