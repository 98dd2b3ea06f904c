//! The book's rules beyond chapter 5, corrected (`rules.exact`), against
//! hand derivations; the book's own convention stays in the top-level keys.

use meshplan_core::mesh::{Degrees, Topology};
use meshplan_core::trace::NoTrace;
use meshplan_core::training::*;
use meshplan_core::Catalog;

fn rel(a: f64, b: f64) -> f64 {
    ((a - b) / b).abs()
}

fn run(model: &str, chip: &str, topo: Topology, deg: Degrees, batch: u64) -> rules::Rules {
    let c = Catalog::builtin();
    let cfg = TrainConfig {
        batch_tokens: batch,
        seq_len: 4096,
        degrees: deg,
        ..TrainConfig::default()
    };
    analyze(
        c.model(model).unwrap(),
        c.chip(chip).unwrap(),
        &topo,
        &cfg,
        &mut NoTrace,
    )
    .rules
}

/// Two H100 nodes (16 GPUs), pure DP: the book's ch12 bound is
/// C/W_node = 990e12/400e9 = 2475 tokens per GPU (its "small X" variant
/// halves it to 1237). The ring over 16 GPUs is bound by the NVLink level,
/// V·7/(8·450e9) against V·1/(2·400e9) across nodes, so W_dp = 8·450e9/7 and
/// the bound is 990e12·7/(8·450e9) = 1925. TP: in one node Y = 8 gives
/// F·W/(Y·C) = 28672·(8·450e9/7)/(8·990e12) = 1.86 ≥ 1; Y = 16 spans both
/// nodes, still NVLink-bound at 514e9: 28672·514.3e9/(16·990e12) = 0.93 < 1
/// → 8, not the book's F/2475 = 11.6.
#[test]
fn gpu_two_nodes_dp_and_tp() {
    let topo = Topology::gpus(16, 8);
    let deg = Degrees {
        dp: 16,
        ..Degrees::default()
    };
    let r = run("llama-3.1-70b", "h100@book", topo, deg, 4_000_000);
    assert!(
        rel(r.dp_min_batch_per_chip, 2475.0) < 1e-3,
        "book convention kept"
    );
    assert!(rel(r.exact.dp_min_batch_per_chip, 990e12 * 7.0 / (8.0 * 450e9)) < 1e-12);
    assert_eq!(r.exact.tp_max_degree, 8);
    assert!(!r.exact.notes.is_empty());
}

/// ch12 quiz 5: TP = 8 inside each node and PP = 8 across nodes give each
/// data-parallel ring 8 nodes' NICs per model replica: the book's
/// 990e12/(8·400e9) ≈ 309 tokens per GPU. With dp = 128 replicas on a ring
/// of one GPU per node: W = 50e9·128/127, M_p = 64 → 990e12·127/(64·50e9·128)
/// = 306.9 (the book drops the ring's 127/128).
#[test]
fn ch12_quiz5_model_parallel_multiplies_dp_bandwidth() {
    let topo = Topology::gpus(8192, 8);
    let deg = Degrees {
        dp: 128,
        tp: 8,
        pp: 8,
        ..Degrees::default()
    };
    let r = run("llama-3.1-70b", "h100@book", topo, deg, 16_000_000);
    let got = r.exact.plan_dp_min_batch_per_chip.unwrap();
    assert!(
        rel(got, 990e12 * 127.0 / (64.0 * 50e9 * 128.0)) < 1e-9,
        "{got}"
    );
    assert!(rel(got, 309.0) < 0.01);
}

/// MoE: compute follows the active parameters, gradients all of them, so the
/// DP bound is (P/P_act)·C/W (book ch12: (E/k)·C/W).
#[test]
fn moe_factor_in_the_dp_bound() {
    let c = Catalog::builtin();
    let m = c.model("mixtral-8x7b").unwrap();
    let pc = meshplan_core::model::params::count(&m.arch, &mut NoTrace);
    let moe = pc.total as f64 / pc.active as f64;
    let topo = Topology::gpus(8, 8);
    let deg = Degrees {
        dp: 8,
        ..Degrees::default()
    };
    let r = run("mixtral-8x7b", "h100@book", topo, deg, 4_000_000);
    assert!(moe > 3.0);
    assert!(rel(r.exact.moe_factor, moe) < 1e-12);
    assert!(
        rel(
            r.exact.dp_min_batch_per_chip,
            moe * 990e12 * 7.0 / (8.0 * 450e9)
        ) < 1e-12
    );
}

