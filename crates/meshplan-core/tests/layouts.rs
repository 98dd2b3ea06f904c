//! Issue 25 part 3, "layouts production uses": MoE parallel folding
//! (Qwen3-235B-A22B, EP 32 over TP×DP on 256 H100), stated first/last stage
//! layer counts (DeepSeek-V3's 61 layers on PP 16), and interleaved
//! pipelines with any micro-batch count (Llama 3 405B, 16 micro-batches on
//! 16 stages). Each expected value is derived by hand in the comments.

mod common;
use common::train_on;
use meshplan_core::parallelism::pipeline::{
    bubble_fraction, bubble_microbatches, stages_with, StageLayers, StageLayersError,
};
use meshplan_core::parallelism::{Framework, Schedule};
use meshplan_core::timeline::{layout, Shape};
use meshplan_core::training::TrainReport;
use meshplan_core::Catalog;

fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * b.abs().max(1e-300)
}

/// The makespan of meshplan's list schedule (timeline::layout) for `p`
/// stages, `m` micro-batches, `v` chunks, a stage's forward 1 s and
/// backward 2 s per micro-batch (each chunk 1/v of that).
fn makespan(p: u64, m: u64, v: u64, schedule: Schedule) -> f64 {
    let s = Shape {
        stages: p,
        microbatches: m,
        chunks: v,
        schedule,
        forward_s: 1.0 / v as f64,
        backward_s: 2.0 / v as f64,
    };
    layout(&s)
        .expect("layout")
        .iter()
        .map(|x| x.start_s + x.dur_s)
        .fold(0.0, f64::max)
}

/// The interleaved bubble, by hand, in micro-batch times t_mb = F + B of one
/// stage (a chunk pass is t_mb/v):
///
/// * m ≥ p: each chunk's group of ≥ p micro-batches keeps the stage busy
///   until the next chunk's first micro-batch returns, so only the fill and
///   drain of the chain of p·v virtual stages idle: p − 1 chunk passes =
///   (p − 1)/v · t_mb. p = 4, v = 2: 1.5 t_mb, for m = 8 and for m = 6 (not a
///   multiple of p); the step is (m + 1.5)·3 s = 28.5 s and 22.5 s.
/// * m < p: no device ever holds two chunks' work at once, so the step is
///   the chain alone: the last virtual stage receives micro-batch 0 after
///   p·v − 1 chunk forwards, runs its m forward+backward pairs back to back
///   and the last backward walks back p·v − 1 stages:
///   (p·v − 1 + m) chunk passes. p = 4, v = 2, m = 2: 9 chunk passes of
///   1.5 s = 13.5 s, of which the work is m·v = 4 passes: the bubble is 5
///   chunk passes = 2.5 t_mb = (p − m) + (m − 1)/v = 2 + 0.5.
/// * v = 1 (GPipe/1F1B), m = 2 < p = 4: (m + p − 1)·t_mb = 5·3 = 15 s, bubble
///   p − 1 = 3 t_mb (both branches agree: (4 − 2) + 1/1 = 3).
#[test]
fn interleaved_bubble_by_hand_and_by_the_list_schedule() {
    for (p, m, v, sched, bubble, span) in [
        (4, 8, 2, Schedule::Interleaved, 1.5, 28.5),
        (4, 6, 2, Schedule::Interleaved, 1.5, 22.5),
        (4, 2, 2, Schedule::Interleaved, 2.5, 13.5),
        (4, 2, 1, Schedule::OneFOneB, 3.0, 15.0),
        (4, 8, 1, Schedule::OneFOneB, 3.0, 33.0),
    ] {
        let b = bubble_microbatches(p, m, v);
        assert!(close(b, bubble, 1e-12), "p {p} m {m} v {v}: {b}");
        // the step is (m + bubble)·t_mb with t_mb = 3 s
        assert!(
            close((m as f64 + b) * 3.0, span, 1e-12),
            "p {p} m {m} v {v}"
        );
        let sim = makespan(p, m, v, sched);
        assert!(close(sim, span, 1e-9), "simulated p {p} m {m} v {v}: {sim}");
    }
    // the fraction of the step: b/(m + b); m ≥ p: (p−1)/(m·v+p−1)
    assert!(close(bubble_fraction(4, 8, 2), 3.0 / 19.0, 1e-12));
    assert!(close(bubble_fraction(4, 2, 2), 2.5 / 4.5, 1e-12));
    assert_eq!(bubble_fraction(1, 8, 2), 0.0);
}

