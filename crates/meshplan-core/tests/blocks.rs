//! The building blocks (`collective`, `roofline`, `shard`, `mfu`, `hw show`'s
//! anatomy and inventories) pinned to the book's printed answers (with the
//! tolerance their rounding allows) or to hand derivations in the comments.

use meshplan_core::hardware::report::hw_report;
use meshplan_core::mfu::{self, MfuQuery};
use meshplan_core::roofline::{self, RooflineQuery};
use meshplan_core::sharding::collective::{self as cq, CollectiveQuery};
use meshplan_core::sharding::{self, ShardQuery, ShardReport};
use meshplan_core::trace::{NoTrace, Recorder};
use meshplan_core::{Catalog, Error};

fn rel(a: f64, b: f64) -> f64 {
    ((a - b) / b).abs()
}

/// `meshplan collective OP ARRAY --dims … --mesh … --hw …`.
fn coll_query(
    op: &str,
    array: &str,
    dims: &str,
    mesh: &str,
    hw: &str,
) -> meshplan_core::Result<cq::CollectiveReport> {
    let q = CollectiveQuery {
        op: op.into(),
        array: array.into(),
        dims: Some(dims.into()),
        mesh: Some(mesh.into()),
        hw: Some(hw.into()),
        ..Default::default()
    };
    cq::evaluate(&q, Catalog::builtin(), &mut NoTrace)
}

fn coll(op: &str, array: &str, dims: &str, mesh: &str, hw: &str) -> cq::CollectiveReport {
    coll_query(op, array, dims, mesh, hw).unwrap()
}

fn coll_err(op: &str, array: &str, dims: &str, mesh: &str, hw: &str) -> Error {
    coll_query(op, array, dims, mesh, hw).unwrap_err()
}

/// ch3 pop quiz 2: AllGather_Y([E_Y, F]) on a v5e {'X': 8, 'Y': 4}, E = 2048,
/// F = 8192 bf16. Book: no wraparound on an axis of 4, so 3 × 8.4 MB / 4.5e10
/// = 560 µs (±0.5%); with a full bidirectional ring 34e6 / 9e10 = 377 µs (the
/// book rounds V to 34 MB: ±2%). E = F = 256: 32 kB shards, latency-bound,
/// "roughly 3 * 1us = 3us".
#[test]
fn ch3_pop_quiz_2_allgather() {
    let r = coll(
        "allgather_Y",
        "bf16[E_Y, F]",
        "E=2048,F=8192",
        "X=8,Y=4",
        "tpu-v5e@book",
    );
    assert!(rel(r.time_s, 560e-6) < 0.005, "{}", r.time_s);
    assert_eq!(r.bound, "bandwidth");
    assert_eq!(r.result.as_deref(), Some("bf16[E, F]"));
    let wrap = &r.alternatives[0];
    assert!(rel(wrap.time_s, 377e-6) < 0.02, "{}", wrap.time_s);
    let small = coll(
        "allgather_Y",
        "bf16[E_Y, F]",
        "E=256,F=256",
        "X=8,Y=4",
        "tpu-v5e@book",
    );
    assert_eq!(small.bound, "latency");
    assert!(rel(small.time_s, 3e-6) < 1e-9, "{}", small.time_s);
}

/// ch3 Q2 on a TPU v4p 4x4x4 (every axis wraps), B = 1024, D = 4096 bf16:
/// AllGather_X([B_X, D_Y]) moves 2BD/Y: 2·1024·4096/(9e10·4) = 23 µs;
/// AllGather_XY: 2BD/(2·9e10) = 46 µs; AllReduce_Z([B_X, D_Y]{U_Z}):
/// 4BD/(16·9e10) = 11.6 µs (book's rounding ±1%).
#[test]
fn ch3_q2_allgather_over_sharded_arrays() {
    let (hw, mesh, dims) = ("tpu-v4p@book", "X=4,Y=4,Z=4", "B=1024,D=4096");
    let a = coll("allgather_X", "bf16[B_X, D_Y]", dims, mesh, hw);
    assert!(rel(a.time_s, 23e-6) < 0.02, "{}", a.time_s);
    assert!(rel(a.bytes, 2.0 * 1024.0 * 4096.0 / 4.0) < 1e-12);
    let b = coll("allgather_XY", "bf16[B_X, D_Y]", dims, mesh, hw);
    assert!(rel(b.time_s, 46e-6) < 0.02, "{}", b.time_s);
    let c = coll("allreduce", "bf16[B_X, D_Y]{U_Z}", dims, mesh, hw);
    assert_eq!(c.axes, vec!["Z"]);
    assert!(rel(c.time_s, 11.6e-6) < 0.01, "{}", c.time_s);
}

