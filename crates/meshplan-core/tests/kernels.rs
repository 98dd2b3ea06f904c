//! Decode kernels from measured per-operation tables (issue 26, part 2).
//!
//! 1. Each kind of fitted curve reproduces points of the table it was
//!    fitted to (read by hand from ../shared/microbench/aiconfigurator,
//!    commit 095f58a; path, row and value in each comment) within the
//!    stated tolerance.
//! 2. A decode step of a MoE model and of an int4 weight-only model derived
//!    by hand from the curves' parameters (data/engines/kernels.toml).
//! 3. The ideal engine and `@book` chips never see a curve.

mod common;

use common::{close, curve, infer as run};
use meshplan_core::hardware::Chip;
use meshplan_core::inference::kernels::{curves, KernelSet};
use meshplan_core::model::params;
use meshplan_core::trace::NoTrace;
use meshplan_core::units::DType;
use meshplan_core::Catalog;

fn chip(name: &str) -> Chip {
    Catalog::builtin().chip(name).unwrap().clone()
}

/// Decode GEMM, bf16 and block-scaled fp8, H200 under TensorRT-LLM:
/// t = t0 + N·K·b/BW. Table h200_sxm/gemm/trtllm/1.3.0rc20/gemm_perf.parquet:
/// bf16 m=1 n=8192 k=8192: 0.035616 ms; bf16 m=16 n=7168 k=16384: 0.065701 ms;
/// fp8_block m=1 n=8192 k=8192: 0.024357 ms; fp8_block m=16 n=7168 k=16384:
/// 0.038059 ms. Tolerance 10 % (the fit's p90 over its 2,928 rows is 8 %).
#[test]
fn gemm_curves_reproduce_the_h200_table() {
    let bf16 = curve("h200_sxm", "trtllm", "gemm", "bf16");
    close(
        bf16.time(8192.0 * 8192.0 * 2.0).get(),
        35.616e-6,
        0.10,
        "bf16 8192²",
    );
    close(
        bf16.time(7168.0 * 16384.0 * 2.0).get(),
        65.701e-6,
        0.10,
        "bf16 7168x16384",
    );
    let fp8 = curve("h200_sxm", "trtllm", "gemm", "fp8_block");
    close(
        fp8.time(8192.0 * 8192.0).get(),
        24.357e-6,
        0.10,
        "fp8 8192²",
    );
    close(
        fp8.time(7168.0 * 16384.0).get(),
        38.059e-6,
        0.10,
        "fp8 7168x16384",
    );
    // the decode GEMMs stream at 0.80-0.85 of the 4.8 TB/s peak: the
    // profile's η_hbm = 0.84 (data/engines/trtllm.toml) within 5 %
    close(bf16.bandwidth / 4.8e12, 0.84, 0.05, "bf16 fraction of peak");
    close(fp8.bandwidth / 4.8e12, 0.84, 0.05, "fp8 fraction of peak");
}

/// Weight-only int4 GEMM with its dequantisation, A100 under TensorRT-LLM:
/// t = t0 + max(N·K/2/BW, 2·M·N·K/F). Table
/// a100_sxm/gemm/trtllm/1.0.0/gemm_perf.parquet, int4_wo:
/// m=1 n=8192 k=8192: 0.037888 ms; m=8 n=8192 k=8192: 0.039936 ms;
/// m=64 n=8192 k=8192: 0.078848 ms (compute side). Tolerance 10 %.
#[test]
fn int4_weight_only_curve_reproduces_the_a100_table() {
    let c = curve("a100_sxm", "trtllm", "gemm", "int4_wo");
    let nk = 8192.0 * 8192.0;
    let t = |m: f64| c.t0_s + (nk * 0.5 / c.bandwidth).max(2.0 * m * nk / c.flops);
    close(t(1.0), 37.888e-6, 0.10, "int4 m=1");
    close(t(8.0), 39.936e-6, 0.10, "int4 m=8");
    close(t(64.0), 78.848e-6, 0.10, "int4 m=64");
    // its fixed time is more than twice the bf16 kernel's (7.6 µs, same table)
    let bf16 = curve("a100_sxm", "trtllm", "gemm", "bf16");
    assert!(c.t0_s > 2.0 * bf16.t0_s);
}

