//! Benchmark of one `infer` evaluation with tracing off (`NoTrace`).

use meshplan_core::inference::{self, InferQuery};
use meshplan_core::trace::NoTrace;
use meshplan_core::units::DType;
use meshplan_core::Catalog;

fn main() {
    divan::main();
}

#[divan::bench]
fn infer_ch7_q2(bencher: divan::Bencher) {
    let c = Catalog::builtin();
    let m = c.model("book-ch7-18b").unwrap();
    let chip = c.chip("tpu-v5e@book").unwrap();
    let q = InferQuery {
        weights_dtype: DType::Int8,
        kv_dtype: DType::Int8,
        compute_dtype: DType::Int8,
        batch: 7,
        context: 128_000,
        mesh: vec![4, 4],
        ..InferQuery::default()
    };
    bencher.bench(|| {
        inference::evaluate(
            divan::black_box(m),
            divan::black_box(chip),
            divan::black_box(&q),
            &mut NoTrace,
        )
        .unwrap()
    });
}

/// The serving search: Llama-3.1-70B on exactly 8 H100, every dtype choice
/// (bf16, int8 and fp8 weights and KV), one thread; under the chip's default
/// engine (vLLM) and under every GPU engine (`plan infer --engine all`).
#[divan::bench(args = ["vllm", "all"], sample_count = 10)]
fn plan_infer_70b_8xh100(bencher: divan::Bencher, engines: &str) {
    use meshplan_core::planner::infer::{engines_for, ChipBudget, InferSearch};
    let c = Catalog::builtin();
    let m = c.model("llama-3.1-70b").unwrap();
    let chip = c.chip("h100").unwrap();
    let mut s = InferSearch::new(m, chip, ChipBudget::Exactly(8));
    s.engines = engines_for(engines, chip).unwrap();
    s.threads = Some(1);
    bencher.bench(|| divan::black_box(&s).run().plans.len());
}
