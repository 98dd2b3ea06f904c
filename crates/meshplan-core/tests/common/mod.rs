//! The book's ch5 Q3 setup, shared by the test binaries and the `train`
//! benchmark that start from it: LLaMA-2 13B (the book's numbers) on the
//! 16x16x16 TPU v5p slice, 3M tokens of 32k-token sequences. Each binary
//! adds its own plan choices on top.

use meshplan_core::hardware::Chip;
use meshplan_core::mesh::Topology;
use meshplan_core::model::ModelSpec;
use meshplan_core::training::TrainConfig;
use meshplan_core::Catalog;

/// The book's LLaMA-2 13B.
pub fn llama13() -> &'static ModelSpec {
    Catalog::builtin().model("book-ch5-llama-2-13b").unwrap()
}

/// TPU v5p with the book's numbers.
pub fn v5p() -> &'static Chip {
    Catalog::builtin().chip("tpu-v5p@book").unwrap()
}

/// One 16x16x16 v5p slice: 4,096 chips.
pub fn cube() -> Topology {
    Topology::Torus {
        slices: 1,
        shape: vec![16, 16, 16],
    }
}

/// The workload: B = 3M tokens per step, T = 32,768; everything else default.
pub fn q3_workload() -> TrainConfig {
    TrainConfig {
        batch_tokens: 3_000_000,
        seq_len: 32768,
        ..TrainConfig::default()
    }
}