/// MoE grouped GEMM, DeepSeek-V3 shape (h 7168, i 2048, E 256, k 8) in
/// block fp8 at EP 8, power-law routing (α 1.01), H200 under TensorRT-LLM:
/// t = t0 + E_touched·3·h·i/BW with E_touched = 32·(1 − (1 − 8/256)^T).
/// Table h200_sxm/moe/trtllm/1.3.0rc20/moe_perf.parquet (moe_tp_size 1,
/// moe_ep_size 8): T=1: 0.040544 ms; T=16: 0.181997 ms; T=128: 0.340474 ms.
/// By hand: T=1 → 1.0 expert → 39.6 µs; T=16 → 12.75 → 175.3 µs; T=128 →
/// 31.45 → 391 µs (+15 %: the skewed routing concentrates tokens on fewer
/// experts than uniform routing). Tolerance 20 %.
#[test]
fn moe_curve_reproduces_the_h200_table() {
    let c = curve("h200_sxm", "trtllm", "moe", "fp8_block");
    let per_expert = 3.0 * 7168.0 * 2048.0;
    let t = |tokens: f64| {
        let touched = 32.0 * (1.0 - (1.0 - 8.0 / 256.0f64).powf(tokens));
        c.time(touched * per_expert).get()
    };
    close(t(1.0), 40.544e-6, 0.20, "T = 1");
    close(t(16.0), 181.997e-6, 0.20, "T = 16");
    close(t(128.0), 340.474e-6, 0.20, "T = 128");
}

/// Generation MLA with fp8 latent KV (576 B per token), H200 under
/// TensorRT-LLM: t = t0 + B·t_seq + max(KV/BW, F/C), F = B·S·heads·2·1088.
/// Table h200_sxm/mla/trtllm/1.3.0rc20/generation_mla_perf.parquet, batch 64:
/// 16 heads step 8191: 0.118608 ms (memory side); 128 heads step 8191:
/// 0.223803 ms (compute side); 16 heads step 1023: 0.031792 ms. Tolerance 20 %.
#[test]
fn mla_curve_reproduces_the_h200_table() {
    let c = curve("h200_sxm", "trtllm", "mla", "fp8");
    let t = |heads: f64, s: f64| {
        let kv = 64.0 * s * 576.0;
        let f = 64.0 * s * heads * 2.0 * 1088.0;
        c.attention_time(64.0, kv, f).get()
    };
    close(t(16.0, 8192.0), 118.608e-6, 0.20, "16 heads, 8k");
    close(t(128.0, 8192.0), 223.803e-6, 0.20, "128 heads, 8k");
    close(t(16.0, 1024.0), 31.792e-6, 0.20, "16 heads, 1k");
}

/// The engines' custom all-reduce and NCCL's all-to-all, two lines split at
/// 128 KiB. Tables: h100_sxm/comm/vllm/0.24.0/custom_allreduce_perf.parquet,
/// 8 GPUs, vllm_graph: 8,192 elements (16 KiB): 0.005310 ms; 131,072 (256
/// KiB): 0.010790 ms; 1,048,576 (2 MiB): 0.019390 ms.
/// h200_sxm/comm/nccl/2.29.2/nccl_perf.parquet alltoall half, 8 GPUs:
/// 65,536 elements: 0.00985 ms; 1,048,576: 0.01773 ms; 8,388,608: 0.07344 ms.
/// Tolerance 10 %.
#[test]
fn collective_curves_reproduce_the_tables() {
    let ar = curve("h100_sxm", "vllm", "allreduce", "8");
    close(ar.time(16384.0).get(), 5.310e-6, 0.10, "all-reduce 16 KiB");
    close(
        ar.time(262144.0).get(),
        10.790e-6,
        0.10,
        "all-reduce 256 KiB",
    );
    close(
        ar.time(2097152.0).get(),
        19.390e-6,
        0.10,
        "all-reduce 2 MiB",
    );
    let a2a = curve("h200_sxm", "nccl", "alltoall", "8");
    close(
        a2a.time(131072.0).get(),
        9.85e-6,
        0.10,
        "all-to-all 128 KiB",
    );
    close(
        a2a.time(2097152.0).get(),
        17.73e-6,
        0.10,
        "all-to-all 2 MiB",
    );
    close(
        a2a.time(16777216.0).get(),
        73.44e-6,
        0.10,
        "all-to-all 16 MiB",
    );
}

/// Every curve: physical (memory-bound curves at most their chip's catalog
/// HBM peak), sourced, and its in-sample median error under 35 %.
#[test]
fn every_curve_is_physical_and_fits_its_table() {
    for c in curves() {
        assert!(c.source.contains("commit 095f58a"), "{c:?}");
        assert!(
            c.median_error < 0.35,
            "{}/{}/{}/{}: {}",
            c.system,
            c.engine,
            c.op,
            c.key,
            c.median_error
        );
        if c.peak_bandwidth > 0.0 {
            assert!(c.bandwidth <= c.peak_bandwidth, "{c:?}");
        }
    }
}

