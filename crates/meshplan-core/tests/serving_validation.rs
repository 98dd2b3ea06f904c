//! Serving predictions vs published measurements (data/serving): median
//! |error| in-sample (vLLM/SGLang's own benchmarks, the only end-to-end data
//! fitted on) and held out (TensorRT-LLM tables, never fitted on).

#![allow(clippy::print_stdout)] // the comparison table is the report (cargo test -- --nocapture)

use meshplan_core::inference::serving::EngineProfile;
use meshplan_core::inference::validation::{compare, fit, rows};
use meshplan_core::units::DType;
use meshplan_core::Catalog;

#[test]
fn every_row_is_sourced_and_split() {
    let rows = rows().unwrap();
    assert!(rows.len() >= 20);
    for r in &rows {
        assert!(r.source.starts_with("https://"), "{}", r.id);
        assert!(r.split == "fit" || r.split == "heldout", "{}", r.id);
        // TensorRT-LLM / NIM figures are validation only
        if r.engine.starts_with("trtllm")
            || r.source.contains("TensorRT-LLM")
            || r.source.contains("nvidia.com/nim")
        {
            assert_eq!(r.split, "heldout", "{} is reserved for validation", r.id);
        }
    }
}

#[test]
fn comparison_report() {
    let s = compare(Catalog::builtin()).unwrap();
    for r in &s.rows {
        println!(
            "{:40} {:8} {:30} measured {:>10.4} predicted {:>10.4} error {:+.1}%",
            r.id,
            r.split,
            r.metric,
            r.measured,
            r.predicted,
            100.0 * r.error
        );
        assert!(r.predicted.is_finite() && r.predicted > 0.0, "{}", r.id);
    }
    for (split, fam, n, m) in &s.by_metric {
        println!(
            "{split:8} {fam:16} {n:3} rows  median |error| {:.1}%",
            100.0 * m
        );
    }
    println!(
        "median |error|: in-sample {:.1}%, held out {:.1}%",
        100.0 * s.fit_median_abs_error,
        100.0 * s.heldout_median_abs_error
    );
    // regression guards on what docs/inference.md reports (not targets)
    assert!(s.fit_median_abs_error < 0.15, "{}", s.fit_median_abs_error);
    assert!(
        s.heldout_median_abs_error < 0.40,
        "{}",
        s.heldout_median_abs_error
    );
}

/// The fitted numbers in data/engines/{vllm,sglang}.toml are what `fit`
/// finds on the fit rows (and trtllm.toml copies them).
#[test]
fn shipped_profiles_hold_the_fit() {
    let (o, h) = fit(Catalog::builtin()).unwrap();
    println!("fit: step_overhead_s = {o:e}, gemm_half_tokens = {h}");
    for e in ["vllm", "sglang", "trtllm", "trtllm-2023"] {
        let p = EngineProfile::builtin(e).unwrap();
        assert!(
            (p.step_overhead_s - o).abs() < 1e-9,
            "{e}: {}",
            p.step_overhead_s
        );
        assert_eq!(p.gemm_half_tokens, h, "{e}");
    }
}

/// Least-squares fit (log error) of `η·M/(M + M½)` on the grid η = 0.005k,
/// M½ = 0…1024 to `(M, efficiency)` points.
fn fit_curve(pts: &[(f64, f64)]) -> (f64, f64) {
    let mut best = (f64::INFINITY, 0.0, 0.0);
    for k in 1..=200 {
        let eta = 0.005 * k as f64;
        for h in 0..=1024 {
            let h = h as f64;
            let err: f64 = pts
                .iter()
                .map(|&(m, e)| ((eta * m / (m + h)).ln() - e.ln()).powi(2))
                .sum();
            if err < best.0 - 1e-12 {
                best = (err, eta, h);
            }
        }
    }
    (best.1, best.2)
}

/// The FP8 GEMM curves of the engine profiles are the fits they cite: all
/// 18 shapes of DeepGEMM's H800 table (its own kernels for today's engines,
/// its CUTLASS 3.6 baseline = TFLOPS / speedup for 2023's TensorRT-LLM)
/// over the FP8 peak.
#[test]
fn fp8_gemm_curves_are_the_microbenchmark_fits() {
    let csv = include_str!("../../../data/engines/fp8-gemm-h800.csv");
    // DeepGEMM's H800 is the SXM part: the H100 SXM's tensor cores (the
    // catalog's h800 entry is the PCIe card's 1.51 PFLOP/s)
    let peak = Catalog::builtin()
        .chip("h100")
        .unwrap()
        .flops(DType::Fp8)
        .get();
    let (mut own, mut base) = (Vec::new(), Vec::new());
    for line in csv.lines().skip(1) {
        let f: Vec<f64> = line.split(',').map(|x| x.parse().unwrap()).collect();
        own.push((f[0], f[3] * 1e12 / peak));
        base.push((f[0], f[3] / f[4] * 1e12 / peak));
    }
    assert_eq!(own.len(), 18);
    // M = 64, N = 2112, K = 7168: 206 TFLOP/s, 2.7x the baseline: 76.3 TFLOP/s = 0.0386 of 1979
    assert!((base[0].1 - 206.0 / 2.7 / 1979.0).abs() < 1e-12);
    let (fo, fb) = (fit_curve(&own), fit_curve(&base));
    println!("FP8 GEMM fits: own {fo:?}, CUTLASS 3.6 baseline {fb:?}");
    for (e, (eta, half)) in [
        ("vllm", fo),
        ("sglang", fo),
        ("trtllm", fo),
        ("trtllm-2023", fb),
    ] {
        let p = EngineProfile::builtin(e).unwrap();
        assert_eq!(p.lowp_gemm_efficiency, Some(eta), "{e}");
        assert_eq!(p.lowp_gemm_half_tokens, Some(half), "{e}");
        // 16-bit GEMMs keep the fitted bf16 curve
        assert_eq!(
            p.gemm_efficiency_for(DType::Bf16, 4096.0),
            p.gemm_efficiency_at(4096.0)
        );
    }
}
