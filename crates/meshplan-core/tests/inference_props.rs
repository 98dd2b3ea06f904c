//! Property tests of the inference model.

use meshplan_core::inference::{self, memory, InferQuery};
use meshplan_core::trace::NoTrace;
use meshplan_core::units::{Bytes, DType};
use meshplan_core::Catalog;
use proptest::prelude::*;

fn query(batch: u64, context: u64, tp: u64) -> InferQuery {
    InferQuery {
        weights_dtype: DType::Int8,
        kv_dtype: DType::Int8,
        compute_dtype: DType::Bf16,
        batch,
        prompt_len: 1024,
        context,
        gen_len: 256,
        mesh: vec![4, 4],
        tp: Some(tp),
        ..InferQuery::default()
    }
}

fn eval(batch: u64, context: u64, tp: u64) -> inference::InferReport {
    let c = Catalog::builtin();
    inference::evaluate(
        c.model("book-ch7-18b").unwrap(),
        c.chip("tpu-v5e@book").unwrap(),
        &query(batch, context, tp),
        &mut NoTrace,
    )
    .unwrap()
}

proptest! {
    #[test]
    fn latency_non_decreasing_in_batch(b in 1u64..512, db in 0u64..512, s in 1u64..200_000) {
        let a = eval(b, s, 16);
        let z = eval(b + db, s, 16);
        prop_assert!(z.decode_step_time_s >= a.decode_step_time_s);
    }

    #[test]
    fn latency_non_decreasing_in_context(b in 1u64..256, s in 1u64..100_000, ds in 0u64..100_000) {
        let a = eval(b, s, 16);
        let z = eval(b, s + ds, 16);
        prop_assert!(z.decode_step_time_s >= a.decode_step_time_s);
        prop_assert!(z.request_latency_s >= a.request_latency_s);
    }

    #[test]
    fn max_batch_is_largest_that_fits(n in 1u64..300, hbm in 1e9f64..1e11, w in 0f64..5e10, kv in 1e3f64..1e11) {
        let mb = memory::max_batch(n, Bytes::new(hbm), Bytes::new(w), Bytes::new(kv), &mut NoTrace);
        if mb.max_batch > 0 {
            prop_assert!(memory::fits(n, Bytes::new(hbm), Bytes::new(w), Bytes::new(kv), mb.max_batch));
        }
        prop_assert!(!memory::fits(n, Bytes::new(hbm), Bytes::new(w), Bytes::new(kv), mb.max_batch + 1));
    }

    #[test]
    fn sharding_never_changes_total_flops(b in 1u64..512, s in 1u64..50_000, tpi in 0usize..5) {
        let tp = [1u64, 2, 4, 8, 16][tpi];
        let a = eval(b, s, 1);
        let z = eval(b, s, tp);
        let f = |r: &inference::InferReport| -> (f64, f64) {
            (r.decode_components.iter().map(|c| c.flops.get()).sum(), r.prefill_components.iter().map(|c| c.flops.get()).sum())
        };
        prop_assert_eq!(f(&a), f(&z));
    }
}

/// Y·Z past u64::MAX (2^63 · 2 on 2^63 GPUs, MoE with E = 16) used to wrap to
/// 0 and divide by zero; a 2^32 × (2^32 + 1) mesh overflowed the chip count.
#[test]
fn overflowing_degrees_are_errors() {
    let c = Catalog::builtin();
    let h100 = c.chip("h100").unwrap();
    let q = InferQuery {
        mesh: vec![1 << 63],
        tp: Some(1 << 63),
        ep: Some(2),
        ..InferQuery::default()
    };
    let e = inference::evaluate(c.model("book-ch7-18b-moe").unwrap(), h100, &q, &mut NoTrace)
        .unwrap_err();
    assert!(e.to_string().contains("18446744073709551616"), "{e}");
    let q = InferQuery {
        mesh: vec![1 << 32, (1 << 32) + 1],
        tp: Some(1),
        ..InferQuery::default()
    };
    let e = inference::evaluate(c.model("gpt-2").unwrap(), h100, &q, &mut NoTrace).unwrap_err();
    assert!(e.to_string().contains("more than"), "{e}");
}
