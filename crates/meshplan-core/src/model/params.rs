/*!
Exact parameter counts.

The book's approximation (ch4) is `L·(3DF + 2D(N+K)H + D) + DV (×2 if untied)`;
meshplan counts every matrix, bias and norm the architecture declares, so that
catalog models reproduce the published (safetensors) totals to the parameter.
The book's own exercise models set `norms_per_layer = 0` to match its counts.

Per layer (GQA):
* attention: `D·N·H` (Q) + `2·D·K·H` (K, V) + `N·H·D` (O) [+ `(N+2K)·H` qkv bias,
  + `D` out bias, + `2H` qk-norm]
* MLA (DeepSeek): `D·q_r + q_r + q_r·N·(H_nope+H_rope)` (or `D·N·(H_nope+H_rope)`
  without query compression) `+ D·(kv_r + H_rope) + kv_r + kv_r·N·(H_nope+H_v) + N·H_v·D`
* dense MLP: `m·D·F` with m = 3 gated / 2 plain [+ biases]
* MoE: `E·m·D·F_e + S·m·D·F_s + E·D` (router) [+ `E` routing bias]; active
  uses k instead of E
* norms: `norms_per_layer · D` (RMSNorm) or `· 2D` (LayerNorm)
* attention output gate (Qwen3-Next): `+ D·N·H` (the query projection is twice
  as wide)
* DeepSeek sparse attention's lightning indexer, per attention layer:
  `q_r·N_I·H_I + D·H_I + 2·H_I + D·N_I` (`wq_b`, `wk`, its LayerNorm,
  `weights_proj`)
* Gated DeltaNet (hybrid linear attention), per linear layer, with
  `D_k = N_lk·H_lk`, `D_v = N_lv·H_lv`:
  `D·(2·D_k + 2·D_v) + D·2·N_lv + (2·D_k + D_v)·K_conv + 2·N_lv + H_lv + D_v·D`;
  full-attention layers (every n-th) count as above

Embeddings: `V·D` in, `V·D` out unless tied, `P·D` learned positions.
*/

use serde::Serialize;

use super::{Arch, MlpKind, NormKind};
use crate::trace::{Step, Tracer};

/// Saturating product in u128 (for overflow checks before validation).
fn p(xs: &[u64]) -> u128 {
    xs.iter().fold(1u128, |a, &x| a.saturating_mul(x as u128))
}

/// Saturating sum in u128: validation evaluates these formulas on arbitrary
/// (unvalidated) `u64` inputs, so neither a sum of products nor a sum of two
/// dimensions may overflow (u64 `a + b` would panic in debug builds).
fn s(xs: &[u128]) -> u128 {
    xs.iter().fold(0u128, |a, &x| a.saturating_add(x))
}

/// `a + b` of two dimensions, as a product factor (saturating at u64::MAX,
/// which makes any product it enters saturate too).
fn add(a: u64, b: u64) -> u64 {
    a.saturating_add(b)
}

/// Parameters of one norm of width `d` (computed here rather than with
/// `NormKind::params`, whose `2·d` overflows `u64` for absurd `d`).
fn norm_params(a: &Arch, d: u64) -> u128 {
    match a.norm {
        NormKind::Rms => d as u128,
        NormKind::Layer => 2 * d as u128,
    }
}

/// Attention parameters of one layer.
fn attention_layer(a: &Arch) -> u128 {
    let (d, n, k, h) = (a.d_model, a.n_heads, a.n_kv_heads, a.d_head);
    let mut t = match &a.mla {
        None => s(&[p(&[d, n, h]), p(&[2, d, k, h]), p(&[n, h, d])]),
        Some(m) => {
            let qk = add(m.qk_nope_head_dim, m.qk_rope_head_dim);
            let q = if m.q_lora_rank > 0 {
                s(&[
                    p(&[d, m.q_lora_rank]),
                    m.q_lora_rank as u128,
                    p(&[m.q_lora_rank, n, qk]),
                ])
            } else {
                p(&[d, n, qk])
            };
            let kv = s(&[
                p(&[d, add(m.kv_lora_rank, m.qk_rope_head_dim)]),
                m.kv_lora_rank as u128,
                p(&[m.kv_lora_rank, n, add(m.qk_nope_head_dim, m.v_head_dim)]),
            ]);
            s(&[q, kv, p(&[n, m.v_head_dim, d])])
        }
    };
    if a.attn_output_gate {
        t = s(&[t, p(&[d, n, h])]);
    }
    if a.sparse_attention.is_some() {
        t = s(&[t, indexer_matrices(a), indexer_norm(a)]);
    }
    if a.qkv_bias && a.mla.is_none() {
        t = s(&[t, p(&[n, h]), p(&[2, k, h])]);
    }
    if a.attn_out_bias {
        t = s(&[t, d as u128]);
    }
    if a.qk_norm {
        t = s(&[t, p(&[2, h])]);
    }
    t
}

