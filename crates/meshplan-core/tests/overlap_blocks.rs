//! Issue 14 item 6, the knobs peers have: per-run TP / DP overlap settings
//! and the SP all-gather redo in the step-time prediction, and the step by
//! block (FLOPs, HBM bytes, roofline time). Expected values are derived by
//! hand in the comments.

mod common;
use common::{train, train_on};
use meshplan_core::fidelity::EfficiencyProfile;
use meshplan_core::scenario::Scenario;
use meshplan_core::step::calibrated::pipelined_exposed;
use meshplan_core::step::predict::Predicted;
use meshplan_core::trace::Recorder;
use meshplan_core::training::scenario::resolve;
use meshplan_core::training::TrainReport;
use meshplan_core::Catalog;

fn rel(a: f64, b: f64) -> f64 {
    ((a - b) / b).abs()
}

/// LLaMA-3 8B on one 8-GPU H100 node, tp 8 with SP, one 4,096-token
/// sequence, no remat, with `extra` `[training]` keys.
fn one_node(extra: &str) -> Predicted {
    train_on(
        "llama-3-8b",
        "h100",
        8,
        &format!(
            r#"
[training]
batch_tokens = 4096
seq_len = 4096
remat = "none"
{extra}
[parallelism]
tp = 8
sequence_parallel = true
"#
        ),
    )
    .predicted
    .expect("h100 has a profile")
}

/// One SP collective of the one-node run: tok·D·2 B = 4096·4096·2 =
/// 33,554,432 B, (tp−1)/tp of it over NVLink 450 GB/s one-way × 0.754 (the
/// InfiniBand sub-profile's intra_node_efficiency, from the aiconfigurator
/// h100_sxm nccl_perf table) = 339.3 GB/s: 0.875·33,554,432/339.3e9 =
/// 8.6533e-5 s; its ring latency 7 steps × 1.45 µs (collective_latency_s,
/// same table) = 1.015e-5 s. 8 collectives per layer (2 AG + 2 RS forward,
/// the same backward) × 32 layers × 1 micro-batch = 256.
const PER_OP: f64 = 0.875 * 33_554_432.0 / 339.3e9;
const RING_LAT: f64 = 7.0 * 1.45e-6;

#[test]
fn tp_overlap_none_exposes_every_collective() {
    let p = one_node("tp_overlap = \"none\"");
    let e = &p.overlap.exposure;
    // none: exposed = Σ collectives = 256·(8.6533e-5 + 1.015e-5) = 0.024751 s
    let want = 256.0 * (PER_OP + RING_LAT);
    assert!(
        rel(p.time_breakdown_s.tp_comm, want) < 1e-9,
        "{}",
        p.time_breakdown_s.tp_comm
    );
    assert!(rel(e.tp_transfer_s + e.tp_latency_s, p.time_breakdown_s.tp_comm) < 1e-12);
    assert_eq!(e.tp_collectives_per_layer, 8.0);
}

#[test]
fn tp_overlap_ring_is_the_fitted_fraction_and_the_default() {
    let f = EfficiencyProfile::builtin("h100")
        .unwrap()
        .for_network("infiniband")
        .tp_overlap;
    // ring: 256·(8.6533e-5·(1 − 0.332926) + 1.015e-5) = 0.01738 s
    let ring = one_node("tp_overlap = \"ring\"");
    let want = 256.0 * (PER_OP * (1.0 - f) + RING_LAT);
    assert!(rel(ring.time_breakdown_s.tp_comm, want) < 1e-9);
    // the default is ring, bit for bit, and inside the fitted settings
    let default = one_node("");
    assert_eq!(default.time_breakdown_s, ring.time_breakdown_s);
    let names: Vec<&str> = default
        .outside_fitted_range
        .iter()
        .flatten()
        .map(|o| o.input)
        .collect();
    assert!(!names.contains(&"tp overlap"), "{names:?}");
}

