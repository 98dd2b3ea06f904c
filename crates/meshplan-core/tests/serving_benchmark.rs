//! Serving as benchmarks measure it (issue 26): the closed loop at a fixed
//! concurrency (staggered, or in lockstep waves at fixed lengths) and the
//! open loop at a request rate under the engine's scheduler (slots, token
//! budget, prefill batches, frontend), and `plan infer` listing each
//! plan once without quantising a bf16 model silently. Expected values are
//! derived by hand in the comments, from quantities the report computes
//! elsewhere (the static batch's prefill and decode step) and from
//! Little's law.

#![allow(clippy::print_stdout)] // the plan-search timing is part of the report

mod common;

use meshplan_core::inference::serving::{Continuous, EngineProfile, Percentiles, Workload};
use meshplan_core::inference::{self, scenario::resolve, InferQuery, InferReport};
use meshplan_core::planner::{ChipBudget, InferSearch};
use meshplan_core::scenario::Scenario;
use meshplan_core::trace::NoTrace;
use meshplan_core::units::DType;
use meshplan_core::Catalog;

/// Llama-3.1-70B, bf16, on `chips` H100 at TP `tp`, under `engine`.
fn query(engine: EngineProfile, chips: u64, (t_in, t_out): (u64, u64), w: Workload) -> InferQuery {
    InferQuery {
        batch: 1,
        prompt_len: t_in,
        gen_len: t_out,
        context: t_in + t_out,
        mesh: vec![chips],
        tp: Some(chips),
        engine: Some(engine),
        workload: w,
        ..InferQuery::default()
    }
}

fn eval(q: &InferQuery) -> InferReport {
    let cat = Catalog::builtin();
    let m = cat.model("llama-3.1-70b").unwrap();
    let chip = cat.chip("h100").unwrap();
    inference::evaluate(m, chip, q, &mut NoTrace).unwrap()
}

fn cont(r: &InferReport) -> &Continuous {
    r.serving.continuous.as_ref().unwrap()
}

fn close(got: f64, want: f64, rel: f64, what: &str) {
    assert!(
        ((got - want) / want).abs() <= rel,
        "{what}: got {got}, want {want} (rel {rel})"
    );
}

fn vllm() -> EngineProfile {
    EngineProfile::builtin("vllm").unwrap()
}

/// One user: nobody else's step is in flight and nobody else prefills, so
/// TTFT = t_fe + T_prefill(T_in) (the static batch of one prompt's TTFT),
/// TPOT = the decode step of one sequence at T_in + T_out/2 (the static
/// batch of one's TPOT), E2E = TTFT + (T_out − 1)·TPOT, and the loop
/// closes at R = 1/E2E requests/s (8 chips, one TP-8 replica).
#[test]
fn concurrency_one_is_frontend_plus_prefill() {
    let q = query(vllm(), 8, (1000, 200), Workload::Concurrency(1));
    let r = eval(&q);
    let c = cont(&r);
    let sb = &r.serving.static_batch;
    let t_fe = vllm().frontend_s;
    assert!(t_fe > 0.0);
    close(c.ttft_s.mean, t_fe + sb.ttft_s, 1e-12, "TTFT");
    // deterministic: every percentile is the mean
    assert_eq!(c.ttft_s.p99, c.ttft_s.mean);
    close(c.tpot_s.mean, sb.tpot_s, 1e-12, "TPOT");
    assert_eq!(c.tpot_s.p99, c.tpot_s.mean);
    let e2e = t_fe + sb.ttft_s + 199.0 * sb.tpot_s;
    close(c.e2e_s.mean, e2e, 1e-12, "E2E");
    close(c.requests_per_s, 1.0 / e2e, 1e-9, "R");
    close(c.output_tokens_per_s, 200.0 / e2e, 1e-9, "tokens/s");
    close(
        c.output_tokens_per_s_per_chip,
        200.0 / e2e / 8.0,
        1e-9,
        "per chip",
    );
    close(
        c.output_tokens_per_s_per_user,
        1.0 / sb.tpot_s,
        1e-12,
        "per user",
    );
    assert_eq!(c.limited_by, "none");
    assert_eq!(c.queue_wait_s, 0.0);
}