/// The lightning indexer's weight matrices in one layer: `wq_b` from the
/// compressed query (from D without query compression), `wk`, `weights_proj`.
fn indexer_matrices(a: &Arch) -> u128 {
    match &a.sparse_attention {
        Some(i) => {
            let q_in = match &a.mla {
                Some(m) if m.q_lora_rank > 0 => m.q_lora_rank,
                _ => a.d_model,
            };
            s(&[
                p(&[q_in, i.index_n_heads, i.index_head_dim]),
                p(&[a.d_model, i.index_head_dim]),
                p(&[a.d_model, i.index_n_heads]),
            ])
        }
        None => 0,
    }
}

/// The indexer's key LayerNorm (weight and bias): 2·H_I.
fn indexer_norm(a: &Arch) -> u128 {
    a.sparse_attention
        .as_ref()
        .map_or(0, |i| p(&[2, i.index_head_dim]))
}

/// One Gated DeltaNet layer's weight matrices: `in_proj_qkvz`, `in_proj_ba`
/// and `out_proj` (what a token multiplies through).
fn linear_matrices(a: &Arch) -> u128 {
    match &a.linear_attention {
        Some(la) => {
            let (dk, dv) = (la.key_dim(), la.value_dim());
            s(&[
                p(&[a.d_model, 2, add(dk, dv)]),
                p(&[a.d_model, 2, la.n_value_heads]),
                p(&[dv, a.d_model]),
            ])
        }
        None => 0,
    }
}

/// One Gated DeltaNet layer: its matrices plus the depthwise convolution
/// (`(2·D_k + D_v)·K_conv`), `dt_bias` and `A_log` (`N_lv` each) and the
/// gated RMSNorm (`H_lv`).
fn linear_layer(a: &Arch) -> u128 {
    match &a.linear_attention {
        Some(la) => s(&[
            linear_matrices(a),
            p(&[la.conv_dim(), la.conv_kernel]),
            p(&[2, la.n_value_heads]),
            la.value_head_dim as u128,
        ]),
        None => 0,
    }
}

/// One MLP of width `f` (matrices plus biases).
fn mlp(a: &Arch, f: u64) -> u128 {
    let m = a.mlp.matrices();
    let mut t = p(&[m, a.d_model, f]);
    if a.mlp_bias {
        t = s(&[
            t,
            match a.mlp {
                MlpKind::Gated => p(&[2, f]),
                MlpKind::Plain => f as u128,
            },
            a.d_model as u128,
        ]);
    }
    t
}

/// Raw counts in u128; [`ParamCounts`] converts after validation.
#[derive(Clone, Copy, Debug, Default)]
struct Raw {
    embed_in: u128,
    pos: u128,
    embed_out: u128,
    /// Attention of one full-attention layer (with the indexer, if any).
    attn_layer: u128,
    /// The non-matrix part of `attn_layer` beyond biases and qk-norm (the
    /// indexer's LayerNorm), left out of the matmul count.
    attn_layer_norm: u128,
    /// One linear-attention layer, and its weight matrices alone.
    lin_layer: u128,
    lin_matrices: u128,
    full_layers: u128,
    linear_layers: u128,
    dense_mlp_layer: u128,
    routed_total_layer: u128,
    routed_active_layer: u128,
    shared_layer: u128,
    router_layer: u128,
    norms_layer: u128,
    final_norm: u128,
    dense_layers: u128,
    moe_layers: u128,
}