/// The book's chips and the ideal engine see no curve; a chip without
/// tables (H800) neither.
#[test]
fn no_curves_for_the_book() {
    assert!(KernelSet::for_chip("trtllm", &chip("h100")).is_some());
    assert!(KernelSet::for_chip("trtllm", &chip("h100@book")).is_none());
    assert!(KernelSet::for_chip("ideal", &chip("h100")).is_none());
    assert!(KernelSet::for_chip("vllm", &chip("h800")).is_none());
    let h200 = chip("h200");
    let k = KernelSet::for_chip("sglang", &h200).unwrap();
    let own = k.moe(DType::Fp8, h200.hbm_bandwidth.get()).unwrap();
    assert_eq!(own.curve.key, "fp8_block");
    assert!(!own.transferred);
    assert_eq!(own.bandwidth, own.curve.bandwidth);
}

/// SGLang has no MoE table on the B200: its block-fp8 MoE comes from the
/// measured chip nearest in HBM bandwidth, the GB200 (8 TB/s, |ln 1| = 0),
/// with t0 as measured there and the fraction of peak it reached
/// (BW/W_fit) applied to the B200's 8 TB/s; bf16 has no Blackwell SGLang
/// table, so the H200's (4.8 TB/s: |ln(4.8/8)| = 0.51 < H100's
/// |ln(3.35/8)| = 0.87). By hand from data/engines/kernels.toml:
/// gb200 fp8_block t0 = 27.72 µs, 6.204 TB/s of 8 TB/s → 6.204 TB/s on
/// the B200; h200 bf16 t0 = 34.33 µs, 3.323 TB/s of 4.8 TB/s → 0.6923·8 =
/// 5.538 TB/s.
#[test]
fn a_missing_moe_table_is_transferred_from_the_nearest_measured_chip() {
    let b200 = chip("b200");
    let w = b200.hbm_bandwidth.get();
    assert_eq!(w, 8e12);
    let k = KernelSet::for_chip("sglang", &b200).unwrap();
    let fp8 = k.moe(DType::Fp8, w).unwrap();
    assert!(fp8.transferred);
    assert_eq!(
        (fp8.curve.system.as_str(), fp8.curve.key.as_str()),
        ("gb200", "fp8_block")
    );
    assert!((fp8.curve.t0_s - 27.72e-6).abs() < 1e-9);
    assert!((fp8.bandwidth / 6.204e12 - 1.0).abs() < 1e-3);
    let bf16 = k.moe(DType::Bf16, w).unwrap();
    assert_eq!(
        (bf16.curve.system.as_str(), bf16.curve.key.as_str()),
        ("h200_sxm", "bf16")
    );
    assert!((bf16.curve.t0_s - 34.33e-6).abs() < 1e-9);
    assert!((bf16.bandwidth / (3.323e12 / 4.8e12 * 8e12) - 1.0).abs() < 1e-3);
    // int8 experts: no MoE kernel anywhere
    assert!(k.moe(DType::Int8, w).is_none());
}