/// ch3 Q3: AllGather_X([B_X]) with B = 128 bf16 on a v4p 4x4x4: latency-bound,
/// "we can do the full gather in only 2 hops, so roughly 2us".
#[test]
fn ch3_q3_latency_bound() {
    let r = coll(
        "allgather",
        "bf16[B_X]",
        "B=128",
        "X=4,Y=4,Z=4",
        "tpu-v4p@book",
    );
    assert_eq!(r.bound, "latency");
    assert!(rel(r.time_s, 2e-6) < 1e-9, "{}", r.time_s);
}

/// ch12: in one H100 node an AllGather of V costs V·(N−1)/(N·W_gpu) =
/// 1e9·7/(8·450e9); NVLink SHARP AllReduces in V/W_gpu; two nodes are bound
/// by the node level, V/514e9 (quiz 4).
#[test]
fn ch12_gpu_collectives() {
    let r = coll("allgather", "1GB", "", "X=8", "h100@book");
    assert!(rel(r.time_s, 1e9 * 7.0 / (8.0 * 450e9)) < 1e-12);
    let ar = coll("allreduce", "1GB", "", "X=8", "h100@book");
    let sharp = ar
        .alternatives
        .iter()
        .find(|a| a.name.contains("SHARP"))
        .unwrap();
    assert!(rel(sharp.time_s, 1e9 / 450e9) < 1e-12);
    // ring AllReduce = 2 × AllGather
    assert!(rel(ar.time_s, 2.0 * r.time_s) < 1e-12);
    let two = coll("allgather_XY", "1GB", "", "X=2,Y=8", "h100@book");
    assert!(rel(two.time_s, 1e9 / 514.2857e9) < 1e-5, "{}", two.time_s);
    assert_eq!(two.levels.len(), 2);
    // DP over X across nodes with TP inside (X=4 nodes, Y=8 in a node): the
    // X groups have one GPU per node, each on its own 50 GB/s NIC:
    // V·(M−1)/(M·W_nic) = 1e9·3/(4·50e9)
    let dp = coll("allgather_X", "1GB", "", "X=4,Y=8", "h100@book");
    assert!(
        rel(dp.time_s, 1e9 * 3.0 / (4.0 * 50e9)) < 1e-12,
        "{}",
        dp.time_s
    );
}

#[test]
fn collective_hostile_inputs() {
    let e = coll_err("allgathr", "1GB", "", "X=4", "tpu-v5e@book");
    assert!(e.to_string().contains("allgather"), "{e}");
    let e = coll_err("allgather_Q", "1GB", "", "X=4,Y=4", "tpu-v5e@book");
    assert!(e.to_string().contains("not in the mesh"), "{e}");
    let e = coll_err(
        "allgather",
        "bf16[E_X, F]",
        "E=1000,F=8",
        "X=3",
        "h100@book",
    );
    assert!(e.to_string().contains("not divisible"), "{e}");
    let e = coll_err("allgather", "bf16[E_X, F]", "E=0,F=8", "X=4", "h100@book");
    assert!(e.to_string().contains("size 0"), "{e}");
    let e = coll_err(
        "allgather",
        "1GB",
        "",
        "X=4294967296,Y=4294967296",
        "h100@book",
    );
    assert!(e.to_string().contains("2^64"), "{e}");
    let e = coll_err(
        "allreduce",
        "bf16[E_X, F]",
        "E=8,F=8",
        "X=4",
        "tpu-v5e@book",
    );
    assert!(e.to_string().contains("{U_X}"), "{e}");
    let e = coll_err("allgather", "bf16[E_X, F]", "E=8", "X=4", "tpu-v5e@book");
    assert!(e.to_string().contains("--dims F="), "{e}");
    let e = coll_err("allgather", "1GB", "", "X=64,Y=64", "tpu-v5e@book");
    assert!(e.to_string().contains("pod"), "{e}");
}