/// Megatron-Core's rules for --decoder-first/last-pipeline-num-layers
/// (TransformerConfig.__post_init__): counts ≥ 1, the rest split evenly over
/// the other stages, every stage's count a multiple of v when interleaved.
#[test]
fn stated_stage_layers_follow_megatron_rules() {
    let s = |first, last| StageLayers { first, last };
    // DeepSeek-V3, 61 layers on 16: 4 + 14·4 + 1 = 61
    assert_eq!(s(Some(4), Some(1)).split(61, 16, 1), Ok(Some((4, 4, 1))));
    // first only: the last joins the middle: 61 − 1 = 60 = 15·4
    assert_eq!(s(Some(1), None).split(61, 16, 1), Ok(Some((1, 4, 4))));
    // 61 − 3 − 3 = 55 does not split over 14 stages
    assert_eq!(
        s(Some(3), Some(3)).split(61, 16, 1),
        Err(StageLayersError::Middle {
            rest: 55,
            stages: 14
        })
    );
    // interleaved v = 2: the first stage's 3 layers do not split over 2 chunks
    assert_eq!(
        s(Some(3), Some(2)).split(61, 16, 2),
        Err(StageLayersError::Chunks { layers: 3, v: 2 })
    );
    // Llama 3 405B: 126 layers, one fewer on the first and last of 16:
    // 7 + 14·8 + 7 = 126; with v = 2 the 7 do not split
    assert_eq!(s(Some(7), Some(7)).split(126, 16, 1), Ok(Some((7, 8, 7))));
    assert!(s(Some(7), Some(7)).split(126, 16, 2).is_err());
    assert_eq!(
        s(Some(0), None).split(61, 16, 1),
        Err(StageLayersError::Empty)
    );
    assert_eq!(StageLayers::EVEN.split(61, 16, 1), Ok(None));
    // the stage list follows the stated counts, head on the last stage
    let cat = Catalog::builtin();
    let a = &cat.model("deepseek-v3").expect("model").arch;
    let st = stages_with(a, 16, Framework::Megatron, s(Some(4), Some(1)));
    assert_eq!(st[0], (4, false));
    assert_eq!(st[15], (1, true));
    assert_eq!(st.iter().map(|x| x.0).sum::<u64>(), 61);
}

const DSV3: &str = r#"
[training]
batch_tokens = 62914560
seq_len = 4096
remat = "full"
[parallelism]
pp = 16
ep = 64
dp = 128
zero = 1
schedule = "1f1b"
microbatches = 120
"#;

fn dsv3(split: &str) -> TrainReport {
    train_on("deepseek-v3", "h800", 2048, &format!("{DSV3}{split}"))
}

/// DeepSeek-V3 as published (PP 16, EP 64, ZeRO-1 DP 128 on 2,048 H800):
/// accepted with stated first/last counts, and the busiest stage prices the
/// step. 5 | 3×14 | 14 (5 + 42 + 14 = 61) puts 14 layers on the last stage
/// where Megatron's own split (3 | 4×14 | 2) has at most 4: the roofline's
/// T_math = FLOPs·(L_stage·pp/L)/(N·C) grows by 14/4 = 3.5 exactly.
#[test]
fn deepseek_v3_stated_split_is_priced_by_its_busiest_stage() {
    let own = dsv3("");
    let same = dsv3("first_stage_layers = 3\nlast_stage_layers = 2\n");
    let heavy = dsv3("first_stage_layers = 5\nlast_stage_layers = 14\n");
    for r in [&own, &same, &heavy] {
        assert!(r.feasible, "{:?}", r.reasons);
        let p = r.predicted.as_ref().expect("a prediction");
        assert!(p.step_time_s.get().is_finite() && p.step_time_s.get() > 0.0);
    }
    // Megatron's embedding/loss accounting gives 3 | 4 | 2: stating it changes nothing
    assert_eq!(own.t_math_s, same.t_math_s);
    let ps = |r: &TrainReport| r.predicted.as_ref().unwrap().step_time_s.get();
    assert_eq!(ps(&own), ps(&same));
    assert!(close(
        heavy.t_math_s.get() / own.t_math_s.get(),
        14.0 / 4.0,
        1e-12
    ));
    // the prediction's critical stage is the 14-layer one
    let sched = &heavy.predicted.as_ref().unwrap().schedule;
    assert_eq!(sched.layers, 14.0);
    assert!(ps(&heavy) > ps(&own));
    // and that stage's memory (14 layers' weights) is the device peak
    assert!(heavy.memory_per_device.total_bytes.get() > own.memory_per_device.total_bytes.get());
    // 3 | 3 leaves 55 layers for 14 stages: refused with Megatron's reason
    let bad = dsv3("first_stage_layers = 3\nlast_stage_layers = 3\n");
    assert!(!bad.feasible);
    assert!(
        bad.reasons.iter().any(|r| r.contains("14 middle stages")),
        "{:?}",
        bad.reasons
    );
}