/// More users than slots (an engine with max_num_seqs = B = 8): the engine
/// runs B requests and the rest wait. The B running requests see exactly
/// the closed loop of B users, so TPOT and R are those of concurrency B;
/// Little's law on the user cycle, N = R·(TTFT_N + (T_out − 1)·TPOT), with
/// the B-user loop's B = R·(TTFT_B + (T_out − 1)·TPOT), gives
/// TTFT_N = TTFT_B + (N − B)/R: TPOT holds, TTFT grows by the wait.
#[test]
fn users_beyond_the_slots_wait_and_tpot_holds() {
    let mut e = vllm();
    e.max_num_seqs = 8;
    let at = |n| eval(&query(e.clone(), 8, (256, 512), Workload::Concurrency(n)));
    let (rb, rn) = (at(8), at(32));
    let (b, n) = (cont(&rb), cont(&rn));
    assert_eq!((b.slots, n.slots), (8, 8));
    assert_eq!(b.limited_by, "none");
    assert_eq!(n.limited_by, "slots");
    assert_eq!(n.concurrency, 8.0);
    close(n.tpot_s.mean, b.tpot_s.mean, 1e-12, "TPOT holds");
    close(n.requests_per_s, b.requests_per_s, 1e-9, "throughput holds");
    let wait = (32.0 - 8.0) / b.requests_per_s;
    close(n.queue_wait_s, wait, 1e-6, "W_q");
    close(
        n.ttft_s.mean,
        b.ttft_s.mean + wait,
        1e-9,
        "TTFT grows by the wait",
    );
    // the 20× inflation of the old model is gone: TPOT stays within the
    // full batch's step stretched by its prefills
    assert!(n.tpot_s.mean < 1.5 * n.decode_step_s, "{n:?}");
}

/// Long prompts, short outputs, 64 users on vLLM (K = 8192 tokens a step):
/// the prefills need more than the steps can carry, so every step is full —
/// C = 64 decode rows and K − C = 8128 prompt tokens — and TPOT is that
/// full step for every request, while the loop serves R = (K − C)/(T_in·TPOT)
/// requests/s (the budget's prompt tokens per second over a prompt's
/// tokens) and the rest of the cycle is TTFT: TTFT = N/R − (T_out − 1)·TPOT.
#[test]
fn the_token_budget_holds_tpot_and_queues_prompts() {
    let q = query(vllm(), 8, (8000, 16), Workload::Concurrency(64));
    let r = eval(&q);
    let c = cont(&r);
    assert_eq!(c.limited_by, "token-budget", "{c:?}");
    assert_eq!(c.token_budget, 8192);
    assert_eq!(c.tpot_s.p50, c.tpot_s.mean);
    assert_eq!(c.tpot_s.p99, c.tpot_s.mean);
    close(
        c.requests_per_s,
        (8192.0 - 64.0) / (8000.0 * c.tpot_s.mean),
        1e-9,
        "R from the budget",
    );
    close(
        c.ttft_s.mean,
        64.0 / c.requests_per_s - 15.0 * c.tpot_s.mean,
        1e-9,
        "Little",
    );
    assert!(c.queue_wait_s > 0.0);
    // the full step carries the decode rows and more: longer than the decode step
    assert!(c.tpot_s.mean > c.decode_step_s);
}

/// SGLang runs prefill first (decodes paused, no token budget on the
/// decode steps): TPOT is the decode step stretched by the others' prefill
/// share, t_d/(1 − ρ·(C − 1)/C), never capped.
#[test]
fn prefill_priority_stretches_tpot_instead() {
    let e = EngineProfile::builtin("sglang").unwrap();
    assert!(e.prefill_priority && !e.mixes_prefill());
    let r = eval(&query(e, 8, (8000, 16), Workload::Concurrency(64)));
    let c = cont(&r);
    assert_eq!(c.limited_by, "none");
    let rho_o = c.prefill_utilisation * 63.0 / 64.0;
    close(c.tpot_s.mean, c.decode_step_s / (1.0 - rho_o), 1e-9, "TPOT");
    close(
        64.0 / c.requests_per_s,
        c.ttft_s.mean + 15.0 * c.tpot_s.mean,
        1e-6,
        "Little",
    );
}

