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
* Sparse attention (DeepSeek-V3.2): each query attends to at most `k_sel`
  keys (the top-k the indexer picks; causal average `k_sel − k_sel²/(2T)`
  once `T > k_sel`, as a window), and the indexer scores every key with
  `N_I` heads of width `H_I`: `2·N_I·H_I` per key (its ReLU and head weights,
  O(N_I) per key, ignored as the softmax is).
* Linear attention (Gated DeltaNet): a linear layer's cost per token does not
  grow with the context. The recurrent form per value head reads the state
  (`H_lk×H_lv`) for the delta rule's retrieval `Sᵀk`, updates it with a
  rank-one term, and reads it for the output `Sᵀq`: `6·N_lv·H_lk·H_lv`, plus
  the depthwise short convolution `2·(2·N_lk·H_lk + N_lv·H_lv)·K_conv`. The
  chunked kernels engines run for prefill do the same work in blocks; their
  within-chunk terms are not counted.
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

/// Sum over the softmax-attention layers of the average keys per query a
/// query's attention reads (at most `k_sel` under sparse attention; linear
/// layers attend to no keys).
pub(crate) fn layer_keys(a: &Arch, seq_len: u64, causal: bool) -> f64 {
    let cap = a.sparse_attention.as_ref().map(|s| s.index_topk);
    let layers = a.full_attention_layers();
    match &a.sliding_window {
        None => layers as f64 * keys_per_query(seq_len, cap, causal),
        Some(sw) => {
            let global = layers.checked_div(sw.global_every).unwrap_or(0);
            let local = layers - global;
            let w = cap.map_or(sw.window, |c| c.min(sw.window));
            global as f64 * keys_per_query(seq_len, cap, causal)
                + local as f64 * keys_per_query(seq_len, Some(w), causal)
        }
    }
}

/// Indexer FLOPs per query over all layers: `2·N_I·H_I` per key, every
/// cached key (T/2 on average under a causal mask), in each attention layer.
fn indexer_flops(a: &Arch, seq_len: u64, causal: bool) -> f64 {
    match &a.sparse_attention {
        Some(i) => {
            2.0 * i.index_n_heads as f64
                * i.index_head_dim as f64
                * a.full_attention_layers() as f64
                * keys_per_query(seq_len, None, causal)
        }
        None => 0.0,
    }
}

/// FLOPs per token of one Gated DeltaNet layer, context-independent:
/// `6·N_lv·H_lk·H_lv + 2·(2·N_lk·H_lk + N_lv·H_lv)·K_conv`.
pub fn linear_layer_flops(a: &Arch) -> f64 {
    match &a.linear_attention {
        Some(la) => {
            6.0 * la.n_value_heads as f64 * la.key_head_dim as f64 * la.value_head_dim as f64
                + 2.0 * la.conv_dim() as f64 * la.conv_kernel as f64
        }
        None => 0.0,
    }
}

/// Attention FLOPs per query token over all layers at context `seq_len`
/// (QKᵀ and PV over the keys attended, the sparse indexer's scoring, the
/// linear layers' state update): what `flops.forward_attention` reports and
/// what the serving roofline prices.
pub fn attention_flops_per_query(a: &Arch, seq_len: u64, causal: bool) -> f64 {
    let (hqk, hv) = head_dims(a);
    2.0 * a.n_heads as f64 * (hqk + hv) as f64 * layer_keys(a, seq_len, causal)
        + indexer_flops(a, seq_len, causal)
        + a.linear_attention_layers() as f64 * linear_layer_flops(a)
}

/// Per-head query/key and value widths.
pub(crate) fn head_dims(a: &Arch) -> (u64, u64) {
    match &a.mla {
        Some(m) => (m.qk_nope_head_dim + m.qk_rope_head_dim, m.v_head_dim),
        None => (a.d_head, a.d_head),
    }
}

/// The forward-attention step, its formula naming the layer kinds present.
fn attention_step(a: &Arch, seq_len: u64, causal: bool, total: Flops) -> Step {
    let (hqk, hv) = head_dims(a);
    let hybrid = a.linear_attention.is_some();
    let l = if hybrid { "L_full" } else { "L" };
    let keys = match (&a.sparse_attention, causal) {
        (None, true) => "T/2".to_string(),
        (None, false) => "T".to_string(),
        (Some(_), true) => "(k_sel − k_sel²/(2T), or T/2 if T ≤ k_sel)".to_string(),
        (Some(_), false) => "min(T, k_sel)".to_string(),
    };
    let mut f = format!("2·N·(H_qk+H_v)·{l}·{keys}");
    if a.sparse_attention.is_some() {
        let t = if causal { "T/2" } else { "T" };
        f.push_str(&format!(" + 2·N_I·H_I·{l}·{t} (indexer)"));
    }
    if hybrid {
        f.push_str(" + L_lin·(6·N_lv·H_lk·H_lv + 2·(2·N_lk·H_lk + N_lv·H_lv)·K_conv) (linear)");
    }
    if causal && a.sparse_attention.is_none() {
        f.push_str(" (causal)");
    }
    let mut s = Step::new(
        "flops.forward_attention",
        "Forward attention FLOPs per token",
        &f,
    )
    .bind("N", a.n_heads as f64, "")
    .bind("H_qk", hqk as f64, "")
    .bind("H_v", hv as f64, "")
    .bind(l, a.full_attention_layers() as f64, "")
    .bind("T", seq_len as f64, "tokens");
    if let Some(i) = &a.sparse_attention {
        s = s
            .bind("k_sel", i.index_topk as f64, "tokens")
            .bind("N_I", i.index_n_heads as f64, "")
            .bind("H_I", i.index_head_dim as f64, "");
    }
    if let Some(la) = &a.linear_attention {
        s = s
            .bind("L_lin", a.linear_attention_layers() as f64, "")
            .bind("N_lk", la.n_key_heads as f64, "")
            .bind("N_lv", la.n_value_heads as f64, "")
            .bind("H_lk", la.key_head_dim as f64, "")
            .bind("H_lv", la.value_head_dim as f64, "")
            .bind("K_conv", la.conv_kernel as f64, "");
    }
    s.result(total.get(), "FLOPs")
        .source("How To Scale Your Model, ch4: attention 4BT²NH forward")
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
    let forward_attention = Flops::new(attention_flops_per_query(a, seq_len, causal));
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
    tr.record(|| attention_step(a, seq_len, causal, forward_attention));
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