fn raw(a: &Arch) -> Raw {
    let (d, v) = (a.d_model, a.vocab);
    let mut r = Raw {
        embed_in: p(&[v, d]),
        pos: p(&[a.learned_pos_emb, d]),
        embed_out: s(&[
            if a.tied_embeddings { 0 } else { p(&[v, d]) },
            if a.lm_head_bias { v as u128 } else { 0 },
        ]),
        attn_layer: attention_layer(a),
        attn_layer_norm: indexer_norm(a),
        lin_layer: linear_layer(a),
        lin_matrices: linear_matrices(a),
        full_layers: a.full_attention_layers() as u128,
        linear_layers: a.linear_attention_layers() as u128,
        dense_mlp_layer: mlp(a, a.d_ff),
        norms_layer: (a.norms_per_layer as u128).saturating_mul(norm_params(a, d)),
        final_norm: if a.final_norm { norm_params(a, d) } else { 0 },
        dense_layers: a.dense_layers() as u128,
        moe_layers: a.moe_layers() as u128,
        ..Raw::default()
    };
    if let Some(m) = &a.moe {
        let one = mlp(a, a.d_ff_expert());
        r.routed_total_layer = one.saturating_mul(m.n_experts as u128);
        r.routed_active_layer = one.saturating_mul(m.top_k as u128);
        r.shared_layer = mlp(a, a.d_ff_shared()).saturating_mul(m.n_shared_experts as u128);
        r.router_layer = s(&[
            p(&[m.n_experts, d]),
            if m.router_bias {
                m.n_experts as u128
            } else {
                0
            },
        ]);
    }
    r
}

impl Raw {
    /// Attention over all layers: full layers plus linear ones.
    fn attention(&self) -> u128 {
        s(&[
            self.attn_layer.saturating_mul(self.full_layers),
            self.lin_layer.saturating_mul(self.linear_layers),
        ])
    }

    /// Attention per layer, averaged over the attention kinds (exact
    /// unless the model is hybrid; then rounded down).
    fn attention_avg(&self) -> u128 {
        self.attention()
            .checked_div(s(&[self.full_layers, self.linear_layers]))
            .unwrap_or(0)
    }

    fn total(&self) -> u128 {
        let per_dense = s(&[self.dense_mlp_layer, self.norms_layer]);
        let per_moe = s(&[
            self.routed_total_layer,
            self.shared_layer,
            self.router_layer,
            self.norms_layer,
        ]);
        s(&[
            self.embed_in,
            self.pos,
            self.embed_out,
            self.final_norm,
            self.attention(),
            per_dense.saturating_mul(self.dense_layers),
            per_moe.saturating_mul(self.moe_layers),
        ])
    }
}

/// Total parameter count in u128, saturating (used by validation).
pub(crate) fn count_u128(a: &Arch) -> u128 {
    raw(a).total()
}

/// Parameter counts of a model, exact, with a breakdown.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ParamCounts {
    /// All parameters.
    pub total: u64,
    /// Parameters one token uses (k of E routed experts); = total for dense models.
    pub active: u64,
    /// Vocabulary parameters: input embedding, output projection (untied) and
    /// learned positions: the book's `DV` (tied) or `2DV` (untied).
    pub embedding: u64,
    /// Attention parameters, all layers.
    pub attention: u64,
    /// Dense-MLP parameters, all dense layers.
    pub mlp_dense: u64,
    /// Routed-expert parameters, all MoE layers.
    pub experts_routed: u64,
    /// Shared-expert parameters, all MoE layers.
    pub experts_shared: u64,
    /// Router parameters, all MoE layers.
    pub router: u64,
    /// Norm weights (and biases), including the final norm.
    pub norms: u64,
    /// Parameters of one dense layer (0 if every layer is MoE); for a hybrid
    /// of linear and full attention, with the attention averaged over the
    /// layers (rounded down).
    pub per_dense_layer: u64,
    /// Parameters of one MoE layer (0 if none; attention averaged as above).
    pub per_moe_layer: u64,
    /// Parameters in matrices a token multiplies through (forward FLOPs are
    /// 2 × this per token, before attention): attention, active MLP, router,
    /// and the V×D output projection (counted even when tied).
    pub matmul_active: u64,
    /// The architecture's exact total (= `total` unless a count is given:
    /// [`Arch::params_given`]).
    pub total_exact: u64,
}

