//! The host side of a prefill forward that runs without CUDA graphs.
//!
//! SGLang captures CUDA graphs for decode batches only: a prefill (its
//! `extend` forward) runs eagerly, every kernel launched from Python —
//! the module's `forward`, PyTorch's dispatcher, the allocator, the launch.
//! When the GPU work of a forward is shorter than the host's issue time the
//! GPU waits for the host, so a forward takes `max(T_gpu, T_host)` (the
//! host runs ahead of the GPU when the GPU is the slower side: launches are
//! asynchronous and no step of the forward synchronises them).
//!
//! `T_host = Σ_layers n_l·t_launch`: the kernels each layer launches (counted
//! from the engine's model code, [`launches_per_layer`]) times the engine's
//! measured host time per eager launch (`eager_launch_s`, data/engines).
//! Engines whose prefill replays CUDA graphs (vLLM V1's piecewise graphs,
//! TensorRT-LLM's C++ runtime) have `prefill_eager = false` and no floor.

use crate::inference::engine::EngineProfile;
use crate::model::Arch;
use crate::trace::{Step, Tracer};
use crate::units::{DType, Seconds};

/// Kernels one layer of a prefill forward launches, by layer kind.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LayerLaunches {
    /// A layer with a dense MLP (every layer of a dense model; DeepSeek's
    /// first layers).
    pub dense: f64,
    /// A layer with a routed-expert MLP.
    pub moe: f64,
}

/// Kernels a dense GQA layer launches outside quantisation and
/// collectives: two fused add+RMSNorm, the QKV, output, gate/up and down
/// GEMMs, rotary embedding, the KV-cache store, attention, SiLU-and-mul
/// (sglang python/sglang/srt/models/llama.py `LlamaDecoderLayer.forward`).
const DENSE_LAYER: f64 = 10.0;

/// What multi-head latent attention adds to a layer's attention: the
/// q_a and kv_a latent RMSNorms, the q_b and kv_b up-projections (the
/// latent KV decompressed for the prefill's multi-head attention; the q_a
/// and kv_a projections are one fused GEMM that replaces the QKV GEMM), and
/// the two copies that assemble K from k_nope and the shared rotary k_pe and
/// write the rotated q_pe back (sglang python/sglang/srt/models/deepseek_v2.py
/// `DeepseekV2AttentionMLA.forward_normal`).
const MLA_EXTRA: f64 = 6.0;

/// What a routed-expert MLP adds over a dense one: the gate/up GEMM, SiLU
/// and down GEMM (3 kernels) become the router GEMM, grouped top-k,
/// `moe_align_block_size`, the two grouped expert GEMMs, SiLU-and-mul and
/// `moe_sum_reduce` (7; the shared expert fused into the routed kernel, the
/// SM90 default since sgl-project/sglang PR #5571) (sglang
/// python/sglang/srt/layers/moe/fused_moe_triton/fused_moe.py).
const MOE_EXTRA: f64 = 4.0;

/// Low-precision GEMMs of a layer whose activations are quantised on the
/// fly (one `per_token_group_quant_fp8` / `scaled_fp8_quant` kernel before
/// each): attention's projections (2, or 4 with MLA) and the MLP's two
/// (the router GEMM stays in 16 bits).
fn quantised_gemms(attn_gemms: f64) -> f64 {
    attn_gemms + 2.0
}

/// Kernels per layer of a prefill forward: the dense-layer count, plus the
/// MLA and MoE extras, plus one activation-quantisation kernel per
/// low-precision GEMM when `compute` is below 16 bits, plus the two TP
/// all-reduces when `tp > 1`.
pub fn launches_per_layer(a: &Arch, compute: DType, tp: u64) -> LayerLaunches {
    let mla = a.mla.is_some();
    let attn = DENSE_LAYER + if mla { MLA_EXTRA } else { 0.0 };
    let quant = if compute.bits() < 16 {
        quantised_gemms(if mla { 4.0 } else { 2.0 })
    } else {
        0.0
    };
    let ar = if tp > 1 { 2.0 } else { 0.0 };
    let dense = attn + quant + ar;
    LayerLaunches {
        dense,
        moe: dense + MOE_EXTRA,
    }
}

/// The host time of one eager prefill forward over the `frac` of the
/// layers a stage holds: `frac·(L_dense·n_dense + L_moe·n_moe)·t_launch`;
/// 0 for an engine whose prefill replays CUDA graphs.
pub fn forward_host_time(
    e: &EngineProfile,
    a: &Arch,
    compute: DType,
    tp: u64,
    frac: f64,
) -> Seconds {
    if !e.prefill_eager {
        return Seconds::ZERO;
    }
    let n = launches_per_layer(a, compute, tp);
    let (l_dense, l_moe) = layer_kinds(a);
    Seconds::new(frac * (l_dense * n.dense + l_moe * n.moe) * e.eager_launch_s)
}