/// SGLang batches the prompts waiting when it forms a prefill batch: under
/// a staggered load a batch holds b prompts, the fixed point of
/// `b = R·(T(b) + t_d·e^(−R·T(b))/(1 − e^(−R·t_d)))` (decode steps and
/// batches counted over a long run), not the C running. Checked from
/// outside: `T(b)` interpolated between the static batches of 1 and 2
/// prompts (their TTFT), b read back from the reported prefill latency
/// `s_1 = T(b)`, the equation at the reported R and t_d, and the prefill
/// share of the GPU `ρ = R·T(b)/b`.
#[test]
fn prefill_first_batches_the_prompts_waiting() {
    let e = EngineProfile::builtin("sglang").unwrap();
    let w = Workload::Concurrency(64);
    let (t_in, t_out) = (600, 400);
    let r = eval(&query(e.clone(), 8, (t_in, t_out), w));
    let c = cont(&r);
    let batch = |b| {
        let q = InferQuery {
            batch: b,
            ..query(e.clone(), 8, (t_in, t_out), Workload::Static)
        };
        eval(&q).serving.static_batch.ttft_s
    };
    let (t1, t2) = (batch(1), batch(2));
    let b = 1.0 + (c.prefill_s - t1) / (t2 - t1);
    assert!(b > 1.0 && b < 2.0, "b = {b}");
    let (rate, t_d, t_b) = (c.requests_per_s, c.decode_step_s, c.prefill_s);
    let idle = t_d / (1.0 - (-rate * t_d).exp());
    close(b, rate * (t_b + idle * (-rate * t_b).exp()), 1e-6, "b");
    close(c.prefill_utilisation, rate * t_b / b, 1e-6, "ρ");
    // the share of one batch of all 64 prompts is less than half: the
    // batch's eager launch floor (80 layers × 12 kernels × 48.7 µs) is
    // shared by b ≈ 1 prompts, not 64
    assert!(
        t_b / b > 2.0 * batch(64) / 64.0,
        "{} vs {}",
        t_b / b,
        batch(64) / 64.0
    );
}

/// The open loop at a trickle (one request every 1000 s) sees an idle
/// engine: C → 1, TTFT → t_fe + T_prefill, TPOT → the batch-1 step; past
/// the capacity it is flagged and reported at capacity (every slot busy:
/// the closed loop of B users), never NaN.
#[test]
fn open_loop_from_idle_to_saturated() {
    let r = eval(&query(vllm(), 8, (1000, 200), Workload::Rate(1e-3)));
    let c = cont(&r);
    let sb = &r.serving.static_batch;
    assert!(!c.saturated);
    close(
        c.ttft_s.p50,
        vllm().frontend_s + sb.ttft_s,
        1e-2,
        "TTFT p50",
    );
    close(c.tpot_s.mean, sb.tpot_s, 1e-3, "TPOT");
    let over = eval(&query(vllm(), 8, (1000, 200), Workload::Rate(1e6)));
    let o = cont(&over);
    assert!(o.saturated);
    let cap = eval(&query(
        vllm(),
        8,
        (1000, 200),
        Workload::Concurrency(o.slots),
    ));
    close(
        o.requests_per_s,
        cont(&cap).requests_per_s,
        1e-12,
        "capacity",
    );
    for v in [o.ttft_s.p99, o.tpot_s.p99, o.e2e_s.p99] {
        assert!(v.is_finite() && v > 0.0);
    }
}

/// The engines' documented scheduler defaults: vLLM max_num_seqs 1024 and
/// max_num_batched_tokens 8192 on H100-class GPUs; TensorRT-LLM
/// max_batch_size 2048, max_num_tokens 8192; SGLang chunked_prefill_size
/// 8192 with prefill first; the slots are min(max_num_seqs, KV capacity).
#[test]
fn engine_scheduler_defaults() {
    let v = vllm();
    assert_eq!((v.max_num_seqs, v.max_prefill_tokens), (1024, 8192));
    let t = EngineProfile::builtin("trtllm").unwrap();
    assert_eq!((t.max_num_seqs, t.max_prefill_tokens), (2048, 8192));
    let s = EngineProfile::builtin("sglang").unwrap();
    assert_eq!((s.max_num_seqs, s.max_prefill_tokens), (0, 8192));
    assert_eq!(v.slots(5000), 1024);
    assert_eq!(v.slots(300), 300);
    assert_eq!(s.slots(5000), 5000);
    assert_eq!(v.slots(0), 1);
    // the book's roofline has no frontend
    assert_eq!(EngineProfile::builtin("ideal").unwrap().frontend_s, 0.0);
}