fn roof(what: &str, dims: &str, hw: &str) -> roofline::RooflineReport {
    let q = RooflineQuery {
        what: Some(what.into()),
        dims: Some(dims.into()),
        hw: Some(hw.into()),
        ..Default::default()
    };
    roofline::evaluate(&q, Catalog::builtin(), &mut NoTrace).unwrap()
}

/// ch1 Q1/Q2 on TPU v5e: a bf16 matmul is compute-bound for B > C/W = 240
/// (1.97e14/8.2e11 = 240.2 in the book's approximation); int8 everything
/// also 240 (int8 C twice, bytes halved); int8 weights with bf16 FLOPs 120.
/// Exactly, with D = 8192, F = 32768: B* = α·2DF/(2DF − α(2D + 2F)) =
/// 240.24·2DF/(2DF − 240.24·81920) = 249.4.
#[test]
fn ch1_critical_batches() {
    let dims = "B=512,D=8192,F=32768";
    let r = roof(
        "bf16[B, D] * bf16[D, F] -> bf16[B, F]",
        dims,
        "tpu-v5e@book",
    );
    assert!(rel(r.critical_batch_approx.unwrap(), 240.0) < 0.002);
    let (d, f, a) = (8192.0, 32768.0, 1.97e14 / 8.2e11);
    let exact = a * 2.0 * d * f / (2.0 * d * f - a * (2.0 * d + 2.0 * f));
    assert!(rel(r.critical_batch.unwrap(), exact) < 1e-12);
    assert_eq!(r.bound, "compute");
    // intensity BDF/(BD + DF + BF)
    let b = 512.0;
    assert!(rel(r.arithmetic_intensity, b * d * f / (b * d + d * f + b * f)) < 1e-12);
    let i8 = roof(
        "int8[B, D] * int8[D, F] -> int8[B, F]",
        dims,
        "tpu-v5e@book",
    );
    assert!(rel(i8.critical_batch_approx.unwrap(), 240.0) < 0.002);
    let w8 = roof(
        "bf16[B, D] * int8[D, F] -> bf16[B, F]",
        dims,
        "tpu-v5e@book",
    );
    assert!(rel(w8.critical_batch_approx.unwrap(), 120.0) < 0.002);
}

/// ch1 Q4: a per-sample weight matmul int8[B, D] · int8[B, D, F] has
/// intensity ≈ 2 whatever B; a bf16 dot product (2N−1)/(4N+2) → 1/2;
/// ch12: fp32 x + y has N FLOPs over 12N bytes, 1/12, against the H100 CUDA
/// cores' 33.5e12 / 3.35e12 = 10 (memory-bound).
#[test]
fn ch1_ch12_low_intensity_ops() {
    let r = roof(
        "int8[B, D] * int8[B, D, F] -> int8[B, F]",
        "B=64,D=4096,F=4096",
        "tpu-v5e@book",
    );
    assert!(
        (r.arithmetic_intensity - 2.0).abs() < 0.01,
        "{}",
        r.arithmetic_intensity
    );
    let dot = roof("bf16[N] * bf16[N] -> bf16[]", "N=1Mi", "tpu-v5e@book");
    assert!((dot.arithmetic_intensity - 0.5).abs() < 1e-5);
    let add = roof("fp32[N] + fp32[N] -> fp32[N]", "N=1e9", "h100@book");
    assert!(rel(add.arithmetic_intensity, 1.0 / 12.0) < 1e-12);
    assert!(
        rel(add.critical_intensity, 10.0) < 0.001,
        "{}",
        add.critical_intensity
    );
    assert_eq!(add.bound, "memory");
    assert!(add.unit.starts_with("vector"));
}

