//! The collective quantities of issue 24 — point-to-point over k hops,
//! gather to one chip, the ragged AllToAll, per-level AllGather bandwidth
//! for any node count, the staged host → HBM → interconnect pipeline, the
//! book's conventions beside the exact figure, and the effective bandwidth
//! V/T — each pinned to the book's printed answer or to a hand derivation
//! in the comment, through the entry point `meshplan collective` calls.

use meshplan_core::collectives::{
    ragged_fraction, ragged_fraction_expected, torus_route, RouteHop,
};
use meshplan_core::sharding::collective::{self as cq, CollectiveQuery, CollectiveReport};
use meshplan_core::trace::{NoTrace, Recorder};
use meshplan_core::Catalog;

fn rel(a: f64, b: f64) -> f64 {
    ((a - b) / b).abs()
}

fn query(op: &str, array: &str, mesh: &str, hw: &str) -> CollectiveQuery {
    CollectiveQuery {
        op: op.into(),
        array: array.into(),
        mesh: Some(mesh.into()),
        hw: Some(hw.into()),
        ..Default::default()
    }
}

fn run(q: &CollectiveQuery) -> CollectiveReport {
    cq::evaluate(q, Catalog::builtin(), &mut NoTrace).unwrap()
}

fn err(q: &CollectiveQuery) -> String {
    cq::evaluate(q, Catalog::builtin(), &mut NoTrace)
        .unwrap_err()
        .to_string()
}

/// ch2 Q5: bf16[8, 128, 8192] from TPU{0,0} to TPU{3,3} of a v5e 4x4 (no
/// wraparound): 3 + 3 = 6 hops, both ports used (2 × 4.5e10 = 9e10 B/s),
/// first byte after 6 × 1 µs = 6 µs, the last after 6 µs + V/9e10 with V =
/// 2·8·128·8192 = 16,777,216 B (186.4 µs): 192.4 µs (the book rounds V to
/// 1.7e7 and prints 188 + 6 = 194 µs, within 1%).
#[test]
fn point_to_point_over_k_hops_ch2_q5() {
    let mut q = query("permute", "bf16[8, 128, 8192]", "4x4", "tpu-v5e@book");
    q.to = Some("3,3".into());
    let r = run(&q);
    let route = r.route.as_ref().unwrap();
    assert_eq!((route.hops, route.paths), (6, 2));
    assert!(rel(route.bandwidth_bytes_per_s, 9e10) < 1e-12);
    assert!(rel(route.first_byte_s, 6e-6) < 1e-12);
    let v = 2.0 * 8.0 * 128.0 * 8192.0;
    assert!(rel(route.transfer_s, v / 9e10) < 1e-12);
    assert!(rel(r.time_s, 6e-6 + v / 9e10) < 1e-12);
    assert!(rel(r.time_s, 194e-6) < 0.01, "the book's 194 µs");
    // the same destination named by axis
    q.to = Some("X=3,Y=3".into());
    assert_eq!(run(&q).route.unwrap().hops, 6);
    // the source itself: nothing moves
    q.to = Some("0,0".into());
    assert_eq!(run(&q).time_s, 0.0);
    // with wraparound (the alternative): 1 + 1 hops the short way round
    let alt = &r.alternatives[0];
    assert!(rel(alt.time_s, 2e-6 + v / 9e10) < 1e-12, "{alt:?}");
}

