//! Issue 26 part 3: the Blackwell Ultra chip files (B300, GB300 NVL72) parse,
//! and `hw show`'s derived figures match values derived by hand from
//! NVIDIA's published system figures (the derivation in each comment).

use meshplan_core::hardware::report::{hw_report, HwReport};
use meshplan_core::trace::NoTrace;
use meshplan_core::units::DType;
use meshplan_core::Catalog;

fn rel(a: f64, b: f64) -> f64 {
    (a - b).abs() / b.abs()
}

fn report(chip: &str) -> HwReport {
    hw_report(Catalog::builtin().chip(chip).unwrap(), &mut NoTrace)
}

fn peak(chip: &str, d: DType) -> Option<f64> {
    Catalog::builtin()
        .chip(chip)
        .unwrap()
        .peak
        .get(d)
        .map(|p| p.get())
}

/// HGX B300 (8 GPUs): FP4 108 PF dense → 13.5e15 per GPU; BF16 36 PF and
/// FP8 72 PF with sparsity → 36/2/8 = 2.25e15 and 72/2/8 = 4.5e15; 2.3 TB
/// HBM3e / 8 ≈ 288 GB at 8 TB/s. Critical intensities by hand:
/// bf16 2.25e15 / 8e12 = 281.25 FLOPs/B, fp4 13.5e15 / 8e12 = 1687.5;
/// NVLink one-way 900 GB/s: 2.25e15 / 9e11 = 2500 (as B200, book ch12).
#[test]
fn b300_figures_and_rooflines() {
    assert_eq!(peak("b300", DType::Fp4), Some(108e15 / 8.0));
    assert_eq!(peak("b300", DType::Fp8), Some(72e15 / 2.0 / 8.0));
    assert_eq!(peak("b300", DType::Bf16), Some(36e15 / 2.0 / 8.0));
    let r = report("b300");
    assert!(rel(r.critical_intensity_hbm, 281.25) < 1e-12);
    assert!(rel(r.critical_intensity_hbm_fp4.unwrap(), 1687.5) < 1e-12);
    assert!(rel(r.critical_intensity_nvlink.unwrap(), 2500.0) < 1e-12);
    let c = Catalog::builtin().chip("HGX B300").unwrap();
    assert!(rel(c.hbm_capacity.get(), 288e9) < 1e-12);
    assert!(rel(c.hbm_bandwidth.get(), 8e12) < 1e-12);
}

/// GB300 NVL72 (72 GPUs): FP4 1,080 PF dense → 15e15 per GPU; BF16 360 PF
/// with sparsity → 360/2/72 = 2.5e15; 576 TB/s / 72 = 8 TB/s; NVLink
/// 130 TB/s / 72 ≈ 1.8 TB/s both ways → 900 GB/s one way, 72-GPU domain.
/// Critical intensities: bf16 2.5e15 / 8e12 = 312.5, fp4 15e15 / 8e12 =
/// 1875, NVLink 2.5e15 / 9e11 = 2777.8.
#[test]
fn gb300_figures_and_rooflines() {
    assert_eq!(peak("gb300-nvl72", DType::Fp4), Some(1080e15 / 72.0));
    assert_eq!(peak("gb300-nvl72", DType::Bf16), Some(360e15 / 2.0 / 72.0));
    assert_eq!(peak("gb300-nvl72", DType::Fp8), Some(720e15 / 2.0 / 72.0));
    let r = report("GB300");
    assert!(rel(r.critical_intensity_hbm, 312.5) < 1e-12);
    assert!(rel(r.critical_intensity_hbm_fp4.unwrap(), 1875.0) < 1e-12);
    assert!(rel(r.critical_intensity_nvlink.unwrap(), 2.5e15 / 9e11) < 1e-12);
    let c = Catalog::builtin().chip("gb300-nvl72").unwrap();
    assert!(rel(c.hbm_bandwidth.get(), 576e12 / 72.0) < 1e-12);
}

/// Blackwell Ultra's gain is fp4 (1.5× Blackwell's dense fp4, NVIDIA's
/// "1.5x more dense FP4") and capacity (288 vs 180/186 GB), not bf16/fp8.
#[test]
fn ultra_vs_blackwell() {
    let r = |a: &str, b: &str, d| peak(a, d).unwrap() / peak(b, d).unwrap();
    assert!(rel(r("gb300-nvl72", "gb200-nvl72", DType::Fp4), 1.5) < 1e-12);
    assert!(rel(r("b300", "b200", DType::Bf16), 1.0) < 1e-12);
    assert!(rel(r("b300", "b200", DType::Fp4), 1.5) < 1e-12);
}