/// Llama 3 405B, the paper's 8K layout on 16,384 H100 (TP 8, PP 16, DP 128,
/// 16 micro-batches of one sequence on 16 stages), interleaved with v = 4:
/// the roofline bubble is (p−1)/(m·v+p−1) = 15/79 of the step, i.e.
/// (p−1)/(v·m) = 15/64 of the ideal time; the prediction's bubble is
/// (p−1)/v = 3.75 micro-batch times of its critical stage. 1F1B with the
/// same 16 micro-batches: 15/31 — "half the step in the bubble".
#[test]
fn llama3_interleaved_sixteen_microbatches_on_sixteen_stages() {
    let run = |sched: &str, v: u64| {
        train_on(
            "llama-3.1-405b",
            "h100",
            16384,
            &format!(
                r#"
[training]
batch_tokens = "16Mi"
seq_len = 8192
remat = "full"
[parallelism]
tp = 8
pp = 16
dp = 128
zero = 1
schedule = "{sched}"
virtual_stages = {v}
microbatches = 16
sequence_parallel = true
"#
            ),
        )
    };
    let il = run("interleaved", 4);
    assert!(il.feasible, "{:?}", il.reasons);
    assert!(close(il.bubble_fraction, 15.0 / 79.0, 1e-12));
    assert!(close(
        il.t_bubble_s.get() / il.t_math_s.get(),
        15.0 / 64.0,
        1e-9
    ));
    let p = il.predicted.as_ref().expect("a prediction");
    assert!(p.step_time_s.get().is_finite());
    assert!(close(
        p.time_breakdown_s.bubble,
        15.0 / 4.0 * p.schedule.microbatch_s,
        1e-9
    ));
    let one = run("1f1b", 1);
    assert!(close(one.bubble_fraction, 15.0 / 31.0, 1e-12));
    assert!(p.step_time_s.get() < one.predicted.as_ref().unwrap().step_time_s.get());
}

