//! Issue 25 part 3: the production layouts are accepted by `train` on the
//! command line, each with a roofline and a finite prediction (the
//! examples' citations say where each layout comes from; the expected
//! bubbles are derived in the comments).

use crate::harness::{assert_close, f, json, run};

/// Qwen3-235B-A22B, EP 32 folded over tp·dp on 256 H100 (TP 2, PP 8,
/// VP 4, 64 micro-batches): bubble (p−1)/(m·v+p−1) = 7/263. DeepSeek-V3,
/// PP 16 EP 64 on 2,048 H800 with 4 | 4×14 | 1 layers, 1F1B with 120
/// micro-batches: 15/135. Llama 3.1 405B, PP 16 interleaved v = 4 with 16
/// micro-batches: 15/79.
#[test]
fn the_production_layouts_are_predicted() {
    for (file, bubble) in [
        (
            "examples/train/qwen3-235b-a22b-h100-ep32-folded.toml",
            7.0 / 263.0,
        ),
        (
            "examples/train/deepseek-v3-h800-pp16-ep64.toml",
            15.0 / 135.0,
        ),
        (
            "examples/train/llama-3.1-405b-h100-16k-interleaved.toml",
            15.0 / 79.0,
        ),
        // 128K context, CP 16 all-gather: the same pipeline, 15/79
        (
            "examples/train/llama-3.1-405b-h100-128k-cp16-allgather.toml",
            15.0 / 79.0,
        ),
    ] {
        let v = json(&["train", file, "--json"]);
        assert_eq!(v["feasible"], true, "{file}: {}", v["reasons"]);
        assert!(f(&v, "t_math_s") > 0.0, "{file}: roofline");
        let step = f(&v, "predicted.step_time_s");
        assert!(step.is_finite() && step > 0.0, "{file}: {step}");
        assert_close(f(&v, "bubble_fraction"), bubble, 1e-12, file);
    }
}

/// The flags state the split: DeepSeek-V3's 61 layers as 5 | 3×14 | 14 put
/// 14 layers on the last stage where the example's split has at most 4, so
/// T_math grows 14/4 = 3.5× (the roofline prices the busiest stage); a
/// split that leaves the middle stages uneven (3 + 3: 55 over 14) is
/// refused with Megatron's reason; 0 is a clear input error.
#[test]
fn stage_layer_flags_change_the_busiest_stage() {
    let file = "examples/train/deepseek-v3-h800-pp16-ep64.toml";
    let base = json(&["train", file, "--json"]);
    let heavy = json(&[
        "train",
        file,
        "--first-stage-layers",
        "5",
        "--last-stage-layers",
        "14",
        "--json",
    ]);
    assert_eq!(heavy["feasible"], true, "{}", heavy["reasons"]);
    assert_eq!(heavy["config"]["stage_layers"]["last"], 14);
    assert_close(
        f(&heavy, "t_math_s") / f(&base, "t_math_s"),
        3.5,
        1e-12,
        "T_math",
    );
    let bad = json(&[
        "train",
        file,
        "--first-stage-layers",
        "3",
        "--last-stage-layers",
        "3",
        "--json",
    ]);
    assert_eq!(bad["feasible"], false);
    assert!(bad["reasons"].to_string().contains("14 middle stages"));
    let (code, _, err) = run(&["train", file, "--first-stage-layers", "0"]);
    assert_ne!(code, 0);
    assert!(err.contains("at least 1"), "{err}");
}

/// `--cp-comm` names the K/V exchange; the JSON shows it and the inventory
/// moves the same bytes as one all-gather per pass (4 passes with full
/// recompute) instead of cp − 1 = 15 ring hops each; a wrong name is a
/// clear error.
#[test]
fn cp_comm_flag_switches_ring_and_all_gather() {
    let file = "examples/train/llama-3.1-405b-h100-128k-cp16-allgather.toml";
    let ag = json(&["train", file, "--json"]);
    assert_eq!(ag["config"]["cp_comm"], "all-gather");
    let ring = json(&["train", file, "--cp-comm", "ring", "--json"]);
    assert!(ring["config"].get("cp_comm").is_none());
    let inv = "predicted.inventory.cp";
    assert_eq!(f(&ag, &format!("{inv}.calls")), 4.0);
    assert_eq!(f(&ring, &format!("{inv}.calls")), 60.0);
    assert_close(
        f(&ag, &format!("{inv}.bytes_per_call")) * 4.0,
        f(&ring, &format!("{inv}.bytes_per_call")) * 60.0,
        1e-12,
        "same bytes",
    );
    let (code, _, err) = run(&["train", file, "--cp-comm", "p3p"]);
    assert_ne!(code, 0);
    assert!(err.contains("ring, all-gather"), "{err}");
}
