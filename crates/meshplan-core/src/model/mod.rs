/*!
Transformer model descriptions and their exact counts.

A [`ModelSpec`] is a catalog entry (name, source, published count) around an
[`Arch`], the hyperparameters in the book's notation:

| field | symbol | meaning |
|---|---|---|
| `n_layers` | L | transformer blocks |
| `d_model` | D | residual stream width |
| `d_ff` | F | feed-forward width (dense layers) |
| `n_heads` | N | query heads |
| `n_kv_heads` | K | key/value heads (K = N: MHA, K = 1: MQA, else GQA) |
| `d_head` | H | head dimension |
| `vocab` | V | vocabulary size |
| `moe.n_experts` | E | routed experts |
| `moe.top_k` | k | experts per token |
| `linear_attention.full_attention_interval` | — | every n-th layer is full attention, the rest linear (Gated DeltaNet) |
| `linear_attention.n_key_heads` / `n_value_heads` | N_lk / N_lv | linear-attention key / value heads |
| `linear_attention.key_head_dim` / `value_head_dim` | H_lk / H_lv | their widths |
| `sparse_attention.index_topk` | k_sel | keys each query attends to (DeepSeek sparse attention) |
| `sparse_attention.index_n_heads` / `index_head_dim` | N_I / H_I | the lightning indexer's heads and width |

Counting lives in [`params`], FLOPs in [`flops`], KV-cache size in [`kv`].
*/

pub mod bare;
pub mod flops;
pub mod kv;
pub mod params;
pub mod report;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// MLP block shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum MlpKind {
    /// Gated (SwiGLU/GeGLU): three matrices D×F (gate, up) and F×D (down).
    #[default]
    Gated,
    /// Plain: two matrices, D×F and F×D.
    Plain,
}

impl MlpKind {
    /// Number of D×F matrices.
    pub const fn matrices(self) -> u64 {
        match self {
            MlpKind::Gated => 3,
            MlpKind::Plain => 2,
        }
    }
}

/// Normalisation layer kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum NormKind {
    /// RMSNorm: D weights.
    #[default]
    Rms,
    /// LayerNorm: D weights + D biases.
    Layer,
}

impl NormKind {
    /// Parameters per norm of width `d`.
    pub const fn params(self, d: u64) -> u64 {
        match self {
            NormKind::Rms => d,
            NormKind::Layer => 2 * d,
        }
    }
}

/// Mixture-of-experts feed-forward layers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Moe {
    /// E: routed experts per MoE layer.
    pub n_experts: u64,
    /// k: routed experts each token uses.
    pub top_k: u64,
    /// Width of each routed expert (defaults to `d_ff`).
    #[serde(default)]
    pub d_ff_expert: u64,
    /// Shared experts every token uses.
    #[serde(default)]
    pub n_shared_experts: u64,
    /// Width of each shared expert (0 = same as `d_ff_expert`).
    #[serde(default)]
    pub d_ff_shared: u64,
    /// Leading layers that are dense (width `d_ff`) rather than MoE.
    #[serde(default)]
    pub first_dense_layers: u64,
    /// A learned per-expert routing bias (DeepSeek-V3 `e_score_correction_bias`).
    #[serde(default)]
    pub router_bias: bool,
}

/// DeepSeek multi-head latent attention.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mla {
    /// Query compression rank (0 = queries are not compressed).
    #[serde(default)]
    pub q_lora_rank: u64,
    /// KV compression rank: the cached latent width.
    pub kv_lora_rank: u64,
    /// Per-head query/key width without rotary part.
    pub qk_nope_head_dim: u64,
    /// Rotary part of the key, shared by all heads and cached.
    pub qk_rope_head_dim: u64,
    /// Per-head value width.
    pub v_head_dim: u64,
}

/// Sliding-window attention (affects the KV cache and attention FLOPs only).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlidingWindow {
    /// Window length in tokens.
    pub window: u64,
    /// Every n-th layer (1-based: layers n, 2n, …) attends globally; 0 = none.
    #[serde(default)]
    pub global_every: u64,
}

