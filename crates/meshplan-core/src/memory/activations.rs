//! Saved activations per token and layer, the two ways the repository counts
//! them: the book's tensor counts (ch4, Korthikanti et al. 2022 for
//! selective recompute) and a framework's FlashAttention tensor list.

use crate::error::{Error, Result};
use crate::model::{Arch, MlpKind};
use crate::parallelism::Remat;

/// The most checkpoints per layer a question may ask for: the book's
/// no-remat count is ≈20 `[B, D]` per layer, so 1000 is surely a typo.
const MAX_CHECKPOINTS_PER_LAYER: u64 = 1000;

/// Check a "k checkpoints per layer" given by the user: 1 ≤ k ≤ 1000.
pub fn checkpoints_per_layer(k: Option<u64>) -> Result<Option<u64>> {
    match k {
        Some(k) if k == 0 || k > MAX_CHECKPOINTS_PER_LAYER => Err(Error::Invalid(format!(
            "checkpoints_per_layer = {k}: give k in 1..={MAX_CHECKPOINTS_PER_LAYER} ([B, D] activations kept per layer)"
        ))),
        k => Ok(k),
    }
}

/// Saved activation *elements* per token per layer when the plan keeps
/// `k` checkpoints of `[B, D]` per layer (book ch5 Q2, ch6: "2·L·B·D·k"
/// bytes in bf16): `k·D`, sharded by `tp` under sequence parallelism (or
/// when tp = 1) like the book's other D-wide tensors.
pub fn checkpoint_elems_per_token_layer(a: &Arch, k: u64, tp: u64, sp: bool) -> f64 {
    let d = a.d_model as f64;
    let t = tp.max(1) as f64;
    k as f64 * if sp { d / t } else { d }
}

/// The book's saved activation *elements* per token per layer on one device
/// under `remat`, with `tp` and sequence parallelism `sp`.
pub fn book_elems_per_token_layer(a: &Arch, remat: Remat, tp: u64, sp: bool) -> f64 {
    let d = a.d_model as f64;
    let f = match &a.moe {
        Some(m) => (a.d_ff_expert() * m.top_k) as f64,
        None => a.d_ff as f64,
    };
    let t = tp.max(1) as f64;
    let dsh = if sp { d / t } else { d };
    match remat {
        // book ch4: "≈ 2 bytes × ~20 × B·T·D·L"; with TP, Korthikanti's split
        // (10 of 34 replicated without SP) scaled to 20: 6 replicated + 14/t.
        Remat::None => {
            if t > 1.0 && !sp {
                6.0 * d + 14.0 * d / t
            } else {
                20.0 * d / t
            }
        }
        Remat::Full => dsh,
        Remat::AfterMatmuls => {
            let nf = if a.mlp == MlpKind::Gated { 2.0 } else { 1.0 };
            dsh + nf * f / t
        }
        Remat::Selective => {
            if t > 1.0 && !sp {
                10.0 * d + 24.0 * d / t
            } else {
                34.0 * d / t
            }
        }
    }
}

/// A framework's saved activation *bytes* per token per layer in a 2-byte
/// dtype (FlashAttention: no `5·a·s/h` score term). Llama-style: norm
/// inputs, QKV, attention output, MLP input, gate/up/activation outputs.
/// With SP everything is sharded by tp; without SP the D-wide tensors are
/// replicated (Korthikanti et al. 2022).
pub fn framework_bytes_per_token_layer(a: &Arch, tp: u64, sp: bool, remat: Remat) -> f64 {
    let (d, f) = (a.d_model as f64, a.ffn_width_active());
    let nh = (a.n_heads * a.d_head) as f64;
    let kh = (a.n_kv_heads * a.d_head) as f64;
    let t = tp.max(1) as f64;
    let dsh = if sp || tp <= 1 { d / t } else { d };
    match remat {
        Remat::Full => 2.0 * dsh,
        Remat::None | Remat::Selective | Remat::AfterMatmuls => {
            // D-wide: 2 norm inputs, 2 matmul inputs (post-norm), residual → 2 bytes each
            let dpart = 2.0 * 4.0 * dsh;
            // Q, K, V (post-RoPE), attention output O
            let attn = 2.0 * (2.0 * nh + 2.0 * kh) / t;
            // gate, up, act(gate)·up (down input), act(gate)
            let mlp =
                2.0 * if a.mlp == MlpKind::Gated {
                    4.0 * f
                } else {
                    2.0 * f
                } / t;
            dpart + attn + mlp
        }
    }
}

/// Megatron-Core's saved activation *bytes* per token per layer in a 2-byte
/// dtype, Transformer Engine layers (Korthikanti et al. 2022, Table 2,
/// without the dropout masks — Llama-style models train without dropout —
/// generalised to grouped-query attention and gated MLPs): each norm's input
/// and output (`LayerNormLinear` / `LayerNormMLP` keep the normalised input
/// for the weight gradient), Q, K, V, the attention output, the FC1 output
/// (gate and up: 2F gated, F plain) and the activation output (FC2's input,
/// F): `2·(4·D' + (2·N·H + 2·K·H)/t + (m+1)·F/t)` bytes with `D' = D/t`
/// under sequence parallelism (or t = 1), else `D`; GPT-3's `4·D` MLP gives
/// Korthikanti's `32·s·b·h` (34 with the two dropout masks). Without
/// FlashAttention (`unfused`, Megatron 2022) and without selective
/// recompute the `5·N·s/t` bytes of scores, softmax and dropout per token
/// come on top. Full recompute keeps the layer input (`2·D'`).
pub fn megatron_bytes_per_token_layer(
    a: &Arch,
    tp: u64,
    sp: bool,
    remat: Remat,
    unfused: Option<u64>,
) -> f64 {
    let (d, f) = (a.d_model as f64, a.ffn_width_active());
    let (hqk, hv) = crate::model::flops::head_dims(a);
    let nh = (a.n_heads * hqk.max(hv)) as f64;
    let kh = match &a.mla {
        // MLA keeps per-head K and V after the up-projection
        Some(_) => nh,
        None => (a.n_kv_heads * a.d_head) as f64,
    };
    let t = tp.max(1) as f64;
    let dsh = if sp || tp <= 1 { d / t } else { d };
    if remat == Remat::Full {
        return 2.0 * dsh;
    }
    let mats = a.mlp.matrices() as f64; // 3 gated (gate, up, down), 2 plain
    let elems = 4.0 * dsh + (2.0 * nh + 2.0 * kh) / t + mats * f / t;
    let scores = match unfused {
        Some(seq) if remat != Remat::Selective => 5.0 * a.n_heads as f64 * seq as f64 / t,
        _ => 0.0,
    };
    2.0 * elems + scores
}
