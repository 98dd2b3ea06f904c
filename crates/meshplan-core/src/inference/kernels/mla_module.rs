//! The whole generation MLA module of one layer as an engine runs it.
//!
//! A DeepSeek-style MLA layer in decode is not one attention kernel but
//! about twenty short ones: the latent projections `q_a`/`kv_a` (replicated
//! under tensor parallelism), their RMSNorms, RoPE, `q_b`, the absorbed
//! `W_UK`/`W_UV` batched GEMMs, the attention kernel itself, `o_proj`, each
//! block-scaled fp8 GEMM with its own activation quantisation. At decode
//! batch sizes each takes a few microseconds whatever its bytes, so the
//! module costs ~40 µs (TensorRT-LLM) to ~85 µs (vLLM) per layer before any
//! byte moves: the fixed time a weights-over-bandwidth roofline does not
//! see. NVIDIA's `mla_generation_module_perf` tables time the whole module
//! (aiconfigurator systems data, commit 095f58a); `scripts/fit_kernels.py`
//! fits `t = t0 + B·t_seq + (w_attn(h) + KV)/BW` to them per chip, engine,
//! GEMM dtype and KV dtype (op `mla_module`). SGLang has no module table:
//! its decode runs the same decomposition (python/sglang/srt/models/
//! deepseek_v2.py `forward_absorb`), so vLLM's table on the same chip is
//! used and marked as measured under another engine.

use crate::model::Mla;
use crate::trace::{Step, Tracer};
use crate::units::{DType, Seconds};

use super::{curves, Curve, KernelSet};

/// The engine whose module table stands in where an engine has none.
const STAND_IN: &str = "vllm";

/// A module curve as it applies to one engine.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ModuleCurve {
    /// The fitted curve.
    pub curve: &'static Curve,
    /// Whether it was measured under another engine (`STAND_IN`).
    pub borrowed: bool,
}

/// The module table's key for weights `w` and KV cache `kv`: DeepSeek's
/// fp8 checkpoints are block-scaled, so fp8 weights price as `fp8_block`.
fn key(w: DType, kv: DType) -> Option<String> {
    let g = match w {
        DType::Fp8 => "fp8_block",
        DType::Bf16 | DType::Fp16 => "bf16",
        _ => return None,
    };
    let k = match kv {
        DType::Fp8 => "fp8",
        DType::Bf16 | DType::Fp16 => "bf16",
        _ => return None,
    };
    Some(format!("{g}/{k}"))
}

impl KernelSet {
    /// The generation MLA module for `w` weights and a `kv` cache: this
    /// engine's table on this chip, else vLLM's on this chip (`borrowed`).
    /// None for other dtypes or chips without a module table.
    pub fn mla_module(&self, w: DType, kv: DType) -> Option<ModuleCurve> {
        let k = key(w, kv)?;
        if let Some(c) = self.get("mla_module", &k) {
            return Some(ModuleCurve {
                curve: c,
                borrowed: false,
            });
        }
        let chip = self.chip();
        curves()
            .iter()
            .find(|c| {
                c.engine == STAND_IN
                    && c.op == "mla_module"
                    && c.key == k
                    && c.chips.iter().any(|x| x == chip)
            })
            .map(|c| ModuleCurve {
                curve: c,
                borrowed: true,
            })
    }
}

/// Attention weight elements of one MLA layer on a GPU that holds `heads`
/// query heads: the latent projections `D·(q_r + kv_r + H_rope)` (every TP
/// rank holds them whole), `q_b` `q_r·h·(H_nope + H_rope)` (or `q_proj`
/// `D·h·(H_nope + H_rope)` without query compression), `kv_b`
/// `kv_r·h·(H_nope + H_v)` and `o_proj` `h·H_v·D`.
pub fn weight_elems(x: &Mla, d_model: u64, heads: f64) -> f64 {
    let d = d_model as f64;
    let (qr, kr) = (x.q_lora_rank as f64, x.kv_lora_rank as f64);
    let (nope, rope, v) = (
        x.qk_nope_head_dim as f64,
        x.qk_rope_head_dim as f64,
        x.v_head_dim as f64,
    );
    let q = if qr > 0.0 {
        d * qr + qr * heads * (nope + rope)
    } else {
        d * heads * (nope + rope)
    };
    q + d * (kr + rope) + kr * heads * (nope + v) + heads * v * d
}

/// The attention work of one layer on one GPU: `seqs` = B_dev sequences
/// attended, the layer's attention weight bytes `w_attn`, the KV bytes
/// `kv_layer` it reads, the attention kernel's FLOPs `flops` and the rate
/// `flops_rate` of the engine's own MLA kernel (0: no compute side).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LayerWork {
    /// Sequences this GPU attends.
    pub seqs: f64,
    /// Attention weight bytes of one layer on this GPU.
    pub w_attn: f64,
    /// KV bytes one layer reads on this GPU.
    pub kv_layer: f64,
    /// FLOPs of one layer's attention kernel, `B_dev·S·h·2·(2·kv_r + H_rope)`.
    pub flops: f64,
    /// FLOP/s of the engine's generation MLA kernel (0: memory only).
    pub flops_rate: f64,
    /// Bytes/s at which the engine's own MLA kernel reads the KV, for a
    /// module borrowed from another engine (0: the module's bandwidth).
    pub kv_bandwidth: f64,
}