/// On a wrapped 16-chip axis the short way round counts: offset 15 is one
/// hop back; offset 8 is 8 hops either way, so both directions are used
/// (two paths). `--hops k` on one path of GPUs: k·T_hop + V/W_gpu.
#[test]
fn routes_with_wraparound_and_given_hops() {
    let r = torus_route(&[
        RouteHop {
            size: 16,
            wraparound: true,
            offset: 15,
        },
        RouteHop {
            size: 16,
            wraparound: true,
            offset: 8,
        },
    ])
    .unwrap();
    assert_eq!((r.hops, r.paths), (1 + 8, 1 + 2));
    let mut q = query("permute", "16e9", "16x16", "tpu-v5e@book");
    q.to = Some("15,8".into());
    let rep = run(&q);
    // 16e9 B over 3 paths of 4.5e10 B/s, 9 hops of 1 µs
    assert!(rel(rep.time_s, 9e-6 + 16e9 / (3.0 * 4.5e10)) < 1e-12);

    let c = Catalog::builtin();
    let h100 = c.chip("h100").unwrap();
    let lat = h100.nvlink.as_ref().unwrap().latency.get();
    let mut q = query("permute", "1GB", "X=8", "h100");
    q.hops = Some(3);
    let rep = run(&q);
    let route = rep.route.unwrap();
    assert_eq!((route.hops, route.paths), (3, 1));
    assert!(rel(route.first_byte_s, 3.0 * lat) < 1e-12);
    assert!(rel(route.time_s, 3.0 * lat + 1e9 / 450e9) < 1e-12);
}

/// ch2 Q6: gather a 16e9-byte array (the book's "about 16GB") onto
/// TPU{0,0} of a v5e 4x4: the corner has 2 links in use, so
/// 15e9 / (2 × 4.5e10) = 166.7 ms (book: 167 ms). With wraparound (16x16)
/// the root takes in over 4 links: 16e9·255/256 / (4·4.5e10). On 8 H100 the
/// root's NVLink egress-equal ingress bounds it: 1e9·7/8 / 450e9; over 2
/// nodes the root takes in over NVLink + its NIC (450e9 + 50e9) while its
/// node's 8 NICs take in half the array: max(1e9·15/16/500e9,
/// 1e9·(1/2)/400e9) = 1.875 ms.
#[test]
fn gather_to_one_chip() {
    let r = run(&{
        let mut q = query("gather", "16e9", "4x4", "tpu-v5e@book");
        q.axes = Some("XY".into());
        q
    });
    assert!(rel(r.time_s, 15e9 / 9e10) < 1e-12, "{}", r.time_s);
    assert!(rel(r.time_s, 167e-3) < 0.005);
    assert!(rel(r.bytes_sent_per_device, 1e9) < 1e-12);
    let r = run(&{
        let mut q = query("gather", "16e9", "16x16", "tpu-v5e@book");
        q.axes = Some("XY".into());
        q
    });
    assert!(rel(r.time_s, 16e9 * 255.0 / 256.0 / (4.0 * 4.5e10)) < 1e-12);
    let r = run(&query("gather", "1GB", "X=8", "h100"));
    assert!(rel(r.time_s, 1e9 * 7.0 / 8.0 / 450e9) < 1e-12);
    let r = run(&{
        let mut q = query("gather", "1GB", "X=2,Y=8", "h100");
        q.axes = Some("XY".into());
        q
    });
    let t = (1e9 * 15.0 / 16.0 / 500e9f64).max(0.5e9 / 400e9);
    assert!(rel(r.time_s, t) < 1e-12, "{} vs {t}", r.time_s);
    // "gather" is the gather to one device; "allgather" the all-gather
    assert_eq!(r.op.name(), "Gather");
    assert_eq!(
        run(&query("allgather", "1GB", "X=8", "h100")).op.name(),
        "AllGather"
    );
}

/// ch12 pop quiz 2: 4 of 8 shards non-zero halves the AllToAll: fraction
/// min(4/8, 1) = 0.5 of V·7/(64·450e9); drawn at random the expected
/// share is 1 − (7/8)⁴ = 0.41382. Across 4 nodes the destinations are the
/// nodes (ch12's min(8k/Z, 1)): k = 2 → 0.5, k = 8 → 1.
#[test]
fn ragged_all_to_all() {
    let mut q = query("alltoall", "1GB", "X=8", "h100");
    q.topk = Some(4);
    let r = run(&q);
    let g = r.ragged.as_ref().unwrap();
    let dense = 1e9 * 7.0 / (64.0 * 450e9);
    assert_eq!((g.k, g.destinations), (4, 8));
    assert!(rel(g.dense_time_s, dense) < 1e-12);
    assert!(rel(r.time_s, 0.5 * dense) < 1e-12);
    assert!(rel(g.expected_fraction, 1.0 - (7.0f64 / 8.0).powi(4)) < 1e-12);
    assert!(rel(g.expected_time_s, dense * (1.0 - 0.875f64.powi(4))) < 1e-12);
    assert_eq!(ragged_fraction(2, 4), 0.5);
    assert_eq!(ragged_fraction(8, 4), 1.0);
    assert!(rel(ragged_fraction_expected(1, 10), 0.1) < 1e-12);
    let mut q = query("alltoall", "1GB", "X=4,Y=8", "h100");
    q.axes = Some("XY".into());
    q.topk = Some(2);
    let g = run(&q).ragged.unwrap();
    assert_eq!((g.destinations, g.fraction), (4, 0.5));
}