/// TPU v5e 4x4 has no wraparound (only axes of 16 wrap): a TP axis of 4
/// gets W = 4.5e10·4/3 = 6e10, of 8 (4 + 2 chips on the two axes)
/// 6e10 + 9e10 = 1.5e11, of 16 6e10 + 6e10 = 1.2e11. With F = 13824:
/// Y = 8 → 13824·1.5e11/(8·1.97e14) = 1.32 ≥ 1, Y = 16 → 0.53 < 1: 8.
#[test]
fn short_tpu_axes_have_no_wraparound() {
    let topo = Topology::torus(1, &[4, 4]);
    let deg = Degrees {
        dp: 16,
        ..Degrees::default()
    };
    let r = run("book-ch5-llama-2-13b", "tpu-v5e@book", topo, deg, 1_000_000);
    assert_eq!(r.exact.tp_max_degree, 8);
}

/// Issue 24: the TP limit on a multi-node H100 cluster. A TP group stays
/// inside its NVLink domain, so Y < M_Y·F/α with α = C/W_nvlink =
/// 990e12/450e9 = 2200 (@book): 28672/2200 = 13.03 for LLaMA-3.1 70B, not
/// the scale-out α = C/W_node = 990e12/400e9 = 2475 the data axes see
/// (28672/2475 = 11.58).
#[test]
fn tp_limit_reads_the_nvlink_alpha_on_many_nodes() {
    let r = run(
        "llama-3.1-70b",
        "h100@book",
        Topology::gpus(256, 8),
        Degrees {
            dp: 8,
            tp: 8,
            pp: 4,
            ..Degrees::default()
        },
        4 << 20,
    );
    assert!(
        rel(r.tp_max_degree, 28672.0 * 450e9 / 990e12) < 1e-12,
        "{}",
        r.tp_max_degree
    );
    // the data axes still see the node's scale-out bandwidth
    assert!(rel(r.alpha, 990e12 / 400e9) < 1e-12, "{}", r.alpha);
}

/// Book ch12, Tensor Parallelism: beyond a node a TP group reads the
/// scale-out link, Y < F/α_out with α_out = C/W_out = 990e12/(8·50e9) =
/// 2475 on an H100 node (@book: 400 GB/s of InfiniBand per node): for
/// LLaMA-3.1 70B 28672/2475 = 11.585; spanning exactly two nodes only the
/// Y − 8 ranks beyond the first node cross it, F > 2475·(Y − 8), so
/// Y < 8 + 11.585 = 19.585 ("up to 19-way"). A TPU has neither.
#[test]
fn tp_limits_beyond_one_gpu_node() {
    let deg = Degrees {
        dp: 2,
        tp: 8,
        ..Degrees::default()
    };
    let r = run(
        "llama-3.1-70b",
        "h100@book",
        Topology::gpus(16, 8),
        deg,
        4 << 20,
    );
    let one = 28672.0 / (990e12 / 400e9);
    let got = r.tp_max_degree_beyond_node.expect("a GPU cluster");
    assert!(rel(got, one) < 1e-12, "{got} vs {one}");
    let two = r.tp_max_degree_two_nodes.expect("a GPU cluster");
    assert!(rel(two, 8.0 + one) < 1e-12, "{two}");
    let tpu = run(
        "llama-3.1-70b",
        "tpu-v5p@book",
        Topology::torus(1, &[4, 4, 4]),
        Degrees {
            dp: 8,
            tp: 8,
            ..Degrees::default()
        },
        4 << 20,
    );
    assert_eq!(tpu.tp_max_degree_beyond_node, None);
    assert_eq!(tpu.tp_max_degree_two_nodes, None);
}

/// Book ch8: a slice's model parallelism over both axes of a v5e 4x4 is
/// ICI-bound when Y > 2·F/α = 2·28672/(1.97e14/9e10) = 26.2; a one-axis
/// GPU cluster has no such figure.
#[test]
fn tp_limit_over_every_axis_of_a_slice() {
    let deg = Degrees {
        dp: 2,
        tp: 8,
        ..Degrees::default()
    };
    let r = run(
        "llama-3.1-70b",
        "tpu-v5e@book",
        Topology::torus(1, &[4, 4]),
        deg,
        1 << 20,
    );
    let want = 2.0 * 28672.0 / (1.97e14 / 9e10);
    let got = r.tp_max_degree_all_axes.expect("a 2-axis slice");
    assert!(rel(got, want) < 1e-12, "{got} vs {want}");
    let gpu = run(
        "llama-3.1-70b",
        "h100@book",
        Topology::gpus(16, 8),
        deg,
        1 << 20,
    );
    assert_eq!(gpu.tp_max_degree_all_axes, None);
}
