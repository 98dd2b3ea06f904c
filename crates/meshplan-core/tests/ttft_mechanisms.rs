//! Time to first token mechanisms (docs/inference.md, "Time to first
//! token mechanisms"): each checked against a value derived by hand.

use meshplan_core::inference::serving::{EngineProfile, Workload};
use meshplan_core::inference::{evaluate, InferQuery, InferReport};
use meshplan_core::trace::NoTrace;
use meshplan_core::units::DType;
use meshplan_core::Catalog;

/// DeepSeek-V3 fp8 on 16 H100 (TP 16), concurrency 1, as the tt-inference-server sweep ran it.
fn dsv3_16h100(engine: EngineProfile, prompt: u64) -> InferReport {
    let cat = Catalog::builtin();
    let q = InferQuery {
        weights_dtype: DType::Fp8,
        kv_dtype: DType::Bf16,
        compute_dtype: DType::Fp8,
        batch: 1,
        prompt_len: prompt,
        gen_len: 128,
        context: prompt + 128,
        mesh: vec![16],
        tp: Some(16),
        engine: Some(engine),
        workload: Workload::Concurrency(1),
        ..InferQuery::default()
    };
    let m = cat.model("deepseek-v3").unwrap();
    evaluate(m, cat.chip("h100").unwrap(), &q, &mut NoTrace).unwrap()
}

/// SGLang prefills eagerly: a 128-token DeepSeek-V3 prefill on 16 H100 is
/// host-bound. By hand: 3 dense-MLP layers × 24 launches + 58 MoE layers ×
/// 28 = 1696 launches × 48.7 µs = 82.595 ms; plus the step's host cost
/// t_step = 2 ms and sampling the first token, 129,280 logits × 12 B /
/// (3.35 TB/s × 0.84) = 0.551 µs: 84.596 ms. The GPU side (weights 41.9 GB
/// per chip at 2.81 TB/s ≈ 14.9 ms, the TP all-reduces ≈ 6.2 ms) is far
/// below. TTFT adds SGLang's 6.6 ms frontend (tt-inference-server #3560:
/// 9.54 ms median TTFT − 2.632 ms mock forward − 0.31 ms per-step
/// overhead = 6.598 ms, 6.6 ms in the profile): 91.196 ms.
#[test]
fn sglang_short_prefill_is_the_host_launch_floor() {
    let e = EngineProfile::builtin("sglang").unwrap();
    assert_eq!(e.eager_launch_s, 4.87e-5);
    let r = dsv3_16h100(e, 128);
    let by_hand = 1696.0 * 4.87e-5 + 2e-3 + 129_280.0 * 12.0 / (3.35e12 * 0.84);
    let got = r.prefill_time_s.get();
    assert!((got - by_hand).abs() < 1e-9, "{got} vs {by_hand}");
    let ttft = r.serving.continuous.unwrap().ttft_s.mean;
    // the profile's frontend is that difference rounded to 0.1 ms
    let frontend = 9.54e-3 - 2.632e-3 - 0.31e-3;
    let t_fe = EngineProfile::builtin("sglang").unwrap().frontend_s;
    assert!((t_fe - frontend).abs() < 0.05e-3, "{t_fe} vs {frontend}");
    assert!((ttft - (by_hand + t_fe)).abs() < 1e-9, "{ttft}");
}

/// The floor is a max, not a sum: where the GPU work outlasts the launches
/// (an 8192-token prompt) the eager prefill takes what the same engine
/// with CUDA graphs would; at 128 tokens it takes longer by exactly the
/// host time the GPU waits, T_host − T_gpu.
#[test]
fn the_floor_binds_only_short_prefills() {
    let eager = EngineProfile::builtin("sglang").unwrap();
    let mut graphed = eager.clone();
    graphed.prefill_eager = false;
    let long = |e: &EngineProfile| dsv3_16h100(e.clone(), 8192).prefill_time_s.get();
    assert_eq!(long(&eager), long(&graphed));
    let short = |e: &EngineProfile| dsv3_16h100(e.clone(), 128).prefill_time_s.get();
    let (with, without) = (short(&eager), short(&graphed));
    // graphed: T_gpu + t_step + sampling; eager: T_host + t_step + sampling
    let t_host = 1696.0 * 4.87e-5;
    let t_step_and_sampling = 2e-3 + 129_280.0 * 12.0 / (3.35e12 * 0.84);
    let t_gpu = without - t_step_and_sampling;
    assert!(t_gpu > 0.0 && t_gpu < t_host, "{t_gpu}");
    assert!((with - without - (t_host - t_gpu)).abs() < 1e-9);
}