/// Hybrid linear attention (Qwen3-Next): Gated DeltaNet layers that keep a
/// fixed recurrent state per sequence instead of a per-token KV cache, with a
/// (gated) full-attention layer every `full_attention_interval` layers.
/// Per linear layer: `in_proj_qkvz` D×(2·N_lk·H_lk + 2·N_lv·H_lv), `in_proj_ba`
/// D×2·N_lv, a depthwise causal conv of width `conv_kernel` over the
/// 2·N_lk·H_lk + N_lv·H_lv q/k/v channels, `dt_bias` and `A_log` (N_lv each),
/// a gated RMSNorm (H_lv) and `out_proj` N_lv·H_lv×D (transformers
/// `Qwen3NextGatedDeltaNet`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinearAttention {
    /// Layers n, 2n, … (1-based) use full attention; the others linear.
    pub full_attention_interval: u64,
    /// N_lk: key (and query) heads of a linear layer.
    pub n_key_heads: u64,
    /// N_lv: value heads (one recurrent state each).
    pub n_value_heads: u64,
    /// H_lk: key head width.
    pub key_head_dim: u64,
    /// H_lv: value head width.
    pub value_head_dim: u64,
    /// Width of the short causal convolution (its last `conv_kernel − 1`
    /// inputs are part of the state).
    pub conv_kernel: u64,
}

impl LinearAttention {
    /// N_lk·H_lk: the key (and query) width.
    pub fn key_dim(&self) -> u64 {
        self.n_key_heads.saturating_mul(self.key_head_dim)
    }
    /// N_lv·H_lv: the value width.
    pub fn value_dim(&self) -> u64 {
        self.n_value_heads.saturating_mul(self.value_head_dim)
    }
    /// 2·N_lk·H_lk + N_lv·H_lv: channels through the short convolution.
    pub fn conv_dim(&self) -> u64 {
        self.key_dim()
            .saturating_mul(2)
            .saturating_add(self.value_dim())
    }
}

/// DeepSeek sparse attention (DeepSeek-V3.2): a lightning indexer scores
/// every cached key with `index_n_heads` small heads and each query attends
/// to the `index_topk` best keys only. The indexer adds per layer `wq_b`
/// (q_r×N_I·H_I, from the compressed query), `wk` D×H_I, a LayerNorm on its
/// keys (2·H_I) and `weights_proj` D×N_I, and caches one H_I-wide key per
/// token (DeepSeek's `inference/model.py` `Indexer`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SparseAttention {
    /// k_sel: keys each query attends to.
    pub index_topk: u64,
    /// N_I: indexer heads.
    pub index_n_heads: u64,
    /// H_I: indexer head width (also the width of its cached key).
    pub index_head_dim: u64,
}

fn default_two() -> u64 {
    2
}
fn default_true() -> bool {
    true
}

