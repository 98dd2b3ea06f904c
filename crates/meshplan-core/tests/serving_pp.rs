//! Pipeline-parallel serving (`infer --pp`, `plan infer`), each number
//! checked against a value derived by hand from the model in
//! docs/inference.md ("Pipeline parallelism").

use meshplan_core::inference::pipeline::stage_layers;
use meshplan_core::inference::serving::{EngineProfile, Workload};
use meshplan_core::inference::{self, InferQuery, InferReport};
use meshplan_core::planner::infer::{ChipBudget, InferSearch};
use meshplan_core::trace::NoTrace;
use meshplan_core::units::DType;
use meshplan_core::Catalog;

fn eval(q: &InferQuery) -> meshplan_core::Result<InferReport> {
    let c = Catalog::builtin();
    inference::evaluate(
        c.model("llama-3.1-70b").unwrap(),
        c.chip("h100").unwrap(),
        q,
        &mut NoTrace,
    )
}

/// Llama-3.1-70B on `chips` H100 under vLLM, prompt 2048 + 512 generated.
fn q70(chips: u64, tp: u64, pp: u64, batch: u64) -> InferQuery {
    InferQuery {
        batch,
        prompt_len: 2048,
        gen_len: 512,
        context: 2560,
        mesh: vec![chips],
        tp: Some(tp),
        pp: Some(pp),
        engine: Some(EngineProfile::builtin("vllm").unwrap()),
        ..InferQuery::default()
    }
}

/// vLLM's `get_pp_indices`: ⌊L/P⌋ per stage, the remainder one more on the
/// stages before the last, counting backwards from the second-to-last.
#[test]
fn stage_split_follows_vllm() {
    assert_eq!(stage_layers(80, 2).unwrap(), vec![40, 40]);
    // 80 = 3·26 + 2: partitions[-2] and [-3] get one more
    assert_eq!(stage_layers(80, 3).unwrap(), vec![27, 27, 26]);
    // 126 (Llama-3.1-405B) = 4·31 + 2: the two middle stages
    assert_eq!(stage_layers(126, 4).unwrap(), vec![31, 32, 32, 31]);
    // 5 = 4·1 + 1: only partitions[-2]
    assert_eq!(stage_layers(5, 4).unwrap(), vec![1, 1, 2, 1]);
    // 7 = 4·1 + 3: partitions[-2], [-3], [-4] (the first included)
    assert_eq!(stage_layers(7, 4).unwrap(), vec![2, 2, 2, 1]);
    assert!(stage_layers(4, 5).is_err());
    assert!(stage_layers(4, 0).is_err());
}

/// Weights and KV per chip, tp 8 × pp 2 on 16 H100. By hand (Llama-3.1-70B:
/// D 8192, F 28672, 64 query / 8 KV heads of 128, V 128256, untied):
/// one layer = 8192·8192·2 (q, o) + 2·8192·1024 (k, v) + 3·8192·28672 +
/// 2·8192 (norms) = 855,654,400; V·D = 1,050,673,152. The last stage holds
/// 40 layers + the LM head + the final norm (8192):
/// 34,226,176,000 + 1,050,673,152 + 8192 = 35,276,857,344 parameters,
/// /8 chips · 2 B = 8,819,214,336 B per chip (the first stage, with the input
/// embedding instead, is 8,192 parameters lighter). KV per token
/// 2·8·128·80·2 B = 327,680 B; a stage holds half of a 2560-token
/// sequence's, 419,430,400 B; its largest batch is
/// ⌊8·(HBM − w)/419,430,400⌋.
#[test]
fn weights_and_kv_capacity_per_stage() {
    let r = eval(&q70(16, 8, 2, 64)).unwrap();
    assert_eq!(r.pp, 2);
    assert_eq!(r.stage_layers, vec![40, 40]);
    assert_eq!(r.chips_per_replica, 16);
    assert_eq!(r.replicas, 1);
    let w = r.weights_bytes_per_device.get();
    assert!((w - 8_819_214_336.0).abs() < 1.0, "{w}");
    let hbm = r.hbm_bytes_per_device.get();
    let hand = (8.0 * (hbm - 8_819_214_336.0) / 419_430_400.0).floor() as u64;
    assert_eq!(r.max_batch, hand);
    // KV per chip of the batch: 64·419,430,400/8
    let kv = r.kv_cache_bytes_per_device.get();
    assert!((kv - 64.0 * 419_430_400.0 / 8.0).abs() < 1.0, "{kv}");
    // P = 1 on the 8 chips of one stage holds the whole model: more than
    // twice fewer sequences (weights per chip double, KV per sequence too)
    let one = eval(&q70(8, 8, 1, 64)).unwrap();
    assert!(
        r.max_batch > 2 * one.max_batch,
        "{} vs {}",
        r.max_batch,
        one.max_batch
    );
}