/// ch2 Q3: streaming bf16 weights from host on a TPU v6e, compute-bound iff
/// B > C/W_pcie = 9.2e14/1.6e10 = 57,500 (@book uses the Q3 PCIe figure).
#[test]
fn ch2_q3_weights_from_host() {
    let q = RooflineQuery {
        what: Some("bf16[B, D] * bf16[D, F]".into()),
        dims: Some("B=1024,D=8192,F=32768".into()),
        from: Some("host".into()),
        hw: Some("tpu-v6e@book".into()),
        ..Default::default()
    };
    let r = roofline::evaluate(&q, Catalog::builtin(), &mut NoTrace).unwrap();
    assert!(rel(r.critical_batch_approx.unwrap(), 57_500.0) < 1e-9);
    assert_eq!(r.bound, "bandwidth");
}

#[test]
fn roofline_raw_load_and_errors() {
    let q = RooflineQuery {
        flops: Some("1.97e14".into()),
        bytes: Some("8.2e11".into()),
        hw: Some("tpu-v5e@book".into()),
        ..Default::default()
    };
    let r = roofline::evaluate(&q, Catalog::builtin(), &mut NoTrace).unwrap();
    assert!(rel(r.t_math_s, 1.0) < 1e-12 && rel(r.t_mem_s, 1.0) < 1e-12);
    // load 2·D·F bytes over v5e HBM at 8.2e11 B/s
    let l = roof("load bf16[D, F]", "D=8192,F=8192", "tpu-v5e@book");
    assert!(rel(l.time_s, 2.0 * 8192.0 * 8192.0 / 8.2e11) < 1e-12);
    let bad = |what: &str, dims: &str, hw: &str| {
        let q = RooflineQuery {
            what: Some(what.into()),
            dims: Some(dims.into()),
            hw: Some(hw.into()),
            ..Default::default()
        };
        roofline::evaluate(&q, Catalog::builtin(), &mut NoTrace)
            .unwrap_err()
            .to_string()
    };
    assert!(bad("bf16[B_X, D] * bf16[D, F]", "B=8,D=8,F=8", "h100").contains("meshplan shard"));
    assert!(bad("fp8[B, D] * fp8[D, F]", "B=8,D=8,F=8", "tpu-v5e@book").contains("no fp8"));
    assert!(bad("fp32[N] + fp32[N]", "N=8", "tpu-v6e").contains("vector"));
    assert!(bad("bf16[B, D] * bf16[D, F]", "B=8,D=8", "h100").contains("--dims F="));
    assert!(bad("bf16[B, D] * bf16[D, F]", "B=0,D=8,F=8", "h100").contains("size 0"));
}

fn shard(what: &str, dims: &str, mesh: &str, hw: &str) -> ShardReport {
    let q = ShardQuery {
        what: what.into(),
        dims: Some(dims.into()),
        mesh: Some(mesh.into()),
        hw: Some(hw.into()),
        ..Default::default()
    };
    sharding::evaluate(&q, Catalog::builtin(), &mut NoTrace).unwrap()
}

/// ch3 pop quiz: int8[128, 2048] as A[I_XY, J] on {'X': 2, 'Y': 8, 'Z': 2}:
/// int8[8, 2048] = 16,384 bytes per device, 2 copies (over Z), 512 KiB in
/// all. ch3 Q1: A[I_X, J, K] on {'X': 4, 'Y': 8, 'Z': 2} is stored 16 times.
#[test]
fn ch3_array_layouts() {
    let ShardReport::Array(a) = shard(
        "int8[I_XY, J]",
        "I=128,J=2048",
        "X=2,Y=8,Z=2",
        "tpu-v5p@book",
    ) else {
        panic!()
    };
    assert_eq!(a.local_shape, vec![8, 2048]);
    assert_eq!(a.bytes_per_device, 16_384.0);
    assert_eq!(a.replication, 2);
    assert_eq!(a.stored_bytes, 512.0 * 1024.0);
    let ShardReport::Array(b) = shard(
        "A[I_X, J, K]",
        "I=64,J=64,K=64",
        "X=4,Y=8,Z=2",
        "tpu-v5p@book",
    ) else {
        panic!()
    };
    assert_eq!(b.stored_bytes / b.total_bytes, 16.0);
}

