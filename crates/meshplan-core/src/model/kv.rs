/*!
KV-cache size.

Per token and layer a GQA/MQA/MHA model caches K and V: `2·K·H` elements; an
MLA model caches the compressed latent and the shared rotary key:
`kv_lora_rank + H_rope` elements. Per token over all layers in dtype of
`b` bytes: `2·K·H·L·b` (book ch4/ch7). A sequence of `S` tokens caches
`S` tokens in full-attention layers and `min(S, W)` in sliding-window layers.

Today's attention variants change what is cached:
* Sparse attention (DeepSeek-V3.2) keeps the MLA latent of every token and,
  beside it, the lightning indexer's key (`H_I` elements per token and
  layer). DeepSeek's reference implementation (and vLLM) keep that key in
  fp8 with one fp32 scale per 128 elements whatever the KV dtype:
  `H_I + 4·⌈H_I/128⌉` bytes (132 B for H_I = 128). A decode step reads
  every indexer key but only the `k_sel` latent rows the indexer picked.
* Linear attention (Gated DeltaNet) caches no per-token KV: each linear
  layer keeps a fixed state per sequence, `N_lv·H_lk·H_lv` elements of
  recurrent state plus the short convolution's last `K_conv − 1` inputs
  (`(2·N_lk·H_lk + N_lv·H_lv)·(K_conv − 1)`), held here in the KV dtype
  (engines keep it in the model dtype or fp32; fp32 doubles it). Only the
  full-attention layers (every n-th) grow with the context.
*/

use super::Arch;
use crate::trace::{Step, Tracer};
use crate::units::{Bytes, DType};

/// Elements cached per token in one (full-attention) layer.
pub fn elements_per_token_layer(a: &Arch) -> u64 {
    match &a.mla {
        Some(m) => m.kv_lora_rank + m.qk_rope_head_dim,
        None => 2 * a.n_kv_heads * a.d_head,
    }
}

/// Bytes of the sparse-attention indexer's key cache per token and layer:
/// fp8 keys with one fp32 scale per 128-element block, `H_I + 4·⌈H_I/128⌉`
/// (0 without sparse attention).
pub fn indexer_bytes_per_token_layer(a: &Arch) -> f64 {
    match &a.sparse_attention {
        Some(i) => {
            let h = i.index_head_dim as f64;
            h + 4.0 * (h / 128.0).ceil()
        }
        None => 0.0,
    }
}

/// Elements of one linear-attention layer's state per sequence:
/// `N_lv·H_lk·H_lv + (2·N_lk·H_lk + N_lv·H_lv)·(K_conv − 1)` (0 unless hybrid).
pub fn state_elements_per_layer(a: &Arch) -> f64 {
    match &a.linear_attention {
        Some(la) => {
            la.n_value_heads as f64 * la.key_head_dim as f64 * la.value_head_dim as f64
                + la.conv_dim() as f64 * la.conv_kernel.saturating_sub(1) as f64
        }
        None => 0.0,
    }
}

/// KV bytes per token of context, summed over the full-attention layers (as
/// if every one attended globally): `2·K·H·L·bytes`, plus the sparse
/// indexer's keys. A hybrid's fixed linear-attention state is per sequence
/// ([`bytes_per_sequence`]), not per token.
pub fn bytes_per_token<T: Tracer>(a: &Arch, dtype: DType, tr: &mut T) -> Bytes {
    let layers = a.full_attention_layers();
    let e = elements_per_token_layer(a) * layers;
    let index = layers as f64 * indexer_bytes_per_token_layer(a);
    let b = dtype.bytes_for(e) + Bytes::new(index);
    tr.record(|| {
        let l = if a.linear_attention.is_some() {
            "L_full"
        } else {
            "L"
        };
        let index_term = if a.sparse_attention.is_some() {
            format!(" + (H_I + 4·⌈H_I/128⌉)·{l} (indexer keys, fp8)")
        } else {
            String::new()
        };
        let mut s = match &a.mla {
            Some(m) => Step::new(
                "kv.bytes_per_token",
                "KV cache per token (MLA latent)",
                &format!("(kv_r + H_rope)·{l}·bytes{index_term}"),
            )
            .bind("kv_r", m.kv_lora_rank as f64, "")
            .bind("H_rope", m.qk_rope_head_dim as f64, ""),
            None => Step::new(
                "kv.bytes_per_token",
                "KV cache per token",
                &format!("2·K·H·{l}·bytes{index_term}"),
            )
            .bind("K", a.n_kv_heads as f64, "")
            .bind("H", a.d_head as f64, ""),
        };
        s = s
            .bind(l, layers as f64, "")
            .bind("bytes", dtype.bytes_per_element(), "B");
        if let Some(i) = &a.sparse_attention {
            s = s.bind("H_I", i.index_head_dim as f64, "");
        }
        s.result(b.get(), "B")
            .source("How To Scale Your Model, ch4/ch7: KV cache = 2·S·L·K·H·bytes")
    });
    b
}

