//! The stable counterpart of the cargo-fuzz targets (fuzz/, docs/fuzzing.md):
//! every parser and the evaluators of `meshplan_core::fuzzing` on the seed
//! corpus (examples/ and data/) and on proptest mutations of it, with a
//! fixed case count so the pass is quick and deterministic in CI; plus the
//! invariants of issue 12 (memory terms sum to the total, more chips of the
//! same plan never raise per-device parameter memory, JSON parses).

use std::path::{Path, PathBuf};

use meshplan_core::fuzzing as fz;
use meshplan_core::scenario::Scenario;
use meshplan_core::Catalog;
use proptest::prelude::*;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every file under `dirs` (relative to the repository root) ending in `ext`.
fn files(dirs: &[&str], ext: &str) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut stack: Vec<PathBuf> = dirs.iter().map(|d| root().join(d)).collect();
    while let Some(p) = stack.pop() {
        if p.is_dir() {
            let mut v: Vec<PathBuf> = std::fs::read_dir(&p)
                .expect("seed dir")
                .flatten()
                .map(|e| e.path())
                .collect();
            v.sort();
            stack.extend(v);
        } else if p.to_string_lossy().ends_with(ext) {
            out.push(std::fs::read(&p).expect("seed file"));
        }
    }
    assert!(!out.is_empty(), "no seeds in {dirs:?} *{ext}");
    out
}

/// A seed with up to 8 bytes replaced and an optional truncation.
fn mutated(seeds: Vec<Vec<u8>>) -> impl Strategy<Value = Vec<u8>> {
    let n = seeds.len();
    (
        0..n,
        proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..8),
        proptest::option::of(any::<prop::sample::Index>()),
    )
        .prop_map(move |(i, edits, cut)| {
            let mut s = seeds[i].clone();
            if !s.is_empty() {
                for (at, b) in edits {
                    let k = at.index(s.len());
                    s[k] = b;
                }
                if let Some(c) = cut {
                    s.truncate(c.index(s.len() + 1));
                }
            }
            s
        })
}

/// Seeds, mutated seeds, and arbitrary short strings.
fn inputs(seeds: Vec<Vec<u8>>) -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => mutated(seeds),
        1 => "\\PC{0,64}".prop_map(String::into_bytes),
        1 => proptest::collection::vec(any::<u8>(), 0..64),
    ]
}

/// Run `target` on every seed unmutated, then on `cases` generated inputs.
fn fuzz(target: fn(&[u8]), seeds: Vec<Vec<u8>>, cases: u32) {
    for s in &seeds {
        target(s);
    }
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    runner
        .run(&inputs(seeds), |d| {
            target(&d);
            Ok(())
        })
        .unwrap();
}

const CASES: u32 = 1024;

#[test]
fn scenario_parser() {
    fuzz(fz::scenario, files(&["examples"], ".toml"), CASES);
}

#[test]
fn model_file_parser() {
    fuzz(fz::model_file, files(&["data/models"], ".toml"), CASES);
}

#[test]
fn chip_file_parser() {
    fuzz(fz::chip_file, files(&["data/hardware"], ".toml"), CASES);
}

#[test]
fn profile_parser() {
    fuzz(fz::profile, files(&["data/profiles"], ".toml"), CASES);
}

#[test]
fn hf_config_parser() {
    fuzz(
        fz::hf_config,
        files(&["crates/meshplan-core/tests/fixtures/hf"], ".json"),
        CASES,
    );
}

#[test]
fn claims_parser() {
    fuzz(
        fz::claims,
        files(
            &["examples/book", "examples/claims", "examples/playbook"],
            ".toml",
        ),
        CASES,
    );
}

#[test]
fn csv_rows_parser() {
    // the first 40 lines of each CSV fixture: parsing is linear, the seeds short
    let seeds = files(&["crates/meshplan-core/tests/fixtures/validation"], ".csv")
        .into_iter()
        .map(|s| {
            let t = String::from_utf8_lossy(&s);
            t.lines()
                .take(40)
                .collect::<Vec<_>>()
                .join("\n")
                .into_bytes()
        })
        .collect();
    fuzz(fz::csv_rows, seeds, CASES);
}

#[test]
fn published_json_parser() {
    fuzz(
        fz::published_json,
        files(&["crates/meshplan-core/tests/fixtures/validation"], ".json"),
        CASES,
    );
}