/// ch12: an AllGather's bandwidth at each level is D·W/(D−1) — over 2
/// nodes 8·450e9/7 = 514.3 GB/s (NVLink, which bounds it) and
/// 2·400e9/1 = 800 GB/s (Quiz 4 Q5); over 128 nodes the leaf has D = 32,
/// 32·400e9/31 = 412.9 GB/s, and the spine 4 units of 32·400e9:
/// 4·12.8e12/3 = 17.07 TB/s; over 40 nodes the spine joins 2 units.
#[test]
fn per_level_bandwidth_any_node_count() {
    let levels = |nodes: u64| {
        let mut q = query("allgather", "1GB", &format!("X={nodes},Y=8"), "h100");
        q.axes = Some("XY".into());
        run(&q)
    };
    let r = levels(2);
    let bw: Vec<f64> = r
        .levels
        .iter()
        .map(|l| l.allgather_bandwidth_bytes_per_s)
        .collect();
    assert_eq!(bw.len(), 2);
    assert!(rel(bw[0], 8.0 * 450e9 / 7.0) < 1e-12);
    assert!(rel(bw[1], 800e9) < 1e-12);
    assert_eq!(r.bounding_level, "NVLink");
    let r = levels(128);
    let bw: Vec<f64> = r
        .levels
        .iter()
        .map(|l| l.allgather_bandwidth_bytes_per_s)
        .collect();
    assert_eq!(bw.len(), 3);
    assert!(rel(bw[1], 32.0 * 400e9 / 31.0) < 1e-12);
    assert!(rel(bw[2], 4.0 * 12.8e12 / 3.0) < 1e-12);
    assert_eq!(r.bounding_level, "leaf");
    let r = levels(40);
    assert_eq!(r.levels[2].devices, 2);
    assert!(rel(r.levels[2].allgather_bandwidth_bytes_per_s, 2.0 * 12.8e12) < 1e-12);
    // one node: the NVLink level alone
    let r = run(&query("allgather", "1GB", "X=8", "h100"));
    assert_eq!(r.levels.len(), 1);
}

/// ch2 Q6 staged: 16e9 B offloaded evenly to the hosts of a v5e 4x4: each
/// chip loads 1e9 B over its 1.6e10 B/s PCIe (62.5 ms), the gather takes
/// 166.7 ms, the root reads 16e9 B at 8.2e11 B/s (19.51 ms): overlapped
/// 166.7 ms (the book: "at least 167ms"), one after another the sum.
#[test]
fn staged_offload_pipeline() {
    let mut q = query("gather", "16e9", "4x4", "tpu-v5e@book");
    q.axes = Some("XY".into());
    q.from_host = true;
    let r = run(&q);
    let s = r.staged.as_ref().unwrap();
    assert!(rel(s.host_to_hbm_s, 1e9 / 1.6e10) < 1e-12);
    assert!(rel(s.collective_s, 15e9 / 9e10) < 1e-12);
    assert!(rel(s.hbm_read_s, 16e9 / 8.2e11) < 1e-12);
    assert!(rel(s.lower_bound_s, 15e9 / 9e10) < 1e-12);
    assert!(rel(s.upper_bound_s, 1e9 / 1.6e10 + 15e9 / 9e10 + 16e9 / 8.2e11) < 1e-12);
    assert_eq!(s.bound, "interconnect");
    // a reduce-scatter leaves V/N on each device to read
    let mut q = query("reducescatter", "16e9", "X=16", "tpu-v5e@book");
    q.from_host = true;
    let s = run(&q).staged.unwrap();
    assert!(rel(s.hbm_read_s, 1e9 / 8.2e11) < 1e-12);
}