#[test]
fn tp_overlap_pipelined_hides_all_but_one_chunk() {
    let p = one_node("tp_overlap = \"pipelined\"");
    let e = &p.overlap.exposure;
    // c = tp = 8 ring-exchange chunks; the layers' GEMMs (27.3M parameters per
    // GPU per layer × 2 × 4096 tokens × 3 passes ≈ 6.7e11 FLOPs at ~0.7 of
    // 989 TFLOP/s ≈ 1 ms per layer, 31 ms in all) outlast the transfers
    // (T = 256·8.6533e-5 = 22.15 ms), so only the first chunk is exposed:
    // T/8 + latency = 2.769 ms + 256·10.15 µs = 5.368 ms
    assert_eq!(e.tp_chunks, 8.0);
    let t = 256.0 * PER_OP;
    assert!(e.tp_gemm_s > t, "GEMMs {} vs transfers {t}", e.tp_gemm_s);
    let want = t / 8.0 + 256.0 * RING_LAT;
    assert!(
        rel(p.time_breakdown_s.tp_comm, want) < 1e-9,
        "{}",
        p.time_breakdown_s.tp_comm
    );
    // outside the fitted settings, said so
    let o = p.outside_fitted_range.as_ref().unwrap();
    let tp = o.iter().find(|o| o.input == "tp overlap").expect("named");
    assert_eq!(tp.describe(), "pipelined (fitted: ring)");
}

#[test]
fn pipelined_formula_by_hand() {
    // 8 s of transfers in 4 chunks under 4 s of GEMMs: the first chunk (2 s)
    // waits, then 3 chunks of max(2, 1) s run 3 s longer than their GEMMs'
    // 3·1 s... exposed = 8/4 + 3/4·(8 − 4) = 2 + 3 = 5 s
    assert_eq!(pipelined_exposed(8.0, 4.0, 4.0), 5.0);
    // GEMMs longer than the transfers: one chunk, 8/4 = 2 s
    assert_eq!(pipelined_exposed(8.0, 20.0, 4.0), 2.0);
    // one chunk is no pipelining: all of it
    assert_eq!(pipelined_exposed(8.0, 20.0, 1.0), 8.0);
}

#[test]
fn sp_allgather_redo_adds_two_all_gathers_per_layer() {
    // redo: 8 + 2 collectives per layer (one all-gather per column-parallel
    // block in the backward), all exposed with tp_overlap none:
    // 32·10·(8.6533e-5 + 1.015e-5) = 0.030939 s
    let p = one_node("tp_overlap = \"none\"\nsp_allgather = \"redo\"");
    assert_eq!(p.overlap.exposure.tp_collectives_per_layer, 10.0);
    let want = 320.0 * (PER_OP + RING_LAT);
    assert!(rel(p.time_breakdown_s.tp_comm, want) < 1e-9);
    let o = p.outside_fitted_range.unwrap();
    assert!(o.iter().any(|o| o.input == "sp all-gather"));
}

/// LLaMA-3 8B on two H100 nodes, tp 8 in each, dp 2 across them, ZeRO-0.
fn two_nodes(extra: &str) -> TrainReport {
    train_on(
        "llama-3-8b",
        "h100",
        16,
        &format!(
            r#"
[training]
batch_tokens = 8192
seq_len = 4096
remat = "none"
{extra}
[parallelism]
tp = 8
sequence_parallel = true
"#
        ),
    )
}

#[test]
fn dp_overlap_off_exposes_the_whole_all_reduce() {
    let off = two_nodes("dp_overlap = \"off\"");
    let on = two_nodes("");
    let p = off.params as f64; // 8,030,261,248 (published)
    assert_eq!(p, 8_030_261_248.0);
    // all-reduce of the bf16 gradients of one tp rank's stage (P/8) between
    // the 2 replicas on different nodes: 2·(1/2)·(P/8)·2 B over one GPU's
    // InfiniBand, 400 Gb/s = 50 GB/s × 0.8 = 40 GB/s:
    // 2·0.5·1.00378e9·2/40e9 = 0.050189 s, all exposed when off ...
    let want = 2.0 * 0.5 * (p / 8.0) * 2.0 / 40e9;
    let t_off = off.predicted.as_ref().unwrap().time_breakdown_s.dp_comm;
    assert!(rel(t_off, want) < 1e-9, "{t_off} vs {want}");
    // ... and 1 − 0.9 (dp_overlap of the InfiniBand sub-profile) of it on
    let t_on = on.predicted.as_ref().unwrap().time_breakdown_s.dp_comm;
    assert!(rel(t_on, want * (1.0 - 0.9)) < 1e-9, "{t_on}");
    let e = &off.predicted.as_ref().unwrap().overlap.exposure;
    assert!(rel(e.dp_transfer_s, want) < 1e-9);
    assert!(rel(e.dp_exposed_s, want) < 1e-9);
}

