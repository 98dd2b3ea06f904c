//! Benchmark of one full `train` evaluation (LLaMA-2 13B, v5p 16x16x16,
//! FSDP 1024 × TP 4) with tracing off.

use meshplan_core::mesh::{Degrees, Topology};
use meshplan_core::trace::NoTrace;
use meshplan_core::training::{analyze, Remat, TrainConfig};
use meshplan_core::Catalog;

fn main() {
    divan::main();
}

#[divan::bench]
fn train_eval_fsdp_tp(b: divan::Bencher) {
    let cat = Catalog::builtin();
    let spec = cat.model("book-ch5-llama-2-13b").unwrap();
    let chip = cat.chip("tpu-v5p@book").unwrap();
    let topo = Topology::Torus {
        slices: 1,
        shape: vec![16, 16, 16],
    };
    let cfg = TrainConfig {
        batch_tokens: 3_000_000,
        seq_len: 32768,
        remat: Remat::AfterMatmuls,
        mfu: Some(0.4),
        degrees: Degrees {
            fsdp: 1024,
            tp: 4,
            ..Degrees::default()
        },
        ..TrainConfig::default()
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
