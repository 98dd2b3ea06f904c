//! Benchmark of one full `train` evaluation (LLaMA-2 13B, v5p 16x16x16,
//! FSDP 1024 × TP 4) with tracing off.

#[path = "../tests/common/mod.rs"]
mod common;

use common::{cube, llama13, q3_workload, v5p};
use meshplan_core::mesh::Degrees;
use meshplan_core::trace::NoTrace;
use meshplan_core::training::{analyze, Remat, TrainConfig};

fn main() {
    divan::main();
}

#[divan::bench]
fn train_eval_fsdp_tp(b: divan::Bencher) {
    let (spec, chip, topo) = (llama13(), v5p(), cube());
    let cfg = TrainConfig {
        remat: Remat::AfterMatmuls,
        mfu: Some(0.4),
        degrees: Degrees {
            fsdp: 1024,
            tp: 4,
            ..Degrees::default()
        },
        ..q3_workload()
    };
    b.bench(|| {
        analyze(
            divan::black_box(spec),
            chip,
            &topo,
            divan::black_box(&cfg),
            &mut NoTrace,
        )
    });
}
