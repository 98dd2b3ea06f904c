//! Issue 25 items 1 and 3: DualPipe, the fp8 recipes and the MoE grouped
//! GEMMs through `train` on the command line. Every expected figure is
//! derived by hand in the comments, from the papers' formulas and the
//! profile constants (data/profiles/h100.toml), not read back from the
//! figure under test.

use crate::harness::{assert_close, f, json, rejects};

/// Llama-3 8B on 32 H100 (pp 4 × dp 8), 8 micro-batches of one 4,096-token
/// sequence, no recompute, Megatron: the plan both schedules price.
fn dense(extra: &[&str]) -> serde_json::Value {
    let mut a = vec![
        "train",
        "--model",
        "llama-3-8b",
        "--hw",
        "h100",
        "--chips",
        "32",
        "--pp",
        "4",
        "--dp",
        "8",
        "--microbatches",
        "8",
        "--batch-tokens",
        "256Ki",
        "--seq-len",
        "4096",
        "--remat",
        "none",
        "--framework",
        "megatron",
    ];
    a.extend_from_slice(extra);
    a.push("--json");
    json(&a)
}

/// DeepSeek-V3 Table 2: DualPipe's bubble is (PP/2 − 1)(F&B + B − 3W)
/// against 1F1B's (PP − 1)(F + B).
///
/// Roofline (the book's split F : B : W = 1 : 2 : 1 of a micro-batch time,
/// F + B = 1): b = (4/2 − 1)·(1 + 2/3 − 3·1/3) = 2/3 micro-batch times,
/// bubble fraction b/(m + b) = (2/3)/(8 + 2/3) = 1/13; 1F1B: 3/11.
///
/// Calibrated (the step's own chunks, from the 1F1B run of the same plan —
/// no expert parallelism, so the micro-batch is the same): t_mb, the
/// forward share f, and W = t_mb·(T_mm/3)/(T_mm + T_attn) (a weight
/// gradient is one of a GEMM's three passes without recompute; attention
/// has no weights): bubble = (4/2 − 1)·(t_mb + (1 − f)·t_mb − 3W), and the
/// 1F1B bubble at those chunks, (4 − 1)·t_mb, is the 1F1B run's bubble.
#[test]
fn dualpipe_bubble_is_deepseeks_table_2() {
    let one = dense(&["--schedule", "1f1b"]);
    let dual = dense(&["--schedule", "dualpipe"]);
    assert_close(
        f(&one, "bubble_fraction"),
        3.0 / 11.0,
        1e-12,
        "1F1B roofline",
    );
    assert_close(
        f(&dual, "bubble_fraction"),
        1.0 / 13.0,
        1e-12,
        "DualPipe roofline",
    );

    let t_mb = f(&one, "predicted.schedule.microbatch_s");
    let fwd = f(&one, "predicted.schedule.forward_fraction");
    let (mm, attn) = (
        f(&one, "predicted.time_breakdown_s.matmul"),
        f(&one, "predicted.time_breakdown_s.attention"),
    );
    let w = t_mb * (mm / 3.0) / (mm + attn);
    let want = (4.0 / 2.0 - 1.0) * (t_mb + (1.0 - fwd) * t_mb - 3.0 * w);
    assert_close(
        f(&dual, "predicted.time_breakdown_s.bubble"),
        want,
        1e-9,
        "DualPipe bubble",
    );
    assert_close(
        f(&dual, "predicted.schedule.dualpipe.one_f_one_b_bubble_s"),
        f(&one, "predicted.time_breakdown_s.bubble"),
        1e-9,
        "1F1B bubble at the same chunks",
    );
    assert_close(
        f(&one, "predicted.time_breakdown_s.bubble"),
        3.0 * t_mb,
        1e-9,
        "(pp − 1)·t_mb",
    );
    // the steady-state pipeline sends overlap the paired chunk: (pp − 1)
    // of the (m + pp − 1) per direction are exposed, 3/11
    assert_close(
        f(&dual, "predicted.time_breakdown_s.pp_comm"),
        f(&one, "predicted.time_breakdown_s.pp_comm") * 3.0 / 11.0,
        1e-9,
        "exposed pipeline sends",
    );
}

