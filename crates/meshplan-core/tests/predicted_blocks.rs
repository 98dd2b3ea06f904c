//! Issue 22 (2): `train --breakdown` / the JSON `blocks` read the predicted
//! time per block from the calibrated pricer's priced inventory, so the
//! blocks plus the parts that belong to no block add up to the predicted
//! step time; one block derived by hand from its GEMM shapes and the
//! profile's GEMM curve.

mod common;
use common::{train, train_on};
use meshplan_core::training::TrainReport;

fn rel(a: f64, b: f64) -> f64 {
    ((a - b) / b).abs()
}

/// Σ_block predicted_s + TP + CP + EP + PP + bubble + DP + overhead + floor
/// raise, and the predicted step time.
fn sum_and_step(r: &TrainReport) -> (f64, f64) {
    let p = r.predicted.as_ref().expect("a prediction");
    let t = &p.time_breakdown_s;
    assert_eq!(r.blocks.len(), 6);
    let blocks: f64 = r
        .blocks
        .iter()
        .map(|b| b.predicted_s.expect("predicted_s with a prediction"))
        .sum();
    let rest = t.tp_comm
        + t.cp_comm
        + t.ep_comm
        + t.pp_comm
        + t.bubble
        + t.dp_comm
        + t.overhead
        + t.floor_raise;
    (blocks + rest, p.step_time_s.get())
}

/// A scenario file under examples/train, as `meshplan train FILE` reads it.
fn example(name: &str) -> TrainReport {
    let path = format!("{}/../../examples/train/{name}", env!("CARGO_MANIFEST_DIR"));
    train(&std::fs::read_to_string(path).expect("example"))
}

/// LLaMA-3 8B on one 8-GPU H100 node, tp 8 with SP, one 4,096-token
/// sequence, no remat.
fn one_node() -> TrainReport {
    train_on(
        "llama-3-8b",
        "h100",
        8,
        r#"
[training]
batch_tokens = 4096
seq_len = 4096
remat = "none"
[parallelism]
tp = 8
sequence_parallel = true
"#,
    )
}

#[test]
fn blocks_and_the_other_parts_add_up_to_the_predicted_step() {
    // dense (one node, tp 8), MoE (Qwen3 235B-A22B, ep 32), pipeline
    // (LLaMA-3.1 405B, interleaved 1F1B: a bubble and PP transfers)
    let cases = [
        ("dense", one_node()),
        ("moe", example("qwen3-235b-a22b-h100-ep32-folded.toml")),
        (
            "pipeline",
            example("llama-3.1-405b-h100-16k-interleaved.toml"),
        ),
    ];
    for (what, r) in cases {
        let (sum, step) = sum_and_step(&r);
        assert!(rel(sum, step) < 1e-9, "{what}: {sum} vs {step}");
        if what == "pipeline" {
            assert!(r.predicted.as_ref().unwrap().time_breakdown_s.bubble > 0.0);
        }
    }
}

#[test]
fn no_prediction_no_predicted_column() {
    // the book's TPU v5p has no efficiency profile: roofline columns only
    let r = example("ch5-q3-fsdp-tp.toml");
    assert!(r.predicted.is_none());
    assert!(r.blocks.iter().all(|b| b.predicted_s.is_none()));
    let json = serde_json::to_value(&r).unwrap();
    assert!(json["blocks"][0].get("predicted_s").is_none());
}

#[test]
fn mlp_block_by_hand_from_its_gemm_shapes() {
    // LLaMA-3 8B (D = 4096, F = 14336, SwiGLU, 32 layers), tp 8, one
    // micro-batch of 4,096 tokens, no remat: per layer the inventory's MLP
    // GEMMs are the fused gate+up [4096, 4096] × [4096, 2·14336/8 = 3584]
    // (2·4096·4096·3584 FLOPs) and the down projection [4096, 1792] ×
    // [1792, 4096] (2·4096·1792·4096 FLOPs). H100 profile: e_max 0.8129 ×
    // matmul_stack_share 0.861, x½ = 17.5, efficiency e·x/(x + x½) at x =
    // the smallest side (3584 and 1792, both multiples of the 128 tile),
    // bf16 peak 989.5 TFLOP/s. Three passes (forward, input and weight
    // gradients) × 32 layers × 1 micro-batch: 25.168 ms.
    let r = one_node();
    let mlp = r
        .blocks
        .iter()
        .find(|b| b.block.starts_with("MLP"))
        .unwrap();
    let e = 0.8129 * 0.861;
    let c = 989.5e12;
    let up = 2.0 * 4096.0 * 4096.0 * 3584.0 / (c * e * 3584.0 / (3584.0 + 17.5));
    let down = 2.0 * 4096.0 * 1792.0 * 4096.0 / (c * e * 1792.0 / (1792.0 + 17.5));
    let want = 32.0 * 3.0 * (up + down);
    let got = mlp.predicted_s.unwrap();
    assert!(rel(got, want) < 1e-9, "{got} vs {want}");
    assert!(rel(got, 25.168e-3) < 1e-4);
}

#[test]
fn explain_derives_the_step_from_the_blocks() {
    // `--explain`: train.blocks.predicted binds each block's priced time and
    // the non-block parts; its result is the predicted step by part
    let sc = meshplan_core::scenario::Scenario::parse(
        "[model]\nname = \"llama-3-8b\"\n[hardware]\nchip = \"h100\"\nchips = 8\n[training]\nbatch_tokens = 4096\nseq_len = 4096\nremat = \"none\"\n[parallelism]\ntp = 8\nsequence_parallel = true\n",
        "t.toml",
    )
    .unwrap();
    let mut rec = meshplan_core::trace::Recorder::default();
    let r = meshplan_core::training::scenario::resolve(&sc, meshplan_core::Catalog::builtin())
        .unwrap()
        .analyze(&mut rec);
    let s = rec
        .find("train.blocks.predicted")
        .expect("the step by block");
    let total = r.predicted.as_ref().unwrap().time_breakdown_s.total;
    assert!(rel(s.value, total) < 1e-9, "{} vs {total}", s.value);
}