/// Qwen3-235B-A22B with Megatron-Bridge's 256-H100 layout (TP 2, PP 8,
/// VP 4, EP 32): EP 32 > dp·cp = 16 folds over tp·dp = 32 ranks with whole
/// experts (etp = 1). Each device holds 128/32 = 4 experts of each of its
/// MoE layers; the dispatch all-to-all carries, per device, its
/// sequence-parallel shard of the step's tokens, B/(dp·tp) = 4Mi/32 =
/// 131,072, times top-k 8 times D 4,096 times 2 bytes = 8.59 GB per MoE
/// layer and direction, over a group of 32 ranks = 4 nodes of 8.
#[test]
fn qwen3_235b_ep32_folded_over_tp_and_dp() {
    let r = train_on(
        "qwen3-235b-a22b",
        "h100",
        256,
        r#"
[training]
batch_tokens = "4Mi"
seq_len = 4096
[parallelism]
tp = 2
pp = 8
ep = 32
etp = 1
dp = 16
zero = 1
schedule = "interleaved"
virtual_stages = 4
microbatches = 64
sequence_parallel = true
"#,
    );
    assert!(r.feasible, "{:?}", r.reasons);
    let p = r
        .predicted
        .as_ref()
        .expect("a prediction, not 'not available'");
    assert!(p.step_time_s.get().is_finite() && p.step_time_s.get() > 0.0);
    let ep = r
        .comms
        .iter()
        .find(|c| c.axis == meshplan_core::parallelism::LogicalAxis::Ep)
        .expect("an ep all-to-all");
    // V is the whole array: ep buffers of 8.59 GB
    let per_device = 4.0 * 1024.0 * 1024.0 / 32.0 * 8.0 * 4096.0 * 2.0;
    assert!(
        close(ep.bytes.get(), per_device * 32.0, 1e-12),
        "{}",
        ep.bytes.get()
    );
    // the predicted step's ep group: 32 ranks, 8 in each of 4 nodes (the
    // folded group takes tp's ranks and the innermost dp ranks: tp 2 · dp 4
    // fill a node of 8, dp's next factor 4 crosses nodes)
    let t = p.inventory.ep.as_ref().expect("ep in the inventory");
    assert_eq!(t.ranks, 32);
    assert_eq!((t.placement.per_node, t.placement.nodes), (8, 4));
    assert!(t.placement.crosses_nodes());
    // 94 layers + embedding + loss = 96 units on 8·4 virtual stages; the
    // bubble (p−1)/(m·v+p−1) = 7/263
    assert!(close(r.bubble_fraction, 7.0 / (64.0 * 4.0 + 7.0), 1e-12));
}

/// Llama 3 405B at 128K context (the paper's Table 4: TP 8, CP 16, PP 16,
/// DP 8 on 16,384 GPUs) with all-gather context parallelism (§3.3.2) against
/// ring attention. Both move the same bytes: each device's K/V chunk is
/// 2 (K, V) · T/cp = 8,192 tokens · 8 KV heads · 128 / tp 8 · 2 bytes =
/// 4 MiB; the ring sends it cp − 1 = 15 hops per pass, the all-gather
/// receives the 15 other chunks (60 MiB) in one call per pass; with full
/// recompute there are 4 passes (forward, recomputed forward, backward
/// gather, dK/dV reduce-scatter): 60 hops of 4 MiB or 4 calls of 60 MiB.
/// Nothing hides the gather, so its exposed time is at least the ring's.
#[test]
fn llama3_all_gather_context_parallelism() {
    let run = |cp_comm: &str| {
        train_on(
            "llama-3.1-405b",
            "h100",
            16384,
            &format!(
                r#"
[training]
batch_tokens = "16Mi"
seq_len = "128Ki"
remat = "full"
[parallelism]
tp = 8
cp = 16
pp = 16
dp = 8
zero = 1
schedule = "interleaved"
virtual_stages = 4
microbatches = 16
sequence_parallel = true
cp_comm = "{cp_comm}"
"#
            ),
        )
    };
    let (ring, ag) = (run("ring"), run("all-gather"));
    let chunk = 2.0 * 8192.0 * (8.0 * 128.0) / 8.0 * 2.0;
    assert_eq!(chunk, 4.0 * 1024.0 * 1024.0);
    let inv = |r: &TrainReport| {
        assert!(r.feasible, "{:?}", r.reasons);
        r.predicted
            .as_ref()
            .expect("a prediction")
            .inventory
            .cp
            .expect("cp transfers")
    };
    let (tr, ta) = (inv(&ring), inv(&ag));
    assert_eq!((tr.bytes_per_call, tr.calls), (chunk, 60.0));
    assert_eq!(
        (ta.bytes_per_call, ta.calls, ta.ring_steps),
        (15.0 * chunk, 4.0, 15.0)
    );
    assert_eq!(tr.bytes_per_call * tr.calls, ta.bytes_per_call * ta.calls);
    let cp_s = |r: &TrainReport| r.predicted.as_ref().unwrap().time_breakdown_s.cp_comm;
    assert!(cp_s(&ag) >= cp_s(&ring));
    assert!(ag.predicted.as_ref().unwrap().step_time_s.get().is_finite());
    assert_eq!(
        ag.config.cp_comm,
        meshplan_core::parallelism::CpComm::AllGather
    );
}