/// The book's conventions, each with the exact figure beside: ch3 pop
/// quiz 2 under full bandwidth is V/9e10 = 372.8 µs (book 377 µs, V
/// rounded to 34 MB) beside the exact 3·(V/4)/4.5e10 = 559.2 µs; ch12 pop
/// quiz 1 with the ring factor dropped is V/450e9 = 74.57 µs (book
/// "roughly 75us") beside V·7/(8·450e9) = 65.24 µs ("more precisely,
/// 65us"); between 4 v5p slices of 8960 chips, V/(m·W_dcn) beside
/// V·3/(4·m·W_dcn); a wrapped TPU ring is unchanged by the ring factor.
#[test]
fn conventions_beside_the_exact_figure() {
    let v = 2.0 * 2048.0 * 8192.0;
    let mut q = query("allgather_Y", "bf16[E_Y, F]", "X=8,Y=4", "tpu-v5e@book");
    q.dims = Some("E=2048,F=8192".into());
    let exact = run(&q);
    assert_eq!(exact.convention, "exact");
    assert_eq!(exact.exact_time_s, exact.time_s);
    q.full_bandwidth = true;
    let r = run(&q);
    assert!(rel(r.time_s, v / 9e10) < 1e-12);
    assert!(rel(r.exact_time_s, 3.0 * (v / 4.0) / 4.5e10) < 1e-12);
    assert!(r.convention.contains("full bandwidth"));
    assert!(r.notes.iter().any(|n| n.contains("exact figure")));

    let v = 2.0 * 1024.0 * 16384.0;
    let mut q = query("allgather", "bf16[B_X, F]", "X=8", "h100");
    q.dims = Some("B=1024,F=16384".into());
    q.drop_ring_factor = true;
    let r = run(&q);
    assert!(rel(r.time_s, v / 450e9) < 1e-12);
    assert!(rel(r.exact_time_s, v * 7.0 / (8.0 * 450e9)) < 1e-12);

    let c = Catalog::builtin();
    let w_dcn = c
        .chip("tpu-v5p@book")
        .unwrap()
        .scale_out
        .as_ref()
        .unwrap()
        .per_chip
        .one_way_rate()
        .get();
    let mut q = query(
        "allgather_S",
        "1e12",
        "S=4:dcn,X=16,Y=20,Z=28",
        "tpu-v5p@book",
    );
    q.drop_ring_factor = true;
    let r = run(&q);
    let m = 16.0 * 20.0 * 28.0;
    assert!(rel(r.time_s, 1e12 / (m * w_dcn)) < 1e-12, "{}", r.time_s);
    assert!(rel(r.exact_time_s, 1e12 * 3.0 / (4.0 * m * w_dcn)) < 1e-12);

    let mut q = query("allgather", "1e9", "X=16", "tpu-v5e@book");
    q.drop_ring_factor = true;
    let r = run(&q);
    assert!(rel(r.time_s, r.exact_time_s) < 1e-15);
}