/// Hyperparameters of a decoder-only transformer (symbols as in the book).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Arch {
    /// L: transformer blocks.
    pub n_layers: u64,
    /// D: model width.
    pub d_model: u64,
    /// F: feed-forward width of dense layers.
    pub d_ff: u64,
    /// N: query heads.
    pub n_heads: u64,
    /// K: key/value heads.
    pub n_kv_heads: u64,
    /// H: head dimension.
    pub d_head: u64,
    /// V: vocabulary.
    pub vocab: u64,
    /// Input embedding and output projection share one V×D matrix.
    #[serde(default)]
    pub tied_embeddings: bool,
    /// Gated (3-matrix) or plain (2-matrix) MLP.
    #[serde(default)]
    pub mlp: MlpKind,
    /// RMSNorm or LayerNorm.
    #[serde(default)]
    pub norm: NormKind,
    /// Norms per block (2 for most models, 4 for Gemma-2/3, 0 to ignore norms as the book does).
    #[serde(default = "default_two")]
    pub norms_per_layer: u64,
    /// A norm after the last block.
    #[serde(default = "default_true")]
    pub final_norm: bool,
    /// Per-head norm on queries and keys (Qwen3, Gemma-3): 2·H per layer.
    #[serde(default)]
    pub qk_norm: bool,
    /// Bias on the Q, K, V projections.
    #[serde(default)]
    pub qkv_bias: bool,
    /// Bias on the attention output projection.
    #[serde(default)]
    pub attn_out_bias: bool,
    /// Biases on the MLP matrices.
    #[serde(default)]
    pub mlp_bias: bool,
    /// Learned absolute position embeddings (count of positions; 0 = none/rotary).
    #[serde(default)]
    pub learned_pos_emb: u64,
    /// Bias on the output projection.
    #[serde(default)]
    pub lm_head_bias: bool,
    /// Mixture of experts, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moe: Option<Moe>,
    /// Multi-head latent attention, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mla: Option<Mla>,
    /// Sliding-window attention, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sliding_window: Option<SlidingWindow>,
    /// A sigmoid output gate on full attention (Qwen3-Next): the query
    /// projection is twice as wide (D·N·H more weights per layer).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub attn_output_gate: bool,
    /// Hybrid linear attention (Gated DeltaNet), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub linear_attention: Option<LinearAttention>,
    /// DeepSeek sparse attention (lightning indexer + top-k), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sparse_attention: Option<SparseAttention>,
    /// A bare parameter count to use as given (the book's "70e9
    /// parameters" for LLaMA 3-70B, whose architecture has 70.55e9): P and
    /// P_active (scaled by the same ratio, as is the matmul count behind the
    /// FLOPs) become it; the breakdown by part stays exact and
    /// `params_total_exact` is reported beside it. A convention, never
    /// applied unless given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params_given: Option<u64>,
}

/// A published parameter count to pin the catalog entry against.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Published {
    /// Total parameters as published.
    pub params: u64,
    /// Whether meshplan must match `params` exactly.
    #[serde(default)]
    pub exact: bool,
    /// Relative tolerance when not exact.
    #[serde(default)]
    pub rel_tol: f64,
    /// Published activated parameters (MoE).
    #[serde(default)]
    pub active_params: u64,
    /// Relative tolerance for `active_params` (often rounded even when the
    /// total is exact); defaults to `rel_tol`.
    #[serde(default)]
    pub active_rel_tol: Option<f64>,
    /// Where the count is published.
    pub source: String,
}

/// A named model: catalog metadata plus [`Arch`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSpec {
    /// Catalog key (lowercase, hyphens).
    pub name: String,
    /// Display name.
    #[serde(default)]
    pub display_name: String,
    /// Other accepted spellings.
    #[serde(default)]
    pub aliases: Vec<String>,
    /// Where the hyperparameters come from.
    pub source: String,
    /// Longest context the model supports (tokens).
    #[serde(default)]
    pub max_seq_len: u64,
    /// Free-text notes.
    #[serde(default)]
    pub notes: String,
    /// Published count, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub published: Option<Published>,
    /// Hyperparameters.
    pub arch: Arch,
}

impl ModelSpec {
    /// A spec for hyperparameters with no catalog entry.
    pub fn custom(name: &str, arch: Arch) -> Self {
        ModelSpec {
            name: name.into(),
            display_name: name.into(),
            aliases: vec![],
            source: "user input".into(),
            max_seq_len: 0,
            notes: String::new(),
            published: None,
            arch,
        }
    }
}

impl Arch {
    /// A dense decoder with the common defaults — gated MLP, two RMSNorms per
    /// layer plus a final one, no biases, untied embeddings, no MoE/MLA/window
    /// — and the given L, D, F, N, K, H, V. Importers and inline scenarios
    /// start here and set the family's details.
    #[allow(clippy::too_many_arguments)] // the book's seven symbols
    pub fn dense(
        n_layers: u64,
        d_model: u64,
        d_ff: u64,
        n_heads: u64,
        n_kv_heads: u64,
        d_head: u64,
        vocab: u64,
    ) -> Arch {
        Arch {
            n_layers,
            d_model,
            d_ff,
            n_heads,
            n_kv_heads,
            d_head,
            vocab,
            tied_embeddings: false,
            mlp: MlpKind::Gated,
            norm: NormKind::Rms,
            norms_per_layer: 2,
            final_norm: true,
            qk_norm: false,
            qkv_bias: false,
            attn_out_bias: false,
            mlp_bias: false,
            learned_pos_emb: 0,
            lm_head_bias: false,
            moe: None,
            mla: None,
            sliding_window: None,
            attn_output_gate: false,
            linear_attention: None,
            sparse_attention: None,
            params_given: None,
        }
    }