/// ch3 Q4: X[B, D] · Y[D_X, F] → Z[B, F]. Strategy 1 (book default) gathers
/// Y: T = max(2BDF/C, 2DF/W_ici); strategy 2 slices X locally, multiplies
/// into Z{U_X} and AllReduces 2BF bytes: T = max(2BDF/(X·C), 4BF/W_ici).
/// v5p@book, one wrapped axis of 16, B = 1024, D = 8192, F = 32768.
#[test]
fn ch3_q4_matmul_strategies() {
    let ShardReport::Matmul(m) = shard(
        "X[B, D] * Y[D_X, F] -> Z[B, F]",
        "B=1024,D=8192,F=32768",
        "X=16,Y=16,Z=16",
        "tpu-v5p@book",
    ) else {
        panic!()
    };
    let (b, d, f, c, w) = (1024.0, 8192.0, 32768.0, 4.59e14, 1.8e11);
    assert!(m.cases.iter().any(|x| x.starts_with("case 2")));
    let s1 = &m.strategy;
    assert_eq!(s1.collectives[0].op.name(), "AllGather");
    assert!(rel(s1.t_comms_s, 2.0 * d * f / w) < 1e-12);
    assert!(rel(s1.t_math_s, 2.0 * b * d * f / c) < 1e-12);
    let s2 = m
        .alternatives
        .iter()
        .find(|s| s.name.contains("AllReduce"))
        .unwrap();
    assert!(rel(s2.t_comms_s, 4.0 * b * f / w) < 1e-12);
    assert!(rel(s2.t_math_s, 2.0 * b * d * f / (16.0 * c)) < 1e-12);
    // D > 2B: strategy 2 moves fewer bytes (the book's "D > 2B")
    assert!(s2.t_comms_s < s1.t_comms_s);
}

/// Case 3 into a sharded output is a ReduceScatter: A[I, J_X] · B[J_X, K] →
/// C[I, K_X] moves V = 2·I·K bytes, costing V/W_ici on a wrapped v5e axis of 16.
/// Case 4 gathers the smaller input: A[I_X, J] · B[J, K_X] with A smaller.
#[test]
fn ch3_cases_3_and_4() {
    let ShardReport::Matmul(m) = shard(
        "A[I, J_X] * B[J_X, K] -> C[I, K_X]",
        "I=256,J=4096,K=8192",
        "X=16,Y=16",
        "tpu-v5e@book",
    ) else {
        panic!()
    };
    let rs = &m.strategy.collectives[0];
    assert_eq!(rs.op.name(), "ReduceScatter");
    assert!(rel(rs.time_s, 2.0 * 256.0 * 8192.0 / 9e10) < 1e-12);
    assert_eq!(m.strategy.output, "C[I, K_X]");
    let ShardReport::Matmul(m4) = shard(
        "A[I_X, J] * B[J, K_X] -> C[I_X, K]",
        "I=256,J=4096,K=8192",
        "X=16,Y=16",
        "tpu-v5e@book",
    ) else {
        panic!()
    };
    assert!(m4.cases.iter().any(|c| c.starts_with("case 4")));
    assert_eq!(m4.strategy.collectives[0].before, "A[I_X, J]");
    // FLOPs per device: 2·I·J·K / 16 (the computation is split over X only)
    assert!(rel(m4.flops_per_device, 2.0 * 256.0 * 4096.0 * 8192.0 / 16.0) < 1e-12);
}