/// One decode step's MLA modules over `layers` layers, per GPU:
/// `L·(t0 + B_dev·t_seq + w_attn/BW + max(KV_l/BW_kv, F_l/F_mla))`. The fit
/// (h ≤ 32 heads per GPU) is memory-bound; with many heads per GPU
/// (attention data-parallel: all 128) the attention kernel turns
/// compute-bound, at the rate fitted to the engine's own kernel table. A
/// borrowed module reads the KV at the engine's own attention kernel's
/// bandwidth `BW_kv` where that kernel is measured (SGLang's fp8-KV MLA
/// kernel streams at 0.29 TB/s on H200, its bf16 one at 4.08).
pub fn step_time(m: &ModuleCurve, layers: f64, w: &LayerWork) -> Seconds {
    let c = m.curve;
    let kv_bw = if w.kv_bandwidth > 0.0 {
        w.kv_bandwidth
    } else {
        c.bandwidth
    };
    let mem = w.kv_layer.max(0.0) / kv_bw;
    let math = if w.flops_rate > 0.0 {
        w.flops.max(0.0) / w.flops_rate
    } else {
        0.0
    };
    let t =
        c.t0_s + w.seqs.max(0.0) * c.per_seq_s + w.w_attn.max(0.0) / c.bandwidth + mem.max(math);
    Seconds::new(t * layers)
}

/// Heads per GPU above which the module is outside its fitted range.
pub const FITTED_HEADS: f64 = 32.0;

/// Record the module term under `--explain`.
pub fn record<T: Tracer>(
    m: &ModuleCurve,
    (layers, heads): (f64, f64),
    w: &LayerWork,
    t: Seconds,
    tr: &mut T,
) {
    tr.record(|| {
        let c = m.curve;
        let mut src = c.source.clone();
        if m.borrowed {
            src.push_str(&format!(
                " — measured under {STAND_IN}: this engine has no MLA module table; it runs the same absorbed-MLA decomposition"
            ));
        }
        if heads > FITTED_HEADS {
            src.push_str(&format!(
                " — h = {heads} heads per GPU is outside the fitted h <= {FITTED_HEADS}: a prediction outside what was measured (the 128-head rows measure up to 25 % slower)"
            ));
        }
        Step::new(
            "infer.decode_mla_module",
            "Decode MLA modules from measured kernels",
            "T_attn = L·(t0 + B_dev·t_seq + w_attn(h)/BW + max(KV_l/BW_kv, F_l/F_mla)), w_attn(h) = [D·(q_r + kv_r + H_rope) + q_r·h·(H_nope + H_rope) + kv_r·h·(H_nope + H_v) + h·H_v·D]·bytes_w, KV_l = B_dev·S·(kv_r + H_rope)·bytes_kv",
        )
        .bind("L", layers, "layers")
        .bind("B_dev", w.seqs, "sequences")
        .bind("h", heads, "heads")
        .bind("w_attn", w.w_attn, "B")
        .bind("KV_l", w.kv_layer, "B")
        .bind("F_l", w.flops, "FLOPs")
        .bind("F_mla", w.flops_rate, "FLOP/s")
        .bind("t0", c.t0_s, "s")
        .bind("t_seq", c.per_seq_s, "s")
        .bind("BW", c.bandwidth, "B/s")
        .bind(
            "BW_kv",
            if w.kv_bandwidth > 0.0 {
                w.kv_bandwidth
            } else {
                c.bandwidth
            },
            "B/s",
        )
        .result(t.get(), "s")
        .source(&src)
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deepseek_mla() -> Mla {
        Mla {
            q_lora_rank: 1536,
            kv_lora_rank: 512,
            qk_nope_head_dim: 128,
            qk_rope_head_dim: 64,
            v_head_dim: 128,
        }
    }

    #[test]
    fn weight_elems_of_a_deepseek_tp8_rank() {
        // h = 128/8 = 16 heads, D = 7168:
        // latent 7168·(1536 + 512 + 64) = 15,138,816
        // q_b 1536·16·192 = 4,718,592; kv_b 512·16·256 = 2,097,152
        // o_proj 16·128·7168 = 14,680,064; sum 36,634,624
        let got = weight_elems(&deepseek_mla(), 7168, 16.0);
        assert_eq!(got, 36_634_624.0);
    }

    #[test]
    fn sglang_borrows_vllms_table_and_vllm_has_its_own() {
        let cat = crate::Catalog::builtin();
        let h200 = cat.chip("h200").unwrap();
        let v = KernelSet::for_chip("vllm", h200).unwrap();
        let s = KernelSet::for_chip("sglang", h200).unwrap();
        let mv = v.mla_module(DType::Fp8, DType::Bf16).unwrap();
        let ms = s.mla_module(DType::Fp8, DType::Bf16).unwrap();
        assert!(!mv.borrowed && ms.borrowed);
        assert_eq!(mv.curve, ms.curve);
        assert!(mv.curve.source.contains("h200_sxm/mla/vllm/"));
        assert!(s.mla_module(DType::Int4, DType::Bf16).is_none());
    }
}