/// A scenario file states the workload as benchmarks do, and the
/// percentiles are ordered.
#[test]
fn percentiles_are_ordered() {
    let cat = Catalog::builtin();
    let sc = Scenario::parse(
        r#"
model = { name = "llama-3.1-70b" }
hardware = { chip = "h100", chips = 8 }
inference = { prompt_len = 1000, gen_len = 500, workload = "concurrency=64" }
"#,
        "t.toml",
    )
    .unwrap();
    let s = resolve(&sc, cat).unwrap();
    let r = inference::evaluate(&s.model, &s.chip, &s.query, &mut NoTrace).unwrap();
    let c = cont(&r);
    for p in [&c.ttft_s, &c.tpot_s, &c.e2e_s] {
        assert!(p.p50 <= p.p90 && p.p90 <= p.p99, "{p:?}");
        assert!(p.mean.is_finite() && p.mean > 0.0);
    }
    close(
        c.e2e_s.mean,
        c.ttft_s.mean + 499.0 * c.tpot_s.mean,
        1e-12,
        "E2E",
    );
}

fn plan_70b(max_chips: u64) -> InferSearch<'static> {
    let cat = Catalog::builtin();
    let mut s = InferSearch::new(
        cat.model("llama-3.1-70b").unwrap(),
        cat.chip("h100").unwrap(),
        ChipBudget::AtMost(max_chips),
    );
    s.tpot_slo = Some(0.05);
    s.top_k = 10;
    s
}

/// `plan infer` for 70B on up to 16 H100 under a 50 ms TPOT: a bf16 model
/// stays bf16 (weights and KV) unless quantisation is allowed, the report
/// says which dtypes it searched, and each plan (tp, ep, pp, sharding,
/// engine, batch) is listed once, its other replica counts folded into it.
#[test]
fn plan_infer_lists_distinct_plans_and_keeps_bf16() {
    let s = plan_70b(16);
    let r = s.run();
    assert!(!r.plans.is_empty());
    let mut keys = std::collections::BTreeSet::new();
    for p in &r.plans {
        assert_eq!((p.weights_dtype, p.kv_dtype), (DType::Bf16, DType::Bf16));
        assert!(
            keys.insert((p.tp, p.ep, p.pp, p.engine.clone(), p.batch)),
            "{p:?} twice"
        );
        assert_eq!(p.replica_options[0], p.replicas);
    }
    // TP 4 fits 1, 2 or 4 replicas in 16 chips: one row
    assert!(r.plans.iter().any(|p| p.replica_options.len() > 1));
    assert!(
        s.dtypes_note().contains("--allow-quantization"),
        "{}",
        s.dtypes_note()
    );
    let mut q = plan_70b(16);
    q.allow_quantization();
    let rq = q.run();
    assert!(rq
        .plans
        .iter()
        .any(|p| p.weights_dtype != DType::Bf16 || !p.dtype_variants.is_empty()));
}

/// `plan infer` for 70B on up to 64 H100 with every GPU engine stays fast
/// (a debug build; the bound is loose, the time printed).
#[test]
fn plan_infer_70b_on_64_gpus_is_fast() {
    let cat = Catalog::builtin();
    let mut s = plan_70b(64);
    s.engines =
        meshplan_core::planner::infer::engines_for("all", cat.chip("h100").unwrap()).unwrap();
    let r = s.run();
    println!(
        "plan infer 70B up to 64 H100, {} engines: {} candidates in {:?}",
        s.engines.len(),
        r.candidates,
        r.elapsed
    );
    assert!(!r.plans.is_empty());
    assert!(r.elapsed.as_secs_f64() < 60.0, "{:?}", r.elapsed);
}

