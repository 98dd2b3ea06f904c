//! Serving fidelity (issue 15): context defaults, the static batch with its
//! prefill, engine profiles, quantised and MoE decode, continuous batching.
//! Expected values are derived by hand in the comments.

use meshplan_core::inference::{self, scenario::resolve, InferReport};
use meshplan_core::scenario::Scenario;
use meshplan_core::trace::NoTrace;
use meshplan_core::Catalog;

fn run(toml: &str) -> InferReport {
    let cat = Catalog::builtin();
    let sc = Scenario::parse(toml, "test.toml").unwrap();
    let s = resolve(&sc, cat).unwrap();
    inference::evaluate(&s.model, &s.chip, &s.query, &mut NoTrace).unwrap()
}

fn close(got: f64, want: f64, rel: f64, what: &str) {
    assert!(
        ((got - want) / want).abs() <= rel,
        "{what}: got {got}, want {want} (rel {rel})"
    );
}

#[test]
fn context_defaults_to_prompt_plus_output() {
    let r = run(r#"
model = { name = "llama-3-8b" }
hardware = { chip = "h100", chips = 1 }
inference = { prompt_len = 1000, gen_len = 500 }
"#);
    assert_eq!(r.context, 1500);
    // an explicit context still wins, and sets the default prompt (min(S, 2048))
    let r = run(r#"
model = { name = "llama-3-8b" }
hardware = { chip = "h100", chips = 1 }
inference = { context = 1024 }
"#);
    assert_eq!((r.context, r.prompt_len), (1024, 1024));
}

#[test]
fn book_chips_keep_the_ideal_roofline() {
    let r = run(r#"
model = { name = "book-ch7-18b" }
hardware = { chip = "tpu-v5e@book", mesh = "4x4" }
inference = { weights_dtype = "int8", kv_dtype = "int8", batch = 4, context = 8192 }
"#);
    assert_eq!(r.serving.engine, "ideal");
    assert_eq!(r.decode_overhead_time_s.get(), 0.0);
    // the book's step: the roofline without comms plus overlapped comms
    assert_eq!(r.decode_weight_time_s, r.weight_load_time_s);
    assert!(r.decode_step_time_s.get() >= r.decode_step_time_roofline_s.get());
}

/// Static batch under the ideal engine, by hand on tpu-v5e@book 4x4,
/// book-ch7-18b int8 (B = 8, T_in = 1000, T_out = 201, so S̄ = 1100):
/// TTFT = prefill of the 8 prompts; TPOT = the decode step at S̄;
/// total = TTFT + 200·TPOT; tokens/s = 8·201/total.
#[test]
fn static_batch_includes_its_prefill() {
    let base = r#"
model = { name = "book-ch7-18b" }
hardware = { chip = "tpu-v5e@book", mesh = "4x4" }
inference = { weights_dtype = "int8", kv_dtype = "int8", batch = 8, prompt_len = 1000, gen_len = 201 CTX }
"#;
    let r = run(&base.replace("CTX", ""));
    let sb = &r.serving.static_batch;
    // the decode step at the mean context is the report's step at context 1100
    let at_mean = run(&base.replace("CTX", ", context = 1100"));
    close(sb.tpot_s, at_mean.decode_step_time_s.get(), 1e-12, "TPOT");
    close(
        sb.total_time_s,
        sb.ttft_s + 200.0 * sb.tpot_s,
        1e-12,
        "total",
    );
    close(
        sb.output_tokens_per_s,
        8.0 * 201.0 / sb.total_time_s,
        1e-12,
        "tok/s",
    );
    // one prompt is bound by its 16-way TP collectives (17.5 ms > 11.9 ms of
    // FLOPs > 1.4 ms of HBM); 8 prompts move 8× the activations (the ring is
    // bandwidth-bound, so linear) while the weights are read once: 8× as long
    assert_eq!(r.bound_prefill.name(), "comms");
    close(sb.ttft_s, 8.0 * r.prefill_comms_time_s.get(), 1e-9, "TTFT");
    // decode-only throughput ignores the prefill: strictly faster
    assert!(r.tokens_per_s > sb.output_tokens_per_s);
}

/// vLLM on one H100, Llama-3-8B bf16, batch 1, prompt 128, 8 output tokens.
/// By hand: weights 16.06 GB (report) at 0.84·3.35 TB/s = 5.707 ms; KV of
/// S = 136 tokens is 17.8 MB at 0.57·3.35 TB/s = 9.3 µs; matmul at batch 1
/// (η = 0.7·1/169 = 0.00414): 2·7.5e9/(989.5e12·0.00414) ≈ 3.7 ms < 5.7 ms;
/// fixed 32·5·3.4 µs + 1.05 ms + sampling (128,256 logits × 12 B at
/// 0.84·3.35 TB/s = 0.547 µs) = 1.5945 ms → step ≈ 7.31 ms (SGLang measured
/// 7.37 ms for its own engine, issue #1008).
#[test]
fn vllm_decode_step_by_hand() {
    let r = run(r#"
model = { name = "llama-3-8b" }
hardware = { chip = "h100", chips = 1 }
inference = { prompt_len = 128, gen_len = 8, context = 136 }
"#);
    assert_eq!(r.serving.engine, "vllm");
    let w = r.weights_bytes.get() / (0.84 * 3.35e12);
    close(r.decode_weight_time_s.get(), w, 1e-9, "weights term");
    let kv = r.kv_cache_bytes_per_sequence.get() / (0.57 * 3.35e12);
    close(r.decode_kv_load_time_s.get(), kv, 1e-9, "KV term");
    let sampling = 128_256.0 * 12.0 / (0.84 * 3.35e12);
    let fixed = 32.0 * 5.0 * 3.4e-6 + 2.0e-3 + sampling;
    close(r.decode_overhead_time_s.get(), fixed, 1e-9, "fixed");
    // at batch 1 the GEMM curve's weight read (η₁₆(1) = 0.805/(1 +
    // 305^2.5)^(1/2.5) = 0.0026393, i.e. 2.61 TB/s) is slower than η_hbm's
    // 2.81 TB/s: the matmul term 2·P_mm/(C·η₁₆(1)) sets the step
    let eta = 0.805 / (1.0 + 305f64.powf(2.5)).powf(1.0 / 2.5);
    // P_mm: every parameter but the input embedding (V·D = 128,256·4,096)
    // and the norms ((2L + 1)·D = 65·4,096)
    let p_mm = r.params_total as f64 - 128_256.0 * 4096.0 - 65.0 * 4096.0;
    let mm = 2.0 * p_mm / (989.5e12 * eta);
    close(r.decode_compute_time_s.get(), mm, 1e-9, "matmul term");
    close(
        r.decode_step_time_s.get(),
        mm.max(w) + kv + 2.5445e-3,
        1e-4,
        "step",
    );
}

/// fp8 weights on an H100 under vLLM run on the fp8 tensor cores (W8A8);
/// int4 has no Hopper tensor path, so it runs bf16 GEMMs plus dequantisation:
/// at batch 256 the matmul term grows by elements·2/(67e12/2) per step.
#[test]
fn quantised_weights_use_the_matching_peak_or_dequantise() {
    let base = r#"
model = { name = "llama-3-8b" }
hardware = { chip = "h100", chips = 1 }
inference = { weights_dtype = "WDT", batch = 256, prompt_len = 128, gen_len = 128 }
"#;
    let fp8 = run(&base.replace("WDT", "fp8"));
    assert_eq!(fp8.compute_dtype.name(), "fp8");
    let bf16 = run(&base.replace("WDT", "bf16"));
    // the profile's dequantisation on a chip without measured kernel tables
    // (A100 40GB: the tables serve the 80 GB part), int4 weight-only even
    // though the chip has int4 tensor cores: P·2 ops at 19.5e12/2 ops/s
    let a100 = base.replace("h100", "a100-40gb");
    let int4 = run(&a100.replace("WDT", "int4"));
    assert_eq!(int4.compute_dtype.name(), "bf16");
    let bf16_a100 = run(&a100.replace("WDT", "bf16"));
    let p = int4.params_total as f64;
    let deq = p * 2.0 / 9.75e12;
    close(
        int4.decode_compute_time_s.get() - bf16_a100.decode_compute_time_s.get(),
        deq,
        1e-6,
        "dequantisation",
    );
    // fp8 GEMMs at twice the peak but on the 8-bit efficiency curve:
    // η₈(256) = 0.545·256/(256 + 181) = 0.3193 against η₁₆(256) =
    // 0.805·256/(256^2.5 + 305^2.5)^(1/2.5) = 0.5457 (vllm.toml's H100
    // fit, p = 2.5), so the matmul takes 0.5457/(2·0.3193) = 0.8545 of the
    // bf16 time
    let eta8 = 0.545 * 256.0 / (256.0 + 181.0);
    let eta16 = 0.805 * 256.0 / (256f64.powf(2.5) + 305f64.powf(2.5)).powf(1.0 / 2.5);
    close(
        fp8.decode_compute_time_s.get(),
        bf16.decode_compute_time_s.get() * eta16 / (2.0 * eta8),
        1e-6,
        "fp8 matmul",
    );
}

/// Mixtral-8x7B (E = 8, k = 2) at batch 1 reads 1 − (1 − 2/8)¹ = 1/4 of its
/// routed experts; at batch 64, 1 − 0.75⁶⁴ ≈ 1 (all of them).
#[test]
fn moe_decode_reads_only_the_routed_experts() {
    let base = r#"
model = { name = "mixtral-8x7b" }
hardware = { chip = "a100-40gb", chips = 4 }
inference = { batch = B, prompt_len = 128, gen_len = 128 }
"#;
    // a chip without measured kernel tables: the profile's η_hbm (the
    // measured MoE kernels are tested in tests/kernels.rs)
    let one = run(&base.replace("B", "1"));
    let many = run(&base.replace("B", "64"));
    let all = many.decode_weight_time_s.get();
    let w_dev = one.weights_bytes_per_device.get();
    // routed share of the weights per device = (all − dense)/… : solve from the
    // two points: t(1) = (dense + routed/4)/W, t(64) ≈ (dense + routed)/W
    let w_eff = 0.84 * 1.555e12;
    close(all, w_dev / w_eff, 1e-6, "all experts at batch 64");
    let p = Catalog::builtin().model("mixtral-8x7b").unwrap();
    let counts = meshplan_core::model::params::count(&p.arch, &mut NoTrace);
    let routed = counts.experts_routed as f64 * 2.0 / 4.0; // bf16 bytes over 4 chips
    close(
        one.decode_weight_time_s.get(),
        (w_dev - routed * 0.75) / w_eff,
        1e-6,
        "a quarter of the experts at batch 1",
    );
}

/// Continuous batching at concurrency C: Little's law per replica,
/// C = R·(TTFT + (T_out − 1)·TPOT), and TPOT = t_d/(1 − ρ).
#[test]
fn continuous_batching_obeys_littles_law() {
    let r = run(r#"
model = { name = "llama-3.1-70b" }
hardware = { chip = "h100", chips = 8 }
parallelism = { tp = 4 }
inference = { batch = 32, prompt_len = 1000, gen_len = 500, workload = "concurrency=32" }
"#);
    let c = r.serving.continuous.as_ref().unwrap();
    let r_rep = c.requests_per_s / 2.0;
    let life = c.ttft_s.mean + 499.0 * c.tpot_s.mean;
    close(r_rep * life, 32.0, 1e-6, "Little's law");
    // a request's own prefill never delays its tokens: the others' share, ρ·(C − 1)/C
    close(
        c.tpot_s.mean,
        c.decode_step_s / (1.0 - c.prefill_utilisation * 31.0 / 32.0),
        1e-9,
        "TPOT",
    );
    assert!(c.ttft_s.p50 <= c.ttft_s.p90 && c.ttft_s.p90 <= c.ttft_s.p99);
    assert!(c.tpot_s.p50 <= c.tpot_s.p99);
    let d = r.serving.disaggregated.as_ref().unwrap();
    assert_eq!(d.prefill_replicas + d.decode_replicas, 2);
    // no prefill interference in a decode replica
    assert_eq!(d.tpot_s.p99, d.tpot_s.mean);
}

#[test]
fn overload_is_flagged_not_nan() {
    let r = run(r#"
model = { name = "llama-3.1-70b" }
hardware = { chip = "h100", chips = 4 }
inference = { prompt_len = 2000, gen_len = 200, workload = "rate=1000" }
"#);
    let c = r.serving.continuous.as_ref().unwrap();
    assert!(c.saturated);
    for v in [c.requests_per_s, c.ttft_s.p99, c.tpot_s.p99] {
        assert!(v.is_finite() && v > 0.0);
    }
}

#[test]
fn bad_engine_and_workload_are_errors() {
    let cat = Catalog::builtin();
    for toml in [
        "model = { name = \"llama-3-8b\" }\nhardware = { chip = \"h100\", chips = 1 }\ninference = { engine = \"nope\" }",
        "model = { name = \"llama-3-8b\" }\nhardware = { chip = \"tpu-v5e\", chips = 4 }\ninference = { engine = \"vllm\" }",
        "model = { name = \"llama-3-8b\" }\nhardware = { chip = \"h100\", chips = 1 }\ninference = { workload = \"rate=0\" }",
    ] {
        // an unknown engine is refused when the file is read (file:line:
        // field), the others when the scenario is resolved
        match Scenario::parse(toml, "t.toml") {
            Ok(sc) => assert!(resolve(&sc, cat).is_err(), "{toml}"),
            Err(e) => assert!(e.to_string().contains("field `inference."), "{e}"),
        }
    }
}

/// `--chips 256` on GB200 NVL72 (72-GPU NVLink domains) splits into
/// replicas inside a domain: the largest TP ≤ 72 dividing 256 and the 128
/// heads of Llama-3.1-405B is 64 → 4 replicas; 16 H100 (8-GPU nodes) → TP 8.
#[test]
fn chips_over_nvlink_domains_split_into_replicas() {
    let r = run(r#"
model = { name = "llama-3.1-405b" }
hardware = { chip = "gb200-nvl72", chips = 256 }
"#);
    assert_eq!((r.tp, r.replicas), (64, 4));
    assert!(r.warnings.iter().any(|w| w.contains("NVLink domains")));
    let r = run(r#"
model = { name = "llama-3.1-70b" }
hardware = { chip = "h100", chips = 16 }
"#);
    assert_eq!((r.tp, r.replicas), (8, 2));
}

/// `plan infer` under an engine keeps only batches its paged KV cache holds
/// (vLLM: 0.9 of HBM, 16-token blocks); the ideal roofline's max batch is larger.
#[test]
fn plan_infer_respects_the_engine_kv_capacity() {
    use meshplan_core::planner::{ChipBudget, InferSearch};
    let cat = Catalog::builtin();
    let spec = cat.model("llama-3.1-70b").unwrap();
    let chip = cat.chip("h100").unwrap();
    let s = InferSearch::new(spec, chip, ChipBudget::Exactly(8));
    assert_eq!(s.engines[0].name, "vllm");
    let r = s.run();
    assert!(!r.plans.is_empty());
    for p in &r.plans {
        let rep = inference::evaluate(spec, chip, &p.query(&s), &mut NoTrace).unwrap();
        assert!(p.batch <= rep.serving.engine_max_batch, "{p:?}");
        assert!(rep.max_batch >= rep.serving.engine_max_batch);
    }
}

/// `plan infer --engine all` searches every GPU engine (not the book's
/// ideal roofline) with fp8 among the dtypes on an H100; each point
/// reproduces under its own engine, and the Pareto front is non-dominated:
/// TPOT ascending with tokens/s per chip strictly rising.
#[test]
fn plan_infer_searches_engines_and_quantisation() {
    use meshplan_core::planner::infer::engines_for;
    use meshplan_core::planner::{ChipBudget, InferSearch};
    let cat = Catalog::builtin();
    let spec = cat.model("llama-3.1-70b").unwrap();
    let chip = cat.chip("h100").unwrap();
    let mut s = InferSearch::new(spec, chip, ChipBudget::Exactly(8));
    s.engines = engines_for("all", chip).unwrap();
    let names: Vec<&str> = s.engines.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["vllm", "sglang", "trtllm", "trtllm-2023"]);
    // a bf16 model stays bf16 unless quantisation is allowed
    assert_eq!(s.weights_dtypes, [meshplan_core::units::DType::Bf16]);
    s.allow_quantization();
    assert!(s.weights_dtypes.contains(&meshplan_core::units::DType::Fp8));
    s.prompt_len = 1000;
    s.gen_len = 500;
    s.top_k = 50;
    let r = s.run();
    let engines: std::collections::BTreeSet<&str> =
        r.plans.iter().map(|p| p.engine.as_str()).collect();
    assert!(engines.len() >= 2, "{engines:?}");
    for p in r.plans.iter().take(5) {
        let rep = s.report(p).unwrap();
        assert_eq!(rep.serving.engine, p.engine);
        assert!((rep.decode_step_time_s.get() - p.tpot_s).abs() < 1e-15);
    }
    for w in r.pareto.windows(2) {
        assert!(w[0].tpot_s <= w[1].tpot_s);
        assert!(w[0].tokens_per_s_per_chip < w[1].tokens_per_s_per_chip);
    }
    assert!(engines_for("jetstream", chip).is_err());
    assert_eq!(
        engines_for("vllm,trtllm,vllm", chip).unwrap().len(),
        2,
        "duplicates collapse"
    );
}

/// Under DeepSeek sparse attention the engine's decode step reads only what
/// the step reads of the KV (the top-k latent rows and every indexer key:
/// `kv::bytes_read_per_decode_step`), not the whole cache.
/// examples/infer/deepseek-v3.2-exp-8xgb300.toml: fp8 KV at S = 131,072,
/// B = 32 on 8 GB300 (W = 8 TB/s each). Read per sequence:
/// 2048·61·(512 + 64)·1 B = 71,958,528 latent + 131,072·61·132 B =
/// 1,055,391,744 indexer = 1,127,350,272 B; held: 131,072·61·(576 + 132) B
/// = 5,660,737,536 B. At full bandwidth the read takes 32·1.127e9/(8·8e12)
/// = 0.564 ms and the whole cache 2.830 ms: the step's KV time is at least
/// the first (no kernel beats the bandwidth) and below the second (the
/// measured MLA kernel reaches more than 20 % of it).
#[test]
fn sparse_attention_decode_reads_top_k() {
    let r = run(include_str!(
        "../../../examples/infer/deepseek-v3.2-exp-8xgb300.toml"
    ));
    close(
        r.kv_cache_bytes_per_sequence.get(),
        5_660_737_536.0,
        1e-12,
        "held KV per sequence",
    );
    let t_kv = r.decode_kv_load_time_s.get();
    let read_at_peak = 32.0 * 1_127_350_272.0 / (8.0 * 8e12);
    let held_at_peak = 32.0 * 5_660_737_536.0 / (8.0 * 8e12);
    assert!(
        t_kv >= read_at_peak * (1.0 - 1e-9) && t_kv < held_at_peak,
        "T_kv {t_kv} outside [{read_at_peak}, {held_at_peak})"
    );
}
