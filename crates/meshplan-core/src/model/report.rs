/*!
The model report behind `meshplan model show`: every count for one model at
one sequence length and KV dtype, optionally with its derivation.
*/

use serde::Serialize;

use crate::model::{flops, kv, params, Arch, ModelSpec};
use crate::trace::{Step, Tracer};
use crate::units::{fmt_int, fmt_si, sig4};
use crate::units::{Bytes, DType, Flops};
use crate::view::{field, Doc, Render, Table};

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
    /// Display name.
    pub display_name: String,
    /// Where the hyperparameters come from.
    pub source: String,
    /// The hyperparameters (L, D, F, N, K, H, V, …).
    pub arch: Arch,
    /// Total parameters (the given count under `arch.params_given`).
    pub params_total: u64,
    /// The architecture's exact total, beside a given count (= params_total
    /// when none is given).
    pub params_total_exact: u64,
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
    /// T at which (non-causal) self-attention FLOPs equal the Q, K, V, O
    /// projections': 12·B·T²·N·H = 12·B·T·D·(N+K)·H → T = D·(N+K)/N
    /// (2D for MHA, book ch4 Q5). Causal masking that skips blocks doubles it.
    pub attention_equals_projections_seq_len: f64,
    /// T at which (non-causal) attention FLOPs equal all of a layer's
    /// matmuls (projections and the active MLP): (2·D·(N+K)·H + m·D·F)/(2·N·H)
    /// (8D for MHA with a gated F = 4D, book ch4).
    pub attention_equals_matmuls_seq_len: f64,
    /// D at which attention FLOPs equal the layer's matmuls at the report's
    /// T, the model's shape ratios (N·H/D, K·H/D, F/D) held: T·D/T*
    /// (the book's "T < 8·D": D = T/8 for MHA with F = 4D). Wider models are
    /// matmul-dominated at this T.
    pub attention_equals_matmuls_d_model: f64,
    /// Attention parameters / all parameters (exact counts).
    pub attention_params_fraction: f64,
    /// P/P_active: the exact factor by which an MoE's critical batch
    /// exceeds a dense model's (1 for dense; book ch7: ≈ E/k).
    pub moe_factor_exact: f64,
    /// E/k: the book's approximation of that factor (1 for dense; routed
    /// experts only, ignoring dense and attention parameters).
    pub moe_factor_book: f64,
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
        display_name: m.display_name.clone(),
        source: m.source.clone(),
        arch: a.clone(),
        params_total: p.total,
        params_total_exact: p.total_exact,
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
        attention_equals_projections_seq_len: attention_crossover(a, false, tr),
        attention_equals_matmuls_seq_len: attention_crossover(a, true, tr),
        attention_equals_matmuls_d_model: attention_crossover_width(a, q.seq_len, tr),
        attention_params_fraction: attention_share(&p, tr),
        moe_factor_exact: p.total as f64 / p.active.max(1) as f64,
        moe_factor_book: moe_factor_book(a, &p, tr),
    }
}

/// D at which non-causal attention FLOPs equal the layer's matmuls at
/// sequence length `t`, holding the model's shape ratios: the crossover
/// T* is linear in D (T* = c·D), so D* = t/c = t·D/T*.
fn attention_crossover_width<T: Tracer>(a: &Arch, t: u64, tr: &mut T) -> f64 {
    let t_star = attention_crossover(a, true, &mut crate::trace::NoTrace);
    let d = a.d_model as f64;
    let w = t as f64 * d / t_star.max(f64::MIN_POSITIVE);
    tr.record(|| {
        Step::new(
            "model.attention_equals_matmuls_d_model",
            "Width at which attention FLOPs equal the layer's matmuls at T",
            "D* = T·D / T*  (T* = (2·D·(N+K)·H + m·D·F)/(2·N·H) ∝ D)",
        )
        .bind("T", t as f64, "tokens")
        .bind("D", d, "")
        .bind("T*", t_star, "tokens")
        .result(w, "")
        .source("How To Scale Your Model ch4 (\"T < 8·D\")")
    });
    w
}

/// The attention parameters' share of all parameters (exact counts).
fn attention_share<T: Tracer>(p: &params::ParamCounts, tr: &mut T) -> f64 {
    let f = p.attention as f64 / p.total_exact.max(1) as f64;
    tr.record(|| {
        Step::new(
            "model.attention_params_fraction",
            "Attention's share of the parameters",
            "P_attn / P",
        )
        .bind("P_attn", p.attention as f64, "params")
        .bind("P", p.total_exact as f64, "params")
        .result(f, "")
        .source("How To Scale Your Model ch4, ch6 (parameter breakdown)")
    });
    f
}