#[test]
fn unit_strings() {
    let seeds = [
        "4M",
        "1.5e9",
        "32Ki",
        "128k",
        "3 GB",
        "1.2 TB/s",
        "459 TFLOP/s",
        "1e40",
        "-1",
        "0",
        "",
        "bf16",
        "int8",
        "16x16x16",
        "2*16x16x16",
        "500ms",
        "18446744073709551616",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    fuzz(fz::units, seeds, 4 * CASES);
}

#[test]
fn evaluators_on_mutated_scenarios() {
    let seeds = files(
        &["examples/train", "examples/infer", "examples/plan"],
        ".toml",
    );
    let mut seeds2 = seeds.clone();
    seeds2.extend(files(&["examples"], "v5p.toml"));
    fuzz(fz::evaluate_scenario, seeds2, 256);
}

/// `train` of `body` (a scenario) as JSON.
fn train_json(body: &str) -> serde_json::Value {
    let sc = Scenario::parse(body, "p.toml").expect("scenario");
    let cat = Catalog::builtin();
    let t = meshplan_core::training::scenario::resolve(&sc, cat).expect("resolves");
    let r = meshplan_core::training::analyze_with(
        &t.spec,
        &t.chip,
        &t.topo,
        &t.cfg,
        t.profile.as_ref(),
        &mut meshplan_core::trace::NoTrace,
    );
    serde_json::from_str(&serde_json::to_string(&r).expect("serializes")).expect("JSON parses")
}

fn mem(v: &serde_json::Value, k: &str) -> f64 {
    v["memory_per_device"][k]
        .as_f64()
        .unwrap_or_else(|| panic!("no memory_per_device.{k}"))
}

const MODELS: [&str; 4] = ["llama-2-7b", "gpt-2", "mixtral-8x7b", "qwen3-8b"];

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]

    /// The memory terms sum to the total, and every term is finite and ≥ 0.
    #[test]
    fn memory_terms_sum_to_the_total(
        m in 0..MODELS.len(),
        log_chips in 0u32..7,
        zero in 0u8..4,
        log_tp in 0u32..3,
        seq in prop::sample::select(vec![1024u64, 2048, 4096]),
        chip in prop::sample::select(vec!["h100", "a100-80gb", "tpu-v5p"]),
    ) {
        let chips = 8u64 << log_chips;
        let tp = 1u64 << log_tp;
        let mesh = if chip.starts_with("tpu") { String::new() } else { format!("chips = {chips}\n") };
        let mesh = if mesh.is_empty() {
            // TPU: the offered 4x4x4 slice
            "mesh = \"4x4x4\"\n".to_string()
        } else { mesh };
        let n = if chip.starts_with("tpu") { 64 } else { chips };
        let body = format!(
            "[model]\nname = \"{}\"\n[hardware]\nchip = \"{chip}\"\n{mesh}[training]\nbatch_tokens = {}\nseq_len = {seq}\n[parallelism]\ntp = {tp}\ndp = {}\nzero = {zero}\n",
            MODELS[m], seq * n, n / tp
        );
        let v = train_json(&body);
        let terms = ["params_bytes", "grads_bytes", "optimizer_bytes", "activations_bytes", "logits_bytes", "reserve_bytes"];
        let sum: f64 = terms.iter().map(|k| mem(&v, k)).sum();
        for k in terms {
            let x = mem(&v, k);
            prop_assert!(x.is_finite() && x >= 0.0, "{k} = {x} in {body}");
        }
        let total = mem(&v, "total_bytes");
        prop_assert!((sum - total).abs() <= 1e-9 * total.max(1.0), "sum {sum} != total {total} in {body}");
    }

    /// More chips of the same plan (the extra chips sharding parameters
    /// with FSDP, or replicating them with DP) never raise per-device
    /// parameter memory.
    #[test]
    fn more_chips_never_raise_per_device_parameter_memory(
        m in 0..MODELS.len(),
        log_chips in 0u32..6,
        fsdp in any::<bool>(),
    ) {
        let per_device = |chips: u64| {
            let axis = if fsdp { "fsdp" } else { "dp" };
            let zero = if fsdp { 3 } else { 0 };
            let body = format!(
                "[model]\nname = \"{}\"\n[hardware]\nchip = \"h100\"\nchips = {chips}\n[training]\nbatch_tokens = {}\nseq_len = 2048\n[parallelism]\n{axis} = {chips}\nzero = {zero}\n",
                MODELS[m], 2048 * 64
            );
            mem(&train_json(&body), "params_bytes")
        };
        let chips = 1u64 << log_chips;
        let (a, b) = (per_device(chips), per_device(2 * chips));
        prop_assert!(b <= a * (1.0 + 1e-12), "{chips} chips: {a} B, {} chips: {b} B", 2 * chips);
    }
}