impl ParamCounts {
    /// Non-embedding parameters.
    pub fn non_embedding(&self) -> u64 {
        self.total - self.embedding
    }
}

/// Count the parameters of `a` (which must have passed [`Arch::validate`]).
pub fn count<T: Tracer>(a: &Arch, tr: &mut T) -> ParamCounts {
    let r = raw(a);
    let c = |x: u128| x as u64;
    let (l_dense, l_moe) = (c(r.dense_layers), c(r.moe_layers));
    let attention = c(r.attention());
    let mlp_dense = c(r.dense_mlp_layer) * l_dense;
    let experts_routed = c(r.routed_total_layer) * l_moe;
    let experts_active = c(r.routed_active_layer) * l_moe;
    let experts_shared = c(r.shared_layer) * l_moe;
    let router = c(r.router_layer) * l_moe;
    let norms = c(r.norms_layer) * a.n_layers + c(r.final_norm);
    let embedding = c(r.embed_in + r.pos + r.embed_out);
    let total = c(r.total());
    let active = total - experts_routed + experts_active;
    let attn_avg = r.attention_avg();
    let per_dense_layer = if l_dense > 0 {
        c(attn_avg + r.dense_mlp_layer + r.norms_layer)
    } else {
        0
    };
    let per_moe_layer = if l_moe > 0 {
        c(attn_avg + r.routed_total_layer + r.shared_layer + r.router_layer + r.norms_layer)
    } else {
        0
    };
    // FLOPs count weight *matrices* only: biases and qk-norm weights cost one
    // add/multiply per element, not two per token-parameter, and the book
    // ignores them. Recount with them switched off (Arch is plain data, so the
    // copy does not allocate).
    let matrices = if a.qkv_bias || a.attn_out_bias || a.mlp_bias || a.qk_norm {
        let mut m = a.clone();
        (m.qkv_bias, m.attn_out_bias, m.mlp_bias, m.qk_norm) = (false, false, false, false);
        raw(&m)
    } else {
        r
    };
    let matmul_active = c(matrices.attn_layer - matrices.attn_layer_norm)
        * a.full_attention_layers()
        + c(matrices.lin_matrices) * a.linear_attention_layers()
        + c(matrices.dense_mlp_layer) * l_dense
        + c(matrices.routed_active_layer + matrices.shared_layer) * l_moe
        + router
        + a.vocab * a.d_model;

    let given = Given::new(a.params_given, total);
    let counts = ParamCounts {
        total: given.total,
        active: given.scale(active),
        embedding,
        attention,
        mlp_dense,
        experts_routed,
        experts_shared,
        router,
        norms,
        per_dense_layer,
        per_moe_layer,
        matmul_active: given.scale(matmul_active),
        total_exact: total,
    };
    if T::ENABLED {
        record(a, &r, &counts, tr);
    }
    counts
}

/// A parameter count given as a bare number (the book's "70e9"): the total
/// it replaces and the ratio that scales the active and matmul counts.
struct Given {
    total: u64,
    ratio: f64,
}

impl Given {
    fn new(given: Option<u64>, exact: u64) -> Given {
        match given {
            Some(g) if exact > 0 => Given {
                total: g,
                ratio: g as f64 / exact as f64,
            },
            _ => Given {
                total: exact,
                ratio: 1.0,
            },
        }
    }
    /// `x` scaled to the given total (exactly `x` without one).
    fn scale(&self, x: u64) -> u64 {
        if self.ratio == 1.0 {
            x
        } else {
            (x as f64 * self.ratio).round() as u64
        }
    }
}

