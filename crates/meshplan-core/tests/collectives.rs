//! Collective costs pinned to the book's worked numbers, plus properties.

use meshplan_core::collectives::{cost, AxisPlacement, Collective};
use meshplan_core::trace::{NoTrace, Recorder};
use meshplan_core::units::{Bytes, BytesPerSec, LinkBandwidth, Seconds};
use meshplan_core::Catalog;
use proptest::prelude::*;

fn rel(a: f64, b: f64) -> f64 {
    ((a - b) / b).abs()
}

fn t(kind: Collective, v: f64, ax: &AxisPlacement) -> f64 {
    cost(kind, Bytes::new(v), ax, &mut NoTrace).time.get()
}

/// ch3 pop quiz 2: AllGather of bf16[E_X, F] (E = 2048, F = 8192, 8.4 MB shards)
/// over a 4-chip v5e axis. Book: no wraparound on a 4x4 → 3 × 8.4 MB / 4.5e10 =
/// 560 µs (tolerance 0.5%); with wraparound V/W_bidi ≈ 373 µs (the book prints
/// 377 µs; 1.1% off, tolerance 2%).
#[test]
fn v5e_4x4_allgather_book_quiz() {
    let v5e = Catalog::builtin().chip("tpu-v5e@book").unwrap();
    let v = 2.0 * 2048.0 * 8192.0;
    let ax = AxisPlacement::tpu(v5e, &[4, 1], &[4, 4]);
    match ax {
        AxisPlacement::Torus { axes, n_axes, .. } => {
            assert_eq!(n_axes, 1);
            assert!(!axes[0].wraparound, "a v5e axis of 4 has no wraparound");
        }
        _ => panic!("{ax:?}"),
    }
    let nowrap = t(Collective::AllGather, v, &ax);
    assert!(rel(nowrap, 560e-6) < 0.005, "{nowrap}");
    let wrap = AxisPlacement::torus(
        LinkBandwidth::one_way(BytesPerSec::new(4.5e10)),
        Seconds::new(1e-6),
        &[(4, true)],
    );
    let ideal = t(Collective::AllGather, v, &wrap);
    assert!(rel(ideal, 377e-6) < 0.02, "{ideal}");
    // "typically doubles": here 1.5x for X = 4
    assert!((nowrap / ideal - 1.5).abs() < 1e-9);
}

/// v5e 16x16 wraps on both axes: AllGather over both = V/(2·W_ici).
#[test]
fn multi_axis_divides_by_axes() {
    let v5e = Catalog::builtin().chip("tpu-v5e@book").unwrap();
    let ax = AxisPlacement::tpu(v5e, &[16, 16], &[16, 16]);
    assert_eq!(ax.size(), 256);
    assert_eq!(ax.n_physical_axes(), 2);
    let x = t(Collective::AllGather, 1e9, &ax);
    assert!(rel(x, 1e9 / (2.0 * 9e10)) < 1e-12);
    // AllToAll on a 16x16 torus: V·max/(4·N·W) = V·16/(4·256·9e10)
    let a2a = t(Collective::AllToAll, 1e9, &ax);
    assert!(rel(a2a, 1e9 * 16.0 / (4.0 * 256.0 * 9e10)) < 1e-12);
    // 1-D ring AllToAll = 1/4 of AllGather
    let one = AxisPlacement::tpu(v5e, &[16, 1], &[16, 16]);
    assert!(
        rel(
            t(Collective::AllToAll, 1e9, &one),
            t(Collective::AllGather, 1e9, &one) / 4.0
        ) < 1e-12
    );
}

/// v5p: AllReduce of 2DF bytes on one wrapped axis = 2V/W_ici (ch5's 8DF/W for 2 AllReduces).
#[test]
fn v5p_allreduce_is_two_v_over_w() {
    let v5p = Catalog::builtin().chip("tpu-v5p@book").unwrap();
    let ax = AxisPlacement::tpu(v5p, &[16, 1, 1], &[16, 16, 16]);
    let (d, f) = (8192.0, 32768.0);
    let v = 2.0 * d * f;
    let x = t(Collective::AllReduce, v, &ax);
    assert!(rel(x, 2.0 * v / 1.8e11) < 1e-12);
}

/// Latency-bound regime: tiny arrays cost T_hop·Σ⌊X_i/2⌋.
#[test]
fn latency_bound_small_messages() {
    let v5e = Catalog::builtin().chip("tpu-v5e@book").unwrap();
    let ax = AxisPlacement::tpu(v5e, &[16, 16], &[16, 16]);
    let c = cost(Collective::AllGather, Bytes::new(1e3), &ax, &mut NoTrace);
    assert!(c.latency_bound);
    assert!(rel(c.time.get(), 16e-6) < 1e-12);
    // book: latency-bound when per-hop bytes / W_one-way < 1 µs: 45 kB on v5e
    let big = cost(Collective::AllGather, Bytes::new(1e8), &ax, &mut NoTrace);
    assert!(!big.latency_bound);
}