/// SGLang's overlap scheduler (`overlap_schedule`): a new prompt's prefill
/// waits one more decode step, less the eager prefill's host launch beyond
/// its GPU time. Llama-3.1-70B bf16 on 4 H200 (TP 4), 509 in / 534 out, 8
/// users: others are running, so the step in flight is t_res = t_d; the
/// eager launch time by hand is T_host = 80 layers · 12 launches · 48.7 µs
/// = 46.752 ms; t_ovl = max(0, t_d − max(0, T_host − T_gpu)), and the mean
/// TTFT is t_fe + W_q + s_1 + t_ovl + t_res/2 + W̄. With the flag off the
/// same query has t_ovl = 0.
#[test]
fn overlap_scheduler_waits_one_step_less_the_host_excess() {
    use meshplan_core::trace::{Recorder, Step};
    let cat = Catalog::builtin();
    let (m, chip) = (
        cat.model("llama-3.1-70b").unwrap(),
        cat.chip("h200").unwrap(),
    );
    let sg = EngineProfile::builtin("sglang").unwrap();
    assert!(sg.overlap_schedule);
    let q = |e: EngineProfile| InferQuery {
        mesh: vec![4],
        tp: Some(4),
        ..query(e, 4, (509, 534), Workload::Concurrency(8))
    };
    let bound = |s: &Step, k: &str| {
        s.bindings
            .iter()
            .find(|b| b.symbol == k)
            .unwrap_or_else(|| panic!("{} binds {k}", s.id))
            .value
    };
    let mut rec = Recorder::default();
    let r = inference::evaluate(m, chip, &q(sg.clone()), &mut rec).unwrap();
    let c = r.serving.continuous.unwrap();
    let host = rec.find("infer.prefill_host").unwrap();
    let t_host = 80.0 * 12.0 * 48.7e-6;
    assert!((host.value - t_host).abs() < 1e-12, "{}", host.value);
    let excess = (t_host - bound(host, "T_gpu")).max(0.0);
    let ttft = rec.find("serving.ttft").unwrap();
    assert_eq!(bound(ttft, "t_res"), c.decode_step_s);
    let t_ovl = bound(ttft, "t_ovl");
    assert!((t_ovl - (c.decode_step_s - excess).max(0.0)).abs() < 1e-15);
    assert!(t_ovl > 0.0, "the GPU prefill outlasts the host launch here");
    let sum = c.frontend_s + c.queue_wait_s + c.prefill_s + t_ovl + c.decode_step_s / 2.0;
    assert!((c.ttft_s.mean - sum - bound(ttft, "W̄")).abs() < 1e-12);
    let off = EngineProfile {
        overlap_schedule: false,
        ..sg
    };
    let mut rec = Recorder::default();
    let r_off = inference::evaluate(m, chip, &q(off), &mut rec).unwrap();
    assert_eq!(bound(rec.find("serving.ttft").unwrap(), "t_ovl"), 0.0);
    assert!(r_off.serving.continuous.unwrap().ttft_s.mean < c.ttft_s.mean);
}

// ---- lockstep=N: the closed loop at fixed lengths (inference/serving/lockstep.rs)

/// [`query`] on 8 H100 (TP 8) under the named engine with `n` sequences:
/// the static batch of n prompts is the wave's prefill and decode step.
fn lock(engine: &str, n: u64, lens: (u64, u64), w: Workload) -> InferQuery {
    InferQuery {
        batch: n,
        ..query(EngineProfile::builtin(engine).unwrap(), 8, lens, w)
    }
}

fn same(a: &Percentiles, b: &Percentiles, what: &str) {
    for (x, y, p) in [
        (a.mean, b.mean, "mean"),
        (a.p50, b.p50, "p50"),
        (a.p90, b.p90, "p90"),
        (a.p99, b.p99, "p99"),
    ] {
        close(x, y, 1e-9, &format!("{what} {p}"));
    }
}

