//! The routed experts of a prefill, priced as the engine's fused-MoE kernel
//! runs them at prefill token counts.
//!
//! A fused MoE kernel (SGLang's and vLLM's Triton `fused_moe`) over T
//! prompt tokens gathers each token's activation once per routed expert,
//! runs the two grouped GEMMs on the rank's `1/(Y·Z)` slice of the experts
//! and writes and sums k partial outputs per token. Three serial costs per
//! MoE layer and rank:
//! `T_moe = w_r/(N·W_hbm·η_hbm) + F_r/(N·C·η_moe) + T·k·D·s_act/(Z·W_hbm)`:
//! the routed weights read once, the routed FLOPs at the grouped GEMM's
//! efficiency, and the routed activations — which a tensor-parallel slice of
//! the experts does not shrink (every TP rank gathers and writes all k·D
//! elements of every token), only expert parallelism spreads them. The
//! roofline prices the routed FLOPs at the dense GEMM curve over all N chips
//! and has no activation term: at TP 16 and 8192 tokens the measured kernel
//! is 5× its estimate. `η_moe` and `s_act` are fitted per engine on its
//! measured fused-MoE table at T ≥ 1024 (scripts/fit_moe_prefill.py);
//! low-precision (fp8) experts only — the bf16 rows fit poorly (median
//! |error| 15–27 %, p90 64–154 %) and keep the dense curve.

use crate::inference::engine::{EngineProfile, MoePrefillFit};
use crate::model::params::ParamCounts;
use crate::model::Arch;
use crate::trace::{Step, Tracer};
use crate::units::{DType, Seconds};

/// The routed-expert block of a prefill, whole-model amounts (every chunk).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RoutedPrefill {
    /// Routed FLOPs (taken out of the matmul term).
    pub flops: f64,
    /// Routed weight bytes of the whole model (taken out of the weight term).
    pub weight_bytes: f64,
    /// `chunks·w_r/(N·W_hbm·η_hbm)`.
    pub weights: Seconds,
    /// `F_r/(N·C·η_moe)`.
    pub math: Seconds,
    /// `tokens·L_moe·k·D·s_act/(Z·W_hbm)`.
    pub activations: Seconds,
}

impl RoutedPrefill {
    /// The block's time: its three serial terms.
    pub fn time(&self) -> Seconds {
        self.weights + self.math + self.activations
    }
}

/// What the block needs of the step: N = Y·Z chips, Z, the chip's C (in
/// the compute dtype) and W_hbm, and the share of the layers (`frac`, a
/// pipeline stage).
#[derive(Clone, Copy, Debug)]
pub struct Slice {
    /// N: chips of the replica (stage).
    pub chips: f64,
    /// Z: expert-parallel ways.
    pub ep: f64,
    /// C per chip, FLOP/s.
    pub c: f64,
    /// W_hbm per chip, B/s.
    pub w_hbm: f64,
    /// Share of the layers.
    pub frac: f64,
}

/// The routed block of a prefill of `tokens` tokens in `chunks` chunks
/// under the engine's `fit` for the chip, or None when the model has no
/// routed experts or they run in 16 bits.
pub fn routed(
    e: &EngineProfile,
    fit: &MoePrefillFit,
    (a, p): (&Arch, &ParamCounts),
    (weights, compute): (DType, DType),
    (tokens, chunks): (f64, u64),
    s: Slice,
) -> Option<RoutedPrefill> {
    let (eta, s_act) = (fit.efficiency, fit.act_bytes);
    let moe = a.moe.as_ref()?;
    if e.is_ideal() || compute.bits() >= 16 || moe.n_experts == 0 {
        return None;
    }
    let (n_e, k) = (moe.n_experts as f64, moe.top_k as f64);
    let l_moe = a.n_layers.saturating_sub(moe.first_dense_layers) as f64;
    let routed = p.experts_routed as f64 * s.frac;
    let flops = 2.0 * tokens * routed * k / n_e;
    let weight_bytes = routed * weights.bytes_per_element();
    let n = s.chips.max(1.0);
    Some(RoutedPrefill {
        flops,
        weight_bytes,
        weights: Seconds::new(chunks as f64 * weight_bytes / (n * s.w_hbm * e.hbm_efficiency)),
        math: Seconds::new(flops / (n * s.c * eta)),
        activations: Seconds::new(
            tokens * l_moe * s.frac * k * a.d_model as f64 * s_act / (s.ep.max(1.0) * s.w_hbm),
        ),
    })
}