    /// L_lin: layers with linear attention (0 unless hybrid).
    pub fn linear_attention_layers(&self) -> u64 {
        self.n_layers - self.full_attention_layers()
    }

    /// L_full: layers with (softmax) full attention: every layer, or
    /// ⌊L / n⌋ of a hybrid whose every n-th layer is full.
    pub fn full_attention_layers(&self) -> u64 {
        match &self.linear_attention {
            Some(la) => self
                .n_layers
                .checked_div(la.full_attention_interval)
                .unwrap_or(0),
            None => self.n_layers,
        }
    }

    /// G = N/K, query heads per KV head.
    pub fn group_size(&self) -> u64 {
        self.n_heads / self.n_kv_heads
    }

    /// Layers that use MoE feed-forward blocks.
    pub fn moe_layers(&self) -> u64 {
        match &self.moe {
            Some(m) => self.n_layers - m.first_dense_layers.min(self.n_layers),
            None => 0,
        }
    }

    /// Layers with a dense feed-forward block.
    pub fn dense_layers(&self) -> u64 {
        self.n_layers - self.moe_layers()
    }

    /// Width of each routed expert.
    pub fn d_ff_expert(&self) -> u64 {
        match &self.moe {
            Some(m) if m.d_ff_expert > 0 => m.d_ff_expert,
            _ => self.d_ff,
        }
    }

    /// Width of each shared expert.
    pub fn d_ff_shared(&self) -> u64 {
        match &self.moe {
            Some(m) if m.d_ff_shared > 0 => m.d_ff_shared,
            _ => self.d_ff_expert(),
        }
    }

    /// φ: the fraction of the layers that are MoE layers (0 when dense).
    pub fn moe_fraction(&self) -> f64 {
        if self.n_layers == 0 {
            return 0.0;
        }
        self.moe_layers() as f64 / self.n_layers as f64
    }

    /// FFN width averaged over the layers, `moe(k, E, S)` on MoE layers and
    /// F on dense ones (k, E, S = routed per token, routed, shared experts).
    fn ffn_width_avg(&self, moe: impl Fn(u64, u64, u64) -> f64) -> f64 {
        let f = self.d_ff as f64;
        match &self.moe {
            Some(m) => {
                let phi = self.moe_fraction();
                (1.0 - phi) * f + phi * moe(m.top_k, m.n_experts, m.n_shared_experts)
            }
            None => f,
        }
    }

    /// FFN width a token goes through, averaged over the layers: F on dense
    /// layers, `k·F_e + S·F_s` on MoE layers (FLOPs and activations).
    pub fn ffn_width_active(&self) -> f64 {
        let (fe, fs) = (self.d_ff_expert() as f64, self.d_ff_shared() as f64);
        self.ffn_width_avg(|k, _, s| k as f64 * fe + s as f64 * fs)
    }

    /// FFN width held in weights, averaged over the layers: F on dense
    /// layers, `E·F_e + S·F_s` on MoE layers.
    pub fn ffn_width_total(&self) -> f64 {
        let (fe, fs) = (self.d_ff_expert() as f64, self.d_ff_shared() as f64);
        self.ffn_width_avg(|_, e, s| e as f64 * fe + s as f64 * fs)
    }