/// The embedding step.
fn embedding_step(a: &Arch, embedding: u64) -> Step {
    let formula = match (a.tied_embeddings, a.learned_pos_emb > 0) {
        (true, false) => "V·D (tied)",
        (false, false) => "2·V·D",
        (true, true) => "V·D + P·D",
        (false, true) => "2·V·D + P·D",
    };
    let mut s = Step::new("params.embedding", "Embedding parameters", formula)
        .bind("V", a.vocab as f64, "")
        .bind("D", a.d_model as f64, "");
    if a.learned_pos_emb > 0 {
        s = s.bind("P", a.learned_pos_emb as f64, "");
    }
    s.result(embedding as f64, "params")
}

/// The attention step (GQA or MLA; with the output gate, the sparse
/// attention indexer and linear-attention layers where the model has them).
fn attention_step(a: &Arch, r: &Raw, attention: u64) -> Step {
    let (l, d, n) = (a.n_layers as f64, a.d_model as f64, a.n_heads as f64);
    let mut extra = String::new();
    if a.attn_output_gate {
        extra.push_str(" + D·N·H (output gate)");
    }
    if a.sparse_attention.is_some() {
        extra.push_str(" + q_r·N_I·H_I + D·H_I + 2·H_I + D·N_I (indexer)");
    }
    let layers = |s: Step| match &a.linear_attention {
        Some(_) => s.bind("L_full", a.full_attention_layers() as f64, "").bind(
            "L_lin",
            a.linear_attention_layers() as f64,
            "",
        ),
        None => s.bind("L", l, ""),
    };
    let mut s = match &a.mla {
        None => {
            let mut f = String::from("D·N·H + 2·D·K·H + N·H·D");
            for (on, term) in [(a.qkv_bias, " + (N+2K)·H"), (a.attn_out_bias, " + D"), (a.qk_norm, " + 2·H")] {
                if on {
                    f.push_str(term);
                }
            }
            f.push_str(&extra);
            layers(Step::new("params.attention", "Attention parameters", &layers_formula(a, &f)))
                .bind("D", d, "")
                .bind("N", n, "")
                .bind("K", a.n_kv_heads as f64, "")
                .bind("H", a.d_head as f64, "")
        }
        Some(m) => layers(Step::new(
            "params.attention",
            "Attention parameters (MLA)",
            &layers_formula(
                a,
                &format!("D·q_r + q_r + q_r·N·(H_nope+H_rope) + D·(kv_r+H_rope) + kv_r + kv_r·N·(H_nope+H_v) + N·H_v·D{extra}"),
            ),
        ))
        .bind("D", d, "")
        .bind("N", n, "")
        .bind("q_r", m.q_lora_rank as f64, "")
        .bind("kv_r", m.kv_lora_rank as f64, "")
        .bind("H_nope", m.qk_nope_head_dim as f64, "")
        .bind("H_rope", m.qk_rope_head_dim as f64, "")
        .bind("H_v", m.v_head_dim as f64, ""),
    };
    if let Some(la) = &a.linear_attention {
        s = s
            .bind("N_lk", la.n_key_heads as f64, "")
            .bind("N_lv", la.n_value_heads as f64, "")
            .bind("H_lk", la.key_head_dim as f64, "")
            .bind("H_lv", la.value_head_dim as f64, "")
            .bind("K_conv", la.conv_kernel as f64, "")
            .bind("A_lin", r.lin_layer as f64, "params");
    }
    if let Some(i) = &a.sparse_attention {
        s = s
            .bind("N_I", i.index_n_heads as f64, "")
            .bind("H_I", i.index_head_dim as f64, "");
    }
    s.result(attention as f64, "params")
}

/// `L·(per layer)`, or for a hybrid `L_full·(per full layer) + L_lin·A_lin`
/// with the Gated DeltaNet layer spelled out.
fn layers_formula(a: &Arch, per_layer: &str) -> String {
    if a.linear_attention.is_some() {
        format!(
            "L_full·({per_layer}) + L_lin·A_lin, A_lin = D·(2·N_lk·H_lk + 2·N_lv·H_lv) + 2·D·N_lv + (2·N_lk·H_lk + N_lv·H_lv)·K_conv + 2·N_lv + H_lv + N_lv·H_lv·D"
        )
    } else {
        format!("L·({per_layer})")
    }
}