/// The `--explain` step of the routed block.
pub(crate) fn record<T: Tracer>(
    e: &EngineProfile,
    fit: &MoePrefillFit,
    r: &RoutedPrefill,
    tr: &mut T,
) {
    tr.record(|| {
        Step::new(
            "infer.prefill_moe",
            "Routed experts of the prefill (fused-MoE kernel)",
            "T_moe = chunks·w_r/(N·W_hbm·η_hbm) + F_r/(N·C·η_moe) + T·L_moe·k·D·s_act/(Z·W_hbm)",
        )
        .bind("F_r", r.flops, "FLOPs")
        .bind("w_r", r.weight_bytes, "B")
        .bind("η_moe", fit.efficiency, "")
        .bind("s_act", fit.act_bytes, "B")
        .bind("T_weights", r.weights.get(), "s")
        .bind("T_math", r.math.get(), "s")
        .bind("T_act", r.activations.get(), "s")
        .result(r.time().get(), "s")
        .source(
            e.sources
                .get("moe_prefill")
                .map_or("engine profile (data/engines): moe_prefill", |s| s.as_str()),
        )
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Catalog;

    /// DeepSeek-V3 fp8, one MoE layer's worth checked against the measured
    /// SGLang fused-MoE kernel: by hand at TP 16 (N = 16, Z = 1), 8192
    /// tokens, H100 (C = 1979 TFLOP/s fp8, W = 3.35 TB/s), per layer:
    /// weights 256·3·7168·2048 B / 16 / (3.35e12·0.84) = 0.2504 ms;
    /// FLOPs 6·8192·8·7168·2048/16 / (1979e12·η) with η = 0.491: 0.3723 ms;
    /// activations 8192·8·7168·s/3.35e12 with s = 8.49 B: 1.1908 ms;
    /// 1.814 ms (the table measures 1.730 ms).
    #[test]
    fn deepseek_v3_tp16_8192_tokens_by_hand() {
        let c = Catalog::builtin();
        let m = c.model("deepseek-v3").unwrap();
        let p = crate::model::params::count(&m.arch, &mut crate::trace::NoTrace);
        let e = EngineProfile::builtin("sglang").unwrap();
        let l_moe = 58.0;
        let slice = Slice {
            chips: 16.0,
            ep: 1.0,
            c: 1979e12,
            w_hbm: 3.35e12,
            frac: 1.0,
        };
        let fit = e.moe_prefill_for("h100").unwrap();
        assert_eq!((fit.efficiency, fit.act_bytes), (0.491, 8.49));
        let r = routed(
            &e,
            fit,
            (&m.arch, &p),
            (DType::Fp8, DType::Fp8),
            (8192.0, 1),
            slice,
        )
        .unwrap();
        let per_layer = r.time().get() / l_moe * 1e3;
        let by_hand = 256.0 * 3.0 * 7168.0 * 2048.0 / 16.0 / (3.35e12 * 0.84) * 1e3
            + 6.0 * 8192.0 * 8.0 * 7168.0 * 2048.0 / 16.0 / (1979e12 * 0.491) * 1e3
            + 8192.0 * 8.0 * 7168.0 * 8.49 / 3.35e12 * 1e3;
        assert!(
            (per_layer - by_hand).abs() < 1e-9,
            "{per_layer} vs {by_hand}"
        );
        assert!((per_layer - 1.814).abs() < 0.002, "{per_layer}");
        // the measured kernel (aiconfigurator h100_sxm/moe/sglang/0.5.14,
        // fp8_block, power_law_1.01, moe_tp_size 16): 1.730 ms, within 5 %
        assert!((per_layer / 1.730 - 1.0).abs() < 0.05);
        // expert parallelism spreads the activations (Z = 16, TP 1): 1/16
        let ep = routed(
            &e,
            fit,
            (&m.arch, &p),
            (DType::Fp8, DType::Fp8),
            (8192.0, 1),
            Slice { ep: 16.0, ..slice },
        )
        .unwrap();
        assert!((ep.activations.get() * 16.0 - r.activations.get()).abs() < 1e-12);
    }

    #[test]
    fn only_low_precision_moe_on_fitted_chips() {
        let c = Catalog::builtin();
        let slice = Slice {
            chips: 8.0,
            ep: 1.0,
            c: 989.5e12,
            w_hbm: 3.35e12,
            frac: 1.0,
        };
        let ds = c.model("deepseek-v3").unwrap();
        let pd = crate::model::params::count(&ds.arch, &mut crate::trace::NoTrace);
        let dense = c.model("llama-3-8b").unwrap();
        let pl = crate::model::params::count(&dense.arch, &mut crate::trace::NoTrace);
        let sg = EngineProfile::builtin("sglang").unwrap();
        let fit = sg.moe_prefill_for("h200").unwrap();
        let tok = (4096.0, 1u64);
        let bf16 = (DType::Bf16, DType::Bf16);
        assert!(routed(&sg, fit, (&ds.arch, &pd), bf16, tok, slice).is_none());
        let fp8 = (DType::Fp8, DType::Fp8);
        assert!(routed(&sg, fit, (&dense.arch, &pl), fp8, tok, slice).is_none());
        assert!(routed(&sg, fit, (&ds.arch, &pd), fp8, tok, slice).is_some());
        // chips without a measured table keep the dense curve
        assert!(sg.moe_prefill_for("b200").is_none());
        assert!(sg.moe_prefill_for("a100-80gb").is_none());
        for name in ["ideal", "trtllm"] {
            let e = EngineProfile::builtin(name).unwrap();
            assert!(e.moe_prefill_for("h100").is_none());
        }
        // vLLM's Blackwell fit is its own (B200 table, held out on GB200)
        let v = EngineProfile::builtin("vllm").unwrap();
        assert_eq!(v.moe_prefill_for("gb200-nvl72").unwrap().efficiency, 0.215);
    }
}