/// DeepSeek-V3 Table 2: DualPipe holds 2× the parameters (a stage of each
/// direction) and PP + 1 micro-batches of activations (1F1B: PP): the
/// weights, gradients and optimizer state double, the activations grow by
/// (4 + 1)/4 on the first stage.
#[test]
fn dualpipe_memory_is_two_copies_and_pp_plus_one_activations() {
    let one = dense(&["--schedule", "1f1b"]);
    let dual = dense(&["--schedule", "dualpipe"]);
    for part in ["params_bytes", "grads_bytes", "optimizer_bytes"] {
        let p = format!("memory_per_device.{part}");
        assert_close(f(&dual, &p), 2.0 * f(&one, &p), 1e-12, part);
    }
    // Megatron keeps the activations of the micro-batches in flight plus one
    // [tokens, D] input buffer; the in-flight part scales 5/4
    let a1 = f(&one, "memory_per_device.activations_bytes");
    let a2 = f(&dual, "memory_per_device.activations_bytes");
    let buffer = 2.0 * 4096.0 * 4096.0; // 2 B × tokens × D
    assert_close(a2 - buffer, (a1 - buffer) * 5.0 / 4.0, 1e-9, "activations");
}

/// DualPipe overlaps a forward chunk's MoE dispatch and combine with the
/// paired backward chunk's compute (DeepSeek-V3 §3.2.1): on the published
/// DeepSeek-V3 layout the layer's compute exceeds its all-to-all, so the
/// exposed all-to-all is 0 and all of 1F1B's is hidden.
#[test]
fn dualpipe_hides_the_all_to_all() {
    let file = "examples/train/deepseek-v3-h800-pp16-ep64.toml";
    let one = json(&["train", file, "--json"]);
    let dual = json(&["train", file, "--schedule", "dualpipe", "--json"]);
    let ep = f(&one, "predicted.time_breakdown_s.ep_comm");
    assert!(ep > 0.0);
    assert_eq!(f(&dual, "predicted.time_breakdown_s.ep_comm"), 0.0);
    assert_close(
        f(&dual, "predicted.schedule.dualpipe.ep_hidden_s"),
        ep,
        1e-9,
        "hidden",
    );
    // bubble fraction of the roofline: (16/2 − 1)·2/3 = 14/3 micro-batch
    // times over 120 + 14/3
    assert_close(
        f(&dual, "bubble_fraction"),
        (14.0 / 3.0) / (120.0 + 14.0 / 3.0),
        1e-12,
        "roofline",
    );
}

/// deepseek-ai/DualPipe's rules: an even number of ranks and an even
/// number of micro-batches, at least 2·pp; a recipe needs fp8 GEMMs.
#[test]
fn dualpipe_and_recipe_errors_say_why() {
    let base = [
        "train",
        "--model",
        "llama-3-8b",
        "--hw",
        "h100",
        "--chips",
        "32",
        "--dp",
        "8",
    ];
    let mut a = base.to_vec();
    a.extend(["--pp", "4", "--microbatches", "6", "--schedule", "dualpipe"]);
    rejects(&a, &["dualpipe", "at least 2·pp = 8"]);
    let mut a = vec![
        "train",
        "--model",
        "llama-3-8b",
        "--hw",
        "h100",
        "--chips",
        "24",
    ];
    a.extend([
        "--dp",
        "8",
        "--pp",
        "3",
        "--microbatches",
        "6",
        "--schedule",
        "dualpipe",
    ]);
    rejects(&a, &["dualpipe", "even number of pipeline stages"]);
    let mut a = base.to_vec();
    a.extend(["--fp8-recipe", "blockwise"]);
    rejects(&a, &["fp8_recipe", "compute_dtype = \"fp8\""]);
    let mut a = base.to_vec();
    a.extend(["--dtype", "fp8", "--fp8-recipe", "tensorwise"]);
    rejects(&a, &["fp8 recipe", "blockwise"]);
}