/// The routed experts at prefill token counts: an 8192-token DeepSeek-V3
/// prefill on 16 H100 (TP 16) is compute-bound with or without the fused-MoE
/// fit, so the fit changes it by exactly `T_moe − F_r/(N·C·η_gemm(8192))`.
/// By hand: F_r = 2·8192·653,908,770,816·8/256 = 3.348e14 FLOPs, at the fp8
/// GEMM curve 0.545·8192/(8192 + 181) over 16 × 1979 TFLOP/s: 19.83 ms;
/// T_moe = 58 layers × (256·3·7168·2048/16 B/(3.35e12·0.84) + 6·8192·8·7168·
/// 2048/16/(1979e12·0.491) + 8192·8·7168·8.49/3.35e12) = 58 × 1.8135 ms =
/// 105.18 ms; the prefill grows by 85.35 ms.
#[test]
fn routed_experts_at_the_fused_moe_kernels_cost() {
    let fitted = EngineProfile::builtin("sglang").unwrap();
    let mut dense_curve = fitted.clone();
    dense_curve.moe_prefill.clear();
    let t = |e: &EngineProfile| dsv3_16h100(e.clone(), 8192).prefill_time_s.get();
    let grew = t(&fitted) - t(&dense_curve);
    let f_r = 2.0 * 8192.0 * 653_908_770_816.0 * 8.0 / 256.0;
    let at_curve = f_r / (16.0 * 1979e12 * (0.545 * 8192.0 / (8192.0 + 181.0)));
    let per_layer = 256.0 * 3.0 * 7168.0 * 2048.0 / 16.0 / (3.35e12 * 0.84)
        + 6.0 * 8192.0 * 8.0 * 7168.0 * 2048.0 / 16.0 / (1979e12 * 0.491)
        + 8192.0 * 8.0 * 7168.0 * 8.49 / 3.35e12;
    let by_hand = 58.0 * per_layer - at_curve;
    assert!((grew - by_hand).abs() < 1e-6, "{grew} vs {by_hand}");
    assert!((by_hand - 0.08535).abs() < 2e-4, "{by_hand}");
}

/// A profile with an impossible or unsourced prefill MoE fit is refused
/// with a message that names it.
#[test]
fn bad_moe_prefill_fits_are_refused() {
    let text = include_str!("../../../data/engines/sglang.toml");
    let bad = text.replacen("efficiency = 0.491", "efficiency = 1.5", 1);
    let e = EngineProfile::from_toml(&bad, "x").unwrap_err().to_string();
    assert!(e.contains("moe_prefill efficiency = 1.5"), "{e}");
    let bad = text.replacen("act_bytes = 8.49", "act_bytes = -1", 1);
    let e = EngineProfile::from_toml(&bad, "x").unwrap_err().to_string();
    assert!(e.contains("act_bytes"), "{e}");
    let bad = text.replacen("chips = [\"h100\", \"h200\"]", "chips = []", 1);
    let e = EngineProfile::from_toml(&bad, "x").unwrap_err().to_string();
    assert!(e.contains("at least one chip"), "{e}");
    let unsourced = text.replace("\nmoe_prefill = \"", "\nmoe_prefill_x = \"");
    let e = EngineProfile::from_toml(&unsourced, "x")
        .unwrap_err()
        .to_string();
    assert!(e.contains("moe_prefill"), "{e}");
    let unsourced = text.replace("\neager_launch_s = \"", "\neager_launch = \"");
    let e = EngineProfile::from_toml(&unsourced, "x")
        .unwrap_err()
        .to_string();
    assert!(e.contains("eager_launch_s"), "{e}");
}