#[test]
fn shard_hostile_inputs() {
    let bad = |what: &str, dims: &str, mesh: &str| {
        let q = ShardQuery {
            what: what.into(),
            dims: Some(dims.into()),
            mesh: Some(mesh.into()),
            hw: Some("tpu-v5e@book".into()),
            ..Default::default()
        };
        sharding::evaluate(&q, Catalog::builtin(), &mut NoTrace)
            .unwrap_err()
            .to_string()
    };
    assert!(bad("A[I_X, J]", "I=10,J=4", "X=4").contains("not divisible"));
    assert!(bad("A[I_Z, J]", "I=16,J=4", "X=4,Y=4").contains("not in the mesh"));
    assert!(bad("A[I_X, J_X]", "I=16,J=4", "X=4").contains("at most once"));
    assert!(bad("A[I, J] * B[J, K]", "I=4,J=4", "X=4").contains("--dims K="));
    assert!(
        bad("A[I, J] * B[K, L] -> C[I, K]", "I=4,J=4,K=4,L=4", "X=4").contains("one input only")
    );
    assert!(bad("A[I]", "I=4", "X=0").contains("size 0"));
}

/// ch4 Q7: DeepSeek v3, 37B active parameters, 14.8T tokens, 2.79M H800
/// hours at 1.513e15 FLOP/s fp8: 6·37e9·14.8e12 / (2.79e6·3600·1.513e15)
/// = 21.6%; the book rounds the numerator to 3.3e24 (two digits, ±1.5%)
/// and prints 21.7%.
#[test]
fn ch4_q7_deepseek_mfu() {
    let q = MfuQuery {
        model: "37B".into(),
        tokens: "14.8T".into(),
        chip_hours: Some("2.79M".into()),
        dtype: Some("fp8".into()),
        hw: Some("h800".into()),
        ..Default::default()
    };
    let mut rec = Recorder::default();
    let r = mfu::evaluate(&q, Catalog::builtin(), &mut rec).unwrap();
    assert!(rel(r.mfu, 0.217) < 0.015, "{}", r.mfu);
    assert!(rel(r.train_flops, 3.3e24) < 0.015);
    assert!(rec.find("mfu").is_some());
    let both = MfuQuery {
        time: Some("54 days".into()),
        chips: Some("2048".into()),
        ..q.clone()
    };
    assert!(mfu::evaluate(&both, Catalog::builtin(), &mut NoTrace).is_err());
}

/// ch2 Q2: a TPU v5p pod is 16x20x28 = 8,960 chips, 2,240 hosts, 17,920
/// TensorCores, 4.1e18 bf16 FLOP/s and 860 TB of HBM (96 GB chips); a v5e
/// 16x16 pod 256 chips, 32 hosts, 5.1e16 FLOP/s, 4 TB.
#[test]
fn ch2_q2_pod_inventories() {
    let c = Catalog::builtin();
    let r = hw_report(c.chip("tpu-v5p@book").unwrap(), &mut NoTrace);
    let pod = r
        .slices
        .iter()
        .find(|s| s.shape == vec![16, 20, 28])
        .unwrap();
    assert_eq!(
        (pod.chips, pod.hosts, pod.tensorcores),
        (8960, 2240, Some(17_920))
    );
    assert!(rel(pod.peak_flops_per_s, 4.1e18) < 0.005);
    assert!(rel(pod.hbm_bytes, 860e12) < 0.001);
    let e = hw_report(c.chip("tpu-v5e@book").unwrap(), &mut NoTrace);
    let pod = e.slices.iter().find(|s| s.shape == vec![16, 16]).unwrap();
    assert_eq!((pod.chips, pod.hosts), (256, 32));
    assert!(rel(pod.peak_flops_per_s, 5.1e16) < 0.02);
    assert!(rel(pod.hbm_bytes, 4e12) < 0.03);
    // a 16x16 v5e wraps on both axes: the cut crosses 16 lines × 2 links × 2
    // directions × 4.5e10 B/s
    assert!(rel(pod.bisection_bytes_per_s, 16.0 * 2.0 * 2.0 * 4.5e10) < 1e-12);
}