/// `--trace` draws 1F1B-family pipelines only: DualPipe says so.
#[test]
fn dualpipe_has_no_timeline_yet() {
    let s = crate::harness::Scratch::new("dualpipe-trace");
    let out = s.dir().join("t.json");
    let out = out.to_str().expect("utf-8 path");
    let args = [
        "train",
        "--model",
        "llama-3-8b",
        "--hw",
        "h100",
        "--chips",
        "32",
        "--dp",
        "8",
        "--pp",
        "4",
        "--microbatches",
        "8",
        "--schedule",
        "dualpipe",
        "--trace",
        out,
    ];
    let (code, _, err) = crate::harness::run(&args);
    assert_ne!(code, 0);
    assert!(
        err.contains("DualPipe") && !err.contains("panicked"),
        "{err}"
    );
}

/// Every layer GEMM of this plan has x = min(m, k, n) = 4,096 (4,096 tokens
/// per micro-batch, D = 4,096, N·H = 4,096, 2·K·H + N·H = 6,144, F =
/// 14,336), so under a recipe each GEMM's time scales by the same factor
/// over bf16: (C_bf16·e_bf16(4096)) / (C_fp8·e_recipe(4096)), e(x) =
/// e_max·x/(x + x½) (x a multiple of 128: no padding; the stack share
/// cancels). H100 (data/profiles/h100.toml [curves]): bf16 0.8129, x½ 17.5;
/// fp8 0.4776, x½ 297.4; fp8_block 0.7172, x½ 1024; peaks 989.5 / 1979
/// TFLOP/s. The critical stage is the first (10 layers: 10 | 9, 9 | 4), so
/// no LM head (kept in bf16 by the recipes) is in T_mm.
#[test]
fn fp8_recipes_use_the_profiles_fp8_gemm_curves() {
    let split = ["--first-stage-layers", "10", "--last-stage-layers", "4"];
    let run = |extra: &[&str]| {
        let mut a = split.to_vec();
        a.extend_from_slice(extra);
        dense(&a)
    };
    let bf = run(&[]);
    assert_eq!(bf["predicted"]["schedule"]["head"], false);
    let e = |e_max: f64, half: f64| e_max * 4096.0 / (4096.0 + half);
    let bf_rate = 989.5 * e(0.8129, 17.5);
    for (recipe, rate) in [
        ("delayed", 1979.0 * e(0.4776, 297.4)),
        ("current", 1979.0 * e(0.4776, 297.4)),
        ("blockwise", 1979.0 * e(0.7172, 1024.0)),
    ] {
        let r = run(&["--dtype", "fp8", "--fp8-recipe", recipe]);
        assert_close(
            f(&r, "predicted.time_breakdown_s.matmul"),
            f(&bf, "predicted.time_breakdown_s.matmul") * bf_rate / rate,
            1e-9,
            recipe,
        );
        // master weights, gradients and optimizer state are unchanged
        assert_eq!(r["memory_per_device"], bf["memory_per_device"], "{recipe}");
    }
}