/// The MLP, expert, router and norm steps.
fn mlp_steps<T: Tracer>(a: &Arch, r: &Raw, pc: &ParamCounts, tr: &mut T) {
    let d = a.d_model as f64;
    if a.dense_layers() > 0 {
        tr.record(|| {
            let m = a.mlp.matrices();
            let f_str = format!(
                "L_dense·{m}·D·F{}",
                if a.mlp_bias { " + biases" } else { "" }
            );
            Step::new("params.mlp", "Dense MLP parameters", &f_str)
                .bind("L_dense", a.dense_layers() as f64, "")
                .bind("D", d, "")
                .bind("F", a.d_ff as f64, "")
                .result(pc.mlp_dense as f64, "params")
        });
    }
    if let Some(m) = &a.moe {
        tr.record(|| {
            Step::new(
                "params.experts",
                "Routed expert parameters",
                &format!("L_moe·E·{}·D·F_e", a.mlp.matrices()),
            )
            .bind("L_moe", a.moe_layers() as f64, "")
            .bind("E", m.n_experts as f64, "")
            .bind("D", d, "")
            .bind("F_e", a.d_ff_expert() as f64, "")
            .result(pc.experts_routed as f64, "params")
        });
        tr.record(|| {
            Step::new(
                "params.router_shared",
                "Router and shared-expert parameters",
                "L_moe·(E·D + S·m·D·F_s)",
            )
            .bind("L_moe", a.moe_layers() as f64, "")
            .bind("E", m.n_experts as f64, "")
            .bind("S", m.n_shared_experts as f64, "")
            .bind("F_s", a.d_ff_shared() as f64, "")
            .result(
                ((r.router_layer + r.shared_layer) * r.moe_layers) as f64,
                "params",
            )
        });
    }
    if a.norms_per_layer > 0 || a.final_norm {
        tr.record(|| {
            Step::new(
                "params.norms",
                "Norm parameters",
                "(L·norms_per_layer + final)·D (×2 for LayerNorm)",
            )
            .bind("L", a.n_layers as f64, "")
            .bind("norms_per_layer", a.norms_per_layer as f64, "")
            .bind("D", d, "")
            .result(
                (r.norms_layer * a.n_layers as u128 + r.final_norm) as f64,
                "params",
            )
        });
    }
}

