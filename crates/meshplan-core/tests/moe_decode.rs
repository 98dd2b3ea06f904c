//! MoE decode mechanisms (issue 26, decode): the measured generation MLA
//! module, the latent KV every tensor-parallel rank reads whole, and the
//! fixed time of the dense GEMM calls around the MoE layer.
//!
//! 1. The module curve reproduces points of its table, read by hand from
//!    ../shared/microbench/aiconfigurator (commit 095f58a; path, row and
//!    value in each comment).
//! 2. A DeepSeek-V3 decode step's KV/attention term derived by hand from
//!    the curve's parameters (data/engines/kernels.toml).

mod common;

use common::{close, curve, infer as run};
use meshplan_core::inference::kernels::{Curve, KernelSet};
use meshplan_core::units::DType;
use meshplan_core::Catalog;

/// DeepSeek-V3's attention weights of one layer at h heads per GPU, by
/// hand: latent projections 7168·(1536 + 512 + 64) = 15,138,816, q_b
/// 1536·h·192, kv_b 512·h·256, o_proj h·128·7168.
fn w_attn(h: f64) -> f64 {
    15_138_816.0 + 1536.0 * h * 192.0 + 512.0 * h * 256.0 + h * 128.0 * 7168.0
}

/// The whole MLA generation module, block-fp8 GEMMs and bf16 KV (576
/// elements of 2 B per cached token), t = t0 + B·t_seq + (w_attn + KV)/BW.
/// Table h200_sxm/mla/vllm/0.24.0/mla_generation_module_perf.parquet
/// (FLASH_ATTN_MLA, 16 heads): batch 32 step 2048: 0.1310 ms; batch 64 step
/// 1024: 0.1306 ms; batch 1 step 2: 0.0893 ms. h100_sxm/mla/vllm/0.24.0,
/// 8 heads, batch 1 step 256: 0.0876 ms. KV = B·(step + 1)·576·2 B.
/// Tolerance 15 % (the fit's p90 over its 756 rows is 11-13 %).
#[test]
fn mla_module_curve_reproduces_the_tables() {
    let t = |c: &Curve, h: f64, b: f64, step: f64| {
        let kv = b * (step + 1.0) * 576.0 * 2.0;
        c.attention_time(b, w_attn(h) + kv, 0.0).get()
    };
    let h200 = curve("h200_sxm", "vllm", "mla_module", "fp8_block/bf16");
    close(
        t(h200, 16.0, 32.0, 2048.0),
        131.0e-6,
        0.15,
        "h200 B=32 S=2k",
    );
    close(
        t(h200, 16.0, 64.0, 1024.0),
        130.6e-6,
        0.15,
        "h200 B=64 S=1k",
    );
    close(t(h200, 16.0, 1.0, 2.0), 89.3e-6, 0.15, "h200 B=1");
    let h100 = curve("h100_sxm", "vllm", "mla_module", "fp8_block/bf16");
    close(t(h100, 8.0, 1.0, 256.0), 87.6e-6, 0.15, "h100 8 heads B=1");
    // the module's fixed time is most of it at decode batch sizes: ~85 µs
    // of ~130, against ~12 µs for the attention kernel alone
    assert!(h200.t0_s > 5.0 * curve("h200_sxm", "sglang", "mla", "bf16").t0_s);
}

/// SGLang has no module table: it borrows vLLM's on the same chip; a chip
/// without one (H800) has none.
#[test]
fn sglang_borrows_the_vllm_module() {
    let cat = Catalog::builtin();
    let s = KernelSet::for_chip("sglang", cat.chip("h100").unwrap()).unwrap();
    let m = s.mla_module(DType::Fp8, DType::Bf16).unwrap();
    assert!(m.borrowed);
    assert_eq!(m.curve.engine, "vllm");
    assert_eq!(m.curve.system, "h100_sxm");
}

/// DeepSeek-V3 fp8 with a bf16 latent cache on 8 H200 under vLLM, TP 8,
/// batch 32, context 1500. By hand from the h200_sxm vLLM module curve
/// (t0 = 83.27 µs, t_seq = 0.177 µs, BW = 4.05 TB/s): each GPU attends all
/// 32 sequences (one attention group of Y = 8) over h = 128/8 = 16 heads
/// and reads their whole latent cache, KV_l = 32·1500·576·2 = 55,296,000 B
/// per layer (not the 1/8 a head-sharded cache would give), w_attn(16) =
/// 36,634,624 B at 1 B per fp8 weight:
/// T_attn = 61·(83.27e-6 + 32·0.177e-6 + (36,634,624 + 55,296,000)/4.05e12)
///        = 61·(83.27 + 5.664 + 22.699) µs = 6.8096 ms.
#[test]
fn deepseek_decode_attention_from_the_mla_module() {
    let r = run(r#"
model = { name = "deepseek-v3" }
hardware = { chip = "h200", chips = 8 }
inference = { engine = "vllm", weights_dtype = "fp8", kv_dtype = "bf16", batch = 32, prompt_len = 1000, gen_len = 500, context = 1500 }
"#);
    let want = 61.0 * (83.27e-6 + 32.0 * 0.177e-6 + (36_634_624.0 + 55_296_000.0) / 4.05e12);
    close(want, 6.8096e-3, 1e-4, "hand arithmetic");
    close(r.decode_kv_load_time_s.get(), want, 1e-6, "T_attn");
}

/// The book's engine keeps the book's KV term: B·KV/(N·W_hbm), the cache
/// split over the N chips, no module.
#[test]
fn ideal_engine_keeps_the_book_kv_term() {
    let r = run(r#"
model = { name = "deepseek-v3" }
hardware = { chip = "h200", chips = 8 }
inference = { engine = "ideal", weights_dtype = "fp8", kv_dtype = "bf16", batch = 32, prompt_len = 1000, gen_len = 500, context = 1500 }
"#);
    // 32·1500 tokens · 70,272 B (576·61·2) / (8·4.8e12)
    let want = 32.0 * 1500.0 * 70_272.0 / (8.0 * 4.8e12);
    close(r.decode_kv_load_time_s.get(), want, 1e-6, "book KV term");
}

/// An engine keeps an MLA model's latent cache whole on every TP rank (the
/// KV the decode step reads per GPU), so the largest batch counts Y copies:
/// DeepSeek-V3 (61 layers, latent 512 + rope 64 = 576 elements per token per
/// layer, fp8 → 35,136 B per token; 8,192 tokens → 287,834,112 B per
/// sequence) on 8 H200 at TP 8 holds 8 copies, so the largest batch is the
/// ideal engine's divided by 8 (both floors of the same free HBM).
#[test]
fn an_engine_holds_one_mla_latent_per_tp_rank() {
    let at = |engine: &str| {
        run(&format!(
            r#"
model = {{ name = "deepseek-v3" }}
hardware = {{ chip = "h200", chips = 8 }}
inference = {{ engine = "{engine}", weights_dtype = "fp8", kv_dtype = "fp8", batch = 8, prompt_len = 4096, gen_len = 4096, context = 8192 }}
"#
        ))
    };
    let (ideal, sglang) = (at("ideal"), at("sglang"));
    assert_eq!(ideal.kv_cache_bytes_per_sequence.get(), 287_834_112.0);
    let free = ideal.free_hbm_bytes_per_device.get();
    assert_eq!(ideal.max_batch, (8.0 * free / 287_834_112.0).floor() as u64);
    assert_eq!(sglang.max_batch, (free / 287_834_112.0).floor() as u64);
    assert_eq!(
        sglang.kv_cache_bytes_per_device.get(),
        8.0 * ideal.kv_cache_bytes_per_device.get()
    );
}
