//! Issue 25 item 1: the routed experts' GEMMs priced on the profile's
//! grouped-GEMM curve (fitted on the aiconfigurator MoE tables,
//! scripts/fit_chip_profiles.py), not on the dense GEMM curve. The
//! expected difference is derived by hand below.

use meshplan_core::fidelity::data::Run;
use meshplan_core::fidelity::EfficiencyProfile;
use meshplan_core::parallelism::{Degrees, Framework, Remat, TrainConfig};
use meshplan_core::step::calibrated::Features;
use meshplan_core::Catalog;

/// Mixtral 8x7B on 8 H100 (dp 8 = ep 8: one expert per GPU), 4 micro-batches
/// of one 4,096-token sequence, no recompute, Megatron on InfiniBand.
///
/// Each GPU routes 4,096·top-2 = 8,192 token-rows; its one expert receives
/// ep·8,192/8 = 8,192 rows, so the up GEMM is [8192, 4096]×[4096, 28672] and
/// the down GEMM [8192, 14336]×[14336, 4096]: x = min(m, k, n) = 4,096 for
/// both (no 128-padding). Their FLOPs per layer: 2·8192·4096·28672 +
/// 2·8192·14336·4096 = 6·8192·4096·14336, times the busiest expert's 1.25
/// (GShard's capacity factor).
///
/// Dense curve (h100 [curves] bf16): e_d = 0.861·0.8129·4096/(4096 + 17.5);
/// grouped (h100 [curves.grouped_gemm] bf16): e_g = 0.861·0.6571·4096/(4096 +
/// 223.7); 0.861 the Megatron stack share of the InfiniBand sub-profile.
/// The step's matmul time differs by m·L·3 passes·1.25·FLOPs/C·(1/e_g − 1/e_d),
/// m = 4, L = 32, C = 989.5 TFLOP/s.
#[test]
fn routed_experts_use_the_grouped_gemm_curve() {
    let cat = Catalog::builtin();
    let chip = cat.chip("h100").expect("h100");
    let spec = cat.model("mixtral-8x7b").expect("mixtral");
    let prof = EfficiencyProfile::builtin("h100")
        .expect("profile")
        .for_network("infiniband");
    let mut dense = prof.clone();
    if let Some(c) = dense.curves.as_mut() {
        c.grouped_gemm.clear();
    }
    let cfg = TrainConfig {
        batch_tokens: 8 * 4 * 4096,
        seq_len: 4096,
        framework: Framework::Megatron,
        remat: Remat::None,
        degrees: Degrees {
            dp: 8,
            ep: 8,
            ..Default::default()
        },
        microbatches: 4,
        ..Default::default()
    };
    let run = Run::of_config(&spec.arch, &cfg, "h100").expect("maps");
    let f = Features::default();
    let grouped = run.predict_time_with(chip, &prof, &f).0.matmul;
    let plain = run.predict_time_with(chip, &dense, &f).0.matmul;
    let e_d = 0.861 * 0.8129 * 4096.0 / (4096.0 + 17.5);
    let e_g = 0.861 * 0.6571 * 4096.0 / (4096.0 + 223.7);
    let flops = 6.0 * 8192.0 * 4096.0 * 14336.0 * 1.25;
    let want = 4.0 * 32.0 * 3.0 * flops / 989.5e12 * (1.0 / e_g - 1.0 / e_d);
    let got = grouped - plain;
    assert!(
        ((got - want) / want).abs() < 1e-9,
        "grouped − dense matmul: got {got}, want {want}"
    );
    // the detailed view names the curve and the shape it read
    let d = run.predict_time_detailed(chip, &prof, &f);
    let e = d.schedule.expert_gemm.expect("grouped pricing");
    assert_eq!(e.rows_per_expert, 8192.0);
    assert_eq!(e.x, 4096.0);
    assert!((e.efficiency - e_g).abs() < 1e-12, "{}", e.efficiency);
    assert!((e.dense_efficiency - e_d).abs() < 1e-12);
    assert!(run
        .predict_time_detailed(chip, &dense, &f)
        .schedule
        .expert_gemm
        .is_none());
}

/// Small per-expert M: with 64 experts of which each GPU holds 8 (ep 8) and
/// top-2 routing of 512 tokens, each local expert gets 8·1024/64 = 128
/// rows; the grouped curve's efficiency there is 0.861·0.6571·128/(128 +
/// 223.7) of peak (x = 128) — a third of the dense curve's
/// 0.861·0.8129·128/(128 + 17.5) at the same x.
#[test]
fn the_grouped_curve_falls_at_small_per_expert_rows() {
    let e_g = 0.6571 * 128.0 / (128.0 + 223.7);
    let e_d = 0.8129 * 128.0 / (128.0 + 17.5);
    let c = meshplan_core::fidelity::profile::GemmCurve {
        dtype: "bf16".into(),
        efficiency: 0.6571,
        half_dim: 223.7,
        source: String::new(),
    };
    let prof = EfficiencyProfile::builtin("h100").expect("profile");
    let g = prof
        .curves
        .as_ref()
        .and_then(|c| c.grouped_gemm_of("bf16"))
        .expect("h100 grouped bf16 curve");
    assert_eq!((g.efficiency, g.half_dim), (c.efficiency, c.half_dim));
    assert!((g.efficiency_at(128.0, 4096.0, 1408.0) - e_g).abs() < 1e-15);
    assert!(e_g / e_d < 0.5, "{e_g} vs {e_d}");
}