/// SGLang runs a waiting prefill first: 4 users of 3,200-token prompts are
/// 12,800 tokens, two batches of its 8,192-token budget (6,400 each).
/// Requests 1–2 get their first token after the first batch (T_wave/2),
/// 3–4 after the second (T_wave): TTFT p50 = t_fe + T_wave/2, p90 = p99 =
/// t_fe + T_wave, mean t_fe + 0.75·T_wave. Requests 1–2 then wait T_wave/2
/// for the second batch before decoding: mean TPOT = t_d + 0.25·T_wave/
/// (T_out − 1), p99 = t_d + 0.5·T_wave/(T_out − 1), p50 (request 3) = t_d.
/// Every user's cycle is t_fe + T_wave + (T_out − 1)·t_d.
#[test]
fn prefill_first_waves_by_hand() {
    let (n, t_in, t_out) = (4, 3200, 800);
    let r = eval(&lock("sglang", n, (t_in, t_out), Workload::Lockstep(n)));
    let c = cont(&r);
    assert!(c.lockstep, "{c:?}");
    let t_wave = r.serving.static_batch.ttft_s;
    let t_d = r.serving.static_batch.tpot_s;
    let t_fe = EngineProfile::builtin("sglang").unwrap().frontend_s;
    assert_eq!(r.serving.static_batch.prefill_chunks, 2);
    let gaps = (t_out - 1) as f64;
    close(c.ttft_s.p50, t_fe + t_wave / 2.0, 1e-9, "TTFT p50");
    close(c.ttft_s.p90, t_fe + t_wave, 1e-9, "TTFT p90");
    close(c.ttft_s.p99, t_fe + t_wave, 1e-9, "TTFT p99");
    close(c.ttft_s.mean, t_fe + 0.75 * t_wave, 1e-9, "TTFT mean");
    close(c.tpot_s.mean, t_d + 0.25 * t_wave / gaps, 1e-9, "TPOT mean");
    close(c.tpot_s.p99, t_d + 0.5 * t_wave / gaps, 1e-9, "TPOT p99");
    close(c.tpot_s.p50, t_d, 1e-9, "TPOT p50");
    let cycle = t_fe + t_wave + gaps * t_d;
    close(c.e2e_s.p50, cycle, 1e-9, "E2E");
    // the first batch's own latency, the mean wait for earlier batches
    // (0.75 − 0.5)·T_wave, the wave's share of the cycle, and the ITL
    // whose mean is the TPOT's
    close(c.prefill_s, t_wave / 2.0, 1e-9, "s_1");
    close(c.queue_wait_s, 0.25 * t_wave, 1e-9, "W_q");
    close(c.prefill_utilisation, t_wave / cycle, 1e-9, "ρ");
    close(c.itl_s.mean, c.tpot_s.mean, 1e-9, "ITL mean");
    close(c.itl_s.p50, t_d, 1e-9, "ITL p50");
    close(c.requests_per_s, n as f64 / cycle, 1e-9, "requests/s");
    close(
        c.output_tokens_per_s_per_chip,
        n as f64 * t_out as f64 / cycle / 8.0,
        1e-9,
        "tokens/s per chip",
    );
    // the waves wait for each other: TTFT well above the staggered loop's
    let staggered = eval(&lock("sglang", n, (t_in, t_out), Workload::Concurrency(n)));
    assert!(c.ttft_s.p99 > 2.0 * cont(&staggered).ttft_s.p99);
}

/// vLLM mixes prompt chunks into the decode steps: 8 prompts of 1,000
/// tokens fit its 8,192-token budget, one step prefills the wave and every
/// request gets its first token at t_fe + T_wave and decodes at t_d. 16
/// prompts need two steps: the waves do not persist and the loop is the
/// staggered `concurrency=16`, number for number.
#[test]
fn chunked_prefill_keeps_one_step_waves_only() {
    let r = eval(&lock("vllm", 8, (1000, 500), Workload::Lockstep(8)));
    let c = cont(&r);
    assert!(c.lockstep);
    let t_fe = EngineProfile::builtin("vllm").unwrap().frontend_s;
    let one = Percentiles {
        mean: t_fe + r.serving.static_batch.ttft_s,
        p50: t_fe + r.serving.static_batch.ttft_s,
        p90: t_fe + r.serving.static_batch.ttft_s,
        p99: t_fe + r.serving.static_batch.ttft_s,
    };
    same(&c.ttft_s, &one, "TTFT");
    close(c.tpot_s.p99, r.serving.static_batch.tpot_s, 1e-9, "TPOT");

    let waves = eval(&lock("vllm", 16, (1000, 500), Workload::Lockstep(16)));
    let loop_ = eval(&lock("vllm", 16, (1000, 500), Workload::Concurrency(16)));
    let (w, l) = (cont(&waves), cont(&loop_));
    assert!(!w.lockstep);
    same(&w.ttft_s, &l.ttft_s, "TTFT");
    same(&w.tpot_s, &l.tpot_s, "TPOT");
    close(w.requests_per_s, l.requests_per_s, 1e-9, "requests/s");
}

