/*!
The model report behind `meshplan model show`: every count for one model at
one sequence length and KV dtype, optionally with its derivation.
*/

use serde::Serialize;

use crate::model::{flops, kv, params, ModelSpec};
use crate::trace::Tracer;
use crate::units::{Bytes, DType, Flops};

/// Options of a model report.
#[derive(Clone, Copy, Debug)]
pub struct ModelQuery {
    /// T: sequence length for attention FLOPs and KV per sequence.
    pub seq_len: u64,
    /// KV-cache dtype.
    pub kv_dtype: DType,
    /// Causal attention (halves attention FLOPs).
    pub causal: bool,
}

impl Default for ModelQuery {
    fn default() -> Self {
        ModelQuery {
            seq_len: 4096,
            kv_dtype: DType::Bf16,
            causal: true,
        }
    }
}

/// Everything `model show` reports (SI base units; see docs/quantities.md).
#[derive(Clone, Debug, Serialize)]
pub struct ModelReport {
    /// Catalog name.
    pub name: String,
    /// Where the hyperparameters come from.
    pub source: String,
    /// Total parameters.
    pub params_total: u64,
    /// Parameters one token uses.
    pub params_active: u64,
    /// Vocabulary parameters (input + output embeddings, positions).
    pub params_embedding: u64,
    /// Total minus embedding.
    pub params_non_embedding: u64,
    /// Attention parameters (all layers).
    pub params_attention: u64,
    /// Dense MLP parameters (all dense layers).
    pub params_mlp: u64,
    /// Routed expert parameters.
    pub params_experts: u64,
    /// Norm parameters.
    pub params_norms: u64,
    /// One dense layer.
    pub params_per_dense_layer: u64,
    /// One MoE layer.
    pub params_per_moe_layer: u64,
    /// Sequence length used (T).
    pub seq_len: u64,
    /// Causal attention assumed.
    pub causal: bool,
    /// Forward FLOPs per token (matmuls + attention at T).
    pub flops_per_token_forward: Flops,
    /// Forward matmul FLOPs per token (2 × matmul params).
    pub flops_per_token_forward_matmul: Flops,
    /// Forward attention FLOPs per token at T.
    pub flops_per_token_forward_attention: Flops,
    /// Training FLOPs per token (3 × forward).
    pub flops_per_token_training: Flops,
    /// KV dtype.
    pub kv_dtype: DType,
    /// KV bytes per token of context (2·K·H·L·bytes).
    pub kv_cache_bytes_per_token: Bytes,
    /// KV bytes of one sequence of T tokens (sliding windows applied).
    pub kv_cache_bytes_per_sequence: Bytes,
    /// Published total, if the catalog has one.
    pub published_params: Option<u64>,
}

/// Compute the report.
pub fn model_report<T: Tracer>(m: &ModelSpec, q: &ModelQuery, tr: &mut T) -> ModelReport {
    let a = &m.arch;
    let p = params::count(a, tr);
    let f = flops::per_token(a, &p, q.seq_len, q.causal, tr);
    let kvt = kv::bytes_per_token(a, q.kv_dtype, tr);
    let kvs = kv::bytes_per_sequence(a, q.seq_len, q.kv_dtype, tr);
    ModelReport {
        name: m.name.clone(),
        source: m.source.clone(),
        params_total: p.total,
        params_active: p.active,
        params_embedding: p.embedding,
        params_non_embedding: p.non_embedding(),
        params_attention: p.attention,
        params_mlp: p.mlp_dense,
        params_experts: p.experts_routed,
        params_norms: p.norms,
        params_per_dense_layer: p.per_dense_layer,
        params_per_moe_layer: p.per_moe_layer,
        seq_len: q.seq_len,
        causal: q.causal,
        flops_per_token_forward: f.forward,
        flops_per_token_forward_matmul: f.forward_matmul,
        flops_per_token_forward_attention: f.forward_attention,
        flops_per_token_training: f.training,
        kv_dtype: q.kv_dtype,
        kv_cache_bytes_per_token: kvt,
        kv_cache_bytes_per_sequence: kvs,
        published_params: m.published.as_ref().map(|p| p.params),
    }
}
