/*!
KV-cache size.

Per token and layer a GQA/MQA/MHA model caches K and V: `2·K·H` elements; an
MLA model caches the compressed latent and the shared rotary key:
`kv_lora_rank + H_rope` elements. Per token over all layers in dtype of
`b` bytes: `2·K·H·L·b` (book ch4/ch7). A sequence of `S` tokens caches
`S` tokens in full-attention layers and `min(S, W)` in sliding-window layers.
*/

use super::Arch;
use crate::trace::{Step, Tracer};
use crate::units::{Bytes, DType};

/// Elements cached per token in one layer.
pub fn elements_per_token_layer(a: &Arch) -> u64 {
    match &a.mla {
        Some(m) => m.kv_lora_rank + m.qk_rope_head_dim,
        None => 2 * a.n_kv_heads * a.d_head,
    }
}

/// KV bytes per token of context, summed over all layers (as if every layer
/// attended globally): `2·K·H·L·bytes`.
pub fn bytes_per_token<T: Tracer>(a: &Arch, dtype: DType, tr: &mut T) -> Bytes {
    let e = elements_per_token_layer(a) * a.n_layers;
    let b = dtype.bytes_for(e);
    tr.record(|| {
        let s = match &a.mla {
            Some(m) => Step::new(
                "kv.bytes_per_token",
                "KV cache per token (MLA latent)",
                "(kv_r + H_rope)·L·bytes",
            )
            .bind("kv_r", m.kv_lora_rank as f64, "")
            .bind("H_rope", m.qk_rope_head_dim as f64, ""),
            None => Step::new("kv.bytes_per_token", "KV cache per token", "2·K·H·L·bytes")
                .bind("K", a.n_kv_heads as f64, "")
                .bind("H", a.d_head as f64, ""),
        };
        s.bind("L", a.n_layers as f64, "")
            .bind("bytes", dtype.bytes_per_element(), "B")
            .result(b.get(), "B")
            .source("How To Scale Your Model, ch4/ch7: KV cache = 2·S·L·K·H·bytes")
    });
    b
}

/// KV bytes of one sequence of `seq_len` (S) tokens, honouring sliding windows.
pub fn bytes_per_sequence<T: Tracer>(a: &Arch, seq_len: u64, dtype: DType, tr: &mut T) -> Bytes {
    let per_layer = elements_per_token_layer(a);
    let tokens: u128 = match &a.sliding_window {
        None => a.n_layers as u128 * seq_len as u128,
        Some(sw) => {
            let global = a.n_layers.checked_div(sw.global_every).unwrap_or(0);
            let local = a.n_layers - global;
            global as u128 * seq_len as u128 + local as u128 * seq_len.min(sw.window) as u128
        }
    };
    let elements = tokens.saturating_mul(per_layer as u128);
    let b = Bytes::new((elements as f64) * dtype.bytes_per_element());
    tr.record(|| {
        let f = if a.sliding_window.is_some() {
            "Σ_layers min(S, W_l)·(per-layer elements)·bytes"
        } else {
            "S·(KV bytes per token)"
        };
        Step::new("kv.bytes_per_sequence", "KV cache per sequence", f)
            .bind("S", seq_len as f64, "tokens")
            .bind("elements_per_layer", per_layer as f64, "")
            .bind("bytes", dtype.bytes_per_element(), "B")
            .result(b.get(), "B")
    });
    b
}