/// Token-rows cached over the full-attention layers for `seq_len` tokens:
/// `L_full·S`, with `min(S, W)` in sliding-window layers.
fn cached_token_rows(a: &Arch, seq_len: u64) -> u128 {
    let layers = a.full_attention_layers();
    match &a.sliding_window {
        None => layers as u128 * seq_len as u128,
        Some(sw) => {
            let global = layers.checked_div(sw.global_every).unwrap_or(0);
            let local = layers - global;
            global as u128 * seq_len as u128 + local as u128 * seq_len.min(sw.window) as u128
        }
    }
}

/// KV bytes of one sequence of `seq_len` (S) tokens, honouring sliding
/// windows, with the sparse indexer's keys and a hybrid's fixed
/// linear-attention state.
pub fn bytes_per_sequence<T: Tracer>(a: &Arch, seq_len: u64, dtype: DType, tr: &mut T) -> Bytes {
    let per_layer = elements_per_token_layer(a);
    let rows = cached_token_rows(a, seq_len);
    let elements = rows.saturating_mul(per_layer as u128);
    let index = rows as f64 * indexer_bytes_per_token_layer(a);
    let state = a.linear_attention_layers() as f64 * state_elements_per_layer(a);
    let b = Bytes::new((elements as f64 + state) * dtype.bytes_per_element() + index);
    tr.record(|| sequence_step(a, seq_len, dtype, b));
    b
}

/// The `kv.bytes_per_sequence` step, its formula naming the parts present.
fn sequence_step(a: &Arch, seq_len: u64, dtype: DType, b: Bytes) -> Step {
    let mut f = if a.sliding_window.is_some() {
        "Σ_layers min(S, W_l)·(per-layer elements)·bytes".to_string()
    } else if a.linear_attention.is_some() || a.sparse_attention.is_some() {
        "S·L_full·(per-layer elements)·bytes".to_string()
    } else {
        "S·(KV bytes per token)".to_string()
    };
    if a.sparse_attention.is_some() {
        f.push_str(" + S·L_full·(H_I + 4·⌈H_I/128⌉) (indexer keys, fp8)");
    }
    if a.linear_attention.is_some() {
        f.push_str(" + L_lin·(N_lv·H_lk·H_lv + (2·N_lk·H_lk + N_lv·H_lv)·(K_conv − 1))·bytes (linear-attention state)");
    }
    let mut s = Step::new("kv.bytes_per_sequence", "KV cache per sequence", &f)
        .bind("S", seq_len as f64, "tokens")
        .bind("elements_per_layer", elements_per_token_layer(a) as f64, "")
        .bind("bytes", dtype.bytes_per_element(), "B");
    if a.linear_attention.is_some() || a.sparse_attention.is_some() {
        s = s.bind("L_full", a.full_attention_layers() as f64, "");
    }
    if let Some(i) = &a.sparse_attention {
        s = s.bind("H_I", i.index_head_dim as f64, "");
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
    s.result(b.get(), "B")
}

/// KV bytes one decode step reads for a sequence at context `seq_len`:
/// everything [`bytes_per_sequence`] holds, except that under sparse
/// attention the main attention reads only the `k_sel` latent rows the
/// indexer picked (`min(S, k_sel)` per layer) while the indexer reads all
/// its keys. Equal to [`bytes_per_sequence`] for every other model.
pub fn bytes_read_per_decode_step<T: Tracer>(
    a: &Arch,
    seq_len: u64,
    dtype: DType,
    tr: &mut T,
) -> Bytes {
    let Some(i) = &a.sparse_attention else {
        return bytes_per_sequence(a, seq_len, dtype, tr);
    };
    let held = bytes_per_sequence(a, seq_len, dtype, &mut crate::trace::NoTrace);
    let attended = cached_token_rows(a, seq_len.min(i.index_topk));
    let skipped = cached_token_rows(a, seq_len).saturating_sub(attended) as f64
        * elements_per_token_layer(a) as f64
        * dtype.bytes_per_element();
    let b = held - Bytes::new(skipped);
    tr.record(|| {
        Step::new(
            "kv.bytes_read_per_decode_step",
            "KV read per sequence per decode step (sparse attention)",
            "min(S, k_sel)·L_full·(per-layer elements)·bytes + S·L_full·(H_I + 4·⌈H_I/128⌉)",
        )
        .bind("S", seq_len as f64, "tokens")
        .bind("k_sel", i.index_topk as f64, "tokens")
        .bind("L_full", a.full_attention_layers() as f64, "")
        .bind("elements_per_layer", elements_per_token_layer(a) as f64, "")
        .bind("bytes", dtype.bytes_per_element(), "B")
        .bind("H_I", i.index_head_dim as f64, "")
        .result(b.get(), "B")
    });
    b
}
