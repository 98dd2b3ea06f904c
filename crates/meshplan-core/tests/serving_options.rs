//! Speculative decoding, prefix caching and the engine-era mechanisms
//! (per-query-head KV reads, NCCL's latency model, sampling), each checked
//! against a value derived by hand from the formula in docs/inference.md.

use meshplan_core::inference::serving::EngineProfile;
use meshplan_core::inference::speculative::{DraftMethod, Speculative};
use meshplan_core::inference::{self, InferQuery, InferReport};
use meshplan_core::trace::NoTrace;
use meshplan_core::units::DType;
use meshplan_core::Catalog;

fn eval(model: &str, chip: &str, q: &InferQuery) -> InferReport {
    let c = Catalog::builtin();
    inference::evaluate(
        c.model(model).unwrap(),
        c.chip(chip).unwrap(),
        q,
        &mut NoTrace,
    )
    .unwrap()
}

fn base(engine: &str, chips: u64, batch: u64) -> InferQuery {
    InferQuery {
        batch,
        prompt_len: 1000,
        gen_len: 500,
        context: 1500,
        mesh: vec![chips],
        engine: Some(EngineProfile::builtin(engine).unwrap()),
        ..InferQuery::default()
    }
}

/// `model` on H100s under `q`'s engine, and under that engine with one term
/// changed by `change` (the difference is that term's cost).
fn with_and_changed(
    model: &str,
    q: &InferQuery,
    change: impl FnOnce(&mut EngineProfile),
) -> (InferReport, InferReport) {
    let mut e = q.engine.clone().expect("an engine");
    change(&mut e);
    let changed = InferQuery {
        engine: Some(e),
        ..q.clone()
    };
    (eval(model, "h100", q), eval(model, "h100", &changed))
}

/// n-gram drafting costs nothing, and under the book's roofline at a small
/// batch the verify step of B·(γ + 1) tokens is still weight-load bound and
/// reads the same KV: it takes the plain step's time, so TPOT = step/E and
/// the speedup is E = (1 − 0.6⁵)/(1 − 0.6) = 2.30560.
#[test]
fn ngram_speedup_is_e_when_weight_bound() {
    let mut q = base("ideal", 8, 2);
    q.speculative = Some(Speculative::new(DraftMethod::Ngram, 4, 0.6).unwrap());
    let r = eval("llama-3.1-70b", "h100", &q);
    let s = r.serving.speculative.as_ref().unwrap();
    assert!((s.expected_tokens_per_step - 2.3056).abs() < 1e-12);
    assert_eq!(s.draft_s, 0.0);
    assert!((s.speedup - 2.3056).abs() < 1e-9, "{}", s.speedup);
    // the static batch's TPOT is the speculative one
    assert!((r.serving.static_batch.tpot_s - s.tpot_s).abs() < 1e-15);
}

/// A draft model costs γ of its own decode steps on the same chips: the
/// draft's step is what `infer` reports for the draft model alone.
#[test]
fn draft_model_costs_gamma_of_its_own_steps() {
    let c = Catalog::builtin();
    let draft = c.model("llama-3.1-8b").unwrap().clone();
    let mut q = base("vllm", 8, 16);
    q.speculative = Some(Speculative::new(DraftMethod::Draft(Box::new(draft)), 3, 0.7).unwrap());
    let r = eval("llama-3.1-70b", "h100", &q);
    let s = r.serving.speculative.as_ref().unwrap();
    let mut qd = base("vllm", 8, 16);
    qd.context = 1250; // the mean length the static batch uses (T_in + T_out/2)
    let d = eval("llama-3.1-8b", "h100", &qd);
    assert!(
        (s.draft_s - 3.0 * d.decode_step_time_s.get()).abs() < 1e-12,
        "{} vs 3 × {}",
        s.draft_s,
        d.decode_step_time_s.get()
    );
    // TPOT = (T_draft + T_verify)/E, E = 1 + .7 + .49 + .343 = 2.533
    assert!((s.tpot_s - (s.draft_s + s.verify_step_s) / 2.533).abs() < 1e-12);
}