/// The derivation of the counts.
fn record<T: Tracer>(a: &Arch, r: &Raw, pc: &ParamCounts, tr: &mut T) {
    let src = "How To Scale Your Model, ch4 (Transformer Math)";
    tr.scope(
        || {
            Step::new(
                "params.total",
                "Total parameters",
                "embedding + attention + MLP + norms",
            )
            .source(src)
        },
        |tr| {
            tr.record(|| embedding_step(a, pc.embedding));
            tr.record(|| attention_step(a, r, pc.attention));
            mlp_steps(a, r, pc, tr);
            pc.total_exact
        },
        |t, s| s.result(*t as f64, "params"),
    );
    if let Some(g) = a.params_given {
        tr.record(|| {
            Step::new(
                "params.given",
                "Parameter count used as given (convention)",
                "P := P_given; P_active, matmul params × P_given/P_exact",
            )
            .bind("P_given", g as f64, "params")
            .bind("P_exact", pc.total_exact as f64, "params")
            .result(pc.total as f64, "params")
            .source("How To Scale Your Model ch6 (\"70e9 parameters\")")
        });
    }
    if let Some(m) = &a.moe {
        tr.record(|| {
            Step::new(
                "params.active",
                "Active parameters per token",
                "total − L_moe·(E − k)·m·D·F_e",
            )
            .bind("E", m.n_experts as f64, "")
            .bind("k", m.top_k as f64, "")
            .bind("L_moe", a.moe_layers() as f64, "")
            .result(pc.active as f64, "params")
            .source("How To Scale Your Model, ch7 Q5 (activated parameters)")
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Moe, NormKind};
    use crate::trace::{NoTrace, Recorder};

    /// Chapter 5's LLaMA-2 13B as the book counts it: no norms.
    pub(crate) fn book_13b() -> Arch {
        Arch {
            norms_per_layer: 0,
            final_norm: false,
            ..Arch::dense(40, 5120, 13824, 40, 40, 128, 32000)
        }
    }

    #[test]
    fn book_ch5_llama2_13b_exact() {
        // (3·5120·13824 + 4·5120²)·40 + 2·5120·32000 = 13,015,449,600 (seed 000, ex. 1)
        let c = count(&book_13b(), &mut NoTrace);
        assert_eq!(c.total, 13_015_449_600);
        // Book ch5 Q1 breakdown: FFW 3LDF ≈ 8.5e9, attention 4DNHL ≈ 4.2e9, vocab 2VD ≈ 0.33e9.
        assert_eq!(c.mlp_dense, 3 * 40 * 5120 * 13824);
        assert_eq!(c.attention, 4 * 5120 * 40 * 128 * 40);
        assert_eq!(c.embedding, 2 * 5120 * 32000);
        assert_eq!(c.active, c.total);
    }

    #[test]
    fn with_norms_matches_hf_llama2_13b() {
        // HF Llama-2-13b-hf safetensors total: 13,015,864,320 = book count + (2L+1)·D.
        let mut a = book_13b();
        a.norms_per_layer = 2;
        a.final_norm = true;
        assert_eq!(count(&a, &mut NoTrace).total, 13_015_864_320);
    }

    #[test]
    fn ch7_model_and_moe() {
        let mut a = Arch {
            n_layers: 64,
            d_model: 4096,
            d_ff: 16384,
            n_heads: 32,
            n_kv_heads: 8,
            d_head: 256,
            vocab: 32128,
            tied_embeddings: true,
            ..book_13b()
        };
        // 64·4096·(3·16384 + 2·256·40) + 4096·32128 = 18,385,207,296 (seed 002 wrote ...246)
        assert_eq!(count(&a, &mut NoTrace).total, 18_385_207_296);
        a.moe = Some(Moe {
            n_experts: 16,
            top_k: 2,
            d_ff_expert: 0,
            n_shared_experts: 0,
            d_ff_shared: 0,
            first_dense_layers: 0,
            router_bias: false,
        });
        let c = count(&a, &mut NoTrace);
        let attn = 64 * 2 * 4096 * 40 * 256u64;
        let emb = 4096 * 32128u64;
        let router = 64 * 16 * 4096u64;
        assert_eq!(c.total, 64 * 16 * 3 * 4096 * 16384 + attn + emb + router);
        assert_eq!(c.active, 64 * 2 * 3 * 4096 * 16384 + attn + emb + router);
        // Book: ≈212e9 total and ≈31.2e9 activated (the book ignores the 4.2M router weights).
        assert!((c.total as f64 / 212e9 - 1.0).abs() < 0.01);
        assert!((c.active as f64 / 31.2e9 - 1.0).abs() < 0.01);
    }

    #[test]
    fn matmul_params_exclude_biases() {
        // GPT-2 small: biases everywhere, LayerNorm, tied, learned positions.
        let a = Arch {
            n_layers: 12,
            d_model: 768,
            d_ff: 3072,
            n_heads: 12,
            n_kv_heads: 12,
            d_head: 64,
            vocab: 50257,
            tied_embeddings: true,
            mlp: MlpKind::Plain,
            norm: NormKind::Layer,
            norms_per_layer: 2,
            final_norm: true,
            qkv_bias: true,
            attn_out_bias: true,
            mlp_bias: true,
            learned_pos_emb: 1024,
            ..book_13b()
        };
        let c = count(&a, &mut NoTrace);
        assert_eq!(c.total, 124_439_808);
        // 12·(4·768² + 2·768·3072) + 50257·768, by hand
        assert_eq!(
            c.matmul_active,
            12 * (4 * 768 * 768 + 2 * 768 * 3072) + 50257 * 768
        );
    }

    #[test]
    fn trace_matches_value() {
        let mut r = Recorder::default();
        let c = count(&book_13b(), &mut r);
        assert_eq!(r.find("params.total").unwrap().value, c.total as f64);
        assert_eq!(
            r.find("params.attention").unwrap().value,
            c.attention as f64
        );
    }
}