/// At batch 1 the stages split the P = 1 step exactly (KV, matmuls,
/// weights, collectives and kernels are per layer; the LM head and sampling
/// sit on the last stage; the host step once), so TPOT(pp 2) − TPOT(pp 1 on
/// one stage's 8 chips) is the one send between the stages:
/// α_engine + max(V/W_nic, t_nic), V = 2 tensors·1·D·2 B = 32,768 B over
/// the scale-out network (the stages are on different nodes). TTFT grows by
/// the prompt's send, α + max(2·2048·D·2/W_nic, t_nic).
#[test]
fn tpot_grows_by_one_hop() {
    let c = Catalog::builtin();
    let chip = c.chip("h100").unwrap();
    let so = chip.scale_out.as_ref().unwrap();
    let (w_nic, t_nic) = (so.per_chip.one_way_rate().get(), so.latency.get());
    let alpha = EngineProfile::builtin("vllm").unwrap().allreduce_latency_s;
    let hop = |v: f64| alpha + (v / w_nic).max(t_nic);
    let p2 = eval(&q70(16, 8, 2, 1)).unwrap();
    let p1 = eval(&q70(8, 8, 1, 1)).unwrap();
    let d = p2.decode_step_time_s.get() - p1.decode_step_time_s.get();
    let want = hop(2.0 * 8192.0 * 2.0);
    assert!(
        (d - want).abs() < 1e-6 * p1.decode_step_time_s.get(),
        "{d} vs {want}"
    );
    let dt = p2.ttft_s.get() - p1.ttft_s.get();
    let want = hop(2.0 * 2048.0 * 8192.0 * 2.0);
    assert!((dt - want).abs() < 1e-6 * p1.ttft_s.get(), "{dt} vs {want}");
}

/// With 2B sequences the pipeline keeps two micro-batches of B in flight:
/// TPOT = max(T₁(B) + hop, 2·max(t_step, T_s(B))) where T₁(B) = t_step +
/// Σ_s T_s(B) is the P = 1 step on one stage's chips. Hence
/// T₁(B) + hop ≤ TPOT ≤ 2·T₁(B): the replica's throughput 2B/TPOT lies
/// between 1× and 2× the single stage-group's B/T₁(B) (up to P×).
#[test]
fn throughput_up_to_p_times_a_stage_group() {
    for b in [8u64, 32, 128] {
        let p2 = eval(&q70(16, 8, 2, 2 * b)).unwrap();
        let p1 = eval(&q70(8, 8, 1, b)).unwrap();
        let (t2, t1) = (p2.decode_step_time_s.get(), p1.decode_step_time_s.get());
        assert!(t2 > t1 && t2 <= 2.0 * t1, "B = {b}: {t2} vs {t1}");
        let gain = p2.tokens_per_s / p1.tokens_per_s;
        assert!(gain > 1.0 && gain <= 2.0, "B = {b}: gain {gain}");
    }
}

/// P = 1 given explicitly is the model without a pipeline, number for number.
#[test]
fn pp_one_changes_nothing() {
    let mut a = q70(8, 8, 1, 16);
    let b = {
        a.pp = None;
        eval(&a).unwrap()
    };
    a.pp = Some(1);
    let x = eval(&a).unwrap();
    assert_eq!(
        serde_json::to_string(&x).unwrap(),
        serde_json::to_string(&b).unwrap()
    );
    assert!(!serde_json::to_string(&x).unwrap().contains("\"pp\""));
}

