//! Setups that several test binaries (and the `train` benchmark) start
//! from, each binary adding its own plan choices on top: the book's ch5 Q3
//! (LLaMA-2 13B with the book's numbers on the 16x16x16 TPU v5p slice, 3M
//! tokens of 32k-token sequences) and LLaMA-2 13B on H100s with 4Mi-token
//! batches of 4k sequences.

// Each binary uses the part it needs.
#![allow(dead_code)]

use meshplan_core::hardware::Chip;
use meshplan_core::inference::kernels::{curves, Curve};
use meshplan_core::inference::{self, InferReport};
use meshplan_core::mesh::Topology;
use meshplan_core::model::ModelSpec;
use meshplan_core::scenario::Scenario;
use meshplan_core::trace::NoTrace;
use meshplan_core::training::scenario::resolve;
use meshplan_core::training::{TrainConfig, TrainReport};
use meshplan_core::Catalog;

/// `meshplan train` on a scenario TOML, as the CLI resolves it.
pub fn train(body: &str) -> TrainReport {
    let sc = Scenario::parse(body, "t.toml").expect("scenario");
    resolve(&sc, Catalog::builtin())
        .expect("resolves")
        .analyze(&mut NoTrace)
}

/// [`train`] on `model` and `chips` × `chip`, with the rest of the scenario
/// (`[training]`, `[parallelism]`, …) in `rest`.
pub fn train_on(model: &str, chip: &str, chips: u64, rest: &str) -> TrainReport {
    train(&format!(
        "[model]\nname = \"{model}\"\n[hardware]\nchip = \"{chip}\"\nchips = {chips}\n{rest}"
    ))
}

/// The book's LLaMA-2 13B.
pub fn llama13() -> &'static ModelSpec {
    Catalog::builtin().model("book-ch5-llama-2-13b").unwrap()
}

/// A catalog model and chip by name.
pub fn model_and_chip(model: &str, chip: &str) -> (&'static ModelSpec, &'static Chip) {
    let cat = Catalog::builtin();
    (cat.model(model).unwrap(), cat.chip(chip).unwrap())
}

/// TPU v5p with the book's numbers.
pub fn v5p() -> &'static Chip {
    Catalog::builtin().chip("tpu-v5p@book").unwrap()
}

/// One 16x16x16 v5p slice: 4,096 chips.
pub fn cube() -> Topology {
    Topology::torus(1, &[16, 16, 16])
}

/// The workload: B = 3M tokens per step, T = 32,768; everything else default.
pub fn q3_workload() -> TrainConfig {
    TrainConfig {
        batch_tokens: 3_000_000,
        seq_len: 32768,
        ..TrainConfig::default()
    }
}

/// LLaMA-2 13B (the published model) on H100s with 4Mi-token batches of 4k
/// sequences, everything else default.
pub fn l13b_h100_4m() -> (&'static ModelSpec, &'static Chip, TrainConfig) {
    let cat = Catalog::builtin();
    let cfg = TrainConfig {
        batch_tokens: 4 << 20,
        seq_len: 4096,
        ..TrainConfig::default()
    };
    (
        cat.model("llama-2-13b").unwrap(),
        cat.chip("h100").unwrap(),
        cfg,
    )
}

/// A claims file read as `meshplan check` reads it: its scenario files
/// resolve relative to it (`[scenarios.X] file = …`).
pub fn claims_file(path: &std::path::Path) -> meshplan_core::check::ClaimsFile {
    let src = std::fs::read_to_string(path).unwrap();
    let dir = path.parent().unwrap().to_path_buf();
    let mut resolve = |p: &str| {
        let f = dir.join(p);
        std::fs::read_to_string(&f)
            .map(|t| (f.display().to_string(), t))
            .map_err(|e| e.to_string())
    };
    meshplan_core::check::parse_claims(&src, &path.display().to_string(), &mut resolve)
        .unwrap_or_else(|e| panic!("{e}"))
}

/// `meshplan infer` on a scenario TOML, as the CLI resolves it.
pub fn infer(body: &str) -> InferReport {
    let cat = Catalog::builtin();
    let sc = Scenario::parse(body, "test.toml").expect("scenario");
    let s = inference::scenario::resolve(&sc, cat).expect("resolves");
    inference::evaluate(&s.model, &s.chip, &s.query, &mut NoTrace).expect("evaluates")
}

/// The fitted kernel curve `system/engine/op/key` (data/engines/kernels.toml).
pub fn curve(system: &str, engine: &str, op: &str, key: &str) -> &'static Curve {
    curves()
        .iter()
        .find(|c| c.system == system && c.engine == engine && c.op == op && c.key == key)
        .unwrap_or_else(|| panic!("no curve {system}/{engine}/{op}/{key}"))
}

/// `got` within relative `rel` of `want`.
pub fn close(got: f64, want: f64, rel: f64, what: &str) {
    assert!(
        ((got - want) / want).abs() <= rel,
        "{what}: got {got}, want {want} (rel {rel})"
    );
}