/// One user is the same benchmark either way: lockstep=1 is concurrency=1.
#[test]
fn one_user_is_the_closed_loop_of_one() {
    for engine in ["sglang", "vllm", "trtllm"] {
        let a = eval(&lock(engine, 1, (2000, 300), Workload::Lockstep(1)));
        let b = eval(&lock(engine, 1, (2000, 300), Workload::Concurrency(1)));
        let (a, b) = (cont(&a), cont(&b));
        same(&a.ttft_s, &b.ttft_s, engine);
        same(&a.tpot_s, &b.tpot_s, engine);
        close(a.requests_per_s, b.requests_per_s, 1e-9, engine);
    }
}

/// The ideal engine (no frontend, no token budget) prefills the whole wave
/// in one step and decodes it to the end: a lockstep loop of B users is the
/// static batch of B, repeated.
#[test]
fn ideal_waves_are_the_static_batch() {
    let r = eval(&lock("ideal", 16, (2048, 512), Workload::Lockstep(16)));
    let (c, s) = (cont(&r), &r.serving.static_batch);
    assert!(c.lockstep);
    close(c.ttft_s.p50, s.ttft_s, 1e-9, "TTFT");
    close(c.tpot_s.mean, s.tpot_s, 1e-9, "TPOT");
    close(
        c.output_tokens_per_s,
        s.output_tokens_per_s,
        1e-9,
        "tokens/s",
    );
}

/// More users than slots: the requests beyond B start as the first finish,
/// so the loop is staggered (vLLM's max_num_seqs is 1,024 on the H100).
#[test]
fn more_users_than_slots_are_staggered() {
    let w = eval(&lock("vllm", 1, (100, 100), Workload::Lockstep(5000)));
    let l = eval(&lock("vllm", 1, (100, 100), Workload::Concurrency(5000)));
    assert!(!cont(&w).lockstep);
    assert!(cont(&w).slots < 5000);
    same(&cont(&w).ttft_s, &cont(&l).ttft_s, "TTFT");
}

/// JetStream's orchestrator prefills one request per forward
/// (`prefill_batch_max = 1`): with 200-token prompts its 1,024-token budget
/// would hold five, yet each request's prefill is a batch of one, T(1), the
/// static batch of one's TTFT. SGLang on the same prompts batches more
/// than one at 64 users (its s_1 = T(b) lies above T(1)).
#[test]
fn jetstream_prefills_one_request_per_forward() {
    let run = |engine: &str, chip: &str, mesh: &str, w: &str| {
        let sc = format!(
            "[model]\nname = \"llama-3.1-8b\"\n[hardware]\nchip = \"{chip}\"\nmesh = \"{mesh}\"\n\
             [inference]\nengine = \"{engine}\"\nbatch = 1\nprompt_len = 200\ngen_len = 100\nworkload = \"{w}\"\n"
        );
        common::infer(&sc)
    };
    let j = run("jetstream", "tpu-v5e", "2x2", "concurrency=64");
    assert_eq!(
        EngineProfile::builtin("jetstream")
            .unwrap()
            .prefill_batch_max,
        1
    );
    close(
        cont(&j).prefill_s,
        j.serving.static_batch.ttft_s,
        1e-12,
        "T(1)",
    );
    let s = run("sglang", "h100", "1", "concurrency=64");
    assert!(cont(&s).prefill_s > s.serving.static_batch.ttft_s);
}