/// The book's MoE factor E/k (1 for a dense model), with the exact
/// P/P_active beside it in the derivation.
fn moe_factor_book<T: Tracer>(a: &Arch, p: &params::ParamCounts, tr: &mut T) -> f64 {
    let Some(m) = &a.moe else {
        return 1.0;
    };
    let f = m.n_experts as f64 / m.top_k.max(1) as f64;
    tr.record(|| {
        Step::new(
            "model.moe_factor_book",
            "The book's MoE critical-batch factor (exact: P/P_active)",
            "E / k  (exact: P / P_active)",
        )
        .bind("E", m.n_experts as f64, "")
        .bind("k", m.top_k as f64, "")
        .bind("P/P_active", p.total as f64 / p.active.max(1) as f64, "")
        .result(f, "")
        .source("How To Scale Your Model ch7 (MoE: batch ≥ E/k × the dense bound)")
    });
    f
}

/// T at which non-causal attention FLOPs equal the projections' (or, with
/// `mlp`, all the layer's matmuls').
fn attention_crossover<T: Tracer>(a: &Arch, mlp: bool, tr: &mut T) -> f64 {
    let (d, n, k, h) = (
        a.d_model as f64,
        a.n_heads as f64,
        a.n_kv_heads as f64,
        a.d_head as f64,
    );
    let proj = 2.0 * d * (n + k) * h;
    let m = a.mlp.matrices() as f64 * d * a.ffn_width_active();
    let t = if mlp { proj + m } else { proj } / (2.0 * n * h).max(1.0);
    tr.record(|| {
        let (id, label, formula) = if mlp {
            (
                "model.attention_equals_matmuls",
                "Sequence length where attention FLOPs equal the layer's matmuls",
                "(2·D·(N+K)·H + m·D·F)/(2·N·H)",
            )
        } else {
            (
                "model.attention_equals_projections",
                "Sequence length where attention FLOPs equal the QKVO projections",
                "D·(N+K)/N",
            )
        };
        Step::new(id, label, formula)
            .bind("D", d, "")
            .bind("N", n, "")
            .bind("K", k, "")
            .bind("H", h, "")
            .result(t, "tokens")
            .source("How To Scale Your Model ch4 Q5 (non-causal)")
    });
    t
}

/// First line of `s`, whole: the text renderer wraps a long column on a
/// terminal and never cuts it (piped output keeps every character).
fn short(s: &str) -> String {
    s.lines().next().unwrap_or("").to_string()
}

fn params_cell(v: u64) -> String {
    format!("{} params ({})", fmt_int(v), fmt_si(v as f64, "params"))
}

/// "262,144 B" for an exact byte count.
fn bytes_exact(v: f64) -> String {
    if v.fract() == 0.0 && (0.0..1.8e19).contains(&v) {
        format!("{} B", fmt_int(v as u64))
    } else {
        fmt_si(v, "B")
    }
}

/// "L=40 D=5120 F=13824 N=40 K=40 H=128 V=32000 (E=8 k=2)".
pub fn hyperparameters(a: &Arch) -> String {
    let mut hp = format!(
        "L={} D={} F={} N={} K={} H={} V={}",
        a.n_layers, a.d_model, a.d_ff, a.n_heads, a.n_kv_heads, a.d_head, a.vocab
    );
    if let Some(moe) = &a.moe {
        hp.push_str(&format!(" E={} k={}", moe.n_experts, moe.top_k));
    }
    if let Some(la) = &a.linear_attention {
        hp.push_str(&format!(
            " L_lin={} (Gated DeltaNet N_lk={} N_lv={} H_lk={} H_lv={}; every {}th layer full)",
            a.linear_attention_layers(),
            la.n_key_heads,
            la.n_value_heads,
            la.key_head_dim,
            la.value_head_dim,
            la.full_attention_interval
        ));
    }
    if let Some(i) = &a.sparse_attention {
        hp.push_str(&format!(
            " k_sel={} (sparse attention; indexer N_I={} H_I={})",
            i.index_topk, i.index_n_heads, i.index_head_dim
        ));
    }
    hp
}

impl ModelReport {
    fn params_fields(&self) -> Vec<(String, String)> {
        let r = self;
        let mut rows = vec![field("params total", params_cell(r.params_total))];
        if r.params_total != r.params_total_exact {
            rows.push(field(
                "params total, exact",
                format!(
                    "{} (the total above is given: params_given)",
                    params_cell(r.params_total_exact)
                ),
            ));
        }
        rows.extend([
            field("params active (per token)", params_cell(r.params_active)),
            field("params embedding", params_cell(r.params_embedding)),
            field("params non-embedding", params_cell(r.params_non_embedding)),
            field("params attention", params_cell(r.params_attention)),
        ]);
        if r.params_per_dense_layer > 0 {
            rows.push(field("params dense MLP", params_cell(r.params_mlp)));
        }
        if r.params_experts > 0 {
            rows.push(field(
                "params routed experts",
                params_cell(r.params_experts),
            ));
        }
        rows.push(field("params norms", params_cell(r.params_norms)));
        if r.params_per_dense_layer > 0 {
            rows.push(field(
                "params per dense layer",
                params_cell(r.params_per_dense_layer),
            ));
        }
        if r.params_per_moe_layer > 0 {
            rows.push(field(
                "params per MoE layer",
                params_cell(r.params_per_moe_layer),
            ));
        }
        if let Some(p) = r.published_params {
            let d = r.params_total as i128 - p as i128;
            rows.push(field(
                "published total",
                format!("{} (difference {d} params)", params_cell(p)),
            ));
        }
        rows
    }

