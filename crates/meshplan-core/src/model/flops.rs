/*!
FLOPs per token.

* Matmuls: a token multiplies through every active weight matrix once, 2 FLOPs
  per weight forward (multiply + add) and 4 backward (gradients with respect to
  activations and weights): forward `2·P_matmul`, training `6·P_matmul`
  (book ch4). `P_matmul` counts attention projections, the active MLP
  (k of E experts plus shared ones), the router, and the `V·D` output
  projection (even when tied; the input lookup costs no FLOPs). Norms, biases,
  qk-norm weights and softmax are O(D) per token and ignored, as in the book.
* Attention scores and values: for a query attending to `S` keys,
  `2·N·S·H_qk + 2·N·S·H_v` per layer (= `4·N·S·H` when `H_qk = H_v = H`), i.e.
  the book's `4BT²NH` forward for a length-T self-attention. A causal mask
  halves the useful work (average key count T/2, the book's convention; needs a
  kernel that skips masked blocks). Sliding-window layers see at most `W` keys.
  Training multiplies by 3 (`12BTSNH`).
*/

use serde::Serialize;

use super::params::ParamCounts;
use super::Arch;
use crate::trace::{Step, Tracer};
use crate::units::Flops;

/// FLOPs one token costs at a given sequence length.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct FlopsPerToken {
    /// Forward matmul FLOPs: `2·P_matmul`.
    pub forward_matmul: Flops,
    /// Forward attention (QKᵀ and PV) FLOPs.
    pub forward_attention: Flops,
    /// Forward total.
    pub forward: Flops,
    /// Forward + backward: 3 × forward.
    pub training: Flops,
}

/// Average number of keys a query attends to in one layer.
fn keys_per_query(seq_len: u64, window: Option<u64>, causal: bool) -> f64 {
    let t = seq_len as f64;
    match (window, causal) {
        (None, false) => t,
        (None, true) => t / 2.0,
        (Some(w), false) => t.min(w as f64),
        (Some(w), true) => {
            let w = w as f64;
            if t <= w {
                t / 2.0
            } else {
                // positions < W see their prefix, the rest see W keys
                w - w * w / (2.0 * t)
            }
        }
    }
}

/// Sum over layers of the average keys per query.
pub(crate) fn layer_keys(a: &Arch, seq_len: u64, causal: bool) -> f64 {
    match &a.sliding_window {
        None => a.n_layers as f64 * keys_per_query(seq_len, None, causal),
        Some(sw) => {
            let global = a.n_layers.checked_div(sw.global_every).unwrap_or(0);
            let local = a.n_layers - global;
            global as f64 * keys_per_query(seq_len, None, causal)
                + local as f64 * keys_per_query(seq_len, Some(sw.window), causal)
        }
    }
}

/// Per-head query/key and value widths.
pub(crate) fn head_dims(a: &Arch) -> (u64, u64) {
    match &a.mla {
        Some(m) => (m.qk_nope_head_dim + m.qk_rope_head_dim, m.v_head_dim),
        None => (a.d_head, a.d_head),
    }
}

/// FLOPs per token at sequence length `seq_len` (T).
pub fn per_token<T: Tracer>(
    a: &Arch,
    p: &ParamCounts,
    seq_len: u64,
    causal: bool,
    tr: &mut T,
) -> FlopsPerToken {
    let forward_matmul = Flops::new(2.0 * p.matmul_active as f64);
    let (hqk, hv) = head_dims(a);
    let keys = layer_keys(a, seq_len, causal);
    let forward_attention = Flops::new(2.0 * a.n_heads as f64 * (hqk + hv) as f64 * keys);
    let forward = forward_matmul + forward_attention;
    let training = forward * 3.0;
    tr.record(|| {
        Step::new(
            "flops.forward_matmul",
            "Forward matmul FLOPs per token",
            "2·P_matmul",
        )
        .bind("P_matmul", p.matmul_active as f64, "params")
        .result(forward_matmul.get(), "FLOPs")
        .source("How To Scale Your Model, ch4: 2 FLOPs per parameter per token forward")
    });
    tr.record(|| {
        let f = if causal {
            "2·N·(H_qk+H_v)·L·T/2 (causal)"
        } else {
            "2·N·(H_qk+H_v)·L·T"
        };
        Step::new(
            "flops.forward_attention",
            "Forward attention FLOPs per token",
            f,
        )
        .bind("N", a.n_heads as f64, "")
        .bind("H_qk", hqk as f64, "")
        .bind("H_v", hv as f64, "")
        .bind("L", a.n_layers as f64, "")
        .bind("T", seq_len as f64, "tokens")
        .result(forward_attention.get(), "FLOPs")
        .source("How To Scale Your Model, ch4: attention 4BT²NH forward")
    });
    tr.record(|| {
        Step::new(
            "flops.training",
            "Training FLOPs per token",
            "3·(forward matmul + forward attention)",
        )
        .bind("forward", forward.get(), "FLOPs")
        .result(training.get(), "FLOPs")
        .source("How To Scale Your Model, ch4: backward = 2 × forward")
    });
    FlopsPerToken {
        forward_matmul,
        forward_attention,
        forward,
        training,
    }
}