/// ch3 Q10: a unidirectional ring carries V·(D−1)/(2D) per link for an
/// AllToAll (pop quiz 2's 33.55 MB on a 16-chip v5e ring: 33.55e6·15 /
/// (32·4.5e10) = 349.5 µs), half the unidirectional AllGather's
/// V·(D−1)/(D·W) = 699.1 µs, and 4(D−1)/D = 3.75× the bidirectional
/// ring's V/(4·9e10) = 93.2 µs (the book's "factor of 4" for large D).
#[test]
fn unidirectional_all_to_all_ch3_q10() {
    let v = 2.0 * 2048.0 * 8192.0;
    let a2a = run(&query("alltoall", "33554432", "X=16", "tpu-v5e@book"));
    let uni = a2a
        .alternatives
        .iter()
        .find(|a| a.name == "unidirectional ring")
        .unwrap()
        .time_s;
    assert!(rel(uni, v * 15.0 / (32.0 * 4.5e10)) < 1e-12);
    assert!(rel(a2a.time_s, v / (4.0 * 9e10)) < 1e-12);
    assert!(rel(uni / a2a.time_s, 3.75) < 1e-12);
    let ag = run(&query("allgather", "33554432", "X=16", "tpu-v5e@book"));
    let uni_ag = ag
        .alternatives
        .iter()
        .find(|a| a.name == "unidirectional ring")
        .unwrap()
        .time_s;
    assert!(rel(uni_ag, 2.0 * uni) < 1e-12);
}

/// Issue 23: the effective bandwidth is V/T, latency included. ch3 Q3:
/// bf16[B_X], B = 128, over X = 4 of a v4p 4x4x4 is latency-bound, 2 hops
/// of 1 µs: V = 256 B, T = 2 µs, V/T = 128 MB/s, while the links' rate
/// V/T_bandwidth is W_ici = 9e10 B/s.
#[test]
fn effective_bandwidth_is_v_over_t() {
    let mut q = query("allgather_X", "bf16[B_X]", "X=4,Y=4,Z=4", "tpu-v4p@book");
    q.dims = Some("B=128".into());
    let r = run(&q);
    assert_eq!(r.bound, "latency");
    assert!(rel(r.time_s, 2e-6) < 1e-12, "{}", r.time_s);
    assert!(rel(r.effective_bandwidth_bytes_per_s, 256.0 / 2e-6) < 1e-12);
    assert!(rel(r.bandwidth_term_bytes_per_s, 9e10) < 1e-12);
}

/// Each new figure records its formula for --explain.
#[test]
fn explain_steps() {
    let steps = |q: &CollectiveQuery| {
        let mut rec = Recorder::default();
        cq::evaluate(q, Catalog::builtin(), &mut rec).unwrap();
        rec.into_steps()
            .into_iter()
            .map(|s| s.id)
            .collect::<Vec<_>>()
    };
    let mut q = query("permute", "1e9", "4x4", "tpu-v5e@book");
    q.to = Some("3,3".into());
    assert!(steps(&q).contains(&"collective.route".to_string()));
    let mut q = query("alltoall", "1GB", "X=8", "h100");
    q.topk = Some(2);
    assert!(steps(&q).contains(&"collective.ragged".to_string()));
    let mut q = query("gather", "1e9", "X=4", "tpu-v5e@book");
    q.from_host = true;
    let s = steps(&q);
    assert!(s.contains(&"collective.staged".to_string()));
    assert!(s.contains(&"collective.gather".to_string()));
}

/// Options that do not fit the op, and destinations off the mesh, are
/// clear errors.
#[test]
fn bad_options_are_errors() {
    let mut q = query("allgather", "1GB", "X=8", "h100");
    q.topk = Some(2);
    assert!(err(&q).contains("--topk applies to AllToAll"));
    let mut q = query("alltoall", "1GB", "X=8", "h100");
    q.topk = Some(0);
    assert!(err(&q).contains("at least 1"));
    let mut q = query("allgather", "1GB", "X=8", "h100");
    q.to = Some("3".into());
    assert!(err(&q).contains("--to applies to PointToPoint"));
    let mut q = query("permute", "1GB", "X=8", "h100");
    q.to = Some("3".into());
    assert!(err(&q).contains("give --hops"), "{}", err(&q));
    let mut q = query("permute", "1GB", "4x4", "tpu-v5e@book");
    q.to = Some("4,0".into());
    assert!(err(&q).contains("off an axis of 4"), "{}", err(&q));
    q.to = Some("1,2,3".into());
    assert!(err(&q).contains("offsets"), "{}", err(&q));
    q.to = Some("1,1".into());
    q.hops = Some(2);
    assert!(err(&q).contains("not both"));
}