/// DeepSeek-V3 (fp8, 61 layers of which 58 MoE, E = 256, k = 8) on 8 H200
/// under TensorRT-LLM, TP 8, batch 32: by hand, per chip,
/// routed_dev = routed·1 B/8, the batch touches 1 − (1 − 8/256)³² = 0.6379
/// of them through the MoE curve (t0 = 28.08 µs per layer, 3.812 TB/s);
/// the attention weights P_attn/8 are priced inside the measured MLA
/// module (tests/moe_decode.rs), the dense rest through the block-fp8 GEMM
/// curve (t0 = 7.068 µs, 3.857 TB/s) in 58·3 + 3·2 + 1 = 181 calls (router
/// and shared expert's two per MoE layer, the MLP's two per dense layer,
/// the LM head):
/// T_w = (w_dev − routed_dev − P_attn/8)/3.857e12 + 181·7.068e-6
///     + 58·28.08e-6 + 0.6379·routed_dev/3.812e12.
#[test]
fn deepseek_decode_weights_from_the_moe_curve() {
    let r = run(r#"
model = { name = "deepseek-v3" }
hardware = { chip = "h200", chips = 8 }
inference = { engine = "trtllm", weights_dtype = "fp8", kv_dtype = "fp8", batch = 32, prompt_len = 1000, gen_len = 500 }
"#);
    let m = Catalog::builtin().model("deepseek-v3").unwrap();
    let p = params::count(&m.arch, &mut NoTrace);
    let routed_dev = p.experts_routed as f64 / 8.0;
    let w_dev = r.weights_bytes_per_device.get();
    let frac = 1.0 - (1.0 - 8.0 / 256.0f64).powi(32);
    close(frac, 0.6379, 1e-4, "experts touched");
    let attn = p.attention as f64 / 8.0;
    let want = (w_dev - routed_dev - attn) / 3.857e12
        + 181.0 * 7.068e-6
        + 58.0 * 28.08e-6
        + frac * routed_dev / 3.812e12;
    close(r.decode_weight_time_s.get(), want, 1e-6, "T_w");
    // the MoE layers' fixed time alone, 58·28 µs = 1.63 ms, is what the
    // bandwidth roofline missed
    assert!(r.decode_weight_time_s.get() > (w_dev - routed_dev * (1.0 - frac)) / (0.84 * 4.8e12));
}

/// Qwen3-235B-A22B (bf16, 94 MoE layers, E = 128, k = 8) on 8 B200 under
/// SGLang, TP 8, batch 1: SGLang has no MoE table on the B200, so the
/// H200's bf16 MoE curve at the fraction of peak it reached there
/// (t0 = 34.33 µs per layer, BW = 3.323e12/4.8e12·8e12 = 5.538e12 B/s)
/// prices the k/E = 1/16 of the routed experts one token touches; the
/// dense rest streams through the B200's own bf16 GEMM curve (t0 = 4.181
/// µs, 6.549 TB/s) in 94·3 + 1 = 283 calls (router, fused QKV and output
/// projection per layer, the LM head):
/// T_w = (w_dev − routed_dev)/6.549e12 + 283·4.181e-6 + 94·34.33e-6
///     + routed_dev/16/5.538e12.
/// The MoE layers' fixed time alone (3.23 ms) is more than the 0.83 ms the
/// bandwidth roofline gave the whole weight read before the transfer.
#[test]
fn qwen3_moe_decode_on_b200_from_the_transferred_moe_curve() {
    let r = run(r#"
model = { name = "qwen3-235b-a22b" }
hardware = { chip = "b200", chips = 8 }
inference = { engine = "sglang", batch = 1, prompt_len = 610, gen_len = 421 }
"#);
    let m = Catalog::builtin().model("qwen3-235b-a22b").unwrap();
    let p = params::count(&m.arch, &mut NoTrace);
    let routed_dev = 2.0 * p.experts_routed as f64 / 8.0;
    let w_dev = r.weights_bytes_per_device.get();
    let bw_moe = 3.323e12 / 4.8e12 * 8e12;
    let want = (w_dev - routed_dev) / 6.549e12
        + 283.0 * 4.181e-6
        + 94.0 * 34.33e-6
        + routed_dev / 16.0 / bw_moe;
    close(r.decode_weight_time_s.get(), want, 1e-3, "T_w");
    assert!(r.decode_weight_time_s.get() > 94.0 * 34.33e-6);
}

/// Llama-3.1-8B int4 weight-only on 1 H100 under vLLM, batch 1: no
/// weight-only GEMM table on H100, so A100 TensorRT-LLM's int4 curve at
/// the fractions of peak it reached there: BW = 1.584e12/2.039e12·3.35e12
/// = 2.6025e12 B/s, F = 1.573e14/3.12e14·989.5e12 = 4.9887e14 FLOP/s,
/// t0 = 17.41 µs per GEMM, 4 GEMMs per layer, 32 layers:
/// T_w = 32·4·17.41e-6 + w_dev/2.6025e12, T_math = 2·1·P_matmul/4.9887e14
/// (no separate dequantisation term: the curve includes it).
#[test]
fn int4_decode_from_the_weight_only_curve() {
    let r = run(r#"
model = { name = "llama-3.1-8b" }
hardware = { chip = "h100", chips = 1 }
inference = { engine = "vllm", weights_dtype = "int4", batch = 1, prompt_len = 1000, gen_len = 500 }
"#);
    assert_eq!(r.compute_dtype, DType::Bf16);
    let w_dev = r.weights_bytes_per_device.get();
    let bw = 1.584e12 / 2.039e12 * 3.35e12;
    close(
        r.decode_weight_time_s.get(),
        32.0 * 4.0 * 17.41e-6 + w_dev / bw,
        1e-6,
        "T_w",
    );
    let m = Catalog::builtin().model("llama-3.1-8b").unwrap();
    let p = params::count(&m.arch, &mut NoTrace);
    let f = 1.573e14 / 3.12e14 * 989.5e12;
    close(
        r.decode_compute_time_s.get(),
        2.0 * p.matmul_active as f64 / f,
        1e-6,
        "T_math",
    );
}