/// Continuous batching and disaggregated serving run on the pipelined
/// replicas: per chip is per 16-chip replica, and the pipeline's decode
/// step is the continuous TPOT floor.
#[test]
fn continuous_and_disaggregated_with_pp() {
    let mut q = q70(32, 8, 2, 64);
    q.workload = Workload::Concurrency(64);
    let r = eval(&q).unwrap();
    assert_eq!(r.replicas, 2);
    let c = r.serving.continuous.as_ref().unwrap();
    let want = c.requests_per_s * 512.0 / 32.0;
    assert!((c.output_tokens_per_s_per_chip - want).abs() < 1e-9 * want);
    assert!(c.tpot_s.mean >= c.decode_step_s && c.ttft_s.mean > 0.0);
    let d = r.serving.disaggregated.as_ref().unwrap();
    assert_eq!(d.prefill_replicas + d.decode_replicas, 2);
    assert!(d.output_tokens_per_s.is_finite() && d.output_tokens_per_s > 0.0);
}

/// Hostile layouts: a clear error, never a panic.
#[test]
fn hostile_pipelines_are_refused() {
    let msg = |q: &InferQuery| eval(q).unwrap_err().to_string();
    let m = msg(&q70(16, 1, 100, 1));
    assert!(m.contains("exceeds the L = 80 layers"), "{m}");
    let m = msg(&q70(16, 8, 3, 1));
    assert!(m.contains("does not divide the 16 chips"), "{m}");
    let m = msg(&q70(16, 4, 8, 1));
    assert!(m.contains("TP × EP × PP = 4 × 1 × 8"), "{m}");
    let m = msg(&q70(16, 8, 0, 1));
    assert!(m.contains("at least 1"), "{m}");
    let m = msg(&q70(16, 8, u64::MAX, 1));
    assert!(m.contains("layers") || m.contains("divide"), "{m}");
}

/// The serving search tries pipelines across nodes (16 H100 = two NVLink
/// domains: pp ∈ {1, 2}; 32 = four: pp ∈ {1, 2, 4}), none inside one node,
/// and pp points reach the Pareto front.
#[test]
fn plan_infer_searches_pp() {
    let c = Catalog::builtin();
    let m = c.model("llama-3.1-70b").unwrap();
    let chip = c.chip("h100").unwrap();
    let mut s = InferSearch::new(m, chip, ChipBudget::Exactly(16));
    s.top_k = 1000;
    let r = s.run();
    assert!(r.plans.iter().any(|p| p.pp == 2), "no pp 2 plan");
    assert!(r.plans.iter().all(|p| p.pp <= 2));
    // Llama-3.1-405B in bf16 (810 GB) on four 8-GPU nodes: the pipelines
    // hold more sequences' KV (TP 16 × PP 2 at batch 1024) and reach the
    // front's highest throughput per chip
    let big = c.model("llama-3.1-405b").unwrap();
    let mut s4 = InferSearch::new(big, chip, ChipBudget::Exactly(32));
    s4.weights_dtypes = vec![DType::Bf16];
    s4.kv_dtypes = vec![DType::Bf16];
    let r4 = s4.run();
    assert!(
        r4.pareto.iter().any(|p| p.pp > 1),
        "no pp point on the front"
    );
    assert!(r4.plans.iter().all(|p| p.pp <= 4));
    for p in r.plans.iter().filter(|p| p.pp == 2).take(3) {
        let rep = s.report(p).unwrap();
        assert_eq!(rep.pp, 2);
        assert_eq!(rep.tp * rep.pp * rep.replicas, 16);
        assert!((rep.decode_step_time_s.get() - p.tpot_s).abs() < 1e-15);
    }
    let one = InferSearch::new(m, chip, ChipBudget::Exactly(8)).run();
    assert!(one.plans.iter().all(|p| p.pp == 1));
}