#[test]
fn settings_show_in_the_derivation() {
    let sc = Scenario::parse(
        "[model]\nname = \"llama-3-8b\"\n[hardware]\nchip = \"h100\"\nchips = 16\n[training]\nbatch_tokens = 8192\ntp_overlap = \"none\"\n[parallelism]\ntp = 8\n",
        "t.toml",
    )
    .unwrap();
    let mut rec = Recorder::default();
    let _ = resolve(&sc, Catalog::builtin()).unwrap().analyze(&mut rec);
    let s = rec.find("train.predicted.tp_overlap").expect("tp step");
    assert!(s.label.contains("tp_overlap = none"), "{}", s.label);
    assert!(rec.find("train.predicted.dp_overlap").is_some());
    assert!(rec.find("train.blocks").is_some());
}

/// LLaMA-3 8B on 8 H100s (the InfiniBand sub-profile's efficiencies), tp 8
/// with SP, 8 sequences of 4,096, full remat.
fn book_blocks() -> TrainReport {
    train(
        r#"
[model]
name = "llama-3-8b"
[hardware]
chip = "h100"
chips = 8
[training]
batch_tokens = 32768
seq_len = 4096
remat = "full"
[parallelism]
tp = 8
sequence_parallel = true
"#,
    )
}

#[test]
fn blocks_sum_to_the_step_flops() {
    for r in [book_blocks(), two_nodes("")] {
        assert_eq!(r.blocks.len(), 6);
        let flops: f64 = r.blocks.iter().map(|b| b.flops).sum();
        let rec: f64 = r.blocks.iter().map(|b| b.recompute_flops).sum();
        // the model convention's 3·(2·P_matmul + attention) per token, split
        assert!(rel(flops, r.flops_per_step.get()) < 1e-12, "{flops}");
        let hw = r.hardware_flops_per_step.get() - r.flops_per_step.get();
        assert!((rec - hw).abs() <= 1e-12 * r.hardware_flops_per_step.get());
    }
}

#[test]
fn block_times_by_hand() {
    let r = book_blocks();
    let b = |name: &str| r.blocks.iter().find(|b| b.block.starts_with(name)).unwrap();
    // norms + element-wise, per device: 32,768 tokens × 32 layers × 2 B ×
    // (20·4096/8 + 8·14336/8 + 8·4096/8 = 28,672 elements) × 4/3 (full
    // remat) = 8.0165e10 B at 3.35 TB/s × 0.8 (hbm_efficiency) = 29.91 ms,
    // memory-bound
    let ew = b("norms");
    let want = 32768.0 * 32.0 * 2.0 * 28672.0 * (4.0 / 3.0) / (3.35e12 * 0.8);
    assert!(rel(ew.time_s, want) < 1e-9, "{}", ew.time_s);
    assert_eq!(ew.bound, "memory");
    // the logits GEMM: 6·V·D·B = 6·128,256·4,096·32,768 = 1.0329e14 FLOPs,
    // + 1/3 recomputed (full remat), over 8 × 989.5 TFLOP/s at the GEMM
    // efficiency of [32768, 4096] × [4096, 128256/8]: the H100 GEMM curve
    // e_max 0.8129 × matmul_stack_share 0.861 × x/(x + x½) with x = 4096 (a
    // multiple of the 128 tile), x½ = 17.5: 0.69991·4096/4113.5 → 24.97 ms;
    // its bytes (1.9e10 per device, 7.1 ms) are below: compute-bound
    let head = b("embedding");
    let flops = 6.0 * 128_256.0 * 4096.0 * 32768.0;
    assert!(rel(head.flops, flops) < 1e-12);
    let want = flops * (4.0 / 3.0) / (8.0 * 989.5e12 * 0.8129 * 0.861 * 4096.0 / 4113.5);
    assert!(rel(head.time_s, want) < 1e-9, "{}", head.time_s);
    assert_eq!(head.bound, "compute");
}
