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
