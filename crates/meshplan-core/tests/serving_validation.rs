//! Serving predictions vs published measurements (data/serving): median
//! |error| in-sample (vLLM/SGLang's own benchmarks, the only end-to-end data
//! fitted on) and held out (TensorRT-LLM tables, never fitted on).

#![allow(clippy::print_stdout)] // the comparison table is the report (cargo test -- --nocapture)

use meshplan_core::inference::serving::EngineProfile;
use meshplan_core::inference::validation::{compare, fit, rows};
use meshplan_core::Catalog;

#[test]
fn every_row_is_sourced_and_split() {
    let rows = rows().unwrap();
    assert!(rows.len() >= 20);
    for r in &rows {
        assert!(r.source.starts_with("https://"), "{}", r.id);
        assert!(r.split == "fit" || r.split == "heldout", "{}", r.id);
        // TensorRT-LLM / NIM figures are validation only
        if r.engine == "trtllm" || r.source.contains("TensorRT-LLM") {
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
    for e in ["vllm", "sglang", "trtllm"] {
        let p = EngineProfile::builtin(e).unwrap();
        assert!(
            (p.step_overhead_s - o).abs() < 1e-9,
            "{e}: {}",
            p.step_overhead_s
        );
        assert_eq!(p.gemm_half_tokens, h, "{e}");
    }
}