    /// Check that the hyperparameters describe a real model. Also guarantees
    /// that every count computed from them fits in `u64`.
    pub fn validate(&self) -> Result<()> {
        let inv = |field: &str, reason: String| {
            Err(Error::InvalidModel {
                field: field.into(),
                reason,
            })
        };
        for (field, v) in [
            ("n_layers (L)", self.n_layers),
            ("d_model (D)", self.d_model),
            ("n_heads (N)", self.n_heads),
            ("n_kv_heads (K)", self.n_kv_heads),
            ("d_head (H)", self.d_head),
            ("vocab (V)", self.vocab),
        ] {
            if v == 0 {
                return inv(field, "must be at least 1".into());
            }
        }
        if self.d_ff == 0 && self.dense_layers() > 0 {
            return inv("d_ff (F)", "must be at least 1 for dense layers".into());
        }
        if self.n_kv_heads > self.n_heads {
            return inv(
                "n_kv_heads (K)",
                format!(
                    "K = {} exceeds the number of query heads N = {}",
                    self.n_kv_heads, self.n_heads
                ),
            );
        }
        if self.n_heads % self.n_kv_heads != 0 {
            return inv(
                "n_kv_heads (K)",
                format!(
                    "N = {} query heads are not divisible by K = {} KV heads",
                    self.n_heads, self.n_kv_heads
                ),
            );
        }
        if let Some(m) = &self.moe {
            if m.n_experts == 0 {
                return inv("n_experts (E)", "must be at least 1".into());
            }
            if m.top_k == 0 || m.top_k > m.n_experts {
                return inv(
                    "top_k (k)",
                    format!("k = {} must be between 1 and E = {}", m.top_k, m.n_experts),
                );
            }
            if m.first_dense_layers > self.n_layers {
                return inv(
                    "first_dense_layers",
                    format!(
                        "{} dense layers exceed L = {}",
                        m.first_dense_layers, self.n_layers
                    ),
                );
            }
            if self.d_ff_expert() == 0 {
                return inv("d_ff_expert", "must be at least 1".into());
            }
        }
        if let Some(m) = &self.mla {
            if m.kv_lora_rank == 0
                || m.v_head_dim == 0
                || (m.qk_nope_head_dim == 0 && m.qk_rope_head_dim == 0)
            {
                return inv(
                    "mla",
                    "kv_lora_rank, v_head_dim and the q/k head dims must be positive".into(),
                );
            }
        }
        if let Some(w) = &self.sliding_window {
            if w.window == 0 {
                return inv("sliding_window.window", "must be at least 1".into());
            }
        }
        if let Some(la) = &self.linear_attention {
            for (field, v) in [
                (
                    "linear_attention.full_attention_interval",
                    la.full_attention_interval,
                ),
                ("linear_attention.n_key_heads", la.n_key_heads),
                ("linear_attention.n_value_heads", la.n_value_heads),
                ("linear_attention.key_head_dim", la.key_head_dim),
                ("linear_attention.value_head_dim", la.value_head_dim),
                ("linear_attention.conv_kernel", la.conv_kernel),
            ] {
                if v == 0 {
                    return inv(field, "must be at least 1".into());
                }
            }
        }
        if let Some(sa) = &self.sparse_attention {
            for (field, v) in [
                ("sparse_attention.index_topk", sa.index_topk),
                ("sparse_attention.index_n_heads", sa.index_n_heads),
                ("sparse_attention.index_head_dim", sa.index_head_dim),
            ] {
                if v == 0 {
                    return inv(field, "must be at least 1".into());
                }
            }
        }
        // Every count is a sum of products of these; do it once in u128 and
        // make sure the totals (and FLOPs at long context) stay representable.
        let total = params::count_u128(self);
        if total > (u64::MAX / 64) as u128 {
            return inv(
                "size",
                format!("the parameter count ({total}) overflows; check the hyperparameters"),
            );
        }
        if let Some(g) = self.params_given {
            // a rounding convention ("70e9" for 70.55e9), not another model
            let r = g as f64 / total as f64;
            if !(0.5..=2.0).contains(&r) {
                return inv(
                    "params_given",
                    format!(
                        "{g} is {r:.3}× the architecture's {total} parameters; a given count is a rounding of the exact one (within 0.5×–2×): change the hyperparameters instead"
                    ),
                );
            }
        }
        Ok(())
    }
}