/// ch2: v5p VPU = 8·128·4 ALUs × 1.75 GHz = 7e12 per core (2 cores); ch12: an
/// H100 has 132·4 = 528 Tensor Cores, 16,896 CUDA cores, 33.5e12 vector ops/s;
/// the 1,024-GPU SuperPOD AllGather levels are 8·450/7 = 514 GB/s,
/// 32·400/31 = 413 GB/s and 4·12.8/3 = 17.1 TB/s.
#[test]
fn anatomy_and_network_levels() {
    let c = Catalog::builtin();
    let v5p = hw_report(c.chip("tpu-v5p@book").unwrap(), &mut NoTrace);
    assert!(
        rel(
            v5p.anatomy.vector_peak_flops_per_s.unwrap(),
            2.0 * 8.0 * 128.0 * 4.0 * 1.75e9
        ) < 1e-12
    );
    let h = hw_report(c.chip("h100@book").unwrap(), &mut NoTrace);
    assert_eq!(h.anatomy.matrix_units, Some(528));
    assert_eq!(h.anatomy.vector_alus, Some(16_896));
    assert!(rel(h.anatomy.vector_peak_flops_per_s.unwrap(), 33.5e12) < 1e-12);
    let bw: Vec<f64> = h
        .network_levels
        .iter()
        .map(|l| l.allgather_bandwidth_bytes_per_s)
        .collect();
    assert!(rel(bw[0], 514.2857e9) < 1e-6);
    assert!(rel(bw[1], 412.9e9) < 1e-3);
    assert!(rel(bw[2], 17.07e12) < 1e-3);
    // fp8 critical intensity: 2e15/3.35e12 = 597 (the book: "fp8 590")
    assert!(rel(h.critical_intensity_hbm_fp8.unwrap(), 2e15 / 3.35e12) < 1e-12);
    for name in ["v100", "a100-40gb", "h800", "mi325x", "v100@book"] {
        assert!(c.chip(name).is_ok(), "{name}");
    }
}

/// A bare parameter count is a model with (almost exactly) that many parameters.
#[test]
fn bare_parameter_count_models() {
    let m = Catalog::builtin().model_or_bare("70B").unwrap();
    let p = meshplan_core::model::params::count(&m.arch, &mut NoTrace).total as f64;
    assert!(rel(p, 70e9) < 1e-5, "{p}");
    assert!(m.notes.contains("guessed shape"));
    assert!(Catalog::builtin().model_or_bare("llama-2-13bb").is_err());
}

/// The unidirectional-ring alternative of an AllToAll (issue 24): each
/// chip's X−1 chunks of V/X² go d = 1 … X−1 hops the one way round, so a
/// link carries V·(X−1)/(2X) and T = V·(X−1)/(2·X·W_one-way): for 128 MiB
/// on a 16-chip v5e@book ring (W = 45 GB/s one way) 134,217,728·15 /
/// (32·45e9) = 1.398 ms, 3.75× the bidirectional ring's V/(4·90 GB/s) =
/// 372.8 µs — not the all-gather's V·(X−1)/(X·W) = 2.796 ms.
#[test]
fn unidirectional_all_to_all_is_half_the_all_gather() {
    let alt = |op: &str| {
        let q = CollectiveQuery {
            op: op.into(),
            array: "128 MiB".into(),
            mesh: Some("X=16".into()),
            hw: Some("tpu-v5e@book".into()),
            ..Default::default()
        };
        let r = cq::evaluate(&q, Catalog::builtin(), &mut NoTrace).unwrap();
        let uni = r
            .alternatives
            .iter()
            .find(|a| a.name == "unidirectional ring");
        (r.time_s, uni.unwrap().time_s)
    };
    let v = 134_217_728.0;
    let (bidir, uni) = alt("alltoall");
    assert!((uni - v * 15.0 / (32.0 * 45e9)).abs() / uni < 1e-9, "{uni}");
    assert!((bidir - v / (4.0 * 90e9)).abs() / bidir < 1e-9, "{bidir}");
    let (_, ag) = alt("allgather");
    assert!((ag - v * 15.0 / (16.0 * 45e9)).abs() / ag < 1e-9, "{ag}");
}
