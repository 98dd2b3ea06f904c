//! Issue 25 part 1: every catalog chip has an efficiency profile whose
//! figures name a microbenchmark (or a stated literature) source, no
//! profile is a silent copy of another chip's, and each GEMM curve
//! reproduces points read by hand off the microbenchmark tables.

use meshplan_core::fidelity::profile::{EfficiencyProfile, Param};
use meshplan_core::hardware::report::hw_report;
use meshplan_core::trace::NoTrace;
use meshplan_core::Catalog;

/// The chip-level figures of a profile: what a chip's measurements set.
const CHIP_LEVEL: [Param; 6] = [
    Param::MatmulEfficiency,
    Param::MatmulHalfDim,
    Param::AttentionEfficiency,
    Param::HbmEfficiency,
    Param::IntraNodeEfficiency,
    Param::CollectiveLatencyS,
];

/// Every vendor chip of the catalog.
fn chips() -> Vec<String> {
    Catalog::builtin()
        .chips()
        .into_iter()
        .filter(|c| !c.name.contains('@'))
        .map(|c| c.name.clone())
        .collect()
}

#[test]
fn every_catalog_chip_has_a_profile_with_sources_and_curves() {
    let names = chips();
    assert!(names.len() >= 14, "{names:?}");
    for c in &names {
        let p = EfficiencyProfile::builtin(c).unwrap_or_else(|| panic!("no profile for {c}"));
        for q in CHIP_LEVEL
            .iter()
            .chain(&[Param::MatmulStackShare, Param::InterNodeEfficiency])
        {
            let s = p.sources.get(q.name()).map_or("", String::as_str);
            assert!(s.len() > 20, "{c}: {} has no source ({s:?})", q.name());
        }
        let curves = p
            .curves
            .as_ref()
            .unwrap_or_else(|| panic!("{c}: no [curves]"));
        let g = curves
            .gemm
            .first()
            .unwrap_or_else(|| panic!("{c}: no GEMM curve"));
        assert!(!g.source.is_empty() && curves.attention.is_some(), "{c}");
        assert!(!curves.collectives.is_empty(), "{c}: no collective curve");
        // the pricer's one-number GEMM figures are the bf16 (V100: fp16) curve
        assert_eq!(
            (p.matmul_efficiency, p.matmul_half_dim),
            (g.efficiency, g.half_dim),
            "{c}"
        );
    }
}

/// Two profiles whose chip-level figures are all equal must say why: the
/// GEMM source of the one that shares says `shared` and with which chip.
#[test]
fn no_profile_is_a_silent_copy_of_another_chip() {
    let ps: Vec<EfficiencyProfile> = chips()
        .iter()
        .map(|c| EfficiencyProfile::builtin(c).unwrap())
        .collect();
    let vector =
        |p: &EfficiencyProfile| -> Vec<f64> { CHIP_LEVEL.iter().map(|&q| p.param(q)).collect() };
    for (i, a) in ps.iter().enumerate() {
        for b in &ps[i + 1..] {
            if vector(a) != vector(b) {
                continue;
            }
            let says = |p: &EfficiencyProfile| {
                p.sources[Param::MatmulEfficiency.name()].contains("shared")
            };
            assert!(
                says(a) || says(b),
                "{} and {} have the same chip-level figures and neither GEMM source says why",
                a.chip,
                b.chip
            );
        }
    }
    // the A100 is measured, not the H100 fit transferred (issue 25)
    let (a, h) = (
        EfficiencyProfile::builtin("a100-80gb").unwrap(),
        EfficiencyProfile::builtin("h100").unwrap(),
    );
    assert_ne!(vector(&a), vector(&h));
    assert!(a.sources["matmul_efficiency"].contains("a100_sxm/gemm"));
}

/// (m, n, k, measured fraction of the bf16 peak). Each read by hand off
/// the aiconfigurator systems data (commit 095f58a, `<system>/gemm/vllm/
/// <version>/gemm_perf.parquet`, bf16 rows): fraction = 2mnk / (latency ·
/// peak), peaks of the catalog entries (A100 312, H100/H200 989.5, B200
/// 2,250, GB200 2,500 TFLOP/s). E.g. H100 8192³: 1.5417 ms → 2·8192³ /
/// 1.5417e-3 = 713.2 TFLOP/s = 0.7207 of 989.5.
type Points = [(f64, f64, f64, f64); 5];

fn check_curve(chip: &str, pts: &Points, geo_tol: f64) {
    let p = EfficiencyProfile::builtin(chip).unwrap();
    let g = p.curves.as_ref().unwrap().gemm_of("bf16").unwrap();
    let mut sum = 0.0;
    for &(m, n, k, meas) in pts {
        let r = g.efficiency_at(m, n, k) / meas;
        assert!(
            (r - 1.0).abs() < 0.35,
            "{chip} {m}x{n}x{k}: curve/measured {r}"
        );
        sum += r.ln();
    }
    let geo = (sum / pts.len() as f64).exp();
    assert!(
        (geo - 1.0).abs() < geo_tol,
        "{chip}: geometric mean curve/measured {geo}"
    );
}

