//! A closed loop at fixed lengths (`lockstep=N`, issue 26): the users run
//! in waves while the engine's scheduler keeps them in phase, and fall back
//! to the staggered closed loop when it does not. Expected values come from
//! the static batch of N prompts (its TTFT is the wave's prefill
//! `T_prefill(N prompts of T_in)`, its TPOT the decode step of N at
//! `T_in + T_out/2`), derived by hand in the comments.

use meshplan_core::inference::serving::{Continuous, EngineProfile, Percentiles, Workload};
use meshplan_core::inference::{self, InferQuery, InferReport};
use meshplan_core::trace::NoTrace;
use meshplan_core::Catalog;

/// Llama-3.1-70B, bf16, on 8 H100 at TP 8, `n` sequences under `engine`.
fn query(engine: &str, n: u64, (t_in, t_out): (u64, u64), w: Workload) -> InferQuery {
    InferQuery {
        batch: n,
        prompt_len: t_in,
        gen_len: t_out,
        context: t_in + t_out,
        mesh: vec![8],
        tp: Some(8),
        engine: Some(EngineProfile::builtin(engine).unwrap()),
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

fn close(got: f64, want: f64, what: &str) {
    assert!(
        ((got - want) / want).abs() <= 1e-9,
        "{what}: got {got}, want {want}"
    );
}

fn same(a: &Percentiles, b: &Percentiles, what: &str) {
    for (x, y, p) in [
        (a.mean, b.mean, "mean"),
        (a.p50, b.p50, "p50"),
        (a.p90, b.p90, "p90"),
        (a.p99, b.p99, "p99"),
    ] {
        close(x, y, &format!("{what} {p}"));
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
    let r = eval(&query("sglang", n, (t_in, t_out), Workload::Lockstep(n)));
    let c = cont(&r);
    assert!(c.lockstep, "{c:?}");
    let t_wave = r.serving.static_batch.ttft_s;
    let t_d = r.serving.static_batch.tpot_s;
    let t_fe = EngineProfile::builtin("sglang").unwrap().frontend_s;
    assert_eq!(r.serving.static_batch.prefill_chunks, 2);
    let gaps = (t_out - 1) as f64;
    close(c.ttft_s.p50, t_fe + t_wave / 2.0, "TTFT p50");
    close(c.ttft_s.p90, t_fe + t_wave, "TTFT p90");
    close(c.ttft_s.p99, t_fe + t_wave, "TTFT p99");
    close(c.ttft_s.mean, t_fe + 0.75 * t_wave, "TTFT mean");
    close(c.tpot_s.mean, t_d + 0.25 * t_wave / gaps, "TPOT mean");
    close(c.tpot_s.p99, t_d + 0.5 * t_wave / gaps, "TPOT p99");
    close(c.tpot_s.p50, t_d, "TPOT p50");
    let cycle = t_fe + t_wave + gaps * t_d;
    close(c.e2e_s.p50, cycle, "E2E");
    close(c.requests_per_s, n as f64 / cycle, "requests/s");
    close(
        c.output_tokens_per_s_per_chip,
        n as f64 * t_out as f64 / cycle / 8.0,
        "tokens/s per chip",
    );
    // the waves wait for each other: TTFT well above the staggered loop's
    let staggered = eval(&query("sglang", n, (t_in, t_out), Workload::Concurrency(n)));
    assert!(c.ttft_s.p99 > 2.0 * cont(&staggered).ttft_s.p99);
}

/// vLLM mixes prompt chunks into the decode steps: 8 prompts of 1,000
/// tokens fit its 8,192-token budget, one step prefills the wave and every
/// request gets its first token at t_fe + T_wave and decodes at t_d. 16
/// prompts need two steps: the waves do not persist and the loop is the
/// staggered `concurrency=16`, number for number.
#[test]
fn chunked_prefill_keeps_one_step_waves_only() {
    let r = eval(&query("vllm", 8, (1000, 500), Workload::Lockstep(8)));
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
    close(c.tpot_s.p99, r.serving.static_batch.tpot_s, "TPOT");

    let waves = eval(&query("vllm", 16, (1000, 500), Workload::Lockstep(16)));
    let loop_ = eval(&query("vllm", 16, (1000, 500), Workload::Concurrency(16)));
    let (w, l) = (cont(&waves), cont(&loop_));
    assert!(!w.lockstep);
    same(&w.ttft_s, &l.ttft_s, "TTFT");
    same(&w.tpot_s, &l.tpot_s, "TPOT");
    close(w.requests_per_s, l.requests_per_s, "requests/s");
}

/// One user is the same benchmark either way: lockstep=1 is concurrency=1.
#[test]
fn one_user_is_the_closed_loop_of_one() {
    for engine in ["sglang", "vllm", "trtllm"] {
        let a = eval(&query(engine, 1, (2000, 300), Workload::Lockstep(1)));
        let b = eval(&query(engine, 1, (2000, 300), Workload::Concurrency(1)));
        let (a, b) = (cont(&a), cont(&b));
        same(&a.ttft_s, &b.ttft_s, engine);
        same(&a.tpot_s, &b.tpot_s, engine);
        close(a.requests_per_s, b.requests_per_s, engine);
    }
}

/// The ideal engine (no frontend, no token budget) prefills the whole wave
/// in one step and decodes it to the end: a lockstep loop of B users is the
/// static batch of B, repeated.
#[test]
fn ideal_waves_are_the_static_batch() {
    let r = eval(&query("ideal", 16, (2048, 512), Workload::Lockstep(16)));
    let (c, s) = (cont(&r), &r.serving.static_batch);
    assert!(c.lockstep);
    close(c.ttft_s.p50, s.ttft_s, "TTFT");
    close(c.tpot_s.mean, s.tpot_s, "TPOT");
    close(c.output_tokens_per_s, s.output_tokens_per_s, "tokens/s");
}

/// More users than slots: the requests beyond B start as the first finish,
/// so the loop is staggered (vLLM's max_num_seqs is 1,024 on the H100).
#[test]
fn more_users_than_slots_are_staggered() {
    let w = eval(&query("vllm", 1, (100, 100), Workload::Lockstep(5000)));
    let l = eval(&query("vllm", 1, (100, 100), Workload::Concurrency(5000)));
    assert!(!cont(&w).lockstep);
    assert!(cont(&w).slots < 5000);
    same(&cont(&w).ttft_s, &cont(&l).ttft_s, "TTFT");
}