/// Dense-MLP and routed-expert layers of the model.
fn layer_kinds(a: &Arch) -> (f64, f64) {
    let l = a.n_layers as f64;
    match &a.moe {
        Some(m) => {
            let dense = m.first_dense_layers.min(a.n_layers) as f64;
            (dense, l - dense)
        }
        None => (l, 0.0),
    }
}

/// The `--explain` step of the eager launch floor.
pub(crate) fn record<T: Tracer>(
    e: &EngineProfile,
    a: &Arch,
    (compute, tp): (DType, u64),
    (chunks, host, gpu): (u64, Seconds, Seconds),
    tr: &mut T,
) {
    if !e.prefill_eager {
        return;
    }
    let n = launches_per_layer(a, compute, tp);
    let (l_dense, l_moe) = layer_kinds(a);
    tr.record(|| {
        Step::new(
            "infer.prefill_host",
            "Prefill host launch time (no CUDA graphs)",
            "T_host = chunks·(L_dense·n_dense + L_moe·n_moe)·t_launch; the prefill's GPU work waits for it when T_host > T_gpu",
        )
        .bind("chunks", chunks as f64, "")
        .bind("L_dense", l_dense, "layers")
        .bind("n_dense", n.dense, "kernels")
        .bind("L_moe", l_moe, "layers")
        .bind("n_moe", n.moe, "kernels")
        .bind("t_launch", e.eager_launch_s, "s")
        .bind("T_gpu", gpu.get(), "s")
        .result(host.get(), "s")
        .source(
            e.sources
                .get("eager_launch_s")
                .map_or("engine profile (data/engines): eager_launch_s", |s| s.as_str()),
        )
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Catalog;

    fn sglang() -> EngineProfile {
        EngineProfile::builtin("sglang").unwrap()
    }

    #[test]
    fn deepseek_v3_fp8_tp16_launch_count_by_hand() {
        let c = Catalog::builtin();
        let a = &c.model("deepseek-v3").unwrap().arch;
        let n = launches_per_layer(a, DType::Fp8, 16);
        // dense MLA layer: 10 + 6 (MLA) + 6 quant (q_a/kv_a fused, q_b,
        // kv_b, o; gate_up, down) + 2 all-reduces = 24; MoE layer + 4 = 28
        assert_eq!(n.dense, 24.0);
        assert_eq!(n.moe, 28.0);
        // 3 dense + 58 MoE layers: 3·24 + 58·28 = 1696 launches at the
        // profile's t_launch
        let e = sglang();
        let t = forward_host_time(&e, a, DType::Fp8, 16, 1.0).get();
        assert!((t - 1696.0 * e.eager_launch_s).abs() < 1e-12, "{t}");
        // the profile's t_launch is the SGLang DeepSeek-V3 eager forward
        // (82.6 ms, sgl-project/sglang PR #12160) over these 1696 launches
        assert!((t - 0.0826).abs() < 0.0005, "{t}");
    }

    #[test]
    fn dense_bf16_single_gpu_has_no_quant_or_allreduce() {
        let c = Catalog::builtin();
        let a = &c.model("llama-3-8b").unwrap().arch;
        let n = launches_per_layer(a, DType::Bf16, 1);
        assert_eq!((n.dense, n.moe), (10.0, 14.0));
        // 32 layers · 10 launches · t_launch; TP 2 adds 2 all-reduces a layer
        let e = sglang();
        let t1 = forward_host_time(&e, a, DType::Bf16, 1, 1.0).get();
        let t2 = forward_host_time(&e, a, DType::Bf16, 2, 1.0).get();
        assert!((t1 - 320.0 * e.eager_launch_s).abs() < 1e-12);
        assert!((t2 - 384.0 * e.eager_launch_s).abs() < 1e-12);
        // half the layers (a pipeline stage): half the time
        let half = forward_host_time(&e, a, DType::Bf16, 1, 0.5).get();
        assert!((half - t1 / 2.0).abs() < 1e-15);
    }

    #[test]
    fn graphed_engines_have_no_floor() {
        let c = Catalog::builtin();
        let a = &c.model("llama-3-8b").unwrap().arch;
        for name in ["vllm", "trtllm", "ideal"] {
            let e = EngineProfile::builtin(name).unwrap();
            assert_eq!(forward_host_time(&e, a, DType::Bf16, 8, 1.0), Seconds::ZERO);
        }
    }
}