/// A draft model's weights and cache come out of the target's HBM: on 8
/// H100s (tp 8) Llama-3.1-8B drafting for Llama-3.1-70B adds, per chip,
/// w_d = 8,030,261,248 params × 2 B / 8 = 2,007,565,312 B, and per sequence
/// KV_d = 2·L·K·H·2 B = 2·32·8·128·2 = 131,072 B per token (×1,500 tokens =
/// 196,608,000 B; the engine rounds the context up to 16-token blocks, 1,504
/// tokens). Largest batch = ⌊N·(HBM − w − w_d)/(KV + KV_d·N/tp)⌋, N = tp = 8.
#[test]
fn draft_model_memory_comes_out_of_the_batch() {
    let c = Catalog::builtin();
    let draft = c.model("llama-3.1-8b").unwrap().clone();
    let mut q = base("vllm", 8, 16);
    q.speculative = Some(Speculative::new(DraftMethod::Ngram, 3, 0.7).unwrap());
    let r0 = eval("llama-3.1-70b", "h100", &q);
    q.speculative = Some(Speculative::new(DraftMethod::Draft(Box::new(draft)), 3, 0.7).unwrap());
    let r = eval("llama-3.1-70b", "h100", &q);
    let w_d = 2_007_565_312.0;
    assert_eq!(r0.draft_weights_bytes_per_device, None);
    assert_eq!(r.draft_weights_bytes_per_device.unwrap().get(), w_d);
    // the target's own weights per chip are unchanged (they set the step time)
    assert_eq!(r.weights_bytes_per_device, r0.weights_bytes_per_device);
    let (hbm, w, kv) = (
        r0.hbm_bytes_per_device.get(),
        r0.weights_bytes_per_device.get(),
        r0.kv_cache_bytes_per_sequence.get(),
    );
    let want = (8.0 * (hbm - w - w_d) / (kv + 1500.0 * 131_072.0)).floor() as u64;
    assert_eq!(r.max_batch, want, "{} vs {want}", r.max_batch);
    assert!(r.max_batch < r0.max_batch);
    // the engine's paged cache: u·HBM − w − w_d over whole 16-token blocks
    let e = EngineProfile::builtin("vllm").unwrap();
    assert_eq!(e.kv_block_tokens, 16);
    let kv_blk = kv / 1500.0 * 1504.0;
    let usable = if e.memory_of_free {
        e.memory_utilization * (hbm - w - w_d)
    } else {
        e.memory_utilization * hbm - w - w_d
    };
    let want = (8.0 * usable / (kv_blk + 1504.0 * 131_072.0)).floor() as u64;
    assert_eq!(r.serving.engine_max_batch, want);
    assert!(r.serving.engine_max_batch < r0.serving.engine_max_batch);
}

/// Prefix caching under the book's roofline (prefill compute-bound at 8k
/// tokens): the matmul FLOPs scale by 1 − h, the attention scores by
/// 1 − h² (the new tokens attend over the whole prefix).
#[test]
fn prefix_cache_removes_its_share_of_prefill() {
    let mut q = base("ideal", 8, 1);
    q.prompt_len = 8192;
    q.context = 8192 + 500;
    let r0 = eval("llama-3.1-70b", "h100@book", &q);
    q.prefix_cache_hit = 0.5;
    let r1 = eval("llama-3.1-70b", "h100@book", &q);
    assert_eq!(format!("{:?}", r0.bound_prefill), "Compute");
    let (mut mm, mut att) = (0.0, 0.0);
    for c in &r0.prefill_components {
        if c.name == "attention" {
            att += c.flops.get();
        } else {
            mm += c.flops.get();
        }
    }
    let c = Catalog::builtin()
        .chip("h100@book")
        .unwrap()
        .flops(DType::Bf16)
        .get();
    let want = (mm * 0.5 + att * 0.75) / (8.0 * c);
    assert!((r1.serving.static_batch.ttft_s - want).abs() < 1e-9 * want);
    assert!((r0.serving.static_batch.ttft_s - (mm + att) / (8.0 * c)).abs() < 1e-9 * want);
}

/// TensorRT-LLM 2023's decode attention reads each KV head once per query
/// head: Llama-2-70B has N/K = 64/8 = 8, so the KV term is 8× the grouped
/// kernel's.
#[test]
fn pre_xqa_kernel_reads_kv_once_per_query_head() {
    let mut q = base("trtllm-2023", 4, 64);
    q.weights_dtype = DType::Fp8;
    q.kv_dtype = DType::Fp8;
    q.compute_dtype = DType::Fp8;
    let (r, g) = with_and_changed("llama-2-70b", &q, |e| e.kv_reads_per_query_head = false);
    let ratio = r.decode_kv_load_time_s.get() / g.decode_kv_load_time_s.get();
    assert!((ratio - 8.0).abs() < 1e-9, "{ratio}");
}

/// NCCL's latency model: each ring step adds 0.6 µs, 2(Y − 1) = 6 steps at
/// TP 4, two all-reduces per layer, 80 layers: 960 × 0.6 µs = 576 µs more
/// per decode step than without the per-step term.
#[test]
fn nccl_alpha_grows_with_ring_steps() {
    let q = base("trtllm-2023", 4, 1);
    let (r, r0) = with_and_changed("llama-2-70b", &q, |e| e.allreduce_step_latency_s = 0.0);
    let d = r.decode_comms_time_s.get() - r0.decode_comms_time_s.get();
    assert!((d - 576e-6).abs() < 1e-12, "{d}");
}

/// Sampling: B·V·12 B/(W_hbm·η_hbm) on one chip; Llama-3.1-8B (V = 128,256)
/// at batch 128 on an H100 (3.35 TB/s × 0.84): 128 × 128,256 × 12 /
/// 2.814e12 = 70.0 µs.
#[test]
fn sampling_cost_at_large_vocabularies() {
    let q = base("vllm", 1, 128);
    let (r, r0) = with_and_changed("llama-3.1-8b", &q, |e| e.sampling_bytes_per_logit = 0.0);
    let d = r.decode_overhead_time_s.get() - r0.decode_overhead_time_s.get();
    let w = Catalog::builtin().chip("h100").unwrap().hbm_bandwidth.get();
    assert!((d - 128.0 * 128_256.0 * 12.0 / (w * 0.84)).abs() < 1e-12);
    assert!((d - 70.0e-6).abs() < 0.1e-6, "{d}");
}
