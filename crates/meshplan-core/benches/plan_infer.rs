//! Benchmark of the serving-plan search as a user runs it (issue 26):
//! Llama-3.1-70B on up to 64 H100, every GPU engine, bf16/int8/fp8 weights
//! and KV (`--allow-quantization`), aggregated and disaggregated plans
//! (`--disagg on`, the pool ratio searched), under a 2 s TTFT and a 50 ms
//! TPOT; all cores, and one thread. Target: under 1 s.

use meshplan_core::planner::infer::{engines_for, ChipBudget, InferSearch};
use meshplan_core::planner::infer_disagg::DisaggMode;
use meshplan_core::Catalog;

fn main() {
    divan::main();
}

#[divan::bench(args = [None, Some(1)], sample_count = 5, sample_size = 1)]
fn plan_infer_70b_up_to_64xh100_engines_dtypes_disagg(
    bencher: divan::Bencher,
    threads: Option<usize>,
) {
    let c = Catalog::builtin();
    let m = c.model("llama-3.1-70b").unwrap();
    let chip = c.chip("h100").unwrap();
    let mut s = InferSearch::new(m, chip, ChipBudget::AtMost(64));
    s.engines = engines_for("all", chip).unwrap();
    s.allow_quantization();
    s.disagg = DisaggMode::On;
    s.ttft_slo = Some(2.0);
    s.tpot_slo = Some(0.05);
    s.threads = threads;
    bencher.bench(|| divan::black_box(&s).run().plans.len());
}