#[test]
fn gemm_curves_reproduce_hand_read_table_points() {
    // a100_sxm vllm 0.14.0: 4096³ 0.5395 ms; 8192³ 3.7434 ms; 4096×8192×8192
    // 1.9781 ms; 2048×4096×4096 0.3052 ms; 8192×4096×16384 4.0481 ms
    check_curve(
        "a100-80gb",
        &[
            (4096., 4096., 4096., 0.8165),
            (8192., 8192., 8192., 0.9414),
            (4096., 8192., 8192., 0.8908),
            (2048., 4096., 4096., 0.7216),
            (8192., 4096., 16384., 0.8706),
        ],
        0.10,
    );
    // h100_sxm vllm 0.24.0: 0.1660, 1.5417, 0.6977, 0.0867, 1.4811 ms
    check_curve(
        "h100",
        &[
            (4096., 4096., 4096., 0.8366),
            (8192., 8192., 8192., 0.7207),
            (4096., 8192., 8192., 0.7963),
            (2048., 4096., 4096., 0.8012),
            (8192., 4096., 16384., 0.7502),
        ],
        0.10,
    );
    // h200_sxm vllm 0.24.0: 0.1681, 1.6404, 0.6640, 0.0844, 1.3085 ms
    check_curve(
        "h200",
        &[
            (4096., 4096., 4096., 0.8264),
            (8192., 8192., 8192., 0.6774),
            (4096., 8192., 8192., 0.8367),
            (2048., 4096., 4096., 0.8232),
            (8192., 4096., 16384., 0.8492),
        ],
        0.10,
    );
    // b200_sxm vllm 0.24.0: 0.0902, 0.6519, 0.3222, 0.0447, 0.7692 ms
    check_curve(
        "b200",
        &[
            (4096., 4096., 4096., 0.6770),
            (8192., 8192., 8192., 0.7496),
            (4096., 8192., 8192., 0.7583),
            (2048., 4096., 4096., 0.6829),
            (8192., 4096., 16384., 0.6353),
        ],
        0.10,
    );
    // gb200 vllm 0.24.0: 0.0808, 1.0176, 0.2895, 0.0419, 0.6221 ms. The
    // table's mid-size GEMMs reach 0.66-0.76 of 2.5 PFLOP/s but its longest
    // run at 0.43-0.5 (power-capped): the time-weighted fit follows the long
    // ones, so the curve sits ~20 % under these points (a known limit of
    // the one-variable form, stated in the profile).
    check_curve(
        "gb200-nvl72",
        &[
            (4096., 4096., 4096., 0.6806),
            (8192., 8192., 8192., 0.4322),
            (4096., 8192., 8192., 0.7595),
            (2048., 4096., 4096., 0.6562),
            (8192., 4096., 16384., 0.7070),
        ],
        0.25,
    );
}

/// The pricer reads the curve times the framework's share: on the h100's
/// InfiniBand (Megatron-Core) profile an 8192³ GEMM runs at e_max · share ·
/// 8192/(8192 + x½) = 0.8129 · 0.861 · 0.99787 = 0.6984 of peak.
#[test]
fn pricer_applies_the_curve_times_the_stack_share() {
    let p = EfficiencyProfile::builtin("h100")
        .unwrap()
        .for_network("infiniband");
    let e = meshplan_core::step::calibrated::gemm_efficiency(&p, 8192.0, 8192.0, 8192.0);
    let by_hand = 0.8129 * 0.861 * 8192.0 / (8192.0 + 17.5);
    assert!((e - by_hand).abs() < 1e-9, "{e} vs {by_hand}");
    // the Playbook cluster keeps its own end-to-end value (nanotron)
    let pb = EfficiencyProfile::builtin("h100")
        .unwrap()
        .for_run("efa", "playbook-efa");
    assert_eq!(pb.matmul_efficiency, 0.460613);
}

#[test]
fn hw_show_lists_the_profile_curves() {
    let cat = Catalog::builtin();
    let h = cat.chip("h100").unwrap();
    let r = hw_report(h, &mut NoTrace);
    let text = meshplan_core::view::render_text(&meshplan_core::view::Render::doc(&r));
    let e = r.efficiency_profile.expect("h100 lists its profile");
    assert!(e.curves.gemm[0].source.contains("h100_sxm/gemm/vllm"));
    // the MoE experts' grouped-GEMM curves, from the MoE tables
    let g = e.curves.grouped_gemm_of("bf16").expect("grouped bf16");
    assert!(g.source.contains("h100_sxm/moe/trtllm"), "{}", g.source);
    assert!(text.contains("grouped GEMM (MoE) bf16"), "{text}");
    assert!(e
        .figures
        .iter()
        .any(|f| f.field == "matmul_efficiency" && f.source.contains("microbench")));
    // --explain: the pricer's efficiency at 8192³ on the h100's own
    // (InfiniBand, Megatron-Core) profile, 0.8129 · 0.861 · 8192/8209.5
    let mut rec = meshplan_core::trace::Recorder::default();
    let _ = hw_report(h, &mut rec);
    let st = rec.find("hw.profile.gemm_8192").expect("explain step");
    let by_hand = 0.8129 * 0.861 * 8192.0 / 8209.5;
    assert!((st.value - by_hand).abs() < 1e-12, "{}", st.value);
    // the book's figures carry no efficiency profile
    let b = cat.chip("h100@book").unwrap();
    assert!(hw_report(b, &mut NoTrace).efficiency_profile.is_none());
}