    fn flops_fields(&self) -> Vec<(String, String)> {
        let per_token = |label: &str, v: Flops| field(label, format!("{v}/token"));
        let r = self;
        vec![
            field(
                "sequence length T",
                format!(
                    "{} tokens ({})",
                    fmt_int(r.seq_len),
                    if r.causal { "causal" } else { "non-causal" }
                ),
            ),
            per_token("forward FLOPs / token", r.flops_per_token_forward),
            per_token("  of which matmuls", r.flops_per_token_forward_matmul),
            per_token("  of which attention", r.flops_per_token_forward_attention),
            per_token("training FLOPs / token", r.flops_per_token_training),
            field(
                &format!("KV cache / token ({})", r.kv_dtype),
                format!(
                    "{}/token ({}, {} KiB)",
                    bytes_exact(r.kv_cache_bytes_per_token.get()),
                    r.kv_cache_bytes_per_token,
                    sig4(r.kv_cache_bytes_per_token.get() / 1024.0)
                ),
            ),
            field(
                "KV cache / sequence of T",
                r.kv_cache_bytes_per_sequence.both(),
            ),
            field(
                "weights in bf16",
                DType::Bf16.bytes_for(r.params_total).both(),
            ),
            field(
                "attention = QKVO at T",
                format!(
                    "{} tokens (= all matmuls at {}; non-causal)",
                    sig4(r.attention_equals_projections_seq_len),
                    sig4(r.attention_equals_matmuls_seq_len)
                ),
            ),
        ]
    }
}

impl Render for ModelReport {
    fn doc(&self) -> Doc {
        let a = &self.arch;
        let title = if self.display_name.is_empty() || self.display_name == self.name {
            self.name.clone()
        } else {
            format!("{} ({})", self.name, self.display_name)
        };
        let mut d = Doc::new();
        d.title(title);
        d.fields(vec![
            field("source", short(&self.source)),
            field("hyperparameters", hyperparameters(a)),
            field(
                "embeddings / MLP",
                format!(
                    "{}, {:?} MLP",
                    if a.tied_embeddings { "tied" } else { "untied" },
                    a.mlp
                )
                .to_lowercase(),
            ),
        ]);
        d.fields(self.params_fields());
        d.fields(self.flops_fields());
        d
    }
}

/// One catalog entry in `model list`.
#[derive(Clone, Debug, Serialize)]
pub struct ModelListEntry {
    /// Catalog name.
    pub name: String,
    /// Display name.
    pub display_name: String,
    /// Accepted aliases.
    pub aliases: Vec<String>,
    /// Total parameters.
    pub params_total: u64,
    /// Active parameters per token.
    pub params_active: u64,
    /// The hyperparameters.
    pub arch: Arch,
    /// Where they come from.
    pub source: String,
}

/// The model catalog (`model list`).
#[derive(Clone, Debug, Serialize)]
pub struct ModelList {
    /// The entries, by name.
    pub models: Vec<ModelListEntry>,
}

/// The list of `models`.
pub fn model_list<'a>(models: impl IntoIterator<Item = &'a ModelSpec>) -> ModelList {
    ModelList {
        models: models
            .into_iter()
            .map(|m| {
                let p = params::count(&m.arch, &mut crate::trace::NoTrace);
                ModelListEntry {
                    name: m.name.clone(),
                    display_name: m.display_name.clone(),
                    aliases: m.aliases.clone(),
                    params_total: p.total,
                    params_active: p.active,
                    arch: m.arch.clone(),
                    source: m.source.clone(),
                }
            })
            .collect(),
    }
}

impl Render for ModelList {
    fn doc(&self) -> Doc {
        // every column between the names and the source is a number
        let numeric = [
            "params total",
            "params active",
            "L",
            "D",
            "F",
            "N",
            "K",
            "H",
            "V",
        ];
        let header = [&["name", "display name"][..], &numeric, &["source"]].concat();
        let mut t = Table::new(&header, &numeric);
        for m in &self.models {
            let a = &m.arch;
            t.row(vec![
                m.name.clone(),
                m.display_name.clone(),
                fmt_si(m.params_total as f64, "params"),
                fmt_si(m.params_active as f64, "params"),
                a.n_layers.to_string(),
                a.d_model.to_string(),
                a.d_ff.to_string(),
                a.n_heads.to_string(),
                a.n_kv_heads.to_string(),
                a.d_head.to_string(),
                a.vocab.to_string(),
                short(&m.source),
            ]);
        }
        let mut d = Doc::new();
        d.table(t).line(format!(
            "{} models. Params with SI prefixes (G = 1e9). `meshplan model show NAME` for exact counts.",
            self.models.len()
        ));
        d
    }
}