/// The casts per recipe: per layer and micro-batch every GEMM input is
/// cast forward — D (QKV), N·H (O), D (up), F (down) — and every output
/// gradient backward — N·H + 2·K·H (QKV), D (O), 2·F (gated up), D (down):
/// 2·4096 + 4096 + 14336 + 4096 + 2048 + 2·4096 + 2·14336 = 69,632 elements
/// per token. At b bytes per element over the H100's 3.35 TB/s × 0.8:
/// T = m·L·tokens·69,632·b/(3.35e12·0.8), m = 8, L = 10, 4,096 tokens;
/// current scaling reads each tensor once more for its amax (b = 6 against
/// delayed's 4), blockwise adds two fp32 scales per 128 elements (b = 4 +
/// 1/16). The weights are cast once per step: the stage's parameters
/// (Llama-3 8B's 8,030,261,248 over 4 stages: the replica spreads the
/// embeddings over the stages) at 4 B (delayed), 6 B (current: + one amax
/// read), 4 + 8/16,384 B (blockwise 128×128 blocks).
#[test]
fn fp8_recipe_casts_cost_their_bytes() {
    let split = ["--first-stage-layers", "10", "--last-stage-layers", "4"];
    let run = |recipe: &str| {
        let mut a = split.to_vec();
        a.extend(["--dtype", "fp8", "--fp8-recipe", recipe]);
        f(&dense(&a), "predicted.time_breakdown_s.memory_bound")
    };
    let hbm = 3.35e12 * 0.8;
    let per_byte = 8.0 * 10.0 * 4096.0 * 69632.0 / hbm;
    let weights = 8_030_261_248.0 / 4.0 / hbm;
    let delayed = run("delayed");
    assert_close(
        run("current") - delayed,
        2.0 * per_byte + 2.0 * weights,
        1e-9,
        "current − delayed",
    );
    assert_close(
        run("blockwise") - delayed,
        per_byte / 16.0 + weights * 8.0 / 16384.0,
        1e-9,
        "blockwise − delayed",
    );
    // without a recipe: delayed scaling's casts, bf16-curve GEMMs
    let mut a = split.to_vec();
    a.extend(["--dtype", "fp8"]);
    let legacy = dense(&a);
    assert_close(
        f(&legacy, "predicted.time_breakdown_s.memory_bound"),
        delayed - 4.0 * weights,
        1e-9,
        "no recipe: delayed activation casts, no weight casts",
    );
}

/// The steps `--explain` records, flattened (children included).
fn steps(v: &serde_json::Value, out: &mut Vec<serde_json::Value>) {
    if let Some(a) = v.as_array() {
        for s in a {
            out.push(s.clone());
            steps(&s["children"], out);
        }
    }
}

/// `--explain` shows DualPipe's bubble, the hidden all-to-all, the expert
/// GEMMs' curve and the recipe's casts with the values the prediction
/// priced (one source: the same numbers as `predicted`).
#[test]
fn explain_shows_the_new_terms_with_their_values() {
    let v = json(&[
        "train",
        "examples/train/deepseek-v3-h800-dualpipe-fp8.toml",
        "--explain",
        "--json",
    ]);
    let mut all = Vec::new();
    steps(&v["derivation"], &mut all);
    let val = |id: &str| {
        all.iter()
            .find(|s| s["id"] == id)
            .unwrap_or_else(|| panic!("no step {id}"))["value"]
            .as_f64()
            .expect("value")
    };
    let p = |path: &str| f(&v, path);
    assert_close(
        val("train.predicted.bubble"),
        p("predicted.time_breakdown_s.bubble"),
        1e-12,
        "bubble",
    );
    assert_eq!(val("train.predicted.ep_dualpipe"), 0.0);
    assert_close(
        val("train.predicted.expert_gemm"),
        p("predicted.schedule.expert_gemm.efficiency"),
        1e-12,
        "expert GEMM efficiency",
    );
    // blockwise casts of one layer: 4 + 1/16 bytes per cast element
    assert_close(
        val("train.predicted.fp8_recipe"),
        p("predicted.schedule.fp8.cast_s_per_layer"),
        1e-12,
        "cast time",
    );
    assert_close(
        p("predicted.schedule.fp8.cast_bytes_per_layer"),
        p("predicted.inventory.cast_bytes") / 4.0 * (4.0 + 1.0 / 16.0),
        1e-12,
        "cast bytes",
    );
    // the roofline's bubble, (16/2 − 1)·2/3 micro-batch times of 120 + 14/3
    let b = 14.0 / 3.0 / (120.0 + 14.0 / 3.0);
    let t_math = p("t_math_s");
    assert_close(
        val("train.bubble"),
        t_math * b / (1.0 - b),
        1e-12,
        "roofline bubble",
    );
}