/// GPUs (ch12): in-node AllGather V·(N−1)/(N·W_gpu); 2 nodes: node level 7/8 at
/// 450e9 = V/514e9 vs cross 1/2 at 400e9 = V/800e9 → node-bound (quiz 4).
#[test]
fn gpu_hierarchical() {
    let h100 = Catalog::builtin().chip("h100@book").unwrap();
    let ax = AxisPlacement::gpu(h100, 8, 8);
    assert!(
        rel(
            t(Collective::AllGather, 1e9, &ax),
            1e9 * 7.0 / (8.0 * 4.5e11)
        ) < 1e-12
    );
    let ax2 = AxisPlacement::gpu(h100, 16, 8);
    let x = t(Collective::AllGather, 1e9, &ax2);
    assert!(rel(x, 1e9 / 514.2857e9) < 1e-5, "{x}");
    // AllToAll in a node: V·(N−1)/(W·N²)
    assert!(
        rel(
            t(Collective::AllToAll, 1e9, &ax),
            1e9 * 7.0 / (4.5e11 * 64.0)
        ) < 1e-12
    );
    // across M = 2 nodes: V·(M−1)/(M²·W_node), W_node = 8·50e9
    assert!(rel(t(Collective::AllToAll, 1e9, &ax2), 1e9 / (4.0 * 4e11)) < 1e-12);
    // a 1024-GPU axis with 8 per node: max((7/8)/450e9, (127/128)/400e9) → ≈ V/403e9
    let big = AxisPlacement::gpu(h100, 1024, 8);
    assert!(
        rel(
            t(Collective::AllGather, 1e9, &big),
            1e9 * 127.0 / (128.0 * 4e11)
        ) < 1e-12
    );
}

#[test]
fn traced_step_has_book_symbols() {
    let v5p = Catalog::builtin().chip("tpu-v5p@book").unwrap();
    let ax = AxisPlacement::tpu(v5p, &[16, 16, 1], &[16, 16, 16]);
    let mut r = Recorder::default();
    cost(Collective::AllGather, Bytes::new(1e9), &ax, &mut r);
    let s = r.find("collective.allgather").unwrap();
    assert!(s.formula.contains("V/(W_ici·M)"), "{}", s.formula);
    assert!(s
        .bindings
        .iter()
        .any(|b| b.symbol == "W_ici" && b.value == 1.8e11));
}

fn placements() -> Vec<AxisPlacement> {
    let c = Catalog::builtin();
    let v5p = c.chip("tpu-v5p@book").unwrap();
    let v5e = c.chip("tpu-v5e").unwrap();
    let h100 = c.chip("h100").unwrap();
    vec![
        AxisPlacement::tpu(v5p, &[16, 16, 4], &[16, 16, 16]),
        AxisPlacement::tpu(v5p, &[2, 2, 1], &[2, 2, 1]),
        AxisPlacement::tpu(v5e, &[8, 16], &[8, 16]),
        AxisPlacement::gpu(h100, 8, 8),
        AxisPlacement::gpu(h100, 64, 4),
        AxisPlacement::gpu(h100, 32, 1),
        AxisPlacement::dcn(v5p, 4, 8960),
    ]
}

proptest! {
    #[test]
    fn nonneg_monotone_and_ar_is_rs_plus_ag(v in 0.0f64..1e12, dv in 0.0f64..1e11, i in 0usize..7) {
        let ax = placements()[i];
        for k in Collective::ALL {
            let a = cost(k, Bytes::new(v), &ax, &mut NoTrace);
            let b = cost(k, Bytes::new(v + dv), &ax, &mut NoTrace);
            prop_assert!(a.time.get() >= 0.0 && a.bandwidth_time.get() >= 0.0 && a.latency_time.get() >= 0.0);
            prop_assert!(b.time.get() >= a.time.get());
        }
        let ag = cost(Collective::AllGather, Bytes::new(v), &ax, &mut NoTrace);
        let rs = cost(Collective::ReduceScatter, Bytes::new(v), &ax, &mut NoTrace);
        let ar = cost(Collective::AllReduce, Bytes::new(v), &ax, &mut NoTrace);
        let sum = ag.bandwidth_time.get() + rs.bandwidth_time.get();
        prop_assert!((ar.bandwidth_time.get() - sum).abs() <= 1e-12 * sum.max(1e-30));
        let lsum = ag.latency_time.get() + rs.latency_time.get();
        prop_assert!((ar.latency_time.get() - lsum).abs() <= 1e-12 * lsum.max(1e-30));
    }
}
